"""`firsttoken simulate`: run the simulated LLM upstream in the foreground until Ctrl-C."""

from __future__ import annotations

import signal
import textwrap
import threading

import click

from firsttoken.addon.safe_text import clause
from firsttoken.cli.options import LISTEN_PORT
from firsttoken.cli.simulate.config import ERROR_FAULTS, FAULT_HEADER, FAULT_HELP, FAULTS, SimConfig
from firsttoken.cli.simulate.server import SimServer


def faults_help(width: int = 78) -> str:
    """The faults, one per entry wrapped to ``width`` columns (``--help``'s epilog and nothing else:
    the banner names them only)."""
    lines = [f"Faults: header `{FAULT_HEADER}: NAME[,NAME]` or model `fault-NAME`. An error fault answers with "
             "an error; an answer fault changes how the answer is delivered."]
    lines += ["", "\b"]  # click keeps the next paragraph's lines as they are
    for name in FAULTS:
        tag = "error" if name in ERROR_FAULTS else "answer"
        lines += textwrap.wrap(FAULT_HELP[name], width, initial_indent=f"{name} ({tag}): ", subsequent_indent="    ",
                               break_on_hyphens=False, break_long_words=False)
    return "\n".join(lines)


def curl_examples(server: SimServer) -> list[str]:
    """The curl commands the banner prints: a stream that asks for its usage chunk (without
    ``stream_options`` an OpenAI stream carries no usage, and firsttoken says ``usage.missing``)."""
    out = []
    if "openai" in server.config.protocols:
        body = ('{"model": "sim-1", "stream": true,\n'
                '       "stream_options": {"include_usage": true},\n'
                '       "messages": [{"role": "user", "content": "hi"}]}')
        out.append(f"curl -N {server.openai_base_url}/chat/completions \\\n"
                   f"  -H 'content-type: application/json' \\\n  -d '{body}'")
    if "anthropic" in server.config.protocols:
        body = ('{"model": "sim-1", "max_tokens": 64, "stream": true,\n'
                '       "messages": [{"role": "user", "content": "hi"}]}')
        out.append(f"curl -N {server.anthropic_base_url}/v1/messages \\\n"
                   f"  -H 'content-type: application/json' -H 'anthropic-version: 2023-06-01' \\\n  -d '{body}'")
    return out


@click.command("simulate", epilog=faults_help())
@click.option("--host", default="127.0.0.1", show_default=True, help="Interface to listen on.")
@click.option("--port", default=9000, show_default=True, type=LISTEN_PORT, help="Port to listen on (0: any free port).")
@click.option("--ttfb-ms", default=60.0, show_default=True, type=float, help="Request arrival -> response headers.")
@click.option("--prefill-base-ms", default=40.0, show_default=True, type=float, help="Headers -> first token, fixed part.")
@click.option("--prefill-ms-per-1k", default=30.0, show_default=True, type=float, help="Extra prefill per 1000 prompt tokens.")
@click.option("--tpot-ms", default=15.0, show_default=True, type=float, help="Time per output token.")
@click.option("--output-tokens", default=32, show_default=True, type=int, help="Answer length (capped by max_tokens).")
@click.option("--fill-max-tokens", is_flag=True, help="Answer with exactly max_tokens tokens (capped at 8192).")
@click.option("--ignore-max-tokens", is_flag=True, help="Answer --output-tokens tokens even above max_tokens (a broken upstream).")
@click.option("--reasoning-tokens", default=16, show_default=True, type=int, help="Reasoning tokens of *reason*/*think* models.")
@click.option("--jitter", default=0.0, show_default=True, type=float, help="Random +/- fraction on every delay.")
@click.option("--seed", default=None, type=int, help="Seed for the jitter.")
@click.option("--stall-ms", default=1500.0, show_default=True, type=float, help="Pause of the `stall` fault.")
@click.option("--api-key", default=None, help="Require this key (Authorization: Bearer / x-api-key); default: accept any.")
@click.option("--prefix", default="", help="Path prefix before /v1, e.g. /openai.")
@click.option(
    "--protocol",
    "protocols",
    multiple=True,
    type=click.Choice(["openai", "anthropic"]),
    help="Serve only this API family (repeatable); the other's paths answer 404. Default: both.",
)
@click.option("--prompt-cache", is_flag=True,
              help="Report cached tokens for the part of a prompt an earlier request sent (Anthropic: up to cache_control).")
