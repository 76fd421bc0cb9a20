"""The live view of a proxy running elsewhere (``firsttoken live``): its database, read-only.

``DbSource`` polls the SQLite file without ever creating, migrating or writing it. In-flight
rows are those with ``state='in_flight'``; their elapsed time comes from ``started_at``.
"""

from __future__ import annotations

import datetime as _dt
import sqlite3
import time
from pathlib import Path
from typing import Any

from firsttoken.addon.store import conversations, queries
from firsttoken.addon.store.db import StoreError, missing_message, not_ours_message
from firsttoken.cli.live.data import (
    DEFAULT_WINDOW,
    RECENT_KEEP,
    ROW_FIELDS,
    FlightView,
    LiveSnapshot,
    ModelStats,
    Tally,
    conversation_line,
    model_stats,
    slim,
)

#: in-flight DB rows older than this are leftovers of a proxy that was killed, not live requests
STALE_IN_FLIGHT_S = 15 * 60


def parse_iso(s: str | None) -> float | None:
    if not s:
        return None
    try:
        t = _dt.datetime.fromisoformat(s)
    except ValueError:
        return None
    if t.tzinfo is None:
        t = t.replace(tzinfo=_dt.UTC)
    return t.timestamp()


def iso(ts: float) -> str:
    return _dt.datetime.fromtimestamp(ts, _dt.UTC).isoformat(timespec="milliseconds")


def session_start() -> str:
    """Now, as the store writes ``started_at``: where a session's rows begin (what its summary on exit reads back)."""
    import time

    return iso(time.time())


def connect_ro(path: str | Path) -> sqlite3.Connection:
    """A read-only connection: never creates, migrates or writes the file. A database the proxy
    has created but not yet given its tables is fine (the view waits); a missing file or one
    that is not SQLite is an error."""
    p = Path(path).expanduser().resolve()
    if not p.exists():
        raise FileNotFoundError(missing_message(p))
    conn = sqlite3.connect(f"{p.as_uri()}?mode=ro", uri=True, check_same_thread=False, timeout=5)
    try:
        conn.execute("PRAGMA busy_timeout = 5000")
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.DatabaseError as e:
        conn.close()
        raise StoreError(not_ours_message(p, e)) from None
    return conn


#: the live view's note when no running proxy writes the database it follows
STOPPED_NOTE = "no proxy is running on this database (stopped, or not started yet): showing what it recorded"


