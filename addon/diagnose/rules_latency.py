"""Latency verdicts: which part of TTFT was slow (the "TTFT - TTFB" bisection), and prompt size.

TTFB (headers) covers connecting, the network, gateways and queues; the gap after it
(TTFT - TTFB) is the model reading the prompt (prefill) and, for reasoning models,
thinking before the first visible token. One verdict per request: the largest part wins.
"""

from __future__ import annotations

from typing import Any

from .rules_base import (
    COLD_CONNECT_MS,
    CONNECT_SHARE,
    NETWORK_BASELINE_FLOOR_MS,
    NETWORK_BASELINE_RATIO,
    NETWORK_TTFB_MS,
    PREFILL_GAP_MS,
    PREFILL_MIN_TOKENS,
    REASONING_MS,
    REASONING_SHARE,
    REPEATED_PREFIX_TOKENS,
    Ctx,
    largest_part,
)


def _timed(rec: Any) -> bool:
    """A successful stream with both clocks: the only kind the bisection applies to."""
    return rec.status == 200 and rec.ttft_ms is not None and rec.ttfb_ms is not None


def _cold_ms(rec: Any) -> float:
    return (rec.connect_ms or 0.0) if rec.conn_reused is False else 0.0


def rule_reasoning(rec: Any, c: Ctx) -> None:
    if not _timed(rec) or c.errors():
        return
    ttft = rec.ttft_ms
    if rec.first_token_ms is not None and rec.first_token_ms < ttft:
        spent = ttft - rec.first_token_ms
        if spent >= REASONING_MS and spent >= REASONING_SHARE * ttft:
            c.add("latency.reasoning", "info", variant="visible", **c.common(), ttft_ms=ttft,
                  first_token_ms=rec.first_token_ms, reasoning_ms=round(spent, 1),
                  reasoning_tokens=rec.usage_reasoning_tokens)
        return
    gap = rec.gap_ms or 0.0
    if rec.usage_reasoning_tokens and gap >= REASONING_MS and gap >= REASONING_SHARE * ttft and gap > rec.ttfb_ms:
        c.add("latency.reasoning", "info", variant="hidden", **c.common(), ttft_ms=ttft,
              first_token_ms=rec.first_token_ms, reasoning_ms=round(gap, 1), reasoning_tokens=rec.usage_reasoning_tokens)


def rule_prefill(rec: Any, c: Ctx) -> None:
    if not _timed(rec) or c.errors() or c.has("latency.reasoning"):
        return
    gap, tokens = rec.gap_ms or 0.0, rec.prompt_tokens_est or 0
    if gap < PREFILL_GAP_MS or gap <= 0.5 * rec.ttft_ms or tokens < PREFILL_MIN_TOKENS:
        return
    label, part = largest_part(rec)
    c.add("latency.prefill", "warn", **c.common(), gap_ms=gap, ttft_ms=rec.ttft_ms, prompt_tokens=tokens,
          ms_per_1k=round(gap / (tokens / 1000.0), 1), largest=label, largest_tokens=part)


def rule_network(rec: Any, c: Ctx) -> None:
    if not _timed(rec) or c.errors() or c.has("latency.reasoning", "latency.prefill"):
        return
    ttfb, ttft = rec.ttfb_ms, rec.ttft_ms
    if ttfb < 0.5 * ttft or _cold_ms(rec) > CONNECT_SHARE * ttfb:
        return
    p = dict(c.common(), ttfb_ms=ttfb, ttft_ms=ttft, connect_ms=rec.connect_ms if rec.conn_reused is False else 0,
             model=rec.model or "?")
    median, samples = c.baseline("ttfb_ms")
    if median and ttfb > NETWORK_BASELINE_RATIO * median and ttfb > NETWORK_BASELINE_FLOOR_MS:
        c.add("latency.network", "warn", variant="baseline", **p, median_ms=median, samples=samples,
              ratio=round(ttfb / median, 1))
    elif ttfb > NETWORK_TTFB_MS:
        c.add("latency.network", "warn", variant="absolute", **p)


def rule_cold_connection(rec: Any, c: Ctx) -> None:
    if rec.conn_reused is False and rec.connect_ms is not None and rec.connect_ms >= COLD_CONNECT_MS:
        c.add("latency.cold_connection", "info", **c.common(), connect_ms=rec.connect_ms, ttfb_ms=rec.ttfb_ms)


def rule_prompt_large(rec: Any, c: Ctx) -> None:
    tokens = rec.prompt_tokens_est
    if tokens is None or tokens <= c.warn_prompt_tokens or c.has("request.context_length"):
        return
    label, part = largest_part(rec)
    c.add("prompt.large", "warn", **c.common(), prompt_tokens=tokens, limit=c.warn_prompt_tokens,
          system_tokens=rec.system_tokens or 0, tools_tokens=rec.tools_tokens or 0,
          last_user_tokens=rec.last_user_tokens or 0, messages=rec.messages or 0, images=rec.images or 0,
          largest=label, largest_tokens=part)


def rule_repeated_prefix(rec: Any, c: Ctx) -> None:
    if rec.status is None or rec.status >= 300 or c.errors():
        return
    if (rec.prefix_tokens or 0) < REPEATED_PREFIX_TOKENS or (rec.prefix_seen_before or 0) < 1:
        return
    if rec.usage_cached_tokens or rec.usage_cache_creation_tokens:
        return  # cache hits, or caching is set up and this call wrote it
    c.add("prompt.repeated_prefix", "info", variant="anthropic" if c.is_anthropic() else "openai", **c.common(),
          prefix_tokens=rec.prefix_tokens, seen_before=rec.prefix_seen_before)


RULES = (rule_reasoning, rule_prefill, rule_network, rule_cold_connection, rule_prompt_large, rule_repeated_prefix)
