"""What every rule family shares: thresholds, the per-request context, and small helpers.

Rules are pure functions ``rule(rec, c) -> None`` that call ``c.add(code, severity, **params)``;
``c`` also answers what earlier rules already found (one root cause -> one error).
Messages are rendered from the catalog at the end (see rules.py).
"""

from __future__ import annotations

import re
import statistics
from typing import Any, Iterable
from urllib.parse import urlsplit

from ..secrets import redact_text

# ---- thresholds (documented in docs/diagnoses.md, generated from THRESHOLDS) -----------------

#: stream.buffered: at least this share of the token events ...
BUFFERED_SHARE = 0.9
#: ... (and at least this many events) ...
BUFFERED_MIN_EVENTS = 8
#: ... arrived within this many ms, or this share of the response's duration, whichever is larger ...
BUFFERED_WINDOW_MS = 50.0
BUFFERED_WINDOW_SHARE = 0.10
#: ... at a rate no model generates (mean gap between them below this) ...
BUFFERED_MAX_MEAN_GAP_MS = 1.0
#: ... after the client had waited at least this long after the headers.
BUFFERED_MIN_WAIT_MS = 200.0
#: latency.network: TTFB above this, and at least half of TTFT
NETWORK_TTFB_MS = 1000.0
#: latency.network (baseline): TTFB above this multiple of the model's recent median TTFB ...
NETWORK_BASELINE_RATIO = 3.0
#: ... from at least this many earlier healthy, warm requests of the same model ...
BASELINE_MIN_SAMPLES = 5
#: ... and above this many ms.
NETWORK_BASELINE_FLOOR_MS = 300.0
#: latency.prefill: gap (TTFT - TTFB) above this, more than half of TTFT ...
PREFILL_GAP_MS = 1000.0
#: ... for a prompt of at least this many tokens.
PREFILL_MIN_TOKENS = 2000
#: latency.reasoning: reasoning ran at least this long before the first visible token ...
REASONING_MS = 500.0
#: ... and took at least this share of TTFT.
REASONING_SHARE = 0.3
#: latency.cold_connection: a new upstream connection took at least this long.
COLD_CONNECT_MS = 200.0
#: prompt.repeated_prefix: stable prefix of at least this many tokens, seen before in the run.
REPEATED_PREFIX_TOKENS = 1024
#: latency.network: connecting must not explain more than this share of TTFB
CONNECT_SHARE = 0.5