class DbSource:
    """Polls a proxy's database read-only and keeps what the view needs between polls.

    ``poll()`` returns the requests that finished since the previous poll (oldest first) and
    refreshes the in-flight rows; ``snapshot()`` builds a ``LiveSnapshot`` (elapsed timers
    advance between polls).
    """

    def __init__(self, path: str | Path, window: int = DEFAULT_WINDOW, history: int = 500,
                 tally: Tally | None = None) -> None:
        self.path = str(path)
        self.window = window
        self.history = history
        self.conn = connect_ro(path)
        self.attached = time.time()
        self.tally = tally or Tally()
        self.in_flight: list[dict[str, Any]] = []
        self.recent: list[dict[str, Any]] = []  # finished rows, newest last (window for stats)
        self.routes: list[tuple[str, str]] = []
        self.note: str | None = None
        self.conversation: str | None = None  # the active conversation's progress (read when rows finish)
        self._seen: dict[str, str] = {}  # id -> started_at of finished rows already reported
        self._cutoff = self.attached  # finished rows that started before this were reported (or predate us)
        self._first = True
        self._derived: tuple[list[dict[str, Any]], list[ModelStats]] | None = None  # recent + stats, until new rows
        #: the running proxy writing this database (its registry entry), None when none runs
        self.proxy: dict[str, Any] | None = None
        self._proxy_checked = 0.0

    def close(self) -> None:
        self.conn.close()

    def poll(self) -> list[dict[str, Any]]:
        try:
            new = self._poll()
            self._check_proxy()
            return new
        except sqlite3.OperationalError as e:
            msg = str(e)
            self.note = ("waiting for the proxy to create its tables" if "no such table" in msg
                         else f"database busy or unreadable ({msg}); retrying")
            return []

    def _poll(self) -> list[dict[str, Any]]:
        now = time.time()
        self.in_flight = queries.in_flight(self.conn, ROW_FIELDS, iso(now - STALE_IN_FLIGHT_S))
        if self._first:
            # What finished before we attached is history: it fills the table and the
            # percentiles but is not reported as new, nor counted in this session's totals.
            hist = queries.latest_finished(self.conn, ROW_FIELDS, self.history)
            self.recent = hist
            self._derived = None
            for r in hist:
                self._seen[r["id"]] = r["started_at"] or ""
            self.routes = queries.routes_seen(self.conn)
            self.conversation = conversation_line(conversations.active_rows(self.conn))
            self._cutoff = min([self.attached] + [parse_iso(r["started_at"]) or now for r in self.in_flight])
            self._first = False
            self.note = None
            return []
        # A request that finishes now started at most a few seconds before the oldest one we
        # saw in flight (or before our previous poll, allowing for the writer's batching).
        since = min([self._cutoff] + [parse_iso(r["started_at"]) or self._cutoff for r in self.in_flight])
        rows = queries.finished_since(self.conn, ROW_FIELDS, iso(since - 5.0))
        new = [r for r in rows if r["id"] not in self._seen]
        for r in new:
            self._seen[r["id"]] = r["started_at"] or ""
            self.tally.add(r)
            if r.get("upstream") and (r.get("route") or "default", r["upstream"]) not in self.routes:
                self.routes.append((r.get("route") or "default", r["upstream"]))
        if new:
            self.recent = (self.recent + new)[-self.history:]
            self._derived = None
            self.conversation = conversation_line(conversations.active_rows(self.conn))
        self._cutoff = min([now] + [parse_iso(r["started_at"]) or now for r in self.in_flight])
        horizon = iso(self._cutoff - 60.0)
        self._seen = {k: v for k, v in self._seen.items() if v >= horizon}
        self.note = None
        return new

    def _check_proxy(self, every: float = 2.0) -> None:
        """Is a proxy still writing this database? (the per-user registry, read at most every 2 s)"""
        from firsttoken.cli.proxy.state import proxy_for_db

        now = time.monotonic()
        if now - self._proxy_checked >= every:
            self._proxy_checked = now
            self.proxy = proxy_for_db(self.path)
        if self.proxy is None:
            self.routes = []  # the routes of a proxy that is gone are no address to point a client at
            self.note = self.note or STOPPED_NOTE

    def snapshot(self, wall_now: float | None = None) -> LiveSnapshot:
        now = wall_now or time.time()
        if self._derived is None:
            self._derived = ([slim(r) for r in self.recent[-RECENT_KEEP:]], model_stats(self.recent, self.window))
        recent, models = self._derived
        flights = []
        for r in self.in_flight:
            started = parse_iso(r.get("started_at")) or now
            flights.append(FlightView(
                id=r["id"], elapsed_s=max(0.0, now - started), phase=r.get("phase") or "connecting",
                route=r.get("route"), model=r.get("model"), api=r.get("api"), path=r.get("path"),
                status=r.get("status"), prompt_tokens_est=r.get("prompt_tokens_est"), ttfb_ms=r.get("ttfb_ms"),
            ))
        return LiveSnapshot(
            routes=list(self.routes),
            base_url=None,
            db_path=self.path,
            uptime_s=now - self.attached,
            requests=self.tally.requests,
            errors=self.tally.errors,
            in_flight=flights,
            recent=list(recent),
            models=list(models),
            window=self.window,
            attached=True,
            note=self.note,
            conversation=self.conversation,
            source={"kind": "db"},
        )
