"""What the benchmarks share: free ports, waiting for a server, timing one stream."""

from __future__ import annotations

import contextlib
import http.client
import re
import signal
import socket
import subprocess
import threading
import time
from typing import Any, Iterator

import click

_CONTENT = re.compile(rb'"content":\s*"[^"]')


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, proc: subprocess.Popen, timeout: float = 30.0) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            raise click.ClickException(f"a benchmark process exited early (code {proc.returncode}): {proc.args!r}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise click.ClickException(f"nothing listened on port {port} within {timeout:.0f} s")


def stream_once(port: int, body: bytes, start: threading.Barrier | None = None) -> tuple[float, float]:
    """(TTFB, TTFT) in ms of one streaming request, as the client sees them."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        conn.connect()
        if start is not None:
            start.wait(30)
        t0 = time.perf_counter()
        conn.request("POST", "/v1/chat/completions", body=body, headers={
            "content-type": "application/json", "authorization": "Bearer sk-bench-live-000000000000000000"})
        resp = conn.getresponse()
        ttfb = time.perf_counter() - t0
        ttft, buf = None, b""
        while True:
            chunk = resp.read1(65536)
            if not chunk:
                break
            if ttft is None:
                buf += chunk
                if _CONTENT.search(buf):
                    ttft = time.perf_counter() - t0
        return ttfb * 1000.0, (ttft if ttft is not None else time.perf_counter() - t0) * 1000.0
    finally:
        conn.close()


@contextlib.contextmanager
def process(argv: list[str], port: int, **popen: Any) -> Iterator[subprocess.Popen]:
    """A server process for the length of a with-block: started, awaited on its port, then
    stopped with SIGINT (as a user's Ctrl-C) and killed only if it does not stop."""
    popen.setdefault("stdin", subprocess.DEVNULL)
    popen.setdefault("stdout", subprocess.DEVNULL)
    popen.setdefault("stderr", subprocess.DEVNULL)
    proc = subprocess.Popen(argv, **popen)
    try:
        wait_port(port, proc)
        yield proc
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
