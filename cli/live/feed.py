"""Where `firsttoken live` reads from: the running proxy's live feed, else its database.

``FeedSource`` reads the feed a running ``firsttoken proxy`` serves (cli/proxy/feed.py): requests
in flight as the proxy knows them. ``Follow`` picks it when the proxy serves one and falls back to
``DbSource`` (cli/live/db.py) when none runs, switching as proxies come and go.
"""

from __future__ import annotations

import dataclasses
import http.client
import json
import time
from typing import Any
from urllib.parse import urlsplit

from firsttoken.addon.safe_text import printable, printable_data
from firsttoken.cli.live.data import (
    DEFAULT_WINDOW,
    RECENT_KEEP,
    FlightView,
    LiveSnapshot,
    ModelStats,
    Tally,
    model_stats,
)
from firsttoken.cli.live.db import DbSource

#: the wire version this reader understands (cli/proxy/feed.py WIRE_VERSION)
WIRE_VERSION = 1
#: seconds between reads of the feed (the view redraws at most 4 times a second)
FEED_INTERVAL = 0.25
#: seconds between reads of the database when no proxy serves a feed
DB_INTERVAL = 0.5
_FLIGHT_FIELDS = {f.name for f in dataclasses.fields(FlightView)}


class FeedError(RuntimeError):
    """The feed did not answer (the proxy stopped, or is not the one registered)."""


class FeedSource:
    """Reads one proxy's feed: ``poll()`` returns the requests that finished since the last read
    (the first read is history: it fills the table and percentiles and is not counted);
    ``snapshot()`` draws the latest read, its elapsed timers advanced to now."""

    def __init__(self, proxy: dict[str, Any], db_path: str, window: int = DEFAULT_WINDOW, history: int = 500,
                 tally: Tally | None = None, timeout: float = 3.0) -> None:
        live = proxy.get("live") or {}
        if live.get("version") != WIRE_VERSION or not live.get("url") or not live.get("token"):
            raise FeedError("this proxy serves no live feed this firsttoken reads")
        self.proxy = proxy
        self.path = db_path
        self.window = window
        self.history = history
        self.tally = tally or Tally()
        self.attached = time.time()
        u = urlsplit(live["url"])
        if u.hostname != "127.0.0.1":  # the feed is on loopback only; anything else is not ours
            raise FeedError(f"the registry names a live feed off loopback ({u.hostname})")
        self._host, self._port, self._path = u.hostname, u.port, u.path or "/live"
        self._token = str(live["token"])
        self._timeout = timeout
        self._conn: http.client.HTTPConnection | None = None
        self.seq: int | None = None
        self.doc: dict[str, Any] | None = None
        self._read_at = 0.0
        self.recent: list[dict[str, Any]] = []
        self._derived: tuple[list[dict[str, Any]], list[ModelStats]] | None = None
        self.note: str | None = None

    @property
    def url(self) -> str:
        return str(self.proxy.get("url") or "")

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def fetch(self, since: int | None) -> dict[str, Any]:
        """One read of the feed (raises FeedError)."""
        query = f"?since={since}" if since is not None else f"?history={self.history}"
        for attempt in (0, 1):  # a kept-alive connection the server closed: one fresh one
            if self._conn is None:
                self._conn = http.client.HTTPConnection(self._host, self._port, timeout=self._timeout)
            try:
                self._conn.request("GET", self._path + query, headers={"Authorization": f"Bearer {self._token}"})
                resp = self._conn.getresponse()
                body = resp.read()
            except (OSError, http.client.HTTPException) as e:
                self.close()
                if attempt:
                    raise FeedError(f"the proxy's live feed did not answer ({e})") from None
                continue
            if resp.status != 200:
                raise FeedError(f"the proxy's live feed answered {resp.status}")
            try:
                doc = json.loads(body)
            except ValueError:
                raise FeedError("the proxy's live feed sent something that is not JSON") from None
            if not isinstance(doc, dict) or doc.get("version") != WIRE_VERSION:
                raise FeedError("the proxy's live feed speaks another version")
            return doc
        raise FeedError("the proxy's live feed did not answer")  # not reached

    def poll(self) -> list[dict[str, Any]]:
        first = self.seq is None
        doc = self.fetch(self.seq)
        self._read_at = time.perf_counter()
        rows = [printable_data(r) for r in doc.get("done") or [] if isinstance(r, dict)]
        self.doc, self.seq = doc, int(doc.get("seq") or 0)
        if first:
            self.recent, self._derived = rows[-self.history:], None
            return []
        for r in rows:
            self.tally.add(r)
        if rows:
            self.recent = (self.recent + rows)[-self.history:]
            self._derived = None
        return rows

    def snapshot(self, wall_now: float | None = None) -> LiveSnapshot:
        doc = self.doc or {}
        ahead = max(0.0, time.perf_counter() - self._read_at) if self.doc else 0.0
        if self._derived is None:
            self._derived = (self.recent[-RECENT_KEEP:], model_stats(self.recent, self.window))
        recent, models = self._derived
        flights = []
        for d in doc.get("in_flight") or []:
            if isinstance(d, dict) and d.get("id"):
                f = FlightView(**{k: v for k, v in d.items() if k in _FLIGHT_FIELDS})
                f.elapsed_s = float(f.elapsed_s or 0.0) + ahead  # the timer moves between reads
                flights.append(f)
        notes = [n for n in (self.note, doc.get("note")) if n]
        routes = [(printable(a), printable(b)) for a, b in doc.get("routes") or []]
        return LiveSnapshot(
            routes=routes,
            base_url=printable(doc.get("base_url")),
            db_path=printable(doc.get("db_path")) or self.path,
            uptime_s=(wall_now or time.time()) - self.attached,
            requests=self.tally.requests,
            errors=self.tally.errors,
            in_flight=flights,
            recent=list(recent),
            models=list(models),
            window=self.window,
            attached=True,
            note="; ".join(notes) or None,
            load=doc.get("load") if isinstance(doc.get("load"), dict) else None,
            conversation=doc.get("conversation") if isinstance(doc.get("conversation"), dict) else None,
            source={"kind": "proxy", "url": printable(self.url), "pid": doc.get("pid") or self.proxy.get("pid")},
        )


