"""`firsttoken run`: the summary printed when the child exits, a pure function of its records.

    firsttoken run 3f9a2c1d: 4 requests (1 error) · claude-sonnet-4-5 ×3, claude-haiku-4-5 ×1
      TTFB P50 412ms P95 1.20s · TTFT P50 980ms P95 2.31s · gap P50 560ms P95 1.10s
      tokens: 48,210 in (81% cached) · 1,204 out
      error auth.invalid ×1: api.anthropic.com answered 401 …
        fix: …
      more: firsttoken logs --run 3f9a2c1d
"""

from __future__ import annotations

import collections
import re
from dataclasses import dataclass, field
from typing import Any

from firsttoken.addon.record import percentile
from firsttoken.cli import output

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(text: Any) -> str:
    """Text from a request or response, safe for a terminal: control characters become '?'."""
    return _CONTROL.sub("?", str(text)).replace("\n", " ")


@dataclass
class Finding:
    code: str
    severity: str
    count: int
    message: str
    hint: str | None


@dataclass
class Summary:
    run_id: str
    count: int = 0
    errors: int = 0
    in_flight: int = 0
    models: list[tuple[str, int]] = field(default_factory=list)  # most used first
    ttfb: tuple[float, float] | None = None  # (P50, P95) ms
    ttft: tuple[float, float] | None = None
    gap: tuple[float, float] | None = None
    prompt_tokens: int = 0
    prompt_estimated: bool = False  # some prompts had no server usage: our estimate counted
    cached_tokens: int = 0
    output_tokens: int = 0
    findings: list[Finding] = field(default_factory=list)

    @property
    def cached_share(self) -> float | None:
        return self.cached_tokens / self.prompt_tokens if self.prompt_tokens else None


def is_error(row: dict[str, Any]) -> bool:
    return (row.get("status") is None or (row.get("status") or 0) >= 400 or bool(row.get("error"))
            or row.get("top_severity") == "error")


def p50_p95(values: list[Any]) -> tuple[float, float] | None:
    vals = sorted(float(v) for v in values if v is not None)
    return (percentile(vals, 50), percentile(vals, 95)) if vals else None


def summarize(run_id: str, rows: list[dict[str, Any]]) -> Summary:
    s = Summary(run_id, count=len(rows))
    s.errors = sum(1 for r in rows if r.get("state") != "in_flight" and is_error(r))
    s.in_flight = sum(1 for r in rows if r.get("state") == "in_flight")
    s.models = collections.Counter(r["model"] for r in rows if r.get("model")).most_common()
    s.ttfb, s.ttft, s.gap = (p50_p95([r.get(k) for r in rows]) for k in ("ttfb_ms", "ttft_ms", "gap_ms"))
    for r in rows:
        if r.get("usage_prompt_tokens") is not None:
            s.prompt_tokens += r["usage_prompt_tokens"]
        elif r.get("prompt_tokens_est") is not None:
            s.prompt_tokens += r["prompt_tokens_est"]
            s.prompt_estimated = True
        s.cached_tokens += r.get("usage_cached_tokens") or 0
        out = r.get("usage_completion_tokens")
        s.output_tokens += out if out is not None else (r.get("output_tokens_est") or 0)
    seen: dict[str, Finding] = {}
    for r in rows:
        for f in r.get("findings") or []:
            if not isinstance(f, dict) or not f.get("code"):
                continue
            if f["code"] in seen:
                seen[f["code"]].count += 1
            else:
                seen[f["code"]] = Finding(f["code"], f.get("severity") or "info", 1, f.get("message") or "", f.get("hint"))
    order = {"error": 0, "warn": 1, "info": 2}
    s.findings = sorted(seen.values(), key=lambda f: (order.get(f.severity, 3), -f.count))
    return s


def _pair(name: str, v: tuple[float, float] | None) -> str:
    return f"{name} P50 {output.ms(v[0])} P95 {output.ms(v[1])}" if v else f"{name} –"


def render(s: Summary, more: str, *, via: str | None = None, notes: list[str] | tuple[str, ...] = (),
           max_findings: int = 5) -> list[str]:
    """The summary as plain lines (stderr): ``more`` is the command that lists the requests,
    ``via`` how the child was sent through the proxy, ``notes`` what to know about its upstreams."""
    head = f"firsttoken run {s.run_id}: "
    tail = [f"  note: {n}" for n in notes] + ([f"  via: {via}"] if via else [])
    if not s.count:
        return [head + "the command sent no request through firsttoken.",
                "  If it should have: it may read its base URL from somewhere firsttoken does not know; "
                "`firsttoken run --print-env -- CMD` shows what was set, `firsttoken run --forward -- CMD` "
                "records it through HTTPS_PROXY instead.", *tail]
    n = f"{s.count} request{'s' if s.count != 1 else ''}"
    extra = [f"{s.errors} error{'s' if s.errors != 1 else ''}"] if s.errors else []
    extra += [f"{s.in_flight} unfinished"] if s.in_flight else []
    if extra:
        n += f" ({', '.join(extra)})"
    models = ", ".join(f"{printable(m)} ×{c}" for m, c in s.models[:4]) + (" …" if len(s.models) > 4 else "")
    lines = [head + n + (f" · {models}" if models else "")]
    lines.append("  " + " · ".join(_pair(k, v) for k, v in (("TTFB", s.ttfb), ("TTFT", s.ttft), ("gap", s.gap))))
    tok = f"  tokens: {'~' if s.prompt_estimated else ''}{s.prompt_tokens:,} in"
    if s.cached_share is not None:
        tok += f" ({s.cached_share:.0%} cached)"
    lines.append(tok + f" · {s.output_tokens:,} out")
    for f in s.findings[:max_findings]:
        lines.append(f"  {f.severity} {f.code} ×{f.count}: {printable(f.message)}")
        if f.hint:
            lines.append(f"    fix: {printable(f.hint)}")
    if len(s.findings) > max_findings:
        lines.append(f"  … and {len(s.findings) - max_findings} more kinds of finding")
    return lines + tail + [f"  more: {more}"]
