"""The rule engine: run every family in order over one finished record, render the findings.

Order matters (one root cause -> one error): connectivity first (no response explains
everything after it), then paths, the specific upstream errors, authentication, the
fallbacks for statuses nothing explained, then streams and latency, which only speak
when the request otherwise worked.
"""

from __future__ import annotations

import logging
from typing import Any, Callable

from . import rules_auth, rules_connectivity, rules_latency, rules_limits, rules_paths, rules_streams
from .catalog import render
from .lang import resolve
from .rules_base import SEVERITY_ORDER, Ctx

log = logging.getLogger("firsttoken")

Rule = Callable[[Any, Ctx], None]

ORDER: tuple[Rule, ...] = (
    *rules_connectivity.RULES,
    *rules_paths.RULES,
    *rules_limits.RULES,
    *rules_auth.RULES,
    *rules_limits.FALLBACKS,
    *rules_paths.FALLBACKS,
    *rules_streams.RULES,
    *rules_latency.RULES,
)


def collect(rec: Any, context: Any = None) -> list[dict[str, Any]]:
    """Raw findings (code, severity, params) in rule order; a failing rule is logged and skipped."""
    c = Ctx(rec, context)
    for rule in ORDER:
        try:
            rule(rec, c)
        except Exception:  # a rule bug must never cost the record
            log.exception("firsttoken: diagnosis rule %s failed on %s", rule.__name__, getattr(rec, "id", "?"))
    return c.findings


def run_rules(rec: Any, context: Any = None, lang: str | None = None) -> list[dict[str, Any]]:
    """Findings with message and hint rendered, most severe first (stable within a severity)."""
    if lang is None:
        lang = resolve(getattr(getattr(context, "settings", None), "lang", None))
    out = []
    for f in collect(rec, context):
        message, hint = render(f["code"], f["params"], lang)
        out.append({"code": f["code"], "severity": f["severity"], "message": message, "hint": hint,
                    "params": f["params"]})
    return sorted(out, key=lambda f: SEVERITY_ORDER.get(f["severity"], 9))
