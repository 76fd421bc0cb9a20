"""Request limits and upstream errors: quota, rate limits, output and context limits, 5xx, bad requests.

The numbers the hints need (the server's limit, when to retry) are parsed from the
upstream's error text, the only place the record keeps them.
"""

from __future__ import annotations

import re
from typing import Any

from .rules_base import AUTH_STATUSES, Ctx, first_int, has_any, largest_part, quote, server_text

QUOTA_WORDS = (
    "insufficient_quota", "exceeded your current quota", "check your plan and billing", "credit balance",
    "billing", "payment required", "insufficient balance", "insufficient credits", "out of credits",
    "quota exceeded", "余额不足", "arrearage",
)
QUOTA_TYPES = ("insufficient_quota", "billing_error", "billing_hard_limit_reached", "payment_required")
CONTEXT_WORDS = (
    "context length", "context window", "context_length", "prompt is too long", "maximum context",
    "input is too long", "too many input tokens", "reduce the length", "exceeds the context",
    "input tokens exceed", "prompt too long",
)
MAX_TOKENS_PARAMS = ("max_completion_tokens", "max_output_tokens", "max_tokens")
TOO_LARGE_WORDS = ("too large", "at most", "maximum", "exceed", "less than or equal", " > ", "<=", "range of")
OVERLOADED_STATUSES = (503, 529)

_LIMIT = (
    r"max_(?:completion_|output_)?tokens\W+\d[\d,]*\s*>\s*(\d[\d,]*)",
    r"at most\s+(\d[\d,]*)",
    r"(?:<=|less than or equal to|must be at most|maximum(?: value)?(?: is| of)?|max(?:imum)? allowed(?: is)?)\s*`?(\d[\d,]*)",
    r"range of \[\s*\d+\s*,\s*(\d[\d,]*)\s*\]",
)
_REQUESTED = (r"too large:\s*(\d[\d,]*)", r"max_(?:completion_|output_)?tokens\W+(\d[\d,]*)\s*>", r"you provided\s+(\d[\d,]*)")
_CONTEXT_LIMIT = (
    r"maximum context length is\s+(\d[\d,]*)", r">\s*(\d[\d,]*)\s*maximum", r"context window of\s+(\d[\d,]*)",
    r"context length of\s+(\d[\d,]*)", r"limit of\s+(\d[\d,]*)\s*tokens",
)
_CONTEXT_USED = (r"resulted in\s+(\d[\d,]*)\s*tokens", r"prompt is too long:\s*(\d[\d,]*)", r"requested\s+(\d[\d,]*)\s*tokens")
_RETRY = re.compile(r"(?:try again|retry)(?: after| in)?\s+((?:\d+h)?(?:\d+m(?!s))?(?:\d+(?:\.\d+)?(?:ms|s))?)", re.IGNORECASE)
_RATE_KIND = re.compile(r"\((RPM|TPM|RPD|TPD|IPM|ITPM|OTPM)\)")


def retry_after_s(rec: Any) -> float | None:
    """Seconds the server asked to wait: the record's retry_after if the core keeps it, else the error text."""
    v = getattr(rec, "retry_after", None)
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return float(v)
    m = _RETRY.search(rec.upstream_error or "")
    if not m or not m.group(1):
        return None
    total, text = 0.0, m.group(1)
    for num, unit in re.findall(r"(\d+(?:\.\d+)?)(ms|h|m|s)", text):
        total += float(num) * {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}[unit]
    return round(total, 3) if total else None


def _msg(rec: Any) -> str:
    return (rec.upstream_error or "").lower()


def _fp(rec: Any) -> str:
    return rec.key_fingerprint or "?"


def rule_quota(rec: Any, c: Ctx) -> None:
    s = rec.status
    if s not in (400, 401, 402, 403, 429):
        return
    if s == 402 or rec.upstream_error_type in QUOTA_TYPES or has_any(_msg(rec), QUOTA_WORDS):
        c.add("rate.quota", "error", **c.common(), server=server_text(rec) or "-", fingerprint=_fp(rec))


