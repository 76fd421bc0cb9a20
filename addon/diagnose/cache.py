"""Prompt-cache verdicts: a prompt that repeats the conversation's previous request, yet the
server read nothing from its cache, and where the prompt stopped matching.

The analysis thread compares each request with the previous one of its conversation
(``conversations.divergence``: system prompt, tools, messages, in cache order) and hands the
result to the rules as ``DiagnosisInput.prompt_change`` (with ``route_cached``); nothing of the prompts is stored.
"""

from __future__ import annotations

from typing import Any

from firsttoken.addon.diagnose.context import Ctx, quote
from firsttoken.addon.diagnose.thresholds import CACHE_MIN_TOKENS, CACHE_TTL_S


def rule_cache_miss(rec: Any, c: Ctx) -> None:
    change = c.prompt_change
    if not change or rec.status is None or not 200 <= rec.status < 300 or c.errors():
        return
    if rec.request_kind != "main" or rec.usage_cached_tokens != 0:
        return  # the server read from its cache, or does not report caching at all
    since = change.get("since_previous_s")
    repeat = change.get("previous") and since is not None and since <= CACHE_TTL_S
    tokens = rec.usage_prompt_tokens or rec.prompt_tokens_est or 0
    if not repeat or tokens < CACHE_MIN_TOKENS:
        return
    p = dict(c.common(), prompt_tokens=tokens, since_s=round(since, 1), turn=rec.turn,
             conversation=rec.conversation_id)
    d = change.get("divergence") or {}
    part = d.get("part")
    if c.is_anthropic() and not change.get("cache_marker"):
        c.add("cache.miss", "warn", variant="no_marker", **p)
    elif part == "system":
        c.add("cache.miss", "warn", variant="system_volatile" if d.get("volatile") else "system", **p,
              offset=d["offset"], before=quote(d.get("before"), 60) or "", after=quote(d.get("after"), 60) or "")
    elif part == "tools_order":
        c.add("cache.miss", "warn", variant="tools_order", **p, tools=d.get("tools"))
    elif part == "tools":
        c.add("cache.miss", "warn", variant="tools", **p, added=", ".join(d.get("added") or []) or "-",
              removed=", ".join(d.get("removed") or []) or "-")
    elif part == "tools_changed":
        c.add("cache.miss", "warn", variant="tools_changed", **p, changed=", ".join(d.get("changed") or []) or "-",
              count=d.get("count") or 0)
    elif part == "messages":
        c.add("cache.miss", "warn", variant="messages", **p, index=d["index"] + 1,
              previous_messages=d.get("previous_messages"))
    else:
        # the prompt a cache would see is the same: the upstream did not cache it
        ever = c.route_cached
        c.add("cache.miss", "warn", variant="same_prefix" if ever else "same_prefix_never", **p,
              route=rec.route or "default", model=rec.model or "?", markers=change.get("cache_markers") or 0)


RULES = (rule_cache_miss,)


# ---- The ``cache`` family of the finding catalog, in English and Chinese.

_W = "warn"

