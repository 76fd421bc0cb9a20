"""`firsttoken bench-db`: build a database of N synthetic requests, then time `stats` and `logs`.

The rows look like a month of traffic through the proxy (models, routes, errors, cold connections,
prompt sizes), bulk-loaded into a database migrated like any other; the timings are the commands'
own calls. What it builds and how: docs/performance.md.
"""

from __future__ import annotations

import datetime as _dt
import itertools
import json
import math
import os
import random
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import click

from firsttoken.addon.store import queries, stats_queries
from firsttoken.addon.store.bulk import BulkLoad, any_model, request_count
from firsttoken.addon.store.db import open_db
from firsttoken.addon.store.queries import Filters

# model -> (ttfb ms, prefill base ms, prefill ms per 1k prompt tokens, tpot ms)
MODELS = {
    "gpt-4o-mini": (180, 60, 35, 9),
    "gpt-4.1": (210, 90, 60, 16),
    "claude-sonnet-4-5": (240, 150, 90, 22),
    "deepseek-chat": (320, 200, 120, 28),
    "qwen-max": (260, 120, 80, 20),
}
ERRORS = [  # (status, code, upstream error type)
    (429, "rate.limited", "rate_limit_exceeded"),
    (500, "upstream.server_error", "server_error"),
    (401, "auth.rejected", "invalid_api_key"),
    (529, "upstream.overloaded", "overloaded_error"),
]
COLUMNS = (
    "id", "started_at", "state", "phase", "route", "upstream", "method", "path", "upstream_url", "api",
    "model", "stream", "max_tokens", "experiment", "status", "content_type", "connect_ms", "conn_reused",
    "ttfb_ms", "first_byte_ms", "first_token_ms", "ttft_ms", "gap_ms", "total_ms", "itl_p50_ms",
    "itl_p95_ms", "itl_max_ms", "tpot_ms", "events", "event_offsets", "usage_prompt_tokens",
    "usage_completion_tokens", "output_chars", "finish_reason", "stream_done", "upstream_error_type",
    "tokenizer", "tokens_exact", "prompt_tokens_est", "findings", "top_code", "top_severity", "key_facts",
)


def _stamp(epoch: float, days_cache: dict[int, str]) -> str:
    s = int(epoch)
    day, rem = divmod(s, 86400)
    date = days_cache.get(day)
    if date is None:
        date = days_cache[day] = _dt.datetime.fromtimestamp(day * 86400, _dt.UTC).strftime("%Y-%m-%d")
    h, rem = divmod(rem, 3600)
    m, sec = divmod(rem, 60)
    return f"{date}T{h:02d}:{m:02d}:{sec:02d}.{int((epoch - s) * 1000):03d}+00:00"


