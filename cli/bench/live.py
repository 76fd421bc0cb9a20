"""`firsttoken bench-live`: what the live view costs the traffic it watches.

Two ``firsttoken proxy`` processes on pseudo-terminals, one with ``--no-live``, one drawing the
view, against the simulated upstream. How it measures: docs/performance.md.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from firsttoken.addon.record import percentile
from firsttoken.cli.bench.timing import process, stream_once
from firsttoken.cli.loopback import free_port
from firsttoken.cli.terminal import PseudoTerminal, terminal_env

CLI = [sys.executable, "-c", "from firsttoken.cli.main import cli; cli()"]


def _cpu_seconds(pid: int) -> float | None:
    """User+system CPU time of a process (Linux /proc), for the cost of drawing."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def _process(argv: list[str], port: int, terminal: PseudoTerminal | None = None):
    """A benchmark process, on a pseudo-terminal when one is given (the live view draws there)."""
    io_: dict = {}
    if terminal is not None:
        io_ = dict(stdin=terminal.slave, stdout=terminal.slave, stderr=terminal.slave)
    return process(argv, port, env=terminal_env(), start_new_session=True, **io_)


def burst(port: int, body: bytes, n: int) -> list[tuple[float, float]]:
    """n concurrent streams, released together."""
    start = threading.Barrier(n)
    out: list[tuple[float, float] | BaseException] = [None] * n  # type: ignore[list-item]

    def run(i: int) -> None:
        try:
            out[i] = stream_once(port, body, start)
        except BaseException as e:  # noqa: BLE001 - reported below
            out[i] = e

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    errors = [x for x in out if not isinstance(x, tuple)]
    if errors:
        raise click.ClickException(f"{len(errors)} of {n} streams failed: {errors[0]!r}")
    return out  # type: ignore[return-value]


def _stats(samples: list[tuple[float, float]]) -> dict[str, float]:
    ttfb = sorted(s[0] for s in samples)
    ttft = sorted(s[1] for s in samples)
    return {
        "n": len(samples),
        "ttfb_p50": statistics.median(ttfb), "ttfb_p95": percentile(ttfb, 95),
        "ttft_p50": statistics.median(ttft), "ttft_p95": percentile(ttft, 95), "ttft_mean": statistics.fmean(ttft),
    }


def run_bench(
    streams: int = 50,
    rounds: int = 6,
    output_tokens: int = 64,
    tpot_ms: float = 10.0,
    ttfb_ms: float = 5.0,
    prefill_ms: float = 20.0,
    cols: int = 160,
    rows: int = 50,
    progress: Any = None,
    control: bool = False,
) -> dict[str, Any]:
    """Measure; returns per-path stats (ms) and the extra cost of the live view.

    ``control=True`` runs the terminal-attached proxy with ``--no-live`` too (an A/A run:
    how much of the difference is noise between two identical processes).
    """
    say = progress or (lambda msg: None)
    body = json.dumps({"model": "gpt-4o-mini", "stream": True, "stream_options": {"include_usage": True},
                       "messages": [{"role": "user", "content": "Say hi."}]}).encode()
    sp, off_port, on_port = free_port(), free_port(), free_port()
    sim_argv = CLI + ["simulate", "--port", str(sp), "--quiet", "--ttfb-ms", str(ttfb_ms), "--prefill-base-ms",
                      str(prefill_ms), "--prefill-ms-per-1k", "0", "--tpot-ms", str(tpot_ms), "--output-tokens", str(output_tokens)]
    upstream = f"http://127.0.0.1:{sp}"
    samples: dict[str, list[tuple[float, float]]] = {"direct": [], "proxy, live view off": [], "proxy, live view on": []}
    term, term_off = PseudoTerminal(cols, rows, keep=False), PseudoTerminal(cols, rows, keep=False)
    try:
        with tempfile.TemporaryDirectory() as tmp, _process(sim_argv, sp):
            off_argv = CLI + ["proxy", "--no-live", "--port", str(off_port), "-u", upstream, "--db", str(Path(tmp) / "off.db")]
            on_argv = CLI + ["proxy", "--port", str(on_port), "-u", upstream, "--db", str(Path(tmp) / "on.db"), "--lang", "en"]
            if control:
                on_argv.append("--no-live")
            # Both proxies sit on a terminal, so the only difference is what they draw on it.
            with _process(off_argv, off_port, term_off) as off_proc, _process(on_argv, on_port, term) as on_proc:
                ports = {"direct": sp, "proxy, live view off": off_port, "proxy, live view on": on_port}
                for port in ports.values():  # warm up connections, tokenizers, the view
                    burst(port, body, min(streams, 5))
                cpu0 = {k: _cpu_seconds(p.pid) for k, p in (("off", off_proc), ("on", on_proc))}
                order = list(ports)
                for r in range(rounds):
                    for name in (order if r % 2 == 0 else order[::-1]):
                        samples[name] += burst(ports[name], body, streams)
                    say(f"round {r + 1}/{rounds} done")
                cpu1 = {k: _cpu_seconds(p.pid) for k, p in (("off", off_proc), ("on", on_proc))}
    finally:
        term.close()
        term_off.close()
    res = {name: _stats(s) for name, s in samples.items()}
    direct = res["direct"]
    for st in res.values():
        st["added_ttft_p50"] = st["ttft_p50"] - direct["ttft_p50"]
        st["added_ttft_p95"] = st["ttft_p95"] - direct["ttft_p95"]
        st["added_ttfb_p50"] = st["ttfb_p50"] - direct["ttfb_p50"]
    on, off = res["proxy, live view on"], res["proxy, live view off"]
    cpu = {k: (cpu1[k] - cpu0[k]) if cpu0[k] is not None and cpu1[k] is not None else None for k in cpu0}
    return {
        "paths": res,
        "live_minus_off_ttft_p50": on["ttft_p50"] - off["ttft_p50"],
        "live_minus_off_ttft_p95": on["ttft_p95"] - off["ttft_p95"],
        "cpu_s": cpu,
        "terminal_bytes": term.bytes,
        "terminal_bytes_off": term_off.bytes,
        "config": dict(control=control, streams=streams, rounds=rounds, output_tokens=output_tokens, tpot_ms=tpot_ms, ttfb_ms=ttfb_ms,
                       prefill_ms=prefill_ms, terminal=f"{cols}x{rows}"),
    }