def rule_rate_limited(rec: Any, c: Ctx) -> None:
    if rec.status != 429 or c.has("rate.quota"):
        return
    wait = retry_after_s(rec)
    m = _RATE_KIND.search(rec.upstream_error or "")
    c.add("rate.limited", "error", variant="retry" if wait else "noretry", **c.common(),
          server=server_text(rec) or "-", retry_after=wait, kind=f", {m.group(1)}" if m else "",
          fingerprint=_fp(rec))


def rule_context_length(rec: Any, c: Ctx) -> None:
    if rec.status not in (400, 413, 422) or c.errors():
        return
    msg = rec.upstream_error or ""
    if rec.upstream_error_type != "context_length_exceeded" and not has_any(msg, CONTEXT_WORDS):
        return
    limit = first_int(msg, _CONTEXT_LIMIT)
    used = first_int(msg, _CONTEXT_USED)
    counted = used or rec.prompt_tokens_est
    excess = None
    if limit and counted:
        excess = counted - limit
        if excess <= 0 and rec.max_tokens:
            excess = counted + rec.max_tokens - limit
        excess = excess if excess > 0 else None
    label, tokens = largest_part(rec)
    c.add("request.context_length", "error", **c.common(), server=server_text(rec), model=rec.model or "?",
          limit=limit, server_tokens=used, prompt_tokens=rec.prompt_tokens_est, max_tokens=rec.max_tokens,
          excess=excess, largest=label, largest_tokens=tokens)


def rule_max_tokens(rec: Any, c: Ctx) -> None:
    if rec.status not in (400, 422) or c.errors():
        return
    msg = rec.upstream_error or ""
    low = msg.lower()
    param = next((p for p in MAX_TOKENS_PARAMS if p in low), None)
    if param is None or not has_any(low, TOO_LARGE_WORDS) or has_any(low, CONTEXT_WORDS):
        return
    limit = first_int(msg, _LIMIT)
    requested = rec.max_tokens if rec.max_tokens is not None else first_int(msg, _REQUESTED)
    c.add("request.max_tokens_too_large", "error", variant="limit" if limit else "unknown", **c.common(),
          server=server_text(rec), param=param, requested=requested, limit=limit)


def rule_overloaded(rec: Any, c: Ctx) -> None:
    s = rec.status
    if s is None or s < 500 or c.errors():
        return
    overloaded = s in OVERLOADED_STATUSES or rec.upstream_error_type == "overloaded_error" or "overloaded" in _msg(rec)
    code = "upstream.overloaded" if overloaded else "upstream.server_error"
    c.add(code, "error", variant="with_id" if rec.upstream_request_id else "no_id", **c.common(),
          server=server_text(rec) or "-", error_type=rec.upstream_error_type or "-",
          request_id=rec.upstream_request_id)


def rule_request_body(rec: Any, c: Ctx) -> None:
    err = rec.request_error
    # not the client's fault: our analysis failed, or the body was too large to analyse
    if not err or err.startswith(("analysis failed", "request body larger than")) or rec.status in AUTH_STATUSES:
        return
    failed = rec.status is None or rec.status >= 400
    c.add("request.malformed", "error" if failed and not c.errors() else "warn", variant="body", **c.common(),
          detail=quote(err))


def rule_bad_request(rec: Any, c: Ctx) -> None:
    """Fallback: a 4xx nothing else explained (401/403 belong to auth, 404 to paths)."""
    s = rec.status
    if s is None or not 400 <= s < 500 or s in AUTH_STATUSES or s in (404, 429) or c.errors():
        return
    if s in (400, 422):
        c.add("request.malformed", "error", variant="server", **c.common(), server=server_text(rec) or "-")
    else:
        c.add("upstream.http_error", "error", **c.common(), server=server_text(rec) or "-")


RULES = (rule_quota, rule_rate_limited, rule_context_length, rule_max_tokens, rule_overloaded, rule_request_body)
FALLBACKS = (rule_bad_request,)
