"""`firsttoken run -- CMD`: one command's LLM requests recorded with nothing added to it. See docs/run.md."""
