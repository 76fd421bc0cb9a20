"""`firsttoken export --csv|--json [filters]`: every column of the matching requests, oldest first.

Rows are streamed from a cursor, so an export of a large database never sits in memory.
CSV: one header line, JSON columns (findings, event_offsets, key_facts) as JSON text.
JSON: JSON Lines, one object per request (like `logs --json`).
"""

from __future__ import annotations

import csv
import json
import sys
from collections.abc import Iterator
from typing import Any

import click

from firsttoken.addon.store.queries import Filters, decode_row
from firsttoken.cli.options import db_option
from firsttoken.cli.stats import filter_options, make_filters

BODY_COLUMNS = ("request_body", "response_body")


def iter_rows(db, filters: Filters, columns: list[str] | None = None, limit: int | None = None,
              bodies: bool = False) -> Iterator[dict[str, Any]]:
    where, params = filters.where()
    have = [r[1] for r in db.execute("PRAGMA table_info(requests)").fetchall()]
    if columns:
        unknown = [c for c in columns if c not in have]
        if unknown:
            raise ValueError(f"unknown column(s): {', '.join(unknown)}; see `firsttoken docs record` for the list")
        cols = columns
    else:
        cols = [c for c in have if bodies or c not in BODY_COLUMNS]
    sql = f"SELECT {', '.join(cols)} FROM requests{where} ORDER BY started_at"
    if limit:
        sql += f" LIMIT {int(limit)}"
    cur = db.conn.execute(sql, params)
    while batch := cur.fetchmany(1000):
        for r in batch:
            yield decode_row(dict(zip(cols, r)))


def write(rows: Iterator[dict[str, Any]], fmt: str, out) -> int:
    n = 0
    writer = None
    for r in rows:
        if fmt == "json":
            out.write(json.dumps(r, ensure_ascii=False, default=str) + "\n")
        else:
            if writer is None:
                writer = csv.DictWriter(out, fieldnames=list(r))
                writer.writeheader()
            writer.writerow({k: json.dumps(v, ensure_ascii=False) if isinstance(v, (list, dict)) else v for k, v in r.items()})
        n += 1
    return n


@click.command("export")
@db_option
@filter_options
@click.option("--csv", "as_csv", is_flag=True, help="CSV with a header line.")
@click.option("--json", "as_json", is_flag=True, help="JSON Lines: one object per request.")
@click.option("--output", "-o", type=click.Path(dir_okay=False, allow_dash=True), default="-", help="File (default: stdout).")
@click.option("--columns", help="Comma-separated columns to keep (default: all but the saved bodies).")
@click.option("--bodies", is_flag=True, help="Include request_body / response_body (only stored with --save-bodies).")
@click.option("--limit", type=int, default=None, help="At most this many rows (oldest first).")
def export(db_path, as_csv, as_json, output, columns, bodies, limit, **kw):
    """Export the recorded requests (all columns) as CSV or JSON Lines, oldest first."""
    from firsttoken.cli.options import console, fail, reader

    if as_csv == as_json:
        raise click.UsageError("choose one of --csv or --json")
    db = reader(db_path)
    cols = [c.strip() for c in columns.split(",") if c.strip()] if columns else None
    out = sys.stdout if output == "-" else open(output, "w", newline="", encoding="utf-8")
    try:
        n = write(iter_rows(db, make_filters(kw), cols, limit, bodies), "json" if as_json else "csv", out)
    except ValueError as e:
        fail(str(e))
    finally:
        if out is not sys.stdout:
            out.close()
    if output != "-":
        console(stderr=True).print(f"exported {n:,} request(s) to {output}")
