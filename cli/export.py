"""`firsttoken export --csv|--json [filters]`: every column of the matching requests, oldest first.

Rows are streamed from a cursor (``queries.iter_rows``), so a large export never sits in memory;
values are exact, escaped only where a terminal would obey them (``output.write_rows``).
See docs/stats.md ("firsttoken export").
"""

from __future__ import annotations

import sys

import click

from firsttoken.cli.options import db_option, filter_options, json_option, make_filters
from firsttoken.cli.output import DATA_RULE


@click.command("export")
@db_option
@filter_options
@click.option("--csv", "as_csv", is_flag=True, help="CSV with a header line.")
@json_option("rows")
@click.option("--output", "-o", type=click.Path(dir_okay=False, allow_dash=True), default="-",
              help="File (default: stdout). " + DATA_RULE)
@click.option("--columns", help="Comma-separated columns to keep (default: all but the saved bodies).")
@click.option("--bodies", is_flag=True, help="Include request_body / response_body (only stored with --save-bodies).")
@click.option("--limit", type=int, default=None, help="At most this many rows (oldest first).")
def export(db_path, as_csv, as_json, output, columns, bodies, limit, **kw):
    """Export the recorded requests (all columns) as CSV or JSON Lines, oldest first.

    With neither --csv nor --json: JSON Lines when --output ends in .jsonl/.json, else CSV."""
    from firsttoken.addon.store import queries
    from firsttoken.cli import output as out_mod
    from firsttoken.cli.options import cannot_write, console, fail, open_output, reader

    if as_csv and as_json:
        raise click.UsageError("choose one of --csv or --json, not both")
    if not as_csv and not as_json:
        as_json = output.lower().endswith((".jsonl", ".json", ".ndjson"))
        console(stderr=True).print(f"[dim]no format given: writing {'JSON Lines' if as_json else 'CSV'} "
                                   f"({'--csv' if as_json else '--json'} for {'CSV' if as_json else 'JSON Lines'})[/]")
    filters = make_filters(kw)
    db = reader(db_path)
    cols = [c.strip() for c in columns.split(",") if c.strip()] if columns else None
    out = sys.stdout if output == "-" else open_output(output, newline="")
    try:
        n = out_mod.write_rows(queries.iter_rows(db, filters, cols, limit, bodies), "json" if as_json else "csv", out)
    except ValueError as e:
        fail(str(e))
    except OSError as e:  # the disk filled up, the device went away
        if out is sys.stdout:
            raise
        fail(cannot_write(output, e))
    finally:
        if out is not sys.stdout:
            out.close()
    if output != "-":
        console(stderr=True).print(f"exported {n:,} request(s) to {output}")
