"""`firsttoken report --html`: the command and its self-contained HTML page. See docs/stats.md."""
