"""The live terminal view, as a pure function: ``render(snapshot, width, lang)``.

Lines never wider than ``width`` and never losing a character; with a ``height`` the in-flight and
finished lists share the room. Also ``scroll_entry`` (a finished request in the scrollback) and
``summary`` (the per-model table at exit), shared by the runner and the tests. See docs/cli.md.
"""

from __future__ import annotations

from typing import Any

from rich.cells import cell_len
from rich.console import Group, RenderableType
from rich.text import Text

from firsttoken.addon.diagnose.thresholds import PROXY_DELAY_MS
from firsttoken.cli import output
from firsttoken.cli.labels import LABELS, counted, label
from firsttoken.cli.live.data import conversation_text
from firsttoken.cli.live.labels import phase_label
from firsttoken.cli.live.layout import (
    GAP,
    SPARK,
    hanging,
    rule_line,
    seconds,
    sparkline,
    uptime,
)
from firsttoken.cli.live.state import LiveSnapshot, ModelStats, is_error
from firsttoken.cli.live.tables import (
    FINDING_MIN,
    INLINE_FINDING_MIN_WIDTH,
    PHASE_STYLE,
    finding_parts,
    flight_lines,
    model_lines,
    recent_entries,
)
from firsttoken.cli.output import SEVERITY_MARK, SEVERITY_STYLE

DEFAULT_RECENT = 8
DEFAULT_IN_FLIGHT = 12
#: with a height, each list keeps at least this many lines when the other one is long
MIN_SHARE = 3


# -- finished requests, one at a time --------------------------------------------------------------
def scroll_entry(r: dict[str, Any], width: int, lang: str = "en") -> Group:
    """One finished request for the scrollback: labelled fields that fit (the id, model, status
    and TTFT always; a long line wraps), then its finding and hint in full."""
    L = lambda k: label(lang, f"col.{k}")  # noqa: E731
    st = output.status_text(r)
    fields: list[tuple[int, Text]] = [
        (10, Text(output.local_time(r.get("started_at")), style="dim")),
        (100, Text((r.get("id") or "")[:8], style="dim")),
        (3, Text(r.get("route") or "–")),
        (100, Text(r.get("model") or "–")),
        (1, Text(output.api_name(r.get("api")))),
        (100, Text(st, style="red" if is_error(r) else "green")),
        (9, Text(f"{L('ttfb')} {output.ms(r.get('ttfb_ms'))}")),
        (100, Text(f"{L('ttft')} {output.ms(r.get('ttft_ms'))}", style="bold")),
        (8, Text(f"{L('gap')} {output.ms(r.get('gap_ms'))}")),
        (5, Text(f"{L('tpot')} {output.ms(r.get('tpot_ms'))}")),
        (7, Text(f"{L('prompt')} {output.prompt_tokens(r)}")),
        (6, Text(f"{L('out')} {output.output_tokens(r)}")),
        (8, Text(f"{L('total')} {output.ms(r.get('total_ms'))}")),
    ]
    keep = {i for i, (p, _) in enumerate(fields) if p >= 100}
    used = sum(fields[i][1].cell_len for i in keep) + GAP * (len(keep) - 1)
    for i in sorted(range(len(fields)), key=lambda i: -fields[i][0]):
        if i not in keep and used + GAP + fields[i][1].cell_len <= width:
            keep.add(i)
            used += GAP + fields[i][1].cell_len
    line = Text()
    for i, (_, t) in enumerate(fields):
        if i in keep:
            if line.cell_len:
                line.append(" " * GAP)
            line.append_text(t)
    lines = hanging(line, width, 0, 2)
    msg, hint = finding_parts(r, lang)
    for part, indent in ((msg, 2), (hint, 4)):
        if part is not None:
            lines += hanging(part, width, indent)
    return Group(*lines)


# -- the summary ----------------------------------------------------------------------------------------
def summary(models: list[ModelStats], width: int, lang: str = "en") -> Group:
    """The table printed when the proxy stops: per model count, errors, P50/P95 TTFB/TTFT/gap."""
    if not models:
        return Group(Text(label(lang, "no_requests"), style="dim"))
    return Group(rule_line(label(lang, "summary"), width), *model_lines(models, width, lang, trend=False))


