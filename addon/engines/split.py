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


# ------------------------------------------------------------------ the same terms in SQL
# `stats` splits every matching row at once, in SQLite: these expressions over a row of ``requests``
# are ``ttft_terms``' rule written once more where the rows are (tests/test_engines.py holds the two
# equal on every kind of row); NULL where the term is not there.

#: the engine reported (or the proxy inferred) at least one of the terms before the first token
REPORTED_SQL = "(engine_queue_ms IS NOT NULL OR engine_load_ms IS NOT NULL OR engine_prefill_ms IS NOT NULL)"
#: a row an engine said anything of, or whose wait the proxy inferred (vLLM may name no engine): the
#: WHERE of the index ``idx_requests_engine`` (migration m030), word for word, so that a query uses it
ENGINE_ROWS_SQL = ("(engine IS NOT NULL OR engine_queue_ms IS NOT NULL OR engine_load_ms IS NOT NULL "
                   "OR engine_prefill_ms IS NOT NULL)")
_WHOLE = "(first_token_ms IS NULL AND ttft_ms IS NULL)"
_FIRST = "coalesce(first_token_ms, ttft_ms, total_ms)"
_SPLIT = f"({REPORTED_SQL} AND {_FIRST} IS NOT NULL)"


def source_sql(key: str) -> str:
    """The SQL of where the engine's ``key`` value (``queue_ms``, ``prefill_ms`` …) came from ('' if unsaid)."""
    return (f"coalesce(CASE WHEN json_valid(engine_sources) THEN json_extract(engine_sources, '$.{key}') END, '')")


def inferred_sql(key: str) -> str:
    """True where the value of ``key`` is the proxy's inference, not the engine's report."""
    return f"(substr({source_sql(key)}, 1, {len(INFERRED)}) = '{INFERRED}')"


# a wait inferred from the engine's own prefill holds the first decode already (see ttft_terms)
_WAIT_HOLDS_DECODE = f"({inferred_sql('queue_ms')} AND instr({source_sql('queue_ms')}, 'less the engine''s') > 0)"
_FIRST_DECODE = (f"CASE WHEN NOT {_WHOLE} AND engine_decode_ms IS NOT NULL AND engine_decode_tokens > 0 "
                 f"AND NOT {_WAIT_HOLDS_DECODE} THEN engine_decode_ms * 1.0 / engine_decode_tokens END")
_WHOLE_DECODE = f"CASE WHEN {_WHOLE} THEN engine_decode_ms END"
_REST = (f"max(0.0, {_FIRST} - coalesce(engine_queue_ms, 0) - coalesce(engine_load_ms, 0) - coalesce(engine_prefill_ms, 0)"
         f" - coalesce({_FIRST_DECODE}, 0) - coalesce({_WHOLE_DECODE}, 0))")

#: each term of ``ttft_terms`` (key -> SQL of its ms), ``decode`` being a whole answer's
TERMS_SQL: dict[str, str] = {
    "rest": f"CASE WHEN {_SPLIT} THEN {_REST} END",
    "wait": f"CASE WHEN {_SPLIT} THEN engine_queue_ms END",
    "load": f"CASE WHEN {_SPLIT} THEN engine_load_ms END",
    "prefill": f"CASE WHEN {_SPLIT} THEN engine_prefill_ms END",
    "first_decode": f"CASE WHEN {_SPLIT} THEN {_FIRST_DECODE} END",
    "decode": f"CASE WHEN {_SPLIT} THEN {_WHOLE_DECODE} END",
}
#: whose value is inferred, per term with a source of its own
INFERRED_SQL: dict[str, str] = {k: inferred_sql(SOURCE_KEY[k]) for k in ("wait", "load", "prefill")}
