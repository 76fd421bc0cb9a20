"""Loading many request rows at once (`firsttoken bench-db`'s synthetic month of traffic).

``BulkLoad`` inserts in big transactions; on an empty database it drops the secondary indexes
first and rebuilds each in ``finish()`` (one sort each), so the database ends up exactly as if the
proxy had written every row. See docs/stats.md ("firsttoken bench-db").
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import sqlite_utils

from firsttoken.addon.store.migrations import FINDING_COLUMNS


class BulkLoad:
    """Rows into ``requests`` (and their findings) in one transaction per ``add``; ``finish()``
    puts back what was taken off and checkpoints the WAL. Durability is off while it loads (a
    crash leaves a half-built database to delete, never a half-written row of a real one)."""

    def __init__(self, db: sqlite_utils.Database, columns: Sequence[str]) -> None:
        self.db = db
        self.conn = db.conn
        self.conn.execute("PRAGMA synchronous = OFF")
        self.conn.execute("PRAGMA cache_size = -1000000")
        empty = self.conn.execute("SELECT count(*) FROM requests").fetchone()[0] == 0
        #: (name, CREATE statement) of the indexes taken off, to rebuild
        self.dropped: list[tuple[str, str]] = self.conn.execute(
            "SELECT name, sql FROM sqlite_master WHERE type = 'index' "
            "AND sql IS NOT NULL AND tbl_name IN ('requests', 'findings')").fetchall() if empty else []
        for name, _ in self.dropped:
            self.conn.execute(f'DROP INDEX "{name}"')
        self._insert = f"INSERT INTO requests ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})"

    def add(self, rows: Iterable[Sequence[Any]], findings: Iterable[Sequence[Any]] = ()) -> None:
        """Rows (values in ``columns`` order) and their findings (values in ``FINDING_COLUMNS`` order)."""
        with self.conn:
            self.conn.executemany(self._insert, rows)
            self.conn.executemany(f"INSERT OR IGNORE INTO findings ({', '.join(FINDING_COLUMNS)}) "
                                  f"VALUES ({', '.join('?' * len(FINDING_COLUMNS))})", findings)

    def finish(self) -> None:
        with self.conn:
            for _, create in self.dropped:
                self.conn.execute(create)
        self.conn.execute("PRAGMA synchronous = NORMAL")
        self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def request_count(db: sqlite_utils.Database) -> int:
    """Every row of ``requests``, in flight or done."""
    return db.execute("SELECT count(*) FROM requests").fetchone()[0]


def any_model(db: sqlite_utils.Database) -> str | None:
    """A model some request named (the first found), or None."""
    row = db.execute("SELECT model FROM requests WHERE model IS NOT NULL LIMIT 1").fetchone()
    return row[0] if row else None
