"""`firsttoken proxy`: start, print where to point clients, then the live view or plain lines.

The live view (cli/live/runner.py) is the default when stdout is a terminal; ``--no-live``
or a pipe/file gives one plain line per finished request (cli/output.py).
"""

from __future__ import annotations

import asyncio
import os
import sys
import threading

import click
from rich.console import Console
from rich.markup import escape
from rich.text import Text

from firsttoken.addon import forward as fwd
from firsttoken.addon.diagnose.lang import resolve as resolve_lang
from firsttoken.addon.routing import RouteError, client_bases
from firsttoken.addon.store.writer import describe_health, describe_recovery
from firsttoken.cli import output
from firsttoken.cli.env.command import clear_state, write_state
from firsttoken.cli.options import LISTEN_PORT, db_option, fail, resolve_db
from firsttoken.cli.proxy.feed import LiveFeed
from firsttoken.cli.proxy.server import DRAIN_SECONDS, ProxyServer, ProxyStartError


def banner(server: ProxyServer, out: Console) -> None:
    output.say(out, Text("firsttoken", style="bold").append(" listening on ").append_text(output.whole(server.url))
               .append("  ").append_text(output.whole(f"(db: {server.db})", style="none")))
    if server.metrics_url:
        out.print(f"  Prometheus metrics: {server.metrics_url}", markup=False)
    for what, url in (("metrics", server.otlp_endpoint), ("spans", server.otlp_traces_endpoint)):
        if url:
            out.print(f"  OpenTelemetry {what} (OTLP/HTTP) -> {url}", markup=False)
    for what, d in server.egress():
        if server.egress_shown(d):
            out.print(f"  upstream leg to {what}: {d.describe()}", markup=False)
    if server.workers > 1:
        out.print(f"  {server.workers} processes accept on this port (--workers); this one (pid {os.getpid()}) "
                  "also analyses and records what they all forward", markup=False)
        threading.Thread(target=announce_workers, args=(server, out), name="firsttoken-workers-ready",
                         daemon=True).start()
    if server.forward_mode:
        for line in fwd.client_hints(server.url, server.options.get("confdir")):
            out.print(line, markup=False)
        out.print("`firsttoken env CLIENT --forward` prints the exact settings; Ctrl-C stops.", markup=False)
        return
    for r in server.routes:
        out.print(f"  {server.url}{r.mount or ''}  →  {r.url}", markup=False)
    out.print("Point your client here (Ctrl-C stops and writes every pending record):", markup=False)
    for cb in client_bases(server.url, server.routes):
        out.print(f"  {cb.text}", markup=False)
        for w in cb.warnings:
            out.print(f"    [yellow]warning:[/] {escape(w)}")


#: how long the worker processes get to start before the proxy says some did not
WORKERS_START_S = 60.0


def announce_workers(server: ProxyServer, out: Console) -> None:
    """Once every worker process accepts, say so (a benchmark waits for this line); if some did not within
    WORKERS_START_S, say that the others carry the port meanwhile, and what to look at."""
    if server.workers_ready(WORKERS_START_S):
        out.print(f"firsttoken: all {server.workers} processes accept connections", markup=False)
        out.file.flush()
        return
    out.print(f"firsttoken: not every worker process started within {WORKERS_START_S:g} s; the ones that did serve "
              "the port meanwhile. Their errors are logged above; `--workers 1` runs the proxy in one process.",
              markup=False, soft_wrap=True, style="yellow")
    out.file.flush()


def run(*, upstreams, port, host, db_path, save_bodies, insecure_upstream, warn_prompt_tokens, stall_ms, lang, no_live,
        forward_mode=False, host_match=(), metrics_port=None, otlp_endpoint=None,
        drain_seconds=DRAIN_SECONDS, otlp_metrics_endpoint=None, upstream_proxy=None, no_upstream_proxy=False,
        upstream_ca=None, workers=1) -> None:
    out = Console(highlight=False)
    err = Console(stderr=True, highlight=False)
    lang = resolve_lang(lang)  # one decision for the findings and the live view's labels
    try:
        server = ProxyServer(
            upstreams, resolve_db(db_path), host=host, port=port, save_bodies=save_bodies,
            insecure_upstream=insecure_upstream, warn_prompt_tokens=warn_prompt_tokens,
            stall_ms=stall_ms, lang=lang,
            forward_mode=forward_mode, host_match=host_match, metrics_port=metrics_port,
            otlp_endpoint=otlp_endpoint, drain_seconds=drain_seconds, otlp_metrics_endpoint=otlp_metrics_endpoint,
            upstream_proxy=upstream_proxy, no_upstream_proxy=no_upstream_proxy, upstream_ca=upstream_ca,
            workers=workers,
        )
    except RouteError as e:
        fail(str(e), 2)
    if host not in ("127.0.0.1", "localhost", "::1"):
        err.print(f"[yellow]warning:[/] listening on {host}: the proxy (and the API keys your clients send through it) "
                  "is reachable from the network. Use --host 127.0.0.1 unless you mean it.")
    if insecure_upstream:
        err.print("[yellow]warning:[/] --insecure-upstream: the upstream's TLS certificate is NOT verified.")

    server.live_feed = LiveFeed()  # what this proxy knows, for `firsttoken live` in another terminal
    server.on_listen.append(server.live_feed.start)  # before registering: the entry names its port
    server.on_listen.append(write_state)  # the per-user registry: `env`, `doctor`, `run`, `live` find this proxy
    server.before_listen.append(freeze_startup_objects)
    server.on_drain.append(lambda *_: clear_state(server))  # stopping: it takes no new clients
    try:
        _serve(server, out, lang, no_live)
    finally:
        clear_state(server)
        server.live_feed.close()


