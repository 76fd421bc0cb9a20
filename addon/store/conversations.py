"""The SQL behind `firsttoken sessions` and `firsttoken session ID`: requests grouped by the
``conversation_id`` the analysis thread gave them (addon/conversations.py)."""

from __future__ import annotations

import sqlite3
from typing import Any

import sqlite_utils

from firsttoken.addon.store.queries import ERROR, NotFound, decode_row

PROMPT = "coalesce(usage_prompt_tokens, prompt_tokens_est)"
OUTPUT = "coalesce(usage_completion_tokens, output_tokens_est)"

#: one conversation's summary; model time and client time count the main requests only
_SUMMARY = f"""
SELECT conversation_id AS id, min(started_at) AS started_at, max(started_at) AS last_at,
  group_concat(DISTINCT route) AS routes, group_concat(DISTINCT api) AS apis,
  count(*) AS requests, total(request_kind = 'main') AS main_requests,
  total(request_kind = 'side') AS side_requests, total(request_kind = 'count_tokens') AS count_tokens_requests,
  max(turn) AS turns, total({ERROR}) AS errors,
  total(CASE WHEN request_kind = 'main' THEN {PROMPT} END) AS prompt_tokens,
  total(CASE WHEN request_kind = 'main' THEN {OUTPUT} END) AS output_tokens,
  total(CASE WHEN request_kind = 'main' AND usage_cached_tokens IS NOT NULL THEN usage_prompt_tokens END) AS reported_prompt_tokens,
  total(CASE WHEN request_kind = 'main' THEN usage_cached_tokens END) AS cached_tokens,
  total(CASE WHEN request_kind = 'main' THEN total_ms END) AS model_ms,
  total(CASE WHEN request_kind = 'main' THEN client_gap_ms END) AS client_ms
FROM requests WHERE conversation_id IS NOT NULL AND {{where}}
GROUP BY conversation_id
"""


def _finish(row: dict[str, Any], db: sqlite_utils.Database) -> dict[str, Any]:
    out = dict(row)
    for k in ("requests", "main_requests", "side_requests", "count_tokens_requests", "errors", "prompt_tokens",
              "output_tokens", "cached_tokens"):
        out[k] = int(out[k] or 0)
    rep = out.pop("reported_prompt_tokens") or 0
    out["cached_share"] = round(out["cached_tokens"] / rep, 4) if rep else None
    out["models"] = [m for (m,) in db.execute(
        "SELECT model FROM requests WHERE conversation_id = ? AND model IS NOT NULL GROUP BY model "
        "ORDER BY total(request_kind = 'main') DESC, count(*) DESC", [row["id"]])]
    out["routes"] = (out["routes"] or "").split(",") if out["routes"] else []
    out["apis"] = (out["apis"] or "").split(",") if out["apis"] else []
    return out


#: a conversation of one main request that is still an agent's: it carried tools (`sessions` lists it
#: beside those of 2+ requests; one-off scripts and benchmarks stay behind --all)
AGENT = "total(request_kind = 'main' AND coalesce(tools_tokens, 0) > 0) > 0"


def sessions(db: sqlite_utils.Database, limit: int | None = 20, min_requests: int = 2) -> list[dict[str, Any]]:
    """The newest conversations (newest first) with at least ``min_requests`` requests, or whose
    main request carried tools (a coding agent's one-request conversation, its side calls aside)."""
    sql = _SUMMARY.format(where="1") + f" HAVING (count(*) >= ? OR {AGENT}) ORDER BY started_at DESC"
    params: list[Any] = [min_requests]
    if limit:
        sql += " LIMIT ?"
        params.append(limit)
    cur = db.execute(sql, params)
    names = [d[0] for d in cur.description]
    return [_finish(dict(zip(names, r)), db) for r in cur.fetchall()]


def resolve(db: sqlite_utils.Database, id_prefix: str) -> str:
    """The one conversation id starting with ``id_prefix``; NotFound when none or several."""
    prefix = (id_prefix or "").strip()
    if not prefix:
        raise NotFound("give a conversation id (or its first characters): `firsttoken sessions` lists them")
    ids = [r[0] for r in db.execute(
        "SELECT DISTINCT conversation_id FROM requests WHERE conversation_id >= ? AND conversation_id < ? LIMIT 6",
        [prefix, prefix + "\U0010ffff"])]
    if not ids:
        raise NotFound(f"no conversation with an id starting {prefix!r}: `firsttoken sessions --all` lists them")
    if len(ids) > 1:
        raise NotFound(f"{prefix!r} matches several conversations ({', '.join(ids[:5])}…): give more characters")
    return ids[0]


def session(db: sqlite_utils.Database, id_prefix: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(summary, requests oldest first) of one conversation."""
    cid = resolve(db, id_prefix)
    cur = db.execute(_SUMMARY.format(where="conversation_id = ?"), [cid])
    names = [d[0] for d in cur.description]
    summary = _finish(dict(zip(names, cur.fetchone())), db)
    cur = db.execute("SELECT * FROM requests WHERE conversation_id = ? ORDER BY started_at", [cid])
    names = [d[0] for d in cur.description]
    return summary, [decode_row(dict(zip(names, r))) for r in cur.fetchall()]


def last_turn(db: sqlite_utils.Database, conversation_id: str) -> tuple[int, str | None] | None:
    """The highest turn recorded for a conversation and the model of its newest main request:
    where a proxy started afresh picks up a client session it recorded before (turns go on from
    there instead of restarting at 1). None when the conversation has no row, or the database
    predates conversations."""
    try:
        row = db.execute(
            "SELECT max(turn), (SELECT model FROM requests WHERE conversation_id = :c AND request_kind = 'main' "
            "ORDER BY started_at DESC LIMIT 1) FROM requests WHERE conversation_id = :c",
            {"c": conversation_id}).fetchone()
    except sqlite3.OperationalError as e:
        if "no such column" in str(e):
            return None
        raise
    if row is None or row[0] is None:
        return None
    return int(row[0]), row[1]


#: what the live view's conversation line needs of each request (``cli/live/data.conversation_line``)
ACTIVE_FIELDS = ("id", "started_at", "conversation_id", "turn", "request_kind", "usage_cached_tokens", "usage_prompt_tokens")


def active_rows(conn: sqlite3.Connection, limit: int = 200) -> list[dict[str, Any]]:
    """The finished requests (oldest first, at most ``limit`` newest) of the conversation of the
    newest finished request that has one: the live view's "active conversation" when it follows a
    proxy's database. Empty when none has a conversation, or the database predates conversations
    (the reader never migrates it)."""
    try:
        row = conn.execute("SELECT conversation_id FROM requests WHERE state = 'done' AND conversation_id IS NOT NULL "
                           "ORDER BY started_at DESC LIMIT 1").fetchone()
        if row is None:
            return []
        cur = conn.execute(f"SELECT {', '.join(ACTIVE_FIELDS)} FROM requests WHERE conversation_id = ? AND state = 'done' "
                           "ORDER BY started_at DESC LIMIT ?", [row[0], limit])
    except sqlite3.OperationalError as e:
        if "no such column" in str(e):
            return []
        raise
    names = [d[0] for d in cur.description]
    out = [dict(zip(names, r)) for r in cur.fetchall()]
    out.reverse()
    return out
