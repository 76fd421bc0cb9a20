"""`firsttoken bench --soak N`: N requests through one long-running proxy, its memory as it goes.

A mix of streams, JSON answers, 401s and WebSocket turns (a new connection per request, as the SDKs
make them; the live feed followed as `firsttoken live` does); between segments the load pauses,
every row is awaited and the proxy's RSS read. What it reports: docs/performance.md ("Memory").
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import sqlite3
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from firsttoken.cli.bench.load import answer, rss_mb, stream_request, three_paths, together
from firsttoken.cli.bench.websocket import ws_session

#: what the mix is made of, and its default weights in requests (two thirds streamed, a sixth 401s)
KINDS = ("stream", "json", "401", "ws")
DEFAULT_MIX = "stream=8,json=1,401=2,ws=1"
#: requests before the baseline RSS (memory that start-up and the first requests settle)
BASELINE = 5000


def parse_mix(text: str) -> dict[str, int]:
    mix: dict[str, int] = {}
    for part in text.split(","):
        kind, _, weight = part.partition("=")
        kind = kind.strip()
        if kind not in KINDS or not weight.strip().isdigit():
            raise click.BadParameter(f"{text!r}: give weights as KIND=N separated by commas, KIND one of "
                                     f"{', '.join(KINDS)}, e.g. {DEFAULT_MIX}")
        mix[kind] = int(weight)
    if not any(mix.values()):
        raise click.BadParameter(f"{text!r}: at least one weight must be above 0")
    return mix


def baseline_for(n: int) -> int:
    """Requests before the baseline: BASELINE, or a third of a shorter soak."""
    return BASELINE if n >= 2 * BASELINE else n // 3


def _plan(n: int, mix: dict[str, int], turns: int) -> list[str]:
    """Requests (a WebSocket connection: ``turns`` of them) in an interleaved order, up to ``n``:
    each next one of the kind furthest behind its share of the mix."""
    total = sum(mix.values())
    done = dict.fromkeys(mix, 0)
    out, count = [], 0
    while count < n:
        kind = min((k for k, w in mix.items() if w), key=lambda k: (done[k] + 1) / mix[k] * total)
        size = turns if kind == "ws" else 1
        out.append(kind)
        done[kind] += size
        count += size
    return out


class _Follower(threading.Thread):
    """Reads the proxy's live feed as `firsttoken live` does, every ``interval`` s."""

    def __init__(self, db: Path, interval: float = 0.5) -> None:
        super().__init__(name="soak-follower", daemon=True)
        self.db, self.interval, self.reads, self.errors = db, interval, 0, 0
        self.stop = threading.Event()

    def run(self) -> None:
        from firsttoken.cli.live.feed import FeedError, FeedSource
        from firsttoken.cli.proxy.state import proxy_for_db

        src = None
        while not self.stop.wait(self.interval):
            try:
                if src is None:
                    entry = proxy_for_db(self.db)
                    if entry is None:
                        continue
                    src = FeedSource(entry, str(self.db))
                src.poll()
                self.reads += 1
            except FeedError:
                self.errors += 1
                src = None
        if src is not None:
            src.close()


def _rows(db: Path, prefix: str) -> int:
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)
    try:
        return con.execute("SELECT count(*) FROM requests WHERE state = 'done' AND experiment LIKE ?",
                           (prefix + "%",)).fetchone()[0]
    except sqlite3.OperationalError:
        return 0
    finally:
        con.close()


def _await_rows(db: Path, prefix: str, expected: int, timeout: float = 120.0) -> int:
    deadline = time.monotonic() + timeout
    while True:
        got = _rows(db, prefix)
        if got >= expected or time.monotonic() > deadline:
            return got
        time.sleep(0.2)


async def _worker(jobs: Any, port: int, stream_body: bytes, json_body: bytes, turns: int, go: asyncio.Event) -> int:
    """One client: takes the next request off ``jobs`` until none is left; returns how many failed."""
    await go.wait()
    failed = 0
    for kind, tag in jobs:
        try:
            if kind == "stream":
                await stream_request(port, stream_body, tag, go)
            elif kind == "json":
                await answer(port, json_body, tag, "", 200, go)
            elif kind == "401":
                await answer(port, stream_body, tag, "x-sim-fault: auth\r\n", 401, go)
            else:
                await ws_session(port, tag, turns, go)
        except Exception:  # noqa: BLE001 - counted, shown, and the soak goes on
            failed += 1
    return failed


