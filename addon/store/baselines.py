"""Saved latency baselines (table ``baselines``, migration m005): one row per (name, model).

``source`` is JSON saying how the baseline was made: the filters and ``include_cold``, so
``baseline check`` measures recent traffic the same way.
"""

from __future__ import annotations

import json
from typing import Any

import sqlite_utils

#: filters a check re-applies from the baseline (the time window and model are the check's own)
REUSED_FILTERS = ("route", "api", "status", "code", "slow_ttft")


def _dicts(cur) -> list[dict[str, Any]]:
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, r)) for r in cur.fetchall()]


def apis_of(db: sqlite_utils.Database, models: list[str]) -> dict[str, str | None]:
    """The API each model was called through (for a probe)."""
    if not models:
        return {}
    sql = "SELECT model, api FROM requests WHERE model IN (%s) GROUP BY model" % ",".join("?" * len(models))
    return dict(db.execute(sql, list(models)).fetchall())


def save(db: sqlite_utils.Database, name: str, per_model: dict[str, dict[str, Any]], source: dict[str, Any],
         created_at: str) -> None:
    """Replace baseline ``name`` with these per-model figures, in one transaction."""
    apis = apis_of(db, list(per_model))
    with db.conn:
        db.execute("DELETE FROM baselines WHERE name = ?", [name])
        for m, r in per_model.items():
            db["baselines"].insert({"name": name, "model": m, "created_at": created_at,
                                    "source": json.dumps(source), "api": apis.get(m), **r})


def all_rows(db: sqlite_utils.Database) -> list[dict[str, Any]]:
    return _dicts(db.execute("SELECT * FROM baselines ORDER BY name, model"))


def rows_of(db: sqlite_utils.Database, name: str, model: str | None = None) -> list[dict[str, Any]]:
    return _dicts(db.execute("SELECT * FROM baselines WHERE name = ? AND (? IS NULL OR model = ?) ORDER BY model",
                             [name, model, model]))


def delete(db: sqlite_utils.Database, name: str) -> int:
    with db.conn:
        return db.execute("DELETE FROM baselines WHERE name = ?", [name]).rowcount


def how_made(row: dict[str, Any]) -> dict[str, Any]:
    """The source of a baseline row: its filters and include_cold (False for baselines saved
    before it was recorded, which left cold requests out)."""
    try:
        src = json.loads(row.get("source") or "{}")
    except ValueError:
        src = {}
    src.setdefault("include_cold", False)
    return src
