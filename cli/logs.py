"""`firsttoken logs`: recent requests as a table, JSON lines or CSV."""

from __future__ import annotations

import csv
import json
import sys
from collections.abc import Iterable
from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text

from firsttoken.addon.safe_text import printable_data
from firsttoken.cli import output
from firsttoken.cli.output import SEVERITY_STYLE

COLUMNS = [
    # (header, min console width to show it, justify, cell)
    ("time", 120, "left", lambda r: output.local_time(r.get("started_at"))),
    ("id", 0, "left", lambda r: r["id"][:8]),
    ("route", 140, "left", lambda r: r.get("route") or "–"),
    ("model", 0, "left", lambda r: _clip(r.get("model") or "–", 22)),
    ("api", 130, "left", lambda r: (r.get("api") or "other").replace("openai.", "oai.").replace("anthropic.", "ant.")),
    ("st", 0, "right", lambda r: _status(r)),
    ("prompt", 0, "right", lambda r: output.prompt_tokens(r)),
    ("TTFB", 0, "right", lambda r: output.ms(r.get("ttfb_ms"))),
    ("TTFT", 0, "right", lambda r: output.ms(r.get("ttft_ms"))),
    ("gap", 0, "right", lambda r: output.ms(r.get("gap_ms"))),
    ("TPOT", 110, "right", lambda r: output.ms(r.get("tpot_ms"))),
    ("out", 100, "right", lambda r: output.output_tokens(r)),
    ("total", 0, "right", lambda r: output.ms(r.get("total_ms"))),
]


def _clip(s: str, n: int) -> str:
    return s if len(s) <= n else s[: n - 1] + "…"


def _status(r: dict[str, Any]) -> Text:
    st = output.status_text(r)
    bad = st in ("ERR", "aborted") or (r.get("status") or 0) >= 400
    return Text(st, style="red" if bad else "")


GLYPH = {"error": ("✗", "bold red"), "warn": ("!", "yellow"), "info": ("·", "cyan")}
WIDE = 120  # below this, findings move under the table instead of a squeezed column


def table(rows: Iterable[dict[str, Any]], title: str | None = None, hints: bool = True, width: int = 160):
    """Requests as a table; on narrow terminals columns are dropped (never wrapped) and the
    findings are listed below the table, one per line, keyed by id."""
    rows = [printable_data(r) for r in rows]  # upstream-controlled text never reaches the terminal raw
    cols = [c for c in COLUMNS if width >= c[1]]
    wide = width >= WIDE
    t = Table(title=title, expand=False, header_style="bold underline", box=None, pad_edge=False, padding=(0, 1))
    for name, _, justify, _ in cols:
        t.add_column(name, justify=justify, no_wrap=True)
    t.add_column("finding" if wide else "", overflow="fold", min_width=20 if wide else 1, no_wrap=not wide)
    notes = []
    for r in rows:
        fnd = r.get("findings") or []
        if wide:
            last = finding_text(r, hints)
        else:
            glyph, style = GLYPH.get(fnd[0]["severity"], ("?", "")) if fnd else ("", "")
            last = Text(glyph, style=style)
            if fnd:
                notes.append((r, finding_text(r, hints)))
        t.add_row(*[cell(r) for _, _, _, cell in cols], last)
    if wide or not notes:
        return t
    lines = [t]
    for r, text in notes:
        line = Text(f"{r['id'][:8]} ", style="dim")
        line.append_text(text)
        lines.append(line)
    return Group(*lines)


def finding_text(r: dict[str, Any], hint: bool = True) -> Text:
    r = printable_data(r)
    findings = r.get("findings") or []
    if not findings:
        return Text("ok" if r.get("state") == "done" else "", style="green")
    f = findings[0]
    out = Text(f"{f['code']}: {f['message']}", style=SEVERITY_STYLE.get(f["severity"], ""))
    if hint and f.get("hint"):
        out.append(f"\n→ {f['hint']}", style="dim")
    if len(findings) > 1:
        out.append(f" (+{len(findings) - 1} more)", style="dim")
    return out


def write_json(rows: Iterable[dict[str, Any]], out=None) -> None:
    out = out or sys.stdout
    for r in rows:
        out.write(json.dumps(r, ensure_ascii=False, default=str) + "\n")


def write_csv(rows: list[dict[str, Any]], out=None) -> None:
    out = out or sys.stdout
    if not rows:
        return
    w = csv.DictWriter(out, fieldnames=list(rows[0].keys()))
    w.writeheader()
    for r in rows:
        w.writerow({k: json.dumps(v) if isinstance(v, (list, dict)) else v for k, v in r.items()})
