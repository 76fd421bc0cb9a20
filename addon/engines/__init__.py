"""Model servers people run (llama.cpp, Ollama, vLLM, TGI, SGLang): their own report of an exchange,
which engine answered, what else was in flight to it, and each engine's knobs. docs/record.md ("Engine")."""

from __future__ import annotations

from firsttoken.addon.engines import knobs
from firsttoken.addon.engines.local import is_engine_side, is_local
from firsttoken.addon.engines.readers import TGI_ALL, engine_of_error, engine_of_server, read_headers, read_object, read_ollama
from firsttoken.addon.engines.report import (
    CACHE_HIT_TOKENS,
    COLD_LOAD_MS,
    COLUMNS,
    FIELDS,
    INFERRED,
    PAUSE_SHARE,
    PREFILLED_SQL,
    QUEUE_MS,
    QUEUE_SHARE,
    TRUNCATED_MIN_TOKENS,
    TRUNCATED_SHARE,
    EngineReport,
    infer,
    is_inferred,
    prefilled_tokens,
)
from firsttoken.addon.engines.split import ENGINE_ROWS_SQL, INFERRED_SQL, REPORTED_SQL, TERMS_SQL, Term, ttft_terms
from firsttoken.addon.engines.timing import infer_wait, infer_wait_from_fit
from firsttoken.addon.engines.window import Span, Window

__all__ = ["CACHE_HIT_TOKENS", "COLD_LOAD_MS", "COLUMNS", "FIELDS", "ENGINE_ROWS_SQL", "INFERRED", "INFERRED_SQL", "PREFILLED_SQL", "REPORTED_SQL", "TERMS_SQL", "PAUSE_SHARE", "QUEUE_MS", "QUEUE_SHARE", "TGI_ALL", "TRUNCATED_MIN_TOKENS", "TRUNCATED_SHARE", "EngineReport", "Span", "Term", "Window", "engine_of_error", "engine_of_server", "infer",
           "infer_wait", "infer_wait_from_fit", "is_engine_side", "is_inferred", "is_local", "knobs", "prefilled_tokens", "read_headers",
           "read_object", "read_ollama", "ttft_terms"]
