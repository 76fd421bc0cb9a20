"""The one thread that writes to SQLite: batched upserts keyed by ``id``, partial rows merged in
memory, rows kept and retried while the database cannot be written.

How it batches, what a crash can lose, what happens on a full disk: docs/architecture.md
("The writer thread") and docs/faults.md.
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

import orjson

from firsttoken.addon.store.db import open_db
from firsttoken.addon.store.migrations import FINDING_COLUMNS

log = logging.getLogger("firsttoken")

_STOP = object()
#: how long the writer gathers rows before a transaction ...
GATHER_S = 0.02
#: ... and while busy (the last batch had BUSY_ROWS rows or more): under a burst of streams,
#: fewer and larger transactions cost less CPU per row (measured at 200 streams: ~50 us a
#: request less), and the proxy is saturated anyway, so 100 ms more before a row is visible
#: to other processes costs nobody
GATHER_BUSY_S = 0.1
BUSY_ROWS = 50
#: how long the partial rows of a request in flight may wait in memory for more of its rows
#: (merged into one upsert). 0.5 s: `firsttoken live --db` reads every 0.5 s, so a request shows
#: there at most one read later than if it were written at once; a request shorter than this
#: costs one upsert, a 1 s stream two (six rows: ~4 upserts with GATHER_S alone); a kill -9
#: leaves no row for the requests started in the last 0.5 s (docs/faults.md).
INFLIGHT_S = 0.5
#: a batch meeting "database is locked" is retried once a second for this long before giving up
LOCKED_RETRIES = 300
#: while writes fail: how often to retry, and how much to keep in memory meanwhile
RETRY_S = 1.0
PENDING_MAX_ROWS = 20_000
PENDING_MAX_BYTES = 128 * 2**20
#: errors of the storage (not of one row): keep the rows and retry later
_STORAGE_WORDS = ("disk", "full", "i/o", "readonly", "read-only", "unable to open", "no such table",
                  "file is not a database", "malformed", "locked", "busy", "too big", "out of memory")


class Writer:
    def __init__(self, path: str, batch: int = 500) -> None:
        self.path = str(path)
        self.batch = batch
        # (a SimpleQueue: put() is ~10x cheaper than Queue's, and most puts are on the event loop)
        self.q: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._cols: set[str] | None = None
        self.written = 0
        self.failed = 0
        self.last_error: str | None = None
        self.failing_since: float | None = None  # wall time of the first failed write of the current outage
        self.dropped = 0  # rows dropped because the pending buffer was full
        self.pending: dict[str, dict[str, Any]] = {}  # id -> merged unwritten row (oldest first)
        self._pending_bytes = 0
        self.on_health: list[Any] = []  # callables(health dict), called when writes start failing / recover
        self._hurry = threading.Event()  # set by flush/read/close: stop gathering, write now
        self._checked: set[tuple[str, ...]] = set()  # column sets known to exist
        #: id -> [time due, merged partial row, copied?] of requests in flight, oldest first
        self._waiting: dict[Any, list[Any]] = {}
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
        self._hurry.set()
        return fut.result(timeout)

    def health(self) -> dict[str, Any]:
        """``ok``; when failing: ``error``, ``since`` (epoch s), ``pending`` rows waiting in memory,
        ``dropped`` rows lost because that buffer was full; ``written`` rows so far."""
        return {"ok": self.failing_since is None, "error": self.last_error if self.failing_since else None,
                "since": self.failing_since, "pending": len(self.pending), "dropped": self.dropped,
                "written": self.written, "path": self.path}

    def flush(self, timeout: float = 10.0) -> None:
        """Wait until every row put so far is committed (partial rows waiting included)."""
        done = threading.Event()
        self.q.put(done)
        self._hurry.set()
        done.wait(timeout)

    def close(self, timeout: float = 10.0) -> None:
        if self._thread.is_alive():
            self.q.put(_STOP)
            self._hurry.set()
            self._thread.join(timeout)

    # -- thread ----------------------------------------------------------------------
    def _run(self) -> None:
        db = self.db
        stop = False
        self._gather = GATHER_S
        while not stop:
            try:
                items = [self.q.get(timeout=self._timeout())]
            except queue.Empty:  # nothing new: write the partial rows whose time came, retry the pending
                self._write(db, self._due([], time.monotonic() + GATHER_S))
                continue
            # Gather for a moment before writing: one transaction for a burst, and the write
            # lands after the request that caused it has been forwarded, not in its way. The
            # thread sleeps meanwhile rather than waking for every row put (each wake-up takes
            # the GIL from the event loop); flush(), read() and close() cut the sleep short.
            if not isinstance(items[0], _CONTROL) and self.q.qsize() < self.batch:
                self._hurry.wait(self._gather)
            self._hurry.clear()
            while len(items) < self.batch and not isinstance(items[-1], threading.Event) and items[-1] is not _STOP:
                try:
                    items.append(self.q.get_nowait())
                except queue.Empty:
                    break
            self._gather = GATHER_BUSY_S if len(items) >= BUSY_ROWS else GATHER_S
            now = time.monotonic()
            rows: list[dict[str, Any]] = []
            events: list[threading.Event] = []
            final: set[Any] = set()  # ids whose final row is in this batch
            for it in items:
                if it is _STOP:
                    stop = True
                elif isinstance(it, threading.Event):
                    events.append(it)
                elif isinstance(it, tuple):  # a read(): after every row queued before it
                    self._write(db, self._due(rows, None))
                    rows, final = [], set()
                    self._read(db, *it)
                else:
                    self._take(it, rows, final, now)
            # flush() and close() (always last in a batch) write every row put before them
            rows = self._due(rows, None if events or stop else now + GATHER_S)
            if rows or self.pending:
                self._write(db, rows)
            for e in events:
                e.set()
        if self.pending:
            log.error("firsttoken: %d request(s) could not be written to %s and are lost at exit: %s",
                      len(self.pending), self.path, self.last_error)
        db.conn.close()

    def _take(self, row: dict[str, Any], rows: list[dict[str, Any]], final: set[Any], now: float) -> None:
        """One row from the queue. A final row (``state='done'``) goes into this batch's
        ``rows``, with what its request has waiting; a partial row waits, merged into what its
        request has waiting (later values win), unless its request's final row is already in
        this batch: then it goes after that one."""
        rid = row.get("id")
        if row.get("state") == "done":
            w = self._waiting.pop(rid, None)
            if w is not None and not w[1].keys() <= row.keys():
                row = {**row, **{k: v for k, v in w[1].items() if k not in row}}
            # (else the final row names every column the waiting one does: that one is moot)
            rows.append(row)
            final.add(rid)
        elif rid in final:
            rows.append(row)
        else:
            w = self._waiting.get(rid)
            if w is None:
                self._waiting[rid] = [now + INFLIGHT_S, row, False]
            else:
                if not w[2]:  # merged into a copy: the caller's dicts stay as they were
                    w[1], w[2] = dict(w[1]), True
                w[1].update(row)

    def _timeout(self) -> float | None:
        """How long the thread may sleep for new rows: until the first waiting partial row is
        due, or the next retry of the rows kept since a failed write (else until a row comes)."""
        t = RETRY_S if self.pending else None
        if self._waiting:
            due = max(0.0, next(iter(self._waiting.values()))[0] - time.monotonic())
            t = due if t is None else min(t, due)
        return t

    def _due(self, rows: list[dict[str, Any]], until: float | None) -> list[dict[str, Any]]:
        """``rows`` and then the waiting partial rows due by ``until`` (None: all of them).
        Due by a little later than now (``GATHER_S``) so that one wake-up takes rows due together."""
        waiting = self._waiting
        if not waiting:
            return rows
        if until is None:
            rows.extend(w[1] for w in waiting.values())
            waiting.clear()
            return rows
        ids = []
        for rid, w in waiting.items():  # oldest first: stop at the first one not yet due
            if w[0] > until:
                break
            ids.append(rid)
        rows.extend(waiting.pop(rid)[1] for rid in ids)
        return rows

    @staticmethod
    def _read(db, query: Callable[[Any], Any], fut: Future) -> None:
        try:
            fut.set_result(query(db))
        except Exception as e:
            fut.set_exception(e)

    def _write(self, db, rows: list[dict[str, Any]]) -> None:
        if self.pending:  # rows waiting since an earlier failure go first, in order
            rows = self._take_pending() + rows
        if not rows:
            return
        err: Exception | None = None
        for attempt in range(LOCKED_RETRIES + 1):
            try:
                with db.conn:
                    self._apply(db, rows)
                self.written += len(rows)
                self._healthy()
                return
            except sqlite3.OperationalError as e:
                err = e
                if "locked" not in str(e) or attempt == LOCKED_RETRIES:
                    break
                # another process holds a long write lock (a reader's VACUUM, a bulk import):
                # wait for it rather than drop rows
                log.warning("firsttoken: database is locked; retrying in 1 s (%d rows waiting)", len(rows))
                time.sleep(1.0)
            except Exception as e:
                err = e
                break
        if _storage_error(err):
            self._keep(rows, err)  # the disk, not the rows: keep them all, retry later
            return
        # one bad row must not lose the batch: retry one by one
        log.warning("firsttoken: batch write failed (%s); retrying rows one at a time", err)
        for i, r in enumerate(rows):
            try:
                try:
                    with db.conn:
                        self._apply(db, [r])
                except UnicodeEncodeError:
                    # text that is not UTF-8 (a raw byte in a header or the path arrives from
                    # mitmproxy as a lone surrogate): stored with U+FFFD for it, never dropped
                    with db.conn:
                        self._apply(db, [_encodable(r)])
                self.written += 1
            except Exception as e2:
                if _storage_error(e2):
                    self._keep(rows[i:], e2)
                    return
                self.failed += 1
                self.last_error = f"{type(e2).__name__}: {e2}"
                log.error("firsttoken: could not store request %s: %s", r.get("id"), e2)
        self._healthy()

    # -- unwritten rows ----------------------------------------------------------------
    def _keep(self, rows: list[dict[str, Any]], err: Exception | None) -> None:
        first = self.failing_since is None
        self.last_error = f"{type(err).__name__}: {err}" if err else "unknown error"
        for r in rows:
            rid = r.get("id")
            old = self.pending.pop(rid, None)
            merged = {**old, **r} if old else dict(r)
            if old:
                self._pending_bytes -= _size(old)
            self.pending[rid] = merged  # (re)inserted last: the newest update
            self._pending_bytes += _size(merged)
        while self.pending and (len(self.pending) > PENDING_MAX_ROWS or self._pending_bytes > PENDING_MAX_BYTES):
            gone = self.pending.pop(next(iter(self.pending)))
            self._pending_bytes -= _size(gone)
            self.dropped += 1
        if first:
            self.failing_since = time.time()
            log.error("firsttoken: cannot write to the database %s (%s): keeping %d request(s) in memory and "
                      "retrying every %.0f s", self.path, self.last_error, len(self.pending), RETRY_S)
            self._tell()

    def _take_pending(self) -> list[dict[str, Any]]:
        rows = list(self.pending.values())
        self.pending = {}
        self._pending_bytes = 0
        return rows

    def _healthy(self) -> None:
        if self.failing_since is not None and not self.pending:
            log.warning("firsttoken: the database %s is writable again; every waiting request was written%s",
                        self.path, f" ({self.dropped} dropped while it was not)" if self.dropped else "")
            self.failing_since = None
            self._tell()

    def _tell(self) -> None:
        h = self.health()
        for fn in list(self.on_health):
            try:
                fn(h)
            except Exception:
                log.exception("firsttoken: writer health listener failed")

    def _apply(self, db, rows: list[dict[str, Any]]) -> None:
        """Write ``rows`` in order, as one upsert each would: the rows of one request are merged
        first (later columns win), then rows naming the same columns go in one ``executemany``.
        The result is the same as row by row, with a fraction of the statements (and of the
        statistics triggers they fire)."""
        conn = db.conn
        groups: dict[tuple[str, ...], list[list[Any]]] = {}
        findings: list[tuple[Any, list[dict[str, Any]]]] = []
        for row in _merged(rows):
            cols = tuple(row)
            if cols not in self._checked:
                have = self._columns(db)
                unknown = [c for c in cols if c not in have]
                if unknown:
                    raise ValueError(f"no such column(s) in requests: {', '.join(unknown)}")
                self._checked.add(cols)
            groups.setdefault(cols, []).append([v if type(v) in _PLAIN else _value(v) for v in row.values()])
            f = row.get("findings")
            if f is not None:
                findings.append((row["id"], f))
        for cols, values in groups.items():
            # An upsert naming only the given columns: an in-flight row is created first and
            # completed later, column by column. (Plain SQL: sqlite-utils' upsert re-reads the
            # schema on every call, ~1 ms a row on the writer thread.)
            sql = _UPSERT.get(cols)
            if sql is None:
                sets = ", ".join(f"[{c}] = excluded.[{c}]" for c in cols if c != "id") or "id = id"
                sql = (f"INSERT INTO requests ({', '.join(f'[{c}]' for c in cols)}) "
                       f"VALUES ({', '.join('?' for _ in cols)}) ON CONFLICT(id) DO UPDATE SET {sets}")
                _UPSERT[cols] = sql
            if len(values) == 1:
                conn.execute(sql, values[0])
            else:
                conn.executemany(sql, values)
        if findings:
            conn.executemany("DELETE FROM findings WHERE request_id = ?", [(rid,) for rid, _ in findings])
            conn.executemany(_INSERT_FINDING, [_finding_row(rid, i, f) for rid, fs in findings
                                               for i, f in enumerate(fs) if isinstance(f, dict)])

    def _columns(self, db) -> set[str]:
        if self._cols is None:
            self._cols = {r[1] for r in db.execute("PRAGMA table_info(requests)").fetchall()}
        return self._cols


def _merged(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per request id, in the order of each id's first row, later values winning:
    what upserting the rows one by one would leave. The caller's dicts are not changed."""
    out: dict[Any, dict[str, Any]] = {}
    copied: set[Any] = set()
    for r in rows:
        rid = r.get("id")
        old = out.get(rid)
        if old is None:
            out[rid] = r
        else:
            if rid not in copied:
                old = out[rid] = dict(old)
                copied.add(rid)
            old.update(r)
    return list(out.values())


