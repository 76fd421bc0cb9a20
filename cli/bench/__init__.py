"""Benchmarks: what the proxy, the live view, `firsttoken run` and the queries cost. See docs/performance.md."""