def _rows(n: int, days: float, seed: int, findings: list) -> Iterator[tuple]:
    rnd = random.Random(seed)
    rand, gauss, exp = rnd.random, rnd.gauss, math.exp
    lognorm = lambda mu, sigma: exp(mu + sigma * gauss())  # noqa: E731 - faster than lognormvariate
    start = time.time() - days * 86400.0
    step = days * 86400.0 / max(1, n)
    cache: dict[int, str] = {}
    names = list(MODELS)
    routes = {m: ("anthropic", "https://api.anthropic.example", "/v1/messages", "anthropic.messages") if m.startswith("claude")
              else ("openai", "https://api.openai.example", "/v1/chat/completions", "openai.chat") for m in names}
    for i in range(n):
        rid = f"{i:08x}-{seed:04x}-{rnd.getrandbits(64):016x}"
        ts = _stamp(start + i * step, cache)
        model = names[i % 5] if rand() < 0.7 else names[int(rand() * 5)]
        ttfb0, base, per1k, tpot0 = MODELS[model]
        route, upstream, path, api = routes[model]
        prompt = min(int(lognorm(7.0, 0.9)) + 50, 12_000)
        est = int(prompt * (0.97 + 0.06 * rand()))
        cold = rand() < 0.05
        connect = 20 + 100 * rand() if cold else None
        ttfb = ttfb0 * lognorm(0, 0.25) + (connect or 0)
        experiment = "bench-sweep" if i % 500 == 0 else None
        max_tokens = (256, 512, 1024, 4096)[i % 4]
        roll = rand()
        found: list[tuple[str, str, str]] = []
        if roll < 0.03:
            status, code, etype = ERRORS[int(roll * 1000) % len(ERRORS)]
            found.append((code, "error", f"upstream answered {status}"))
            row = (rid, ts, "done", "done", route, upstream, "POST", path, upstream + path, api, model, 1, max_tokens,
                   experiment, status, "application/json", connect, 0 if cold else 1, ttfb, ttfb, None, None, None,
                   ttfb + 2, None, None, None, None, 0, "[]", None, None, 0, None, None, etype,
                   "cl100k_base", 0, est)
        else:
            gap = max(1.0, (base + per1k * prompt / 1000.0) * lognorm(0, 0.15))
            ttft = ttfb + gap
            tpot = tpot0 * lognorm(0, 0.2)
            out = 5 + int(rand() * 596)
            total = ttft + tpot * (out - 1)
            streamed = rand() >= 0.05  # ~5 % ask for the whole answer at once
            if rand() < 0.01:
                found.append(("stream.stall", "warn", "a pause mid-stream"))
            if gap > 1500:
                found.append(("latency.prefill", "warn", "long prefill"))
            if prompt > 8000:
                found.append(("prompt.large", "warn", "large prompt"))
            if cold:
                found.append(("latency.cold_connection", "info", "new connection"))
            if streamed:
                row = (rid, ts, "done", "done", route, upstream, "POST", path, upstream + path, api, model, 1, max_tokens,
                       experiment, 200, "text/event-stream", connect, 0 if cold else 1, ttfb, ttfb, ttft, ttft,
                       gap, total, tpot, tpot * 1.8, tpot * 4, tpot, out, "[]", prompt,
                       out, out * 4, "stop", 1, None, "cl100k_base", 0, est)
            else:  # the headers come with the whole answer: TTFB ~ total
                row = (rid, ts, "done", "done", route, upstream, "POST", path, upstream + path, api, model, 0, max_tokens,
                       experiment, 200, "application/json", connect, 0 if cold else 1, total, total, total + 1,
                       total + 1, 1.0, total + 2, None, None, None, None, 0, "[]", prompt,
                       out, out * 4, "stop", None, None, "cl100k_base", 0, est)
        if found:
            for i, (code, sev, message) in enumerate(found):
                findings.append((rid, code, sev, i, message, None, None))
            yield row + (json.dumps([{"code": c, "severity": s, "message": m} for c, s, m in found]),
                         found[0][0], found[0][1], "[]")
        else:
            yield row + ("[]", None, None, "[]")


def generate(path: str | os.PathLike, n: int = 1_000_000, days: float = 30.0, seed: int = 1,
             progress: Callable[[int], None] | None = None, batch: int = 50_000) -> dict[str, Any]:
    """Create (or append to) a firsttoken database with n synthetic rows. Returns timings."""
    t0 = time.perf_counter()
    db = open_db(path)  # creates + migrates, so the schema and its indexes are the real ones
    load = BulkLoad(db, COLUMNS)  # on an empty database: indexes off while loading, rebuilt at the end
    done = 0
    findings: list[tuple] = []
    rows = _rows(n, days, seed, findings)
    while done < n:
        chunk = list(itertools.islice(rows, min(batch, n - done)))
        load.add(chunk, findings)
        findings.clear()
        done += len(chunk)
        if progress:
            progress(len(chunk))
    t_rows = time.perf_counter() - t0
    load.finish()
    db.conn.close()
    return {"rows": n, "seconds": round(time.perf_counter() - t0, 2), "insert_seconds": round(t_rows, 2),
            "index_seconds": round(time.perf_counter() - t0 - t_rows, 2)}


def _time(fn: Callable[[], Any], repeat: int) -> dict[str, float]:
    runs = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - t)
    return {"first_s": round(runs[0], 4), "best_s": round(min(runs), 4), "median_s": round(statistics.median(runs), 4)}