def freeze_startup_objects(_server=None) -> None:
    """Leave what startup built (mitmproxy, rich, the modules: ~all objects there are) out of
    the garbage collector's full passes (``gc.freeze``): they live as long as the process,
    and each full pass over them took ~40 ms of the event loop's time (at 200 concurrent streams,
    ~0.08 ms a request less with them frozen; raising the young generations' thresholds
    measured no better). Only in the proxy's own process (not in tests' or mitmdump's). Just
    before the port opens: the collection before the freeze takes ~40 ms, which a client
    connecting at once would have waited, recorded as the proxy's own delay."""
    import gc

    gc.collect()
    gc.freeze()


def _serve(server, out, lang, no_live) -> None:
    if not no_live and sys.stdout.isatty():
        from firsttoken.cli.live.runner import serve_with_live

        try:
            serve_with_live(server, out, lang)
        except ProxyStartError as e:
            fail(str(e))
        sys.stdout.flush()
        return

    def on_record(rec) -> None:
        # The record is final here: its fields as they are (no copy of the row), and straight to
        # the console's file (rich would re-parse a plain line; both cost the event loop GIL time).
        out.file.write(output.line(vars(rec)) + "\n")

    def on_idle() -> None:  # once per burst of records, not per line: a write is a system call
        out.file.flush()

    def on_store(health) -> None:  # the database stopped (or resumed) taking writes: say so at once
        msg = describe_health(health)
        out.print(f"firsttoken: {msg or describe_recovery(health)}", markup=False, soft_wrap=True,
                  style="bold red" if msg else "green")
        write_state(server)  # `firsttoken doctor` reads the writer's health from the registry entry

    def on_drain(n: int, seconds: float) -> None:
        if n:
            out.print(f"firsttoken: stopping; new connections are refused. Waiting up to {seconds:g} s for "
                      f"{output.plural(n, 'request')} still running (Ctrl-C again cuts {'it' if n == 1 else 'them'}).",
                      markup=False, soft_wrap=True)

    def on_otel_notice(msg: str) -> None:  # an OTLP endpoint refused a signal (Phoenix: metrics): once
        out.print(f"firsttoken: {msg}", markup=False, soft_wrap=True, style="yellow")

    if server.otel is not None:
        server.otel.notices.append(on_otel_notice)
    server.capture.listeners.append(on_record)
    server.capture.idle_listeners.append(on_idle)
    server.capture.store_listeners.append(on_store)
    server.on_drain.append(on_drain)
    from firsttoken.cli.live.db import session_start

    since = session_start()
    try:
        asyncio.run(server.serve(on_ready=lambda s: banner(s, out), handle_signals=True))
    except ProxyStartError as e:
        fail(str(e))
    except KeyboardInterrupt:
        pass
    from firsttoken.cli.live.runner import print_summary  # (rich's live view: imported at exit, not at start)

    print_summary(out, None, server.db, lang, since=since)  # the figures `stats --since` gives this session
    sys.stdout.flush()


@click.command("proxy")
@click.option("--upstream", "-u", "upstreams", multiple=True, metavar="[NAME=]URL",
              help="Where to forward: https://host/prefix, or name=URL (repeat for several; served at /name).")
@click.option("--port", "-p", type=LISTEN_PORT, default=None, help="Port to listen on (default 8787, 8080 with --forward; 0: any free port).")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@db_option
@click.option("--save-bodies", is_flag=True, help="Store request/response bodies (redacted, capped at 256 KB).")
@click.option("--insecure-upstream", is_flag=True, help="Skip TLS verification of the upstream (unsafe).")
@click.option("--warn-prompt-tokens", type=int, default=0, show_default=True,
              help="Flag prompts above this many tokens (0: half the model's context window, or 64,000 if unknown).")
