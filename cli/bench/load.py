"""`firsttoken bench --concurrency 1,10,50,200`: the proxy under load.

This process is only the client: one asyncio loop speaking raw HTTP/1.1 to the simulated upstream,
bare mitmproxy and firsttoken, each in its own process. What it reports: docs/performance.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import math
import os
import sqlite3
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from firsttoken.addon.record import percentile
from firsttoken.cli.bench.timing import CONTENT, process
from firsttoken.cli.loopback import free_port

CLI = [sys.executable, "-c", "from firsttoken.cli.main import cli; cli()"]
BIN = Path(sys.executable).parent
TAG_HEADER = "x-firsttoken-experiment"  # recorded in the `experiment` column: matches rows to clients

# The floor firsttoken is compared with: plain mitmproxy streaming both bodies, nothing else.
BARE_SCRIPT = """
def requestheaders(flow):
    flow.request.stream = True

def responseheaders(flow):
    flow.response.stream = True
"""

PATHS = ("direct", "bare mitmproxy", "firsttoken")


def workers_path(n: int) -> str:
    """The path of ``--workers N``: `firsttoken proxy --workers N`, N processes on one port (cli/bench/workers.py)."""
    return f"firsttoken ×{n}"


def is_firsttoken(path: str) -> bool:
    """A path through firsttoken (one proxy, or :func:`workers_path`'s): its streams are recorded and matched."""
    return path == "firsttoken" or path.startswith("firsttoken ×")


def paths_of(workers: int) -> tuple[str, ...]:
    return PATHS + ((workers_path(workers),) if workers > 1 else ())


def _summed(read: Callable[[int], float | None], pids: tuple[int, ...]) -> float | None:
    """``read`` of several processes, added up (None if any cannot be read)."""
    each = [read(p) for p in pids]
    return None if any(v is None for v in each) else sum(each)  # type: ignore[arg-type]


def cpu_seconds(pid: int | tuple[int, ...]) -> float | None:
    """User+system CPU time of a process and its threads (Linux /proc); of several processes, their sum."""
    if isinstance(pid, tuple):
        return _summed(cpu_seconds, pid)
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def rss_mb(pid: int | tuple[int, ...]) -> float | None:
    if isinstance(pid, tuple):
        return _summed(rss_mb, pid)
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    except (OSError, ValueError, IndexError):
        pass
    return None


def _request(port: int, body: bytes, tag: str, headers: str = "") -> bytes:
    """``headers``: more header lines, each ending with CRLF (e.g. the simulator's ``x-sim-fault``)."""
    return (f"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\ncontent-type: application/json\r\n"
            f"authorization: Bearer sk-bench-load-000000000000000000\r\n{TAG_HEADER}: {tag}\r\n{headers}"
            f"content-length: {len(body)}\r\nconnection: close\r\n\r\n").encode() + body


async def stream_request(port: int, body: bytes, tag: str, go: asyncio.Event) -> dict[str, Any]:
    """One streaming request: client TTFT (first content event) and the gaps between reads after it."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        req = _request(port, body, tag)
        await go.wait()
        t0 = time.perf_counter()
        writer.write(req)
        ttft, buf, reads, events, last = None, b"", [], 0, None
        while True:
            chunk = await reader.read(65536)
            now = time.perf_counter()
            if not chunk:
                break
            events += chunk.count(b"data:")
            if ttft is None:
                buf += chunk
                if CONTENT.search(buf):
                    ttft = now
                    buf = b""
            else:
                reads.append(now - last)
            if ttft is not None:
                last = now
        if ttft is None:
            raise RuntimeError(f"no content event in the response (first bytes: {buf[:120]!r})")
        return {"tag": tag, "ttft": (ttft - t0) * 1000.0, "gaps": [g * 1000.0 for g in reads], "events": events}
    finally:
        writer.close()


async def answer(port: int, body: bytes, tag: str, headers: str, status: int, go: asyncio.Event) -> int:
    """One request read to its end on a new connection (a JSON answer, an error): its bytes; raises
    unless the status is ``status``."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        req = _request(port, body, tag, headers)
        await go.wait()
        writer.write(req)
        data = await reader.read()
        head = data.split(b"\r\n", 1)[0]
        if not head.startswith(f"HTTP/1.1 {status} ".encode()):
            raise RuntimeError(f"expected {status}, got {head[:80]!r}")
        return len(data)
    finally:
        writer.close()


async def together(clients: list[Callable[[asyncio.Event], Awaitable[Any]]], settle: float, what: str) -> list[Any]:
    """Run the clients as one burst: each connects, waits for ``go`` (set after ``settle`` s, when
    every connection is in), then sends. ``what`` names them in the error if any fails."""
    go = asyncio.Event()
    tasks = [asyncio.ensure_future(client(go)) for client in clients]
    await asyncio.sleep(settle)
    go.set()
    res = await asyncio.gather(*tasks, return_exceptions=True)
    errors = [r for r in res if isinstance(r, BaseException)]
    if errors:
        raise click.ClickException(f"{len(errors)} of {len(clients)} {what} failed: {errors[0]!r}")
    return res


async def stream_burst(port: int, body: bytes, n: int, tags: list[str]) -> list[dict[str, Any]]:
    clients = [functools.partial(stream_request, port, body, tags[i]) for i in range(n)]
    return await together(clients, 0.1 + n * 0.005, f"streams to port {port}")


def _recorded(db: Path, tags: set[str], timeout: float = 30.0) -> dict[str, dict[str, Any]]:
    """firsttoken's finished rows for these tags (waits until all are written)."""
    deadline = time.monotonic() + timeout
    rows: dict[str, dict[str, Any]] = {}
    while time.monotonic() < deadline:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)
        con.row_factory = sqlite3.Row
        try:
            cols = {r[1] for r in con.execute("PRAGMA table_info(requests)")}
            lag = "proxy_lag_ms" if "proxy_lag_ms" in cols else "NULL"
            delay = "proxy_delay_ms" if "proxy_delay_ms" in cols else "NULL"
            q = (f"SELECT experiment, ttft_ms, {lag} AS lag, {delay} AS delay, findings FROM requests "
                 "WHERE state = 'done' AND experiment IN (%s)" % ",".join("?" * len(tags)))
            rows = {r["experiment"]: dict(r) for r in con.execute(q, sorted(tags))}
        except sqlite3.OperationalError:
            rows = {}
        finally:
            con.close()
        if len(rows) >= len(tags):
            break
        time.sleep(0.2)
    return rows


