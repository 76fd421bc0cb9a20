"""Diagnosis: pure rules over a finished record, texts in English and Chinese.

``diagnose(rec, ctx)`` returns the findings of one request, most severe first; each is
``{"code", "severity", "message", "hint", "params"}``. ``ctx`` is the Analyzer (or any
object with ``settings`` - ``stall_ms``, ``warn_prompt_tokens``, ``lang`` - and ``recent``,
earlier finished records, newest last). ``render(code, params, lang)`` re-renders a stored
finding in another language. Rules live in ``rules_*.py``, texts in ``catalog.py``.
"""

from __future__ import annotations

from typing import Any

from firsttoken.addon.diagnose.context import SEVERITY_ORDER
from firsttoken.addon.diagnose.engine import CATALOG, render, render_finding, title
from firsttoken.addon.diagnose.lang import resolve as resolve_lang

__all__ = ["CATALOG", "SEVERITY_ORDER", "diagnose", "render", "render_finding", "resolve_lang", "title"]


def diagnose(rec, context: Any = None) -> list[dict[str, Any]]:
    """Findings for one finished record, most severe first."""
    from firsttoken.addon.diagnose.engine import run_rules

    return run_rules(rec, context)
