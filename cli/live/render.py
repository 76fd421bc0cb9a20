"""The live terminal view, as a pure function: ``render(snapshot, width, lang)``.

Everything is laid out by hand into lines that are never wider than ``width``: columns are
measured, the least useful ones are dropped until the rest fit, and only the finding text
wraps (inside its own column when there is room, else on indented lines under its row).
Colours are styles only; with NO_COLOR (or a console without colour) the text is the same.

Also here, because the runner and the tests share them: ``scroll_entry`` (one finished
request as printed into the scrollback above the live area) and ``summary`` (the per-model
table printed when the proxy stops).

The parts live next door: ``live_labels`` (the en/zh labels and column specs),
``live_layout`` (formatters, fitting and wrapping), ``live_tables`` (the three tables).
Their names are re-exported here, so ``from .live import ...`` keeps working.
"""

from __future__ import annotations

from typing import Any

from rich.cells import cell_len
from rich.console import Group, RenderableType
from rich.text import Text

from firsttoken.cli import output
from firsttoken.cli.live.labels import LABELS, Col, counted, label, phase_label
from firsttoken.cli.live.layout import (
    GAP,
    SPARK,
    api_short,
    columns_width,
    elide_middle,
    fit_cell_text,
    fit_columns,
    rule_line,
    seconds,
    sparkline,
    uptime,
    wrap_text,
)
from firsttoken.cli.live.state import LiveSnapshot, ModelStats, is_error
from firsttoken.cli.live.tables import (
    FINDING_MIN,
    INLINE_FINDING_MIN_WIDTH,
    PHASE_STYLE,
    SEVERITY_MARK,
    SEVERITY_STYLE,
    finding_parts,
    flight_lines,
    model_lines,
    recent_entries,
)

DEFAULT_RECENT = 8
DEFAULT_IN_FLIGHT = 12


# -- finished requests, one at a time --------------------------------------------------------------
def scroll_entry(r: dict[str, Any], width: int, lang: str = "en") -> Group:
    """One finished request for the scrollback: labelled fields that fit, then its finding."""
    L = lambda k: label(lang, f"col.{k}")  # noqa: E731
    st = output.status_text(r)
    fields: list[tuple[int, Text]] = [
        (10, Text(output.local_time(r.get("started_at")), style="dim")),
        (2, Text((r.get("id") or "")[:8], style="dim")),
        (3, Text(r.get("route") or "–")),
        (9, fit_cell_text(r.get("model") or "–", 28)),
        (1, Text(api_short(r.get("api")))),
        (10, Text(st, style="red" if is_error(r) else "green")),
        (9, Text(f"{L('ttfb')} {output.ms(r.get('ttfb_ms'))}")),
        (10, Text(f"{L('ttft')} {output.ms(r.get('ttft_ms'))}", style="bold")),
        (8, Text(f"{L('gap')} {output.ms(r.get('gap_ms'))}")),
        (5, Text(f"{L('tpot')} {output.ms(r.get('tpot_ms'))}")),
        (7, Text(f"{L('prompt')} {output.prompt_tokens(r)}")),
        (6, Text(f"{L('out')} {output.output_tokens(r)}")),
        (8, Text(f"{L('total')} {output.ms(r.get('total_ms'))}")),
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
    lines = [fit_cell_text(line, width)]
    msg, hint = finding_parts(r, lang)
    for part, indent in ((msg, 2), (hint, 4)):
        if part is not None:
            for w in wrap_text(part, width - indent):
                t = Text(" " * indent, no_wrap=True)
                t.append_text(w)
                lines.append(fit_cell_text(t, width))
    return Group(*lines)


# -- the summary ----------------------------------------------------------------------------------------
def summary(models: list[ModelStats], width: int, lang: str = "en") -> Group:
    """The table printed when the proxy stops: per model count, errors, P50/P95 TTFB/TTFT/gap."""
    if not models:
        return Group(Text(label(lang, "no_requests"), style="dim"))
    return Group(rule_line(label(lang, "summary"), width), *model_lines(models, width, lang, trend=False))


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
        t.append(elide_middle(s.db_path, room))
        t.append(suffix, style="dim")
        lines.append(t)
    if s.note:
        lines.append(Text(f"  {s.note}", style="yellow"))
    if s.conversation:
        lines.append(Text(f"  {s.conversation}", style="dim"))
    return [fit_cell_text(ln, width) for ln in lines]


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
            return [rule_line(label(lang, "sec_in_flight"), width), Text(label(lang, "none_in_flight"), style="dim")]
        fl = s.in_flight[:k]
        lines = [rule_line(f"{label(lang, 'sec_in_flight')} ({len(s.in_flight)})", width)] + flight_lines(fl, width, lang)
        if len(s.in_flight) > len(fl):
            lines.append(Text(label(lang, "more", n=len(s.in_flight) - len(fl)), style="dim"))
        return lines

    k_flight = max_in_flight
    flight = flight_section(k_flight)

    rows = s.recent[-max_recent:] if max_recent > 0 else []
    recent_title = rule_line(label(lang, "sec_recent"), width)
    if rows:
        recent_head, entries = recent_entries(rows, width, lang)
    else:
        recent_head, entries = Text(label(lang, "none_recent"), style="dim"), []

    models = [rule_line(label(lang, "sec_models", n=s.window), width)]
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


__all__ = [
    "DEFAULT_IN_FLIGHT", "DEFAULT_RECENT", "FINDING_MIN", "GAP", "INLINE_FINDING_MIN_WIDTH", "LABELS", "PHASE_STYLE",
    "SEVERITY_MARK", "SEVERITY_STYLE", "SPARK", "Col", "api_short", "columns_width", "counted", "finding_parts",
    "fit_columns", "header_lines", "label", "model_lines", "phase_label", "render", "scroll_entry", "seconds",
    "sparkline", "summary", "uptime",
]