def pct(values: list[float], q: float) -> float | None:
    return percentile(sorted(values), q) if values else None


#: bursts per path and level: at least two (one could meet a hiccup), at most this many (one
#: stream at a time takes a second each; the whole run must stay within a few minutes)
MAX_BURSTS = 10


def plan(concurrency: int, target: int) -> int:
    """Bursts per path at this level: about ``target`` streams, within [2, MAX_BURSTS] bursts."""
    return max(2, min(MAX_BURSTS, math.ceil(target / concurrency)))


@contextlib.contextmanager
def three_paths(output_tokens: int, tpot_ms: float, prefill_ms: float, bare: bool = True,
                proxy_args: tuple[str, ...] = (), workers: int = 1) -> Iterator[tuple[dict[str, int], dict[str, Any], Path]]:
    """The simulated upstream, bare mitmproxy (unless not ``bare``) and firsttoken (recording into a
    temporary database, ``proxy_args`` added to its command; one process, whatever the machine's cores), each in
    its own process, and with ``workers`` > 1 `firsttoken proxy --workers N` on one more port (:func:`workers_path`,
    recording into the same database; the two are never under load at once): yields the ports by path, the proxies'
    pids (a tuple of the workers' processes) and the database."""
    from firsttoken.cli.bench.workers import workers as worker_procs

    sp, bp, fp, wp = free_port(), free_port(), free_port(), free_port()
    sim_argv = CLI + ["simulate", "--port", str(sp), "--quiet", "--ttfb-ms", "5", "--prefill-base-ms", str(prefill_ms),
                      "--prefill-ms-per-1k", "0", "--tpot-ms", str(tpot_ms), "--output-tokens", str(output_tokens)]
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "bare_streaming.py"
        script.write_text(BARE_SCRIPT)
        db = Path(tmp) / "bench.db"
        bare_argv = [str(BIN / "mitmdump"), "-q", "-s", str(script), "--mode", f"reverse:http://127.0.0.1:{sp}",
                     "--listen-host", "127.0.0.1", "--listen-port", str(bp), "--set", "connection_strategy=lazy"]

        def ft_argv(port: int) -> list[str]:  # firsttoken on ``port``, recording into ``db``
            return CLI + ["proxy", "--no-live", "--port", str(port), "-u", f"http://127.0.0.1:{sp}", "--db", str(db),
                          *proxy_args]

        one_argv = ft_argv(fp) + ([] if "--workers" in proxy_args else ["--workers", "1"])
        with process(sim_argv, sp), (process(bare_argv, bp) if bare else contextlib.nullcontext()) as mitm, \
                process(one_argv, fp) as ft, \
                (worker_procs(ft_argv(wp), workers) if workers > 1 else contextlib.nullcontext()) as group:
            ports, pids = {"direct": sp, "firsttoken": fp}, {"firsttoken": ft.pid}
            if mitm is not None:
                ports["bare mitmproxy"], pids["bare mitmproxy"] = bp, mitm.pid
            if group is not None:
                ports[workers_path(workers)], pids[workers_path(workers)] = wp, group.pids()
            yield ports, pids, db


