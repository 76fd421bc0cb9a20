"""The diagnosis thresholds: every number a rule compares against, in one place.

``THRESHOLDS`` documents them (docs/diagnoses.md is generated from it).
"""

from __future__ import annotations

from typing import Any

#: latency.headers_held and the route's fit: defined beside their rule (addon/hops/held.py)
from firsttoken.addon.engines import CACHE_HIT_TOKENS as ENGINE_CACHE_HIT_TOKENS
from firsttoken.addon.engines import COLD_LOAD_MS as ENGINE_COLD_LOAD_MS
from firsttoken.addon.engines import PAUSE_SHARE as ENGINE_PAUSE_SHARE
from firsttoken.addon.engines import QUEUE_MS as ENGINE_QUEUE_MS
from firsttoken.addon.engines import QUEUE_SHARE as ENGINE_QUEUE_SHARE
from firsttoken.addon.engines import TRUNCATED_MIN_TOKENS as ENGINE_TRUNCATED_MIN_TOKENS
from firsttoken.addon.engines import TRUNCATED_SHARE as ENGINE_TRUNCATED_SHARE
from firsttoken.addon.hops.held import (
    FIT_MIN_SAMPLES,
    FIT_MIN_SPAN,
    HELD_GAP_MAX_MS,
    HELD_GAP_MS,
    HELD_GAP_SHARE,
    HELD_MIN_TTFT_MS,
    HELD_ROUTE_SAMPLES,
    HELD_ROUTE_SHARE,
    PREFILL_MIN_TOKENS,
)

#: stream.buffered: the stream-shape numbers, defined beside the shape rule (addon/hops/shape.py)
from firsttoken.addon.hops.shape import CLUMP_GAP_MS as BUFFERED_CLUMP_GAP_MS
from firsttoken.addon.hops.shape import CLUMP_MIN_EVENTS as BUFFERED_CLUMP_EVENTS
from firsttoken.addon.hops.shape import HELD_SHARE as BUFFERED_SHARE
from firsttoken.addon.hops.shape import HOLD_MIN_MS as BUFFERED_HOLD_MS
from firsttoken.addon.hops.shape import MIN_EVENTS as BUFFERED_MIN_EVENTS
from firsttoken.addon.hops.shape import REF_ITL_MIN_MS as BUFFERED_REF_ITL_MS
from firsttoken.addon.hops.shape import RELEASE_GAP_MS as BUFFERED_RELEASE_GAP_MS
from firsttoken.addon.hops.shape import WITH_HEADERS_MS as BUFFERED_WITH_HEADERS_MS

#: latency.network: TTFB above this, and at least half of TTFT
NETWORK_TTFB_MS = 1000.0
#: latency.network (baseline): TTFB above this multiple of the model's recent median TTFB ...
NETWORK_BASELINE_RATIO = 3.0
#: ... from at least this many earlier healthy, warm requests of the same model ...
BASELINE_MIN_SAMPLES = 5
#: ... and above this many ms.
NETWORK_BASELINE_FLOOR_MS = 300.0
#: latency.prefill: gap (TTFT - TTFB) above this, more than half of TTFT ...
PREFILL_GAP_MS = 1000.0
#: ... for a prompt of at least this many tokens (defined beside the held-headers rule, which needs it too)
#: latency.reasoning: reasoning ran at least this long before the first visible token ...
REASONING_MS = 500.0
#: ... and took at least this share of TTFT.
REASONING_SHARE = 0.3
#: latency.cold_connection: a new upstream connection took at least this long.
COLD_CONNECT_MS = 200.0
#: prompt.repeated_prefix: stable prefix of at least this many tokens, seen before in the run.
REPEATED_PREFIX_TOKENS = 1024
#: latency.network: connecting must not explain more than this share of TTFB
CONNECT_SHARE = 0.5
#: prompt.large (automatic limit): a prompt above this share of its model's context window ...
PROMPT_WINDOW_SHARE = 0.5
#: ... or, for a model whose window is not known, above this many tokens
PROMPT_LARGE_FLOOR = 64_000
#: proxy.saturated: the proxy's own delay on a request (proxy_delay_ms) of at least this many ms ...
PROXY_DELAY_MS = 50.0
#: ... is "CPU-bound" when the proxy process used at least this much of a core meanwhile (else: starved)
PROXY_BUSY_CPU = 0.7
#: ... and the machine was busy (whatever the proxy's own CPU) when its load average per core was at least this
MACHINE_BUSY_LOAD = 1.0
#: cache.miss: the conversation's previous request started at most this many seconds before
#: (prompt caches expire: Anthropic after 5 minutes, OpenAI after 5-10 minutes of inactivity) ...
CACHE_TTL_S = 300.0
#: ... and the prompt has at least this many tokens (the providers' minimum cacheable prefix)
CACHE_MIN_TOKENS = 1024

