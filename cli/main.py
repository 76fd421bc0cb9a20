"""Command wiring only: each command's work lives in its own module."""

from __future__ import annotations

import click

from firsttoken.cli.options import db_option


class LazyGroup(click.Group):
    """A click group that imports a subcommand's module only when that command runs."""

    lazy_commands: dict[str, str] = {}

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(super().list_commands(ctx)) | set(self.lazy_commands))

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name in self.commands or name not in self.lazy_commands:
            return super().get_command(ctx, name)
        import importlib

        module, attr = self.lazy_commands[name].split(":")
        cmd = getattr(importlib.import_module(f"{__package__}.{module}"), attr)
        self.add_command(cmd, name)
        return cmd


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="firsttoken")
def cli() -> None:
    """firsttoken: a local diagnostic proxy for LLM APIs.

    Point a client's base URL at the proxy; every request is forwarded unchanged and
    timed (TTFB, TTFT, gap, TPOT), its tokens counted, and what went wrong explained.
    """


@cli.command()
@click.option("--upstream", "-u", "upstreams", multiple=True, metavar="[NAME=]URL",
              help="Where to forward: https://host/prefix, or name=URL (repeat for several; served at /name).")
@click.option("--port", "-p", type=int, default=None, help="Port to listen on (default 8787, 8080 with --forward; 0: any free port).")
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
@click.option("--metrics-port", type=int, default=None, help="Serve Prometheus metrics on this port (e.g. 9464; 0: any free port).")
@click.option("--otlp-endpoint", default=None, metavar="URL",
              help="Push OpenTelemetry GenAI spans and metrics over OTLP/HTTP to this collector, e.g. "
                   "http://127.0.0.1:4318 (to /v1/traces and /v1/metrics; default: $OTEL_EXPORTER_OTLP_ENDPOINT "
                   "if set). Needs: pip install 'firsttoken[otel]'. See: firsttoken docs otel.")
@click.option("--drain-seconds", type=click.FloatRange(min=0), default=5.0, show_default=True, metavar="N",
              help="On Ctrl-C/SIGTERM, refuse new connections and give requests in flight up to N seconds to "
                   "finish before cutting them (a second Ctrl-C cuts at once).")
def proxy(upstreams, port, host, db_path, save_bodies, insecure_upstream, warn_prompt_tokens, stall_ms, lang, no_live,
          forward_mode, host_match, metrics_port, otlp_endpoint, drain_seconds):
    """Run the proxy in front of one or more upstreams (or, with --forward, as an HTTPS proxy)."""
    from firsttoken.cli.proxy.command import run

    if not upstreams and not forward_mode:
        raise click.UsageError("pass --upstream URL (or --forward for forward-proxy mode)")
    run(upstreams=list(upstreams), port=port if port is not None else (8080 if forward_mode else 8787), host=host,
        db_path=db_path, save_bodies=save_bodies, insecure_upstream=insecure_upstream,
        warn_prompt_tokens=warn_prompt_tokens, stall_ms=stall_ms, lang=lang, no_live=no_live,
        forward_mode=forward_mode, host_match=list(host_match), metrics_port=metrics_port,
        otlp_endpoint=otlp_endpoint, drain_seconds=drain_seconds)


@cli.command("script-path")
def script_path():
    """Print the path of the mitmproxy script (for `mitmdump -s`)."""
    from firsttoken.addon import script

    click.echo(script.__file__)


# Commands that live in their own modules, imported only when used: `firsttoken logs`
# should not pay for importing mitmproxy.
LAZY_COMMANDS = {
    "baseline": "baseline:baseline",
    "bench": "bench.overhead:bench",
    "bench-db": "bench.db:bench_db",
    "bench-live": "bench.live:bench_live",
    "compare": "compare:compare",
    "demo": "demo:demo",
    "diagnoses": "diagnoses:diagnoses",
    "docs": "docs:docs",
    "doctor": "doctor.command:doctor",
    "env": "env.command:env",
    "export": "export:export",
    "logs": "logs:logs",
    "live": "live.runner:live",
    "prune": "prune:prune",
    "report": "report.command:report",
    "run": "run.command:run",
    "session": "sessions:session",
    "sessions": "sessions:sessions",
    "show": "show:show",
    "simulate": "simulate.command:simulate",
    "stats": "stats:stats",
    "sweep": "sweep:sweep",
    "tokenizers": "tokenizers:tokenizers",
}
cli.lazy_commands = LAZY_COMMANDS