THRESHOLDS: list[tuple[str, Any, str, str]] = [
    ("BUFFERED_SHARE", BUFFERED_SHARE, "stream.buffered: share of token events arriving together at the end", "stream.buffered：在末尾集中到达的 token 事件比例"),
    ("BUFFERED_MIN_EVENTS", BUFFERED_MIN_EVENTS, "stream.buffered: minimum token events", "stream.buffered：最少 token 事件数"),
    ("BUFFERED_WINDOW_MS", BUFFERED_WINDOW_MS, "stream.buffered: burst window (ms), or BUFFERED_WINDOW_SHARE of the response if larger", "stream.buffered：集中到达的时间窗（毫秒），或响应时长的 BUFFERED_WINDOW_SHARE（取较大者）"),
    ("BUFFERED_WINDOW_SHARE", BUFFERED_WINDOW_SHARE, "stream.buffered: burst window as a share of the response duration", "stream.buffered：时间窗占响应时长的比例"),
    ("BUFFERED_MAX_MEAN_GAP_MS", BUFFERED_MAX_MEAN_GAP_MS, "stream.buffered: mean gap inside the burst below this (ms): faster than any model generates", "stream.buffered：集中段内平均间隔低于此值（毫秒），快于任何模型的生成速度"),
    ("BUFFERED_MIN_WAIT_MS", BUFFERED_MIN_WAIT_MS, "stream.buffered: the client waited at least this long after the headers (ms)", "stream.buffered：响应头之后客户端至少空等了这么久（毫秒）"),
    ("NETWORK_TTFB_MS", NETWORK_TTFB_MS, "latency.network: TTFB above this (ms) and at least half of TTFT", "latency.network：TTFB 超过此值（毫秒）且至少占 TTFT 的一半"),
    ("NETWORK_BASELINE_RATIO", NETWORK_BASELINE_RATIO, "latency.network: TTFB above this multiple of the model's recent median", "latency.network：TTFB 超过该模型近期中位数的倍数"),
    ("BASELINE_MIN_SAMPLES", BASELINE_MIN_SAMPLES, "latency.network: earlier warm 200 requests of the same model needed for a median", "latency.network：计算中位数所需的同模型、已热连接的 200 请求数"),
    ("NETWORK_BASELINE_FLOOR_MS", NETWORK_BASELINE_FLOOR_MS, "latency.network: baseline verdicts only above this TTFB (ms)", "latency.network：基于基线的判定只在 TTFB 超过此值（毫秒）时给出"),
    ("CONNECT_SHARE", CONNECT_SHARE, "latency.network: not when connecting explains more than this share of TTFB", "latency.network：建立连接占 TTFB 超过此比例时不判定"),
    ("PREFILL_GAP_MS", PREFILL_GAP_MS, "latency.prefill: gap (TTFT - TTFB) above this (ms) and more than half of TTFT", "latency.prefill：间隔（TTFT - TTFB）超过此值（毫秒）且超过 TTFT 的一半"),
    ("PREFILL_MIN_TOKENS", PREFILL_MIN_TOKENS, "latency.prefill: prompt of at least this many tokens", "latency.prefill：提示词至少这么多 token"),
    ("REASONING_MS", REASONING_MS, "latency.reasoning: reasoning before the first visible token (ms)", "latency.reasoning：首个可见 token 之前的推理时间（毫秒）"),
    ("REASONING_SHARE", REASONING_SHARE, "latency.reasoning: minimum share of TTFT", "latency.reasoning：占 TTFT 的最小比例"),
    ("COLD_CONNECT_MS", COLD_CONNECT_MS, "latency.cold_connection: new connection took at least this long (ms)", "latency.cold_connection：新建连接至少耗时（毫秒）"),
    ("REPEATED_PREFIX_TOKENS", REPEATED_PREFIX_TOKENS, "prompt.repeated_prefix: stable prefix of at least this many tokens", "prompt.repeated_prefix：稳定前缀至少这么多 token"),
    ("--stall-ms", 1000, "stream.stall: longest gap between token events above this (ms); proxy option, default shown", "stream.stall：token 事件间最长间隔超过此值（毫秒）；代理选项，此处为默认值"),
    ("--warn-prompt-tokens", 8000, "prompt.large: counted prompt above this; proxy option, default shown", "prompt.large：统计的提示词超过此值；代理选项，此处为默认值"),
]

LLM_APIS = ("openai.chat", "openai.completions", "openai.responses", "anthropic.messages")
AUTH_STATUSES = (401, 403)
DEFAULT_PROXY_URL = "http://127.0.0.1:8787"
#: the path each SDK appends to its base URL
SDK_SUFFIX = {
    "openai.chat": "/chat/completions",
    "openai.completions": "/completions",
    "openai.responses": "/responses",
    "anthropic.messages": "/v1/messages",
}
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
        self.warn_prompt_tokens = int(_num(getattr(settings, "warn_prompt_tokens", None), 8000))
        self.proxy_url = (getattr(settings, "proxy_url", None) or getattr(context, "proxy_url", None)
                          or DEFAULT_PROXY_URL).rstrip("/")
        recent = getattr(context, "recent", None)
        try:
            self.recent = list(recent) if recent is not None else []
        except Exception:
            self.recent = []
        self.findings: list[dict[str, Any]] = []

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

    def base_env(self) -> str:
        return "ANTHROPIC_BASE_URL" if self.is_anthropic() else "OPENAI_BASE_URL"

    def is_anthropic(self) -> bool:
        rec = self.rec
        if rec.api == "anthropic.messages":
            return True
        if rec.api == "other":
            p = (rec.path or "").split("?", 1)[0]
            return bool(re.search(r"/messages(/|$)", p)) or (rec.key_header or "").startswith("x-api-key")
        return False

    def good_base(self) -> str:
        """The base URL the client should use to reach this route with one /v1."""
        _, _, _, prefix = self.target()
        base = self.proxy_url + self.mount()
        if self.is_anthropic():
            return base
        return base if prefix.endswith("/v1") else base + "/v1"

    def baseline(self, field: str) -> tuple[float | None, int]:
        """Median of ``field`` over earlier healthy warm records of the same model (and count)."""
        rec = self.rec
        vals = [getattr(r, field, None) for r in self.recent
                if getattr(r, "model", None) == rec.model and getattr(r, "status", None) == 200
                and getattr(r, "conn_reused", None) is not False and getattr(r, "id", None) != rec.id]
        vals = [v for v in vals if isinstance(v, (int, float))]
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
