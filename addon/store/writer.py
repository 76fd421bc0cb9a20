"""The one thread that writes to SQLite.

Everything else enqueues rows (``put``); the writer drains the queue in batches, one
transaction per batch, so a burst of streams costs a few commits, not hundreds. Rows are
upserts keyed by ``id``: a partial dict updates only the columns it names, which is how an
in-flight row is created first and completed later.
"""

from __future__ import annotations

import json
import logging
import queue
import sqlite3
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from firsttoken.addon.store.db import open_db

log = logging.getLogger("firsttoken")

_STOP = object()
#: how long the writer gathers rows before a transaction
GATHER_S = 0.02
#: a batch meeting "database is locked" is retried once a second for this long before giving up
LOCKED_RETRIES = 300


class Writer:
    def __init__(self, path: str, batch: int = 500) -> None:
        self.path = str(path)
        self.batch = batch
        self.q: queue.Queue[Any] = queue.Queue()
        self._cols: set[str] | None = None
        self.written = 0
        self.failed = 0
        self.last_error: str | None = None
        self.db = open_db(self.path)  # fail early (bad path, read-only dir) in the caller's thread
        self._thread = threading.Thread(target=self._run, name="firsttoken-writer", daemon=True)
        self._thread.start()

    def put(self, row: dict[str, Any]) -> None:
        self.q.put(row)

    def read(self, query: Callable[[Any], Any], timeout: float = 30.0) -> Any:
        """Run ``query(db)`` on the writer thread, between batches, and return its result: the
        one way other threads of the proxy read the database (it raises what the query raised)."""
        fut: Future = Future()
        self.q.put((query, fut))
        return fut.result(timeout)

    def flush(self, timeout: float = 10.0) -> None:
        """Wait until every row put so far is committed."""
        done = threading.Event()
        self.q.put(done)
        done.wait(timeout)

    def close(self, timeout: float = 10.0) -> None:
        if self._thread.is_alive():
            self.q.put(_STOP)
            self._thread.join(timeout)

    # -- thread ----------------------------------------------------------------------
    def _run(self) -> None:
        db = self.db
        stop = False
        while not stop:
            items = [self.q.get()]
            # Gather for a moment before writing: one transaction for a burst, and the write
            # lands after the request that caused it has been forwarded, not in its way.
            deadline = time.monotonic() + GATHER_S
            while len(items) < self.batch and not isinstance(items[-1], threading.Event) and items[-1] is not _STOP:
                left = deadline - time.monotonic()
                try:
                    items.append(self.q.get(timeout=left) if left > 0 else self.q.get_nowait())
                except queue.Empty:
                    break
            rows, events = [], []
            for it in items:
                if it is _STOP:
                    stop = True
                elif isinstance(it, threading.Event):
                    events.append(it)
                elif isinstance(it, tuple):  # a read(): after the rows queued before it
                    if rows:
                        self._write(db, rows)
                        rows = []
                    self._read(db, *it)
                else:
                    rows.append(it)
            if rows:
                self._write(db, rows)
            for e in events:
                e.set()
        db.conn.close()

    @staticmethod
    def _read(db, query: Callable[[Any], Any], fut: Future) -> None:
        try:
            fut.set_result(query(db))
        except Exception as e:
            fut.set_exception(e)

    def _write(self, db, rows: list[dict[str, Any]]) -> None:
        for attempt in range(LOCKED_RETRIES + 1):
            try:
                with db.conn:
                    self._apply(db, rows)
                self.written += len(rows)
                return
            except sqlite3.OperationalError as e:
                if "locked" not in str(e) or attempt == LOCKED_RETRIES:
                    break
                # another process holds a long write lock (a reader's VACUUM, a bulk import):
                # wait for it rather than drop rows
                log.warning("firsttoken: database is locked; retrying in 1 s (%d rows waiting)", len(rows))
                time.sleep(1.0)
            except Exception:
                break
        # one bad row must not lose the batch: retry one by one
        log.warning("firsttoken: batch write failed; retrying rows one at a time")
        for r in rows:
            try:
                with db.conn:
                    self._apply(db, [r])
                self.written += 1
            except Exception as e2:
                self.failed += 1
                self.last_error = f"{type(e2).__name__}: {e2}"
                log.error("firsttoken: could not store request %s: %s", r.get("id"), e2)

    def _apply(self, db, rows: list[dict[str, Any]]) -> None:
        conn = db.conn
        for row in rows:
            cols = list(row)
            unknown = [c for c in cols if c not in self._columns(db)]
            if unknown:
                raise ValueError(f"no such column(s) in requests: {', '.join(unknown)}")
            # An upsert naming only the given columns: an in-flight row is created first and
            # completed later, column by column. (Plain SQL: sqlite-utils' upsert re-reads the
            # schema on every call, ~1 ms a row on the writer thread.)
            sql = _UPSERT.get(tuple(cols))
            if sql is None:
                sets = ", ".join(f"[{c}] = excluded.[{c}]" for c in cols if c != "id") or "id = id"
                sql = (f"INSERT INTO requests ({', '.join(f'[{c}]' for c in cols)}) "
                       f"VALUES ({', '.join('?' for _ in cols)}) ON CONFLICT(id) DO UPDATE SET {sets}")
                _UPSERT[tuple(cols)] = sql
            conn.execute(sql, [_value(row[c]) for c in cols])
            findings = row.get("findings")
            if findings is not None:
                conn.execute("DELETE FROM findings WHERE request_id = ?", [row["id"]])
                conn.executemany(
                    "INSERT OR IGNORE INTO findings (request_id, code, severity) VALUES (?, ?, ?)",
                    [(row["id"], f["code"], f["severity"]) for f in findings],
                )

    def _columns(self, db) -> set[str]:
        if self._cols is None:
            self._cols = {r[1] for r in db.execute("PRAGMA table_info(requests)").fetchall()}
        return self._cols


_UPSERT: dict[tuple[str, ...], str] = {}


def _value(v: Any) -> Any:
    if isinstance(v, (list, dict)):
        return json.dumps(v, ensure_ascii=False, default=str)
    if isinstance(v, bool):
        return int(v)
    return v
