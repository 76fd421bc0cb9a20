"""`firsttoken env CLIENT`: the target proxy, the per-client plans, and their rendering. See docs/clients.md."""
