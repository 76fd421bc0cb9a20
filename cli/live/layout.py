"""Laying text out for the live view: small formatters, and lines that never exceed a width.

Columns are measured and the least useful ones dropped until the rest fit (``fit_columns``);
cells are truncated with an ellipsis; only free text wraps (``wrap_text``), optionally capped.
"""

from __future__ import annotations

import io

from rich.cells import cell_len
from rich.console import Console
from rich.text import Text

from firsttoken.cli.live.labels import Col

SPARK = "▁▂▃▄▅▆▇█"
GAP = 2

_WRAP_CONSOLE = Console(file=io.StringIO(), width=400, color_system=None, force_terminal=False)


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


def fit_cell_text(text: str | Text, width: int, style: str = "") -> Text:
    t = text.copy() if isinstance(text, Text) else Text(text, style=style)
    t.no_wrap = True
    t.overflow = "ellipsis"
    if width <= 0:
        return Text("")
    if t.cell_len > width:
        t.truncate(width, overflow="ellipsis")
    return t


def elide_middle(s: str, width: int) -> str:
    if cell_len(s) <= width or width < 5:
        return s
    keep = width - 1
    head, tail = keep // 3, keep - keep // 3
    return s[:head] + "…" + s[len(s) - tail:]


def wrap_text(text: Text, width: int, max_lines: int | None = None) -> list[Text]:
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


def rule_line(title: str, width: int) -> Text:
    head = f"── {title} "
    t = Text()
    t.append(head, style="bold")
    fill = width - cell_len(head)
    if fill > 0:
        t.append("─" * fill, style="dim")
    return fit_cell_text(t, width)


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


def cells_line(chosen: list[tuple[Col, int]], cells: dict[str, Text], bold: bool = False) -> Text:
    out = Text(no_wrap=True, overflow="ellipsis", style="bold" if bold else "")
    for i, (c, w) in enumerate(chosen):
        if i:
            out.append(" " * GAP)
        cell = fit_cell_text(cells.get(c.key) or Text(""), w)
        pad = " " * (w - cell.cell_len)
        if c.right:
            out.append(pad)
            out.append_text(cell)
        else:
            out.append_text(cell)
            out.append(pad)
    out.rstrip()
    return out


def header_cells(cols: list[Col]) -> dict[str, Text]:
    return {c.key: Text(c.header) for c in cols}
