"""The live view: snapshots, pure rendering, and the refresh thread. See docs/cli.md."""