def run(levels: list[int], output_tokens: int = 50, tpot_ms: float = 20.0, prefill_ms: float = 20.0,
        target: int = 40, progress: Any = None, workers: int = 1) -> dict[str, Any]:
    say = progress or (lambda msg: None)
    body = json.dumps({"model": "gpt-4o-mini", "stream": True, "max_tokens": output_tokens,
                       "messages": [{"role": "user", "content": "Say hi."}]}).encode()
    out: dict[str, Any] = {"config": {"levels": levels, "output_tokens": output_tokens, "tpot_ms": tpot_ms,
                                      "prefill_ms": prefill_ms, "cores": os.cpu_count(), "python": sys.version.split()[0],
                                      "mitmproxy": _mitmproxy_version(), "workers": workers},
                           "levels": []}
    paths = paths_of(workers)
    with three_paths(output_tokens, tpot_ms, prefill_ms, workers=workers) as (ports, pids, db):
        loop = asyncio.new_event_loop()
        try:
            for port in ports.values():  # warm up: imports, tokenizers, connection pools
                loop.run_until_complete(stream_burst(port, body, 3, [f"warm-{uuid.uuid4().hex}" for _ in range(3)]))
            _recorded(db, set(), timeout=0)
            for n in levels:
                bursts = plan(n, target)
                samples: dict[str, list[dict[str, Any]]] = {p: [] for p in paths}
                cpu = {p: 0.0 for p in pids}
                recorded: dict[str, dict[str, dict[str, Any]]] = {p: {} for p in paths if is_firsttoken(p)}
                for b in range(bursts):
                    order = paths if b % 2 == 0 else paths[::-1]
                    for path in order:
                        tags = [f"load-{n}-{uuid.uuid4().hex[:12]}" for _ in range(n)]
                        c0 = cpu_seconds(pids[path]) if path in pids else None
                        samples[path] += loop.run_until_complete(stream_burst(ports[path], body, n, tags))
                        if path in recorded:  # its analysis and writes count too: wait for them
                            recorded[path].update(_recorded(db, set(tags)))
                        if c0 is not None:
                            time.sleep(0.1)  # what the proxy does right after the burst (closing) counts
                            cpu[path] += (cpu_seconds(pids[path]) or 0.0) - c0
                level = _summarise(n, bursts, samples, cpu, recorded, {p: rss_mb(pid) for p, pid in pids.items()})
                for p, pid in pids.items():  # whose CPU and memory were counted
                    level["paths"][p]["processes"] = len(pid) if isinstance(pid, tuple) else 1
                out["levels"].append(level)
                say(f"{n} concurrent: done ({bursts} bursts per path)")
        finally:
            loop.close()
    return out


def _mitmproxy_version() -> str:
    from importlib.metadata import version

    return version("mitmproxy")


