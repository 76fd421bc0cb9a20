"""Opening the database: where it lives, WAL mode, migrations.

Writers (the proxy's writer thread, ``demo``, ``baseline save``) create and migrate it;
readers (``logs``, ``show``, ``stats``, ``export``, ``report``, ``live``...) open it read-only
and never create, migrate or write it: a file that is not firsttoken's is left untouched.
"""

from __future__ import annotations

import datetime as _dt
import os
import sqlite3
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported where used: `firsttoken run` reads this module before its child starts
    import sqlite_utils


class StoreError(Exception):
    """A database a command cannot use; the message says what happened and what to do."""


def default_db_path() -> Path:
    env = os.environ.get("FIRSTTOKEN_DB")
    if env:
        return Path(env).expanduser()
    import platformdirs

    return Path(platformdirs.user_data_dir("firsttoken", appauthor=False)) / "firsttoken.db"


def missing_message(p: Path) -> str:
    return (f"no database at {p}; run `firsttoken proxy` or `firsttoken demo` first "
            "(or point --db / FIRSTTOKEN_DB at the file the proxy writes)")


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
    """Open the database: writers create + migrate it, readers get ``open_reader``.

    A writer takes a new path, an empty file or firsttoken's own database; any other file is
    refused before anything changes (no WAL switch, no chmod, no tables)."""
    if not write:
        return open_reader(path)
    p = Path(path).expanduser()
    if str(p) != ":memory:":
        claimable(p)
    private_dir(p.parent)
    if str(p) != ":memory:":
        private_files(p)
    conn = sqlite3.connect(str(p), check_same_thread=False, timeout=10)
    import sqlite_utils

    from firsttoken.addon.store.migrations import migrate

    db = sqlite_utils.Database(conn)
    try:
        db.execute("PRAGMA busy_timeout = 10000")
        db.enable_wal()
        db.execute("PRAGMA synchronous = NORMAL")
        migrate(db)
    except sqlite3.DatabaseError as e:
        conn.close()
        raise StoreError(not_ours_message(p, e)) from None
    return db


def not_ours_message(p: Path, e: Exception) -> str:
    return (f"{p} is not a SQLite database ({e}); firsttoken left it untouched. "
            "Point --db (or FIRSTTOKEN_DB) at the file `firsttoken proxy` writes, or at a new path")


#: the tables every firsttoken database has: the first migration's, and the list of migrations applied
MARK_TABLES = frozenset({"requests", "_migrations"})


