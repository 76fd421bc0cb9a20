"""The mitmproxy hooks. Thin on purpose: take a timestamp, route, hand bytes to the tap,
enqueue a row. No SQL, no tokenizing, no rendering here: that runs on other threads.

Loads the same way embedded in ``firsttoken proxy`` and as ``mitmdump -s`` script (see
script.py), configured through mitmproxy options named ``firsttoken_*``.
"""

from __future__ import annotations

import asyncio
import datetime as _dt
import logging
import os
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from mitmproxy import ctx, exceptions, http

from firsttoken.addon import forward, routing, tokens
from firsttoken.addon.analyzer import PARSE_EARLY_MAX, Analyzer, Settings, peek_request_facts
from firsttoken.addon.apis import gemini, url_facts
from firsttoken.addon.diagnose.connectivity import (
    CLIENT_REQUEST_ERROR,
    SHUTDOWN_ERROR,
    client_request_error,
    is_clients_doing,
)
from firsttoken.addon.diagnose.lang import LANGS
from firsttoken.addon.diagnose.websocket import ws_closed_error
from firsttoken.addon.flight import BodyCopy, Flight
from firsttoken.addon.hops import pick_hop_headers
from firsttoken.addon.loadwatch import LoadWatch, client_socket, first_bytes, received_ago
from firsttoken.addon.plan import RequestPlan, plan_request
from firsttoken.addon.record import Clock, Record
from firsttoken.addon.safe_text import clause
from firsttoken.addon.store.db import default_db_path
from firsttoken.addon.store.writer import Writer
from firsttoken.addon.tap import StreamTap
from firsttoken.addon.websocket import (
    CREATE,
    REALTIME_API,
    REALTIME_PATH,
    TERMINAL,
    Connection,
    FrameDecoder,
    frame_type,
    is_upgrade,
    setup_headers,
)

log = logging.getLogger("firsttoken")

REQUEST_ID_HEADERS = ("x-request-id", "request-id", "x-amzn-requestid", "openai-request-id", "cf-ray")


