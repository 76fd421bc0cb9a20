"""What Datasette is told about a firsttoken database: the default order, the columns a person
reads first, the units, the facets and the canned queries (Datasette 0.65 "metadata").

Every rule comes from its one home: what counts as an error from ``queries.error_sql``, the
percentile definition from ``stats_queries.percentile_sql``, the findings' columns from the
migration that made them (m018).
"""

from __future__ import annotations

from typing import Any

from firsttoken.addon.store.queries import error_sql
from firsttoken.addon.store.stats_queries import percentile_sql, population

#: the columns of ``requests`` shown first (Datasette always shows the primary key ``id`` too)
READ_FIRST = ("started_at", "model", "route", "api", "status", "ttfb_ms", "ttft_ms", "total_ms",
              "usage_prompt_tokens", "prompt_tokens_est", "usage_completion_tokens", "top_code", "top_severity",
              "conversation_id", "turn")

#: columns holding 0/1 (shown as yes/no in the HTML pages; the JSON keeps the numbers)
BOOLEANS = ("stream", "conn_reused", "stream_done", "client_aborted", "tokens_exact", "prefix_seen_before")

_MS = "milliseconds"
REQUEST_COLUMNS = {
    "id": "the request's id (firsttoken's own; `firsttoken show ID`)",
    "started_at": "when the client's request arrived (ISO 8601, UTC)",
    "state": "in_flight while it runs, done when finished",
    "route": "the route (upstream) it went through",
    "upstream": "the upstream base URL",
    "api": "which API shape: openai.chat, openai.responses, anthropic.messages, gemini.generate, ...",
    "model": "the model the client asked for",
    "stream": "whether the client asked for a stream",
    "status": "the upstream's HTTP status (empty: no response)",
    "connect_ms": f"time to open the upstream connection (TCP + TLS), {_MS}; empty when reused",
    "conn_reused": "whether an open upstream connection was reused",
    "ttfb_ms": f"time to first byte: request start to the response headers, {_MS}",
    "ttft_ms": f"time to first token: request start to the first content token, {_MS}",
    "gap_ms": f"TTFT minus TTFB: what the model took after answering the headers, {_MS}",
    "total_ms": f"request start to the last byte, {_MS}",
    "tpot_ms": f"time per output token after the first, {_MS}",
    "itl_p50_ms": f"median gap between streamed events, {_MS}",
    "itl_p95_ms": f"95th percentile gap between streamed events, {_MS}",
    "itl_max_ms": f"longest gap between streamed events, {_MS}",
    "usage_prompt_tokens": "input tokens as the provider reported them (its usage; tokens)",
    "usage_completion_tokens": "output tokens as the provider reported them (its usage; tokens)",
    "usage_cached_tokens": "input tokens the provider read from its prompt cache (tokens)",
    "prompt_tokens_est": "input tokens as firsttoken estimated them (tokenizer column; tokens)",
    "output_tokens_est": "output tokens as firsttoken estimated them (tokens)",
    "finish_reason": "why the model stopped, as the provider said",
    "error": "a transport error (no response, a reset, a timeout)",
    "client_aborted": "whether the client hung up before the end",
    "request_bytes": "size of the request body, bytes",
    "response_bytes": "size of the response body, bytes",
    "findings": "the diagnosis as JSON; the findings table has one readable row per finding",
    "top_code": "the most severe finding's code (click: this request's findings)",
    "top_severity": "the most severe finding's severity: error, warn or info",
    "conversation_id": "the conversation the request belongs to (canned query: one conversation)",
    "turn": "its turn in the conversation (1 = first)",
    "client_gap_ms": f"time the client took between the previous turn's end and this request, {_MS}",
    "proxy_delay_ms": f"delay firsttoken itself added, {_MS}",
    "retry_after": "the upstream's Retry-After, seconds",
    "end_silence_ms": f"how long an abnormally ended stream had been silent before its end, {_MS}",
}

FINDING_COLUMNS = {
    "request_id": "the request (click: its row)",
    "code": "the finding's code (`firsttoken diagnoses CODE` explains it)",
    "severity": "error, warn or info",
    "position": "its place among the request's findings (0 = the top one)",
    "message": "what happened, in the language the proxy recorded it in",
    "hint": "what to do about it",
    "params": "the values the message was written from (JSON)",
}

