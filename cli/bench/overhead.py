"""`firsttoken bench`: what the proxy itself costs, measured on loopback.

One streaming request directly, through bare mitmproxy and through firsttoken, then a 200k-token
prompt against a 10-token one. How it measures: docs/performance.md.
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from firsttoken.cli.bench.timing import process, stream_once
from firsttoken.cli.loopback import free_port
from firsttoken.cli.options import json_option

BIN = Path(sys.executable).parent


# The floor firsttoken is compared with: plain mitmproxy streaming both bodies, nothing else.
BARE_SCRIPT = """
def requestheaders(flow):
    flow.request.stream = True

def responseheaders(flow):
    flow.response.stream = True
"""


def chat(prompt: str) -> bytes:
    return json.dumps({"model": "gpt-4o-mini", "stream": True, "max_tokens": 8,
                       "messages": [{"role": "user", "content": prompt}]}).encode()


def measure(port: int, body: bytes, n: int, warmup: int = 3, pause: float = 0.0) -> tuple[float, float]:
    """Median client-side (TTFB, TTFT); ``pause`` lets the previous request's analysis (and the
    simulator's own token counting) finish, so each request is timed on a quiet machine."""
    for _ in range(warmup):
        stream_once(port, body)
    samples = []
    for _ in range(n):
        time.sleep(pause)
        samples.append(stream_once(port, body))
    ttfb, ttft = zip(*samples)
    return statistics.median(ttfb), statistics.median(ttft)


def sizes(port: int, small: bytes, big: bytes, n: int) -> tuple[tuple[float, float], tuple[float, float]]:
    return measure(port, small, n, warmup=1, pause=0.4), measure(port, big, n, warmup=1, pause=0.4)


@click.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--requests", "n", type=int, default=None,
              help="Requests per path [default: 60]; with --concurrency, streams per path and level [default: 40].")
@click.option("--concurrency", metavar="N,N,...", default=None,
              help="Measure under load instead: bursts of N concurrent streams per level, e.g. 1,10,50,200.")
@click.option("--websocket", is_flag=True,
              help="With --concurrency: N WebSocket connections per level running Responses turns (as Codex does), "
                   "CPU per frame against bare mitmproxy.")
@click.option("--turns", type=click.IntRange(1, 1000), default=5, show_default=True,
              help="With --websocket: turns per connection, one after another.")
@click.option("--wrapper", is_flag=True,
              help="Measure what `firsttoken run` adds to a client's wall time instead: pairs of runs with and without it.")
@click.option("--pairs", type=click.IntRange(1, 200), default=7, show_default=True, help="With --wrapper: pairs of runs.")
@click.option("--client-startup-ms", type=click.FloatRange(0, 60000), default=1500.0, show_default=True,
              help="With --wrapper: the stand-in client's own start-up before its request (Claude Code, Codex: 1-2 s).")
@click.option("--soak", "soak", type=click.IntRange(1, 10_000_000), default=None, metavar="N",
              help="Measure memory instead: N requests through one long-running proxy (a new connection each, "
                   "--concurrency at a time [default: 40]), its RSS at several points and the rows written.")
@click.option("--mix", default=None, metavar="KIND=N,...",
              help="With --soak: the weights of stream, json, 401 and ws (a WebSocket connection of --turns turns) "
                   "[default: stream=8,json=1,401=2,ws=1].")
@click.option("--save-bodies", is_flag=True, help="With --soak: run the proxy with --save-bodies.")
@click.option("--workers", type=click.IntRange(1, 64), default=1, show_default=True,
              help="With --concurrency: also `firsttoken proxy --workers N`, alternated with one firsttoken process: "
                   "what each adds to TTFT over direct and their CPU per chunk (all N processes counted).")
