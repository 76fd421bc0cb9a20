"""The words of the live view: the en/zh label table, and the column specs of its tables.

``label(lang, key)`` falls back to English, then to the key itself. The column specs
of its tables are ``output.Col`` lists (the one column-fitting scheme) with a nominal row each.
"""

from __future__ import annotations

from typing import Any

from firsttoken.cli.output import REQUIRED, Col

LABELS: dict[str, dict[str, str]] = {
    "en": {
        "up": "up", "attached": "attached", "requests": "requests", "errors": "errors", "in_flight": "in flight",
        "requests.1": "request", "errors.1": "error", "proxy_load": "proxy: lag {lag} ms, CPU {cpu}%",
        "since_attach": "since then", "db": "db", "read_only": "read-only", "base": "base URL",
        "sec_in_flight": "in flight", "sec_recent": "recently finished", "sec_models": "per model · last {n} finished · percentiles of streamed requests",
        "none_in_flight": "nothing in flight", "none_recent": "no finished requests yet",
        "none_models": "no finished requests yet", "more": "… {n} more",
        "ok": "ok", "more_findings": "(+{n} more)", "summary": "per model · this session · percentiles of streamed requests",
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
        "sec_in_flight": "进行中", "sec_recent": "最近完成", "sec_models": "按模型 · 最近 {n} 个 · 百分位数仅含流式请求",
        "none_in_flight": "没有进行中的请求", "none_recent": "还没有完成的请求",
        "none_models": "还没有完成的请求", "more": "… 还有 {n} 个",
        "ok": "正常", "more_findings": "（另有 {n} 条）", "summary": "按模型 · 本次运行 · 百分位数仅含流式请求",
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


PHASES = ("connecting", "waiting_headers", "prefill", "waiting_body", "streaming")


def phase_label(phase: str | None, lang: str) -> str:
    return label(lang, f"phase.{phase or 'connecting'}")


# -- columns ----------------------------------------------------------------------------------
# Each table: its columns (``output.Col``: priority, REQUIRED ones always shown) and a nominal
# row (a typical widest cell) from which ``layout.stable_columns`` picks the columns for a width.
R = REQUIRED
MS = "1234ms"  # output.ms() is at most 6 cells below 100 s


def recent_cols(lang: str, routes: bool = False) -> tuple[list[Col], dict[str, str]]:
    """Finished requests: the id always (for `firsttoken show ID`), the route only with several routes."""
    L = lambda k: label(lang, f"col.{k}")  # noqa: E731
    cols = [
        Col("time", L("time"), 70), Col("id", L("id"), R), Col("route", L("route"), 75),
        Col("model", L("model"), R), Col("api", L("api"), 20), Col("st", L("st"), R, True),
        Col("prompt", L("prompt"), 55, True), Col("ttfb", L("ttfb"), 80, True), Col("ttft", L("ttft"), R, True),
        Col("gap", L("gap"), 65, True), Col("tpot", L("tpot"), 40, True), Col("out", L("out"), 45, True),
        Col("total", L("total"), 60, True),
    ]
    if not routes:
        cols = [c for c in cols if c.key != "route"]
    nominal = dict(time="00:00:00", id="12345678", route="route-name", model="m" * 20, api="ant.messages",
                   st="aborted", prompt="~12,345", ttfb=MS, ttft=MS, gap=MS, tpot=MS, out="~1,234", total=MS)
    return cols, nominal


def flight_cols(lang: str, routes: bool = False) -> tuple[list[Col], dict[str, str]]:
    L = lambda k: label(lang, f"col.{k}")  # noqa: E731
    cols = [
        Col("elapsed", L("elapsed"), R, True), Col("id", L("id"), 50), Col("route", L("route"), 75),
        Col("model", L("model"), R), Col("api", L("api"), 20), Col("phase", L("phase"), R),
        Col("ttfb", L("ttfb"), 60, True), Col("prompt", L("prompt"), 45, True), Col("tok", L("tok"), 90, True),
        Col("rate", L("rate"), 70, True),
    ]
    if not routes:
        cols = [c for c in cols if c.key != "route"]
    phase = max((label(lang, f"phase.{p}") for p in PHASES), key=len)
    nominal = dict(elapsed="59m59s", id="12345678", route="route-name", model="m" * 20, api="ant.messages",
                   phase=phase, ttfb=MS, prompt="~12,345", tok="12,345", rate="123.4")
    return cols, nominal


def model_cols(lang: str, trend: bool) -> tuple[list[Col], dict[str, str]]:
    L = lambda k: label(lang, f"col.{k}")  # noqa: E731
    cols = [
        Col("model", L("model"), R), Col("n", L("n"), 90, True), Col("err", L("err"), 80, True),
        Col("ttfb50", L("ttfb50"), 75, True), Col("ttfb95", L("ttfb95"), 50, True),
        Col("ttft50", L("ttft50"), R, True), Col("ttft95", L("ttft95"), 85, True),
        Col("gap50", L("gap50"), 70, True), Col("gap95", L("gap95"), 40, True),
    ]
    if trend:
        cols.append(Col("trend", L("trend"), 60))
    nominal = dict(model="m" * 20, n="1,234", err="1,234", ttfb50=MS, ttfb95=MS, ttft50=MS, ttft95=MS,
                   gap50=MS, gap95=MS, trend="▁" * 16)
    return cols, nominal
