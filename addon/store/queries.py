"""Read queries shared by the commands. Each reader opens its own connection (WAL)."""

from __future__ import annotations

import datetime as _dt
import json
import re
from dataclasses import dataclass
from typing import Any

import sqlite_utils

JSON_COLUMNS = ("event_offsets", "key_facts", "findings")
BOOL_COLUMNS = ("stream", "conn_reused", "stream_done", "client_aborted", "tokens_exact")


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

    def where(self) -> tuple[str, list[Any]]:
        clauses, params = [], []
        for col in ("model", "route", "api", "experiment", "state", "run_id"):
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
                clauses.append("(status IS NULL OR status >= 400 OR error IS NOT NULL)")
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


def recent(db: sqlite_utils.Database, filters: Filters | None = None, limit: int | None = 50) -> list[dict[str, Any]]:
    """Newest first."""
    where, params = (filters or Filters()).where()
    sql = f"SELECT * FROM requests{where} ORDER BY started_at DESC"
    if limit:
        sql += f" LIMIT {int(limit)}"
    cur = db.execute(sql, params)
    cols = [d[0] for d in cur.description]
    return [decode_row(dict(zip(cols, r))) for r in cur.fetchall()]


class NotFound(LookupError):
    pass


def get(db: sqlite_utils.Database, id_prefix: str) -> dict[str, Any]:
    """One request by id or unique id prefix (like git)."""
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
