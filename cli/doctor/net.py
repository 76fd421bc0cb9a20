"""The network as `firsttoken doctor` sees it: probes with short timeouts that never hang.

:class:`Net` is what a check's :class:`~firsttoken.cli.doctor_core.Context` carries, so a test
can swap it for a fake (no DNS, a trusted test CA…).
"""

from __future__ import annotations

import http.client
import socket
import ssl
import threading
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit


class Net:
    """Probes that never raise and never wait longer than ``timeout``."""

    def __init__(self, timeout: float = 2.0) -> None:
        self.timeout = timeout
        #: CA files the upstream's certificate is verified against besides the system's (firsttoken's
        #: own trust: addon/egress/trust.py); set by check_upstreams
        self.cafiles: list[str] = []

    def _bounded(self, fn: Callable[[], Any]) -> Any:
        """Run fn in a daemon thread; TimeoutError if it takes too long (getaddrinfo has no timeout)."""
        box: dict[str, Any] = {}

        def run() -> None:
            try:
                box["v"] = fn()
            except BaseException as e:  # noqa: BLE001 - reported to the caller
                box["e"] = e

        t = threading.Thread(target=run, daemon=True)
        t.start()
        t.join(self.timeout)
        if t.is_alive():
            raise TimeoutError(f"no answer within {self.timeout:g} s")
        if "e" in box:
            raise box["e"]
        return box["v"]

    def listening(self, host: str, port: int) -> str | None:
        """None when something accepts TCP connections at host:port, else the error."""
        try:
            with socket.create_connection((host, port), timeout=min(self.timeout, 1.0)):
                return None
        except OSError as e:
            return describe_oserror(e)

    def resolve(self, host: str, port: int) -> list[str]:
        infos = self._bounded(lambda: socket.getaddrinfo(host, port, type=socket.SOCK_STREAM))
        return list(dict.fromkeys(i[4][0] for i in infos))

    def connect(self, addr: str, port: int) -> socket.socket:
        return socket.create_connection((addr, port), timeout=self.timeout)

    def tls(self, sock: socket.socket, host: str) -> str:
        ctx = ssl.create_default_context()
        for f in self.cafiles:
            try:
                ctx.load_verify_locations(cafile=f)
            except (OSError, ssl.SSLError):
                pass  # not a CA bundle: firsttoken's proxy skips it too
        with ctx.wrap_socket(sock, server_hostname=host) as s:
            return s.version() or "TLS"

    def get(self, url: str, limit: int = 1 << 20) -> tuple[int, str, bytes]:
        """One read-only ``GET url``, direct (never through a proxy variable), no redirect followed, no
        credential sent: (status, content type, at most ``limit`` bytes of the body)."""
        u = urlsplit(url)
        if u.scheme == "https":
            ctx = ssl.create_default_context()
            for f in self.cafiles:
                try:
                    ctx.load_verify_locations(cafile=f)
                except (OSError, ssl.SSLError):
                    pass
            conn: http.client.HTTPConnection = http.client.HTTPSConnection(u.hostname or "", u.port, timeout=self.timeout,
                                                                           context=ctx)
        else:
            conn = http.client.HTTPConnection(u.hostname or "", u.port, timeout=self.timeout)

        def fetch() -> tuple[int, str, bytes]:
            try:
                conn.request("GET", (u.path or "/") + (f"?{u.query}" if u.query else ""),
                             headers={"Accept": "application/json", "User-Agent": "firsttoken-doctor"})
                r = conn.getresponse()
                return r.status, r.getheader("content-type") or "", r.read(limit)
            finally:
                conn.close()

        return self._bounded(fetch)

    def proxy_request(self, sock: socket.socket, head: bytes) -> tuple[int, str]:
        """Send a request head to a proxy and read its status line: (status, reason)."""
        sock.sendall(head)
        buf = b""
        while b"\r\n\r\n" not in buf and len(buf) < 65536:
            data = sock.recv(4096)
            if not data:
                break
            buf += data
        line = buf.split(b"\r\n", 1)[0].decode("latin-1", "replace")
        parts = line.split(" ", 2)
        if len(parts) < 2 or not parts[1].isdigit():
            raise OSError(f"the proxy answered something that is not HTTP: {line[:80]!r}")
        return int(parts[1]), (parts[2] if len(parts) > 2 else "").strip()


def describe_oserror(e: BaseException) -> str:
    if isinstance(e, ConnectionRefusedError):
        return "connection refused"
    if isinstance(e, (socket.timeout, TimeoutError)):
        return "timed out"
    return str(e) or type(e).__name__
