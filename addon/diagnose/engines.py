"""Engine verdicts: a model server of the user's own (llama.cpp, Ollama, vLLM, TGI, SGLang) that queued
a request, paused a decode to prefill another's prompt, loaded its model first, or served a prompt from
its cache. Read from the engine's own report and what else was in flight to it (``DiagnosisInput.neighbours``).
The verdicts and their thresholds: docs/diagnoses.md ("Local and self-hosted engines").
"""

from __future__ import annotations

from typing import Any

from firsttoken.addon import engines
from firsttoken.addon.diagnose.context import Ctx
from firsttoken.addon.engines import knobs
from firsttoken.addon.record import prompt_count
from firsttoken.addon.store.queries import is_streamed


def _first_ms(rec: Any) -> float | None:
    """When the engine's first token reached the proxy; a whole answer: its end."""
    for v in (rec.first_token_ms, rec.ttft_ms):
        if v is not None:
            return v
    return rec.total_ms if not is_streamed(rec) else None


def _busy(c: Ctx, until: float) -> list[Any]:
    """The other exchanges to the engine in flight before ``until`` (ms from this request's t0)."""
    return [n for n in c.neighbours if n.start_ms < until and (n.end_ms is None or n.end_ms > 0)]


def _params(rec: Any, c: Ctx) -> dict[str, Any]:
    return dict(c.common(), engine=knobs.name(rec.engine), model=rec.model or "?")


def rule_queued(rec: Any, c: Ctx) -> None:
    wait = rec.engine_queue_ms
    if wait is None or rec.status != 200 or c.errors() or not engines.is_engine_side(rec):
        return
    first = _first_ms(rec)
    if first is None or wait < engines.QUEUE_MS or wait < engines.QUEUE_SHARE * first:
        return
    source = (rec.engine_sources or {}).get("queue_ms", "")
    variant = "reported" if not engines.is_inferred(rec, "queue_ms") else "fit" if "fit" in source else "prefill"
    others = _busy(c, first)
    c.add("engine.queued", "warn", variant=variant, **_params(rec, c), wait_ms=round(wait, 1), first_ms=round(first, 1),
          ttfb_ms=rec.ttfb_ms, prefill_ms=rec.engine_prefill_ms, prefill_tokens=engines.prefilled_tokens(rec),
          others=len(others), knob=knobs.knob(knobs.QUEUE, rec.engine))


def _silence(rec: Any) -> tuple[float, float] | None:
    """The stream's longest silence between two token events: (from, to) in ms from t0."""
    offs = rec.event_offsets or []
    best = None
    for a, b in zip(offs, offs[1:]):
        if best is None or b - a > best[1] - best[0]:
            best = (a, b)
    return best


def rule_decode_paused(rec: Any, c: Ctx) -> None:
    if rec.itl_max_ms is None or rec.itl_max_ms <= c.stall_ms or not c.neighbours or not engines.is_engine_side(rec):
        return
    window = _silence(rec)
    if window is None:
        return
    a, b = window
    overlap, prefilling = 0.0, []
    for n in c.neighbours:  # their prefill: from their arrival to their first token
        end = n.first_token_ms if n.first_token_ms is not None else n.end_ms if n.end_ms is not None else b
        lo, hi = max(a, n.start_ms), min(b, end)
        if hi > lo:
            overlap = max(overlap, hi - lo) if not prefilling else overlap + (hi - lo)
            prefilling.append(n)
    gap = b - a
    overlap = min(overlap, gap)
    if not prefilling or overlap < engines.PAUSE_SHARE * gap:
        return
    tokens = sum(n.prompt_tokens or 0 for n in prefilling)
    c.add("engine.decode_paused", "warn", **_params(rec, c), paused_ms=round(gap, 1), at_ms=round(a, 1),
          others=len(prefilling), other_tokens=tokens, overlap_ms=round(overlap, 1), stall_ms=c.stall_ms,
          knob=knobs.knob(knobs.PAUSE, rec.engine))


