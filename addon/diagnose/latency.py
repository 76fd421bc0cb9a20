"""Latency verdicts: which part of TTFT was slow (the "TTFT - TTFB" bisection), and prompt size.

TTFB covers the network, gateways and queues, the gap after it the prefill; behind a hop that
holds its headers (``rec.headers_held``) the route's TTFT-vs-input fit splits TTFT instead.
The verdicts and their thresholds: docs/diagnoses.md ("Latency verdicts").
"""

from __future__ import annotations

from typing import Any

from firsttoken.addon import engines, hops  # the module, not its names: hops reads diagnose.thresholds (a cycle)
from firsttoken.addon.diagnose.context import Ctx, largest_part
from firsttoken.addon.diagnose.thresholds import (
    COLD_CONNECT_MS,
    CONNECT_SHARE,
    MACHINE_BUSY_LOAD,
    NETWORK_BASELINE_FLOOR_MS,
    NETWORK_BASELINE_RATIO,
    NETWORK_TTFB_MS,
    PREFILL_GAP_MS,
    PREFILL_MIN_TOKENS,
    PROMPT_LARGE_FLOOR,
    PROMPT_WINDOW_SHARE,
    PROXY_BUSY_CPU,
    PROXY_DELAY_MS,
    REASONING_MS,
    REASONING_SHARE,
    REPEATED_PREFIX_TOKENS,
)
from firsttoken.addon.models import context_window
from firsttoken.addon.record import prompt_count
from firsttoken.addon.store.queries import is_streamed


def _timed(rec: Any) -> bool:
    """A successful stream with both clocks: the only kind the bisection applies to (a non-streamed
    answer's headers come after the whole answer: its TTFB is no network time; ``queries.STREAMED``)."""
    return rec.status == 200 and rec.ttft_ms is not None and rec.ttfb_ms is not None and is_streamed(rec)


def _held_by_hop(c: Ctx) -> bool:
    """A hop buffered this stream (stream.buffered): its TTFB and gap are that hop's delay,
    neither the network's nor the model's prefill."""
    return c.has("stream.buffered")


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
    if _held_by_hop(c):
        return
    if rec.usage_reasoning_tokens and gap >= REASONING_MS and gap >= REASONING_SHARE * ttft and gap > rec.ttfb_ms:
        c.add("latency.reasoning", "info", variant="hidden", **c.common(), ttft_ms=ttft,
              first_token_ms=rec.first_token_ms, reasoning_ms=round(gap, 1), reasoning_tokens=rec.usage_reasoning_tokens)


def _route_fit(rec: Any, c: Ctx) -> hops.Fit | None:
    """The route's TTFT-vs-input fit over its recent streams (what stays true through a hop that holds
    headers); computed once per request (three rules ask)."""
    cache = c.__dict__.setdefault("route_fit", {})
    if rec.id not in cache:
        cache[rec.id] = hops.fit_of_route(rec, c.recent)
    return cache[rec.id]


def rule_headers_held(rec: Any, c: Ctx) -> None:
    if not _timed(rec) or getattr(rec, "headers_held", None) is not True or c.errors():
        return
    tokens = rec.prompt_tokens_est or 0
    p = dict(c.common(), route=rec.route or "default", ttfb_ms=rec.ttfb_ms, ttft_ms=rec.ttft_ms,
             gap_ms=rec.gap_ms or 0.0, prompt_tokens=tokens)
    fit = _route_fit(rec, c) if tokens else None
    if fit is None:
        c.add("latency.headers_held", "info", variant="nofit", **p)
        return
    prefill = min(fit.prefill_ms(tokens), rec.ttft_ms)
    c.add("latency.headers_held", "info", variant="fit", **p, fit_n=fit.n, intercept_ms=fit.intercept_ms,
          ms_per_1k=fit.slope_ms_per_1k, prefill_ms=round(prefill, 1), before_ms=round(rec.ttft_ms - prefill, 1))


def rule_prefill(rec: Any, c: Ctx) -> None:
    if not _timed(rec) or c.errors() or c.has("latency.reasoning") or _held_by_hop(c):
        return
    if getattr(rec, "headers_held", None):
        _prefill_through_held(rec, c)
        return
    tokens = prompt_count(rec).tokens or 0
    if rec.engine_prefill_ms is not None and not engines.is_inferred(rec, "prefill_ms"):
        _prefill_by_engine(rec, c, tokens)
        return
    gap = rec.gap_ms or 0.0
    if gap < PREFILL_GAP_MS or gap <= 0.5 * rec.ttft_ms or tokens < PREFILL_MIN_TOKENS:
        return
    label, part = largest_part(rec)
    local = engines.is_engine_side(rec)  # cache advice for the engine, not a cloud's
    c.add("latency.prefill", "warn", variant="local" if local else "gap", **c.common(), gap_ms=gap, ttft_ms=rec.ttft_ms,
          prompt_tokens=tokens, ms_per_1k=round(gap / (tokens / 1000.0), 1), largest=label, largest_tokens=part,
          knob=engines.knobs.knob(engines.knobs.CACHE, rec.engine) if local else None)