ENTRIES: list[tuple[str, str, str, tuple[str, ...], dict[str, tuple[Any, Any, Any, Any]]]] = [
    ("cache.miss", "cache", _W, (), {
        "en": ("Prompt cache missed",
               "A request of at least {CACHE_MIN_TOKENS:,} tokens continues a conversation whose previous request came at most {CACHE_TTL_S:.0f} s before, and the server reported 0 cached tokens; the finding names where the prompt stopped matching the previous request.",
               {"system_volatile": "The server read nothing from its prompt cache ({prompt_tokens:,} tokens, {since_s} s after the previous request): the system prompt differs from the previous request's at character {offset:,} (\"{before}\" became \"{after}\"): a timestamp or an id?",
                "system": "The server read nothing from its prompt cache ({prompt_tokens:,} tokens, {since_s} s after the previous request): the system prompt differs from the previous request's at character {offset:,} (\"{before}\" became \"{after}\").",
                "tools_order": "The server read nothing from its prompt cache ({prompt_tokens:,} tokens): the same {tools} tools were sent in a different order than in the previous request.",
                "tools": "The server read nothing from its prompt cache ({prompt_tokens:,} tokens): the tools changed since the previous request (added: {added}; removed: {removed}).",
                "messages": "The server read nothing from its prompt cache ({prompt_tokens:,} tokens): message {index} of the history differs from the previous request's (which had {previous_messages} messages): the history was edited, not extended.",
                "no_marker": "The server read nothing from its prompt cache ({prompt_tokens:,} tokens, {since_s} s after the previous request of this conversation): the request has no cache_control marker, and Anthropic caches only up to a marked block.",
                "tools_changed": "The server read nothing from its prompt cache ({prompt_tokens:,} tokens): the definition of {count} tool(s) changed since the previous request ({changed}), and tool definitions are part of the cached prefix.",
                "same_prefix": "The upstream did not cache: the prompt repeats the previous request's prefix as a prompt cache sees it ({prompt_tokens:,} tokens, {since_s} s later), yet the server reported 0 cached tokens, though it did report cached tokens on this route ({route}) before.",
                "same_prefix_never": "The upstream did not cache: the prompt repeats the previous request's prefix as a prompt cache sees it ({prompt_tokens:,} tokens, {since_s} s later; {markers} cache_control marker(s)), yet the server reported 0 cached tokens, and it has never reported a cached token on this route ({route})."},
               {"system_volatile": "Keep the start of the prompt byte-identical across calls: move the changing value (date, time, request id) out of the system prompt, to the end of the last user message.",
                "system": "Keep the system prompt identical across the calls of a conversation; put what changes after the stable part (the end of the last message), because a cache matches prefixes only.",
                "tools_order": "Send the tools in a stable order (sort them by name): the tool definitions are part of the cached prefix.",
                "tools": "Keep the tool list fixed for a conversation (enable or disable tools with tool_choice instead): every change to it invalidates the cached prefix.",
                "messages": "Append to the history instead of rewriting it (summaries, trimmed or reformatted old messages invalidate every cached message after them).",
                "no_marker": "Add \"cache_control\": {{\"type\": \"ephemeral\"}} to the last stable block (the system prompt, the last tool, or the last message) so the next request reads the prefix from the cache.",
                "tools_changed": "Keep each tool's definition (description, schema) byte-identical for a conversation: generate it once, not per request.",
                "same_prefix": "Nothing in the request is to blame: the cached entry expired or was evicted, or the request reached another replica; with OpenAI-style providers set prompt_cache_key to keep one conversation on one cache.",
                "same_prefix_never": "Nothing in the request is to blame: this upstream (or a gateway in front of it) does not seem to cache prompts for {model}; ask the provider whether prompt caching is available there, or send this traffic to one that caches."}),
        "zh": ("提示词缓存未命中",
               "请求至少 {CACHE_MIN_TOKENS:,} token，延续了一个上一个请求在 {CACHE_TTL_S:.0f} 秒之内的会话，而服务端报告的缓存 token 为 0；结论会指出提示词从哪里开始与上一个请求不同。",
               {"system_volatile": "服务端没有从提示词缓存读取任何内容（{prompt_tokens:,} token，距上一个请求 {since_s} 秒）：系统提示词从第 {offset:,} 个字符起与上一个请求不同（\"{before}\" 变成了 \"{after}\"）：是时间戳或 ID 吗？",
                "system": "服务端没有从提示词缓存读取任何内容（{prompt_tokens:,} token，距上一个请求 {since_s} 秒）：系统提示词从第 {offset:,} 个字符起与上一个请求不同（\"{before}\" 变成了 \"{after}\"）。",
                "tools_order": "服务端没有从提示词缓存读取任何内容（{prompt_tokens:,} token）：同样的 {tools} 个工具以与上一个请求不同的顺序发送。",
                "tools": "服务端没有从提示词缓存读取任何内容（{prompt_tokens:,} token）：工具列表与上一个请求相比有变化（新增：{added}；移除：{removed}）。",
                "messages": "服务端没有从提示词缓存读取任何内容（{prompt_tokens:,} token）：历史中的第 {index} 条消息与上一个请求（共 {previous_messages} 条消息）不同：历史被改写了，而不是追加。",
                "no_marker": "服务端没有从提示词缓存读取任何内容（{prompt_tokens:,} token，距该会话上一个请求 {since_s} 秒）：请求中没有 cache_control 标记，而 Anthropic 只缓存到带标记的块为止。",
                "tools_changed": "服务端没有从提示词缓存读取任何内容（{prompt_tokens:,} token）：自上一个请求以来有 {count} 个工具的定义变了（{changed}），而工具定义是缓存前缀的一部分。",
                "same_prefix": "上游没有缓存：按提示词缓存的比较方式，提示词重复了上一个请求的前缀（{prompt_tokens:,} token，{since_s} 秒之后），服务端却报告缓存 token 为 0，尽管它以前在这条路由（{route}）上报告过缓存 token。",
                "same_prefix_never": "上游没有缓存：按提示词缓存的比较方式，提示词重复了上一个请求的前缀（{prompt_tokens:,} token，{since_s} 秒之后；{markers} 个 cache_control 标记），服务端却报告缓存 token 为 0，而且它在这条路由（{route}）上从未报告过缓存 token。"},
               {"system_volatile": "让提示词开头在多次调用间逐字节一致：把变化的值（日期、时间、请求 ID）移出系统提示词，放到最后一条用户消息的末尾。",
                "system": "在一个会话的多次调用间保持系统提示词不变；把变化的内容放在稳定部分之后（最后一条消息的末尾），因为缓存只匹配前缀。",
                "tools_order": "以固定顺序发送工具（按名称排序）：工具定义是缓存前缀的一部分。",
                "tools": "在一个会话内保持工具列表不变（用 tool_choice 启用或禁用工具）：工具列表的每次变化都会使缓存前缀失效。",
                "messages": "追加历史而不是改写它（摘要、裁剪或重新格式化旧消息，会使其后所有已缓存的消息失效）。",
                "no_marker": "在最后一个稳定块（系统提示词、最后一个工具或最后一条消息）上加 \"cache_control\": {{\"type\": \"ephemeral\"}}，下一个请求就能从缓存读取前缀。",
                "tools_changed": "在一个会话内让每个工具的定义（描述、schema）逐字节不变：只生成一次，而不是每个请求重新生成。",
                "same_prefix": "问题不在请求本身：缓存条目已过期或被淘汰，或请求到了另一个副本；对 OpenAI 风格的服务商，设置 prompt_cache_key 让同一会话使用同一个缓存。",
                "same_prefix_never": "问题不在请求本身：这个上游（或它前面的网关）似乎不为 {model} 缓存提示词；向服务商确认那里是否提供提示词缓存，或把这些流量发到支持缓存的上游。"}),
    }),
]
