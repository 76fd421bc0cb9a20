"""`firsttoken bench`: what the proxy itself costs, measured on loopback.

Against the simulated upstream (no prefill cost, so the numbers are the path's own), the
same streaming request is sent directly, through bare mitmproxy with streaming on, and
through firsttoken; the client measures TTFB (response headers) and TTFT (first content
event). Then a 200k-token prompt against a 10-token one, to show prompt size costs the
proxy nothing on the request path (tokenizing runs off the event loop).
"""

from __future__ import annotations

import http.client
import json
import re
import statistics
import tempfile
import time
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from .proxy import ProxyServer
from .simulate import SimConfig, SimServer


_CONTENT = re.compile(rb'"content":\s*"[^"]')


class BareStreaming:
    """Plain mitmproxy with response streaming switched on: the floor firsttoken is compared to."""

    def responseheaders(self, flow) -> None:
        flow.response.stream = True


def one(port: int, body: bytes) -> tuple[float, float]:
    """(TTFB, TTFT) in ms as a client sees them."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        t0 = time.perf_counter()
        conn.request("POST", "/v1/chat/completions", body=body,
                     headers={"content-type": "application/json", "authorization": "Bearer sk-bench-000000000000000000000"})
        resp = conn.getresponse()
        ttfb = time.perf_counter() - t0
        ttft = None
        buf = b""
        while True:
            chunk = resp.read1(65536)
            if not chunk:
                break
            if ttft is None:
                buf += chunk
                if _CONTENT.search(buf):
                    ttft = time.perf_counter() - t0
        return ttfb * 1000, (ttft if ttft is not None else time.perf_counter() - t0) * 1000
    finally:
        conn.close()


def chat(prompt: str) -> bytes:
    return json.dumps({"model": "gpt-4o-mini", "stream": True, "max_tokens": 8,
                       "messages": [{"role": "user", "content": prompt}]}).encode()


def measure(port: int, body: bytes, n: int, warmup: int = 3) -> tuple[float, float]:
    for _ in range(warmup):
        one(port, body)
    ttfb, ttft = zip(*(one(port, body) for _ in range(n)))
    return statistics.median(ttfb), statistics.median(ttft)


@click.command()
@click.option("--requests", "n", type=int, default=60, show_default=True, help="Requests per path.")
def bench(n: int) -> None:
    """Measure the proxy's own overhead on loopback (prints numbers)."""
    out = Console(highlight=False)
    cfg = SimConfig(ttfb_ms=5, prefill_base_ms=5, prefill_ms_per_1k_tokens=0, tpot_ms=1, output_tokens=8)
    small = chat("Say hi.")
    big = chat(" ".join(["The quick brown fox jumps over the lazy dog."] * 20000))  # ~200k tokens
    with tempfile.TemporaryDirectory() as tmp, SimServer(cfg) as sim:
        res = {"direct": measure(sim.port, small, n)}
        with ProxyServer([sim.url], str(Path(tmp) / "bare.db"), port=0, addon=BareStreaming()) as bare:
            res["bare mitmproxy (streaming)"] = measure(bare.bound_port, small, n)
        with ProxyServer([sim.url], str(Path(tmp) / "ft.db"), port=0) as ft:
            res["firsttoken"] = measure(ft.bound_port, small, n)
            big_n = max(5, n // 6)
            ft_small = measure(ft.bound_port, small, big_n, warmup=1)
            ft_big = measure(ft.bound_port, big, big_n, warmup=1)
            ft.flush(60)
    t = Table(title=f"median over {n} streaming requests, loopback, simulated upstream (TTFB {cfg.ttfb_ms} ms)")
    for c in ("path", "TTFB", "TTFT", "added TTFB", "added TTFT"):
        t.add_column(c, justify="left" if c == "path" else "right")
    d_ttfb, d_ttft = res["direct"]
    for name, (a, b) in res.items():
        t.add_row(name, f"{a:.2f} ms", f"{b:.2f} ms", f"{a - d_ttfb:+.2f} ms", f"{b - d_ttft:+.2f} ms")
    out.print(t)
    over = res["firsttoken"][1] - res["bare mitmproxy (streaming)"][1]
    out.print(f"firsttoken over bare mitmproxy streaming: {over:+.2f} ms TTFT")
    out.print(f"prompt size through firsttoken: 10-token TTFB {ft_small[0]:.2f} ms, ~200k-token TTFB {ft_big[0]:.2f} ms "
              f"(difference {ft_big[0] - ft_small[0]:+.2f} ms; the body is {len(big) / 1e6:.1f} MB, so part of it is transfer)")