#: latency baselines (latency.network's "N x the median") compare a request only with prompts of
#: its own size band: the band edges, in prompt tokens (factor 4 apart)
PROMPT_BANDS = (1024, 4096, 16384, 65536)

#: ws.upgrade_refused / ws.fallback: refused WebSocket upgrades from one client within this many seconds add up
WS_FALLBACK_WINDOW_S = 120.0

THRESHOLDS: list[tuple[str, Any, str, str]] = [
    ("WS_FALLBACK_WINDOW_S", WS_FALLBACK_WINDOW_S, "ws.upgrade_refused / ws.fallback: refused WebSocket upgrades of one client (route and key) within this many seconds before a request are added up", "ws.upgrade_refused / ws.fallback：同一客户端（路由与密钥）在此秒数内被拒绝的 WebSocket 升级会被合计"),
    ("BUFFERED_CLUMP_GAP_MS", BUFFERED_CLUMP_GAP_MS, "stream.buffered: token events closer than this (ms) may belong to one release", "stream.buffered：间隔小于此值（毫秒）的 token 事件可能属于同一次放行"),
    ("BUFFERED_CLUMP_EVENTS", BUFFERED_CLUMP_EVENTS, "stream.buffered: a release has at least this many events", "stream.buffered：一次放行至少包含这么多事件"),
    ("BUFFERED_RELEASE_GAP_MS", BUFFERED_RELEASE_GAP_MS, "stream.buffered: ... at most this far apart on average (ms, its largest gap left out): faster than any model streams", "stream.buffered：……平均间隔不超过此值（毫秒，去掉最大的一个间隔）：快于任何模型的输出速度"),
    ("BUFFERED_HOLD_MS", BUFFERED_HOLD_MS, "stream.buffered: a release follows a silence of at least this long (ms)", "stream.buffered：放行之前至少静默了这么久（毫秒）"),
    ("BUFFERED_SHARE", BUFFERED_SHARE, "stream.buffered: share of the token events that came in releases", "stream.buffered：通过放行到达的 token 事件所占比例"),
    ("BUFFERED_MIN_EVENTS", BUFFERED_MIN_EVENTS, "stream.buffered: minimum token events", "stream.buffered：最少 token 事件数"),
    ("BUFFERED_WITH_HEADERS_MS", BUFFERED_WITH_HEADERS_MS, "stream.buffered: a first release this close to the headers (ms) came with them", "stream.buffered：首次放行距响应头不超过此值（毫秒）即视为与响应头一起到达"),
    ("BUFFERED_REF_ITL_MS", BUFFERED_REF_ITL_MS, "stream.buffered: not judged on a route whose unbuffered streams have a median ITL p50 below this (ms)", "stream.buffered：若同一路由未缓冲的流 ITL p50 中位数低于此值（毫秒），不做判定"),
    ("NETWORK_TTFB_MS", NETWORK_TTFB_MS, "latency.network: TTFB above this (ms) and at least half of TTFT", "latency.network：TTFB 超过此值（毫秒）且至少占 TTFT 的一半"),
    ("NETWORK_BASELINE_RATIO", NETWORK_BASELINE_RATIO, "latency.network: TTFB above this multiple of the model's recent median", "latency.network：TTFB 超过该模型近期中位数的倍数"),
    ("BASELINE_MIN_SAMPLES", BASELINE_MIN_SAMPLES, "latency.network: earlier warm 200 requests of the same model, route and prompt-size band needed for a median", "latency.network：计算中位数所需的同模型、同路由、同提示词长度区间、已热连接的 200 请求数"),
    ("NETWORK_BASELINE_FLOOR_MS", NETWORK_BASELINE_FLOOR_MS, "latency.network: baseline verdicts only above this TTFB (ms)", "latency.network：基于基线的判定只在 TTFB 超过此值（毫秒）时给出"),
    ("CONNECT_SHARE", CONNECT_SHARE, "latency.network: not when connecting explains more than this share of TTFB", "latency.network：建立连接占 TTFB 超过此比例时不判定"),
    ("HELD_GAP_MS", HELD_GAP_MS, "latency.headers_held: the first visible token came at most this long after the headers (ms) ...", "latency.headers_held：首个可见 token 在响应头之后不超过此时间（毫秒）到达……"),
    ("HELD_GAP_SHARE", HELD_GAP_SHARE, "latency.headers_held: ... or this share of TTFT ...", "latency.headers_held：……或 TTFT 的这个比例……"),
    ("HELD_GAP_MAX_MS", HELD_GAP_MAX_MS, "latency.headers_held: ... but never more than this (ms)", "latency.headers_held：……但不超过此值（毫秒）"),
    ("HELD_MIN_TTFT_MS", HELD_MIN_TTFT_MS, "latency.headers_held: only for a TTFT of at least this long (ms)", "latency.headers_held：只在 TTFT 至少这么长（毫秒）时判定"),
    ("HELD_ROUTE_SAMPLES", HELD_ROUTE_SAMPLES, "latency.headers_held: earlier timed streams of the same route needed (unless the prompt had PREFILL_MIN_TOKENS)", "latency.headers_held：同一路由此前需要的计时流式请求数（提示词达到 PREFILL_MIN_TOKENS 时不需要）"),
    ("HELD_ROUTE_SHARE", HELD_ROUTE_SHARE, "latency.headers_held: share of them whose headers also came with the first token (one with PREFILL_MIN_TOKENS)", "latency.headers_held：其中响应头同样随首 token 到达的比例（其中一个提示词达到 PREFILL_MIN_TOKENS）"),
    ("FIT_MIN_SAMPLES", FIT_MIN_SAMPLES, "the route's TTFT-vs-input fit: earlier streams needed", "路由的 TTFT-输入长度拟合：需要的此前流式请求数"),
    ("FIT_MIN_SPAN", FIT_MIN_SPAN, "the route's TTFT-vs-input fit: largest / smallest prompt at least", "路由的 TTFT-输入长度拟合：最大与最小提示词之比至少为此值"),
    ("PROMPT_BANDS", "1k/4k/16k/64k", "latency baselines: a request is compared only with prompts of its own size band (edges in tokens)", "延迟基线：请求只与同一长度区间的提示词比较（区间边界，单位 token）"),
    ("PREFILL_GAP_MS", PREFILL_GAP_MS, "latency.prefill: gap (TTFT - TTFB) above this (ms) and more than half of TTFT", "latency.prefill：间隔（TTFT - TTFB）超过此值（毫秒）且超过 TTFT 的一半"),
    ("PREFILL_MIN_TOKENS", PREFILL_MIN_TOKENS, "latency.prefill: prompt of at least this many tokens", "latency.prefill：提示词至少这么多 token"),
    ("REASONING_MS", REASONING_MS, "latency.reasoning: reasoning before the first visible token (ms)", "latency.reasoning：首个可见 token 之前的推理时间（毫秒）"),
    ("REASONING_SHARE", REASONING_SHARE, "latency.reasoning: minimum share of TTFT", "latency.reasoning：占 TTFT 的最小比例"),
    ("PROXY_DELAY_MS", PROXY_DELAY_MS, "proxy.saturated: the proxy's own delay on the request (ms)", "proxy.saturated：代理自身对该请求造成的延迟（毫秒）"),
    ("PROXY_BUSY_CPU", PROXY_BUSY_CPU, "proxy.saturated: CPU use of the proxy process (1.0 = one core) from which it counts as CPU-bound", "proxy.saturated：代理进程的 CPU 占用（1.0 = 一个核）达到此值即视为 CPU 瓶颈"),
    ("MACHINE_BUSY_LOAD", MACHINE_BUSY_LOAD, "proxy.saturated: the machine's load average per core from which the machine counts as busy", "proxy.saturated：本机每核负载均值达到此值即视为机器繁忙"),
    ("COLD_CONNECT_MS", COLD_CONNECT_MS, "latency.cold_connection: new connection took at least this long (ms)", "latency.cold_connection：新建连接至少耗时（毫秒）"),
    ("REPEATED_PREFIX_TOKENS", REPEATED_PREFIX_TOKENS, "prompt.repeated_prefix: stable prefix of at least this many tokens", "prompt.repeated_prefix：稳定前缀至少这么多 token"),
    ("CACHE_TTL_S", CACHE_TTL_S, "cache.miss: the conversation's previous request at most this many seconds before", "cache.miss：同一会话的上一个请求在这么多秒之内"),
    ("CACHE_MIN_TOKENS", CACHE_MIN_TOKENS, "cache.miss: prompts of at least this many tokens (the minimum cacheable prefix)", "cache.miss：提示词至少这么多 token（可缓存前缀的最小长度）"),
    ("--stall-ms", 1000, "stream.stall: longest gap between token events above this (ms); proxy option, default shown", "stream.stall：token 事件间最长间隔超过此值（毫秒）；代理选项，此处为默认值"),
    ("PROMPT_WINDOW_SHARE", PROMPT_WINDOW_SHARE, "prompt.large: share of the model's context window (automatic limit)", "prompt.large：占模型上下文窗口的比例（自动阈值）"),
    ("PROMPT_LARGE_FLOOR", PROMPT_LARGE_FLOOR, "prompt.large: limit for models whose context window is not known", "prompt.large：上下文窗口未知的模型所用的阈值"),
    ("ENGINE_QUEUE_MS", ENGINE_QUEUE_MS, "engine.queued: the wait before a local engine began a request (ms) ...", "engine.queued：本地引擎开始处理请求之前的等待（毫秒）……"),
    ("ENGINE_QUEUE_SHARE", ENGINE_QUEUE_SHARE, "engine.queued: ... and at least this share of the time to the first token", "engine.queued：……且至少占首 token 时间的这个比例"),
    ("ENGINE_PAUSE_SHARE", ENGINE_PAUSE_SHARE, "engine.decode_paused: share of the longest silence during which the engine prefilled other requests", "engine.decode_paused：最长静默中引擎在为其他请求做 prefill 的时间比例"),
    ("ENGINE_COLD_LOAD_MS", ENGINE_COLD_LOAD_MS, "engine.cold_load: the engine's model load before the request (ms)", "engine.cold_load：请求之前引擎加载模型的时间（毫秒）"),
    ("ENGINE_TRUNCATED_SHARE", ENGINE_TRUNCATED_SHARE, "engine.prompt_truncated: the engine evaluated at most this share of the prompt firsttoken counted ...", "engine.prompt_truncated：引擎评估的提示词至多为 firsttoken 计数的这个比例……"),
    ("ENGINE_TRUNCATED_MIN_TOKENS", ENGINE_TRUNCATED_MIN_TOKENS, "engine.prompt_truncated: ... and at least this many tokens fewer", "engine.prompt_truncated：……且至少少这么多 token"),
    ("ENGINE_CACHE_HIT_TOKENS", ENGINE_CACHE_HIT_TOKENS, "engine.cache_hit: prompt tokens the engine served from its own cache", "engine.cache_hit：引擎从自身缓存提供的提示词 token 数"),
    ("--warn-prompt-tokens", 0, "prompt.large: a fixed limit instead (0: automatic); proxy option, default shown", "prompt.large：改用固定阈值（0 表示自动）；代理选项，此处为默认值"),
]
