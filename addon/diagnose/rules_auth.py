"""Authentication: what was wrong with the credential, judged from its fingerprint facts and the status.

Key-format findings are errors when the upstream answered 401/403 (the first one found is
the error, further ones are warnings) and warnings otherwise. ``auth.rejected`` is the
fallback for a 401/403 nothing else explains. Keys are never quoted, only fingerprints.
"""

from __future__ import annotations

from typing import Any

from .rules_base import AUTH_STATUSES, Ctx, server_text

WHITESPACE_FACTS = ("leading_whitespace", "trailing_whitespace", "newline", "escaped_newline", "inner_whitespace")

#: key-format defects in the order they are reported: (code, facts that trigger it)
FORMAT_RULES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("auth.unexpanded", ("unexpanded_variable",)),
    ("auth.whitespace", WHITESPACE_FACTS),
    ("auth.quoted", ("quoted",)),
    ("auth.non_ascii", ("non_ascii",)),
    ("auth.bearer_in_api_key", ("bearer_in_api_key",)),
    ("auth.no_bearer", ("no_scheme",)),
)


def _key_params(rec: Any, c: Ctx) -> dict[str, Any]:
    p = c.common()
    p.update(fingerprint=rec.key_fingerprint or "?", length=rec.key_length, header=rec.key_header or "?",
             scheme=rec.key_scheme, env=c.key_env())
    return p


def rule_auth(rec: Any, c: Ctx) -> None:
    facts = list(rec.key_facts or [])
    refused = rec.status in AUTH_STATUSES
    if "missing" in facts or "empty" in facts:
        if refused:
            p = _key_params(rec, c)
            p["expected"] = "x-api-key" if c.is_anthropic() else "Authorization: Bearer"
            c.add("auth.missing", "warn" if c.errors() else "error", variant="missing" if "missing" in facts else "empty", **p)
        return
    p = _key_params(rec, c)
    erred = bool(c.errors())  # e.g. rate.quota already explains a 401/403

    def severity() -> str:
        nonlocal erred
        if refused and not erred:
            erred = True
            return "error"
        return "warn"

    for code, triggers in FORMAT_RULES:
        hit = [f for f in facts if f in triggers]
        if not hit:
            continue
        extra = {"facts": hit} if code == "auth.whitespace" else {}
        if code == "auth.no_bearer":
            extra["variant"] = "no_scheme"
        c.add(code, severity(), **p, **extra)
    if "bearer_case" in facts and refused:
        c.add("auth.no_bearer", severity(), variant="bearer_case", **p)
    if "conflicting_keys" in facts:
        c.add("auth.conflict", severity(), **p)
    if not refused or erred:
        return
    if rec.api.startswith("openai.") and rec.key_header == "x-api-key":
        c.add("auth.wrong_header", "error", variant="x_api_key", **p)
    elif rec.api == "anthropic.messages" and rec.key_header == "authorization":
        c.add("auth.wrong_header", "error", variant="bearer", **p)
    else:
        c.add("auth.rejected", "error", variant="403" if rec.status == 403 else "401", server=server_text(rec), **p)


RULES = (rule_auth,)
