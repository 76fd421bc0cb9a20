"""Command wiring only: each command's work lives in its own module."""

from __future__ import annotations

import click

#: the command list of `firsttoken --help`: sections in the order a newcomer meets them, each command
#: with its one-line summary (its ``short_help``: the list imports no command's module)
SECTIONS: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = (
    ("Start here", (
        ("demo", "Try it offline: a simulated upstream, the proxy, healthy and broken requests, the table."),
        ("run", "Run a client (claude, codex, a script) through a proxy of its own; a summary when it exits."),
        ("proxy", "Run the proxy in front of your upstreams; point a client's base URL at it."),
    )),
    ("Read what was recorded", (
        ("logs", "The newest requests, each finding and its fix under its row."),
        ("show", "One request as a waterfall: connect, TTFB, prefill, stream, tokens, findings."),
        ("live", "Watch a proxy running in another terminal, as requests come and go."),
        ("stats", "Percentiles of TTFB, TTFT, gap and TPOT per model; how TTFT grows with the prompt."),
        ("sessions", "Conversations: a coding agent's requests grouped by session and turn."),
        ("session", "One conversation turn by turn: the model's time beside the client's."),
        ("report", "One self-contained HTML file: charts, errors, the slowest requests."),
        ("export", "Every column of the matching requests, as CSV or JSON Lines."),
        ("browse", "The database in Datasette, read-only."),
    )),
    ("Compare", (
        ("compare", "The same prompts through two routes, interleaved: what a gateway adds."),
        ("baseline", "Save P50/P95 per model; check later traffic against it (exit 1 when it drifted)."),
        ("sweep", "Measure how TTFT grows with the input length (or the output length)."),
    )),
    ("Set up and check", (
        ("env", "Print exactly what to set so a client goes through the proxy."),
        ("doctor", "Check the setup without sending a prompt: proxy variables, keys, base URLs, upstreams."),
        ("diagnoses", "Every finding code, what it means and its fix."),
        ("docs", "Print a user guide: clients, record columns, stats, the finding codes."),
        ("tokenizers", "Which tokenizers count offline; fetch another once."),
    )),
    ("Advanced", (
        ("simulate", "Serve a simulated OpenAI/Anthropic upstream with faults, to rehearse."),
        ("prune", "Delete requests recorded before a time (retention)."),
        ("bench", "Measure the proxy's own overhead on loopback."),
        ("bench-live", "Measure the TTFT the live view adds."),
        ("bench-db", "Time `stats` and `logs` on a large synthetic database."),
        ("script-path", "Print the path of the mitmproxy script (for `mitmdump -s`)."),
    )),
)
SUMMARIES = {name: text for _, rows in SECTIONS for name, text in rows}


class LazyGroup(click.Group):
    """A click group that imports a subcommand's module only when that command runs, and lists its
    commands in sections (``SECTIONS``) with their whole summaries, wrapped, never cut."""

    lazy_commands: dict[str, str] = {}

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(super().list_commands(ctx)) | set(self.lazy_commands))

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name in self.commands or name not in self.lazy_commands:
            return super().get_command(ctx, name)
        import importlib

        module, attr = self.lazy_commands[name].split(":")
        cmd = getattr(importlib.import_module(f"{__package__}.{module}"), attr)
        cmd.short_help = cmd.short_help or SUMMARIES.get(name)
        self.add_command(cmd, name)
        return cmd

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        listed = set(SUMMARIES)
        for title, rows in SECTIONS:
            with formatter.section(title):
                formatter.write_dl(list(rows))
        others = [n for n in self.list_commands(ctx) if n not in listed]  # a command not yet given a section
        if others:
            with formatter.section("Other"):
                formatter.write_dl([(n, self.get_command(ctx, n).get_short_help_str(1000)) for n in others])

    def format_epilog(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        formatter.write_paragraph()
        formatter.write_text("`firsttoken COMMAND --help` gives a command's options; `firsttoken docs` the guides.")


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="firsttoken")
def cli() -> None:
    """firsttoken: a local diagnostic proxy for LLM APIs.

    Point a client's base URL at the proxy; every request is forwarded unchanged and
    timed (TTFB, TTFT, gap, TPOT), its tokens counted, and what went wrong explained.
    New here: `firsttoken demo`, then `firsttoken logs`.
    """


@cli.command("script-path", short_help=SUMMARIES["script-path"])
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