def report(res: dict[str, Any], out: Console) -> None:
    c = res["config"]
    t = Table(title=(f"{c['streams']} concurrent streams × {c['rounds']} rounds per path, loopback; simulated upstream "
                     f"TTFB {c['ttfb_ms']:g} ms, first token +{c['prefill_ms']:g} ms, {c['output_tokens']} tokens × {c['tpot_ms']:g} ms"))
    for col in ("path", "TTFB p50", "TTFT p50", "TTFT p95", "added TTFT p50", "added TTFT p95"):
        t.add_column(col, justify="left" if col == "path" else "right")
    for name, st in res["paths"].items():
        t.add_row(name, f"{st['ttfb_p50']:.2f} ms", f"{st['ttft_p50']:.2f} ms", f"{st['ttft_p95']:.2f} ms",
                  f"{st['added_ttft_p50']:+.2f} ms", f"{st['added_ttft_p95']:+.2f} ms")
    out.print(t)
    out.print(f"live view on − off: {res['live_minus_off_ttft_p50']:+.2f} ms TTFT p50, "
              f"{res['live_minus_off_ttft_p95']:+.2f} ms TTFT p95")
    cpu = res["cpu_s"]
    if cpu.get("on") is not None and cpu.get("off") is not None:
        out.print(f"proxy CPU during the measured bursts: {cpu['off']:.2f} s without the view, {cpu['on']:.2f} s with it "
                  f"({res['terminal_bytes'] / 1e6:.1f} MB drawn on a {c['terminal']} terminal)")


@click.command("bench-live")
@click.option("--streams", type=int, default=50, show_default=True, help="Concurrent streams per burst.")
@click.option("--rounds", type=int, default=6, show_default=True, help="Bursts per path (paths alternate).")
@click.option("--output-tokens", type=int, default=64, show_default=True, help="Tokens per simulated answer.")
@click.option("--tpot-ms", type=float, default=10.0, show_default=True, help="Simulated time per output token.")
@click.option("--prefill-ms", type=float, default=20.0, show_default=True, help="Simulated headers → first token.")
@click.option("--control", is_flag=True, help="A/A run: the terminal-attached proxy runs --no-live too (shows the noise).")
@click.option("--json", "as_json", is_flag=True, help="Print the numbers as JSON.")
def bench_live(streams, rounds, output_tokens, tpot_ms, prefill_ms, control, as_json):
    """Measure the TTFT the live view adds: N concurrent streams through the proxy, view on vs off.

    The simulated upstream and both proxies run as their own processes (the one with the
    view draws into a pseudo-terminal); the client here only sends and times.
    """
    out = Console(highlight=False, stderr=as_json)
    res = run_bench(streams=max(1, streams), rounds=max(1, rounds), output_tokens=max(1, output_tokens),
                    tpot_ms=tpot_ms, prefill_ms=prefill_ms, control=control, progress=lambda m: out.print(f"[dim]{m}[/]"))
    if as_json:
        click.echo(json.dumps(res, indent=2))
    else:
        report(res, out)