class Capture:
    def __init__(self) -> None:
        self.routes: list[routing.Route] = []
        self.flights: dict[str, Flight] = {}
        self.writer: Writer | None = None
        self.analyzer: Analyzer | None = None
        self.settings = Settings()
        self.listeners: list[Callable[[Record], None]] = []  # called (worker thread) per finished record
        #: called (worker thread) when no more records are waiting: the end of a burst (flush output here)
        self.idle_listeners: list[Callable[[], None]] = []
        #: called (writer thread) with ``Writer.health()`` when database writes start failing or recover
        self.store_listeners: list[Callable[[dict[str, Any]], None]] = []
        self._conn_start: dict[str, float] = {}
        self._conn_end: dict[str, float] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self.started = time.time()
        self.db_path: str | None = None
        self._running = False
        self._conn_claimed: set[str] = set()
        self._strategy_set = False  # connection_strategy was set to lazy by this addon
        self.run_id: str | None = None  # stamped on every record (`firsttoken run` owns this proxy)
        self.loadwatch = LoadWatch()  # the proxy's own event-loop lag and CPU use
        #: perf_counter when the proxy was ready (a request read earlier waited for its start-up)
        self.ready_at: float | None = None
        self._proxyserver: Any = None  # mitmproxy's proxyserver addon: client sockets, for TCP_INFO
        #: mitmproxy runs hooks eagerly (Python 3.12+, mitmproxy 12): see websocket_message
        self._eager_hooks = False
        #: the proxy is stopping (ProxyServer.drain): responses close their client connection
        self.draining = False
        #: the egress addon (addon/egress/addon.py): which way each upstream connection goes
        self.egress: Any = None
        #: upgraded WebSocket connections by their upgrade's flow id (addon/websocket)
        self.ws_conns: dict[str, Connection] = {}
        # several processes behind one port (addon/workers): set by ProxyServer before the proxy runs
        #: a worker process: its connection to the analysing process (a Relay then stands for analyzer and writer)
        self.relay_conn: Any = None
        #: ... and what the hub's "stop" calls (``ProxyServer.drain``)
        self.relay_on_stop: Callable[[float], None] | None = None
        #: the analysing process: the workers' hand-overs (addon/workers/hub.py)
        self.hub: Any = None
        #: which process of a `--workers N` proxy forwards (0: the analysing one), None for a proxy of one process
        self.worker_index: int | None = None
        #: the proxy's pid on its records: the analysing process's in a worker (it closes the rows a dead proxy left)
        self.owner_pid = os.getpid()

    # -- options -------------------------------------------------------------------
    def load(self, loader) -> None:
        loader.add_option("firsttoken_db", str, "", "SQLite file for firsttoken records (default: per-user data dir, or $FIRSTTOKEN_DB).")
        loader.add_option("firsttoken_upstream", Sequence[str], [], "Upstream as URL or name=URL; repeatable. Empty: forward where mitmproxy's mode sends it.")
        loader.add_option("firsttoken_save_bodies", bool, False, "Store request/response bodies (redacted, capped).")
        loader.add_option("firsttoken_warn_prompt_tokens", int, 0,
                          "Flag prompts larger than this many tokens (0: half the model's context window, or 64,000).")
        loader.add_option("firsttoken_stall_ms", int, 1000, "Flag inter-token gaps longer than this (ms).")
        loader.add_option("firsttoken_lang", str, "", "Language of findings: en or zh (default: from the locale).",
                          choices=["", *LANGS])
        loader.add_option("firsttoken_run_id", str, "", "Stamp this run id on every record (set by `firsttoken run`).")
        # The bundled tokenizer, now, before the proxy listens: built later (on the analysis
        # thread, once running) it held the GIL for ~100 ms just as the first clients connected,
        # and their records carried that wait as the proxy's own delay.
        try:
            tokens.load_encoding("cl100k_base")
        except Exception:
            pass  # the analysis thread tries again, and says why it failed

    def configure(self, updated: set[str]) -> None:
        o = ctx.options
        if "firsttoken_upstream" in updated:
            try:
                self.routes = routing.parse_upstreams(list(o.firsttoken_upstream))
            except routing.RouteError as e:
                raise exceptions.OptionsError(str(e)) from None
        self.settings.save_bodies = o.firsttoken_save_bodies
        self.settings.warn_prompt_tokens = o.firsttoken_warn_prompt_tokens
        self.settings.stall_ms = float(o.firsttoken_stall_ms)
        if "firsttoken_lang" in updated and o.firsttoken_lang not in ("", *LANGS):
            # mitmproxy lists choices= in help and UIs but does not enforce them on set
            raise exceptions.OptionsError(
                f"firsttoken_lang={o.firsttoken_lang!r}: use one of {', '.join(LANGS)} (or leave it empty for the locale)")
        self.settings.lang = o.firsttoken_lang
        self.run_id = o.firsttoken_run_id or None
        if "connection_strategy" in updated and o.connection_strategy != "lazy":
            # Eager connects fail before a flow exists; lazy ones become records.
            if self._strategy_set:
                raise exceptions.OptionsError(
                    "firsttoken needs connection_strategy=lazy: with eager connections a refused, DNS or TLS "
                    "failure happens before the request exists and could not be recorded or diagnosed.")
            log.warning("firsttoken: connection_strategy set to lazy (was %s), so that upstream connection "
                        "failures become records with a diagnosis.", o.connection_strategy)
            self._strategy_set = True
            o.connection_strategy = "lazy"
        if self._running and "firsttoken_db" in updated and self._db_changed():
            self._open_store()  # the database was changed while running (e.g. --set in mitmproxy)

    def _db_changed(self) -> bool:
        return str(ctx.options.firsttoken_db or default_db_path()) != self.db_path

    def _open_store(self) -> None:
        path = str(ctx.options.firsttoken_db or default_db_path())
        if self.relay_conn is not None:  # a worker: the analysing process owns the database
            if self.analyzer is None:
                from firsttoken.addon.workers import Relay

                self.analyzer = self.writer = Relay(self.relay_conn, self.flights, on_stop=self.relay_on_stop)
            self.db_path = path
            return
        if self.analyzer is not None:
            self.analyzer.close()
        if self.writer is not None:
            self.writer.close()
        try:
            self.writer = Writer(path)
        except Exception as e:
            raise exceptions.OptionsError(
                f"firsttoken cannot open its database {path}: {clause(e)}. Pass a writable path with "
                "--db (or --set firsttoken_db=PATH)."
            ) from None
        self.db_path = path
        self.writer.on_health.append(self._store_health)
        self.analyzer = Analyzer(self.writer, self.settings, on_done=self._done, on_idle=self._idle)
        self.analyzer.pause = self.loadwatch.pause  # analysis steps aside while the loop is late

    def running(self) -> None:
        # Options are final now: open the store here, not at load (that would create the
        # default database even when another one is configured).
        self._running = True
        try:
            self._open_store()
        except exceptions.OptionsError as e:
            log.error("%s", e)
            ctx.master.shutdown()
            return
        self._loop = asyncio.get_running_loop()
        self._eager_hooks = hooks_run_eagerly(self._loop)
        self.loadwatch.start()
        self.ready_at = time.perf_counter()
        self._proxyserver = ctx.master.addons.get("proxyserver")
        self.settings.proxy_url = self._proxy_url()
        # The worker and writer threads share the GIL with the event loop; a short switch
        # interval (default 5 ms) keeps them from delaying a chunk on its way to the client.
        sys.setswitchinterval(min(sys.getswitchinterval(), 0.0005))

    def _proxy_url(self) -> str:
        try:
            addrs = ctx.master.addons.get("proxyserver").listen_addrs()
            host, port = addrs[0][0], addrs[0][1]
        except Exception:
            return ""
        host = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
        return f"http://{host}:{port}"

    def _own_url(self, flow: http.HTTPFlow) -> str:
        """The proxy's own address as clients reach it (never the upstream's)."""
        if self.settings.proxy_url:
            return self.settings.proxy_url
        try:  # before running(): the address the client connected to
            host, port = flow.client_conn.sockname[:2]
        except (TypeError, ValueError):
            return "http://127.0.0.1:8787"
        host = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
        return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"

    def done(self) -> None:
        self.loadwatch.stop()
        now = time.perf_counter()
        for flight in list(self.flights.values()):
            flight.record.error = flight.record.error or SHUTDOWN_ERROR
            if flight.record.ws_turn is not None:
                flight.record.ws_closed_by = "proxy"
            flight.clock.end = now
            self._finish(flight)
        self.ws_conns.clear()
        if self.hub is not None:
            self.hub.close(timeout=30)  # the workers' last hand-overs reach the analyzer first
        if self.analyzer:
            self.analyzer.close(timeout=None)  # every pending row reaches the writer first
        if self.writer:
            self.writer.close(timeout=120)

    # -- connections -----------------------------------------------------------------
    def server_connect(self, data) -> None:
        self._conn_start[data.server.id] = time.perf_counter()

    def server_connected(self, data) -> None:
        self._conn_end[data.server.id] = time.perf_counter()

    def tls_established_server(self, data) -> None:
        # connect_ms covers DNS + TCP + TLS: the handshake ends the connection's setup
        if data.conn.id in self._conn_start:
            self._conn_end[data.conn.id] = time.perf_counter()

    def server_connect_error(self, data) -> None:
        self.server_disconnected(data)

    def server_disconnected(self, data) -> None:
        self._conn_start.pop(data.server.id, None)
        self._conn_end.pop(data.server.id, None)
        self._conn_claimed.discard(data.server.id)

    # -- request -------------------------------------------------------------------
    def requestheaders(self, flow: http.HTTPFlow) -> None:
        if flow.metadata.get(forward.SKIP):
            if self.egress is not None:
                self.egress.apply(flow)  # not recorded, but out the same way as everything else
            return  # forward mode, not an LLM host: proxied untouched, not recorded
        hook = time.perf_counter()
        req = flow.request
        p = plan_request(req.method, req.path, list(req.headers.items(multi=True)), self.routes, run_id=self.run_id,
                         own_url=self._own_url(flow), origin=f"{req.scheme}://{req.host}:{req.port}")
        # t0 is when the request head was read, not now: in a busy proxy the hook runs late.
        t0 = first_bytes(req.timestamp_start, hook)
        flight = Flight(record=self._record(flow.id, req.method, p, hook, t0), clock=Clock(t0=t0, hook=hook), flow=flow)
        flight.secrets = p.secrets
        self._lag_in(flight, flow.client_conn, hook, t0)
        _apply(flow, p)
        flight.record.upstream_url = f"{req.scheme}://{req.pretty_host}:{req.port}{req.path.split('?', 1)[0]}"
        if p.refusal is None and self.egress is not None:
            flight.record.egress_proxy = self.egress.apply(flow)  # the target is final now: the way out
        if p.stream_body:  # forwarded as it arrives; a capped copy is kept for analysis
            flight.body_copy = req.stream = BodyCopy()
        self.flights[flow.id] = flight
        if is_upgrade(req.headers):
            # a WebSocket's set-up: no row unless it is refused (then its final row says so)
            flight.ws_upgrade = True
            flight.record.transport = "websocket"
            return
        self._put({k: getattr(flight.record, k) for k in _START_FIELDS})

    def _record(self, flow_id: str, method: str, p: RequestPlan, hook: float, t0: float) -> Record:
        started = _dt.datetime.fromtimestamp(time.time() - (hook - t0), _dt.UTC).isoformat(timespec="milliseconds")
        k = p.key
        return Record(id=flow_id, started_at=started, method=method, path=p.stored_path, run_id=p.run_id,
                      proxy_pid=self.owner_pid, proxy_worker=self.worker_index, route=p.route, upstream=p.upstream, api=p.api, experiment=p.experiment,
                      key_header=k.header, key_fingerprint=k.fingerprint, key_scheme=k.scheme, key_length=k.length,
                      key_facts=k.facts, error=p.refusal.message if p.refusal else None,
                      **url_facts(method, p.api, p.upstream_path))  # Gemini's and the clouds' model and stream: in the URL

    def _lag_in(self, flight: Flight, client_conn: Any, hook: float, t0: float) -> None:
        """How long the request (or a WebSocket turn's frame: the client's latest data) lay unread in
        the kernel: it arrived `ago` s before now."""
        ago = received_ago(client_socket(self._proxyserver, client_conn))
        if ago is not None:
            flight.clock.lag_in = max(0.0, ago - (hook - t0))
            flight.clock.lag_measured = True

    def request(self, flow: http.HTTPFlow) -> None:
        flight = self.flights.get(flow.id)
        if flight is None:
            return
        copy = flight.body_copy
        if copy is not None:
            flight.record.request_bytes = copy.size
            flight.body = copy.buf if not copy.truncated else None  # no copy on the event loop
            flight.body_copy = None
            if copy.truncated:
                flight.record.request_error = f"request body larger than {copy.cap // 2**20} MiB: forwarded, not analysed"
        else:
            flight.body = flow.request.raw_content or b""
            flight.record.request_bytes = len(flight.body)
        flight.body_encoding = flow.request.headers.get("content-encoding")
        flight.body_done = True
        self._peek(flight, copy.buf if copy is not None else flight.body)
        if flow.response is None:
            flight.record.phase = "waiting_headers"
        # Parsing waits for the response headers (or the end): a JSON parse holds the GIL,
        # and a 1 MB prompt must not delay its own request on the way out.
        if flight.clock.headers is not None:
            self._parse(flight, early=True)

    # -- response ------------------------------------------------------------------
    def responseheaders(self, flow: http.HTTPFlow) -> None:
        flight = self.flights.get(flow.id)
        if flight is None or flow.response is None:
            return
        now = time.perf_counter()
        c, rec, resp = flight.clock, flight.record, flow.response
        c.headers = now
        self._connection_timing(flight, flow)
        rec.status = resp.status_code
        headers = _header_dict(resp.headers)  # one pass: each mitmproxy lookup scans every field
        rec.content_type = headers.get("content-type")
        rec.content_encoding = headers.get("content-encoding")
        rec.retry_after = _retry_after(headers)
        rec.server, rec.via, rec.hop_headers = pick_hop_headers(headers)  # cleaned and named off the loop
        for h in REQUEST_ID_HEADERS:
            if h in headers:
                rec.upstream_request_id = headers[h][:200]
                break
        if flight.ws_upgrade and rec.status == 101:  # the connection's set-up: its turns are the exchanges
            flight.ws_setup = setup_headers(headers)
            return
        api = rec.api
        if api == "other" and rec.status is not None and rec.status >= 400 and gemini.gemini_call(rec.method, rec.path):
            api = gemini.API  # Gemini's countTokens / embedContent: their errors are Google's, read as such
        tap = StreamTap(
            c, api, rec.content_type, rec.content_encoding,
            keep_body=256 * 1024 if self.settings.save_bodies else 0,
            on_phase=lambda phase, f=flight: self._phase(f, phase),
            defer=True,  # after the first visible token, decoded on the analysis thread
            on_backlog=lambda f=flight: self.analyzer.catch_up([f]) if self.analyzer else None,
        )
        flight.tap = tap
        self._parse(flight, early=True)
        rec.phase = "prefill" if tap.sse else "waiting_body"
        # Stream every response: the client gets each byte as it arrives, never a buffered body.
        resp.stream = tap
        _client_framing(flow, self.draining)
        self._put({"id": rec.id, "phase": rec.phase, "status": rec.status, "content_type": rec.content_type,
                   "ttfb_ms": round((now - c.t0) * 1000.0, 3)})

    def response(self, flow: http.HTTPFlow) -> None:
        flight = self.flights.get(flow.id)
        if flight is None:
            return
        if flight.ws_upgrade and flow.websocket is not None:
            self._ws_open(flight, flow)
            return
        if flight.tap is None and flow.response is not None:  # a response made by the proxy itself
            flight.record.status = flow.response.status_code
            flight.record.content_type = flow.response.headers.get("content-type")
            flight.record.response_bytes = len(flow.response.raw_content or b"")
        flight.clock.end = time.perf_counter()
        self._finish(flight)

    def error(self, flow: http.HTTPFlow) -> None:
        flight = self.flights.get(flow.id)
        if flight is None:
            return
        flight.clock.end = time.perf_counter()
        msg = flow.error.msg if flow.error else "unknown error"
        if self.egress is not None and flow.request is not None:
            msg = self.egress.annotate_error(msg, flow.request.host, flow.request.port)
        if is_clients_doing(msg, flow.request.method if flow.request else None, flight.body_done, flow.response is not None):
            # the client hung up or framed its request badly, or mitmproxy refused the request
            # itself: not the upstream's doing (the upstream's own errors can read alike)
            msg = client_request_error(msg)
        flight.record.error = msg
        low = msg.lower()
        if "client disconnected" in low or "client closed" in low or "stream reset by client (cancel)" in low:
            flight.record.client_aborted = True
        if flight.clock.headers is None:
            self._connection_timing(flight, flow)
        self._finish(flight)

    # -- WebSocket (addon/websocket: each response.create frame is an exchange) ----------
    def _ws_open(self, flight: Flight, flow: http.HTTPFlow) -> None:
        """The upgrade succeeded: keep its set-up for the turns to come; it is no exchange itself."""
        self.flights.pop(flow.id, None)
        rec, c = flight.record, flight.clock
        setup = dict(flight.ws_setup or {})
        ext = setup.get("sec-websocket-extensions", "")
        info: dict[str, Any] = {
            "id": rec.id, "started_at": rec.started_at, "url": rec.upstream_url, "status": 101,
            "connect_ms": round((c.connect_end - c.connect_start) * 1000.0, 3)
            if c.connect_start is not None and c.connect_end is not None else None,
            "conn_reused": c.conn_reused,
            "upgrade_ms": round((c.headers - c.t0) * 1000.0, 3) if c.headers is not None else None,
            "headers": setup, "compressed": "permessage-deflate" in ext.lower(),
            "beta": (flow.request.headers.get("openai-beta") or "")[:200] or None,
        }
        base = {k: getattr(rec, k) for k in _WS_BASE}
        base["key_facts"] = list(rec.key_facts)
        base["hop_headers"] = dict(rec.hop_headers)
        conn = Connection(id=rec.id, setup=info, base=base, secrets=list(flight.secrets))
        if (rec.path or "").split("?", 1)[0].rstrip("/").endswith(REALTIME_PATH):
            conn.api = REALTIME_API
            conn.model = (flow.request.query.get("model") or "")[:200] or None
        self.ws_conns[flow.id] = conn

    def websocket_message(self, flow: http.HTTPFlow) -> None:
        ws = flow.websocket
        if ws is None or not ws.messages:
            return
        now = time.perf_counter()
        msgs = ws.messages
        m = msgs[-1]
        if len(msgs) > 1:
            del msgs[:-1]  # handed over once: mitmproxy would keep every message of the connection
        conn = self.ws_conns.get(flow.id)
        if conn is None:
            return
        if m.from_client:
            self._ws_request(conn, m, now, flow.client_conn)
        elif self._eager_hooks and self._loop is not None:
            # This hook ran eagerly inside mitmproxy's handling of the data; the frame goes on to the
            # client only when that handling has returned, a loop iteration later (longer on a busy
            # proxy). Take the frame's times then (call_soon keeps the frames in order), so a turn's
            # first token is when the client was sent it, as on HTTP.
            self._loop.call_soon(self._ws_event_sent, conn, m, asyncio.current_task(), now)
        else:
            self._ws_event(conn, m, now)

    def _ws_request(self, conn: Connection, m: Any, now: float, client_conn: Any) -> None:
        content = m.content
        typ = frame_type(content)
        if typ is None and b'"response.create"' in content:
            typ = CREATE  # a large frame whose type sits in neither end: a byte search, not a parse
        if typ != CREATE:
            conn.client_frames += 1
            return
        t0 = first_bytes(m.timestamp, now)  # when the frame was read, not when the hook ran
        started = _dt.datetime.fromtimestamp(time.time() - (now - t0), _dt.UTC).isoformat(timespec="milliseconds")
        rec = Record(id=str(uuid.uuid4()), started_at=started, method="WS", api=conn.api, model=conn.model, stream=True,
                     transport="websocket", ws_connection_id=conn.id, ws_connection=dict(conn.setup),
                     conn_reused=True, request_bytes=len(content), phase="waiting_headers", **conn.base)
        flight = Flight(record=rec, clock=Clock(t0=t0, hook=now, conn_reused=True))
        self._lag_in(flight, client_conn, now, t0)
        flight.secrets = list(conn.secrets)
        # a Realtime turn's prompt is the session's conversation, sent before it: not counted
        flight.body, flight.body_done = (content if conn.api != REALTIME_API else None), True
        rec.ws_turn = conn.start(flight)
        flight.tap = StreamTap(
            flight.clock, rec.api, None, None, keep_body=256 * 1024 if self.settings.save_bodies else 0,
            on_phase=lambda phase, f=flight: self._phase(f, phase), defer=True,
            on_backlog=lambda f=flight: self.analyzer.catch_up([f]) if self.analyzer else None,
            decoder=FrameDecoder())
        self.flights[rec.id] = flight
        self._put({k: getattr(rec, k) for k in _WS_START_FIELDS})
        self._peek(flight, content)

    def _ws_event_sent(self, conn: Connection, m: Any, task: asyncio.Task | None, hooked: float) -> None:
        """A loop iteration after the hook: the hook's task sends the frame once it gets the lock
        it waits on; take the frame's time right after that (its waiter's next callback)."""
        if task is None or task.done():  # it went on in the hook's own step: the hook's time stands
            return self._ws_event(conn, m, hooked)
        waiter = getattr(task, "_fut_waiter", None)
        if waiter is not None and not waiter.done():
            # a future's callbacks run in the order they were added: the task's wake-up (which sends)
            # first, then this one
            waiter.add_done_callback(lambda _f: self._ws_event(conn, m, time.perf_counter()))
        else:
            self._ws_event(conn, m, time.perf_counter())

    def _ws_event(self, conn: Connection, m: Any, now: float) -> None:
        flight = conn.current()
        if flight is None:
            conn.stray_frames += 1
            return
        rec, c = flight.record, flight.clock
        if c.headers is None:  # the server's first answer to this turn plays the headers' part
            c.headers = now
            rec.phase, rec.status = "prefill", 200  # answered (the connection's own 101: ws_connection)
            self._put({"id": rec.id, "phase": "prefill", "status": 200, "ttfb_ms": round((now - c.t0) * 1000.0, 3)})
            self._parse(flight, early=True)
        if not m.is_text:
            rec.ws_binary_frames += 1
        flight.tap(m.content)
        if frame_type(m.content) in TERMINAL:
            c.end = now
            conn.end(flight, rec.id)
            self._finish(flight)

    def websocket_end(self, flow: http.HTTPFlow) -> None:
        if self._eager_hooks and self._loop is not None and flow.id in self.ws_conns:
            self._loop.call_soon(self._ws_end, flow)  # after the frames deferred before it
        else:
            self._ws_end(flow)

    def _ws_end(self, flow: http.HTTPFlow) -> None:
        conn = self.ws_conns.pop(flow.id, None)
        if conn is None:
            return
        ws = flow.websocket
        now = time.perf_counter()
        code = ws.close_code if ws is not None else None
        reason = ((ws.close_reason if ws is not None else None) or "")[:200] or None
        by = None if ws is None or ws.closed_by_client is None else "client" if ws.closed_by_client else "server"
        if self.draining or not self._running:
            by = by or "proxy"
        for flight in list(conn.open):
            rec = flight.record
            rec.ws_close_code, rec.ws_close_reason, rec.ws_closed_by = code, reason, by
            rec.error = rec.error or ws_closed_error(code, by)
            if by == "client":
                rec.client_aborted = True
            flight.clock.end = now
            conn.end(flight, rec.id)
            self._finish(flight)
        if conn.last_turn is not None and conn.last_turn not in self.flights and code is not None:
            # how the connection ended, on its latest turn (which had ended well before)
            self._put({"id": conn.last_turn, "ws_close_code": code, "ws_close_reason": reason, "ws_closed_by": by})

    # -- helpers -------------------------------------------------------------------
    def _connection_timing(self, flight: Flight, flow: http.HTTPFlow) -> None:
        sid = flow.server_conn.id if flow.server_conn else None
        start = self._conn_start.get(sid)
        if start is not None and start >= flight.clock.t0 and sid not in self._conn_claimed:
            # the first flow on a new connection paid for it; others sharing it (HTTP/2) did not
            self._conn_claimed.add(sid)
            flight.clock.connect_start = start
            flight.clock.connect_end = self._conn_end.get(sid)
            flight.clock.conn_reused = False
        elif start is not None:
            flight.clock.conn_reused = True

    def _parse(self, flight: Flight, early: bool = False) -> None:
        if early and flight.body is not None and len(flight.body) > PARSE_EARLY_MAX:
            return  # a very large prompt is analysed once its response has ended
        if flight.body_done and not flight.parsed and self.analyzer is not None:
            flight.parsed = True
            self.analyzer.parse(flight)

    def _peek(self, flight: Flight, body: bytes | bytearray | None) -> None:
        """Name the request (model, stream) from a bounded look at its body, at any size."""
        rec = flight.record
        facts = peek_request_facts(body or b"", flight.flow.request.headers.get("content-encoding") if flight.flow else None)
        row = {k: v for k, v in facts.items() if getattr(rec, k) is None}
        for k, v in row.items():
            setattr(rec, k, v)
        if row or rec.request_bytes:
            self._put({"id": rec.id, "request_bytes": rec.request_bytes, **row})

    def _phase(self, flight: Flight, phase: str) -> None:
        flight.record.phase = phase
        self._put({"id": flight.record.id, "phase": phase})

    def _finish(self, flight: Flight) -> None:
        if flight.finished:
            return
        flight.finished = True
        try:
            self._hand_over(flight)
        finally:
            # only now: a flight out of ``flights`` is one ProxyServer.flush() need not wait for, so it
            # must already be queued for the analyzer (popped first, a flush() on another thread could
            # put its marker on the queue ahead of this record and return with the row still in flight)
            self.flights.pop(flight.record.id, None)

    def _hand_over(self, flight: Flight) -> None:
        if flight.tap is not None:
            flight.tap.finish()
        copy = flight.body_copy
        if copy is not None and flight.body is None:  # ended before the `request` hook ran
            flight.record.request_bytes = copy.size
            expected = flight.flow.request.headers.get("content-length") if flight.flow else None
            whole = ((expected is None or expected.strip() == str(copy.size))
                     and not (flight.record.error or "").startswith(CLIENT_REQUEST_ERROR))
            # a complete body is analysed as usual; half a JSON document would only look malformed
            flight.body = copy.buf if whole and not copy.truncated else None
            flight.body_copy = None
            self._peek(flight, copy.buf)  # as much as was read still names the request
        flight.body_done = True
        self._parse(flight)
        self._load_seen(flight.clock)
        if self.analyzer:
            self.analyzer.finish(flight)

    def _load_seen(self, c: Clock) -> None:
        """What the proxy's own load did to this request (Clock.apply turns it into proxy_* columns)."""
        end = c.end if c.end is not None else time.perf_counter()
        if not c.lag_measured:
            c.lag_in = self.loadwatch.wait_before(c.t0)
        if self.ready_at is not None:  # its bytes came while the proxy was starting (`run`: a port open early)
            c.start_wait = max(0.0, min(c.lag_in, self.ready_at - (c.t0 - c.lag_in)))
        c.lag_during = self.loadwatch.lag_max(c.hook if c.hook is not None else c.t0, end)
        c.cpu = self.loadwatch.cpu_between(min(c.t0, end - 1.0), end)
        if c.lag_in + c.lag_during >= 0.02:  # only when the proxy was late at all (a read of /proc/loadavg)
            c.machine_load = self.loadwatch.machine_load()

    def _put(self, row: dict[str, Any]) -> None:
        if self.writer:
            self.writer.put(row)

    def _done(self, flight: Flight) -> None:
        """Worker thread: a record is final. Tell listeners; annotate the flow for mitmweb."""
        for fn in list(self.listeners):
            try:
                fn(flight.record)
            except Exception:
                log.exception("firsttoken: listener failed")
        # Only where someone looks at flows (mitmweb, mitmproxy's console: a "view" addon);
        # a note about the proxy's own load is not the flow's: annotating would add load.
        if self._loop is not None and flight.flow is not None and self._shows_flows() and any(
                f["code"] != "proxy.saturated" for f in flight.record.findings):
            try:
                self._loop.call_soon_threadsafe(_annotate, flight.flow, flight.record.findings)
            except RuntimeError:
                pass  # loop closed during shutdown

    def _idle(self) -> None:
        for fn in list(self.idle_listeners):
            try:
                fn()
            except Exception:
                log.exception("firsttoken: idle listener failed")

    @staticmethod
    def _shows_flows() -> bool:
        """Whether this mitmproxy shows flows to a person (mitmweb, the console: they have a
        ``view`` addon), where a finding as the flow's comment and mark is seen."""
        try:
            return ctx.master.addons.get("view") is not None
        except Exception:
            return False

    def _store_health(self, health: dict[str, Any]) -> None:
        for fn in list(self.store_listeners):
            try:
                fn(health)
            except Exception:
                log.exception("firsttoken: store listener failed")

    def store_health(self) -> dict[str, Any] | None:
        """The writer's health (``Writer.health()``), None before the store is open."""
        return self.writer.health() if self.writer is not None else None

    def in_flight(self) -> int:
        """Requests being forwarded: this process's and, with worker processes, theirs as handed over so far."""
        return len(self.flights) + (len(self.hub.flights) if self.hub is not None else 0)

    # -- for the live view ---------------------------------------------------------
    def snapshot(self) -> dict[str, Any]:
        flights = list(self.flights.values())
        if self.analyzer is not None and any(f.tap is not None and f.tap.deferring for f in flights):
            self.analyzer.catch_up(flights, live=True)  # fresh counts for the next snapshot
        if self.hub is not None:  # the workers' requests in flight, as handed over so far
            flights += list(self.hub.flights.values())
        recent = list(self.analyzer.recent) if self.analyzer else []
        return {
            "now": time.perf_counter(),
            "in_flight": [f.live_view() for f in flights],
            "recent": recent,
            "routes": self.routes,
            "db_path": self.db_path,
            "started": self.started,
            "store": self.store_health(),
            "load": self.loadwatch.snapshot(),
        }