def _prefill_by_engine(rec: Any, c: Ctx, tokens: int) -> None:
    """latency.prefill from the engine's own prefill time and count (llama.cpp, Ollama)."""
    prefill, evaluated = rec.engine_prefill_ms, engines.prefilled_tokens(rec)
    first = rec.first_token_ms if rec.first_token_ms is not None else rec.ttft_ms
    if prefill < PREFILL_GAP_MS or prefill <= 0.5 * first or tokens < PREFILL_MIN_TOKENS or not evaluated:
        return
    label, part = largest_part(rec)
    c.add("latency.prefill", "warn", variant="engine", **c.common(), engine=engines.knobs.name(rec.engine),
          prefill_ms=round(prefill, 1), ttft_ms=rec.ttft_ms, prompt_tokens=tokens, prefill_tokens=evaluated,
          cached_tokens=rec.engine_cached_tokens or 0, ms_per_1k=round(prefill / (evaluated / 1000.0), 1),
          largest=label, largest_tokens=part, knob=engines.knobs.knob(engines.knobs.CACHE, rec.engine))


def _prefill_through_held(rec: Any, c: Ctx) -> None:
    """latency.prefill where the gap is hidden: the prefill the route's fit predicts for this prompt."""
    tokens = rec.prompt_tokens_est or 0
    if tokens < PREFILL_MIN_TOKENS:
        return
    fit = _route_fit(rec, c)
    if fit is None:
        return
    prefill = min(fit.prefill_ms(tokens), rec.ttft_ms)
    if prefill < PREFILL_GAP_MS or prefill <= 0.5 * rec.ttft_ms:
        return
    label, part = largest_part(rec)
    c.add("latency.prefill", "warn", variant="fit", **c.common(), route=rec.route or "default", prefill_ms=round(prefill, 1),
          ttft_ms=rec.ttft_ms, prompt_tokens=tokens, ms_per_1k=fit.slope_ms_per_1k, fit_n=fit.n,
          largest=label, largest_tokens=part)


def rule_network(rec: Any, c: Ctx) -> None:
    if not _timed(rec) or c.errors() or c.has("latency.reasoning", "latency.prefill", "engine.queued", "engine.cold_load") or _held_by_hop(c):
        return
    if getattr(rec, "headers_held", None):  # TTFB contains the prefill here: only the route's fit can split it
        _network_through_held(rec, c)
        return
    ttfb, ttft = rec.ttfb_ms, rec.ttft_ms
    if ttfb < 0.5 * ttft or _cold_ms(rec) > CONNECT_SHARE * ttfb:
        return
    if ttfb <= NETWORK_BASELINE_FLOOR_MS and ttfb <= NETWORK_TTFB_MS:
        return  # neither verdict below can fire: no need for the model's baseline
    p = dict(c.common(), ttfb_ms=ttfb, ttft_ms=ttft, connect_ms=rec.connect_ms if rec.conn_reused is False else 0,
             model=rec.model or "?")
    median, samples = c.baseline("ttfb_ms")
    if median and ttfb > NETWORK_BASELINE_RATIO * median and ttfb > NETWORK_BASELINE_FLOOR_MS:
        c.add("latency.network", "warn", variant="baseline", **p, median_ms=median, samples=samples,
              ratio=round(ttfb / median, 1))
    elif ttfb > NETWORK_TTFB_MS:
        c.add("latency.network", "warn", variant="absolute", **p)


def _network_through_held(rec: Any, c: Ctx) -> None:
    """latency.network where TTFB holds the prefill: TTFT less the prefill the route's fit predicts."""
    tokens = rec.prompt_tokens_est or 0
    fit = _route_fit(rec, c) if tokens else None
    if fit is None:
        return
    ttft = rec.ttft_ms
    before = ttft - min(fit.prefill_ms(tokens), ttft)
    if before <= NETWORK_TTFB_MS or before < 0.5 * ttft or _cold_ms(rec) > CONNECT_SHARE * before:
        return
    c.add("latency.network", "warn", variant="fit", **c.common(), ttfb_ms=rec.ttfb_ms, ttft_ms=ttft,
          connect_ms=rec.connect_ms if rec.conn_reused is False else 0, model=rec.model or "?",
          route=rec.route or "default", before_ms=round(before, 1), fit_n=fit.n, prompt_tokens=tokens)


def rule_cold_connection(rec: Any, c: Ctx) -> None:
    if rec.conn_reused is False and rec.connect_ms is not None and rec.connect_ms >= COLD_CONNECT_MS:
        c.add("latency.cold_connection", "info", **c.common(), connect_ms=rec.connect_ms, ttfb_ms=rec.ttfb_ms)


#: model -> context window, for the models seen (the lookup tries every known prefix)
_WINDOW_OF: dict[str, int | None] = {}


def _context_window(model: str | None) -> int | None:
    if type(model) is not str:
        return context_window(model)
    try:
        return _WINDOW_OF[model]
    except KeyError:
        window = context_window(model)
        if len(_WINDOW_OF) >= 1024:
            _WINDOW_OF.clear()
        _WINDOW_OF[model] = window
        return window


