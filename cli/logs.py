"""`firsttoken logs`: recent requests as a table, JSON lines or CSV."""

from __future__ import annotations

import csv
import json
import sys
from typing import Any, Iterable

from rich.table import Table
from rich.text import Text

from . import fmt

SEVERITY_STYLE = {"error": "bold red", "warn": "yellow", "info": "cyan"}


def table(rows: Iterable[dict[str, Any]], title: str | None = None, hints: bool = True) -> Table:
    t = Table(title=title, show_lines=False, expand=False, header_style="bold")
    t.add_column("time", no_wrap=True)
    t.add_column("id", no_wrap=True, style="dim")
    t.add_column("route", no_wrap=True)
    t.add_column("model", no_wrap=True, max_width=24)
    t.add_column("api", no_wrap=True)
    t.add_column("st", justify="right", no_wrap=True)
    t.add_column("prompt", justify="right", no_wrap=True)
    t.add_column("TTFB", justify="right", no_wrap=True)
    t.add_column("TTFT", justify="right", no_wrap=True)
    t.add_column("gap", justify="right", no_wrap=True)
    t.add_column("TPOT", justify="right", no_wrap=True)
    t.add_column("out", justify="right", no_wrap=True)
    t.add_column("total", justify="right", no_wrap=True)
    t.add_column("finding", overflow="fold", min_width=24)
    for r in rows:
        st = fmt.status_text(r)
        st_style = "red" if st in ("ERR", "aborted") or (r.get("status") or 0) >= 400 else ""
        t.add_row(
            fmt.local_time(r.get("started_at")),
            r["id"][:8],
            r.get("route") or "–",
            r.get("model") or "–",
            (r.get("api") or "other").replace("openai.", "oai.").replace("anthropic.", "ant."),
            Text(st, style=st_style),
            fmt.prompt_tokens(r),
            fmt.ms(r.get("ttfb_ms")),
            fmt.ms(r.get("ttft_ms")),
            fmt.ms(r.get("gap_ms")),
            fmt.ms(r.get("tpot_ms")),
            fmt.output_tokens(r),
            fmt.ms(r.get("total_ms")),
            finding_text(r, hints),
        )
    return t


def finding_text(r: dict[str, Any], hint: bool = True) -> Text:
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
