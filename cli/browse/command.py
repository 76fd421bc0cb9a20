"""`firsttoken browse [--db FILE] [--port N]`: the database in Datasette, read-only, on 127.0.0.1.

Datasette is an optional extra; it reads the live database through ``?mode=ro`` connections,
never immutable (``-i``), which would be wrong for a file the proxy writes. See docs/browse.md.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from firsttoken.cli.options import LISTEN_PORT, db_option, fail, missing_db, reading_db

INSTALL_HINT = "pip install 'firsttoken[browse]'"
DEFAULT_PORT = 8765


def datasette_missing() -> str | None:
    """Why Datasette cannot run here (None: it can), with the command that fixes it."""
    try:
        import datasette  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as e:
        return (f"`firsttoken browse` needs Datasette, which is not installed ({e}). "
                f"Install it with: {INSTALL_HINT}")
    return None


def prepare(path: str) -> None:
    """Check that ``path`` is a firsttoken database, upgrading an older schema once (the findings
    table with its foreign key, m018); a missing or foreign file is a clear error."""
    from firsttoken.addon.store.db import StoreError, open_db, open_reader, schema_current

    try:
        db = open_reader(path)
    except FileNotFoundError:
        fail(missing_db(path))
    except StoreError as e:
        fail(str(e))
    try:
        current = schema_current(db)
    finally:
        db.conn.close()
    if not current:
        try:
            open_db(path).conn.close()
        except Exception as e:  # a read-only file or folder, a full disk, a lock: the same advice
            fail(f"{path} has an older schema and could not be upgraded ({e}): run `firsttoken browse` once "
                 "with write access to it (or start `firsttoken proxy --db` on it), then again")


def make_app(path: str, port: int):
    """(Datasette instance, its ASGI app, the URL of the requests table)."""
    from datasette.app import Datasette

    from firsttoken.cli.browse.metadata import build_metadata
    from firsttoken.cli.browse.plugin import register

    name = Path(path).stem  # (Datasette names a database after its file)
    ds = Datasette([path], metadata=build_metadata(name),
                   # (one local reader: a canned percentile query over 200k requests took 5-9 s on a loaded
                   # 2-core machine, more than Datasette's default 1 s allows)
                   settings={"suggest_facets": False, "sql_time_limit_ms": 30000, "facet_time_limit_ms": 2000,
                             "default_page_size": 50, "allow_download": False})
    plugin = register(name)
    url = f"http://127.0.0.1:{port}{plugin.default_view(ds)}"
    return ds, ds.app(), url


@click.command()
@db_option
@click.option("--port", type=LISTEN_PORT, default=DEFAULT_PORT, show_default=True,
              help="Port to serve on (on 127.0.0.1 only).")
@click.option("--open/--no-open", "open_browser", default=False, help="Open the page in a web browser.")
def browse(db_path: str | None, port: int, open_browser: bool) -> None:
    """Browse the recorded requests in Datasette (read-only): newest first, facets, canned queries,
    each finding linked to its request. Needs: pip install 'firsttoken[browse]'."""
    why = datasette_missing()
    if why:
        fail(why)
    path = reading_db(db_path)
    prepare(path)
    import asyncio
    import socket

    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(("127.0.0.1", port))
    except OSError as e:
        sock.close()
        fail(f"cannot listen on 127.0.0.1:{port} ({e.strerror or e}): give another --port (0 picks a free one)")
    port = sock.getsockname()[1]
    ds, app, url = make_app(path, port)
    asyncio.run(ds.invoke_startup())
    click.echo(f"firsttoken browse: {path} (read-only) at {url}")
    click.echo("Ctrl-C stops it.")
    sys.stdout.flush()
    if open_browser:
        import webbrowser

        webbrowser.open(url)
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    server = uvicorn.Server(config)
    try:
        server.run(sockets=[sock])
    except KeyboardInterrupt:
        pass