def prompt_limit(model: str | None, fixed: int) -> tuple[int, int | None]:
    """(limit, context window) for prompt.large: ``fixed`` when set (> 0), else a share of the
    model's context window, else a floor for models whose window is not known."""
    window = _context_window(model)
    if fixed > 0:
        return fixed, window
    if window:
        return int(window * PROMPT_WINDOW_SHARE), window
    return PROMPT_LARGE_FLOOR, None


def rule_prompt_large(rec: Any, c: Ctx) -> None:
    tokens = rec.prompt_tokens_est
    limit, window = prompt_limit(rec.model, c.warn_prompt_tokens)
    if tokens is None or tokens <= limit or c.has("request.context_length"):
        return
    label, part = largest_part(rec)
    c.add("prompt.large", "warn", variant="window" if window else "fixed", **c.common(), prompt_tokens=tokens,
          limit=limit, window=window, share=round(100.0 * tokens / window) if window else None, model=rec.model,
          system_tokens=rec.system_tokens or 0, tools_tokens=rec.tools_tokens or 0,
          last_user_tokens=rec.last_user_tokens or 0, messages=rec.messages or 0, images=rec.images or 0,
          largest=label, largest_tokens=part)


def rule_repeated_prefix(rec: Any, c: Ctx) -> None:
    if rec.status is None or rec.status >= 300 or c.errors() or c.has("cache.miss"):
        return
    if (rec.prefix_tokens or 0) < REPEATED_PREFIX_TOKENS or (rec.prefix_seen_before or 0) < 1:
        return
    if rec.usage_cached_tokens or rec.usage_cache_creation_tokens:
        return  # cache hits, or caching is set up and this call wrote it
    markers = (c.prompt_change or {}).get("cache_markers") or 0
    variant = ("marked" if markers else "anthropic") if c.is_anthropic() else "openai"
    c.add("prompt.repeated_prefix", "info", variant=variant, **c.common(),
          prefix_tokens=rec.prefix_tokens, seen_before=rec.prefix_seen_before, markers=markers)


def rule_proxy_saturated(rec: Any, c: Ctx) -> None:
    """The proxy itself delayed this request: its event loop was late (CPU-bound, or starved
    of CPU by other processes). Its timings include that wait; the upstream is not to blame."""
    delay = rec.proxy_delay_ms
    if delay is None or delay < PROXY_DELAY_MS:
        return
    cpu = rec.proxy_cpu
    busy = cpu is not None and cpu >= PROXY_BUSY_CPU
    starting = rec.proxy_start_wait_ms or 0.0
    load = getattr(rec, "machine_load", None)
    # most of the wait was the proxy's own start-up; else a machine with more runnable processes
    # than cores delays everything on it: that, not the proxy
    variant = ("starting" if starting * 2 >= delay else
               "machine" if load is not None and load >= MACHINE_BUSY_LOAD else "busy" if busy else "starved")
    extra = {"start_ms": starting} if variant == "starting" else {}
    c.add("proxy.saturated", "warn", variant=variant, **c.common(), delay_ms=delay,
          lag_ms=rec.proxy_lag_ms or 0.0, cpu_pct=round((cpu or 0.0) * 100), ttft_ms=rec.ttft_ms or 0.0,
          load_per_core=load, **extra)


#: the findings that say a request's TTFT is not its model's prefill, each with the reason the
#: TTFT-vs-prompt fit gives for leaving it out (``ttft_outlier``; docs/stats.md, "The fit")
NOT_PREFILL: dict[str, str] = {
    "stream.buffered": "a hop buffered the stream: its TTFT is that hop's delay",
    "latency.headers_held": "headers held until the first token, and the route has no fit to split TTFT yet",
    "proxy.saturated": "the proxy itself delayed it",
    "latency.network": "slow before the headers (network, gateway, queue)",
    "latency.cold_connection": "a new connection took 200 ms or more",
}


def ttft_outlier(findings: list[dict[str, Any]] | None) -> str | None:
    """The code of the first finding that says this request's TTFT is not its model's prefill
    (``NOT_PREFILL``), or None. ``latency.headers_held`` counts only in its ``nofit`` variant: where
    the route's own fit splits TTFT (variant ``fit``) the held TTFT is still network + prefill. The
    one rule: the analyzer stores it (``requests.ttft_outlier``), m026 filled it in for older rows."""
    for f in findings or ():
        code = f.get("code") if isinstance(f, dict) else None
        if code not in NOT_PREFILL:
            continue
        if code == "latency.headers_held" and (f.get("params") or {}).get("variant") == "fit":
            continue
        return code
    return None


RULES = (rule_reasoning, rule_prefill, rule_network, rule_headers_held, rule_cold_connection, rule_prompt_large, rule_repeated_prefix,
         rule_proxy_saturated)


# ---- The ``latency`` family of the finding catalog, in English and Chinese.

_E, _W, _I = "error", "warn", "info"

