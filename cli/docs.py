"""`firsttoken docs [TOPIC]`: the user docs, printed from the installed copy.

The Markdown files of docs/ ship inside the package (``firsttoken.docs``), so a message can
say "see `firsttoken docs record`" and mean it on a machine that has only the wheel.
"""

from __future__ import annotations

import importlib.resources
from pathlib import Path

import click

#: topic -> (file, one line saying what it holds)
TOPICS: dict[str, tuple[str, str]] = {
    "clients": ("clients.md", "pointing Claude Code, Codex, Cline, the SDKs and curl at the proxy"),
    "run": ("run.md", "`firsttoken run`: the clients it knows, how each is redirected, the destination guarantee, start-up, summary"),
    "record": ("record.md", "every column of the record, and what it means"),
    "stats": ("stats.md", "stats, sweep, compare, baseline, export, report: what they compute"),
    "faults": ("faults.md", "what firsttoken promises under faults: full disk, kill -9, hostile input, with figures"),
    "browse": ("browse.md", "the database in Datasette: newest first, facets, canned queries, findings linked"),
    "otel": ("otel.md", "trace spans and metrics into an OpenTelemetry collector (Jaeger, Tempo, Langfuse…)"),
    "diagnoses": ("diagnoses.md", "every finding code, its fix, and the thresholds"),
    "gateways": ("gateways.md", "gateways and hops (LiteLLM, one-api…): what they do to TTFB and the gap, what firsttoken says"),
    "architecture": ("architecture.md", "how firsttoken is built: one request's way through"),
    "cli": ("cli.md", "every command, the shared filters and options, script mode, compare, OpenTelemetry"),
    "conversations": ("conversations.md", "an agent's requests by conversation and turn: model time or tools?"),
    "performance": ("performance.md", "what the proxy costs, with the command that measures each figure"),
}


def doc_text(topic: str) -> str:
    """The Markdown text of one topic: from the installed package (a wheel), else from the
    source tree beside this package (an editable install, where the data-only namespace
    package has no directory of its own)."""
    name, _ = TOPICS[topic]
    try:
        return importlib.resources.files("firsttoken.docs").joinpath(name).read_text(encoding="utf-8")
    except (ModuleNotFoundError, NotADirectoryError, FileNotFoundError, TypeError):
        return (Path(__file__).resolve().parent.parent / "docs" / name).read_text(encoding="utf-8")


def see(topic: str) -> str:
    """The words a message uses to point at a doc: a command that works wherever firsttoken does."""
    return f"`firsttoken docs {topic}`"


@click.command("docs")
@click.argument("topic", required=False, type=click.Choice(sorted(TOPICS)))
@click.option("--raw", is_flag=True, help="The Markdown source instead of the rendered text.")
def docs(topic, raw):
    """Print a user doc (no TOPIC: the list of topics)."""
    from firsttoken.cli.options import console

    if topic is None:
        c = console()
        from firsttoken.cli import output

        output.say(c, "firsttoken docs TOPIC, where TOPIC is one of:")
        for name, (_, what) in TOPICS.items():  # a wrapped description stays under its column
            output.say(c, f"  {name:<13} {what}", 0, 16)
        return
    text = doc_text(topic)
    if raw:
        click.echo(text, nl=False)
        return
    from rich.markdown import Markdown

    console().print(Markdown(text))
