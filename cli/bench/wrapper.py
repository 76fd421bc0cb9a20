"""`firsttoken bench --wrapper`: what `firsttoken run` adds to a client's wall time.

`run` starts the command at once and the proxy beside it (cli/run/startup.py), so for a client that
starts slower than the proxy it should add only its own start-up and summary. Pairs of runs with and
without it, against the simulated upstream; how it measures: docs/performance.md.
"""

from __future__ import annotations

import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from firsttoken.cli.bench.timing import process
from firsttoken.cli.loopback import free_port

BIN = Path(sys.executable).parent

#: the stand-in client: its own start-up, then one streamed request; writes what it saw to $FT_BENCH_OUT
CLIENT = r"""
import http.client, json, os, time
started = time.time()
time.sleep(float(os.environ["FT_BENCH_STARTUP_S"]))
base = os.environ["OPENAI_BASE_URL"].split("://", 1)[1]
hostport, _, prefix = base.partition("/")
host, _, port = hostport.partition(":")
body = json.dumps({"model": "sim-1", "stream": True, "max_tokens": 8,
                   "messages": [{"role": "user", "content": "Say hi."}]})
t0 = time.perf_counter()
conn = http.client.HTTPConnection(host, int(port), timeout=120)
conn.request("POST", "/" + (prefix.rstrip("/") + "/" if prefix else "") + "chat/completions", body=body,
             headers={"content-type": "application/json", "authorization": "Bearer sk-bench-000000000000000000000"})
resp = conn.getresponse()
ttft = None
while True:
    chunk = resp.read1(65536)
    if not chunk:
        break
    if ttft is None and b'"content":"' in chunk.replace(b'": "', b'":"'):
        ttft = time.perf_counter() - t0
with open(os.environ["FT_BENCH_OUT"], "w") as f:
    json.dump({"started": started, "status": resp.status,
               "ttft_ms": None if ttft is None else ttft * 1000.0}, f)
"""


def _median(values: list[float]) -> float | None:
    vals = [v for v in values if v is not None]
    return statistics.median(vals) if vals else None


def _once(argv: list[str], env: dict[str, str], out: Path) -> dict[str, Any]:
    """One run: its wall time, and (the stand-in client) when it started and what it saw."""
    out.unlink(missing_ok=True)
    launched = time.time()
    t0 = time.perf_counter()
    proc = subprocess.run(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, timeout=600)
    wall = time.perf_counter() - t0
    res: dict[str, Any] = {"wall_s": wall, "exit": proc.returncode}
    if proc.returncode != 0:
        res["stderr"] = proc.stderr.decode("utf-8", "replace")[-2000:]
    try:
        seen = json.loads(out.read_text())
    except (OSError, ValueError):
        return res
    res.update(child_start_s=seen["started"] - launched, ttft_ms=seen.get("ttft_ms"), status=seen.get("status"))
    return res


def _first_requests(db: Path) -> list[dict[str, Any]]:
    """Per `run` (oldest first), its first request's record: did it wait for the proxy's start-up?"""
    try:
        conn = sqlite3.connect(str(db))
    except sqlite3.Error:
        return []
    try:
        cur = conn.execute(
            "SELECT run_id, min(started_at), proxy_lag_ms, proxy_start_wait_ms, ttft_ms, status FROM requests "
            "GROUP BY run_id ORDER BY min(started_at)")
        return [dict(zip(("run_id", "started_at", "proxy_lag_ms", "proxy_start_wait_ms", "ttft_ms", "status"), r))
                for r in cur.fetchall()]
    except sqlite3.Error:
        return []
    finally:
        conn.close()