# (code, family, usual severity, other possible severities, {lang: (title, when, message, hint)})
ENTRIES: list[tuple[str, str, str, tuple[str, ...], dict[str, tuple[Any, Any, Any, Any]]]] = [
    ("latency.network", "latency", _W, (), {
        "en": ("Slow before the headers (network, gateway, queue)",
               "TTFB is at least half of TTFT and either above {NETWORK_TTFB_MS:.0f} ms, or above {NETWORK_BASELINE_RATIO:.0f}x the median of the last {BASELINE_MIN_SAMPLES}+ warm requests to the same model through the same route with a prompt of the same size band (and above {NETWORK_BASELINE_FLOOR_MS:.0f} ms). When the headers came with the first token (latency.headers_held) TTFB contains the prefill, so only TTFT less the prefill the route's TTFT-vs-input fit predicts counts (variant fit).",
               {"absolute": "TTFB was {ttfb_ms:,.0f} ms of a {ttft_ms:,.0f} ms TTFT: the time went before {host} sent response headers, not to generation.",
                "baseline": "TTFB was {ttfb_ms:,.0f} ms, {ratio:.1f}x the median of the last {samples} requests to {model} with a prompt of this size through this route ({median_ms:,.0f} ms): the extra wait came before the response headers.",
                "fit": "About {before_ms:,.0f} ms of this {ttft_ms:,.0f} ms TTFT came before the model (network, gateway, queue): TTFT less the prefill that the TTFT-vs-input fit of {fit_n} earlier requests through route {route} predicts for {prompt_tokens:,} prompt tokens (its hop holds the headers until the first token, so TTFB cannot tell)."},
               "Look before the model: the network path or region (connecting took {connect_ms:,.0f} ms), a gateway or proxy in between, or a provider-side queue (overload, rate-limit tier); compare with curl -w '%{{time_starttransfer}}' against the upstream directly."),
        "zh": ("响应头之前很慢（网络、网关、排队）",
               "TTFB 至少占 TTFT 的一半，并且超过 {NETWORK_TTFB_MS:.0f} 毫秒，或超过同模型、同路由、同提示词长度区间最近 {BASELINE_MIN_SAMPLES} 个以上热连接请求中位数的 {NETWORK_BASELINE_RATIO:.0f} 倍（且超过 {NETWORK_BASELINE_FLOOR_MS:.0f} 毫秒）。响应头随首 token 一起到达时（latency.headers_held）TTFB 包含了 prefill，只用 TTFT 减去该路由 TTFT-输入长度拟合预测的 prefill 来判定（变体 fit）。",
               {"absolute": "在 {ttft_ms:,.0f} 毫秒的 TTFT 中，TTFB 占了 {ttfb_ms:,.0f} 毫秒：时间花在 {host} 返回响应头之前，而不是生成上。",
                "baseline": "TTFB 为 {ttfb_ms:,.0f} 毫秒，是经同一路由、提示词长度相近的最近 {samples} 个 {model} 请求中位数（{median_ms:,.0f} 毫秒）的 {ratio:.1f} 倍：多出的等待发生在响应头之前。",
                "fit": "在 {ttft_ms:,.0f} 毫秒的 TTFT 中，约 {before_ms:,.0f} 毫秒发生在模型之前（网络、网关、排队）：即 TTFT 减去路由 {route} 此前 {fit_n} 个请求的 TTFT-输入长度拟合对 {prompt_tokens:,} 个提示词 token 预测的 prefill（该路由上的中间层把响应头扣到首 token 才发送，TTFB 无法区分）。"},
               "问题在模型之前：网络路径或地区（建立连接用了 {connect_ms:,.0f} 毫秒）、中间的网关或代理，或服务商侧排队（过载、限流等级）；用 curl -w '%{{time_starttransfer}}' 直连上游对比。"),
    }),
    ("latency.prefill", "latency", _W, (), {
        "en": ("Slow prompt processing (prefill)",
               "The gap between headers and first token is more than half of TTFT and above {PREFILL_GAP_MS:.0f} ms, for a prompt of at least {PREFILL_MIN_TOKENS} tokens; through a hop that holds the headers until the first token (latency.headers_held), the prefill the route's TTFT-vs-input fit predicts for the prompt instead (variant fit).",
               {"gap": "{gap_ms:,.0f} ms passed between the headers and the first token (TTFT {ttft_ms:,.0f} ms) for {prompt_tokens:,} prompt tokens: {ms_per_1k:,.0f} ms per 1k tokens of prefill.",
                "local": "{gap_ms:,.0f} ms passed between the headers and the first token (TTFT {ttft_ms:,.0f} ms) for {prompt_tokens:,} prompt tokens: {ms_per_1k:,.0f} ms per 1k tokens of prefill on this engine.",
                "engine": "{engine} spent {prefill_ms:,.0f} ms of this {ttft_ms:,.0f} ms TTFT evaluating {prefill_tokens:,} of {prompt_tokens:,} prompt tokens ({cached_tokens:,} came from its cache): {ms_per_1k:,.0f} ms per 1k tokens, by its own report.",
                "fit": "About {prefill_ms:,.0f} ms of this {ttft_ms:,.0f} ms TTFT was prefill of {prompt_tokens:,} prompt tokens ({ms_per_1k:,.0f} ms per 1k, from the TTFT-vs-input fit of {fit_n} earlier requests through route {route}, whose hop holds the headers until the first token)."},
               {"gap": "Send fewer tokens (largest part: {largest}, {largest_tokens:,} tokens) or reuse a cached prefix: keep the start of the prompt identical across calls (OpenAI caches prefixes of 1024+ tokens automatically; Anthropic needs cache_control on the last stable block).", "fit": "Send fewer tokens (largest part: {largest}, {largest_tokens:,} tokens) or reuse a cached prefix: keep the start of the prompt identical across calls (OpenAI caches prefixes of 1024+ tokens automatically; Anthropic needs cache_control on the last stable block).", "local": "Send fewer tokens (largest part: {largest}, {largest_tokens:,} tokens), or let the engine's cache serve a repeated start: {knob}.", "engine": "Send fewer tokens (largest part: {largest}, {largest_tokens:,} tokens), or let the engine's cache serve a repeated start: {knob}."}),
        "zh": ("提示词处理（prefill）缓慢",
               "响应头到首 token 的间隔超过 TTFT 的一半且超过 {PREFILL_GAP_MS:.0f} 毫秒，且提示词至少 {PREFILL_MIN_TOKENS} token；经过把响应头扣到首 token 才发送的中间层时（latency.headers_held），改用该路由 TTFT-输入长度拟合预测的 prefill（变体 fit）。",
               {"gap": "响应头之后过了 {gap_ms:,.0f} 毫秒才出现首 token（TTFT {ttft_ms:,.0f} 毫秒），提示词 {prompt_tokens:,} token：prefill 约每 1k token {ms_per_1k:,.0f} 毫秒。",
                "local": "响应头之后过了 {gap_ms:,.0f} 毫秒才出现首 token（TTFT {ttft_ms:,.0f} 毫秒），提示词 {prompt_tokens:,} token：这个引擎上 prefill 约每 1k token {ms_per_1k:,.0f} 毫秒。",
                "engine": "{engine} 在 {ttft_ms:,.0f} 毫秒的 TTFT 中花了 {prefill_ms:,.0f} 毫秒评估 {prompt_tokens:,} 个提示词 token 中的 {prefill_tokens:,} 个（{cached_tokens:,} 个来自它的缓存）：按它自己的报告约每 1k token {ms_per_1k:,.0f} 毫秒。",
                "fit": "在 {ttft_ms:,.0f} 毫秒的 TTFT 中，约 {prefill_ms:,.0f} 毫秒是 {prompt_tokens:,} 个提示词 token 的 prefill（每 1k 约 {ms_per_1k:,.0f} 毫秒，来自路由 {route} 此前 {fit_n} 个请求的 TTFT-输入长度拟合；该路由上的中间层把响应头扣到首 token 才发送）。"},
               {"gap": "减少发送的 token（最大部分：{largest}，{largest_tokens:,} token），或复用缓存前缀：让提示词开头在多次调用间保持完全一致（OpenAI 自动缓存 1024 token 以上的前缀；Anthropic 需要在最后一个稳定块上加 cache_control）。", "fit": "减少发送的 token（最大部分：{largest}，{largest_tokens:,} token），或复用缓存前缀：让提示词开头在多次调用间保持完全一致（OpenAI 自动缓存 1024 token 以上的前缀；Anthropic 需要在最后一个稳定块上加 cache_control）。", "local": "减少发送的 token（最大部分：{largest}，{largest_tokens:,} token），或让引擎的缓存服务重复的开头：{knob}。", "engine": "减少发送的 token（最大部分：{largest}，{largest_tokens:,} token），或让引擎的缓存服务重复的开头：{knob}。"}),
    }),
    ("latency.headers_held", "latency", _I, (), {
        "en": ("Headers held until the first token",
               "The first visible token came at most {HELD_GAP_MS:.0f} ms (or {HELD_GAP_SHARE:.0%} of TTFT, up to {HELD_GAP_MAX_MS:.0f} ms) after the response headers, of a TTFT of at least {HELD_MIN_TTFT_MS:.0f} ms, and either the prompt had {PREFILL_MIN_TOKENS}+ tokens to prefill (less what the server read from its prompt cache) or at least {HELD_ROUTE_SHARE:.0%} of {HELD_ROUTE_SAMPLES}+ recent streams of the route did the same, one of them with {PREFILL_MIN_TOKENS}+ tokens: a hop holds the headers, so TTFB contains the prefill.",
               {"fit": "The response headers came with the first token ({gap_ms:,.0f} ms apart, TTFT {ttft_ms:,.0f} ms): a hop on route {route} holds its headers until the model's first chunk, so TTFB includes the prefill and the TTFB/prefill split is not visible through this hop. The route's TTFT-vs-input fit ({fit_n} requests) splits it instead: ~{before_ms:,.0f} ms before the model (network, gateway, queue) and ~{prefill_ms:,.0f} ms of prefill for {prompt_tokens:,} prompt tokens ({ms_per_1k:,.0f} ms per 1k).",
                "nofit": "The response headers came with the first token ({gap_ms:,.0f} ms apart, TTFT {ttft_ms:,.0f} ms): a hop on route {route} holds its headers until the model's first chunk, so TTFB includes the prefill and the TTFB/prefill split is not visible through this hop."},
               "Judge this route by TTFT, not TTFB. To split it, send prompts of several sizes through the route (`firsttoken sweep`, or `firsttoken compare --route {route} --route ROUTE` against the upstream directly): the slope of TTFT against input is the prefill, the intercept the network, gateway and queue. LiteLLM's proxy always does this; a buffering proxy (nginx proxy_buffering) does it too."),
        "zh": ("响应头被扣到首 token 才发送",
               "首个可见 token 在响应头之后不超过 {HELD_GAP_MS:.0f} 毫秒（或 TTFT 的 {HELD_GAP_SHARE:.0%}，最多 {HELD_GAP_MAX_MS:.0f} 毫秒）到达，TTFT 至少 {HELD_MIN_TTFT_MS:.0f} 毫秒，并且需要 prefill 的提示词至少 {PREFILL_MIN_TOKENS} token（扣除服务端从提示词缓存读取的部分），或该路由最近 {HELD_ROUTE_SAMPLES} 个以上流式请求中至少 {HELD_ROUTE_SHARE:.0%} 也是如此（其中一个提示词至少 {PREFILL_MIN_TOKENS} token）：有中间层扣住了响应头，所以 TTFB 包含了 prefill。",
               {"fit": "响应头随首 token 一起到达（相隔 {gap_ms:,.0f} 毫秒，TTFT {ttft_ms:,.0f} 毫秒）：路由 {route} 上的某个中间层把响应头扣到模型的第一个数据块才发送，所以 TTFB 包含了 prefill，经过这个中间层看不到 TTFB 与 prefill 的划分。改用该路由的 TTFT-输入长度拟合（{fit_n} 个请求）来划分：模型之前（网络、网关、排队）约 {before_ms:,.0f} 毫秒，{prompt_tokens:,} 个提示词 token 的 prefill 约 {prefill_ms:,.0f} 毫秒（每 1k 约 {ms_per_1k:,.0f} 毫秒）。",
                "nofit": "响应头随首 token 一起到达（相隔 {gap_ms:,.0f} 毫秒，TTFT {ttft_ms:,.0f} 毫秒）：路由 {route} 上的某个中间层把响应头扣到模型的第一个数据块才发送，所以 TTFB 包含了 prefill，经过这个中间层看不到 TTFB 与 prefill 的划分。"},
               "在这个路由上看 TTFT，而不是 TTFB。要划分时间，请经该路由发送几种长度的提示词（`firsttoken sweep`，或 `firsttoken compare --route {route} --route ROUTE` 与直连上游对比）：TTFT 随输入增长的斜率是 prefill，截距是网络、网关和排队。LiteLLM 代理总是这样；开启缓冲的代理（nginx proxy_buffering）也会这样。"),
    }),
    ("latency.reasoning", "latency", _I, (), {
        "en": ("Reasoning before the answer",
               "Reasoning ran at least {REASONING_MS:.0f} ms (and {REASONING_SHARE:.0%} of TTFT) before the first visible token: streamed reasoning tokens, or hidden reasoning tokens reported in usage.",
               {"visible": "The first (reasoning) token came at {first_token_ms:,.0f} ms but the first visible token only at {ttft_ms:,.0f} ms: {reasoning_ms:,.0f} ms of reasoning before any answer text.",
                "hidden": "TTFT was {ttft_ms:,.0f} ms and the upstream reported {reasoning_tokens} reasoning tokens: the model reasoned (unstreamed) before answering."},
               "Expected for reasoning models: lower the effort (OpenAI \"reasoning_effort\": \"low\", Anthropic thinking.budget_tokens) or use a non-reasoning model where TTFT matters; show the reasoning as progress."),
        "zh": ("回答前在推理",
               "首个可见 token 之前推理了至少 {REASONING_MS:.0f} 毫秒（且占 TTFT 的 {REASONING_SHARE:.0%}）：流式的推理 token，或用量中报告的隐藏推理 token。",
               {"visible": "第一个（推理）token 在 {first_token_ms:,.0f} 毫秒到达，第一个可见 token 直到 {ttft_ms:,.0f} 毫秒才出现：回答文字之前推理了 {reasoning_ms:,.0f} 毫秒。",
                "hidden": "TTFT 为 {ttft_ms:,.0f} 毫秒，上游报告了 {reasoning_tokens} 个推理 token：模型在回答前进行了（未流式输出的）推理。"},
               "推理模型的正常现象：降低推理强度（OpenAI \"reasoning_effort\": \"low\"，Anthropic thinking.budget_tokens），或在看重 TTFT 的场景使用非推理模型；把推理过程作为进度展示给用户。"),
    }),
    ("latency.cold_connection", "latency", _I, (), {
        "en": ("Cold connection",
               "The request opened a new upstream connection and connecting took at least {COLD_CONNECT_MS:.0f} ms; exclude it from baselines.",
               "This request opened a new connection to {host}: connecting took {connect_ms:,.0f} ms of its {ttfb_ms:,.0f} ms TTFB.",
               "Normal for the first request of a run (DNS, TCP, TLS): exclude it from baselines; clients that keep connections alive pay this once."),
        "zh": ("冷连接",
               "请求新建了上游连接且连接耗时至少 {COLD_CONNECT_MS:.0f} 毫秒；统计基线时应排除。",
               "该请求新建了到 {host} 的连接：在 {ttfb_ms:,.0f} 毫秒的 TTFB 中，建立连接用了 {connect_ms:,.0f} 毫秒。",
               "一次运行中的第一个请求通常如此（DNS、TCP、TLS）：统计基线时排除它；保持长连接的客户端只需付出一次。"),
    }),
    ("prompt.large", "latency", _W, (), {
        "en": ("Large prompt",
               "The counted prompt exceeds {PROMPT_WINDOW_SHARE:.0%} of the model's context window ({PROMPT_LARGE_FLOOR:,} tokens when the window is not known), or --warn-prompt-tokens when set.",
               {"window": "The prompt is {prompt_tokens:,} tokens, {share}% of {model}'s {window:,}-token context window, above the {limit:,} tokens firsttoken warns at: system {system_tokens:,}, tools {tools_tokens:,}, last user message {last_user_tokens:,}, {messages} messages.",
                "fixed": "The prompt is {prompt_tokens:,} tokens, above the {limit:,} tokens firsttoken warns at: system {system_tokens:,}, tools {tools_tokens:,}, last user message {last_user_tokens:,}, {messages} messages."},
               "The largest part is {largest} ({largest_tokens:,} tokens): trim it, summarise old turns, or cache the stable prefix; raise --warn-prompt-tokens if this size is expected."),
        "zh": ("提示词过大",
               "统计出的提示词超过模型上下文窗口的 {PROMPT_WINDOW_SHARE:.0%}（窗口未知时为 {PROMPT_LARGE_FLOOR:,} token），或超过设置的 --warn-prompt-tokens。",
               {"window": "提示词有 {prompt_tokens:,} token，占 {model} 的 {window:,} token 上下文窗口的 {share}%，超过 firsttoken 的提醒阈值 {limit:,} token：系统 {system_tokens:,}，工具 {tools_tokens:,}，最后一条用户消息 {last_user_tokens:,}，共 {messages} 条消息。",
                "fixed": "提示词有 {prompt_tokens:,} token，超过 firsttoken 的提醒阈值 {limit:,} token：系统 {system_tokens:,}，工具 {tools_tokens:,}，最后一条用户消息 {last_user_tokens:,}，共 {messages} 条消息。"},
               "最大的部分是{largest}（{largest_tokens:,} token）：精简它、总结旧的对话轮次，或缓存稳定前缀；如果这个大小是预期的，调大 --warn-prompt-tokens。"),
    }),
    ("prompt.repeated_prefix", "latency", _I, (), {
        "en": ("Repeated prefix without cache hits",
               "A stable prefix (system, tools, earlier turns) of at least {REPEATED_PREFIX_TOKENS} tokens was sent before in this run (one `firsttoken run`, else since the proxy started; earlier runs in the database do not count) and the upstream reported no cached tokens.",
               "The first {prefix_tokens:,} prompt tokens (system, tools, earlier turns) were already sent {seen_before} time(s) in this run, and the upstream reported no cache hit.",
               {"marked": "The request already marks its stable prefix ({markers} cache_control marker(s)), so the client is not to blame: this upstream (or a gateway in front of it) ignored the markers. Ask the provider whether it caches prompts for this model, or route this traffic to one that does.",
                "anthropic": "Add \"cache_control\": {{\"type\": \"ephemeral\"}} to the last stable block (the system prompt or the last tool) so repeats are read from the cache: faster prefill, a fraction of the price.",
                "openai": "OpenAI-style providers cache identical prefixes of 1024+ tokens automatically: keep the prefix byte-identical (no timestamps or ids near the start) and set prompt_cache_key; if this provider has no prompt caching, the cost repeats every call."}),
        "zh": ("前缀重复但没有命中缓存",
               "本次运行（一次 `firsttoken run`，否则为代理启动以来；数据库中更早的运行不计）中已发送过的、至少 {REPEATED_PREFIX_TOKENS} token 的稳定前缀（系统、工具、之前的轮次）再次发送，上游没有报告缓存 token。",
               "前 {prefix_tokens:,} 个提示词 token（系统、工具、之前的轮次）在本次运行中已发送过 {seen_before} 次，上游没有报告缓存命中。",
               {"marked": "请求已经用 {markers} 个 cache_control 标记标出了稳定前缀，问题不在客户端：这个上游（或它前面的网关）忽略了这些标记。向服务商确认它是否为该模型缓存提示词，或把这些流量发到支持缓存的上游。",
                "anthropic": "在最后一个稳定块（系统提示词或最后一个工具）上加 \"cache_control\": {{\"type\": \"ephemeral\"}}，重复部分就会从缓存读取：prefill 更快，价格只是一小部分。",
                "openai": "OpenAI 风格的服务商会自动缓存 1024 token 以上的相同前缀：保持前缀逐字节一致（开头不要放时间戳或 ID），并设置 prompt_cache_key；如果该服务商不支持提示词缓存，每次调用都要重复付出这部分开销。"}),
    }),
    ("proxy.saturated", "latency", _W, (), {
        "en": ("The proxy itself delayed the request",
               "The proxy's own delay on the request (its event loop's lag before and while handling it, and the wait between reading the request and its hooks) was at least {PROXY_DELAY_MS:.0f} ms; \"machine\" when the machine's load average was at least {MACHINE_BUSY_LOAD:g} per core, else \"busy\" when the proxy process used at least {PROXY_BUSY_CPU:.0%} of a core meanwhile, else \"starved\"; \"starting\" before all of these when most of it was spent waiting for the proxy's own start-up (a `firsttoken run` command's first request).",
               {"busy": "The proxy itself added up to ~{delay_ms:,.0f} ms to this request (it waited {lag_ms:,.0f} ms before the proxy could even read it): the proxy is CPU-bound ({cpu_pct}% of a core), so part of the recorded time is the proxy's, not {host}'s.",
                "starved": "The proxy itself added up to ~{delay_ms:,.0f} ms to this request (it waited {lag_ms:,.0f} ms before the proxy could even read it) while using only {cpu_pct}% of a core: other processes on this machine kept it from running.",
                "machine": "This machine was busy: its load average was {load_per_core:.1f} per core (more processes wanted a CPU than there were cores), so the proxy waited its turn and added up to ~{delay_ms:,.0f} ms to this request (it waited {lag_ms:,.0f} ms before it could even read it). The proxy is not slow, and {host} is not to blame for that part.",
                 "starting": "This request reached firsttoken's port while its proxy was still starting (`firsttoken run` starts the command at once, beside the proxy): its bytes waited {start_ms:,.0f} ms unread, before the timings start. The client saw about {lag_ms:,.0f} ms more than the recorded TTFB and TTFT; {host} is not to blame for it."},
               {"machine": "Measure again when the machine is quieter (close builds, tests, other heavy programs; a first run also warms the tokenizer), or on a machine with free cores; subtract proxy_delay_ms before blaming the upstream.",
                "busy": "Send fewer concurrent streams through one proxy, or run it on a machine with a free core (the client, the proxy and a local upstream compete for the same CPUs); `firsttoken bench --concurrency 1,10,50,200` shows where this machine's ceiling is. Subtract proxy_delay_ms before blaming the upstream.",
                "starved": "Free a core for the proxy (other busy processes compete with it), or run it on a less loaded machine; subtract proxy_delay_ms before blaming the upstream.",
                 "starting": "Only a request sent right after the start waits like this. To time that first request too, start `firsttoken proxy` first (it stays up) and then `firsttoken run -- CMD`: run joins the running proxy."}),
        "zh": ("代理自身拖慢了请求",
               "代理自身对该请求造成的延迟（处理前和处理中事件循环的滞后，以及读到请求到钩子运行之间的等待）至少 {PROXY_DELAY_MS:.0f} 毫秒；本机每核负载均值至少 {MACHINE_BUSY_LOAD:g} 时为 \"machine\"，否则期间代理进程 CPU 占用至少 {PROXY_BUSY_CPU:.0%} 个核时为 \"busy\"，否则为 \"starved\"；大部分时间在等代理自身启动时（`firsttoken run` 命令的第一个请求）优先为 \"starting\"。",
               {"busy": "代理自身给该请求增加了最多约 {delay_ms:,.0f} 毫秒（代理读到它之前它就等了 {lag_ms:,.0f} 毫秒）：代理已经是 CPU 瓶颈（占用一个核的 {cpu_pct}%），所以记录的时间有一部分属于代理，而不是 {host}。",
                "starved": "代理自身给该请求增加了最多约 {delay_ms:,.0f} 毫秒（代理读到它之前它就等了 {lag_ms:,.0f} 毫秒），而代理只占用了一个核的 {cpu_pct}%：本机其他进程让它得不到 CPU。",
                "machine": "本机当时很忙：每核负载均值为 {load_per_core:.1f}（想用 CPU 的进程多于核数），代理只能排队等待，给该请求增加了最多约 {delay_ms:,.0f} 毫秒（读到它之前就等了 {lag_ms:,.0f} 毫秒）。这不是代理慢，这部分时间也不该算在 {host} 头上。",
                 "starting": "该请求到达 firsttoken 的端口时代理还在启动（`firsttoken run` 会立即启动命令，与代理同时启动）：它的字节在计时开始之前未被读取，等了 {start_ms:,.0f} 毫秒。客户端看到的时间比记录的 TTFB 和 TTFT 多约 {lag_ms:,.0f} 毫秒；这不怪 {host}。"},
               {"machine": "在机器空闲时再测一次（关掉编译、测试等繁重程序；首次运行还要预热分词器），或换一台有空闲核的机器；在归咎上游之前先减去 proxy_delay_ms。",
                "busy": "减少经过同一个代理的并发流，或在有空闲 CPU 核的机器上运行它（客户端、代理和本地上游在争用同样的 CPU）；`firsttoken bench --concurrency 1,10,50,200` 可以测出本机的上限。在归咎上游之前先减去 proxy_delay_ms。",
                "starved": "为代理留出一个 CPU 核（其他繁忙进程在与它争用），或换一台负载较低的机器运行；在归咎上游之前先减去 proxy_delay_ms。",
                 "starting": "只有启动后立刻发出的请求会这样等待。若也要给第一个请求准确计时，先启动 `firsttoken proxy`（它会一直运行），再运行 `firsttoken run -- CMD`：run 会加入正在运行的代理。"}),
    }),
]
