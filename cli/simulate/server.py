"""HTTP/1.1 plumbing of the simulator: the threaded server, request reading, routing, auth, replies."""

from __future__ import annotations

import collections
import json
import re
import socket
import sys
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from firsttoken.addon.websocket import is_upgrade
from firsttoken.cli.loopback import shut_down
from firsttoken.cli.simulate import faults as errors
from firsttoken.cli.simulate import tokens
from firsttoken.cli.simulate import websocket as ws
from firsttoken.cli.simulate.cache import PromptCache
from firsttoken.cli.simulate.config import FAULT_HEADER, FAULTS, SimConfig, UnknownFault, parse_faults
from firsttoken.cli.simulate.engine import answer, proto_of
from firsttoken.cli.simulate.timing import Jitter, Schedule, sleep_until
from firsttoken.cli.simulate.wire import BlockWriter, BodyWriter, gzip_bytes, hexid

# path after the prefix -> (method, api)
ROUTES: dict[tuple[str, str], str] = {
    ("POST", "/v1/chat/completions"): "chat",
    ("POST", "/v1/completions"): "completions",
    ("POST", "/v1/responses"): "responses",
    ("POST", "/v1/messages"): "anthropic",
    ("POST", "/v1/messages/count_tokens"): "count_tokens",
    ("GET", "/v1/models"): "models",
}
MODELS = ("sim-1", "sim-think-1", "sim-reason-1", "sim-tool-1") + tuple("fault-" + f for f in FAULTS)
_ANTHROPIC_PATH = re.compile(r"/(messages|complete)(/|$)")


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True
    request_queue_size = 256

    def handle_error(self, request: Any, client_address: Any) -> None:
        exc = sys.exc_info()[1]
        if isinstance(exc, (ConnectionError, TimeoutError, OSError)):
            return  # the client went away
        super().handle_error(request, client_address)


class SimHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "firsttoken-simulate/0.1"
    sys_version = ""
    timeout = 300  # idle keep-alive connections
    arrival = 0.0
    note = ""

    @property
    def sim(self) -> SimServer:
        return self.server.sim  # type: ignore[attr-defined]

    # ---- connection bookkeeping ----------------------------------------------------------------

    def setup(self) -> None:
        super().setup()
        try:
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:
            pass
        self.sim._track(self.connection, True)

    def finish(self) -> None:
        try:
            super().finish()
        except OSError:
            pass
        finally:
            self.sim._track(self.connection, False)

    def parse_request(self) -> bool:
        self.arrival = time.monotonic()  # the request line just arrived: every deadline counts from here
        self.note = ""
        ok = super().parse_request()
        if ok:  # where it arrived (this server's host:port, as the client addressed it) and what it asked
            self.sim.arrivals.append(Arrival(self.headers.get("Host") or "", self.server.server_address[1],
                                             self.command, self.path))
        return ok

    def version_string(self) -> str:
        return self.server_version

    def log_message(self, format: str, *args: Any) -> None:
        if self.sim.config.verbose:
            sys.stderr.write(f"{self.log_date_time_string()} {format % args}\n")

    def log_request(self, code: Any = "-", size: Any = "-") -> None:
        self.status = code  # logged by _dispatch once the answer is complete

    # ---- replies -------------------------------------------------------------------------------

    def _headers(self, status: int, headers: dict[str, str]) -> None:
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)

    def send_bytes(self, status: int, data: bytes, headers: dict[str, str], *, drop: bool = False,
                   due: float | None = None) -> None:
        """``due``: the deadline of a whole answer (logged in ``SimServer.sent`` with when it went out)."""
        self._headers(status, headers)
        self.send_header("Content-Length", str(len(data)))
        sent = self.log_answer() if due is not None else None
        self.end_headers()
        if drop:  # announce the whole body, send half of it, hang up
            self.wfile.write(data[: len(data) // 2])
            self.drop()
            return
        if self.command != "HEAD":
            if sent is not None:  # logged as it goes out: a client may read the log as soon as it has the answer
                sent.writes.append((due, time.monotonic(), data))
            self.wfile.write(data)

    def send_json(self, status: int, body: Any, headers: dict[str, str] | None = None, *, gzip: bool = False,
                  indent: int | None = None, drop: bool = False, due: float | None = None) -> None:  # fmt: skip
        headers = dict(headers or {})
        headers.setdefault("Content-Type", "application/json")
        if indent:
            data = (json.dumps(body, indent=indent, ensure_ascii=False) + "\n").encode()
        else:
            data = json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()
        if gzip:
            data = gzip_bytes(data)
            headers["Content-Encoding"] = "gzip"
        self.send_bytes(status, data, headers, drop=drop, due=due)

    def send_error_reply(self, reply: errors.ErrorReply, proto: str) -> None:
        headers = dict(reply.headers)
        if proto == "anthropic":
            headers["request-id"] = str(reply.body.get("request_id") or "")
            headers["x-should-retry"] = headers.get("x-should-retry", "false")
            self.send_json(reply.status, reply.body, headers)
        else:
            headers["x-request-id"] = "req_" + hexid(32)
            self.send_json(reply.status, reply.body, headers, indent=4)
        self.note += f" {reply.body.get('error', {}).get('type') or reply.body.get('error', {}).get('code')}"

    def start_stream(self, status: int, headers: dict[str, str], *, gzip: bool, buffered: bool,
                     block: int = 0) -> BodyWriter:
        if block:  # a buffering proxy in front: the headers too wait for the first full block; the
            # connection then closes (the server's finish() flushes the rest), so no later response waits
            self.wfile = BlockWriter(self.wfile, block)
            self.close_connection = True
            headers = {**headers, "Connection": "close"}
        self._headers(status, headers)
        if gzip:
            self.send_header("Content-Encoding", "gzip")
        if self.request_version == "HTTP/1.0":
            self.close_connection = True
            sent = self.log_answer()
            self.end_headers()
            return BodyWriter(self.wfile, gzip=gzip, buffered=buffered, chunked=False, log=sent.writes)
        self.send_header("Transfer-Encoding", "chunked")
        sent = self.log_answer()
        self.end_headers()
        return BodyWriter(self.wfile, gzip=gzip, buffered=buffered, log=sent.writes)

    def log_answer(self) -> Sent:
        """The send log of this answer (``SimServer.sent``), its headers about to go out now."""
        sent = Sent(self.path, self.arrival, time.monotonic())
        self.sim.sent.append(sent)
        return sent

    def drop(self) -> None:
        """Close the TCP connection now, whatever state the response is in."""
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    # ---- requests ------------------------------------------------------------------------------

    def do_GET(self) -> None:
        self._dispatch()

    def do_POST(self) -> None:
        self._dispatch()

    do_PUT = do_DELETE = do_PATCH = do_POST

    def do_HEAD(self) -> None:
        """A reachability probe (Claude Code sends ``HEAD`` to its base URL before the first
        call): answered 200 with no body, as the real APIs' front ends do."""
        self.status = 200
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def _read_body(self) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            parts = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(parts)
                parts.append(self.rfile.read(size))
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length > 0 else b""

    def given_api_key(self, proto: str) -> str | None:
        auth = self.headers.get("Authorization", "")
        bearer = auth[7:].strip() if auth.lower().startswith("bearer ") else None
        if proto == "anthropic":
            return self.headers.get("x-api-key") or bearer
        return bearer or self.headers.get("api-key")

    def _guess_proto(self, path: str) -> str:
        protocols = self.sim.config.protocols
        if len(protocols) == 1:
            return protocols[0]
        if "anthropic-version" in self.headers or _ANTHROPIC_PATH.search(path):
            return "anthropic"
        return "openai"

    def _dispatch(self) -> None:
        self.status: Any = "-"
        try:
            self._route()
        except (ConnectionError, TimeoutError):
            self.close_connection = True
            self.note += " client gone"
        finally:
            if self.sim.config.verbose:
                ms = round((time.monotonic() - self.arrival) * 1000)
                self.log_message("%s %s -> %s %s (%d ms)", self.command, self.path, self.status, self.note.strip(), ms)

    def _route(self) -> None:
        cfg = self.sim.config
        if self.command == "GET" and cfg.websocket and is_upgrade(self.headers):
            if self.path.split("?", 1)[0] == cfg.prefix + "/v1/responses" and "openai" in cfg.protocols:
                return ws.serve(self)  # Responses over a WebSocket: one response.create frame per turn
        raw = self._read_body()
        sched = Schedule(cfg, self.arrival, self.sim.jitter, slow_ttfb=False)
        path = self.path.split("?", 1)[0]
        rest = path[len(cfg.prefix) :] if path.startswith(cfg.prefix + "/") else None
        api = ROUTES.get((self.command, rest or ""))
        if api == "models":
            proto = "anthropic" if ("anthropic-version" in self.headers and "anthropic" in cfg.protocols) else None
            proto = proto or ("openai" if "openai" in cfg.protocols else "anthropic")
        else:
            proto = proto_of(api) if api else self._guess_proto(path)
        if api is None or proto not in cfg.protocols:
            return self._reply_at(sched, errors.not_found(self._guess_proto(path), self.command, path))
        if cfg.api_key is not None and self.given_api_key(proto) != cfg.api_key:
            return self._reply_at(sched, errors.unauthorized(proto, self.given_api_key(proto)))
        if api == "models":
            if sleep_until(sched.headers_at, self.sim.stop_event):
                self.send_json(200, _models_body(proto), indent=2 if proto == "openai" else None)
            return
        try:
            body = json.loads(raw)
            if not isinstance(body, dict):
                raise ValueError("expected a JSON object")
        except (ValueError, UnicodeDecodeError) as exc:
            return self._reply_at(sched, errors.malformed(proto, exc))
        invalid = errors.validate(api, body)
        if invalid is not None:
            return self._reply_at(sched, invalid)
        if api == "count_tokens":
            if sleep_until(sched.headers_at, self.sim.stop_event):
                self.send_json(200, {"input_tokens": tokens.count_prompt_tokens("anthropic", body)})
            return
        try:
            fault_set = parse_faults(self.headers.get(FAULT_HEADER), body.get("model"))
        except UnknownFault as exc:
            return self._reply_at(sched, errors.unknown_fault(proto, str(exc)))
        if "slow_ttfb" in fault_set:
            sched = Schedule(cfg, self.arrival, self.sim.jitter, slow_ttfb=True)
        answer(self, api, body, fault_set, sched)

    def _reply_at(self, sched: Schedule, reply: errors.ErrorReply) -> None:
        if sleep_until(sched.headers_at, self.sim.stop_event):
            self.send_error_reply(reply, "anthropic" if "type" in reply.body else "openai")


def _models_body(proto: str) -> dict[str, Any]:
    created = 1700000000
    if proto == "anthropic":
        data = [
            {"type": "model", "id": m, "display_name": m, "created_at": "2025-01-01T00:00:00Z"} for m in MODELS
        ]
        return {"data": data, "has_more": False, "first_id": MODELS[0], "last_id": MODELS[-1]}
    data = [{"id": m, "object": "model", "created": created, "owned_by": "firsttoken"} for m in MODELS]
    return {"object": "list", "data": data}


@dataclass(frozen=True)
class Arrival:
    """A request as it reached the simulator: where (its Host header and our port) and what."""

    host: str
    port: int
    method: str
    path: str


@dataclass
class Sent:
    """When an answer went out (time.monotonic): its request line arrived, its headers were
    sent, and each body write (its deadline, when it was written, its bytes). Tests bound what a
    client or the proxy measured by what the upstream really did on a machine too busy to keep time."""

    path: str
    arrival: float
    headers: float
    writes: list[tuple[float | None, float, bytes]] = field(default_factory=list)


class SimServer:
    """The simulated upstream. `with SimServer(SimConfig(ttfb_ms=20)) as sim: ... sim.url ...`"""

    def __init__(self, config: SimConfig | None = None, host: str = "127.0.0.1", port: int = 0) -> None:
        self.config = config or SimConfig()
        self.host = host
        self._requested_port = port
        self.jitter = Jitter(self.config.jitter, self.config.seed)
        self.prompt_cache = PromptCache()
        self.stop_event = threading.Event()
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._conns: set[socket.socket] = set()
        self._lock = threading.Lock()
        self.arrivals: list[Arrival] = []  # every request that reached this server, in order
        #: Responses turns over a WebSocket (method "WS"), each on an upgrade that is in ``arrivals``
        #: too and was answered 101 (counted in ``upgrades``)
        self.ws_turns: list[Arrival] = []
        self.upgrades = 0
        self.sent: collections.deque[Sent] = collections.deque(maxlen=256)  # the latest answers' send log

    def arrived_turn(self, host: str, port: int, path: str) -> None:
        """A WebSocket turn (a ``response.create`` frame) reached this server."""
        self.ws_turns.append(Arrival(host, port, "WS", path))

    def _track(self, conn: socket.socket, add: bool) -> None:
        with self._lock:
            (self._conns.add if add else self._conns.discard)(conn)

    def start(self) -> SimServer:
        if self._httpd is not None:
            return self
        tokens.encoding()  # load the tokenizer now, not during the first request
        self.stop_event.clear()
        server_cls = _HTTPServer
        if ":" in self.host:
            server_cls = type("_HTTPServer6", (_HTTPServer,), {"address_family": socket.AF_INET6})
        self._httpd = server_cls((self.host, self._requested_port), SimHandler)
        self._httpd.sim = self  # type: ignore[attr-defined]
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="firsttoken-simulate", daemon=True
        )
        self._thread.start()
        return self

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("SimServer is not started")
        return self._httpd.server_address[1]

    @property
    def url(self) -> str:
        host = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(self.host, self.host)
        host = f"[{host}]" if ":" in host else host
        return f"http://{host}:{self.port}"

    @property
    def openai_base_url(self) -> str:
        return f"{self.url}{self.config.prefix}/v1"

    @property
    def anthropic_base_url(self) -> str:
        return f"{self.url}{self.config.prefix}"

    def stop(self) -> None:
        if self._httpd is None:
            return
        self.stop_event.set()  # wakes every scheduled sleep
        self._httpd.shutdown()
        with self._lock:
            conns = list(self._conns)
        shut_down(conns)
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        deadline = time.monotonic() + 2
        while self._conns and time.monotonic() < deadline:
            time.sleep(0.01)
        self._httpd = None
        self._thread = None

    def __enter__(self) -> SimServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
