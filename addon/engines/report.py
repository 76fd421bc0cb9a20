"""The engine's own report of one exchange: queue, load, prefill, decode and its prompt counts.

One meaning whatever the engine (llama.cpp, Ollama, vLLM, TGI, SGLang, a cloud's processing time);
every value keeps where it came from. The record's ``engine_*`` columns: docs/record.md ("Engine").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: the report's values, each a column ``engine_<name>`` of the record
#: queue_ms       the engine's wait before it began this request (its queue, a slot, the running step)
#: load_ms        loading the model first (Ollama's load_duration)
#: prefill_ms     evaluating the prompt (the tokens not served from its cache)
#: decode_ms      generating the output
#: prompt_tokens  the prompt as the engine counted it, cached part included
#: cached_tokens  of those, served from the engine's prefix cache (not evaluated again)
#: decode_tokens  the output tokens it generated
FIELDS = ("queue_ms", "load_ms", "prefill_ms", "decode_ms", "prompt_tokens", "cached_tokens", "decode_tokens")
COLUMNS = tuple("engine_" + f for f in FIELDS)
# The numbers of the engine rules (diagnose/thresholds.py lists them with the others, for the catalog)
#: engine.queued: the wait before the engine began was at least this many ms ...
QUEUE_MS = 500.0
#: ... and at least this share of the time to the first token (or of the whole answer)
QUEUE_SHARE = 0.3
#: engine.decode_paused: at least this share of a stream's longest silence overlapped other requests' prefill
PAUSE_SHARE = 0.5
#: engine.cold_load: the engine spent at least this many ms loading the model first
COLD_LOAD_MS = 1000.0
#: engine.cache_hit: the engine served at least this many prompt tokens from its own cache
CACHE_HIT_TOKENS = 1024

#: engine.prompt_truncated: the engine evaluated at most this share of the prompt firsttoken counted (tokenizers
#: differ by a third at most: Llama's and tiktoken's on the same text), ...
TRUNCATED_SHARE = 0.6
#: ... and at least this many tokens fewer
TRUNCATED_MIN_TOKENS = 512

#: an inferred value's source starts with this (the views label it so)
INFERRED = "inferred: "


@dataclass
class EngineReport:
    """What one engine said of one exchange. ``set`` keeps the last value given (llama.cpp repeats
    its ``timings`` on every chunk of newer builds; the last is the whole)."""

    engine: str | None = None  # llama.cpp | ollama | vllm | tgi | sglang | …
    values: dict[str, float | int] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)  # field -> "llama.cpp timings.prompt_ms"

    def set(self, name: str, value: Any, source: str, *, scale: float = 1.0) -> None:
        """Keep ``value`` (a finite, non-negative number, times ``scale``) for ``name``; others are ignored."""
        if name not in FIELDS or type(value) not in (int, float) or value != value or value < 0 or value > 1e12:
            return
        v = value * scale
        self.values[name] = int(v) if name.endswith("_tokens") else round(float(v), 3)
        self.sources[name] = source

    def name(self, engine: str) -> None:
        if self.engine is None:
            self.engine = engine

    def __bool__(self) -> bool:
        return bool(self.values)

    def columns(self) -> dict[str, Any]:
        """The record's engine columns (None where the engine said nothing)."""
        out: dict[str, Any] = {c: self.values.get(f) for f, c in zip(FIELDS, COLUMNS)}
        out["engine"] = self.engine
        out["engine_sources"] = dict(self.sources)
        return out


def infer(rec: Any, name: str, value: float, how: str) -> None:
    """Set a record's engine value the engine did not report, labelled inferred (and how)."""
    col = "engine_" + name
    if getattr(rec, col, None) is not None:
        return
    setattr(rec, col, round(float(value), 3))
    rec.engine_sources = {**(rec.engine_sources or {}), name: INFERRED + how}


def is_inferred(rec: Any, name: str) -> bool:
    return str((getattr(rec, "engine_sources", None) or {}).get(name, "")).startswith(INFERRED)


def prefilled_tokens(rec: Any) -> int | None:
    """The prompt tokens the engine evaluated for this request (its prompt less its cache hits)."""
    p = getattr(rec, "engine_prompt_tokens", None)
    if p is None:
        return None
    return max(0, p - (getattr(rec, "engine_cached_tokens", None) or 0))


#: ``prefilled_tokens`` over a row of ``requests`` (`stats`' fit of the engine's own prefill)
PREFILLED_SQL = "CASE WHEN engine_prompt_tokens IS NOT NULL THEN max(0, engine_prompt_tokens - coalesce(engine_cached_tokens, 0)) END"