def measure(pairs: int, startup_ms: float, cmd: list[str] | None = None,
            progress=lambda _m: None) -> dict[str, Any]:
    """Run ``pairs`` pairs (with and without `run`, alternating which goes first); the figures."""
    sp = free_port()
    sim_argv = [str(BIN / "firsttoken"), "simulate", "--port", str(sp), "--quiet", "--ttfb-ms", "20",
                "--prefill-base-ms", "10", "--prefill-ms-per-1k", "0", "--tpot-ms", "2", "--output-tokens", "8"]
    with tempfile.TemporaryDirectory() as tmp, process(sim_argv, sp):
        tmpd = Path(tmp)
        out, db = tmpd / "client.json", tmpd / "bench-run.db"
        env = {k: v for k, v in os.environ.items() if not k.startswith("FIRSTTOKEN_RUN")}
        env.update(OPENAI_BASE_URL=f"http://127.0.0.1:{sp}/v1", ANTHROPIC_BASE_URL=f"http://127.0.0.1:{sp}",
                   FT_BENCH_STARTUP_S=str(startup_ms / 1000.0), FT_BENCH_OUT=str(out),
                   FIRSTTOKEN_STATE_DIR=str(tmpd / "state"), HOME=env.get("HOME") or tmp)
        env.setdefault("OPENAI_API_KEY", "sk-bench-000000000000000000000")
        env.setdefault("ANTHROPIC_API_KEY", "sk-ant-bench-000000000000000000000")
        client = list(cmd) if cmd else [sys.executable, "-c", CLIENT]
        wrapped = [str(BIN / "firsttoken"), "run", "--no-join", "--db", str(db), "--", *client]
        _once(client, env, out)  # a warm-up of each (file caches), not counted
        _once(wrapped, env, out)
        db.unlink(missing_ok=True)
        rows = []
        for i in range(pairs):
            pair: dict[str, Any] = {}
            for side in (("without", "with") if i % 2 == 0 else ("with", "without")):
                pair[side] = _once(wrapped if side == "with" else client, env, out)
            pair["added_s"] = pair["with"]["wall_s"] - pair["without"]["wall_s"]
            rows.append(pair)
            progress(f"pair {i + 1}/{pairs}: without {pair['without']['wall_s']:.3f} s, "
                     f"with run {pair['with']['wall_s']:.3f} s")
        firsts = _first_requests(db)
    waited = [f for f in firsts if f.get("proxy_start_wait_ms")]
    return {
        "pairs": pairs, "client": "stand-in" if not cmd else cmd[0], "client_startup_ms": None if cmd else startup_ms,
        "runs": rows,
        "median_wall_without_s": _median([r["without"]["wall_s"] for r in rows]),
        "median_wall_with_s": _median([r["with"]["wall_s"] for r in rows]),
        "median_added_s": _median([r["added_s"] for r in rows]),
        "median_child_start_without_s": _median([r["without"].get("child_start_s") for r in rows]),
        "median_child_start_with_s": _median([r["with"].get("child_start_s") for r in rows]),
        "median_ttft_without_ms": _median([r["without"].get("ttft_ms") for r in rows]),
        "median_ttft_with_ms": _median([r["with"].get("ttft_ms") for r in rows]),
        "recorded_first_requests": len(firsts),
        "first_requests_waited_for_start": len(waited),
        "median_start_wait_ms": _median([f["proxy_start_wait_ms"] for f in waited]),
        "failed_runs": sum(1 for r in rows for s in ("with", "without") if r[s]["exit"] != 0),
    }


def report(res: dict[str, Any], console) -> None:
    from rich.table import Table

    def s(v: float | None, unit: str = "s", digits: int = 3) -> str:
        return "–" if v is None else f"{v:.{digits}f} {unit}"

    who = (f"a stand-in client with {res['client_startup_ms']:.0f} ms of its own start-up"
           if res["client_startup_ms"] is not None else res["client"])
    t = Table(title=f"`firsttoken run` vs the bare command: {res['pairs']} pairs, {who}, simulated upstream")
    for c in ("pair", "without run", "with run", "added"):
        t.add_column(c, justify="right")
    for i, r in enumerate(res["runs"], 1):
        t.add_row(str(i), s(r["without"]["wall_s"]), s(r["with"]["wall_s"]), f"{r['added_s']:+.3f} s")
    console.print(t)
    console.print(f"median wall time: {s(res['median_wall_without_s'])} without, {s(res['median_wall_with_s'])} with "
                  f"`run`: run added {res['median_added_s']:+.3f} s (median of the pairs' differences).")
    if res["median_child_start_with_s"] is not None:
        console.print(f"the client started {s(res['median_child_start_with_s'])} after launch with `run`, "
                      f"{s(res['median_child_start_without_s'])} without; its first TTFT "
                      f"{s(res['median_ttft_with_ms'], 'ms', 1)} with, {s(res['median_ttft_without_ms'], 'ms', 1)} without.")
    n, w = res["recorded_first_requests"], res["first_requests_waited_for_start"]
    console.print(f"records: {n} run(s) recorded a request; {w} first request(s) waited for the proxy's start-up"
                  + (f" (median {res['median_start_wait_ms']:.0f} ms, recorded as proxy_start_wait_ms)" if w else "")
                  + ".")
    if res["failed_runs"]:
        console.print(f"{res['failed_runs']} run(s) exited non-zero: check the command (`--json` shows their stderr).")
