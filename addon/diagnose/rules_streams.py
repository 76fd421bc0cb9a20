"""Streams and response bodies: what a 200 answer got wrong on its way to the client."""

from __future__ import annotations

import math
from typing import Any

from .rules_base import (
    BUFFERED_MAX_MEAN_GAP_MS,
    BUFFERED_MIN_EVENTS,
    BUFFERED_MIN_WAIT_MS,
    BUFFERED_SHARE,
    BUFFERED_WINDOW_MS,
    BUFFERED_WINDOW_SHARE,
    LLM_APIS,
    TERMINATOR,
    Ctx,
    quote,
    server_text,
)


def _ok(rec: Any) -> bool:
    return rec.status is not None and 200 <= rec.status < 300


def _sse(rec: Any) -> bool:
    return "text/event-stream" in (rec.content_type or "").lower()


def rule_error_event(rec: Any, c: Ctx) -> None:
    if _ok(rec) and rec.upstream_error and not c.errors():
        c.add("stream.error_event", "error", **c.common(), server=server_text(rec),
              error_type=rec.upstream_error_type or "-", events=rec.events)


def rule_no_choices(rec: Any, c: Ctx) -> None:
    if _ok(rec) and rec.no_choices and not rec.upstream_error:
        c.add("response.no_choices", "error" if not c.errors() and not rec.output_chars else "warn",
              **c.common(), sample=quote(rec.no_choices, 200))


def rule_not_sse(rec: Any, c: Ctx) -> None:
    if _ok(rec) and rec.stream is True and rec.api in LLM_APIS and not _sse(rec) and not rec.upstream_error:
        c.add("stream.not_sse", "error", **c.common(), content_type=rec.content_type or "(none)",
              total_ms=rec.total_ms)


def rule_truncated(rec: Any, c: Ctx) -> None:
    if not (_ok(rec) and _sse(rec) and rec.stream_done is False):
        return
    if rec.upstream_error or rec.error or rec.client_aborted or c.errors():
        return
    finished = bool(rec.finish_reason)
    c.add("stream.truncated", "warn" if finished else "error", variant="finished" if finished else "cut",
          **c.common(), terminator=TERMINATOR.get(rec.api, "the end-of-stream event"), events=rec.events,
          finish_reason=rec.finish_reason)


def rule_malformed(rec: Any, c: Ctx) -> None:
    if not rec.malformed_events or rec.status is None or rec.status >= 300:
        return
    nothing = not rec.events and not rec.output_chars
    c.add("response.malformed", "error" if nothing and not c.errors() else "warn", **c.common(),
          count=rec.malformed_events, sample=quote(rec.malformed_sample, 200))


def buffered_burst(rec: Any) -> dict[str, Any] | None:
    """The facts of a buffered stream, or None: most token events at once, at the end, after a long wait."""
    offs = list(rec.event_offsets or [])
    n = len(offs)
    if n < BUFFERED_MIN_EVENTS or rec.events > n or rec.ttfb_ms is None or rec.total_ms is None:
        return None
    k = math.ceil(BUFFERED_SHARE * n)
    start = offs[n - k]
    burst = offs[-1] - start
    window = max(BUFFERED_WINDOW_MS, BUFFERED_WINDOW_SHARE * rec.total_ms)
    wait = start - rec.ttfb_ms
    if burst > window or burst / max(1, k - 1) >= BUFFERED_MAX_MEAN_GAP_MS:
        return None
    if wait < max(BUFFERED_MIN_WAIT_MS, 4 * burst):
        return None
    return {"burst_events": k, "events": n, "burst_ms": round(burst, 1), "wait_ms": round(wait, 1)}


def rule_buffered(rec: Any, c: Ctx) -> None:
    if not (_ok(rec) and _sse(rec)) or c.errors():
        return
    facts = buffered_burst(rec)
    if facts:
        c.add("stream.buffered", "warn", **c.common(), **facts)


def rule_stall(rec: Any, c: Ctx) -> None:
    if rec.itl_max_ms is None or rec.itl_max_ms <= c.stall_ms or c.has("stream.buffered"):
        return
    offs = list(rec.event_offsets or [])
    at_event, at_ms = None, None
    for i in range(1, len(offs)):
        if abs((offs[i] - offs[i - 1]) - rec.itl_max_ms) < 1.0:
            at_event, at_ms = i, offs[i - 1]
            break
    c.add("stream.stall", "warn", **c.common(), itl_max_ms=rec.itl_max_ms, stall_ms=c.stall_ms,
          at_event=at_event, at_ms=at_ms)


def rule_usage(rec: Any, c: Ctx) -> None:
    if not (_ok(rec) and _sse(rec) and rec.stream_done) or rec.api not in LLM_APIS or c.errors():
        return
    if rec.usage_completion_tokens is None and rec.usage_prompt_tokens is None:
        c.add("usage.missing", "info", variant="chat" if rec.api in ("openai.chat", "openai.completions") else "other",
              **c.common(), output_tokens=rec.output_tokens_est)


def rule_not_requested(rec: Any, c: Ctx) -> None:
    if _ok(rec) and rec.api in LLM_APIS and rec.stream is False and not _sse(rec) and not c.errors():
        c.add("stream.not_requested", "info", **c.common(), total_ms=rec.total_ms)


RULES = (rule_error_event, rule_no_choices, rule_not_sse, rule_truncated, rule_malformed, rule_buffered,
         rule_stall, rule_usage, rule_not_requested)
