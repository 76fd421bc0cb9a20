"""Reading each engine's report where it puts it: a chunk or body (llama.cpp ``timings``, Ollama's
final object, SGLang's ``meta_info``, vLLM's usage), or the response headers (TGI's ``x-*-time``).

Pure and cheap: ``read_object`` is a few dict look-ups per chunk. docs/record.md ("Engine").
"""

from __future__ import annotations

from typing import Any

from firsttoken.addon.engines.report import EngineReport

NS = 1e-6  # Ollama's durations are nanoseconds


def _num(v: Any) -> float | int | None:
    return v if type(v) in (int, float) and not isinstance(v, bool) else None


def read_llamacpp(t: dict, report: EngineReport) -> None:
    """llama.cpp's ``timings``: ``prompt_n`` tokens evaluated in ``prompt_ms``, ``cache_n`` reused from
    the slot's cache, ``predicted_n`` generated in ``predicted_ms``."""
    report.name("llama.cpp")
    prompt_n, cache_n = _num(t.get("prompt_n")), _num(t.get("cache_n"))
    report.set("prefill_ms", t.get("prompt_ms"), "llama.cpp timings.prompt_ms")
    report.set("decode_ms", t.get("predicted_ms"), "llama.cpp timings.predicted_ms")
    report.set("decode_tokens", t.get("predicted_n"), "llama.cpp timings.predicted_n")
    if cache_n is not None:
        report.set("cached_tokens", cache_n, "llama.cpp timings.cache_n")
    if prompt_n is not None:
        report.set("prompt_tokens", prompt_n + (cache_n or 0), "llama.cpp timings.prompt_n + cache_n")


def read_ollama(obj: dict, report: EngineReport) -> None:
    """Ollama's last object (``done: true``): durations in nanoseconds. Its cloud models send only
    ``total_duration`` and the counts."""
    report.name("ollama")
    report.set("load_ms", obj.get("load_duration"), "ollama load_duration", scale=NS)
    report.set("prefill_ms", obj.get("prompt_eval_duration"), "ollama prompt_eval_duration", scale=NS)
    report.set("decode_ms", obj.get("eval_duration"), "ollama eval_duration", scale=NS)
    report.set("prompt_tokens", obj.get("prompt_eval_count"), "ollama prompt_eval_count")
    report.set("decode_tokens", obj.get("eval_count"), "ollama eval_count")


def read_sglang(meta: dict, report: EngineReport) -> None:
    """SGLang's ``meta_info``: its prompt count, the part from its radix cache, the output count."""
    report.name("sglang")
    report.set("prompt_tokens", meta.get("prompt_tokens"), "sglang meta_info.prompt_tokens")
    report.set("cached_tokens", meta.get("cached_tokens"), "sglang meta_info.cached_tokens")
    report.set("decode_tokens", meta.get("completion_tokens"), "sglang meta_info.completion_tokens")


def read_vllm_usage(usage: dict, report: EngineReport) -> None:
    report.set("prompt_tokens", usage.get("prompt_tokens"), "vllm usage.prompt_tokens")
    d = usage.get("prompt_tokens_details")
    if type(d) is dict:
        report.set("cached_tokens", d.get("cached_tokens"), "vllm usage.prompt_tokens_details.cached_tokens")
    report.set("decode_tokens", usage.get("completion_tokens"), "vllm usage.completion_tokens")


#: what Ollama's OpenAI-compatible ``/v1`` puts on every chunk and body (its openai/openai.go); it sends no Server header
OLLAMA_FINGERPRINT = "fp_ollama"


def read_ollama_openai(obj: dict, report: EngineReport) -> None:
    """Ollama's ``/v1`` answer: no durations, but its usage is the engine's own count (``prompt_tokens`` is
    ``prompt_eval_count``, the prompt as evaluated, after any cut to the context; cached part included)."""
    report.name("ollama")
    usage = obj.get("usage")
    if type(usage) is dict:
        report.set("prompt_tokens", usage.get("prompt_tokens"), "ollama /v1 usage.prompt_tokens (prompt_eval_count)")
        report.set("decode_tokens", usage.get("completion_tokens"), "ollama /v1 usage.completion_tokens (eval_count)")


def read_object(obj: dict, report: EngineReport) -> None:
    """Whatever engine report one JSON chunk or body of an OpenAI-compatible answer carries."""
    t = obj.get("timings")
    if type(t) is dict:
        read_llamacpp(t, report)
    meta = obj.get("meta_info")
    if type(meta) is dict:
        read_sglang(meta, report)
    engine = report.engine
    if engine is None:
        # a choice with vLLM's own extras (``stop_reason``, ``token_ids``): the engine that answered is vLLM
        choices = obj.get("choices")
        if (type(choices) is list and choices and type(c := choices[0]) is dict
                and ("stop_reason" in c or "token_ids" in c)):
            report.name("vllm")
            engine = report.engine
    if engine == "vllm":
        usage = obj.get("usage")
        if type(usage) is dict:
            read_vllm_usage(usage, report)
    if obj.get("system_fingerprint") == OLLAMA_FINGERPRINT:
        read_ollama_openai(obj, report)
    if obj.get("done") is True and ("prompt_eval_count" in obj or "eval_count" in obj or "total_duration" in obj):
        read_ollama(obj, report)


#: TGI's timing headers (ms unless said): name -> (field, scale)
TGI_HEADERS = {
    "x-queue-time": ("queue_ms", 1.0),
    "x-prompt-tokens": ("prompt_tokens", 1.0),
    "x-generated-tokens": ("decode_tokens", 1.0),
}
TGI_ALL = ("x-queue-time", "x-inference-time", "x-time-per-token", "x-prompt-tokens", "x-generated-tokens",
           "x-validation-time", "x-total-time", "x-compute-time")


def read_headers(headers: dict[str, Any] | None, report: EngineReport) -> None:
    """The engine report some servers put in the response headers (TGI, on a whole answer)."""
    if not isinstance(headers, dict) or "x-queue-time" not in headers and "x-inference-time" not in headers:
        return

    def num(name: str) -> float | None:
        try:
            return float(str(headers.get(name)).strip())
        except (TypeError, ValueError):
            return None

    report.name("tgi")
    for name, (what, scale) in TGI_HEADERS.items():
        v = num(name)
        if v is not None:
            report.set(what, v, f"tgi {name}", scale=scale)
    # TGI's x-time-per-token is x-inference-time / generated tokens (its router), the prefill included:
    # it splits nothing, so neither prefill nor decode is set from it (the queue and the counts are TGI's own)


#: a response's Server header naming the engine that answered (lower-case prefix -> engine)
SERVERS = (("llama.cpp", "llama.cpp"), ("ollama", "ollama"), ("text-generation-inference", "tgi"))


#: error types only one engine sends: llama-server's context error, vLLM's (its exception's class name)
ERROR_TYPES = {"exceed_context_size_error": "llama.cpp", "BadRequestError": "vllm", "NotFoundError": "vllm"}


def engine_of_error(error_type: str | None) -> str | None:
    """The engine whose error bodies carry this ``error.type``, else None."""
    return ERROR_TYPES.get(error_type or "")


def engine_of_server(server: str | None) -> str | None:
    """The engine a Server header names (llama-server sends ``llama.cpp``), else None."""
    s = (server or "").lower()
    for prefix, engine in SERVERS:
        if s.startswith(prefix):
            return engine
    return None