#: one finding a person can read (migration m018): the message and hint as recorded, the params as JSON
_INSERT_FINDING = (f"INSERT OR IGNORE INTO findings ({', '.join(FINDING_COLUMNS)}) "
                   f"VALUES ({', '.join('?' for _ in FINDING_COLUMNS)})")


def _finding_row(rid: Any, position: int, f: dict[str, Any]) -> tuple[Any, ...]:
    """A finding dict (``{code, severity, message, hint, params}``) as a ``findings`` row."""
    params = f.get("params")
    return (rid, f.get("code"), f.get("severity"), position, _text(f.get("message")), _text(f.get("hint")),
            None if params is None else _json(params))


def _text(v: Any) -> str | None:
    return v if v is None or isinstance(v, str) else str(v)


#: values SQLite takes as they are
_PLAIN = frozenset({str, int, float, type(None)})
#: queue items that are not rows: write what came before them at once
_CONTROL = (threading.Event, tuple)

_UPSERT: dict[tuple[str, ...], str] = {}
#: json.dumps(v, ensure_ascii=False, default=str) without building an encoder for every value
_slow_json = json.JSONEncoder(ensure_ascii=False, default=str).encode
_ORJSON_OPTIONS = (orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_DATETIME
                   | orjson.OPT_PASSTHROUGH_SUBCLASS | orjson.OPT_NON_STR_KEYS)