def hooks_run_eagerly(loop: asyncio.AbstractEventLoop) -> bool:
    """Whether mitmproxy starts hook tasks eagerly on this loop (it sets asyncio's eager task
    factory on Python 3.12+): a hook then runs before mitmproxy has passed the data on."""
    eager = getattr(asyncio, "eager_task_factory", None)
    return eager is not None and loop.get_task_factory() is eager


def _apply(flow: http.HTTPFlow, p: RequestPlan) -> None:
    """Send the request where the plan says, or answer it with the plan's refusal."""
    req = flow.request
    if p.refusal is not None:
        headers = {"content-type": "application/json", **({"connection": "close"} if p.refusal.close else {})}
        flow.response = http.Response.make(p.refusal.status, p.refusal.body(), headers)
        req.stream = False  # a response set here must not meet request streaming
    if p.path != req.path and p.target is None:
        req.path = p.path  # a run mark stripped, no route matched
    if p.target is not None:
        req.scheme, req.port, req.host = p.target.scheme, p.target.port, p.target.host
        req.path = p.upstream_path


def _client_framing(flow: http.HTTPFlow, draining: bool) -> None:
    """Frame the response for the client that asked (hop-by-hop headers only; the body is untouched).

    An HTTP/1.0 client does not know chunked encoding (RFC 9112 §7.1: never send it one): it
    gets the body delimited by the connection's close instead. While the proxy drains, an
    HTTP/1.1 client is told the connection closes after this response, so it does not send
    its next request into a proxy that is stopping."""
    req, resp = flow.request, flow.response
    if resp is None or req.http_version not in ("HTTP/1.0", "HTTP/1.1"):
        return
    if req.http_version == "HTTP/1.0":
        if "transfer-encoding" in resp.headers:
            del resp.headers["transfer-encoding"]
            resp.headers.pop("content-length", None)  # RFC 9112 §6.3: ignored next to chunked anyway
        resp.headers["connection"] = "close"
    elif draining:
        resp.headers["connection"] = "close"


