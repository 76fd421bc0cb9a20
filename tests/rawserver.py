"""Loopback upstreams that send exactly the bytes a test gives it (for byte-identity and garbage): HTTP
servers, and ``SocketUpstream``, a raw socket whose every connection a test scripts."""

from __future__ import annotations

import hashlib
import socket
import threading
import time
from collections.abc import Callable, Iterable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import NamedTuple

from firsttoken.cli.loopback import shut_down


class LoopbackServer:
    """A threaded HTTP server on 127.0.0.1 (a free port, or ``port``) serving a handler class while in a with-block."""

    def serve(self, handler: type[BaseHTTPRequestHandler], port: int = 0) -> None:
        self.httpd = ThreadingHTTPServer(("127.0.0.1", port), handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self._t = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self._t.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


class RawUpstream(LoopbackServer):
    """Serves ``chunks`` (list of bytes) with ``delay`` seconds between them, chunked encoding;
    ``end_delay`` seconds pass between the last chunk and the terminating zero-length one."""

    def __init__(self, chunks: list[bytes], headers: dict[str, str] | None = None, delay: float = 0.0, status: int = 200,
                 end_delay: float = 0.0):
        self.chunks = chunks
        self.end_delay = end_delay
        self.headers = headers or {"content-type": "text/event-stream"}
        self.delay = delay
        self.status = status
        self.sent = hashlib.sha256()
        self.requests: list[tuple[str, dict, bytes]] = []
        outer = self

        class H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_POST(self):
                n = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(n) if n else b""
                outer.requests.append((self.path, dict(self.headers), body))
                self.send_response(outer.status)
                for k, v in outer.headers.items():
                    self.send_header(k, v)
                self.send_header("transfer-encoding", "chunked")
                self.end_headers()
                for c in outer.chunks:
                    if outer.delay:
                        time.sleep(outer.delay)
                    outer.sent.update(c)
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(c), c))
                    self.wfile.flush()
                if outer.end_delay:
                    time.sleep(outer.end_delay)
                try:
                    self.wfile.write(b"0\r\n\r\n")
                    self.wfile.flush()
                except OSError:  # the proxy let go of the connection already (the client had closed)
                    pass

            do_GET = do_POST

        self.serve(H)


class GatedUpstream(LoopbackServer):
    """A streamed answer that moves on only when the test says: it holds its headers until
    ``headers`` is set, then its first token until ``tokens`` is set, sends ``first`` token chunks,
    and ends (the rest, then the terminator) when ``end`` is set. What a view shows at each step
    is then known whatever a busy machine's clock does."""

    def __init__(self, first: list[bytes], rest: list[bytes]):
        self.headers, self.tokens, self.end = threading.Event(), threading.Event(), threading.Event()
        outer = self

        class H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def _send(self, chunks: list[bytes]) -> None:
                for c in chunks:
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(c), c))
                self.wfile.flush()

            def do_POST(self):
                n = int(self.headers.get("content-length") or 0)
                if n:
                    self.rfile.read(n)
                outer.headers.wait(60)
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("transfer-encoding", "chunked")
                self.end_headers()
                self.wfile.flush()
                outer.tokens.wait(60)
                self._send(first)
                outer.end.wait(60)
                self._send(rest)
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()

        self.serve(H)


class Replay:
    """One recorded exchange to serve: ``parts`` are written in order, ``gaps[i]`` seconds after
    the previous one; ``framing`` is ``chunked`` (one HTTP chunk per part), ``length``
    (Content-Length) or ``close`` (the body ends when the connection closes).

    After it has been served: ``request`` (method, target, headers, body), ``received_at`` (the
    request had been read), ``sent_at[i]`` (part i was about to be written) and ``ended_at``,
    all ``time.perf_counter()``; ``body`` is every body byte written."""

    def __init__(self, status: int, headers: list[tuple[str, str]], parts: list[bytes],
                 gaps: list[float] | None = None, framing: str = "chunked"):
        if framing not in ("chunked", "length", "close"):
            raise ValueError(f"unknown framing {framing!r}")
        self.status = status
        self.headers = headers
        self.parts = parts
        self.gaps = gaps or [0.0] * len(parts)
        self.framing = framing
        self.request: tuple[str, str, list[tuple[str, str]], bytes] | None = None
        self.received_at: float | None = None
        self.sent_at: list[float] = []
        self.ended_at: float | None = None
        self.body = bytearray()
        self.done = threading.Event()


