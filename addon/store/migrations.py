"""The schema, as a list of migrations: one small function per change.

A migration is never edited after it lands; a new change is a new function appended
below. ``migrate`` applies the ones a database has not seen yet, in order, and notes each
in ``_migrations``.
"""

from __future__ import annotations

import datetime as _dt
from typing import Callable

import sqlite_utils

MIGRATIONS: list[Callable[[sqlite_utils.Database], None]] = []


def migration(fn: Callable[[sqlite_utils.Database], None]):
    MIGRATIONS.append(fn)
    return fn


def migrate(db: sqlite_utils.Database) -> list[str]:
    """Apply pending migrations; returns the names applied."""
    db.execute(
        "CREATE TABLE IF NOT EXISTS _migrations (name TEXT PRIMARY KEY, applied_at TEXT)"
    )
    done = {r[0] for r in db.execute("SELECT name FROM _migrations").fetchall()}
    applied = []
    for fn in MIGRATIONS:
        if fn.__name__ in done:
            continue
        with db.conn:
            fn(db)
            db.execute(
                "INSERT INTO _migrations (name, applied_at) VALUES (?, ?)",
                [fn.__name__, _dt.datetime.now(_dt.timezone.utc).isoformat()],
            )
        applied.append(fn.__name__)
    return applied


@migration
def m001_requests(db: sqlite_utils.Database) -> None:
    cols = {
        "id": str, "started_at": str, "state": str, "phase": str,
        "route": str, "upstream": str, "method": str, "path": str, "upstream_url": str,
        "api": str, "model": str, "stream": int, "max_tokens": int, "experiment": str,
        "status": int, "content_type": str, "content_encoding": str, "upstream_request_id": str,
        "connect_ms": float, "conn_reused": int, "ttfb_ms": float, "first_byte_ms": float,
        "first_token_ms": float, "ttft_ms": float, "gap_ms": float, "total_ms": float,
        "itl_p50_ms": float, "itl_p95_ms": float, "itl_max_ms": float, "tpot_ms": float,
        "events": int, "event_offsets": str, "sse_comments": int,
        "usage_prompt_tokens": int, "usage_completion_tokens": int, "usage_cached_tokens": int,
        "usage_cache_creation_tokens": int, "usage_reasoning_tokens": int,
        "output_chars": int, "reasoning_chars": int, "finish_reason": str, "stream_done": int,
        "upstream_error": str, "upstream_error_type": str, "no_choices": str,
        "malformed_events": int, "malformed_sample": str,
        "error": str, "client_aborted": int, "request_bytes": int, "response_bytes": int,
        "key_header": str, "key_fingerprint": str, "key_scheme": str, "key_length": int,
        "key_facts": str,
        "request_error": str, "tokenizer": str, "tokens_exact": int, "prompt_tokens_est": int,
        "system_tokens": int, "tools_tokens": int, "last_user_tokens": int, "messages": int,
        "images": int, "output_tokens_est": int, "usage_ratio": float,
        "prefix_hash": str, "prefix_tokens": int, "prefix_seen_before": int,
        "findings": str, "top_code": str, "top_severity": str,
        "request_body": str, "response_body": str,
    }
    t = db["requests"]
    t.create(cols, pk="id")
    t.create_index(["started_at"])
    t.create_index(["model", "started_at"])
    t.create_index(["state"])
    t.create_index(["prefix_hash"])


@migration
def m002_findings(db: sqlite_utils.Database) -> None:
    t = db["findings"]
    t.create({"request_id": str, "code": str, "severity": str}, pk=("request_id", "code"))
    t.create_index(["code"])


@migration
def m003_calibration(db: sqlite_utils.Database) -> None:
    t = db["requests"]
    t.add_column("calibration_factor", float)
    t.add_column("prompt_tokens_calibrated", int)