def _json(v: Any) -> str:
    """A list or dict column as JSON text. orjson writes it (a tenth of json's time: findings and
    event offsets are most of a row's Python work on the writer thread); what orjson refuses
    (a lone surrogate, an integer beyond 64 bits) the standard library writes. Values that are
    no JSON type become their ``str()`` either way; a non-finite float becomes null."""
    try:
        return orjson.dumps(v, default=str, option=_ORJSON_OPTIONS).decode()
    except (TypeError, ValueError):
        return _slow_json(v)


def _storage_error(e: BaseException | None) -> bool:
    """An error of the database file or its disk (every row would fail), not of one row."""
    if isinstance(e, sqlite3.OperationalError | sqlite3.DatabaseError) and not isinstance(e, sqlite3.IntegrityError):
        low = str(e).lower()
        return any(w in low for w in _STORAGE_WORDS) or isinstance(e, sqlite3.OperationalError)
    return isinstance(e, OSError | MemoryError)


def _encodable(row: dict[str, Any]) -> dict[str, Any]:
    """``row`` with every string SQLite could not encode as UTF-8 (lone surrogates) made
    encodable: the bytes they stood for are decoded as UTF-8, what still is not becomes U+FFFD."""
    def fix(v: Any) -> Any:
        if isinstance(v, str):
            return v.encode("utf-8", "surrogateescape").decode("utf-8", "replace").encode(
                "utf-8", "replace").decode("utf-8")
        if isinstance(v, list):
            return [fix(x) for x in v]
        if isinstance(v, dict):
            return {fix(k): fix(x) for k, x in v.items()}
        return v

    return {k: fix(v) for k, v in row.items()}


def _size(row: dict[str, Any]) -> int:
    """A rough in-memory size of a row (bodies and offsets dominate)."""
    n = 512
    for v in row.values():
        if isinstance(v, str):
            n += len(v)
        elif isinstance(v, list):
            n += 16 * len(v)
    return n


def _value(v: Any) -> Any:
    if v is True or v is False:
        return int(v)
    if isinstance(v, (list, dict)):
        return _json(v)
    return v


def describe_health(h: dict[str, Any] | None) -> str | None:
    """One line for the user when writes fail (None when healthy): what happened, what to do."""
    if not h or h.get("ok", True):
        return None
    lost = f"; {h['dropped']} dropped (memory buffer full)" if h.get("dropped") else ""
    return (f"NOT RECORDING: cannot write {h.get('path')} ({h.get('error')}); {h.get('pending', 0)} request(s) kept "
            f"in memory and retried every {RETRY_S:.0f} s{lost}. Free disk space or fix the file's permissions; "
            "traffic is still forwarded.")


def describe_recovery(h: dict[str, Any]) -> str:
    lost = f", {h['dropped']} were dropped while it was not" if h.get("dropped") else ""
    return f"recording again: {h.get('path')} is writable; every waiting request was written{lost}."
