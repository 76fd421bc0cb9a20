"""`firsttoken doctor`: local checks of the proxy variables, keys, base URLs, upstreams and installation. See docs/clients.md."""
