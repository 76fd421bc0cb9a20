"""Paths and models: where the request was sent, and whether the upstream knows the model.

Path mistakes are judged from the URL actually forwarded (``upstream_url``), the client's
path and the route's prefix, so the hint can name the base URL to set. The protocol
mismatch is judged by a 404 and the shape of the error body.
"""

from __future__ import annotations

import re
from typing import Any

from .rules_base import LLM_APIS, Ctx, client_path, has_any, quote, server_text, upstream_path

_ENDPOINTS = r"(chat/completions|completions|responses|messages)"
DOUBLE_ENDPOINT = re.compile(r"/" + _ENDPOINTS + r"(?:/v1)?/" + _ENDPOINTS + r"(?=/|$)")
DOUBLE_V1 = re.compile(r"/v1/v1(?=/|$)")
CANONICAL = re.compile(r"/v1/(chat/completions|completions|responses|messages)$")

MODEL_MISSING_WORDS = (
    "not found", "does not exist", "not exist", "unknown model", "invalid model", "no such model",
    "not a valid model", "unsupported model", "model_not_found", "no endpoints found", "is not supported",
    "model not available", "deploymentnotfound",
)
MODEL_ERROR_TYPES = ("model_not_found", "DeploymentNotFound", "model_not_available")
#: limit errors name the model too; they are not "unknown model"
LIMIT_WORDS = ("max_tokens", "max_completion_tokens", "max_output_tokens", "context", "too long", "too large")
#: Anthropic's own error types (an OpenAI-style path answering with these speaks Anthropic)
ANTHROPIC_404_TYPES = ("not_found_error",)


def _failed(rec: Any) -> bool:
    return rec.status is None or rec.status >= 400


def _rest(rec: Any, c: Ctx) -> str:
    """The client's path after the route's mount."""
    p = client_path(rec)
    m = c.mount()
    return p[len(m):] if m and p.startswith(m) else p


def _strip_v1(url: str | None) -> str:
    u = (url or "").rstrip("/")
    while u.endswith("/v1"):
        u = u[:-3]
    return u


def rule_no_route(rec: Any, c: Ctx) -> None:
    if rec.route is None and (rec.error or "").startswith("firsttoken has no route"):
        c.add("path.no_route", "error", path=client_path(rec), error=quote(rec.error), proxy=c.proxy_url)


def rule_double_v1(rec: Any, c: Ctx) -> None:
    up = upstream_path(rec)
    if not DOUBLE_V1.search(up):
        return
    _, _, _, prefix = c.target()
    rest = _rest(rec, c)
    if DOUBLE_V1.search(rest) or not prefix.endswith("/v1"):
        variant = "client"
    else:
        variant = "prefix_anthropic" if c.is_anthropic() else "prefix"
    c.add("path.double_v1", "error" if _failed(rec) else "warn", variant=variant, **c.common(),
          client_path=rest, env=c.base_env(), base=c.good_base(), fixed_upstream=_strip_v1(rec.upstream))


def rule_double_endpoint(rec: Any, c: Ctx) -> None:
    m = DOUBLE_ENDPOINT.search(upstream_path(rec))
    if not m:
        return
    _, _, _, prefix = c.target()
    variant = "prefix" if re.search(_ENDPOINTS + r"$", prefix) else "client"
    fixed = re.sub(r"/" + _ENDPOINTS + r"$", "", rec.upstream or "")
    c.add("path.double_endpoint", "error" if _failed(rec) else "warn", variant=variant, **c.common(),
          endpoint="/" + m.group(2), env=c.base_env(), base=c.good_base(), fixed_upstream=fixed)


def rule_model_not_found(rec: Any, c: Ctx) -> None:
    if rec.status not in (400, 404) or not rec.upstream_error:
        return
    msg = rec.upstream_error
    low = msg.lower()
    named = bool(rec.model) and rec.model.lower() in low
    typed = rec.upstream_error_type in MODEL_ERROR_TYPES
    anthropic_style = low.startswith("model:") and rec.upstream_error_type == "not_found_error"
    if not (typed or anthropic_style or (named and has_any(low, MODEL_MISSING_WORDS))):
        return
    if not typed and has_any(low, LIMIT_WORDS):
        return
    upstream = (rec.upstream or "").rstrip("/")
    models_url = upstream + ("/models" if upstream.endswith("/v1") else "/v1/models")
    c.add("model.not_found", "error", variant="anthropic" if c.is_anthropic() else "openai", **c.common(),
          model=rec.model or "?", server=server_text(rec), models_url=models_url)


def rule_protocol_mismatch(rec: Any, c: Ctx) -> None:
    if rec.status != 404 or c.errors() or not CANONICAL.search(upstream_path(rec)):
        return
    kind = rec.upstream_error_type
    msg = (rec.upstream_error or "").lower()
    if rec.api == "anthropic.messages":
        if kind in ANTHROPIC_404_TYPES:
            return  # Anthropic's own 404: it speaks the protocol
        variant = "anthropic_to_openai"
    elif rec.api in LLM_APIS:
        if kind not in ANTHROPIC_404_TYPES or "model" in msg:
            return
        variant = "openai_to_anthropic"
    else:
        return
    c.add("path.protocol_mismatch", "error", variant=variant, **c.common(), server=server_text(rec) or "-",
          proxy=c.proxy_url, mount=c.mount())


def rule_missing_v1(rec: Any, c: Ctx) -> None:
    if rec.status != 404 or c.errors():
        return
    up = upstream_path(rec)
    if "/v1/" in up + "/" or has_any(up, ("/v1beta", "/v2/", "/v3/", "/deployments/", "/v4/")):
        return
    if rec.api not in LLM_APIS and not up.rstrip("/").endswith("/models"):
        return
    c.add("path.missing_v1", "error", **c.common(), server=server_text(rec) or "-", env=c.base_env(),
          base=c.good_base())


def rule_not_found(rec: Any, c: Ctx) -> None:
    if rec.status != 404 or c.errors():
        return
    c.add("path.not_found", "error", **c.common(), server=server_text(rec) or "-", env=c.base_env(),
          base=c.good_base())


RULES = (rule_no_route, rule_double_v1, rule_double_endpoint, rule_model_not_found, rule_protocol_mismatch,
         rule_missing_v1)
#: run after every other family (404s nothing else explained)
FALLBACKS = (rule_not_found,)
