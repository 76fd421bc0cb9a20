"""Servers on loopback: a free port, waiting until something listens on one, and the Host rule.

Used by the demo, the benchmarks and the tests, which all start real servers on 127.0.0.1; the
Host rule by firsttoken's own loopback servers (``browse``, the proxy's live feed).
"""

from __future__ import annotations

import socket
import subprocess
import time


class NotListening(RuntimeError):
    pass


def free_port() -> int:
    """A port nothing listens on right now (the OS picks it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, proc: subprocess.Popen | None = None, timeout: float = 30.0) -> None:
    """Return once 127.0.0.1:port accepts connections; raise NotListening if ``proc`` exits or time runs out."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc is not None and proc.poll() is not None:
            raise NotListening(f"a server process exited early (code {proc.returncode}): {proc.args!r}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise NotListening(f"nothing listened on port {port} within {timeout:.0f} s")


def shut_down(conns: list[socket.socket]) -> None:
    """Shut down both ways each of these open connections (a server stopping: their handler threads' reads return
    at once instead of waiting for the client). One already closed is passed over."""
    for conn in conns:
        try:
            conn.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def loopback_host(host: str | bytes | None) -> bool:
    """Whether an HTTP request's Host header names the loopback interface (127.0.0.1, localhost,
    [::1], any port). firsttoken's own servers listen there only, so another name means a page
    elsewhere rebinding its DNS to read them: they refuse it. No Host at all (HTTP/1.0) is
    nothing a browser sends."""
    if host is None:
        return True
    name = (host.decode("latin-1") if isinstance(host, bytes) else host).strip().lower()
    name = name.rsplit("]", 1)[0] + "]" if name.startswith("[") else name.rsplit(":", 1)[0]
    return name in ("127.0.0.1", "localhost", "[::1]")
