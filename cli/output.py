"""Small formatting helpers shared by the commands' tables."""

from __future__ import annotations

import datetime as _dt
from typing import Any

from firsttoken.addon.safe_text import printable_data

#: how a finding's severity is coloured everywhere (logs, show, live, diagnoses)
SEVERITY_STYLE = {"error": "bold red", "warn": "yellow", "info": "cyan"}


def ms(v: float | None) -> str:
    if v is None:
        return "–"
    if v >= 10_000:
        return f"{v / 1000:.1f}s"
    if v >= 1000:
        return f"{v / 1000:.2f}s"
    if v >= 100:
        return f"{v:.0f}ms"
    return f"{v:.1f}ms"


def num(v: int | float | None, est: bool = False) -> str:
    if v is None:
        return "–"
    return f"~{v:,}" if est else f"{v:,}"


def local_time(iso: str | None) -> str:
    if not iso:
        return "–"
    try:
        t = _dt.datetime.fromisoformat(iso).astimezone()
    except ValueError:
        return iso
    return t.strftime("%H:%M:%S")


def status_text(row: dict) -> str:
    if row.get("state") == "in_flight":
        return "…"
    if row.get("client_aborted"):
        return "aborted"
    if row.get("status") is None:
        return "ERR"
    return str(row["status"])


def prompt_tokens(row: dict) -> str:
    """Server-reported prompt tokens when present, else our estimate marked with ~."""
    if row.get("usage_prompt_tokens") is not None:
        return num(row["usage_prompt_tokens"])
    return num(row.get("prompt_tokens_est"), est=not row.get("tokens_exact"))


def output_tokens(row: dict) -> str:
    if row.get("usage_completion_tokens") is not None:
        return num(row["usage_completion_tokens"])
    return num(row.get("output_tokens_est"), est=True)


# ---- One plain line per finished request (non-TTY output, `--no-live`, CI logs).

def line(r: dict[str, Any]) -> str:
    r = printable_data(r)  # upstream-controlled text never reaches the terminal raw
    parts = [
        local_time(r.get("started_at")),
        r["id"][:8],
        r.get("route") or "-",
        r.get("model") or "-",
        status_text(r),
        f"TTFB {ms(r.get('ttfb_ms'))}",
        f"TTFT {ms(r.get('ttft_ms'))}",
        f"gap {ms(r.get('gap_ms'))}",
        f"total {ms(r.get('total_ms'))}",
        f"prompt {prompt_tokens(r)}",
        f"out {output_tokens(r)}",
    ]
    findings = r.get("findings") or []
    if findings:
        f = findings[0]
        parts.append(f"| {f['severity']} {f['code']}: {f['message']}")
        if f.get("hint"):
            parts.append(f"→ {f['hint']}")
    return " ".join(parts)
