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


#: the database and its -wal/-shm hold every prompt and answer with --save-bodies: owner only
FILE_MODE = 0o600
DIR_MODE = 0o700
SIDE_FILES = ("", "-wal", "-shm", "-journal")


def private_dir(d: Path) -> None:
    """Create ``d`` (and parents) as 0700. An existing directory is tightened only when it is
    firsttoken's own default data directory (never a shared one like /tmp given by --db)."""
    if not d.exists():
        old = os.umask(0o077)
        try:
            d.mkdir(parents=True, exist_ok=True)
        finally:
            os.umask(old)
        os.chmod(d, DIR_MODE)
    elif d == default_db_path().parent and os.name != "nt":
        try:
            if d.stat().st_mode & 0o077:
                os.chmod(d, DIR_MODE)
        except OSError:
            pass


def private_files(p: Path) -> None:
    """The database file (created empty if missing) and its side files: mode 0600, whatever the umask.
    SQLite creates -wal and -shm with the database file's mode, so they follow it."""
    if os.name == "nt":
        return
    if not p.exists():
        os.close(os.open(p, os.O_CREAT | os.O_WRONLY, FILE_MODE))
    for suffix in SIDE_FILES:
        f = Path(str(p) + suffix)
        try:
            st = f.stat()
            if st.st_mode & 0o077 and st.st_uid == os.getuid():
                os.chmod(f, FILE_MODE)
        except OSError:
            pass


def open_db(path: str | os.PathLike, *, write: bool = True) -> sqlite_utils.Database:
    """Open (and for writers create + migrate) the database. Readers get their own connection."""
    p = Path(path).expanduser()
    if write:
        private_dir(p.parent)
        if str(p) != ":memory:":
            private_files(p)
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


def stale_in_flight(db: sqlite_utils.Database, own_pid: int, limit: int = 10_000) -> list[dict]:
    """Rows still ``in_flight`` whose proxy process is gone (killed, crashed, power loss).

    Rows of a live proxy (another process on the same database) and of this process are
    left alone; rows without ``proxy_pid`` predate it and belong to no running proxy."""
    cur = db.execute("SELECT * FROM requests WHERE state = 'in_flight' LIMIT ?", [limit])
    cols = [d[0] for d in cur.description]
    out = []
    for values in cur.fetchall():
        row = dict(zip(cols, values))
        pid = row.get("proxy_pid")
        if pid == own_pid or (isinstance(pid, int) and pid_alive(pid)):
            continue
        out.append(row)
    return out


def pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    if os.name == "nt":
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
