"""The words of the live view: the en/zh label table, and the column specs of its tables.

``label(lang, key)`` falls back to English, then to the key itself. A ``Col`` is one table
column: its key in the row cells, its header, alignment and priority (``live_layout.fit_columns``
drops the least important columns first when the terminal is narrow).
"""

from __future__ import annotations

from dataclasses import dataclass
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
    },
}


def label(lang: str, key: str, **kw: Any) -> str:
    table = LABELS.get(lang) or LABELS["en"]
    text = table.get(key) or LABELS["en"].get(key) or key
    return text.format(**kw) if kw else text


def counted(n: int, key: str, lang: str) -> str:
    """"3 requests", "1 error", "3 个请求"."""
    return f"{n:,} {label(lang, key + '.1') if n == 1 and key + '.1' in LABELS.get(lang, {}) else label(lang, key)}"


def phase_label(phase: str | None, lang: str) -> str:
    return label(lang, f"phase.{phase or 'connecting'}")


# -- columns ----------------------------------------------------------------------------------
@dataclass
class Col:
    key: str
    header: str
    right: bool = False
    prio: int = 5  # higher: kept longer as the width shrinks
    max_w: int | None = None


# -- finished requests ------------------------------------------------------------------------------
def recent_cols(lang: str) -> list[Col]:
    L = lambda k: label(lang, f"col.{k}")  # noqa: E731
    return [
        Col("time", L("time"), prio=9), Col("id", L("id"), prio=1), Col("route", L("route"), prio=3, max_w=14),
        Col("model", L("model"), prio=10, max_w=24), Col("api", L("api"), prio=2), Col("st", L("st"), True, 10),
        Col("prompt", L("prompt"), True, 7), Col("ttfb", L("ttfb"), True, 9), Col("ttft", L("ttft"), True, 10),
        Col("gap", L("gap"), True, 8), Col("tpot", L("tpot"), True, 5), Col("out", L("out"), True, 6),
        Col("total", L("total"), True, 8),
    ]


# -- in flight -----------------------------------------------------------------------------------------
def flight_cols(lang: str) -> list[Col]:
    L = lambda k: label(lang, f"col.{k}")  # noqa: E731
    return [
        Col("elapsed", L("elapsed"), True, 10), Col("id", L("id"), prio=1), Col("route", L("route"), prio=3, max_w=14),
        Col("model", L("model"), prio=8, max_w=24), Col("api", L("api"), prio=2), Col("phase", L("phase"), prio=10),
        Col("ttfb", L("ttfb"), True, 6), Col("prompt", L("prompt"), True, 5), Col("tok", L("tok"), True, 9),
        Col("rate", L("rate"), True, 7),
    ]


# -- per model --------------------------------------------------------------------------------------------
def model_cols(lang: str, trend: bool) -> list[Col]:
    L = lambda k: label(lang, f"col.{k}")  # noqa: E731
    cols = [
        Col("model", L("model"), prio=10, max_w=28), Col("n", L("n"), True, 9), Col("err", L("err"), True, 8),
        Col("ttfb50", L("ttfb50"), True, 8), Col("ttfb95", L("ttfb95"), True, 5),
        Col("ttft50", L("ttft50"), True, 10), Col("ttft95", L("ttft95"), True, 9),
        Col("gap50", L("gap50"), True, 7), Col("gap95", L("gap95"), True, 4),
    ]
    if trend:
        cols.append(Col("trend", L("trend"), prio=6))
    return cols