@click.argument("cmd", nargs=-1, type=click.UNPROCESSED, metavar="[-- CMD ARGS...]")
@json_option("summary")
def bench(n: int, concurrency: str | None, websocket: bool = False, turns: int = 5, wrapper: bool = False, pairs: int = 7, client_startup_ms: float = 1500.0,
          soak: int | None = None, mix: str | None = None, save_bodies: bool = False, workers: int = 1,
          cmd: tuple[str, ...] = (), as_json: bool = False) -> None:
    """Measure the proxy's own overhead on loopback (prints numbers).

    The simulated upstream, bare mitmproxy and firsttoken each run in their own process,
    as they would for a user; the client here only sends and times. With --concurrency,
    per level: client TTFT and chunk gaps for direct / bare mitmproxy / firsttoken, the
    proxies' CPU per chunk and memory, and how far firsttoken's recorded TTFT is from the
    client's. With --websocket as well: N connections per level, each running --turns
    Responses turns over a WebSocket, and the proxies' CPU per frame. With --workers N as well: `firsttoken
    proxy --workers N`, alternated burst by burst with one firsttoken process.

    With --soak N: N requests (streams, JSON answers, 401s and WebSocket turns, --mix) through one
    firsttoken proxy while its live feed is read, the proxy's RSS after each tenth, the rows written
    and the KB per request past the first 5,000 (a third of a shorter soak).

    With --wrapper: pairs of runs of a client with and without `firsttoken run` (a stand-in client
    that starts up for --client-startup-ms then streams one request, or `-- CMD`), the medians of
    their wall times and of what `run` added, and whether a first request waited for the proxy.
    """
    if websocket and concurrency is None:
        raise click.UsageError("--websocket measures under load: give the connections per level, e.g. "
                               "firsttoken bench --websocket --concurrency 10,50")
    if (mix is not None or save_bodies) and soak is None:
        raise click.UsageError("--mix and --save-bodies go with --soak N, e.g. firsttoken bench --soak 100000 --mix stream=8,401=2")
    if workers > 1 and (concurrency is None or websocket or soak is not None):
        raise click.UsageError("--workers compares proxies under load over HTTP: give the streams per level, e.g. "
                               "firsttoken bench --concurrency 10,50,120 --workers 2")
    if soak is not None:
        from firsttoken.cli.bench import load
        from firsttoken.cli.bench import soak as soak_bench

        conc = load.parse_levels(concurrency)[0] if concurrency is not None else 40
        weights = soak_bench.parse_mix(mix or soak_bench.DEFAULT_MIX)
        err = Console(highlight=False, stderr=True)
        res = soak_bench.run(soak, conc, weights, turns=turns, save_bodies=save_bodies,
                             progress=lambda m: err.print(f"[dim]{m}[/]"))
        if as_json:
            click.echo(json.dumps(res, indent=2))
        else:
            soak_bench.report(res, Console(highlight=False))
        return
    if cmd and not wrapper:
        raise click.UsageError("a command is measured only with --wrapper: firsttoken bench --wrapper -- CMD ARGS...")
    if wrapper:
        from firsttoken.cli.bench import wrapper as wrap

        err = Console(highlight=False, stderr=True)
        res = wrap.measure(pairs, client_startup_ms, list(cmd) or None, progress=lambda m: err.print(f"[dim]{m}[/]"))
        if as_json:
            click.echo(json.dumps(res, indent=2))
        else:
            wrap.report(res, Console(highlight=False))
        return
    if concurrency is not None:
        from firsttoken.cli.bench import load

        levels = load.parse_levels(concurrency)
        err = Console(highlight=False, stderr=True)
        if websocket:
            from firsttoken.cli.bench import websocket as ws

            res = ws.run(levels, turns=turns, progress=lambda m: err.print(f"[dim]{m}[/]"))
            if as_json:
                click.echo(json.dumps(res, indent=2))
            else:
                ws.report(res, Console(highlight=False))
            return
        res = load.run(levels, target=max(1, n or 40), progress=lambda m: err.print(f"[dim]{m}[/]"), workers=workers)
        if as_json:
            click.echo(json.dumps(res, indent=2))
        else:
            load.report(res, Console(highlight=False))
        return
    n = max(1, n or 60)
    out = Console(highlight=False)
    small = chat("Say hi.")
    big = chat(" ".join(["The quick brown fox jumps over the lazy dog."] * 20000))  # ~200k tokens
    sp, bp, fp = free_port(), free_port(), free_port()
    sim_argv = [str(BIN / "firsttoken"), "simulate", "--port", str(sp), "--quiet", "--ttfb-ms", "5",
                "--prefill-base-ms", "5", "--prefill-ms-per-1k", "0", "--tpot-ms", "1", "--output-tokens", "8"]
    with tempfile.TemporaryDirectory() as tmp, process(sim_argv, sp):
        script = Path(tmp) / "bare_streaming.py"
        script.write_text(BARE_SCRIPT)
        bare_argv = [str(BIN / "mitmdump"), "-q", "-s", str(script), "--mode", f"reverse:http://127.0.0.1:{sp}",
                     "--listen-host", "127.0.0.1", "--listen-port", str(bp), "--set", "connection_strategy=lazy"]
        big_n = max(5, n // 8)
        res = {"direct": measure(sp, small, n)}
        size = {"direct": sizes(sp, small, big, big_n)}
        with process(bare_argv, bp):
            res["bare mitmproxy (streaming)"] = measure(bp, small, n)
            size["bare mitmproxy (streaming)"] = sizes(bp, small, big, big_n)
        ft_argv = [str(BIN / "firsttoken"), "proxy", "--no-live", "--port", str(fp), "--upstream", f"http://127.0.0.1:{sp}",
                   "--db", str(Path(tmp) / "bench.db")]
        with process(ft_argv, fp):
            res["firsttoken"] = measure(fp, small, n)
            size["firsttoken"] = sizes(fp, small, big, big_n)
    if as_json:
        click.echo(json.dumps(summary(n, res, size, len(big)), indent=2))
        return
    t = Table(title=f"median over {n} streaming requests on loopback (simulated upstream: TTFB 5 ms, first token +5 ms)")
    for c in ("path", "TTFB", "TTFT", "added TTFB", "added TTFT"):
        t.add_column(c, justify="left" if c == "path" else "right")
    d_ttfb, d_ttft = res["direct"]
    for name, (a, b) in res.items():
        t.add_row(name, f"{a:.2f} ms", f"{b:.2f} ms", f"{a - d_ttfb:+.2f} ms", f"{b - d_ttft:+.2f} ms")
    out.print(t)
    over = res["firsttoken"][1] - res["bare mitmproxy (streaming)"][1]
    out.print(f"firsttoken over bare mitmproxy streaming: {over:+.2f} ms TTFT")
    t2 = Table(title=f"prompt size: a 10-token vs a ~200k-token request ({len(big) / 1e6:.1f} MB body), median TTFB")
    for c in ("path", "10 tokens", "~200k tokens", "difference"):
        t2.add_column(c, justify="left" if c == "path" else "right")
    for name, (a, b) in size.items():
        t2.add_row(name, f"{a[0]:.2f} ms", f"{b[0]:.2f} ms", f"{b[0] - a[0]:+.2f} ms")
    out.print(t2)
    extra = (size["firsttoken"][1][0] - size["firsttoken"][0][0]) - (size["direct"][1][0] - size["direct"][0][0])
    out.print(f"what a ~200k-token prompt costs through firsttoken beyond sending it directly: {extra:+.2f} ms TTFB")
    from firsttoken.addon import tokens

    b = tokens.benchmark()
    out.print(f"prompt token counting (analysis thread, {b['tokenizer']}): {b['prompt_tokens_est']:,} tokens in "
              f"{b['seconds'] * 1000:.0f} ms = {b['prompt_tokens_est'] / b['seconds'] / 1e6:.2f} M tokens/s")
    from firsttoken.cli.bench import framing

    f = framing.measure()
    out.print(f"decoding one event in the stream tap (median of 5 streams of 20,000 text deltas, a chunk an event): "
              f"SSE (Anthropic's) {f['sse']:.1f} µs, Bedrock's AWS event stream {f['eventstream']:.1f} µs, "
              f"Ollama's NDJSON (/api/chat) {f['ndjson']:.1f} µs")


def summary(n: int, res: dict, size: dict, big_bytes: int) -> dict:
    """`bench --json`: the same figures as the tables, in milliseconds."""
    from firsttoken.addon import tokens
    from firsttoken.cli.bench import framing

    d_ttfb, d_ttft = res["direct"]
    b = tokens.benchmark()
    return {
        "requests": n, "upstream": {"ttfb_ms": 5, "first_token_after_ms": 5},
        "paths": {name: {"ttfb_ms": round(a, 3), "ttft_ms": round(t, 3), "added_ttfb_ms": round(a - d_ttfb, 3),
                         "added_ttft_ms": round(t - d_ttft, 3)} for name, (a, t) in res.items()},
        "firsttoken_over_bare_ttft_ms": round(res["firsttoken"][1] - res["bare mitmproxy (streaming)"][1], 3),
        "prompt_size": {"big_body_bytes": big_bytes, "paths": {
            name: {"small_ttfb_ms": round(a[0], 3), "big_ttfb_ms": round(bg[0], 3), "difference_ms": round(bg[0] - a[0], 3)}
            for name, (a, bg) in size.items()}},
        "big_prompt_extra_ttfb_ms": round((size["firsttoken"][1][0] - size["firsttoken"][0][0])
                                          - (size["direct"][1][0] - size["direct"][0][0]), 3),
        "tokenizer": {"name": b["tokenizer"], "tokens": b["prompt_tokens_est"], "seconds": round(b["seconds"], 4)},
        "framing_us_per_event": framing.measure(),
    }
