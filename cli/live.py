"""The live terminal view, as a pure function: ``render(snapshot, width, lang)``.

Everything is laid out by hand into lines that are never wider than ``width``: columns are
measured, the least useful ones are dropped until the rest fit, and only the finding text
wraps (inside its own column when there is room, else on indented lines under its row).
Colours are styles only; with NO_COLOR (or a console without colour) the text is the same.

Also here, because the runner and the tests share them: ``scroll_entry`` (one finished
request as printed into the scrollback above the live area) and ``summary`` (the per-model
table printed when the proxy stops).
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Any

from rich.cells import cell_len
from rich.console import Console, Group, RenderableType
from rich.text import Text

from . import fmt
from .live_state import FlightView, LiveSnapshot, ModelStats, is_error

LABELS: dict[str, dict[str, str]] = {
    "en": {
        "up": "up", "attached": "attached", "requests": "requests", "errors": "errors", "in_flight": "in flight",
        "requests.1": "request", "errors.1": "error",
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

SEVERITY_STYLE = {"error": "bold red", "warn": "yellow", "info": "cyan"}
SEVERITY_MARK = {"error": "✖", "warn": "▲", "info": "•"}
PHASE_STYLE = {"connecting": "dim", "waiting_headers": "blue", "prefill": "cyan", "waiting_body": "cyan", "streaming": "green"}
SPARK = "▁▂▃▄▅▆▇█"
GAP = 2
#: below this width the finding goes on its own lines under the row
INLINE_FINDING_MIN_WIDTH = 140
FINDING_MIN = 48
DEFAULT_RECENT = 8
DEFAULT_IN_FLIGHT = 12

_WRAP_CONSOLE = Console(file=io.StringIO(), width=400, color_system=None, force_terminal=False)


def label(lang: str, key: str, **kw: Any) -> str:
    table = LABELS.get(lang) or LABELS["en"]
    text = table.get(key) or LABELS["en"].get(key) or key
    return text.format(**kw) if kw else text


def counted(n: int, key: str, lang: str) -> str:
    """"3 requests", "1 error", "3 个请求"."""
    return f"{n:,} {label(lang, key + '.1') if n == 1 and key + '.1' in LABELS.get(lang, {}) else label(lang, key)}"


def phase_label(phase: str | None, lang: str) -> str:
    return label(lang, f"phase.{phase or 'connecting'}")


# -- small formatters ---------------------------------------------------------------------
def seconds(s: float) -> str:
    if s < 60:
        return f"{s:.1f}s"
    if s < 3600:
        return f"{int(s // 60)}m{int(s % 60):02d}s"
    return f"{int(s // 3600)}h{int(s % 3600 // 60):02d}m"


def uptime(s: float) -> str:
    """Whole seconds: the header then changes at most once a second when nothing else does."""
    s = int(s)
    if s < 60:
        return f"{s}s"
    return seconds(s)


def api_short(api: str | None) -> str:
    return (api or "other").replace("openai.", "oai.").replace("anthropic.", "ant.")


def sparkline(values: list[float], width: int = 16) -> str:
    vals = [v for v in values if v is not None][-width:]
    if not vals:
        return ""
    lo, hi = min(vals), max(vals)
    if hi - lo < 1e-9:
        return SPARK[3] * len(vals)
    return "".join(SPARK[min(7, int((v - lo) / (hi - lo) * 7 + 0.5))] for v in vals)


def _fit_text(text: str | Text, width: int, style: str = "") -> Text:
    t = text.copy() if isinstance(text, Text) else Text(text, style=style)
    t.no_wrap = True
    t.overflow = "ellipsis"
    if width <= 0:
        return Text("")
    if t.cell_len > width:
        t.truncate(width, overflow="ellipsis")
    return t


def _elide_middle(s: str, width: int) -> str:
    if cell_len(s) <= width or width < 5:
        return s
    keep = width - 1
    head, tail = keep // 3, keep - keep // 3
    return s[:head] + "…" + s[len(s) - tail:]


def _wrap(text: Text, width: int, max_lines: int | None = None) -> list[Text]:
    width = max(1, width)
    lines = list(text.wrap(_WRAP_CONSOLE, width, overflow="fold"))
    if max_lines is not None and len(lines) > max_lines:
        lines = lines[:max_lines]
        last = lines[-1]
        if last.cell_len >= width:
            last.truncate(width - 1, overflow="crop")
        last.append("…")
    for ln in lines:
        ln.rstrip()
        ln.no_wrap = True
    return lines


def _rule(title: str, width: int) -> Text:
    head = f"── {title} "
    t = Text()
    t.append(head, style="bold")
    fill = width - cell_len(head)
    if fill > 0:
        t.append("─" * fill, style="dim")
    return _fit_text(t, width)


# -- columns ----------------------------------------------------------------------------------
@dataclass
class Col:
    key: str
    header: str
    right: bool = False
    prio: int = 5  # higher: kept longer as the width shrinks
    max_w: int | None = None


def fit_columns(cols: list[Col], rows: list[dict[str, Text]], width: int) -> list[tuple[Col, int]]:
    """The columns that fit in ``width`` (most important first), in their original order."""
    nat = {}
    for c in cols:
        w = max([cell_len(c.header)] + [r[c.key].cell_len for r in rows if c.key in r])
        nat[c.key] = min(w, c.max_w) if c.max_w else w
    chosen: set[str] = set()
    used = 0
    for c in sorted(cols, key=lambda c: -c.prio):  # sorted() is stable: ties keep their order
        need = nat[c.key] + (GAP if chosen else 0)
        if used + need <= width:
            chosen.add(c.key)
            used += need
    if not chosen and cols:  # not even the most important column fits: truncate it
        top = max(cols, key=lambda c: c.prio)
        return [(top, max(1, width))]
    return [(c, nat[c.key]) for c in cols if c.key in chosen]


def columns_width(chosen: list[tuple[Col, int]]) -> int:
    return sum(w for _, w in chosen) + GAP * max(0, len(chosen) - 1)


def _cells_line(chosen: list[tuple[Col, int]], cells: dict[str, Text], bold: bool = False) -> Text:
    out = Text(no_wrap=True, overflow="ellipsis", style="bold" if bold else "")
    for i, (c, w) in enumerate(chosen):
        if i:
            out.append(" " * GAP)
        cell = _fit_text(cells.get(c.key) or Text(""), w)
        pad = " " * (w - cell.cell_len)
        if c.right:
            out.append(pad)
            out.append_text(cell)
        else:
            out.append_text(cell)
            out.append(pad)
    out.rstrip()
    return out


def _header_cells(cols: list[Col]) -> dict[str, Text]:
    return {c.key: Text(c.header) for c in cols}


# -- findings -----------------------------------------------------------------------------------
def finding_parts(r: dict[str, Any], lang: str) -> tuple[Text | None, Text | None]:
    """(message, hint) of the top finding, styled; an error without findings shows the error."""
    findings = r.get("findings") or []
    if findings:
        f = findings[0]
        sev = f.get("severity") or "info"
        msg = Text(f"{SEVERITY_MARK.get(sev, '•')} {f.get('code')}: {f.get('message') or ''}".rstrip(),
                   style=SEVERITY_STYLE.get(sev, ""))
        if len(findings) > 1:
            msg.append(" " + label(lang, "more_findings", n=len(findings) - 1), style="dim")
        hint = Text(f"→ {f['hint']}", style="dim") if f.get("hint") else None
        return msg, hint
    if r.get("error"):
        return Text(f"{SEVERITY_MARK['error']} {r['error']}", style="bold red"), None
    return None, None


# -- finished requests ------------------------------------------------------------------------------
def _recent_cols(lang: str) -> list[Col]:
    L = lambda k: label(lang, f"col.{k}")  # noqa: E731
    return [
        Col("time", L("time"), prio=9), Col("id", L("id"), prio=1), Col("route", L("route"), prio=3, max_w=14),
        Col("model", L("model"), prio=10, max_w=24), Col("api", L("api"), prio=2), Col("st", L("st"), True, 10),
        Col("prompt", L("prompt"), True, 7), Col("ttfb", L("ttfb"), True, 9), Col("ttft", L("ttft"), True, 10),
        Col("gap", L("gap"), True, 8), Col("tpot", L("tpot"), True, 5), Col("out", L("out"), True, 6),
        Col("total", L("total"), True, 8),
    ]


def _recent_cells(r: dict[str, Any]) -> dict[str, Text]:
    st = fmt.status_text(r)
    return {
        "time": Text(fmt.local_time(r.get("started_at"))),
        "id": Text((r.get("id") or "")[:8], style="dim"),
        "route": Text(r.get("route") or "–"),
        "model": Text(r.get("model") or "–"),
        "api": Text(api_short(r.get("api"))),
        "st": Text(st, style="red" if is_error(r) else "green"),
        "prompt": Text(fmt.prompt_tokens(r)),
        "ttfb": Text(fmt.ms(r.get("ttfb_ms"))),
        "ttft": Text(fmt.ms(r.get("ttft_ms")), style="bold"),
        "gap": Text(fmt.ms(r.get("gap_ms"))),
        "tpot": Text(fmt.ms(r.get("tpot_ms"))),
        "out": Text(fmt.output_tokens(r)),
        "total": Text(fmt.ms(r.get("total_ms"))),
    }


def _recent_entries(rows: list[dict[str, Any]], width: int, lang: str, capped: bool = True) -> tuple[Text, list[list[Text]]]:
    """The header line and, per row, its lines (the row, then any finding/hint lines)."""
    cols = _recent_cols(lang)
    cells = [_recent_cells(r) for r in rows]
    inline = width >= INLINE_FINDING_MIN_WIDTH
    chosen = fit_columns(cols, cells, width - (FINDING_MIN + GAP) if inline else width)
    used = columns_width(chosen)
    fw = width - used - GAP
    inline = inline and fw >= FINDING_MIN
    head = _cells_line(chosen, _header_cells(cols), bold=True)
    if inline:
        head.append(" " * (used - head.cell_len + GAP))
        head.append(label(lang, "col.finding"), style="bold")
    entries: list[list[Text]] = []
    cap_msg, cap_hint = (2, 2) if capped else (None, None)
    for r, c in zip(rows, cells):
        line = _cells_line(chosen, c)
        msg, hint = finding_parts(r, lang)
        lines = [line]
        if inline:
            extra = []
            if msg is not None:
                extra += _wrap(msg, fw, cap_msg)
            elif r.get("state", "done") == "done":
                extra.append(Text(label(lang, "ok"), style="green"))
            if hint is not None:
                extra += _wrap(hint, fw, cap_hint)
            for i, e in enumerate(extra):
                if i == 0:
                    line.append(" " * (used - line.cell_len + GAP))
                    line.append_text(e)
                else:
                    cont = Text(" " * (used + GAP), no_wrap=True)
                    cont.append_text(e)
                    lines.append(cont)
        else:
            for part, indent in ((msg, 2), (hint, 4)):
                if part is None:
                    continue
                for w in _wrap(part, width - indent, cap_msg if part is msg else cap_hint):
                    t = Text(" " * indent, no_wrap=True)
                    t.append_text(w)
                    lines.append(t)
        entries.append([_fit_text(ln, width) for ln in lines])
    return _fit_text(head, width), entries


def scroll_entry(r: dict[str, Any], width: int, lang: str = "en") -> Group:
    """One finished request for the scrollback: labelled fields that fit, then its finding."""
    L = lambda k: label(lang, f"col.{k}")  # noqa: E731
    st = fmt.status_text(r)
    fields: list[tuple[int, Text]] = [
        (10, Text(fmt.local_time(r.get("started_at")), style="dim")),
        (2, Text((r.get("id") or "")[:8], style="dim")),
        (3, Text(r.get("route") or "–")),
        (9, _fit_text(r.get("model") or "–", 28)),
        (1, Text(api_short(r.get("api")))),
        (10, Text(st, style="red" if is_error(r) else "green")),
        (9, Text(f"{L('ttfb')} {fmt.ms(r.get('ttfb_ms'))}")),
        (10, Text(f"{L('ttft')} {fmt.ms(r.get('ttft_ms'))}", style="bold")),
        (8, Text(f"{L('gap')} {fmt.ms(r.get('gap_ms'))}")),
        (5, Text(f"{L('tpot')} {fmt.ms(r.get('tpot_ms'))}")),
        (7, Text(f"{L('prompt')} {fmt.prompt_tokens(r)}")),
        (6, Text(f"{L('out')} {fmt.output_tokens(r)}")),
        (8, Text(f"{L('total')} {fmt.ms(r.get('total_ms'))}")),
    ]
    keep: set[int] = set()
    used = 0
    for i in sorted(range(len(fields)), key=lambda i: -fields[i][0]):
        need = fields[i][1].cell_len + (GAP if keep else 0)
        if used + need <= width:
            keep.add(i)
            used += need
    line = Text(no_wrap=True)
    for i, (_, t) in enumerate(fields):
        if i in keep:
            if line.cell_len:
                line.append(" " * GAP)
            line.append_text(t)
    lines = [_fit_text(line, width)]
    msg, hint = finding_parts(r, lang)
    for part, indent in ((msg, 2), (hint, 4)):
        if part is not None:
            for w in _wrap(part, width - indent):
                t = Text(" " * indent, no_wrap=True)
                t.append_text(w)
                lines.append(_fit_text(t, width))
    return Group(*lines)


# -- in flight -----------------------------------------------------------------------------------------
def _flight_cols(lang: str) -> list[Col]:
    L = lambda k: label(lang, f"col.{k}")  # noqa: E731
    return [
        Col("elapsed", L("elapsed"), True, 10), Col("id", L("id"), prio=1), Col("route", L("route"), prio=3, max_w=14),
        Col("model", L("model"), prio=8, max_w=24), Col("api", L("api"), prio=2), Col("phase", L("phase"), prio=10),
        Col("ttfb", L("ttfb"), True, 6), Col("prompt", L("prompt"), True, 5), Col("tok", L("tok"), True, 9),
        Col("rate", L("rate"), True, 7),
    ]


def _flight_cells(f: FlightView, lang: str) -> dict[str, Text]:
    return {
        "elapsed": Text(seconds(f.elapsed_s), style="bold"),
        "id": Text(f.id[:8], style="dim"),
        "route": Text(f.route or "–"),
        "model": Text(f.model or "–"),
        "api": Text(api_short(f.api)),
        "phase": Text(phase_label(f.phase, lang), style=PHASE_STYLE.get(f.phase or "", "")),
        "ttfb": Text(fmt.ms(f.ttfb_ms)),
        "prompt": Text(fmt.num(f.prompt_tokens_est, est=True)),
        "tok": Text("–" if f.tokens is None else f"{f.tokens:,}"),
        "rate": Text("–" if f.tok_per_s is None else f"{f.tok_per_s:.1f}"),
    }


def _flight_lines(flights: list[FlightView], width: int, lang: str) -> list[Text]:
    cols = _flight_cols(lang)
    cells = [_flight_cells(f, lang) for f in flights]
    chosen = fit_columns(cols, cells, width)
    return [_fit_text(_cells_line(chosen, _header_cells(cols), bold=True), width)] + [
        _fit_text(_cells_line(chosen, c), width) for c in cells
    ]


# -- per model --------------------------------------------------------------------------------------------
def _model_cols(lang: str, trend: bool) -> list[Col]:
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


def _model_cells(m: ModelStats) -> dict[str, Text]:
    return {
        "model": Text(m.model), "n": Text(str(m.n)),
        "err": Text(str(m.errors), style="red" if m.errors else ""),
        "ttfb50": Text(fmt.ms(m.ttfb_p50)), "ttfb95": Text(fmt.ms(m.ttfb_p95)),
        "ttft50": Text(fmt.ms(m.ttft_p50), style="bold"), "ttft95": Text(fmt.ms(m.ttft_p95)),
        "gap50": Text(fmt.ms(m.gap_p50)), "gap95": Text(fmt.ms(m.gap_p95)),
        "trend": Text(sparkline(m.ttft_series), style="cyan"),
    }


def model_lines(models: list[ModelStats], width: int, lang: str, trend: bool = True) -> list[Text]:
    cols = _model_cols(lang, trend)
    cells = [_model_cells(m) for m in models]
    chosen = fit_columns(cols, cells, width)
    return [_fit_text(_cells_line(chosen, _header_cells(cols), bold=True), width)] + [
        _fit_text(_cells_line(chosen, c), width) for c in cells
    ]


def summary(models: list[ModelStats], width: int, lang: str = "en") -> Group:
    """The table printed when the proxy stops: per model count, errors, P50/P95 TTFB/TTFT/gap."""
    if not models:
        return Group(Text(label(lang, "no_requests"), style="dim"))
    return Group(_rule(label(lang, "summary"), width), *model_lines(models, width, lang, trend=False))


# -- the header ----------------------------------------------------------------------------------------------
def header_lines(s: LiveSnapshot, width: int, lang: str) -> list[Text]:
    L = lambda k, **kw: label(lang, k, **kw)  # noqa: E731
    top = Text()
    top.append("firsttoken", style="bold magenta")
    if s.attached:
        top.append(f"  {L('attached')} {uptime(s.uptime_s)} · {L('since_attach')}: ")
    else:
        top.append(f"  {L('up')} {uptime(s.uptime_s)} · ")
    top.append(counted(s.requests, "requests", lang))
    top.append(" · ")
    top.append(counted(s.errors, "errors", lang), style="red" if s.errors else "")
    top.append(f" · {len(s.in_flight)} {L('in_flight')}")
    lines = [top]
    for where, upstream in s.routes:
        t = Text("  ")
        t.append(where, style="bold")
        t.append("  →  ", style="dim")
        t.append(upstream)
        lines.append(t)
    if s.base_url:
        prefix = f"  {L('base')}: "
        if cell_len(prefix + s.base_url) <= width:
            lines.append(Text().append(prefix, style="dim").append(s.base_url))
        else:  # one variable per line rather than a truncated URL
            for i, part in enumerate(p for p in s.base_url.split("  ") if p):
                lead = prefix if i == 0 else " " * cell_len(prefix)
                lines.append(Text().append(lead, style="dim").append(part))
    if s.db_path:
        prefix = f"  {L('db')}: "
        suffix = f"  ({L('read_only')})" if s.attached else ""
        room = width - cell_len(prefix) - cell_len(suffix)
        t = Text().append(prefix, style="dim")
        t.append(_elide_middle(s.db_path, room))
        t.append(suffix, style="dim")
        lines.append(t)
    if s.note:
        lines.append(Text(f"  {s.note}", style="yellow"))
    return [_fit_text(ln, width) for ln in lines]


# -- the whole view --------------------------------------------------------------------------------------------
def render(
    snapshot: LiveSnapshot,
    width: int,
    lang: str = "en",
    *,
    height: int | None = None,
    max_recent: int = DEFAULT_RECENT,
    max_in_flight: int = DEFAULT_IN_FLIGHT,
) -> RenderableType:
    """The live area for a terminal ``width`` columns wide (and at most ``height`` lines tall)."""
    width = max(20, int(width))
    s = snapshot
    head = header_lines(s, width, lang)

    def flight_section(k: int) -> list[Text]:
        if not s.in_flight:
            return [_rule(label(lang, "sec_in_flight"), width), Text(label(lang, "none_in_flight"), style="dim")]
        fl = s.in_flight[:k]
        lines = [_rule(f"{label(lang, 'sec_in_flight')} ({len(s.in_flight)})", width)] + _flight_lines(fl, width, lang)
        if len(s.in_flight) > len(fl):
            lines.append(Text(label(lang, "more", n=len(s.in_flight) - len(fl)), style="dim"))
        return lines

    k_flight = max_in_flight
    flight = flight_section(k_flight)

    rows = s.recent[-max_recent:] if max_recent > 0 else []
    recent_title = _rule(label(lang, "sec_recent"), width)
    if rows:
        recent_head, entries = _recent_entries(rows, width, lang)
    else:
        recent_head, entries = Text(label(lang, "none_recent"), style="dim"), []

    models = [_rule(label(lang, "sec_models", n=s.window), width)]
    if s.models:
        models += model_lines(s.models, width, lang)
    else:
        models.append(Text(label(lang, "none_models"), style="dim"))

    if height is not None:
        # Too tall for the terminal: drop the oldest finished rows first, then in-flight rows,
        # then models (the live area must never scroll).
        def total() -> int:
            return len(head) + len(flight) + 2 + sum(len(e) for e in entries) + len(models)

        while entries and total() > height:
            entries.pop(0)
        if rows and not entries:
            recent_head = Text("")
        while k_flight > 1 and len(s.in_flight) > 1 and total() > height:
            k_flight = min(k_flight, len(s.in_flight)) - 1
            flight = flight_section(k_flight)
        while len(models) > 2 and total() > height:
            models.pop()
    out: list[Text] = head + flight + [recent_title, recent_head] + [ln for e in entries for ln in e] + models
    if height is not None:
        out = out[: max(1, height)]
    return Group(*out)
