"""The proxy's live feed: what its own live view shows, served on 127.0.0.1 for `firsttoken live`.

A small threaded HTTP server (never the event loop) answers ``GET /live?since=SEQ`` with
``feed_document`` as JSON: flights as the proxy knows them now, the records finished after SEQ.
Its port and a token are in the proxy's registry entry (owner-only); a foreign Host is refused.
"""

from __future__ import annotations

import collections
import dataclasses
import hmac
import json
import logging
import os
import secrets
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from firsttoken.addon.store.writer import describe_health
from firsttoken.cli.live.state import base_url_hint, conversation_line, flight_view, get_field, route_lines, slim
from firsttoken.cli.loopback import loopback_host

log = logging.getLogger("firsttoken")

#: the wire's version: `live` falls back to the database for a proxy serving another one
WIRE_VERSION = 1
#: the path the feed answers on
PATH = "/live"
#: finished records kept for followers (a follower's first read gets them as history)
KEEP = 500


class LiveFeed:
    """The feed of one ProxyServer: ``start(server)`` once it listens (``on_listen``), ``close()`` on exit.

    Finished records reach it through ``capture.listeners`` (the analyzer thread: an append under
    a lock); a read builds the document in the server's own thread from ``Capture.snapshot()``.
    """

    def __init__(self, keep: int = KEEP) -> None:
        self.token = secrets.token_urlsafe(24)
        self._ring: collections.deque[tuple[int, Any]] = collections.deque(maxlen=keep)
        self._seq = 0
        self._lock = threading.Lock()
        self._server: Any = None
        self._capture: Any = None
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._static: tuple[list[tuple[str, str]], str | None] | None = None
        self._conv: tuple[Any, Any] = (None, None)
        self.reads = 0

    # -- the proxy's side --------------------------------------------------------------------
    def on_record(self, rec: Any) -> None:
        """A record is final (analyzer thread): keep it for the followers."""
        with self._lock:
            self._seq += 1
            self._ring.append((self._seq, rec))

    def start(self, server: Any) -> None:
        """Serve ``server``'s feed on 127.0.0.1 (a free port). Never raises: without a feed,
        `live` reads the database as before."""
        try:
            self._server, self._capture = server, server.capture
            if self.on_record not in server.capture.listeners:
                server.capture.listeners.append(self.on_record)
            self._httpd = _HTTPServer(("127.0.0.1", 0), _Handler)
            self._httpd.feed = self
            self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.5},
                                            name="firsttoken-live-feed", daemon=True)
            self._thread.start()
        except Exception as e:  # noqa: BLE001 - the feed is a convenience, never a reason to fail
            log.warning("firsttoken: live feed unavailable (%s); `firsttoken live` will read the database", e)
            self._httpd = None

    @property
    def port(self) -> int | None:
        return self._httpd.server_address[1] if self._httpd is not None else None

    def entry(self) -> dict[str, Any] | None:
        """What the registry records of it (None: not serving)."""
        if self.port is None:
            return None
        return {"url": f"http://127.0.0.1:{self.port}{PATH}", "port": self.port, "token": self.token,
                "version": WIRE_VERSION}

    def close(self) -> None:
        httpd, self._httpd = self._httpd, None
        if httpd is not None:
            httpd.shutdown()
            httpd.server_close()
        cap = self._capture
        if cap is not None and self.on_record in cap.listeners:
            cap.listeners.remove(self.on_record)

    # -- a read ---------------------------------------------------------------------------------------
    def document(self, since: int | None, history: int = KEEP) -> dict[str, Any]:
        """The feed at this moment: the proxy's snapshot, its in-flight requests as the live view
        computes them, and the finished records after ``since`` (the last ``history`` without)."""
        self.reads += 1
        snap = self._capture.snapshot()
        now = snap["now"]
        flights = sorted((flight_view(d, now) for d in snap["in_flight"]), key=lambda f: -f.elapsed_s)
        with self._lock:
            seq = self._seq
            done = list(self._ring)
        if since is None or since > seq:  # a first read, or a follower of an earlier proxy
            done = done[-max(0, history):] if history else []
        else:
            done = [(s, r) for s, r in done if s > since]
        routes, base = self._routes(snap)
        return {
            "version": WIRE_VERSION,
            "pid": os.getpid(),
            "seq": seq,
            "uptime_s": max(0.0, time.time() - (snap.get("started") or time.time())),
            "routes": routes,
            "base_url": base,
            "db_path": snap.get("db_path"),
            "note": describe_health(snap.get("store")),
            "load": snap.get("load"),
            "conversation": self._conversation(snap["recent"]),
            "draining": bool(getattr(self._capture, "draining", False)),
            "in_flight": [dataclasses.asdict(f) for f in flights],
            "done": [slim(r) for _, r in done],
        }

    def _routes(self, snap: dict[str, Any]) -> tuple[list[tuple[str, str]], str | None]:
        if self._static is None:  # the routes do not change while the proxy runs
            routes = list(snap.get("routes") or [])
            url = self._server.url
            self._static = (route_lines(url, routes, getattr(self._capture, "egress", None)), base_url_hint(url, routes))
        return self._static

    def _conversation(self, recent: list[Any]) -> dict[str, Any] | None:
        key = (len(recent), get_field(recent[-1], "id") if recent else None)
        if self._conv[0] != key:
            self._conv = (key, conversation_line(recent))
        return self._conv[1]


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    feed: LiveFeed

    def handle_error(self, request: Any, client_address: Any) -> None:  # a follower gone mid-read: not news
        pass


class _Handler(BaseHTTPRequestHandler):
    server: _HTTPServer
    timeout = 5  # a connection that sends nothing is dropped
    protocol_version = "HTTP/1.1"  # `live` keeps its connection between reads

    def log_message(self, format: str, *args: Any) -> None:  # no output on the proxy's terminal
        pass

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        feed = self.server.feed
        if feed.port is None:  # closed: a kept-alive connection gets no more reads
            self.close_connection = True
            return self._reply(503, {"error": "the proxy is stopping"})
        if not loopback_host(self.headers.get("Host")):
            return self._reply(403, {"error": "the live feed answers only requests addressed to 127.0.0.1 or localhost"})
        given = (self.headers.get("Authorization") or "").removeprefix("Bearer ").strip()
        if not hmac.compare_digest(given.encode(), feed.token.encode()):
            return self._reply(401, {"error": "wrong or missing token: `firsttoken live` reads it from the proxy's "
                                              "registry entry (owner only)"})
        u = urlsplit(self.path)
        if u.path != PATH:
            return self._reply(404, {"error": f"the live feed is at {PATH}"})
        q = parse_qs(u.query)
        try:
            since = int(q["since"][0]) if "since" in q else None
            history = int(q["history"][0]) if "history" in q else KEEP
        except ValueError:
            return self._reply(400, {"error": "since and history are integers"})
        try:
            doc = feed.document(since, history)
        except Exception as e:  # noqa: BLE001 - a read that fails says so; the proxy goes on
            log.exception("firsttoken: live feed read failed")
            return self._reply(500, {"error": f"{type(e).__name__}: {e}"})
        self._reply(200, doc)

    def do_POST(self) -> None:  # noqa: N802
        self._reply(405, {"error": "the live feed is read with GET"})

    do_PUT = do_DELETE = do_POST

    def _reply(self, status: int, doc: dict[str, Any]) -> None:
        body = json.dumps(doc, default=str, separators=(",", ":")).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Cache-Control", "no-store")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
