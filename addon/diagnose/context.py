"""What every rule family shares: the per-request context and small helpers.

Rules are pure functions ``rule(rec, c) -> None`` that call ``c.add(code, severity, **params)``;
``c`` also answers what earlier rules already found (one root cause -> one error).
Messages are rendered from the catalog at the end (see engine.py).
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

from firsttoken.addon import routing
from firsttoken.addon.diagnose.thresholds import BASELINE_MIN_SAMPLES
from firsttoken.addon.secrets import redact_text

LLM_APIS = ("openai.chat", "openai.completions", "openai.responses", "anthropic.messages")
AUTH_STATUSES = (401, 403)
DEFAULT_PROXY_URL = "http://127.0.0.1:8787"
TERMINATOR = {
    "openai.chat": "data: [DONE]",
    "openai.completions": "data: [DONE]",
    "openai.responses": "response.completed",
    "anthropic.messages": "message_stop",
}
SEVERITY_ORDER = {"error": 0, "warn": 1, "info": 2}
QUOTE_CHARS = 300


class Ctx:
    """One request's diagnosis in progress: settings, history, and the findings so far."""

    def __init__(self, rec: Any, context: Any = None) -> None:
        self.rec = rec
        settings = getattr(context, "settings", None)
        self.settings = settings
        self.stall_ms = float(_num(getattr(settings, "stall_ms", None), 1000.0))
        self.warn_prompt_tokens = int(_num(getattr(settings, "warn_prompt_tokens", None), 0))
        self.proxy_url = (getattr(settings, "proxy_url", None) or getattr(context, "proxy_url", None)
                          or DEFAULT_PROXY_URL).rstrip("/")
        self._recent_of = getattr(context, "recent", None)
        self._recent: list[Any] | None = None
        # where this request's prompt stopped matching the previous one of its conversation
        # (the analysis thread's ``prompt_change``, only for this very record)
        change = getattr(context, "prompt_change", None)
        self.prompt_change: dict[str, Any] | None = (
            change if isinstance(change, dict) and change.get("id") == getattr(rec, "id", None) else None)
        self.findings: list[dict[str, Any]] = []

    @property
    def recent(self) -> list[Any]:
        """Earlier finished records, newest last (copied on first use: most requests never ask)."""
        if self._recent is None:
            try:
                self._recent = list(self._recent_of) if self._recent_of is not None else []
            except Exception:
                self._recent = []
        return self._recent

    # -- findings ---------------------------------------------------------------------
    def add(self, code: str, severity: str, **params: Any) -> None:
        self.findings.append({"code": code, "severity": severity, "params": _jsonable(params)})

    def has(self, *codes: str) -> bool:
        """Whether any of ``codes`` was found already."""
        return any(f["code"] in codes for f in self.findings)

    def errors(self) -> list[str]:
        return [f["code"] for f in self.findings if f["severity"] == "error"]

    # -- facts of the request -----------------------------------------------------------
    @property
    def status(self) -> int | None:
        return self.rec.status

    def common(self) -> dict[str, Any]:
        """Params nearly every message uses."""
        rec = self.rec
        host, port, scheme, prefix = self.target()
        return {"host": host, "port": port, "status": rec.status, "api": rec.api,
                "upstream": rec.upstream, "url": rec.upstream_url, "path": client_path(rec)}

    def target(self) -> tuple[str, int | None, str, str]:
        """(host, port, scheme, upstream path prefix) of where the request went."""
        rec = self.rec
        u = urlsplit(rec.upstream_url or rec.upstream or "")
        host = u.hostname or "upstream"
        try:
            port = u.port
        except ValueError:
            port = None
        scheme = u.scheme or "http"
        if port is None:
            port = 443 if scheme == "https" else 80
        prefix = urlsplit(rec.upstream or "").path.rstrip("/")
        return host, port, scheme, prefix

    def mount(self) -> str:
        route = self.rec.route
        return "" if route in (None, "", "default") else "/" + route

    def key_env(self) -> str:
        return "ANTHROPIC_API_KEY" if self.is_anthropic() else "OPENAI_API_KEY"

    def family(self) -> str:
        """Which client family sent this request: 'anthropic' or 'openai'."""
        rec = self.rec
        if rec.api == "other":  # not recognised: judge by the path and the key header
            p = (rec.path or "").split("?", 1)[0]
            if re.search(r"/messages(/|$)", p) or (rec.key_header or "").startswith("x-api-key"):
                return "anthropic"
            return "openai"
        return routing.family_of_api(rec.api)

    def is_anthropic(self) -> bool:
        return self.family() == "anthropic"

    def base_env(self) -> str:
        return routing.base_url_env(self.family())

    def route(self) -> routing.Route | None:
        """The route this request went through, rebuilt from the record."""
        return routing.record_route(self.rec.route, self.rec.upstream)

    def good_base(self) -> str:
        """The base URL the client should set to reach this route (the one base-URL rule)."""
        return routing.client_base_url(self.proxy_url, self.route(), self.family())

    def baseline(self, field: str) -> tuple[float | None, int]:
        """Median of ``field`` over earlier healthy warm records of the same model (and count)."""
        rec = self.rec
        model, rid = rec.model, rec.id
        vals = []
        for r in self.recent:  # up to 500 records a call: plain attribute reads where they exist
            try:
                if r.model != model or r.status != 200 or r.conn_reused is False or r.id == rid:
                    continue
                v = getattr(r, field)
            except AttributeError:  # not a Record: a missing attribute counts as None
                if (getattr(r, "model", None) != model or getattr(r, "status", None) != 200
                        or getattr(r, "conn_reused", None) is False or getattr(r, "id", None) == rid):
                    continue
                v = getattr(r, field, None)
            if isinstance(v, (int, float)):
                vals.append(v)
        if len(vals) < BASELINE_MIN_SAMPLES:
            return None, len(vals)
        return float(statistics.median(vals)), len(vals)


