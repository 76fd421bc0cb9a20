"""The words of every reading view (`logs`, `show`, `stats`, the live view, `sessions`): one
table of UI labels per language, so a view is in one language.

``label(lang, key)`` falls back to English, then to the key itself. The language itself is
decided once, by ``addon.diagnose.lang.resolve`` (``cli.options.resolve_lang``); findings are
rendered in it by ``output.localize``. Keys: ``col.*`` table columns, ``phase.*`` the live
view's request phases, ``show.*`` the one-request view, ``stats.*`` the percentile tables,
``sev.*`` severities, ``conv.*`` the conversation line; the rest the live view's header.
"""

from __future__ import annotations

from typing import Any

LABELS: dict[str, dict[str, str]] = {
    "en": {
        "up": "up", "attached": "attached", "requests": "requests", "errors": "errors", "in_flight": "in flight",
        "requests.1": "request", "errors.1": "error", "proxy_load": "proxy: lag {lag} ms, CPU {cpu}%",
        "since_attach": "since then", "db": "db", "read_only": "read-only", "base": "base URL",
        "sec_in_flight": "in flight", "sec_recent": "recently finished", "sec_models": "per model · last {n} finished",
        "none_in_flight": "nothing in flight", "none_recent": "no finished requests yet",
        "none_models": "no finished requests yet", "more": "… {n} more",
        "ok": "ok", "more_findings": "(+{n} more)", "summary": "per model · this session",
        "no_requests": "no requests were recorded",
        "phase.connecting": "connecting", "phase.waiting_headers": "waiting for headers",
        "phase.prefill": "waiting for first token (prefill)", "phase.waiting_body": "waiting for the body",
        "phase.streaming": "streaming", "phase.done": "done",
        "col.time": "time", "col.id": "id", "col.route": "route", "col.model": "model", "col.api": "api",
        "col.st": "st", "col.prompt": "prompt", "col.ttfb": "TTFB", "col.ttft": "TTFT", "col.gap": "gap",
        "col.tpot": "TPOT", "col.out": "out", "col.total": "total", "col.finding": "finding",
        "col.elapsed": "elapsed", "col.phase": "phase", "col.tok": "tokens", "col.rate": "tok/s",
        "col.n": "n", "col.err": "err", "col.trend": "TTFT trend",
        "col.ttfb50": "TTFB p50", "col.ttfb95": "TTFB p95", "col.ttft50": "TTFT p50", "col.ttft95": "TTFT p95",
        "col.gap50": "gap p50", "col.gap95": "gap p95",
        "col.by.model": "model", "col.by.route": "route", "col.by.api": "api", "col.by.bucket": "bucket",
        "col.by.hour": "hour", "col.by.experiment": "experiment", "col.metric": "metric",
        "col.requests": "requests", "col.errors": "errors", "col.codes": "top error codes", "col.cold": "cold",
        "col.fit": "TTFT vs prompt tokens",
        "sev.error": "error", "sev.warn": "warn", "sev.info": "info",
        "no_rows": "No requests recorded yet (with these filters). Point a client at `firsttoken proxy`, or try `firsttoken demo`.",
        "conv.line": "conversation {cid} · turn {turn} · {requests}", "conv.requests": "{n} requests",
        "conv.requests.1": "{n} request", "conv.side": " ({n} side)", "conv.cached": " · cached {pct}%",
        "show.phase": "phase", "show.starts": "starts at", "show.took": "took", "show.connect": "connect",
        "show.reused": "reused connection", "show.ttfb": "TTFB (headers)", "show.prefill": "prefill",
        "show.reasoning": "reasoning", "show.gap": "gap (prefill)", "show.stream": "stream ×{n}", "show.body": "body",
        "show.route": "route", "show.api": "api", "show.model": "model", "show.stream_q": "stream",
        "show.status": "status", "show.content_type": "content-type", "show.experiment": "experiment",
        "show.key": "key", "show.request_id": "request id", "show.no_key": "no API key header",
        "show.key_chars": "{n} chars", "show.yes": "yes", "show.no": "no",
        "show.first_token": "first token incl. reasoning", "show.itl": "ITL p50/p95/max", "show.total": "total",
        "show.tokens": "tokens", "show.prompt": "prompt", "show.output": "output", "show.cached": "cached",
        "show.reasoning_tok": "reasoning", "show.estimate": "estimate", "show.estimate_approx": "estimate ~",
        "show.server": "server usage", "show.tokenizer": "tokenizer", "show.exact": "exact",
        "show.approximate": "approximate", "show.fallback": "{enc} (fallback for {name})", "show.ratio": "server/estimate", "show.calibrated": "calibrated",
        "show.calibrated_v": "~{n} (×{f} learned for this model)", "show.system": "system", "show.tools": "tools",
        "show.last_user": "last user turn", "show.messages": "messages", "show.images": "images",
        "show.prefix": "prefix", "show.prefix_v": "{n} tokens, sent {k}× before",
        "show.request_bytes": "request bytes", "show.response_bytes": "response bytes", "show.finish": "finish",
        "show.stream_done": "stream complete", "show.error": "error", "show.upstream_said": "upstream said",
        "show.request_error": "request", "show.findings": "findings",
        "show.healthy": "no findings: this request looks healthy", "show.in_flight": "still in flight",
        "stats.summary": "Requests by {by}", "stats.percentiles": "Latency percentiles",
        "stats.cold_excluded": " (cold connections excluded)", "stats.none": "(none)",
        "stats.fit": "{a} ms + {b} ms per 1k tokens", "stats.fit_n": "R² {r2}, n={n}",
        "stats.uncached": "vs uncached tokens: {a} ms + {b} ms per 1k, R² {r2} ({n} cache hits)",
        "stats.follows_uncached": "→ TTFT follows uncached input tokens better",
        "stats.follows_all": "→ TTFT follows all input tokens better",
        "stats.note": "Percentiles: linear interpolation between closest ranks (as numpy). gap = TTFT - TTFB. ",
        "stats.note_cold": "Every request counts; connect is what the cold ones (a new TCP/TLS connection, included in their TTFB) paid for it; --exclude-cold leaves them out.",
        "stats.note_warm": "Cold connections (new TCP/TLS connection) are left out of latency figures; --include-cold keeps them.",
        "stats.plot": "TTFT = TTFB (blue: network, gateway) + gap (magenta: prefill, model)",
        "metric.connect": "connect", "metric.ttfb": "TTFB", "metric.ttft": "TTFT", "metric.gap": "gap",
        "metric.tpot": "TPOT", "metric.itl": "ITL p50", "metric.total": "total",
        "stats.join": "; ", "fitnote.no_points": "no requests with both a TTFT and a prompt size",
        "fitnote.same_size": "all {n} prompts have the same size (~{mean} tokens): no slope; vary the input (firsttoken sweep --inputs ...)",
        "fitnote.few_points": "only {n} points (< {min}): the fit is not reliable",
        "fitnote.narrow": "prompt sizes barely vary (~{mean} ± {sd} tokens): the slope is not reliable; vary the input (firsttoken sweep --inputs ...)",
    },
    "zh": {
        "up": "已运行", "attached": "已连接", "requests": "个请求", "errors": "个错误", "in_flight": "个进行中",
        "proxy_load": "代理：延迟 {lag} 毫秒，CPU {cpu}%",
        "since_attach": "此后", "db": "数据库", "read_only": "只读", "base": "客户端 base URL",
        "sec_in_flight": "进行中", "sec_recent": "最近完成", "sec_models": "按模型 · 最近 {n} 个",
        "none_in_flight": "没有进行中的请求", "none_recent": "还没有完成的请求",
        "none_models": "还没有完成的请求", "more": "… 还有 {n} 个",
        "ok": "正常", "more_findings": "（另有 {n} 条）", "summary": "按模型 · 本次运行",
        "no_requests": "没有记录到请求",
        "phase.connecting": "连接中", "phase.waiting_headers": "等待响应头",
        "phase.prefill": "等待首个 token（预填充）", "phase.waiting_body": "等待响应体",
        "phase.streaming": "流式输出中", "phase.done": "完成",
        "col.time": "时间", "col.id": "id", "col.route": "路由", "col.model": "模型", "col.api": "接口",
        "col.st": "状态", "col.prompt": "输入", "col.ttfb": "TTFB", "col.ttft": "TTFT", "col.gap": "gap",
        "col.tpot": "TPOT", "col.out": "输出", "col.total": "总耗时", "col.finding": "诊断",
        "col.elapsed": "已用时", "col.phase": "阶段", "col.tok": "token", "col.rate": "token/秒",
        "col.n": "次数", "col.err": "错误", "col.trend": "TTFT 走势",
        "col.ttfb50": "TTFB p50", "col.ttfb95": "TTFB p95", "col.ttft50": "TTFT p50", "col.ttft95": "TTFT p95",
        "col.gap50": "gap p50", "col.gap95": "gap p95",
        "col.by.model": "模型", "col.by.route": "路由", "col.by.api": "接口", "col.by.bucket": "输入规模",
        "col.by.hour": "小时", "col.by.experiment": "实验", "col.metric": "指标",
        "col.requests": "请求数", "col.errors": "错误", "col.codes": "主要错误代码", "col.cold": "冷连接",
        "col.fit": "TTFT 与输入 token",
        "sev.error": "错误", "sev.warn": "警告", "sev.info": "提示",
        "no_rows": "还没有记录到请求（在这些筛选条件下）。把客户端指向 `firsttoken proxy`，或试试 `firsttoken demo`。",
        "conv.line": "会话 {cid} · 第 {turn} 轮 · {requests}", "conv.requests": "{n} 个请求",
        "conv.side": "（{n} 个辅助请求）", "conv.cached": " · 缓存 {pct}%",
        "show.phase": "阶段", "show.starts": "开始于", "show.took": "耗时", "show.connect": "建立连接",
        "show.reused": "复用连接", "show.ttfb": "TTFB（响应头）", "show.prefill": "预填充",
        "show.reasoning": "推理", "show.gap": "gap（预填充）", "show.stream": "流 ×{n}", "show.body": "响应体",
        "show.route": "路由", "show.api": "接口", "show.model": "模型", "show.stream_q": "流式",
        "show.status": "状态", "show.content_type": "内容类型", "show.experiment": "实验",
        "show.key": "密钥", "show.request_id": "请求 ID", "show.no_key": "没有 API 密钥请求头",
        "show.key_chars": "{n} 个字符", "show.yes": "是", "show.no": "否",
        "show.first_token": "首个 token（含推理）", "show.itl": "ITL p50/p95/最大", "show.total": "总耗时",
        "show.tokens": "token", "show.prompt": "输入", "show.output": "输出", "show.cached": "缓存",
        "show.reasoning_tok": "推理", "show.estimate": "估算", "show.estimate_approx": "估算 ~",
        "show.server": "服务端用量", "show.tokenizer": "分词器", "show.exact": "精确",
        "show.approximate": "近似", "show.fallback": "{enc}（代替 {name}）", "show.ratio": "服务端/估算", "show.calibrated": "校准后",
        "show.calibrated_v": "~{n}（×{f}，按该模型学得）", "show.system": "系统", "show.tools": "工具",
        "show.last_user": "最后一条用户消息", "show.messages": "消息数", "show.images": "图片",
        "show.prefix": "前缀", "show.prefix_v": "{n} token，之前已发送 {k} 次",
        "show.request_bytes": "请求字节", "show.response_bytes": "响应字节", "show.finish": "结束原因",
        "show.stream_done": "流完整", "show.error": "错误", "show.upstream_said": "上游返回",
        "show.request_error": "请求", "show.findings": "诊断",
        "show.healthy": "没有诊断：这个请求看起来正常", "show.in_flight": "仍在进行中",
        "stats.summary": "按{by}统计请求", "stats.percentiles": "延迟百分位",
        "stats.cold_excluded": "（不含冷连接）", "stats.none": "（无）",
        "stats.fit": "{a} 毫秒 + 每 1k token {b} 毫秒", "stats.fit_n": "R² {r2}，n={n}",
        "stats.uncached": "按未缓存 token：{a} 毫秒 + 每 1k token {b} 毫秒，R² {r2}（{n} 次缓存命中）",
        "stats.follows_uncached": "→ TTFT 更贴合未缓存的输入 token",
        "stats.follows_all": "→ TTFT 更贴合全部输入 token",
        "stats.note": "百分位：在最接近的秩之间线性插值（同 numpy）。gap = TTFT - TTFB。",
        "stats.note_cold": "所有请求都计入；建立连接一行是冷连接（新建 TCP/TLS 连接，计入其 TTFB）为此付出的时间；--exclude-cold 排除它们。",
        "stats.note_warm": "延迟数字不含冷连接（新建 TCP/TLS 连接）；--include-cold 保留它们。",
        "stats.plot": "TTFT = TTFB（蓝：网络、网关）+ gap（品红：预填充、模型）",
        "metric.connect": "建立连接", "metric.ttfb": "TTFB", "metric.ttft": "TTFT", "metric.gap": "gap",
        "metric.tpot": "TPOT", "metric.itl": "ITL p50", "metric.total": "总耗时",
        "stats.join": "；", "fitnote.no_points": "没有同时带 TTFT 和输入大小的请求",
        "fitnote.same_size": "{n} 个请求的输入大小都相同（约 {mean} token）：算不出斜率；请改变输入大小（firsttoken sweep --inputs ...）",
        "fitnote.few_points": "只有 {n} 个点（少于 {min}）：拟合不可靠",
        "fitnote.narrow": "输入大小几乎不变（约 {mean} ± {sd} token）：斜率不可靠；请改变输入大小（firsttoken sweep --inputs ...）",
    },
}


def label(lang: str, key: str, **kw: Any) -> str:
    """The ``key`` label in ``lang`` (English, then the key itself, when missing), formatted with ``kw``."""
    table = LABELS.get(lang) or LABELS["en"]
    text = table.get(key) or LABELS["en"].get(key) or key
    return text.format(**kw) if kw else text


def counted(n: int, key: str, lang: str) -> str:
    """"3 requests", "1 error", "3 个请求"."""
    return f"{n:,} {label(lang, key + '.1') if n == 1 and key + '.1' in LABELS.get(lang, {}) else label(lang, key)}"


def severity(sev: str | None, lang: str) -> str:
    """A finding's severity as shown (error / warn / info, 错误 / 警告 / 提示)."""
    return label(lang, f"sev.{sev or 'info'}")
