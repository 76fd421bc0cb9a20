"""All the SQL: the database file, its migrations, the one writer, and the named queries commands read through.

See docs/architecture.md (``store/``) and docs/record.md.
"""
