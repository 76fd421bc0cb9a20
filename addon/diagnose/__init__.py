"""Diagnosis: pure rules over a finished record, texts in English and Chinese.

``diagnose(rec, inp)`` returns the findings of one request, most severe first; each is
``{"code", "severity", "message", "hint", "params"}``. ``inp`` is a frozen ``DiagnosisInput``
(settings, recent history, prompt change), the only thing the rules read besides the record.
``render(code, params, lang)`` re-renders a stored finding in another language. See docs/architecture.md.
"""

from __future__ import annotations

from typing import Any

from firsttoken.addon.diagnose.context import SEVERITY_ORDER, DiagnosisInput
from firsttoken.addon.diagnose.engine import CATALOG, finding_codes, render, render_finding, run_rules, title
from firsttoken.addon.diagnose.lang import resolve as resolve_lang
from firsttoken.addon.diagnose.latency import NOT_PREFILL, ttft_outlier

__all__ = ["CATALOG", "NOT_PREFILL", "SEVERITY_ORDER", "DiagnosisInput", "diagnose", "finding_codes", "render",
           "render_finding", "resolve_lang", "title", "ttft_outlier"]


def diagnose(rec, inp: DiagnosisInput) -> list[dict[str, Any]]:
    """Findings for one finished record, most severe first."""
    return run_rules(rec, inp)
