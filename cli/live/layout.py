"""Laying text out for the live view: small formatters, and lines that never exceed a width.

Tables use ``cli/output.py``'s column fitting; here the columns are chosen from the *width alone*
(``stable_columns`` measures a nominal row, not the data), so frames do not change columns, and
free text wraps with an indent (``wrap_text``). See docs/cli.md (the live view).
"""

from __future__ import annotations

from typing import Any

from rich.cells import cell_len
from rich.text import Text

from firsttoken.cli.output import GAP, Col, fit_columns, table_lines, wrap

SPARK = "▁▂▃▄▅▆▇█"

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


def sparkline(values: list[float], width: int = 16) -> str:
    vals = [v for v in values if v is not None][-width:]
    if not vals:
        return ""
    lo, hi = min(vals), max(vals)
    if hi - lo < 1e-9:
        return SPARK[3] * len(vals)
    return "".join(SPARK[min(7, int((v - lo) / (hi - lo) * 7 + 0.5))] for v in vals)


# -- free text ------------------------------------------------------------------------------
def wrap_text(text: Text, width: int, max_lines: int | None = None) -> list[Text]:
    """``text`` wrapped to ``width`` (``output.wrap``). ``max_lines``: the live area's cap, marked
    with a final "…" (only for findings, whose full text is in the scrollback and `show ID`)."""
    return hanging(text, width, 0, 0, max_lines)


def hanging(text: Text, width: int, indent: int = 0, rest: int | None = None, max_lines: int | None = None) -> list[Text]:
    """``text`` wrapped to ``width``: its first line indented by ``indent``, the others by
    ``rest`` (default: the same). Nothing is cut unless ``max_lines`` caps it (see wrap_text)."""
    lines = wrap(text, max(width, max(indent, rest or 0) + 8), indent, rest)
    if max_lines is not None and len(lines) > max_lines:
        lines = lines[:max_lines]
        last = lines[-1]
        if last.cell_len >= width:
            last.truncate(width - 1, overflow="crop")
        last.append("…")
    return lines


def rule_line(title: str, width: int) -> Text:
    head = f"── {title} "
    t = Text(no_wrap=True)
    t.append(head, style="bold")
    fill = width - cell_len(head)
    if fill > 0:
        t.append("─" * fill, style="dim")
    return t


# -- tables ---------------------------------------------------------------------------------
def stable_columns(cols: list[Col], nominal: dict[str, str], rows: list[dict[str, Any]], width: int,
                   grow: str | None = None) -> list[tuple[Col, int]]:
    """The columns for ``width``, chosen from ``nominal`` (a typical widest cell per column),
    never from the rows: the set of columns depends on the width (and the labels) only.
    Room left over goes to the ``grow`` column (the model) up to its widest cell in ``rows``;
    a cell still wider than its column wraps (``table_lines``)."""
    chosen = fit_columns(cols, [nominal], width)
    if grow is not None:
        used = sum(w for _, w in chosen) + GAP * max(0, len(chosen) - 1)
        want = max([cell_len(str(r.get(grow) or "")) for r in rows] + [0])
        chosen = [(c, w + max(0, min(want - w, width - used))) if c.key == grow else (c, w) for c, w in chosen]
    return chosen


def header_row(cols: list[Col]) -> dict[str, str]:
    return {c.key: c.header for c in cols}


def row_lines(chosen: list[tuple[Col, int]], cells: dict[str, Any], styles: dict[str, str] | None = None,
              bold: bool = False) -> list[Text]:
    """One row as one or more lines (``output.table_lines``)."""
    return table_lines(chosen, cells, styles, bold=bold)


def columns_width(chosen: list[tuple[Col, int]]) -> int:
    return sum(w for _, w in chosen) + GAP * max(0, len(chosen) - 1)
