"""Read queries shared by the commands, and the one definition of an error.

Every SQL statement a command runs lives in ``addon/store``: here (rows, filters, the live
view's polls, the analyzer's history), ``stats_queries`` (aggregates, report) and
``baselines``. Each reader opens its own read-only connection (WAL).
"""

from __future__ import annotations

import datetime as _dt
import json
import re
import sqlite3
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from typing import Any

import sqlite_utils

JSON_COLUMNS = ("event_offsets", "key_facts", "findings", "hop_headers", "ws_connection", "engine_sources")
BOOL_COLUMNS = ("stream", "conn_reused", "stream_done", "client_aborted", "tokens_exact", "headers_held")
BODY_COLUMNS = ("request_body", "response_body")


def _get(row: Any, k: str) -> Any:
    return row.get(k) if isinstance(row, dict) else getattr(row, k, None)


# ---- What is a model call: the one rule (every figure, error rate and model list asks it).
#
# A request to no model API (``api`` 'other') that carries no body to generate from (GET, HEAD,
# OPTIONS) is not a model call: a readiness probe (``GET /``), a health check, ``GET /v1/models``,
# a favicon. It is recorded and shown for what it is, and left out of model statistics and error
# rates. A POST to a path that is no API (``/chat/completions`` without ``/v1``) is still a call.

#: the methods that never carry a prompt
NO_BODY_METHODS = ("GET", "HEAD", "OPTIONS")


def model_call_sql(alias: str = "") -> str:
    """SQL true for a model call (a row from before ``method`` was known counts as one)."""
    a = f"{alias}." if alias else ""
    methods = ", ".join(f"'{m}'" for m in NO_BODY_METHODS)
    return f"({a}api IS NOT 'other' OR upper(coalesce({a}method, 'POST')) NOT IN ({methods}))"


#: the rule on the ``requests`` table's own columns
MODEL_CALL = model_call_sql()


def is_model_call(row: Any) -> bool:
    """``MODEL_CALL`` for one row dict or Record (the same rule, for rows already in memory)."""
    return _get(row, "api") != "other" or str(_get(row, "method") or "POST").upper() not in NO_BODY_METHODS


# ---- What counts as an error: the one rule (live view counts, `stats`, `logs --status error`).

def error_sql(alias: str = "") -> str:
    """SQL true for a finished model call that failed: HTTP status ≥ 400, an error-severity finding
    (e.g. an error event inside a 200 stream), or no response at all / a transport error
    (``error``) unless the client itself hung up (a cancel or its own timeout is not the
    request failing: its ``client.aborted`` finding, and ``stream.stall`` when a stall made it
    give up, say what happened). A request that is no model call (``model_call_sql``) is never one."""
    a = f"{alias}." if alias else ""
    return (f"({a}state IS 'done' AND {model_call_sql(alias)} AND (coalesce({a}status, 0) >= 400 OR "
            f"{a}top_severity IS 'error' OR ({a}client_aborted IS NOT 1 AND ({a}status IS NULL OR {a}error IS NOT NULL))))")


#: the rule on the ``requests`` table's own columns
ERROR = error_sql()


def is_error(row: Any) -> bool:
    """``ERROR`` for one row dict or Record (the same rule, for rows already in memory)."""
    def get(k: str) -> Any:
        return _get(row, k)

    if get("state") not in (None, "done") or not is_model_call(row):
        return False
    status = get("status")
    if (status is not None and status >= 400) or get("top_severity") == "error":
        return True
    return not get("client_aborted") and (status is None or get("error") is not None)


# ---- Which requests a latency figure describes: the one population rule.
#
# A streamed answer (the request's ``"stream": true``) sends its headers before the
# first token, so TTFB, gap, TTFT, ITL, TPOT and total describe the way to the first token and
# after it. A non-streamed one sends its headers after the whole answer: its "TTFB" is the whole
# generation. Every latency percentile, fit and network/prefill verdict is over STREAMED requests;
# the non-streamed ones have their own figure, the time to the whole answer (``total_ms``).

