"""`firsttoken demo`: the simulated upstream + the proxy + a short run of requests, offline.

Healthy streams of all four APIs, prompts of 15 to 6k tokens (prefill), a reasoning model, the
classic failures (bad key, doubled /v1, a buffered stream, no usage, an error mid-stream), then
the table and per-model percentiles; --slower: the same mix from a slower model. Offline.
"""

from __future__ import annotations

import concurrent.futures as cf
import http.client
import json
import time
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table
from rich.text import Text

from firsttoken.addon.plan import EXPERIMENT_HEADER
from firsttoken.addon.record import percentile
from firsttoken.addon.store import queries
from firsttoken.addon.store.db import default_db_path, open_db
from firsttoken.addon.tokens import count_text
from firsttoken.cli import output
from firsttoken.cli.logs import table
from firsttoken.cli.options import fail
from firsttoken.cli.proxy.server import ProxyServer, ProxyStartError
from firsttoken.cli.proxy.state import remember_demo
from firsttoken.cli.simulate import SimConfig, SimServer

DEMO_KEY = "sk-demo-0000000000000000000000000000firsttoken"
FOX = "The quick brown fox jumps over the lazy dog."  # 10 tokens
LONG_PROMPT = " ".join([FOX] * 450)  # ~4.5k tokens
#: the simulated upstream's timing (SimConfig's defaults: 40 ms + 30 ms per 1k prompt tokens of prefill)
TIMING = {"jitter": 0.15, "seed": 7}
#: --slower: the same upstream with its model three times slower to prefill (TTFB unchanged)
SLOWER = {"prefill_base_ms": 120.0, "prefill_ms_per_1k_tokens": 90.0}
SLOWER_EXPERIMENT = "demo-slower"

# (label, path, headers, body)
def _scenarios() -> list[tuple[str, str, dict, dict]]:
    chat = lambda model, content, **kw: {"model": model, "messages": [{"role": "system", "content": "You are terse."}, {"role": "user", "content": content}], **kw}
    oai = {"authorization": f"Bearer {DEMO_KEY}"}
    ant = {"x-api-key": DEMO_KEY, "anthropic-version": "2023-06-01"}
    usage = {"stream": True, "stream_options": {"include_usage": True}}
    return [
        ("chat, short prompt", "/v1/chat/completions", oai, chat("gpt-4o-mini", "Say hi.", **usage)),
        ("chat, 1.5k-token prompt", "/v1/chat/completions", oai, chat("gpt-4o-mini", " ".join([FOX] * 150), **usage)),
        ("chat, 3k-token prompt", "/v1/chat/completions", oai, chat("gpt-4o-mini", " ".join([FOX] * 300), **usage)),
        ("chat, 4.5k-token prompt", "/v1/chat/completions", oai, chat("gpt-4o-mini", LONG_PROMPT, **usage)),
        ("chat, 6k-token prompt", "/v1/chat/completions", oai, chat("gpt-4o-mini", " ".join([FOX] * 600), **usage)),
        ("anthropic messages", "/v1/messages", ant, {"model": "claude-sonnet-4-5", "max_tokens": 256, "stream": True, "system": "You are terse.", "messages": [{"role": "user", "content": "Say hi."}]}),
        ("responses API", "/v1/responses", oai, {"model": "gpt-4.1", "input": "Say hi.", "stream": True}),
        ("reasoning model", "/v1/chat/completions", oai, chat("deepseek-reasoner", "Why is the sky blue?", **usage)),
        ("non-streaming", "/v1/chat/completions", oai, chat("gpt-4o-mini", "Say hi.")),
        ("bad API key", "/v1/chat/completions", {"authorization": "Bearer sk-wrong-key-123456789012345", "x-sim-fault": "auth"}, chat("gpt-4o-mini", "Say hi.", **usage)),
        ("base URL ends in /v1 twice", "/v1/v1/chat/completions", oai, chat("gpt-4o-mini", "Say hi.", **usage)),
        ("stream buffered by a gateway", "/v1/chat/completions", {**oai, "x-sim-fault": "buffered"}, chat("gpt-4o-mini", "Say hi.", **usage)),
        ("stream without usage", "/v1/chat/completions", oai, chat("gpt-4o-mini", "Say hi.", stream=True)),
        ("error mid-stream", "/v1/chat/completions", {**oai, "x-sim-fault": "mid_stream_error"}, chat("gpt-4o-mini", "Say hi.", **usage)),
    ]


def _send(port: int, path: str, headers: dict, body: dict, experiment: str | None = None) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    tag = {EXPERIMENT_HEADER: experiment} if experiment else {}
    try:
        conn.request("POST", path, body=json.dumps(body).encode(),
                     headers={"content-type": "application/json", **tag, **headers})
        resp = conn.getresponse()
        while resp.read(4096):
            pass
    finally:
        conn.close()


