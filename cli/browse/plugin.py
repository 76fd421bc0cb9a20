"""The Datasette plugin `firsttoken browse` registers for its own server only (never an entry point).

It answers only requests addressed to 127.0.0.1 / localhost, opens the bare ``requests`` page with
the columns read first (``READ_FIRST``), shows 0/1 columns as yes/no and links findings and
requests. See docs/browse.md.
"""

from __future__ import annotations

import sys
from typing import Any
from urllib.parse import urlencode

try:
    from datasette import hookimpl
except ImportError:  # (only `firsttoken browse` imports this module, after checking for Datasette)
    def hookimpl(fn):
        return fn

from firsttoken.cli import loopback
from firsttoken.cli.browse.metadata import BOOLEANS, READ_FIRST


class BrowsePlugin:
    """Hook implementations bound to one database name."""

    def __init__(self, database: str) -> None:
        self.database = database

    def default_view(self, datasette: Any) -> str:
        """The path of the requests table with the columns read first, newest first."""
        args = [("_col", c) for c in READ_FIRST] + [("_sort_desc", "started_at")]
        return f"{datasette.urls.table(self.database, 'requests')}?{urlencode(args)}"

    def asgi_wrapper(self, datasette: Any):
        table_path = datasette.urls.table(self.database, "requests")
        location = self.default_view(datasette).encode()

        def wrap(app):
            async def inner(scope, receive, send):
                if scope.get("type") == "http" and not loopback_host(scope):
                    body = (b"firsttoken browse answers only requests addressed to 127.0.0.1 or localhost "
                            b"(this one named another host: a DNS rebinding attempt?). Open the URL it printed.\n")
                    await send({"type": "http.response.start", "status": 403,
                                "headers": [(b"content-type", b"text/plain; charset=utf-8"),
                                            (b"content-length", str(len(body)).encode())]})
                    await send({"type": "http.response.body", "body": body})
                    return
                if (scope.get("type") == "http" and scope.get("method") == "GET" and scope.get("path") == table_path
                        and not scope.get("query_string")):
                    await send({"type": "http.response.start", "status": 302,
                                "headers": [(b"location", location), (b"content-length", b"0")]})
                    await send({"type": "http.response.body", "body": b""})
                    return
                await app(scope, receive, send)

            return inner

        return wrap

    def render_cell(self, row: Any, value: Any, column: str, table: str | None, database: str, datasette: Any):
        from markupsafe import Markup, escape

        if database != self.database:
            return None
        if table == "requests":
            if column in BOOLEANS and value in (0, 1) and not isinstance(value, float):
                return "yes" if value else "no"
            if column == "top_code" and value and row is not None:
                try:
                    rid = row["id"]
                except (KeyError, IndexError, TypeError):
                    return None
                href = datasette.urls.table(self.database, "findings") + "?" + urlencode({"request_id": rid})
                return Markup(f'<a href="{escape(href)}">{escape(value)}</a>')
        if table is None and column == "id" and isinstance(value, str) and value:
            from datasette.utils import tilde_encode

            href = datasette.urls.row(self.database, "requests", tilde_encode(value))
            return Markup(f'<a href="{escape(href)}">{escape(value)}</a>')
        return None


def loopback_host(scope: dict) -> bool:
    """Whether the request's Host names the loopback interface (the one rule: ``loopback.loopback_host``)."""
    return loopback.loopback_host(next((v for k, v in scope.get("headers") or () if k == b"host"), None))


#: the plugin serving this process's database (set by ``register``)
_current: BrowsePlugin | None = None


@hookimpl
def asgi_wrapper(datasette):
    return _current.asgi_wrapper(datasette) if _current is not None else None


@hookimpl
def render_cell(row, value, column, table, database, datasette):
    return _current.render_cell(row, value, column, table, database, datasette) if _current is not None else None


#: folds Datasette's list of column descriptions (units included) into a <details> above the
#: table: unfolded, the list of a 90-column table pushed the rows below the first screen
FOLD_DESCRIPTIONS = """(function () {
  var dl = document.querySelector('dl.column-descriptions');
  if (!dl) return;
  var d = document.createElement('details'), s = document.createElement('summary');
  s.textContent = 'What each column means (units: ms = milliseconds)';
  d.className = 'firsttoken-columns';
  d.appendChild(s);
  dl.parentNode.insertBefore(d, dl);
  d.appendChild(dl);
})();"""


@hookimpl
def extra_body_script(database, table, datasette):
    if _current is not None and database == _current.database and table:
        return FOLD_DESCRIPTIONS
    return None


def register(database: str) -> BrowsePlugin:
    """Register this module's hooks with Datasette (once per process) for ``database``."""
    global _current
    from datasette.plugins import pm

    _current = BrowsePlugin(database)
    if not pm.is_registered(sys.modules[__name__]):
        pm.register(sys.modules[__name__], name="firsttoken-browse")
    return _current
