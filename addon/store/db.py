"""Opening the database: where it lives, WAL mode, migrations."""

from __future__ import annotations

import os
from pathlib import Path

import sqlite_utils

from firsttoken.addon.store.migrations import migrate


def default_db_path() -> Path:
    env = os.environ.get("FIRSTTOKEN_DB")
    if env:
        return Path(env).expanduser()
    import platformdirs

    return Path(platformdirs.user_data_dir("firsttoken", appauthor=False)) / "firsttoken.db"


def open_db(path: str | os.PathLike, *, write: bool = True) -> sqlite_utils.Database:
    """Open (and for writers create + migrate) the database. Readers get their own connection."""
    p = Path(path).expanduser()
    if write:
        p.parent.mkdir(parents=True, exist_ok=True)
    elif not p.exists():
        raise FileNotFoundError(
            f"no firsttoken database at {p}: run `firsttoken proxy` (or `firsttoken demo`) first, "
            "or point --db / FIRSTTOKEN_DB at the right file"
        )
    import sqlite3

    conn = sqlite3.connect(str(p), check_same_thread=False, timeout=10)
    db = sqlite_utils.Database(conn)
    db.execute("PRAGMA busy_timeout = 10000")
    db.enable_wal()
    db.execute("PRAGMA synchronous = NORMAL")
    migrate(db)  # a reader of an older database brings it up to date too
    return db
