"""What several commands share: the --db option, opening the DB for reading, errors."""

from __future__ import annotations

import sys

import click
from rich.console import Console
from rich.markup import escape

from firsttoken.addon.store.db import default_db_path, open_db


def db_option(fn):
    return click.option(
        "--db", "db_path", type=click.Path(dir_okay=False), default=None,
        help="SQLite file (default: per-user data dir; $FIRSTTOKEN_DB overrides).",
    )(fn)


def resolve_db(db_path: str | None) -> str:
    return str(db_path or default_db_path())


def reader(db_path: str | None):
    path = resolve_db(db_path)
    try:
        return open_db(path, write=False)
    except FileNotFoundError as e:
        fail(str(e))


def console(stderr: bool = False) -> Console:
    return Console(stderr=stderr, highlight=False, soft_wrap=False)


def fail(message: str, code: int = 1):
    Console(stderr=True, highlight=False).print(f"[bold red]error:[/] {escape(message)}")
    sys.exit(code)