def streamed_sql(alias: str = "") -> str:
    """SQL true for a streamed request: its body asked for a stream (``"stream": true``)."""
    a = f"{alias}." if alias else ""
    return f"({a}stream IS 1)"


#: the rule on the ``requests`` table's own columns (verbatim in the partial indexes of m021,
#: which carry ``stream`` so that a query naming the rule still reads the index alone)
STREAMED = streamed_sql()
#: its negation, NULLs included (``stream`` is NULL when no API body named it)
NOT_STREAMED = "(stream IS NOT 1)"
#: what each population is called where a view says which one it shows
STREAMED_LABEL = "streamed requests"
NOT_STREAMED_LABEL = "non-streamed requests: time to the whole answer"


def is_streamed(row: Any) -> bool:
    """``STREAMED`` for one row dict or Record (the same rule, for rows already in memory)."""
    v = row.get("stream") if isinstance(row, dict) else getattr(row, "stream", None)
    return v is not None and v == 1


def decode_row(row: dict[str, Any]) -> dict[str, Any]:
    out = dict(row)
    for k in JSON_COLUMNS:
        v = out.get(k)
        if isinstance(v, str):
            try:
                out[k] = json.loads(v)
            except ValueError:
                pass
    for k in BOOL_COLUMNS:
        if out.get(k) is not None:
            out[k] = bool(out[k])
    return out


_DUR = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$")


def parse_since(text: str, now: _dt.datetime | None = None) -> str:
    """'2h', '30m', '7d' or an ISO date/time → an ISO UTC timestamp to compare started_at with."""
    now = now or _dt.datetime.now(_dt.UTC)
    m = _DUR.match(text)
    if m:
        n = float(m.group(1))
        unit = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}[m.group(2)]
        return (now - _dt.timedelta(**{unit: n})).isoformat(timespec="milliseconds")
    try:
        t = _dt.datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"cannot read {text!r} as a time: use e.g. 30m, 2h, 7d or 2026-11-29T10:00") from None
    if t.tzinfo is None:
        t = t.astimezone()  # a local time as the user typed it
    return t.astimezone(_dt.UTC).isoformat(timespec="milliseconds")


GLOB_CHARS = "*?["


def model_clause(pattern: str, exact: bool = False) -> tuple[str, list[Any]]:
    """How ``--model`` matches: a glob when it holds * ? or [ (``gpt-4o*``), else any model that
    contains it, ignoring case (``4o`` matches gpt-4o and gpt-4o-mini); ``exact`` for internal use."""
    if exact:
        return "model = ?", [pattern]
    if any(ch in pattern for ch in GLOB_CHARS):
        return "model GLOB ?", [pattern]
    return "instr(lower(model), lower(?)) > 0", [pattern]


@dataclass
class Filters:
    model: str | None = None
    route: str | None = None
    api: str | None = None
    status: str | None = None  # "200", "4xx", "error"
    code: str | None = None
    since: str | None = None
    until: str | None = None
    slow_ttft: float | None = None
    experiment: str | None = None
    state: str | None = None
    run_id: str | None = None  # `firsttoken run`: the requests of one run
    #: internal: ``model`` is one model's exact name (baselines), not a user's pattern
    exact_model: bool = False

    def active(self) -> dict[str, Any]:
        """The filters in use, by name (for JSON output and a baseline's memory)."""
        return {k: v for k, v in vars(self).items() if v not in (None, "", False)}

    def validate(self, codes: Collection[str]) -> None:
        """Reject values that could only ever match nothing, naming what would work. ``codes`` are the
        finding codes there are (``diagnose.finding_codes()``: the catalog is diagnose's, not the store's)."""
        self.where()
        if self.code and self.code not in codes:
            raise ValueError(f"--code {self.code!r} is not a finding code; use one of: {', '.join(sorted(codes))} "
                             "(`firsttoken diagnoses` explains each)")

    def where(self) -> tuple[str, list[Any]]:
        clauses, params = [], []
        if self.model:
            c, p = model_clause(self.model, self.exact_model)
            clauses.append(c)
            params += p
        for col in ("route", "api", "experiment", "state", "run_id"):
            v = getattr(self, col)
            if v:
                clauses.append(f"{col} = ?")
                params.append(v)
        if self.status:
            s = self.status.lower()
            if re.fullmatch(r"[1-5]xx", s):
                clauses.append("status BETWEEN ? AND ?")
                params += [int(s[0]) * 100, int(s[0]) * 100 + 99]
            elif s in ("error", "failed"):
                clauses.append(ERROR)
            elif s.isdigit():
                clauses.append("status = ?")
                params.append(int(s))
            else:
                raise ValueError(f"--status {self.status!r}: use a code (401), a class (4xx) or 'error'")
        if self.code:
            clauses.append("id IN (SELECT request_id FROM findings WHERE code = ?)")
            params.append(self.code)
        if self.since:
            clauses.append("started_at >= ?")
            params.append(parse_since(self.since))
        if self.until:
            clauses.append("started_at < ?")
            params.append(parse_since(self.until))
        if self.slow_ttft is not None:
            clauses.append("ttft_ms >= ?")
            params.append(self.slow_ttft)
        return (" WHERE " + " AND ".join(clauses)) if clauses else "", params


