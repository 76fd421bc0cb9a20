"""`firsttoken logs`: recent requests as a table (newest last), JSON Lines or CSV.

Each request is one row; its top finding and the fix go on their own indented lines under it,
in the reader's language. Columns that do not fit are dropped (least important first) and a
cell too wide for its column wraps: no character is ever cut.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import click
from rich.console import Group
from rich.text import Text

from firsttoken.addon.safe_text import printable_data
from firsttoken.cli import output
from firsttoken.cli.labels import label
from firsttoken.cli.options import db_option, filter_options, json_option, lang_option
from firsttoken.cli.output import Col

R = output.REQUIRED
COLUMNS = [
    Col("time", "time", 60),
    Col("id", "id", R),
    Col("route", "route", 20),
    Col("model", "model", R),
    Col("api", "api", 30),
    Col("st", "st", R, right=True),
    Col("prompt", "prompt", 90, right=True),
    Col("ttfb", "TTFB", 80, right=True),
    Col("ttft", "TTFT", R, right=True),
    Col("gap", "gap", 70, right=True),
    Col("tpot", "TPOT", 40, right=True),
    Col("out", "out", 50, right=True),
    Col("total", "total", 75, right=True),
]
INDENT = 4


def _bad(r: dict[str, Any]) -> bool:
    from firsttoken.addon.store.queries import is_error

    return is_error(r) or bool(r.get("client_aborted"))


def columns(lang: str = "en") -> list[Col]:
    """``COLUMNS`` with their headers in ``lang``."""
    return [Col(c.key, label(lang, f"col.{c.key}"), c.prio, c.right) for c in COLUMNS]


def table(rows: Iterable[dict[str, Any]], width: int = 160, hints: bool = True, lang: str = "en") -> Group:
    """Requests, in the order given, as lines of Text fitted to ``width``; headers in ``lang``
    (findings are shown as given: ``output.localize`` them into the same language)."""
    rows = [printable_data(r) for r in rows]  # upstream-controlled text never reaches the terminal raw
    data = [output.request_cells(r) for r in rows]
    chosen = output.fit_columns(columns(lang), data, width)
    lines: list[Text] = output.table_lines(chosen, {c.key: c.header for c, _ in chosen}, bold=True)
    for r, d in zip(rows, data):
        lines += output.table_lines(chosen, d, styles={"st": "red" if _bad(r) else ""})
        msg, tip = output.top_finding(r, hints, more=lambda n: label(lang, "more_findings", n=n))
        for part in (msg, tip):
            if part is not None:
                lines += output.indented(part, width, INDENT if part is msg else INDENT + 2)
    return Group(*lines)


@click.command("logs")
@db_option
@filter_options
@click.option("-n", "--limit", "limit", type=int, default=30, show_default=True,
              help="How many of the newest matching requests to show (0: all).")
@json_option("rows")
@click.option("--csv", "as_csv", is_flag=True, help="CSV with all columns, a header line first. " + output.CSV_RULE)
@lang_option
def logs(db_path, limit, as_json, as_csv, lang, **kw):
    """The newest requests, oldest first so the newest is last (by your prompt); each request's top
    finding and its fix on the indented lines under it."""
    from firsttoken.addon.store import queries
    from firsttoken.cli.options import console, fail, filter_flags, make_filters, reader, resolve_lang

    filters = make_filters(kw)
    db = reader(db_path)
    try:
        rows = queries.recent(db, filters, limit=limit or None)
    except ValueError as e:
        fail(str(e))
    rows.reverse()  # oldest first: the newest ends up last, next to the prompt
    code = resolve_lang(lang)
    for r in rows:
        r["findings"] = output.localize(r.get("findings"), code)
    if as_json or as_csv:
        output.write_rows(rows, "json" if as_json else "csv")
    elif not rows:
        output.say(console(), output.no_rows(db, filter_flags(filters), code))
    else:
        c = console()
        c.print(table(rows, width=c.width, lang=code))
