"""`firsttoken prune --before 30d`: retention. Deletes old requests (and their findings).
``--dry-run`` only counts; ``--vacuum`` shrinks the file."""

from __future__ import annotations

import json
import os

import click

from firsttoken.cli.options import db_option


def _size(path: str) -> int:
    """The database's bytes on disk: the file and its write-ahead log."""
    return sum(os.path.getsize(p) for p in (path, path + "-wal") if os.path.exists(p))


@click.command("prune")
@db_option
@click.option("--before", required=True, metavar="AGE|TIME",
              help="Delete requests started before this: an age (30d, 12h, 2w) or a time (2026-11-01, 2026-11-01T12:00).")
@click.option("--dry-run", is_flag=True, help="Only count what would be deleted.")
@click.option("--vacuum", "do_vacuum", is_flag=True, help="Afterwards, give the freed space back to the disk (VACUUM).")
@click.option("--json", "as_json", is_flag=True, help="One JSON document with the counts.")
def prune(db_path, before, dry_run, do_vacuum, as_json):
    """Delete requests recorded before a time (retention), keeping `stats` totals exact.

    Requests still in flight are never deleted. Try --dry-run first."""
    from firsttoken.addon.store import retention
    from firsttoken.addon.store.db import StoreError, open_db
    from firsttoken.addon.store.queries import parse_since
    from firsttoken.cli import output
    from firsttoken.cli.options import console, fail, reader, resolve_db

    try:
        cutoff = parse_since(before)
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--before") from None
    path = resolve_db(db_path)
    db = reader(path)  # a missing or foreign file gets the readers' clear error, and is never created
    # (the path as given: deleting is a write, never into the demo's database by default)
    plan = retention.count_before(db, cutoff)
    db.conn.close()
    when = f"{cutoff[:10]} {output.local_time(cutoff)}"
    result = {"db": path, "before": cutoff, "dry_run": dry_run, **plan}
    if not dry_run and plan["requests"]:
        try:
            wdb = open_db(path)
            size = _size(path)
            result["deleted"] = retention.prune_before(wdb, cutoff)
            if do_vacuum:
                retention.vacuum(wdb)
                result["bytes_freed"] = size - _size(path)
            wdb.conn.close()
        except (StoreError, OSError) as e:
            fail(f"could not prune {path}: {e}")
    elif not dry_run:
        result["deleted"] = 0
    if as_json:
        click.echo(json.dumps(result, indent=2))
        return
    con = console()
    span = f" ({plan['first'][:10]} … {plan['last'][:10]})" if plan["requests"] else ""
    if dry_run:
        con.print(f"would delete {output.plural(plan['requests'], 'request')}{span} started before {when}, with "
                  f"{output.plural(plan['findings'], 'finding')}; {plan['kept']:,} would remain. "
                  f"Run again without --dry-run to delete them.")
        return
    if not plan["requests"]:
        con.print(f"nothing to delete: no finished request started before {when}; {plan['kept']:,} kept.")
        return
    con.print(f"deleted {output.plural(result['deleted'], 'request')}{span} started before {when}, with their findings; "
              f"{plan['kept']:,} remain (stats totals updated).")
    if do_vacuum:
        con.print(f"vacuumed: the file is {max(0, result['bytes_freed']) / 1e6:,.1f} MB smaller.")
    else:
        con.print("[dim]the file keeps its size until --vacuum (SQLite reuses the freed pages)[/]")