# -- the header ----------------------------------------------------------------------------------------------
def header_lines(s: LiveSnapshot, width: int, lang: str) -> list[Text]:
    """Counters, the routes, the base URL(s) to paste and the database: wrapped, never cut."""
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
    load = s.load or {}
    if load.get("lag_max_ms") is not None:  # the proxy's own load: worst loop lag of the last seconds
        lag, cpu = load["lag_max_ms"], load.get("cpu") or 0.0
        top.append(" · ")
        top.append(L("proxy_load", lag=f"{lag:.0f}", cpu=f"{cpu * 100:.0f}"),
                   style="yellow" if lag >= PROXY_DELAY_MS else "dim")
    lines = hanging(top, width, 0, 2)
    for where, upstream in s.routes:
        t = Text()
        t.append(where, style="bold")
        t.append("  →  ", style="dim")
        t.append(upstream)
        lines += hanging(t, width, 2, 4)
    if s.base_url:
        prefix = f"{L('base')}: "
        parts = [p for p in s.base_url.split("  ") if p]
        if cell_len(prefix) + cell_len(s.base_url) + 2 <= width:
            lines.append(Text("  ").append(prefix, style="dim").append(s.base_url))
        else:  # one variable per line, each wrapped under the first
            for i, part in enumerate(parts):
                lead = prefix if i == 0 else " " * cell_len(prefix)
                lines += hanging(Text().append(lead, style="dim").append(part), width, 2, 4 + cell_len(prefix))
    if s.db_path:
        t = Text().append(f"{L('db')}: ", style="dim").append(s.db_path)
        if s.attached:
            t.append(f"  ({L('read_only')})", style="dim")
        lines += hanging(t, width, 2, 4)
    src = s.source or {}
    if src.get("kind") in ("proxy", "db"):  # an attached view says where it reads
        t = Text().append(f"{L('src')}: ", style="dim")
        if src["kind"] == "proxy":
            t.append(L("src.proxy", url=src.get("url") or "?", pid=src.get("pid") or "?"), style="green")
        else:
            t.append(L("src.db"))
        lines += hanging(t, width, 2, 4)
    if s.note:
        lines += hanging(Text(s.note, style="yellow"), width, 2, 4)
    if s.conversation:
        lines += hanging(Text(conversation_text(s.conversation, lang), style="dim"), width, 2, 4)
    return lines


# -- the whole view --------------------------------------------------------------------------------------------
def _share(need_a: int, need_b: int, room: int) -> tuple[int, int]:
    """Split ``room`` lines between two lists that need ``need_a`` and ``need_b``: each gets what
    it needs when it can, and never less than a fair half (or ``MIN_SHARE``) of what is there."""
    if need_a + need_b <= room:
        return need_a, need_b
    half = max(MIN_SHARE, room // 2)
    if need_a <= half:
        return need_a, max(0, room - need_a)
    if need_b <= half:
        return max(0, room - need_b), need_b
    return room - room // 2, room // 2


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
    routes = len(s.routes) > 1  # a route column only when there is a choice of routes
    head = header_lines(s, width, lang)

    flights = s.in_flight[:max_in_flight] if max_in_flight > 0 else []
    if s.in_flight:
        flight_title = rule_line(f"{label(lang, 'sec_in_flight')} ({len(s.in_flight)})", width)
        flight_head, *flight_rows = flight_lines(flights, width, lang, routes)
    else:
        flight_title = rule_line(label(lang, "sec_in_flight"), width)
        flight_head, flight_rows = [Text(label(lang, "none_in_flight"), style="dim")], []

    rows = s.recent[-max_recent:] if max_recent > 0 else []
    recent_title = rule_line(label(lang, "sec_recent"), width)
    if rows:
        recent_head, entries = recent_entries(rows, width, lang, routes=routes)
        recent_head = [recent_head]
    else:
        recent_head, entries = [Text(label(lang, "none_recent"), style="dim")], []

    models = [rule_line(label(lang, "sec_models", n=s.window), width)]
    if s.models:
        models += model_lines(s.models, width, lang)
    else:
        models.append(Text(label(lang, "none_models"), style="dim"))

    def more(shown: int) -> list[Text]:
        n = len(s.in_flight) - shown
        return [Text(label(lang, "more", n=n), style="dim")] if n > 0 else []

    if height is not None:
        # The lists share what the header and the titles leave (the per-model table takes
        # at most a third of it when room is short), so neither becomes an empty header.
        fixed = len(head) + 2 + len(flight_head) + len(recent_head)
        need_f = sum(len(r) for r in flight_rows) + len(more(len(flight_rows)))
        need_r = sum(len(e) for e in entries)
        if need_f + need_r + len(models) > height - fixed:  # percentiles: at most a third
            models = models[: max(1, (height - fixed) // 3)]
        room = max(0, height - fixed - len(models))
        got_f, got_r = _share(need_f, need_r, room)
        while flight_rows and sum(len(r) for r in flight_rows) + len(more(len(flight_rows))) > got_f:
            flight_rows.pop()
        while entries and sum(len(e) for e in entries) > got_r:
            if len(entries) == 1:  # the newest finished request, as much of it as fits (its row first)
                entries[0] = entries[0][: max(1, got_r)]
                break
            entries.pop(0)
    out: list[Text] = head + [flight_title] + flight_head + [ln for r in flight_rows for ln in r] + more(len(flight_rows))
    out += [recent_title] + recent_head + [ln for e in entries for ln in e] + models
    if height is not None:
        out = out[: max(1, height)]
    return Group(*out)


__all__ = [
    "DEFAULT_IN_FLIGHT", "DEFAULT_RECENT", "FINDING_MIN", "GAP", "INLINE_FINDING_MIN_WIDTH", "LABELS", "PHASE_STYLE",
    "SEVERITY_MARK", "SEVERITY_STYLE", "SPARK", "counted", "finding_parts", "header_lines", "label",
    "model_lines", "phase_label", "render", "scroll_entry", "seconds", "sparkline", "summary", "uptime",
]
