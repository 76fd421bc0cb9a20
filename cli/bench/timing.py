"""What the benchmarks share: timing one stream, and running a server process for a with-block."""

from __future__ import annotations

import contextlib
import http.client
import re
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from typing import Any

import click

from firsttoken.cli.loopback import NotListening, wait_port

CONTENT = re.compile(rb'"content":\s*"[^"]')


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
                if CONTENT.search(buf):
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
        try:
            wait_port(port, proc)
        except NotListening as e:
            raise click.ClickException(str(e)) from None
        yield proc
    finally:
        stop([proc])


def stop(procs: list[subprocess.Popen]) -> None:
    """Stop server processes as a user's Ctrl-C does (SIGINT to each at once, then wait for each), killing any
    that has not stopped within 30 s."""
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
    for proc in procs:
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