class Follow:
    """`firsttoken live`'s source for one database: the feed of the proxy writing it when that
    proxy serves one, else the database itself (read-only). A feed that stops answering (the proxy
    stopped) gives way to the database; a proxy with a feed that starts later is taken up."""

    def __init__(self, db_path: str, window: int = DEFAULT_WINDOW, interval: float | None = None,
                 check_every: float = 2.0) -> None:
        self.path = str(db_path)
        self.window = window
        self.interval = interval
        self.check_every = check_every
        self.tally = Tally()
        self.attached = time.time()
        self.src: FeedSource | DbSource = self._open()
        self._next_db = 0.0
        self._checked = time.monotonic()

    @property
    def poll_interval(self) -> float:
        """How often the runner asks for a read: the feed's pace (the database keeps its own)."""
        return min(self.interval or FEED_INTERVAL, FEED_INTERVAL)

    @property
    def from_proxy(self) -> bool:
        return isinstance(self.src, FeedSource)

    def _feed(self, proxy: dict[str, Any] | None) -> FeedSource | None:
        if not proxy or not proxy.get("live"):
            return None
        try:
            src = FeedSource(proxy, self.path, self.window, tally=self.tally)
            src.attached = self.attached
            src.poll()  # the history: the first frame has the table and the percentiles
            return src
        except FeedError:
            return None

    def _open(self) -> FeedSource | DbSource:
        from firsttoken.cli.proxy.state import proxy_for_db

        return self._feed(proxy_for_db(self.path)) or self._db()

    def _db(self, note: str | None = None) -> DbSource:
        src = DbSource(self.path, window=self.window, tally=self.tally)
        src.attached = self.attached
        src.poll()  # its history
        if note:
            src.note = note
        return src

    def poll(self) -> list[dict[str, Any]]:
        if isinstance(self.src, FeedSource):
            try:
                return self.src.poll()
            except FeedError as e:
                self.src.close()
                self.src = self._db()  # its own note says whether a proxy still writes the database
                if self.src.proxy is not None:
                    self.src.note = f"{e}: showing the database as its rows are written"
                return []
        now = time.monotonic()
        if now < self._next_db:
            return []
        self._next_db = now + max(self.interval or DB_INTERVAL, 0.1)
        new = self.src.poll()
        if now - self._checked >= self.check_every:  # a proxy with a feed started on this database?
            self._checked = now
            feed = self._feed(self.src.proxy)
            if feed is not None:
                self.src.close()
                self.src = feed
        return new

    def snapshot(self, wall_now: float | None = None) -> LiveSnapshot:
        return self.src.snapshot(wall_now)

    def close(self) -> None:
        self.src.close()
