"""Each engine's knobs: what a person changes on that server for a queue, a paused decode, its cache
or a cold load. One home, read by the findings (addon/diagnose/engines.py) and docs/diagnoses.md."""

from __future__ import annotations

NAMES = {"llama.cpp": "llama.cpp (llama-server)", "ollama": "Ollama", "vllm": "vLLM", "tgi": "TGI", "sglang": "SGLang"}

#: requests wait for the engine: how many it runs at once
QUEUE = {
    "llama.cpp": "`--parallel N` runs N slots at once (each gets --ctx-size / N of the context: raise --ctx-size with it)",
    "vllm": "`--max-num-seqs` (requests in one step) and `--max-num-batched-tokens` (tokens in one step)",
    "ollama": "`OLLAMA_NUM_PARALLEL` (requests per model at once) and `OLLAMA_MAX_QUEUE`",
    "tgi": "`--max-concurrent-requests` and `--max-batch-total-tokens`",
    "sglang": "`--max-running-requests` and `--max-total-tokens`",
    None: "the server's setting for how many requests it runs at once (or send fewer at a time)",
}
#: a running decode waits while the engine prefills another request's prompt
PAUSE = {
    "llama.cpp": "a smaller `--batch-size` / `--ubatch-size` (a newcomer's prompt is evaluated that many tokens per step, between the running slots' decode steps), or fewer `--parallel` slots",
    "vllm": "chunked prefill (`--enable-chunked-prefill`) with a smaller `--max-num-batched-tokens`",
    "ollama": "`OLLAMA_NUM_PARALLEL=1` (requests queue instead of interleaving)",
    "tgi": "a smaller `--max-batch-prefill-tokens`",
    "sglang": "a smaller `--chunked-prefill-size`",
    None: "chunked prefill, or a smaller prefill batch, on the server",
}
#: how the engine's prefix cache works, and what makes it hit
CACHE = {
    "llama.cpp": "llama-server keeps one prompt cache per slot (`cache_prompt` is on by default): a repeated prefix hits only on the slot that last held it. Send a conversation to one slot (`id_slot` in the request), keep the prompt's start byte-identical, or run fewer `--parallel` slots; `--cache-reuse N` reuses shifted chunks",
    "vllm": "vLLM's automatic prefix caching (`--enable-prefix-caching`) reuses whole blocks of an identical prefix while they stay in its KV cache; `--enable-prompt-tokens-details` reports the hits in usage",
    "ollama": "Ollama reuses the loaded model's cache for an identical prefix while the model stays loaded (`keep_alive`), one per `OLLAMA_NUM_PARALLEL` slot",
    "tgi": "TGI 3 caches prefixes by default (`PREFIX_CACHING`); keep the prompt's start identical",
    "sglang": "SGLang's radix cache reuses any identical prefix (on unless `--disable-radix-cache`)",
    None: "a local server caches an identical prefix only while it still holds it (per slot, per loaded model): keep the prompt's start identical and the model loaded",
}
#: the prompt did not fit the context the engine gives one request
CONTEXT = {
    "llama.cpp": "llama-server splits `--ctx-size` among its `--parallel` slots (each slot gets ctx-size / parallel tokens): raise `--ctx-size`, or run fewer slots",
    "vllm": "start vLLM with a larger `--max-model-len` (up to the model's own limit; the KV cache must hold it)",
    "ollama": "raise `num_ctx` in the request's `options`, or `OLLAMA_CONTEXT_LENGTH` on the server",
    "tgi": "start TGI with larger `--max-input-tokens` and `--max-total-tokens`",
    "sglang": "start SGLang with a larger `--context-length`",
    None: "raise the server's context length setting",
}
#: ... where the request cannot carry the engine's context setting (Ollama's OpenAI- and Anthropic-compatible
#: APIs pass no ``options``: docs/api/openai-compatibility in ollama/ollama)
CONTEXT_COMPAT = {
    "ollama": "the OpenAI-compatible API cannot pass `num_ctx`, so set it on the server or the model: start the server with a larger `OLLAMA_CONTEXT_LENGTH` (e.g. `OLLAMA_CONTEXT_LENGTH=32768 ollama serve`; without it Ollama gives 4096 tokens below 24 GiB of VRAM, older versions 2048), or `ollama create` a model from a Modelfile with `PARAMETER num_ctx 32768` and call it by that name; `ollama ps` shows the context the loaded model got",
    None: CONTEXT[None],
}
#: the model had to be loaded first
LOAD = {
    "ollama": "keep it loaded: `keep_alive` in the request (\"30m\", or -1 for ever) or `OLLAMA_KEEP_ALIVE` on the server; `ollama ps` shows what is loaded and until when",
    None: "keep the model loaded between requests (the server's keep-alive or idle-unload setting)",
}


def knob(table: dict, engine: str | None) -> str:
    return table.get(engine) or table[None]


def context(engine: str | None, api: str | None) -> str:
    """What gives a request a larger context on this engine: in the request where its own API can say so
    (Ollama's native ``options.num_ctx``), else on the server or the model (Ollama's ``/v1``)."""
    native = engine != "ollama" or (api or "").startswith("ollama.")
    return knob(CONTEXT if native else CONTEXT_COMPAT, engine)


def name(engine: str | None) -> str:
    return NAMES.get(engine or "", engine or "the model server")
