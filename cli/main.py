"""Command wiring only: each command's work lives in its own module."""

from __future__ import annotations

import click


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
    "browse": "browse.command:browse",
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
    "proxy": "proxy.command:proxy",
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