def rule_cold_load(rec: Any, c: Ctx) -> None:
    load = rec.engine_load_ms
    if load is None or load < engines.COLD_LOAD_MS or c.errors():
        return
    first = _first_ms(rec)
    severity = "warn" if first and load >= 0.5 * first else "info"
    c.add("engine.cold_load", severity, **_params(rec, c), load_ms=round(load, 1), first_ms=first,
          knob=knobs.knob(knobs.LOAD, rec.engine))


def rule_cache_hit(rec: Any, c: Ctx) -> None:
    cached = rec.engine_cached_tokens
    if not cached or cached < engines.CACHE_HIT_TOKENS or rec.status != 200 or c.errors():
        return
    prompt = prompt_count(rec).tokens or rec.engine_prompt_tokens
    c.add("engine.cache_hit", "info", **_params(rec, c), cached_tokens=cached, prompt_tokens=prompt,
          prefill_tokens=engines.prefilled_tokens(rec), prefill_ms=rec.engine_prefill_ms, first_ms=_first_ms(rec),
          knob=knobs.knob(knobs.CACHE, rec.engine))


def rule_prompt_truncated(rec: Any, c: Ctx) -> None:
    """A 200 whose engine evaluated far fewer prompt tokens than were sent: the prompt was cut to the
    context (Ollama does it silently), not a tokenizer counting differently."""
    n, sent = rec.engine_prompt_tokens, rec.prompt_tokens_est
    if n is None or not sent or rec.status != 200 or c.errors() or engines.is_inferred(rec, "prompt_tokens") \
            or rec.engine_cached_tokens:  # a count with a cached part is no tell
        return
    ctx = getattr(rec, "num_ctx", None)
    if n > engines.TRUNCATED_SHARE * sent or sent - n < engines.TRUNCATED_MIN_TOKENS or (ctx and (n > ctx or sent <= ctx)):
        return
    c.add("engine.prompt_truncated", "warn", variant="num_ctx" if ctx else "count", **_params(rec, c), sent=sent,
          evaluated=n, num_ctx=ctx or "-", knob=knobs.context(rec.engine, rec.api))


RULES = (rule_cold_load, rule_queued, rule_decode_paused, rule_prompt_truncated, rule_cache_hit)


# ---- The ``engines`` family of the finding catalog, in English and Chinese.

_W, _I = "warn", "info"