def client_path(rec: Any) -> str:
    return (rec.path or "").split("?", 1)[0]


def upstream_path(rec: Any) -> str:
    return urlsplit(rec.upstream_url or "").path or client_path(rec)


_MASKED = re.compile(r"[\w\-\"']{0,10}\*{4,}[\w\-\"'\\]{0,10}")
_LONG_TOKEN = re.compile(r"(?<![\w/.-])(?=[A-Za-z0-9_\-]*\d)(?=[A-Za-z0-9_\-]*[A-Za-z])[A-Za-z0-9_\-]{40,}(?![\w/.-])")


def quote(text: Any, limit: int = QUOTE_CHARS) -> str | None:
    """Server text safe to store in a finding: keys (full or masked) removed, one line, capped."""
    if text is None:
        return None
    s = redact_text(str(text))
    s = _MASKED.sub("[REDACTED]", s)
    s = _LONG_TOKEN.sub("[REDACTED]", s)
    s = " ".join(s.split())
    return s if len(s) <= limit else s[: limit - 1] + "…"


def server_text(rec: Any) -> str:
    """The upstream's own error text, quoted; empty when it sent none."""
    return quote(rec.upstream_error) or ""


def has_any(text: str | None, words: Iterable[str]) -> bool:
    t = (text or "").lower()
    return any(w in t for w in words)


def _num(v: Any, default: float) -> float:
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) else default


def _jsonable(v: Any) -> Any:
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple, set)):
        return [_jsonable(x) for x in v]
    if isinstance(v, float):
        return round(v, 3)
    if v is None or isinstance(v, (str, int, bool)):
        return v
    return str(v)


def to_int(s: str | None) -> int | None:
    """'128,000' / '8192' -> int; anything else -> None."""
    if not s:
        return None
    try:
        return int(s.replace(",", "").replace("_", ""))
    except ValueError:
        return None


def first_int(text: str | None, patterns: Iterable[str]) -> int | None:
    """The first group of the first pattern that matches ``text`` (case-insensitive), as an int."""
    for pat in patterns:
        m = re.search(pat, text or "", re.IGNORECASE)
        if m:
            v = to_int(m.group(1))
            if v is not None:
                return v
    return None


def largest_part(rec: Any) -> tuple[str, int | None]:
    """(label code, tokens) of the largest part of the prompt: system, tools, history, last_user."""
    system = rec.system_tokens or 0
    tools = rec.tools_tokens or 0
    last = rec.last_user_tokens or 0
    total = rec.prompt_tokens_est or 0
    parts = {"system": system, "tools": tools, "last_user": last, "history": max(0, total - system - tools - last)}
    label = max(parts, key=lambda k: parts[k])
    return label, (parts[label] if total else None)