def _header_dict(headers) -> dict[str, str]:
    """mitmproxy's headers as a dict of lower-case names, repeated fields joined with ", " as
    ``Headers.get`` joins them."""
    out: dict[str, str] = {}
    for k, v in headers.items(multi=True):
        k = k.lower()
        out[k] = f"{out[k]}, {v}" if k in out else v
    return out


def _retry_after(headers) -> float | None:
    """Seconds to wait, from `retry-after-ms` or `retry-after` (seconds or an HTTP date)."""
    try:
        if "retry-after-ms" in headers:
            return float(headers["retry-after-ms"]) / 1000.0
        v = headers.get("retry-after")
        if not v:
            return None
        try:
            return float(v)
        except ValueError:
            from email.utils import parsedate_to_datetime

            when = parsedate_to_datetime(v)
            return max(0.0, when.timestamp() - time.time())
    except (TypeError, ValueError, OverflowError):
        return None


def _annotate(flow: http.HTTPFlow, findings: list[dict[str, Any]]) -> None:
    flow.comment = "\n".join(f"[{f['severity']}] {f['code']}: {f['message']}" for f in findings)
    if any(f["severity"] == "error" for f in findings):
        flow.marked = ":exclamation:"
    try:
        from mitmproxy import hooks

        ctx.master.addons.trigger(hooks.UpdateHook([flow]))
    except Exception:
        pass


#: what every turn of a WebSocket takes from its upgrade
_WS_BASE = ("route", "upstream", "path", "upstream_url", "experiment", "run_id", "egress_proxy", "proxy_pid",
            "proxy_worker", "key_header", "key_fingerprint", "key_scheme", "key_length", "server", "via", "upstream_request_id")

_START_FIELDS = (
    "id", "started_at", "state", "phase", "proxy_pid", "proxy_worker", "route", "upstream", "method", "path", "upstream_url",
    "api", "model", "stream", "experiment", "run_id", "egress_proxy", "key_header", "key_fingerprint", "key_scheme", "key_length", "key_facts", "error",
)
_WS_START_FIELDS = (*_START_FIELDS, "stream", "status", "transport", "ws_connection_id", "ws_turn", "ws_connection",
                    "request_bytes", "conn_reused")
