"""Diagnosis: pure rules over a finished record. See rules.py and catalog.py."""

from __future__ import annotations

from typing import Any

SEVERITY_ORDER = {"error": 0, "warn": 1, "info": 2}


def diagnose(rec, context: Any = None) -> list[dict[str, Any]]:
    """Findings for one finished record, most severe first (rules arrive in rules.py)."""
    try:
        from .rules import run_rules
    except ImportError:
        return []
    findings = run_rules(rec, context)
    return sorted(findings, key=lambda f: SEVERITY_ORDER.get(f["severity"], 9))