@click.option("--no-websocket", "no_websocket", is_flag=True,
              help="Answer the Responses WebSocket upgrade 404, as gateways that serve only HTTP + SSE do.")
@click.option("--quiet", is_flag=True, help="Do not log each request.")
def simulate(
    host: str, port: int, ttfb_ms: float, prefill_base_ms: float, prefill_ms_per_1k: float, tpot_ms: float,
    output_tokens: int, fill_max_tokens: bool, ignore_max_tokens: bool, reasoning_tokens: int, jitter: float, seed: int | None,
    stall_ms: float, api_key: str | None, prefix: str, protocols: tuple[str, ...], prompt_cache: bool, quiet: bool,
    no_websocket: bool = False,
) -> None:  # fmt: skip
    """Serve a simulated LLM upstream (OpenAI + Anthropic APIs) with realistic timing and injectable faults."""
    try:
        config = SimConfig(
            ttfb_ms=ttfb_ms, prefill_base_ms=prefill_base_ms, prefill_ms_per_1k_tokens=prefill_ms_per_1k,
            tpot_ms=tpot_ms, output_tokens=output_tokens, fill_max_tokens=fill_max_tokens,
            ignore_max_tokens=ignore_max_tokens,
            reasoning_tokens=reasoning_tokens, jitter=jitter, seed=seed, stall_ms=stall_ms, api_key=api_key,
            prefix=prefix, protocols=protocols or ("openai", "anthropic"), verbose=not quiet,
            prompt_cache=prompt_cache, websocket=not no_websocket,
        )  # fmt: skip
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from exc
    server = SimServer(config, host=host, port=port)
    try:
        server.start()
    except OSError as exc:
        raise click.ClickException(f"cannot listen on {host}:{port}: {clause(exc.strerror or exc)}. Pick another --port "
                                   "(--port 0 picks a free one) or --host.") from None
    # Ctrl-C and SIGTERM stop it. The kernel may hand the signal to a server thread; Python runs its
    # handler only in the main thread, between bytecodes, so the main thread wakes every 0.2 s (an
    # untimed wait slept on through a Ctrl-C that landed elsewhere, on a busy machine)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    click.echo(describe(server))
    try:
        while not stop.wait(0.2):
            pass
        click.echo("\nstopping…")
    finally:
        server.stop()


def describe(server: SimServer) -> str:
    c = server.config
    lines = [
        f"firsttoken simulate: serving on {server.url}",
        f"  timing: ttfb {c.ttfb_ms:g} ms, prefill {c.prefill_base_ms:g} ms + {c.prefill_ms_per_1k_tokens:g} ms/1k prompt "
        f"tokens,\n          {c.tpot_ms:g} ms/token, {c.output_tokens} output tokens"
        + (" (fill max_tokens)" if c.fill_max_tokens else "")
        + (" (max_tokens ignored)" if c.ignore_max_tokens else "")
        + (f", jitter ±{c.jitter:.0%}" if c.jitter else ""),
        f"  auth: {'key required: ' + c.api_key if c.api_key else 'any key accepted'}",
    ]
    if "openai" in c.protocols:
        lines += [
            f"  OpenAI:    base_url={server.openai_base_url}",
            f"             POST {c.prefix}/v1/chat/completions, {c.prefix}/v1/completions, {c.prefix}/v1/responses",
        ]
        if c.websocket:
            lines.append(f"             GET {c.prefix}/v1/responses as a WebSocket (as Codex): a frame per turn")
    if "anthropic" in c.protocols:
        lines += [f"  Anthropic: base_url={server.anthropic_base_url}   (POST {c.prefix}/v1/messages)"]
    lines += [
        "  models:    any name; *reason* / *think* stream reasoning first;\n             *tool* + tools -> a tool call",
        f"  faults:    header `{FAULT_HEADER}: NAME[,NAME]` or model `fault-NAME`",
    ]
    lines += textwrap.wrap(", ".join(FAULTS), 78, initial_indent="             ", subsequent_indent="             ",
                           break_on_hyphens=False)
    lines.append("             (what each does: firsttoken simulate --help)")
    lines.append("  try:")
    lines += ["    " + ln for ex in curl_examples(server) for ln in ex.split("\n")]
    lines.append("Ctrl-C to stop.")
    return "\n".join(lines)
