"""Retention: delete the requests recorded before a time (`firsttoken prune --before 30d`).

Rows go in batches (short write transactions: a running proxy's writer waits at most one batch),
their findings with them. Requests still in flight are never deleted: a running proxy owns them.
"""

from __future__ import annotations

from typing import Any

import sqlite_utils

#: what prune may delete: finished (or interrupted) rows started before the cutoff
_OLD = "started_at < ? AND state IS NOT 'in_flight'"


def count_before(db: sqlite_utils.Database, cutoff_iso: str) -> dict[str, Any]:
    """What `prune` would delete, and what it would keep: counts and the time span of the old rows."""
    n, first, last = db.execute(f"SELECT count(*), min(started_at), max(started_at) FROM requests WHERE {_OLD}",
                                [cutoff_iso]).fetchone()
    total = db.execute("SELECT count(*) FROM requests").fetchone()[0]
    findings = db.execute(f"SELECT count(*) FROM findings WHERE request_id IN (SELECT id FROM requests WHERE {_OLD})",
                          [cutoff_iso]).fetchone()[0]
    return {"requests": n, "findings": findings, "first": first, "last": last, "kept": total - n}


def prune_before(db: sqlite_utils.Database, cutoff_iso: str, batch: int = 2000) -> int:
    """Delete the rows ``count_before`` counts (and their findings); returns how many requests."""
    deleted = 0
    conn = db.conn
    while True:
        with conn:  # one transaction per batch
            ids = [r[0] for r in conn.execute(f"SELECT id FROM requests WHERE {_OLD} LIMIT ?", [cutoff_iso, batch])]
            if not ids:
                break
            marks = ",".join("?" * len(ids))
            conn.execute(f"DELETE FROM findings WHERE request_id IN ({marks})", ids)
            conn.execute(f"DELETE FROM requests WHERE id IN ({marks})", ids)
            deleted += len(ids)
    return deleted


def vacuum(db: sqlite_utils.Database) -> None:
    """Give the freed pages back to the file system (rewrites the file: takes a while on a big database)."""
    db.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.conn.execute("VACUUM")