ENTRIES: list[tuple[str, str, str, tuple[str, ...], dict[str, tuple[Any, Any, Any, Any]]]] = [
    ("engine.queued", "engines", _W, (), {
        "en": ("Waited for the engine (queued)",
               "A model server of your own (an engine that reported itself, or a loopback / LAN upstream) began this request at least {ENGINE_QUEUE_MS:.0f} ms late, and that wait was at least {ENGINE_QUEUE_SHARE:.0%} of the time to the first token: its other requests held every slot. The wait is TTFT less the engine's own load and prefill (variant prefill), the engine's own figure (reported), or, for an engine that reports no times, TTFT less the route's fit while others were in flight (fit).",
               {"reported": "{engine} kept this request waiting {wait_ms:,.0f} ms before it began (its own figure), of {first_ms:,.0f} ms to the first token; {others} other request(s) were in flight to it.",
                "prefill": "{engine} began this request about {wait_ms:,.0f} ms late: of {first_ms:,.0f} ms to the first token it spent {prefill_ms:,.0f} ms on the prompt ({prefill_tokens} tokens evaluated), and the rest came before it began, while {others} other request(s) were in flight to it. Not the network: the engine's queue.",
                "fit": "About {wait_ms:,.0f} ms of {first_ms:,.0f} ms to the first token was a wait for {engine} (inferred: TTFT less the prefill the route's fit predicts for this prompt), while {others} other request(s) were in flight to it."},
               "The engine runs fewer requests at once than arrive: raise {knob}, or send fewer at once (a client's concurrency, an agent's parallel tool calls). On a machine that is already busy, more parallel slots share the same compute: each request gets slower, none waits."),
        "zh": ("在引擎中排队",
               "你自己的模型服务（报告了自身的引擎，或本机/局域网上游）晚了至少 {ENGINE_QUEUE_MS:.0f} 毫秒才开始处理这个请求，且这段等待至少占首 token 时间的 {ENGINE_QUEUE_SHARE:.0%}：它的其他请求占满了所有槽位。等待时间为 TTFT 减去引擎自报的加载和 prefill（变体 prefill）、引擎自报的数值（reported），或对不报告耗时的引擎，在有其他请求进行时用 TTFT 减去路由拟合的预测（fit）。",
               {"reported": "{engine} 让这个请求等了 {wait_ms:,.0f} 毫秒才开始（它自己的数字），首 token 用时 {first_ms:,.0f} 毫秒；当时有 {others} 个其他请求在它上面进行。",
                "prefill": "{engine} 晚了约 {wait_ms:,.0f} 毫秒才开始这个请求：首 token 用时 {first_ms:,.0f} 毫秒，其中 {prefill_ms:,.0f} 毫秒用于提示词（评估了 {prefill_tokens} 个 token），其余都发生在开始之前，当时有 {others} 个其他请求在它上面进行。不是网络：是引擎的队列。",
                "fit": "首 token 的 {first_ms:,.0f} 毫秒中约 {wait_ms:,.0f} 毫秒是在等待 {engine}（推断：TTFT 减去路由拟合对该提示词预测的 prefill），当时有 {others} 个其他请求在它上面进行。"},
               "引擎同时运行的请求少于到达的请求：调大 {knob}，或减少同时发送的请求（客户端并发、智能体的并行工具调用）。机器本身已满载时，更多并行槽位只是分享同样的算力：每个请求都变慢，但不再排队。"),
    }),
    ("engine.decode_paused", "engines", _W, (), {
        "en": ("Decode paused while the engine prefilled other requests",
               "A stream of a model server of your own went silent for longer than --stall-ms, and for at least {ENGINE_PAUSE_SHARE:.0%} of that silence the same engine was evaluating the prompts of requests that arrived meanwhile (continuous batching without chunked prefill runs a newcomer's prompt in the running requests' steps).",
               "This stream paused {paused_ms:,.0f} ms after {at_ms:,.0f} ms while {engine} evaluated the prompts of {others} request(s) that arrived meanwhile ({other_tokens:,} prompt tokens): nothing was wrong on the wire and the client was reading.",
               "Expected on a busy engine, not a fault of the client or the network. To keep running streams smooth: {knob}."),
        "zh": ("引擎处理其他请求的 prefill 时解码暂停",
               "你自己的模型服务上的一个流静默超过 --stall-ms，且至少 {ENGINE_PAUSE_SHARE:.0%} 的静默时间里同一引擎在评估期间新到请求的提示词（没有分块 prefill 的连续批处理会把新请求的提示词放进正在运行请求的步骤中）。",
               "在 {at_ms:,.0f} 毫秒后这个流暂停了 {paused_ms:,.0f} 毫秒，此时 {engine} 正在评估期间新到的 {others} 个请求的提示词（{other_tokens:,} 个提示词 token）：线路上没有问题，客户端也在读取。",
               "繁忙的引擎上这是正常现象，不是客户端或网络的问题。要让正在进行的流更平稳：{knob}。"),
    }),
    ("engine.cold_load", "engines", _I, (_W,), {
        "en": ("The engine loaded the model first (cold start)",
               "The engine reported spending at least {ENGINE_COLD_LOAD_MS:.0f} ms loading the model before this request (Ollama's load_duration): the first request after a start, or after the model was unloaded for being idle; a warning when loading was at least half of the time to the first token.",
               "{engine} spent {load_ms:,.0f} ms loading {model} before it could begin (first token at {first_ms:,.0f} ms).",
               "The model was not loaded: {knob}."),
        "zh": ("引擎先加载了模型（冷启动）",
               "引擎报告在这个请求之前至少花了 {ENGINE_COLD_LOAD_MS:.0f} 毫秒加载模型（Ollama 的 load_duration）：启动后的第一个请求，或模型因空闲被卸载之后；加载至少占首 token 时间的一半时为警告。",
               "{engine} 在开始之前花了 {load_ms:,.0f} 毫秒加载 {model}（首 token 在 {first_ms:,.0f} 毫秒）。",
               "模型当时没有加载：{knob}。"),
    }),
    ("engine.prompt_truncated", "engines", _W, (), {
        "en": ("The engine cut the prompt (silent truncation)",
               "A 200 whose engine reported evaluating at most {ENGINE_TRUNCATED_SHARE:.0%} of the prompt tokens firsttoken counted, and at least {ENGINE_TRUNCATED_MIN_TOKENS} fewer: more than tokenizers differ by. Ollama cuts a prompt longer than its context this way with no error (ollama/ollama#3839); the model never saw the start of the conversation.",
               {"num_ctx": "{engine} evaluated {evaluated:,} prompt tokens of about {sent:,} sent: the request's num_ctx is {num_ctx:,}, so the rest was cut without an error, and the model answered without it.",
                "count": "{engine} evaluated {evaluated:,} prompt tokens of about {sent:,} sent: far fewer than a different tokenizer would count, so the prompt was most likely cut to the engine's context without an error (or the engine counted only what it did not take from its cache)."},
               "Give the request a context that holds the prompt: {knob}; or send less (old turns, large tool results)."),
        "zh": ("引擎截断了提示词（静默截断）",
               "返回 200，但引擎报告评估的提示词 token 至多为 firsttoken 计数的 {ENGINE_TRUNCATED_SHARE:.0%}，且至少少 {ENGINE_TRUNCATED_MIN_TOKENS} 个：超出了分词器之间的差异。Ollama 会这样无报错地截断超出上下文的提示词（ollama/ollama#3839）；模型根本没看到对话的开头。",
               {"num_ctx": "{engine} 只评估了约 {sent:,} 个已发送提示词 token 中的 {evaluated:,} 个：请求的 num_ctx 为 {num_ctx:,}，其余部分被无报错地截掉，模型在没有它们的情况下作答。",
                "count": "{engine} 只评估了约 {sent:,} 个已发送提示词 token 中的 {evaluated:,} 个：远少于分词器差异所能解释的，提示词很可能被无报错地截断到引擎的上下文（或者引擎只计入了未从缓存读取的部分）。"},
               "给请求一个能容纳提示词的上下文：{knob}；或者少发一些（旧的对话轮次、过大的工具结果）。"),
    }),
    ("engine.cache_hit", "engines", _I, (), {
        "en": ("Served from the engine's own prefix cache",
               "The engine reported that at least {ENGINE_CACHE_HIT_TOKENS} prompt tokens came from its own cache (llama.cpp cache_n, SGLang cached_tokens, vLLM cached_tokens): only the rest was evaluated.",
               "{engine} took {cached_tokens:,} of {prompt_tokens:,} prompt tokens from its cache and evaluated {prefill_tokens} (first token at {first_ms:,.0f} ms).",
               "How this engine's cache works: {knob}."),
        "zh": ("命中了引擎自己的前缀缓存",
               "引擎报告至少 {ENGINE_CACHE_HIT_TOKENS} 个提示词 token 来自它自己的缓存（llama.cpp cache_n、SGLang cached_tokens、vLLM cached_tokens）：只评估了其余部分。",
               "{engine} 从缓存中取了 {prompt_tokens:,} 个提示词 token 中的 {cached_tokens:,} 个，只评估了 {prefill_tokens} 个（首 token 在 {first_ms:,.0f} 毫秒）。",
               "这个引擎的缓存如何工作：{knob}。"),
    }),
]
