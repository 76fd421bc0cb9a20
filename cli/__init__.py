"""firsttoken's commands: what a person types. See docs/cli.md and docs/architecture.md."""
