"""Model servers people run (llama.cpp, Ollama, vLLM, TGI, SGLang): their own report of an exchange,
which engine answered, and each engine's knobs. docs/record.md ("Engine"), docs/diagnoses.md."""

from __future__ import annotations

from firsttoken.addon.engines.readers import TGI_ALL, engine_of_server, read_headers, read_object, read_ollama
from firsttoken.addon.engines.report import COLUMNS, FIELDS, INFERRED, EngineReport, infer, is_inferred, prefilled_tokens

__all__ = ["COLUMNS", "FIELDS", "INFERRED", "TGI_ALL", "EngineReport", "engine_of_server", "infer", "is_inferred", "prefilled_tokens",
           "read_headers", "read_object", "read_ollama"]