#: the columns of a request listed by the canned queries
_LISTED = "id, started_at, model, route, status, ttfb_ms, ttft_ms, total_ms, top_code"


def _percentiles_by_model_route() -> str:
    p = {m: percentile_sql(f"{m}_ms", ("model", "route"), (50, 95),
                           where=f"state = 'done' AND {population(m, f'{m}_ms')}") for m in ("ttfb", "ttft")}
    return (f"WITH ttft AS ({p['ttft']}), ttfb AS ({p['ttfb']})\n"
            "SELECT ttft.model, ttft.route, ttft.n AS requests, ttfb.p50 AS ttfb_p50_ms, ttfb.p95 AS ttfb_p95_ms, "
            "ttft.p50 AS ttft_p50_ms, ttft.p95 AS ttft_p95_ms\n"
            "FROM ttft LEFT JOIN ttfb ON ttfb.model IS ttft.model AND ttfb.route IS ttft.route\n"
            "ORDER BY ttft.n DESC, ttft.model, ttft.route")


def canned_queries() -> dict[str, dict[str, Any]]:
    err = error_sql()
    return {
        "slowest_ttft": {
            "title": "Slowest requests by time to first token",
            "description": "The 100 streamed requests with the longest TTFT (milliseconds), slowest first "
                           "(a non-streamed answer's first token comes with the whole answer).",
            "sql": f"SELECT {_LISTED}, usage_prompt_tokens, prompt_tokens_est FROM requests "
                   f"WHERE ttft_ms IS NOT NULL AND {population('ttft', 'ttft_ms')} ORDER BY ttft_ms DESC LIMIT 100",
        },
        "errors_by_code": {
            "title": "Errors by finding code",
            "description": "Failed requests (firsttoken's one error rule: HTTP status >= 400, an error finding, "
                           "or no response unless the client hung up), counted by top finding code and status.",
            "sql": f"SELECT top_code, status, count(*) AS requests, max(started_at) AS latest FROM requests "
                   f"WHERE {err} GROUP BY top_code, status ORDER BY requests DESC",
        },
        "percentiles_by_model_route": {
            "title": "TTFB and TTFT P50 / P95 per model and route",
            "description": "Streamed requests (as `firsttoken stats`: a non-streamed answer's headers come "
                           "after the whole answer); milliseconds; percentiles by linear interpolation between "
                           "closest ranks.",
            "sql": _percentiles_by_model_route(),
        },
        "conversation": {
            "title": "One conversation's requests",
            "description": "Every request of a conversation (its conversation_id), in order.",
            "sql": f"SELECT turn, {_LISTED}, request_kind, client_gap_ms FROM requests "
                   "WHERE conversation_id = :conversation_id ORDER BY started_at",
        },
        "requests_with_finding": {
            "title": "Requests having a given finding",
            "description": "Requests with a finding of this code (any position, not only the top one), newest first.",
            "sql": f"SELECT {', '.join('r.' + c for c in _LISTED.split(', '))}, f.severity, f.message, f.hint "
                   "FROM findings f JOIN requests r ON r.id = f.request_id WHERE f.code = :code "
                   "ORDER BY r.started_at DESC LIMIT 1000",
        },
    }


def build_metadata(database: str) -> dict[str, Any]:
    """Datasette metadata for a firsttoken database served under the name ``database``."""
    return {
        "title": "firsttoken",
        "description": "Requests recorded by firsttoken, newest first. Times in milliseconds. Read-only.",
        "databases": {
            database: {
                "tables": {
                    "requests": {
                        "sort_desc": "started_at",
                        "facets": ["model", "route", "api", "status", "top_code", "top_severity"],
                        "columns": REQUEST_COLUMNS,
                        "size": 50,
                    },
                    "findings": {
                        "sort": "code",
                        "facets": ["code", "severity"],
                        "columns": FINDING_COLUMNS,
                    },
                    "_migrations": {"hidden": True},
                },
                "queries": canned_queries(),
            }
        },
    }