def run(n: int, concurrency: int = 40, mix: dict[str, int] | None = None, turns: int = 3, points: int = 10,
        save_bodies: bool = False, follow: bool = True, output_tokens: int = 20, progress: Any = None) -> dict[str, Any]:
    say = progress or (lambda msg: None)
    mix = mix or parse_mix(DEFAULT_MIX)
    base = baseline_for(n)
    stream_body = json.dumps({"model": "gpt-4o-mini", "stream": True, "max_tokens": output_tokens,
                              "messages": [{"role": "user", "content": "Say hi."}]}).encode()
    json_body = json.dumps({"model": "gpt-4o-mini", "max_tokens": output_tokens,
                            "messages": [{"role": "user", "content": "Say hi."}]}).encode()
    run_id = uuid.uuid4().hex[:8]
    plan = _plan(n, mix, turns)
    # checkpoints: the baseline, then evenly to the end
    marks = sorted({base, *(base + (n - base) * i // max(1, points - 1) for i in range(1, points))} - {0})
    args = ("--save-bodies",) if save_bodies else ()
    out: dict[str, Any] = {"config": {"requests": n, "concurrency": concurrency, "mix": mix, "turns": turns,
                                      "save_bodies": save_bodies, "follow": follow, "baseline": base,
                                      "cores": os.cpu_count(), "python": sys.version.split()[0]},
                           "points": []}
    with three_paths(output_tokens, 1.0, 1.0, bare=False, proxy_args=args) as (ports, pids, db):
        port, pid = ports["firsttoken"], pids["firsttoken"]
        follower = _Follower(db) if follow else None
        if follower is not None:
            follower.start()
        loop = asyncio.new_event_loop()
        t_start = time.monotonic()
        done_reqs, expected, errors, i = 0, 0, 0, 0
        try:
            for mark in marks:
                segment: list[tuple[str, str]] = []
                while done_reqs < mark and i < len(plan):
                    kind = plan[i]
                    segment.append((kind, f"soak-{run_id}-{i}"))
                    done_reqs += turns if kind == "ws" else 1
                    i += 1
                jobs = iter(segment)
                client = functools.partial(_worker, jobs, port, stream_body, json_body, turns)
                errors += sum(loop.run_until_complete(together([client] * concurrency, 0.0, "soak clients")))
                expected = done_reqs
                rows = _await_rows(db, f"soak-{run_id}-", expected)
                time.sleep(0.5)  # what the proxy frees after its last rows (closed connections)
                point = {"requests": done_reqs, "rows": rows, "rss_mb": rss_mb(pid), "errors": errors,
                         "elapsed_s": time.monotonic() - t_start}
                out["points"].append(point)
                say(f"{done_reqs:,} requests: {rows:,} rows, RSS {point['rss_mb']:.1f} MB, {errors} client errors")
        finally:
            loop.close()
            if follower is not None:
                follower.stop.set()
                follower.join(5)
    pts = out["points"]
    first = next(p for p in pts if p["requests"] >= base)
    last = pts[-1]
    out["rows_written"] = last["rows"]
    out["rows_expected"] = last["requests"]
    out["client_errors"] = errors
    out["feed_reads"] = follower.reads if follower is not None else None
    span = last["requests"] - first["requests"]
    out["kb_per_request"] = ((last["rss_mb"] - first["rss_mb"]) * 1024.0 / span
                             if span > 0 and last["rss_mb"] is not None and first["rss_mb"] is not None else None)
    return out


def report(res: dict[str, Any], out: Console) -> None:
    c = res["config"]
    mix = ", ".join(f"{k} {w}" for k, w in c["mix"].items() if w)
    t = Table(title=f"soak: {c['requests']:,} requests through one firsttoken proxy, {c['concurrency']} at a time, a new "
                    f"connection each (mix {mix}; a WebSocket connection runs {c['turns']} turns){', --save-bodies' if c['save_bodies'] else ''}",
              caption="RSS read after each segment, once every row of it is written")
    for col in ("requests", "rows", "RSS MB", "client errors", "elapsed s"):
        t.add_column(col, justify="right")
    for p in res["points"]:
        t.add_row(f"{p['requests']:,}", f"{p['rows']:,}", f"{p['rss_mb']:.1f}" if p["rss_mb"] is not None else "—",
                  str(p["errors"]), f"{p['elapsed_s']:.0f}")
    out.print(t)
    kb = res["kb_per_request"]
    out.print(f"rows written: {res['rows_written']:,} of {res['rows_expected']:,}; RSS grew "
              f"{'—' if kb is None else f'{kb:.3f}'} KB per request past the first {c['baseline']:,}"
              + (f"; live feed read {res['feed_reads']} times" if res["feed_reads"] is not None else ""))