def _dicts(cur: sqlite3.Cursor) -> list[dict[str, Any]]:
    cols = [d[0] for d in cur.description]
    return [decode_row(dict(zip(cols, r))) for r in cur.fetchall()]


def recent(db: sqlite_utils.Database, filters: Filters | None = None, limit: int | None = 50) -> list[dict[str, Any]]:
    """The ``limit`` newest matching requests, newest first."""
    where, params = (filters or Filters()).where()
    sql = f"SELECT * FROM requests{where} ORDER BY started_at DESC"
    if limit:
        sql += f" LIMIT {int(limit)}"
    return _dicts(db.execute(sql, params))


class NotFound(LookupError):
    pass


def get(db: sqlite_utils.Database, id_prefix: str | None) -> dict[str, Any]:
    """One request by id or unique id prefix (like git); no id: the latest request."""
    if id_prefix is None:
        rows = _dicts(db.execute("SELECT * FROM requests ORDER BY started_at DESC LIMIT 1"))
        if not rows:
            raise NotFound("no requests recorded yet: point a client at `firsttoken proxy`, or try `firsttoken demo`")
        return rows[0]
    p = id_prefix.strip()
    if not p:
        raise NotFound("give a request id (see `firsttoken logs`)")
    cur = db.execute("SELECT * FROM requests WHERE id LIKE ? ORDER BY started_at DESC LIMIT 3", [p.replace("%", "") + "%"])
    cols = [d[0] for d in cur.description]
    rows = [dict(zip(cols, r)) for r in cur.fetchall()]
    if not rows:
        raise NotFound(f"no request with id {p!r}: list ids with `firsttoken logs`")
    if len(rows) > 1 and rows[0]["id"] != p:
        ids = ", ".join(r["id"][:12] for r in rows)
        raise NotFound(f"id {p!r} is ambiguous ({ids}, …): type more of it")
    return decode_row(rows[0])


def columns(db: sqlite_utils.Database) -> list[str]:
    return [r[1] for r in db.execute("PRAGMA table_info(requests)").fetchall()]


def iter_rows(db: sqlite_utils.Database, filters: Filters, cols: list[str] | None = None, limit: int | None = None,
              bodies: bool = False) -> Iterator[dict[str, Any]]:
    """Every matching request, oldest first, streamed from a cursor (``export``)."""
    where, params = filters.where()
    have = columns(db)
    if cols:
        unknown = [c for c in cols if c not in have]
        if unknown:
            raise ValueError(f"unknown column(s): {', '.join(unknown)}; the columns are: {', '.join(have)}")
    else:
        cols = [c for c in have if bodies or c not in BODY_COLUMNS]
    sql = f"SELECT {', '.join(cols)} FROM requests{where} ORDER BY started_at"
    if limit:
        sql += f" LIMIT {int(limit)}"
    cur = db.conn.execute(sql, params)
    while batch := cur.fetchmany(1000):
        for r in batch:
            yield decode_row(dict(zip(cols, r)))


