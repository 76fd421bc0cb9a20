"""`firsttoken proxy`: mitmproxy embedded, the command and its banner, and the registry of running proxies. See docs/cli.md."""