@click.option("--stall-ms", type=int, default=1000, show_default=True, help="Flag inter-token gaps above this.")
@click.option("--lang", type=click.Choice(["en", "zh"]), default=None, help="Language of findings (default: locale).")
@click.option("--no-live", is_flag=True, help="Print one plain line per request instead of the live view.")
@click.option("--forward", "forward_mode", is_flag=True,
              help="Forward-proxy mode (clients set HTTPS_PROXY and trust mitmproxy's CA): records LLM API hosts, tunnels the rest untouched.")
@click.option("--host-match", "host_match", multiple=True, metavar="HOST",
              help="With --forward: also record this host (host, *.domain, host:port, or a regex on host:port).")
@click.option("--metrics-port", type=LISTEN_PORT, default=None, help="Serve Prometheus metrics on this port (e.g. 9464; 0: any free port).")
@click.option("--otlp-endpoint", default=None, metavar="URL",
              help="Push OpenTelemetry GenAI spans and metrics over OTLP/HTTP to this collector, e.g. "
                   "http://127.0.0.1:4318 (to /v1/traces and /v1/metrics; default: $OTEL_EXPORTER_OTLP_ENDPOINT "
                   "if set). Needs: pip install 'firsttoken[otel]'. See: firsttoken docs otel.")
@click.option("--otlp-metrics-endpoint", default=None, metavar="URL",
              help="Push the OpenTelemetry metrics here instead (e.g. a collector beside a traces-only backend "
                   "such as Phoenix or Langfuse, which answer 405 to metrics); a base URL gets /v1/metrics.")
@click.option("--upstream-proxy", default=None, metavar="URL",
              help="Reach the upstream through this HTTP proxy, http://[user:pass@]host:port (default: HTTPS_PROXY / "
                   "HTTP_PROXY / ALL_PROXY and NO_PROXY, as your clients do). SOCKS is not supported.")
@click.option("--no-upstream-proxy", is_flag=True, help="Connect to the upstream directly, whatever the proxy variables say.")
@click.option("--upstream-ca", default=None, metavar="FILE",
              help="Also trust this CA (PEM) for the upstream's TLS, e.g. your company proxy's; the system store, "
                   "SSL_CERT_FILE and REQUESTS_CA_BUNDLE are trusted already.")
@click.option("--workers", default="1", show_default=True, metavar="N|auto",
              help="Processes accepting on the port: one of them also analyses and records for all. auto: half the "
                   "cores, at most 8. On two cores a second process cut what the proxy adds to TTFT only from ~200 "
                   "concurrent streams, for 1.1-1.3x the CPU (docs/performance.md): one is the default.")
@click.option("--drain-seconds", type=click.FloatRange(min=0), default=5.0, show_default=True, metavar="N",
              help="On Ctrl-C/SIGTERM, refuse new connections and give requests in flight up to N seconds to "
                   "finish before cutting them (a second Ctrl-C cuts at once).")
def proxy(upstreams, port, host, db_path, save_bodies, insecure_upstream, warn_prompt_tokens, stall_ms, lang, no_live,
          forward_mode, host_match, metrics_port, otlp_endpoint, otlp_metrics_endpoint, upstream_proxy, no_upstream_proxy,
          upstream_ca, workers, drain_seconds):
    """Run the proxy in front of one or more upstreams (or, with --forward, as an HTTPS proxy)."""
    if not upstreams and not forward_mode:
        raise click.UsageError("pass --upstream URL (or --forward for forward-proxy mode)")
    from firsttoken.cli.proxy.workers import parse_workers

    try:
        n_workers = parse_workers(workers)
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--workers") from None
    run(upstreams=list(upstreams), port=port if port is not None else (8080 if forward_mode else 8787), host=host,
        db_path=db_path, save_bodies=save_bodies, insecure_upstream=insecure_upstream,
        warn_prompt_tokens=warn_prompt_tokens, stall_ms=stall_ms, lang=lang, no_live=no_live,
        forward_mode=forward_mode, host_match=list(host_match), metrics_port=metrics_port,
        otlp_endpoint=otlp_endpoint, otlp_metrics_endpoint=otlp_metrics_endpoint, drain_seconds=drain_seconds,
        upstream_proxy=upstream_proxy, no_upstream_proxy=no_upstream_proxy, upstream_ca=upstream_ca,
        workers=n_workers)