def count_finished(db: sqlite_utils.Database, experiment: str, prefix: bool = False) -> int:
    """Finished rows tagged with ``experiment`` (or any tag starting with it): `sweep` waits on this."""
    if prefix:
        sql, arg = "experiment LIKE ? ESCAPE '\\'", experiment.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
    else:
        sql, arg = "experiment = ?", experiment
    return db.execute(f"SELECT count(*) FROM requests WHERE state = 'done' AND {sql}", [arg]).fetchone()[0]


def cached_prompt_tokens(db: sqlite_utils.Database, experiment: str) -> list[tuple[int | None, int]]:
    """(prompt tokens, cached prompt tokens) of each finished row tagged ``experiment``, by the engine's own
    report where it gave one, else the usage's; rows that reported no cached count are left out (`sweep`
    says when its prompts were served from a cache)."""
    return [tuple(r) for r in db.execute(
        "SELECT coalesce(engine_prompt_tokens, usage_prompt_tokens), coalesce(engine_cached_tokens, usage_cached_tokens) "
        "FROM requests WHERE state = 'done' AND experiment = ? "
        "AND coalesce(engine_cached_tokens, usage_cached_tokens) IS NOT NULL", [experiment]).fetchall()]


# ---- The analyzer's history (read once at start, on the caller's thread).

def routes_cached(db: sqlite_utils.Database, last: int = 20000) -> set[str]:
    """The routes whose upstream reported cached prompt tokens in the last ``last`` requests (the
    cache verdicts say whether an upstream that did not cache a repeated prefix ever cached on
    that route)."""
    return {r or "default" for (r,) in db.execute(
        "SELECT DISTINCT route FROM (SELECT route, usage_cached_tokens FROM requests ORDER BY started_at DESC "
        "LIMIT ?) WHERE usage_cached_tokens > 0", [last]).fetchall()}


def calibration_pairs(db: sqlite_utils.Database, last: int = 5000) -> list[tuple[str, int, int]]:
    """(model, our estimate, server's count) of the last ``last`` requests that have both, newest first."""
    return db.execute(
        "SELECT model, prompt_tokens_est, usage_prompt_tokens FROM requests WHERE model IS NOT NULL "
        "AND prompt_tokens_est > 0 AND usage_prompt_tokens > 0 ORDER BY started_at DESC LIMIT ?", [last]).fetchall()


# ---- The live view's polls of a proxy's database (``cli/live/db.py``), on a read-only connection.

def in_flight(conn: sqlite3.Connection, cols: list[str] | tuple[str, ...], since_iso: str) -> list[dict[str, Any]]:
    return _dicts(conn.execute(f"SELECT {', '.join(cols)}, phase FROM requests WHERE state = 'in_flight' "
                               "AND started_at >= ? ORDER BY started_at", [since_iso]))


def latest_finished(conn: sqlite3.Connection, cols: list[str] | tuple[str, ...], limit: int) -> list[dict[str, Any]]:
    """The ``limit`` newest finished rows, oldest first."""
    rows = _dicts(conn.execute(f"SELECT {', '.join(cols)} FROM requests WHERE state = 'done' "
                               "ORDER BY started_at DESC LIMIT ?", [limit]))
    rows.reverse()
    return rows


def finished_since(conn: sqlite3.Connection, cols: list[str] | tuple[str, ...], since_iso: str) -> list[dict[str, Any]]:
    return _dicts(conn.execute(f"SELECT {', '.join(cols)} FROM requests WHERE state = 'done' AND started_at >= ? "
                               "ORDER BY started_at", [since_iso]))


def routes_seen(conn: sqlite3.Connection, limit: int = 8) -> list[tuple[str, str]]:
    """(route, upstream) pairs, most recently used first."""
    return [(r or "default", u or "–") for r, u, _ in conn.execute(
        "SELECT route, upstream, MAX(started_at) AS last FROM requests WHERE upstream IS NOT NULL "
        "GROUP BY route, upstream ORDER BY last DESC LIMIT ?", [limit]).fetchall()]
