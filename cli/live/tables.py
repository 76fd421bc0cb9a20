"""The tables of the live view, as lines of ``Text``: finished requests, in flight, per model.

Columns depend on the width only (``stable_columns``); a wide cell wraps, nothing is cut. A finished
request's top finding goes in a last column when there is room, else on indented lines under its
row, capped at two lines in the live area. See docs/cli.md (the live view).
"""

from __future__ import annotations

from typing import Any

from rich.text import Text

from firsttoken.cli import output
from firsttoken.cli.labels import label
from firsttoken.cli.live.labels import flight_cols, model_cols, phase_label, recent_cols
from firsttoken.cli.live.layout import (
    GAP,
    columns_width,
    hanging,
    header_row,
    row_lines,
    seconds,
    sparkline,
    stable_columns,
    wrap_text,
)
from firsttoken.cli.live.state import FlightView, ModelStats, is_error

PHASE_STYLE = {"connecting": "dim", "waiting_headers": "blue", "prefill": "cyan", "waiting_body": "cyan", "streaming": "green"}
#: below this width the finding goes on its own lines under the row
INLINE_FINDING_MIN_WIDTH = 140
FINDING_MIN = 48
#: lines of a finding's message (and of its hint) in the live area
FINDING_CAP = 2


# -- findings -----------------------------------------------------------------------------------
def finding_parts(r: dict[str, Any], lang: str) -> tuple[Text | None, Text | None]:
    """(message, hint) of the top finding, styled: output.top_finding, in the view's language
    (re-rendered from its code and params: the proxy may have recorded it in another)."""
    fs = r.get("findings")
    if fs and isinstance(fs, list) and isinstance(fs[0], dict) and fs[0].get("code"):
        r = dict(r, findings=[*output.localize(fs[:1], lang), *fs[1:]])
    return output.top_finding(r, more=lambda n: label(lang, "more_findings", n=n))


# -- finished requests ------------------------------------------------------------------------------
def recent_entries(rows: list[dict[str, Any]], width: int, lang: str, capped: bool = True,
                   routes: bool = False) -> tuple[Text, list[list[Text]]]:
    """The header line and, per row, its lines (the row, then any finding/hint lines)."""
    cols, nominal = recent_cols(lang, routes)
    cells = [output.request_cells(r) for r in rows]
    inline = width >= INLINE_FINDING_MIN_WIDTH
    room = width - (FINDING_MIN + GAP) if inline else width
    chosen = stable_columns(cols, nominal, [], room)
    used = columns_width(chosen)
    fw = width - used - GAP
    inline = inline and fw >= FINDING_MIN
    if not inline:
        chosen = stable_columns(cols, nominal, cells, width, grow="model")
    else:  # the model column takes what the finding column does not need
        chosen = stable_columns(cols, nominal, cells, width - (FINDING_MIN + GAP), grow="model")
        used = columns_width(chosen)
        fw = width - used - GAP
    [head] = row_lines(chosen, header_row(cols), bold=True)
    if inline:
        head.append(" " * (used - head.cell_len + GAP))
        head.append(label(lang, "col.finding"), style="bold")
    cap = FINDING_CAP if capped else None
    entries: list[list[Text]] = []
    for r, c in zip(rows, cells):
        lines = row_lines(chosen, c, styles={"id": "dim", "ttft": "bold", "st": "red" if is_error(r) else "green"})
        msg, hint = finding_parts(r, lang)
        if inline:
            extra = []
            if msg is not None:
                extra += wrap_text(msg, fw, cap)
            elif r.get("state", "done") == "done":
                extra.append(Text(label(lang, "ok"), style="green"))
            if hint is not None:
                extra += wrap_text(hint, fw, cap)
            for i, e in enumerate(extra):
                if i < len(lines):  # beside the row's own (wrapped) lines
                    lines[i].append(" " * (used - lines[i].cell_len + GAP))
                    lines[i].append_text(e)
                else:
                    cont = Text(" " * (used + GAP), no_wrap=True)
                    cont.append_text(e)
                    lines.append(cont)
        else:
            for part, indent in ((msg, 2), (hint, 4)):
                if part is not None:
                    lines += hanging(part, width, indent, max_lines=cap)
        entries.append(lines)
    return head, entries


# -- in flight -----------------------------------------------------------------------------------------
def _flight_cells(f: FlightView, lang: str) -> dict[str, str]:
    return {
        "elapsed": seconds(f.elapsed_s),
        "id": f.id[:8],
        "route": f.route or "–",
        "model": f.model or "–",
        "api": output.api_name(f.api),
        "phase": phase_label(f.phase, lang),
        "ttfb": output.ms(f.ttfb_ms),
        "prompt": output.num(f.prompt_tokens_est, est=True),
        "tok": "–" if f.tokens is None else f"{f.tokens:,}",
        "rate": "–" if f.tok_per_s is None else f"{f.tok_per_s:.1f}",
    }


def flight_lines(flights: list[FlightView], width: int, lang: str, routes: bool = False) -> list[list[Text]]:
    """The header line, then each request's lines."""
    cols, nominal = flight_cols(lang, routes)
    cells = [_flight_cells(f, lang) for f in flights]
    chosen = stable_columns(cols, nominal, [], width)
    out = [row_lines(chosen, header_row(cols), bold=True)]
    for f, c in zip(flights, cells):
        out.append(row_lines(chosen, c, styles={"elapsed": "bold", "id": "dim",
                                                "phase": PHASE_STYLE.get(f.phase or "", "")}))
    return out


# -- per model --------------------------------------------------------------------------------------------
def _model_cells(m: ModelStats) -> dict[str, str]:
    return {
        "model": m.model, "n": str(m.n), "err": str(m.errors),
        "ttfb50": output.ms(m.ttfb_p50), "ttfb95": output.ms(m.ttfb_p95),
        "ttft50": output.ms(m.ttft_p50), "ttft95": output.ms(m.ttft_p95),
        "gap50": output.ms(m.gap_p50), "gap95": output.ms(m.gap_p95),
        "trend": sparkline(m.ttft_series),
    }


def model_lines(models: list[ModelStats], width: int, lang: str, trend: bool = True) -> list[Text]:
    cols, nominal = model_cols(lang, trend)
    cells = [_model_cells(m) for m in models]
    chosen = stable_columns(cols, nominal, cells, width, grow="model")
    out = row_lines(chosen, header_row(cols), bold=True)
    for m, c in zip(models, cells):
        out += row_lines(chosen, c, styles={"err": "red" if m.errors else "", "ttft50": "bold", "trend": "cyan"})
    return out
