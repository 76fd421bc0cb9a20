"""One adapter per client of `firsttoken run` (see base.py for the interface, registry.py for the list)."""