def _truth(ss: list[dict[str, Any]], recorded: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """How far a firsttoken path's records are from what its clients saw (docs/performance.md, "Truth")."""
    err, err_plain, rel, rel_plain, delays, saturated = [], [], [], [], [], 0
    for s in ss:
        r = recorded.get(s["tag"])
        if r is None or r["ttft_ms"] is None:
            continue
        lag = r["lag"] or 0.0
        err.append(r["ttft_ms"] + lag - s["ttft"])
        err_plain.append(r["ttft_ms"] - s["ttft"])
        rel.append(abs(err[-1]) / s["ttft"] * 100.0)
        rel_plain.append(abs(err_plain[-1]) / s["ttft"] * 100.0)
        if r["delay"] is not None:
            delays.append(r["delay"])
        saturated += '"proxy.saturated"' in (r["findings"] or "")
    abs_err = [abs(e) for e in err]
    return {
        "recorded": len(err),
        "ttft_error_p50": pct(err, 50), "ttft_error_abs_p99": pct(abs_err, 99),
        "ttft_error_without_lag_p50": pct(err_plain, 50),
        # the same as a share of the client's TTFT (the truth bound: docs/performance.md)
        "ttft_error_rel_p50": pct(rel, 50), "ttft_error_rel_p99": pct(rel, 99),
        "ttft_error_without_lag_rel_p50": pct(rel_plain, 50),
        "proxy_delay_p50": pct(delays, 50), "proxy_delay_p99": pct(delays, 99),
        "saturated_findings": saturated,
    }


def _summarise(n: int, bursts: int, samples: dict[str, list[dict[str, Any]]], cpu: dict[str, float],
               recorded: dict[str, dict[str, dict[str, Any]]], rss: dict[str, float | None]) -> dict[str, Any]:
    paths: dict[str, Any] = {}
    for path, ss in samples.items():
        ttft = [s["ttft"] for s in ss]
        gaps = [g for s in ss for g in s["gaps"]]
        chunks = sum(s["events"] for s in ss)
        st: dict[str, Any] = {"streams": len(ss), "chunks": chunks, "ttft_p50": pct(ttft, 50), "ttft_p99": pct(ttft, 99),
                              "gap_p99": pct(gaps, 99)}
        if path in cpu:
            st["cpu_s"] = cpu[path]
            st["cpu_us_per_chunk"] = cpu[path] / chunks * 1e6 if chunks else None
            st["rss_mb"] = rss.get(path)
        paths[path] = st
    for path, rows in recorded.items():
        paths[path].update(_truth(samples[path], rows))
    bare, fts = paths["bare mitmproxy"], paths["firsttoken"]
    out = {"concurrency": n, "bursts": bursts, "paths": paths,
           "cpu_ratio_vs_bare": _ratio(fts.get("cpu_us_per_chunk") or None, bare.get("cpu_us_per_chunk")),
           "added_gap_p99": (fts["gap_p99"] - bare["gap_p99"]) if fts["gap_p99"] is not None and bare["gap_p99"] is not None else None}
    direct = paths["direct"]
    for path, st in paths.items():  # what each proxy adds to the client's TTFT over going direct
        if path != "direct" and st["ttft_p50"] is not None and direct["ttft_p50"] is not None:
            st["added_ttft_p50"] = st["ttft_p50"] - direct["ttft_p50"]
            st["added_ttft_p99"] = st["ttft_p99"] - direct["ttft_p99"]
    group = next((p for p in paths if is_firsttoken(p) and p != "firsttoken"), None)
    if group is not None:
        one, many = paths["firsttoken"], paths[group]
        out["workers"] = {
            "path": group,
            "added_ttft_p50_ratio": _ratio(many.get("added_ttft_p50"), one.get("added_ttft_p50")),
            "cpu_ratio_vs_one": _ratio(many.get("cpu_us_per_chunk") or None, one.get("cpu_us_per_chunk")),
        }
    return out


def _ratio(a: float | None, b: float | None) -> float | None:
    """a / b, or None when either is missing or b is zero (a CPU time of 0, below the clock's tick, is passed as
    missing: no ratio rather than 0×)."""
    return a / b if a is not None and b else None


def _ms(v: float | None, sign: bool = False) -> str:
    return "—" if v is None else (f"{v:+.1f}" if sign else f"{v:.1f}")


SHORT = {"direct": "direct", "bare mitmproxy": "bare", "firsttoken": "firsttoken"}


def short(path: str) -> str:
    return SHORT.get(path, path)


def level_table(levels: list[dict[str, Any]], title: str, caption: str, n_key: str, cpu_key: str) -> Table:
    """One row per path and level: client TTFT and gaps, the proxies' CPU per unit and memory, and
    firsttoken's recorded-vs-client error (the HTTP and the WebSocket benchmarks)."""
    t = Table(title=title, caption=caption)
    for col in ("N", "path", "TTFT p50", "p99", "gap p99", "CPU µs", "RSS MB", "rec. err"):
        t.add_column(col, justify="left" if col == "path" else "right", no_wrap=col in ("path", "rec. err"))
    for lv in levels:
        order = list(lv["paths"])
        for i, path in enumerate(order):
            st = lv["paths"][path]
            cpu = f"{st[cpu_key]:.0f}" if st.get(cpu_key) is not None else ""
            rss = f"{st['rss_mb']:.0f}" if st.get("rss_mb") is not None else ""
            err = ""
            if is_firsttoken(path) and st.get("recorded"):
                err = f"{_ms(st['ttft_error_p50'], True)}/{_ms(st['ttft_error_abs_p99'])}"
            t.add_row(str(lv[n_key]) if i == 0 else "", short(path), _ms(st["ttft_p50"]), _ms(st["ttft_p99"]),
                      _ms(st["gap_p99"]), cpu, rss, err, end_section=i == len(order) - 1)
    return t


def report(res: dict[str, Any], out: Console) -> None:
    c = res["config"]
    out.print(level_table(
        res["levels"], f"under load: loopback, {c['cores']} cores, Python {c['python']}; simulated upstream, first token "
                       f"+{c['prefill_ms']:g} ms, {c['output_tokens']} tokens × {c['tpot_ms']:g} ms. Times in ms",
        "bare = mitmproxy streaming, nothing else; CPU µs = the proxy process's CPU per forwarded chunk; rec. err = "
        "firsttoken's recorded TTFT + proxy_lag_ms minus the client's (p50 / |p99|)", "concurrency", "cpu_us_per_chunk"))
    for lv in res["levels"]:
        ft = lv["paths"]["firsttoken"]
        ratio = f"{lv['cpu_ratio_vs_bare']:.2f}×" if lv["cpu_ratio_vs_bare"] is not None else "—"
        out.print(f"{lv['concurrency']} streams: CPU per chunk {ratio} bare mitmproxy's; gap p99 "
                  f"{_ms(lv['added_gap_p99'], True)} ms over bare; the proxy's own delay p50/p99 "
                  f"{_ms(ft.get('proxy_delay_p50'))}/{_ms(ft.get('proxy_delay_p99'))} ms; proxy.saturated on "
                  f"{ft.get('saturated_findings', 0)} of {ft.get('recorded', 0)} requests; recorded TTFT vs the client's: "
                  f"{_ms(ft.get('ttft_error_rel_p50'))}% median, {_ms(ft.get('ttft_error_rel_p99'))}% p99 "
                  f"({_ms(ft.get('ttft_error_without_lag_rel_p50'))}% median without proxy_lag_ms, the wait before "
                  "the proxy could read the request)")
        w = lv.get("workers")
        if w is not None:
            many = lv["paths"][w["path"]]
            share = f"{w['added_ttft_p50_ratio']:.2f}×" if w["added_ttft_p50_ratio"] is not None else "—"
            cpu = f"{w['cpu_ratio_vs_one']:.2f}×" if w["cpu_ratio_vs_one"] is not None else "—"
            out.print(f"  {w['path']}: adds {_ms(many.get('added_ttft_p50'))} ms to the client's TTFT p50 over direct "
                      f"(p99 {_ms(many.get('added_ttft_p99'))}), against {_ms(ft.get('added_ttft_p50'))} "
                      f"(p99 {_ms(ft.get('added_ttft_p99'))}) for one proxy: {share} of it; CPU per chunk {cpu} one "
                      f"proxy's; recorded TTFT vs the client's: {_ms(many.get('ttft_error_rel_p50'))}% median, "
                      f"{_ms(many.get('ttft_error_rel_p99'))}% p99")


def parse_levels(text: str) -> list[int]:
    try:
        levels = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise click.BadParameter(f"{text!r}: give concurrency levels as numbers separated by commas, e.g. 1,10,50,200") from None
    if not levels or any(n < 1 or n > 1000 for n in levels):
        raise click.BadParameter(f"{text!r}: each level must be between 1 and 1000 concurrent streams")
    return levels
