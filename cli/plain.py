"""One plain line per finished request (non-TTY output, `--no-live`, CI logs)."""

from __future__ import annotations

from typing import Any

from . import fmt


def line(r: dict[str, Any]) -> str:
    parts = [
        fmt.local_time(r.get("started_at")),
        r["id"][:8],
        r.get("route") or "-",
        r.get("model") or "-",
        fmt.status_text(r),
        f"TTFB {fmt.ms(r.get('ttfb_ms'))}",
        f"TTFT {fmt.ms(r.get('ttft_ms'))}",
        f"gap {fmt.ms(r.get('gap_ms'))}",
        f"total {fmt.ms(r.get('total_ms'))}",
        f"prompt {fmt.prompt_tokens(r)}",
        f"out {fmt.output_tokens(r)}",
    ]
    findings = r.get("findings") or []
    if findings:
        f = findings[0]
        parts.append(f"| {f['severity']} {f['code']}: {f['message']}")
        if f.get("hint"):
            parts.append(f"→ {f['hint']}")
    return " ".join(parts)
