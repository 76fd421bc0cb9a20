"""The tables of the live view, as lines of ``Text``: finished requests, in flight, per model.

Each table is built the same way: cells per row, ``fit_columns`` to the width, then one
line per row. A finished request's top finding (and its hint) goes in its own column when
the terminal is wide enough, else on indented lines under its row.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text

from firsttoken.cli import output
from firsttoken.cli.live.labels import flight_cols, label, model_cols, phase_label, recent_cols
from firsttoken.cli.live.layout import (
    GAP,
    api_short,
    cells_line,
    columns_width,
    fit_cell_text,
    fit_columns,
    header_cells,
    seconds,
    sparkline,
    wrap_text,
)
from firsttoken.cli.live.state import FlightView, ModelStats, is_error
from firsttoken.cli.output import SEVERITY_MARK, SEVERITY_STYLE

PHASE_STYLE = {"connecting": "dim", "waiting_headers": "blue", "prefill": "cyan", "waiting_body": "cyan", "streaming": "green"}
#: below this width the finding goes on its own lines under the row
INLINE_FINDING_MIN_WIDTH = 140
FINDING_MIN = 48


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
def _recent_cells(r: dict[str, Any]) -> dict[str, Text]:
    st = output.status_text(r)
    return {
        "time": Text(output.local_time(r.get("started_at"))),
        "id": Text((r.get("id") or "")[:8], style="dim"),
        "route": Text(r.get("route") or "–"),
        "model": Text(r.get("model") or "–"),
        "api": Text(api_short(r.get("api"))),
        "st": Text(st, style="red" if is_error(r) else "green"),
        "prompt": Text(output.prompt_tokens(r)),
        "ttfb": Text(output.ms(r.get("ttfb_ms"))),
        "ttft": Text(output.ms(r.get("ttft_ms")), style="bold"),
        "gap": Text(output.ms(r.get("gap_ms"))),
        "tpot": Text(output.ms(r.get("tpot_ms"))),
        "out": Text(output.output_tokens(r)),
        "total": Text(output.ms(r.get("total_ms"))),
    }


def recent_entries(rows: list[dict[str, Any]], width: int, lang: str, capped: bool = True) -> tuple[Text, list[list[Text]]]:
    """The header line and, per row, its lines (the row, then any finding/hint lines)."""
    cols = recent_cols(lang)
    cells = [_recent_cells(r) for r in rows]
    inline = width >= INLINE_FINDING_MIN_WIDTH
    chosen = fit_columns(cols, cells, width - (FINDING_MIN + GAP) if inline else width)
    used = columns_width(chosen)
    fw = width - used - GAP
    inline = inline and fw >= FINDING_MIN
    head = cells_line(chosen, header_cells(cols), bold=True)
    if inline:
        head.append(" " * (used - head.cell_len + GAP))
        head.append(label(lang, "col.finding"), style="bold")
    entries: list[list[Text]] = []
    cap_msg, cap_hint = (2, 2) if capped else (None, None)
    for r, c in zip(rows, cells):
        line = cells_line(chosen, c)
        msg, hint = finding_parts(r, lang)
        lines = [line]
        if inline:
            extra = []
            if msg is not None:
                extra += wrap_text(msg, fw, cap_msg)
            elif r.get("state", "done") == "done":
                extra.append(Text(label(lang, "ok"), style="green"))
            if hint is not None:
                extra += wrap_text(hint, fw, cap_hint)
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
                for w in wrap_text(part, width - indent, cap_msg if part is msg else cap_hint):
                    t = Text(" " * indent, no_wrap=True)
                    t.append_text(w)
                    lines.append(t)
        entries.append([fit_cell_text(ln, width) for ln in lines])
    return fit_cell_text(head, width), entries


# -- in flight -----------------------------------------------------------------------------------------
def _flight_cells(f: FlightView, lang: str) -> dict[str, Text]:
    return {
        "elapsed": Text(seconds(f.elapsed_s), style="bold"),
        "id": Text(f.id[:8], style="dim"),
        "route": Text(f.route or "–"),
        "model": Text(f.model or "–"),
        "api": Text(api_short(f.api)),
        "phase": Text(phase_label(f.phase, lang), style=PHASE_STYLE.get(f.phase or "", "")),
        "ttfb": Text(output.ms(f.ttfb_ms)),
        "prompt": Text(output.num(f.prompt_tokens_est, est=True)),
        "tok": Text("–" if f.tokens is None else f"{f.tokens:,}"),
        "rate": Text("–" if f.tok_per_s is None else f"{f.tok_per_s:.1f}"),
    }


def flight_lines(flights: list[FlightView], width: int, lang: str) -> list[Text]:
    cols = flight_cols(lang)
    cells = [_flight_cells(f, lang) for f in flights]
    chosen = fit_columns(cols, cells, width)
    return [fit_cell_text(cells_line(chosen, header_cells(cols), bold=True), width)] + [
        fit_cell_text(cells_line(chosen, c), width) for c in cells
    ]


# -- per model --------------------------------------------------------------------------------------------
def _model_cells(m: ModelStats) -> dict[str, Text]:
    return {
        "model": Text(m.model), "n": Text(str(m.n)),
        "err": Text(str(m.errors), style="red" if m.errors else ""),
        "ttfb50": Text(output.ms(m.ttfb_p50)), "ttfb95": Text(output.ms(m.ttfb_p95)),
        "ttft50": Text(output.ms(m.ttft_p50), style="bold"), "ttft95": Text(output.ms(m.ttft_p95)),
        "gap50": Text(output.ms(m.gap_p50)), "gap95": Text(output.ms(m.gap_p95)),
        "trend": Text(sparkline(m.ttft_series), style="cyan"),
    }


def model_lines(models: list[ModelStats], width: int, lang: str, trend: bool = True) -> list[Text]:
    cols = model_cols(lang, trend)
    cells = [_model_cells(m) for m in models]
    chosen = fit_columns(cols, cells, width)
    return [fit_cell_text(cells_line(chosen, header_cells(cols), bold=True), width)] + [
        fit_cell_text(cells_line(chosen, c), width) for c in cells
    ]