class ReplayUpstream(LoopbackServer):
    """A loopback HTTP/1.1 upstream that answers each request with the armed ``Replay``.

    One server serves many recorded exchanges in turn (``arm`` before each request), so a
    test can send the client's real request, untouched, through a proxy in front of it."""

    def __init__(self) -> None:
        self.current: Replay | None = None
        outer = self

        class H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_POST(self):
                n = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(n) if n else b""
                r = outer.current
                if r is None or r.done.is_set():
                    self.send_error(409, "no replay armed")
                    return
                r.received_at = time.perf_counter()
                r.request = (self.command, self.path, list(self.headers.items()), body)
                try:
                    self._serve(r)
                finally:
                    r.ended_at = time.perf_counter()
                    r.done.set()

            def _serve(self, r: Replay) -> None:
                w = self.wfile
                head = [f"HTTP/1.1 {r.status} {_reason(r.status)}"]
                head += [f"{k}: {v}" for k, v in r.headers]
                if r.framing == "chunked":
                    head.append("Transfer-Encoding: chunked")
                elif r.framing == "length":
                    head.append(f"Content-Length: {sum(len(p) for p in r.parts)}")
                else:
                    head.append("Connection: close")
                    self.close_connection = True
                w.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1"))
                w.flush()
                for part, gap in zip(r.parts, r.gaps):
                    if gap:
                        time.sleep(gap)
                    r.sent_at.append(time.perf_counter())
                    r.body += part
                    w.write(b"%x\r\n%s\r\n" % (len(part), part) if r.framing == "chunked" else part)
                    w.flush()
                if r.framing == "chunked":
                    w.write(b"0\r\n\r\n")
                    w.flush()

            do_GET = do_POST

        self.serve(H)

    def arm(self, replay: Replay) -> Replay:
        self.current = replay
        return replay


class RawRequest(NamedTuple):
    """One request a ``SocketUpstream`` read: ``head`` (the request line and header lines, without
    the blank line) and ``body`` (Content-Length bytes, or as many as came before the peer stopped)."""

    head: bytes
    body: bytes


class SocketConn:
    """One connection a ``SocketUpstream`` accepted, as its script reads and writes it."""

    def __init__(self, sock: socket.socket, upstream: SocketUpstream):
        self.sock = sock
        self.upstream = upstream
        self.buffered = b""  # read, not yet part of a request

    def recv(self) -> bytes:
        """The next bytes the peer sent (recorded in ``upstream.received``); b"" once it closed,
        the connection broke, or the read timed out."""
        try:
            got = self.sock.recv(65536)
        except OSError:  # a timeout, a reset, or close() shutting the connection down
            return b""
        self.upstream.record(got)
        return got

    def read_request(self, timeout: float | None = None) -> RawRequest | None:
        """Reads one HTTP/1.1 request: its head up to the blank line, then Content-Length bytes of
        body (no more: a kept-alive connection's next request stays buffered). None when the head
        never came whole (the peer closed, or ``timeout`` seconds passed without a byte); a body cut
        short is returned as far as it came. Each request is added to ``upstream.requests``."""
        self.sock.settimeout(timeout)
        while b"\r\n\r\n" not in self.buffered:
            got = self.recv()
            if not got:
                return None
            self.buffered += got
        head, _, rest = self.buffered.partition(b"\r\n\r\n")
        n = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")[1:]
                  if line.lower().startswith(b"content-length:")), 0)
        while len(rest) < n:
            got = self.recv()
            if not got:
                break
            rest += got
        req = RawRequest(head, rest[:n])
        self.buffered = rest[n:]
        self.upstream.requests.append(req)
        return req

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)


class SocketUpstream:
    """A raw-socket upstream on 127.0.0.1 (a free port), for answers no HTTP server class writes:
    each connection it accepts runs ``script(conn)`` (a ``SocketConn``) on a thread of its own and
    is closed when the script returns (an ``OSError`` in it, the peer gone, ends it quietly).

    What arrived: ``connections`` (accepted), ``requests`` (each ``RawRequest`` read, in order) and
    ``received`` (every byte read). A with-block or ``close()`` stops it: no more accepts, open
    connections shut down, their scripts given a few seconds to end."""

    def __init__(self, script: Callable[[SocketConn], object]):
        self.script = script
        self.sock = socket.create_server(("127.0.0.1", 0), backlog=64)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.connections = 0
        self.requests: list[RawRequest] = []
        self.received = b""
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self._threads: list[threading.Thread] = []
        self._acceptor = threading.Thread(target=self._accept, daemon=True)
        self._acceptor.start()

    def record(self, data: bytes) -> None:
        with self._lock:
            self.received += data

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:  # close() shut the listener down
                return
            with self._lock:
                self.connections += 1
                self._open.add(conn)
            t = threading.Thread(target=self._run, args=(conn,), daemon=True)
            self._threads.append(t)
            t.start()

    def _run(self, conn: socket.socket) -> None:
        try:
            with conn:
                self.script(SocketConn(conn, self))
        except OSError:
            pass
        finally:
            with self._lock:
                self._open.discard(conn)

    def close(self) -> None:
        try:
            self.sock.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept(); close() alone does not on Linux
        except OSError:
            pass
        self.sock.close()
        self._acceptor.join(5)
        with self._lock:
            still = list(self._open)
        shut_down(still)
        deadline = time.monotonic() + 5
        for t in self._threads:
            t.join(max(0.0, deadline - time.monotonic()))

    def __enter__(self) -> SocketUpstream:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def answer_each(answer: Callable[[RawRequest], bytes | Iterable[bytes]]) -> Callable[[SocketConn], None]:
    """A ``SocketUpstream`` script: reads one request and writes what ``answer(request)`` returns,
    bytes or an iterable of bytes (each written as it comes: a generator paces a stream), then closes."""

    def script(conn: SocketConn) -> None:
        req = conn.read_request()
        if req is None:
            return
        out = answer(req)
        for part in [out] if isinstance(out, bytes) else out:
            conn.send(part)

    return script


def _reason(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Status"