def owner(conn: sqlite3.Connection) -> tuple[str, list[str]]:
    """Whose database this is, by its tables: ``"firsttoken"`` (firsttoken's schema is there),
    ``"empty"`` (no tables yet: a writer may make it firsttoken's) or ``"other"`` (someone else's:
    never touched). The one rule readers and writers ask; also returns the tables' names.
    Raises sqlite3.DatabaseError for a file that is not SQLite."""
    tables = sorted(r[0] for r in conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite^_%' ESCAPE '^'"))
    if MARK_TABLES <= set(tables):
        return "firsttoken", tables
    if not tables:
        return "empty", tables
    if tables == ["_migrations"] and conn.execute("SELECT count(*) FROM _migrations").fetchone()[0] == 0:
        return "empty", tables  # firsttoken's first migration was interrupted (it creates this table first)
    return "other", tables


def foreign_message(p: Path, tables: list[str], *, writing: bool) -> str:
    """What a command says of a SQLite file that is not firsttoken's (``owner`` said "other")."""
    has = ", ".join(tables[:6]) + (", …" if len(tables) > 6 else "")
    head = f"{p} is a SQLite database that is not firsttoken's (tables: {has}); firsttoken left it untouched"
    if writing:
        return head + ": pass another --db path (a new file is fine), or the file `firsttoken proxy` writes"
    return (head + ". Point --db at the file `firsttoken proxy` writes, "
            "or run `firsttoken proxy --db NEW.db` / `firsttoken demo --db NEW.db` to make one")


def _inspect(p: Path) -> tuple[sqlite3.Connection, str, list[str]]:
    """A read-only connection to an existing file and ``owner``'s verdict on it (StoreError
    for a folder, a file that is not SQLite, or one that cannot be read)."""
    if p.is_dir():
        raise StoreError(f"{p} is a folder, not a database file: point --db at the file `firsttoken proxy` writes")
    try:
        conn = sqlite3.connect(f"{p.resolve().as_uri()}?mode=ro", uri=True, check_same_thread=False, timeout=10)
    except sqlite3.Error as e:
        raise StoreError(f"firsttoken cannot open {p} ({e}); it left it untouched") from None
    try:
        conn.execute("PRAGMA busy_timeout = 10000")
        kind, tables = owner(conn)
    except sqlite3.DatabaseError as e:
        conn.close()
        if getattr(e, "sqlite_errorname", "") in ("SQLITE_NOTADB", "SQLITE_CORRUPT"):
            raise StoreError(not_ours_message(p, e)) from None
        raise StoreError(f"firsttoken cannot read {p} ({e}); it left it untouched") from None
    return conn, kind, tables


def claimable(p: Path) -> None:
    """Raise StoreError unless a writer may make ``p`` its database: a new path, an empty file,
    an empty SQLite database or firsttoken's own. Looks without changing anything."""
    try:
        if not p.exists():
            return
        wal = Path(str(p) + "-wal")
        if p.is_file() and p.stat().st_size == 0 and not (wal.exists() and wal.stat().st_size):
            return
    except OSError:
        return  # (an unreadable parent: opening it fails next, with its own error)
    conn, kind, tables = _inspect(p)
    conn.close()
    if kind == "other":
        raise StoreError(foreign_message(p, tables, writing=True))


def connect_reader(path: str | os.PathLike) -> sqlite3.Connection:
    """A read-only connection to a firsttoken database (checked). Raises FileNotFoundError
    for a missing file and StoreError for a file that is not a firsttoken database."""
    p = Path(path).expanduser()
    if not p.exists():
        raise FileNotFoundError(missing_message(p))
    conn, kind, tables = _inspect(p)
    if kind != "firsttoken":
        conn.close()
        if kind == "empty":
            raise StoreError(f"{p} is an empty SQLite database: nothing recorded yet (firsttoken left it untouched). "
                             f"`firsttoken proxy --db {p}` records into it")
        raise StoreError(foreign_message(p, tables, writing=False))
    return conn


def open_reader(path: str | os.PathLike) -> sqlite_utils.Database:
    """A read-only handle: never creates, migrates or writes the file (see ``connect_reader``)."""
    import sqlite_utils

    return sqlite_utils.Database(connect_reader(path))


def schema_current(db: sqlite_utils.Database | sqlite3.Connection) -> bool:
    """Whether every migration of this version has been applied (older databases are read as they are)."""
    from firsttoken.addon.store.migrations import MIGRATIONS

    conn = db if isinstance(db, sqlite3.Connection) else db.conn
    try:
        done = {r[0] for r in conn.execute("SELECT name FROM _migrations")}
    except sqlite3.DatabaseError:
        return False
    return all(fn.__name__ in done for fn in MIGRATIONS)


def stale_in_flight(db: sqlite_utils.Database, own_pid: int, limit: int = 10_000) -> list[dict]:
    """Rows still ``in_flight`` whose proxy process is gone (killed, crashed, power loss).

    A row belongs to a running proxy only if a process with its ``proxy_pid`` runs (not a
    zombie) and started before the row (``owner_alive``): a process started later only reuses
    the id (a container's PID 1 after a restart, this very process included). Rows without
    ``proxy_pid`` predate it and belong to no running proxy."""
    cur = db.execute("SELECT * FROM requests WHERE state = 'in_flight' LIMIT ?", [limit])
    cols = [d[0] for d in cur.description]
    boot = boot_time()
    procs: dict[int, tuple[str, float] | None] = {}
    out = []
    for values in cur.fetchall():
        row = dict(zip(cols, values))
        pid = row.get("proxy_pid")
        if isinstance(pid, int) and not isinstance(pid, bool) and pid > 0:
            if pid not in procs:
                procs[pid] = proc_stat(pid, boot)
            if owner_alive(pid, row.get("started_at"), own_pid, procs[pid]):
                continue
        out.append(row)
    return out


def owner_alive(pid: int, started_at: object, own_pid: int, proc: tuple[str, float] | None) -> bool:
    """Whether the process ``pid`` (``proc``: its ``proc_stat``) can be the proxy that began a
    row at ``started_at`` (ISO time): it runs, is not a zombie, and started before the row.
    Without /proc (not Linux), the old answer: this process, or any process with that id."""
    if proc is None:
        return pid == own_pid or pid_alive(pid)
    state, started = proc
    if state in ("Z", "X"):  # killed, not reaped yet: dead (kill(pid, 0) still says alive)
        return False
    at = _timestamp(started_at)
    return at is None or started < at


def _timestamp(iso: object) -> float | None:
    if not isinstance(iso, str):
        return None
    try:
        t = _dt.datetime.fromisoformat(iso)
    except ValueError:
        return None
    return (t if t.tzinfo else t.replace(tzinfo=_dt.UTC)).timestamp()


def boot_time() -> float | None:
    """When this machine booted, on the wall clock (Linux; else None): /proc/stat's ``btime``
    (whole seconds), made exact to 1/100 s by /proc/uptime when the two agree (a container
    whose /proc/uptime is virtualised (lxcfs) keeps btime, given to ±0.5 s)."""
    try:
        with open("/proc/stat", "rb") as f:
            btime = next(int(ln.split()[1]) for ln in f if ln.startswith(b"btime "))
    except (OSError, StopIteration, ValueError, IndexError):
        return None
    try:
        with open("/proc/uptime", "rb") as f:
            exact = time.time() - float(f.read().split()[0])
        if btime - 0.05 <= exact < btime + 1.05:
            return exact
    except (OSError, ValueError, IndexError):
        pass
    return btime + 0.5


def proc_stat(pid: int, boot: float | None = None) -> tuple[str, float] | None:
    """A process's state letter (``R``, ``S``, ``Z``...) and when it started on the wall clock,
    from /proc/PID/stat (fields 3 and 22, clock ticks after boot); None without /proc or with
    no such process."""
    boot = boot_time() if boot is None else boot
    if boot is None:
        return None
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
        rest = stat[stat.rindex(b")") + 2:].split()  # the name (field 2) may hold spaces and ')'
        return rest[0].decode("ascii", "replace"), boot + int(rest[19]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def pid_alive(pid: object) -> bool:
    """Whether a process with this id runs (a proxy's own state entry, an in-flight row's owner):
    a zombie (killed, not yet reaped by its parent) does not. On Windows there is no cheap
    check: True (the port test in doctor tells the rest)."""
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return False
    if os.name == "nt":
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    proc = proc_stat(pid)
    return proc is None or proc[0] not in ("Z", "X")
