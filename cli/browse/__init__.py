"""`firsttoken browse`: the database in Datasette, read-only, with firsttoken's own metadata."""

from firsttoken.cli.browse.metadata import READ_FIRST, build_metadata

__all__ = ["READ_FIRST", "build_metadata"]