def summary(rows: list[dict]) -> Table:
    t = Table(title="per model, streamed requests: P50/P95", header_style="bold underline", box=None, padding=(0, 1))
    for c in ("model", "n", "errors", "TTFB", "TTFT", "gap"):
        t.add_column(c, justify="left" if c == "model" else "right", no_wrap=True)
    by: dict[str, list[dict]] = {}
    for r in rows:
        if not queries.is_streamed(r):  # the one population rule, as stats, report and baseline
            continue
        by.setdefault(r.get("model") or "–", []).append(r)

    def pct(vals: list[float], q: float) -> str:
        vals = sorted(v for v in vals if v is not None)
        return output.ms(percentile(vals, q)) if vals else "–"

    for model, rs in sorted(by.items()):
        errs = sum(1 for r in rs if queries.is_error(r))
        row = [model, str(len(rs)), str(errs)]
        for k in ("ttfb_ms", "ttft_ms", "gap_ms"):
            vals = [r.get(k) for r in rs]
            row.append(f"{pct(vals, 50)}/{pct(vals, 95)}")
        t.add_row(*row)
    return t


@click.command()
@click.option("--db", "db_path", type=click.Path(dir_okay=False), default=None,
              help="Where to record the demo (default: demo.db next to the default database).")
@click.option("--rounds", type=int, default=1, show_default=True, help="How many times to run the scenarios.")
@click.option("--slower", is_flag=True,
              help=f"The same mix from a model three times slower to prefill: the gap triples, not the whole TTFT "
                   f"(prefill {SLOWER['prefill_base_ms']:g} ms "
                   f"+ {SLOWER['prefill_ms_per_1k_tokens']:g} ms per 1k prompt tokens instead of 40 + 30), tagged "
                   f"--experiment {SLOWER_EXPERIMENT}: a second round for `firsttoken baseline check`.")
def demo(db_path, rounds, slower):
    """Run the simulated upstream and the proxy, send a short mix of requests, show the result."""
    out = Console(highlight=False)
    path = Path(db_path) if db_path else default_db_path().with_name("demo.db")
    experiment = SLOWER_EXPERIMENT if slower else None
    count_text("warm-up", "gpt-4o-mini")  # the tokenizer loads now, not on the proxy's thread while streams run
    with SimServer(SimConfig(**TIMING, **(SLOWER if slower else {}))) as sim:
        proxy = ProxyServer([sim.url], str(path), port=0)
        try:
            proxy.start()
        except ProxyStartError as e:  # e.g. --db names a file that is not a firsttoken database
            fail(str(e))
        try:
            output.say(out, Text("firsttoken demo", style="bold").append(": ").append_text(
                output.whole(f"simulated upstream {sim.url},", "none")).append(" ").append_text(
                output.whole(f"proxy {proxy.url},", "none")).append(" ").append_text(output.whole(f"db {path}", "none")))
            started = time.time()
            for _ in range(max(1, rounds)):
                scen = _scenarios()
                with cf.ThreadPoolExecutor(4) as pool:
                    list(pool.map(lambda s: _send(proxy.bound_port, s[1], s[2], s[3], experiment), scen))
            proxy.flush()
            ids_after = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(started - 1))
        finally:
            proxy.stop()
    remember_demo(path)  # so `firsttoken logs` finds it while nothing else has recorded (options.reading_db)
    db = open_db(path, write=False)
    rows = [r for r in queries.recent(db, limit=len(_scenarios()) * max(1, rounds)) if r["started_at"] >= ids_after]
    rows.reverse()
    out.print("[bold]requests through the proxy[/]")
    out.print(table(rows, width=out.width))
    out.print(summary(rows))
    if rows and slower:
        output.say(out, Text("Next: ").append_text(output.whole(
            f"firsttoken baseline check NAME --db {path} --experiment {SLOWER_EXPERIMENT}")).append(
            " checks this round against a baseline saved from an earlier `firsttoken demo` (`firsttoken baseline save NAME`)."))
    elif rows:
        # the request README draws: the stream a gateway held (any row, should the demo change)
        held = next((r for r in rows if r.get("top_code") == "stream.buffered"), rows[-1])
        output.say(out, Text("Next: ").append_text(output.whole(f"firsttoken show {held['id'][:8]} --db {path}")).append(
            " draws one request's timeline; ").append_text(output.whole(f"firsttoken logs --db {path}")).append(
            " lists them. For real traffic: ").append_text(output.whole("firsttoken proxy --upstream https://api.openai.com")).append(
            " and point your client's base URL at it."))