def bench(path: str | os.PathLike, repeat: int = 3) -> list[dict[str, Any]]:
    """Time the queries behind `stats` and `logs` on an existing database."""
    db = open_db(path, write=False)
    model = any_model(db)
    cases: list[tuple[str, Callable[[], Any]]] = [
        ("stats (by model, all rows)", lambda: stats_queries.compute(db, Filters())),
        ("stats --include-cold", lambda: stats_queries.compute(db, Filters(), include_cold=True)),
        (f"stats --model {model}", lambda: stats_queries.compute(db, Filters(model=model))),
        ("stats --since 1h", lambda: stats_queries.compute(db, Filters(since="1h"))),
        ("stats --since 1d --by route", lambda: stats_queries.compute(db, Filters(since="1d"), by="route")),
        ("logs --since 1h", lambda: queries.recent(db, Filters(since="1h"), limit=30)),
        ("logs --since 1h --limit 0", lambda: queries.recent(db, Filters(since="1h"), limit=None)),
        ("logs", lambda: queries.recent(db, Filters(), limit=30)),
    ]
    out = []
    for label, fn in cases:
        out.append({"query": label, **_time(fn, repeat)})
    db.conn.close()
    return out


@click.command("bench-db")
@click.option("--rows", "-n", type=int, default=1_000_000, show_default=True, help="Synthetic requests to generate.")
@click.option("--db", "db_path", type=click.Path(dir_okay=False), default=None,
              help="Where to build it (default: a temporary file, deleted afterwards).")
@click.option("--days", type=float, default=30.0, show_default=True, help="Time span the rows cover (ending now).")
@click.option("--repeat", type=int, default=3, show_default=True, help="Runs of each query.")
@click.option("--reuse", is_flag=True, help="Time the existing --db as it is; generate nothing.")
@click.option("--keep", is_flag=True, help="Keep the generated database (with --db it is always kept).")
@click.option("--json", "as_json", is_flag=True, help="Print the figures as JSON.")
def bench_db(rows, db_path, days, repeat, reuse, keep, as_json):
    """Generate a large synthetic database and time `stats` and `logs --since 1h` on it."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    from rich.table import Table

    from firsttoken.cli.options import console, fail

    tmpdir = None
    if db_path is None:
        if reuse:
            fail("--reuse needs --db PATH")
        tmpdir = tempfile.mkdtemp(prefix="firsttoken-bench-")
        db_path = str(Path(tmpdir) / "bench.db")
    elif not reuse and Path(db_path).exists():
        fail(f"{db_path} already exists: pass --reuse to time it, or another --db")
    gen = None
    try:
        if not reuse:
            with Progress(TextColumn("generating"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                          console=console(stderr=True), transient=True, disable=as_json) as bar:
                task = bar.add_task("rows", total=rows)
                gen = generate(db_path, rows, days, progress=lambda k: bar.advance(task, k))
        size = sum(p.stat().st_size for p in Path(db_path).parent.glob(Path(db_path).name + "*"))
        results = bench(db_path, repeat)
        n = request_count(open_db(db_path, write=False))
    finally:
        if tmpdir and not keep:
            for p in Path(tmpdir).glob("*"):
                p.unlink()
            os.rmdir(tmpdir)
    info = {"rows": n, "db_mb": round(size / 1e6, 1), "cpus": os.cpu_count(), "generate": gen, "queries": results}
    if as_json:
        click.echo(json.dumps(info, indent=2))
        return
    con = console()
    if gen:
        con.print(f"generated {gen['rows']:,} rows in {gen['seconds']:.1f} s ({gen['rows'] / max(gen['seconds'], 1e-9):,.0f} rows/s)")
    con.print(f"database: {n:,} rows, {info['db_mb']:,} MB on disk, {info['cpus']} CPUs"
              + (f", kept at {db_path}" if (keep or not tmpdir) else ""))
    t = Table(header_style="bold")
    for c in ("query", "first", "best", "median"):
        t.add_column(c, justify="left" if c == "query" else "right")
    for r in results:
        t.add_row(r["query"], f"{r['first_s'] * 1000:.0f} ms", f"{r['best_s'] * 1000:.0f} ms", f"{r['median_s'] * 1000:.0f} ms")
    con.print(t)
