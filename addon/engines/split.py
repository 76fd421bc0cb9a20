"""The time to the first token split into the engine's own terms (docs/record.md "Engine"): the wait
before the engine began, a model load, the prefill, the first decode step, and the rest (network and
proxy: the difference, never reported). A term the engine did not report is inferred and says so.
Pure: a record or a row dict in, terms out; `show` draws them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from firsttoken.addon.engines.report import INFERRED

#: the terms in the order they happen, each an engine column (``rest`` and ``first_decode`` are derived)
ORDER = ("rest", "wait", "load", "prefill", "first_decode")
COLUMN = {"wait": "engine_queue_ms", "load": "engine_load_ms", "prefill": "engine_prefill_ms"}
SOURCE_KEY = {"wait": "queue_ms", "load": "load_ms", "prefill": "prefill_ms"}


@dataclass(frozen=True)
class Term:
    key: str  # rest | wait | load | prefill | first_decode (the whole answer: decode)
    ms: float
    how: str  # "reported" (the engine's figure) | "inferred" (the proxy's, from the engine's) | "measured" (the rest)
    source: str  # where the figure came from ("llama.cpp timings.prompt_ms", "inferred: …", "TTFT less the terms")
    start_ms: float  # where it is drawn from, ms after the request was sent


def _get(rec: Any, k: str) -> Any:
    return rec.get(k) if isinstance(rec, dict) else getattr(rec, k, None)


def _sources(rec: Any) -> dict[str, str]:
    s = _get(rec, "engine_sources")
    return s if isinstance(s, dict) else {}


def ttft_terms(rec: Any) -> list[Term]:
    """The engine's terms of this request's time to its first token (a whole answer: to its end), in the
    order they happen, ``rest`` first (the network and the proxy: the time no engine term accounts
    for), or [] when the engine reported none of them."""
    sources = _sources(rec)
    first = _get(rec, "first_token_ms")
    if first is None:
        first = _get(rec, "ttft_ms")
    whole = first is None
    if whole:
        first = _get(rec, "total_ms")
    if first is None or not any(_get(rec, c) is not None for c in COLUMN.values()):
        return []
    parts: list[tuple[str, float, str, str]] = []
    for key in ("wait", "load", "prefill"):
        v = _get(rec, COLUMN[key])
        if v is not None:
            src = sources.get(SOURCE_KEY[key], "")
            parts.append((key, float(v), "inferred" if src.startswith(INFERRED) else "reported", src))
    decode, n = _get(rec, "engine_decode_ms"), _get(rec, "engine_decode_tokens")
    wait_src = sources.get("queue_ms", "")
    # an inferred wait from the engine's prefill already holds everything up to the first token but the
    # engine's own terms: a first decode step drawn beside it would count that time twice
    if whole and decode is not None:
        parts.append(("decode", float(decode), "reported", sources.get("decode_ms", "")))
    elif decode is not None and n and not (wait_src.startswith(INFERRED) and "less the engine's" in wait_src):
        parts.append(("first_decode", float(decode) / n, "reported",
                      f"{sources.get('decode_ms', 'decode')} / {n} tokens"))
    rest = max(0.0, float(first) - sum(p[1] for p in parts))
    out = [Term("rest", round(rest, 3), "measured", "the time to the first token less the engine's terms", 0.0)]
    at = rest
    for key, ms, how, src in parts:
        out.append(Term(key, round(ms, 3), how, src, round(at, 3)))
        at += ms
    return out
