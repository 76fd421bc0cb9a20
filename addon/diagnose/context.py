"""What every rule family shares: the frozen input, the per-request context and small helpers.

Rules are pure functions ``rule(rec, c) -> None`` that call ``c.add(code, severity, **params)``;
``c`` also answers what earlier rules already found (one root cause -> one error).
Messages are rendered from the catalog at the end (see engine.py).
"""

from __future__ import annotations

import bisect
import collections
import functools
import html
import re
import statistics
import threading
import types
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from firsttoken.addon import routing
from firsttoken.addon.apis import gemini
from firsttoken.addon.diagnose.lang import resolve as resolve_lang
from firsttoken.addon.diagnose.thresholds import BASELINE_MIN_SAMPLES, PROMPT_BANDS
from firsttoken.addon.record import Record
from firsttoken.addon.secrets import redact_text
from firsttoken.addon.store.queries import is_streamed

LLM_APIS = ("openai.chat", "openai.completions", "openai.responses", "anthropic.messages", "anthropic.vertex",
            "anthropic.bedrock", "bedrock.converse", "gemini.generate", "ollama.chat", "ollama.generate")
AUTH_STATUSES = (401, 403)
DEFAULT_PROXY_URL = "http://127.0.0.1:8787"
TERMINATOR = {
    "openai.chat": "data: [DONE]",
    "openai.completions": "data: [DONE]",
    "openai.responses": "response.completed",
    "openai.realtime": "response.done",
    "anthropic.messages": "message_stop",
    "gemini.generate": "a finishReason",
    "anthropic.vertex": "message_stop",
    "anthropic.bedrock": "message_stop",
    "bedrock.converse": "messageStop",
    "ollama.chat": '"done": true',
    "ollama.generate": '"done": true',
}
SEVERITY_ORDER = {"error": 0, "warn": 1, "info": 2}
QUOTE_CHARS = 300


@dataclass(frozen=True)
class DiagnosisInput:
    """Everything the rules read besides the record, fixed before they run (built per request by
    the analysis thread, ``Analyzer.diagnosis_input``; tests build their own), except the engine's
    neighbours, which may be a call the diagnosis makes on that thread if a rule reads them. Values are
    normalised here, so a missing or odd setting means the documented default."""

    stall_ms: float = 1000.0  # a silence longer than this inside a stream is a stall
    warn_prompt_tokens: int = 0  # prompt.large threshold (0: from the model's context window)
    proxy_url: str = DEFAULT_PROXY_URL  # the proxy's own base URL, for the base-URL hints
    lang: str = ""  # language of the findings; "" → $FIRSTTOKEN_LANG, then the locale (lang.resolve)
    #: earlier finished records, newest last; the analysis thread passes its own deque (only that
    #: thread appends to it, and it is the one diagnosing), which the baselines follow incrementally
    recent: Sequence[Any] = ()
    #: where this request's prompt stopped matching the previous one of its conversation
    #: (``conversations.divergence``); applied only when its ``id`` is the record's
    prompt_change: Mapping[str, Any] | None = None
    route_cached: bool = False  # this request's route reported cached prompt tokens before it
    #: the other exchanges to the same engine that overlapped this one (``engines.Span``: ms from its t0), or a
    #: call that returns them (built only if a rule reads them: ``Ctx.neighbours``)
    neighbours: Sequence[Any] | Callable[[], Sequence[Any]] = ()

    def __post_init__(self) -> None:
        fix = functools.partial(object.__setattr__, self)
        fix("stall_ms", float(_num(self.stall_ms, 1000.0)))
        fix("warn_prompt_tokens", int(_num(self.warn_prompt_tokens, 0)))
        fix("proxy_url", (self.proxy_url or DEFAULT_PROXY_URL).rstrip("/"))
        fix("lang", resolve_lang(self.lang))
        fix("recent", () if self.recent is None else self.recent)
        if isinstance(self.prompt_change, dict):
            fix("prompt_change", types.MappingProxyType(self.prompt_change))
        elif not isinstance(self.prompt_change, Mapping):
            fix("prompt_change", None)
        fix("route_cached", bool(self.route_cached))


class Ctx:
    """One request's diagnosis in progress: its input (``DiagnosisInput``) and the findings so far."""

    def __init__(self, rec: Any, inp: DiagnosisInput) -> None:
        self.rec = rec
        self.stall_ms = inp.stall_ms
        self.warn_prompt_tokens = inp.warn_prompt_tokens
        self.proxy_url = inp.proxy_url
        self.route_cached = inp.route_cached
        self._neighbours_of = inp.neighbours
        self._neighbours: tuple[Any, ...] | None = None
        self._recent_of = inp.recent
        self._recent: list[Any] | None = None
        change = inp.prompt_change  # only for this very record
        self.prompt_change: Mapping[str, Any] | None = (
            change if change is not None and change.get("id") == getattr(rec, "id", None) else None)
        self.findings: list[dict[str, Any]] = []
        self._common: dict[str, Any] | None = None

    @property
    def recent(self) -> list[Any]:
        """Earlier finished records, newest last (copied on first use: most requests never ask)."""
        if self._recent is None:
            try:
                self._recent = list(self._recent_of)
            except Exception:
                self._recent = []
        return self._recent

    @property
    def neighbours(self) -> tuple[Any, ...]:
        """The other exchanges to the same engine that overlapped this one (built on first use)."""
        if self._neighbours is None:
            of = self._neighbours_of
            self._neighbours = tuple((of() if callable(of) else of) or ())
        return self._neighbours

    # -- findings ---------------------------------------------------------------------
    def add(self, code: str, severity: str, **params: Any) -> None:
        self.findings.append({"code": code, "severity": severity, "params": _jsonable_params(params)})

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
        """Params nearly every message uses (a fresh dict: callers add to it)."""
        if self._common is None:
            rec = self.rec
            host, port, scheme, prefix = self.target()
            self._common = {"host": host, "port": port, "status": rec.status, "api": rec.api,
                            "upstream": rec.upstream, "url": rec.upstream_url, "path": client_path(rec)}
        return dict(self._common)

    def target(self) -> tuple[str, int | None, str, str]:
        """(host, port, scheme, upstream path prefix) of where the request went."""
        rec = self.rec
        return _target(rec.upstream_url, rec.upstream)

    def mount(self) -> str:
        route = self.rec.route
        return "" if route in (None, "", "default") else "/" + route

    def key_env(self) -> str:
        return {"anthropic": "ANTHROPIC_API_KEY", "gemini": "GEMINI_API_KEY"}.get(self.family(), "OPENAI_API_KEY")

    def family(self) -> str:
        """Which client family sent this request: 'anthropic', 'gemini' or 'openai'."""
        rec = self.rec
        if rec.api == "other":  # not recognised: judge by the path and the key header
            p = (rec.path or "").split("?", 1)[0]
            if gemini.gemini_call("POST", p) is not None or rec.key_header == "x-goog-api-key":
                return "gemini"  # countTokens, embedContent
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
        """Median of ``field`` over earlier healthy warm streamed records of the same model, route and
        prompt-size band (and count): the population of every latency figure (``queries.STREAMED``);
        a 40k-token prompt is never judged against 200-token ones, nor a gateway's route against the
        direct one."""
        rec = self.rec
        group, rid = baseline_group(rec), rec.id
        if type(self._recent_of) is collections.deque:  # the analysis thread's: kept up to date, not rescanned
            found = _baseline_of(self._recent_of, field, group, rid)
            if found is not None:
                return found
        vals = []
        for r in self.recent:  # up to 500 records a call: plain attribute reads where they exist
            try:
                if (r.status != 200 or r.conn_reused is False or r.id == rid or baseline_group(r) != group
                        or not is_streamed(r)):
                    continue
                v = getattr(r, field)
            except AttributeError:  # not a Record: a missing attribute counts as None
                if (getattr(r, "status", None) != 200 or getattr(r, "conn_reused", None) is False
                        or getattr(r, "id", None) == rid or baseline_group(r) != group or not is_streamed(r)):
                    continue
                v = getattr(r, field, None)
            if isinstance(v, (int, float)):
                vals.append(v)
        if len(vals) < BASELINE_MIN_SAMPLES:
            return None, len(vals)
        return float(statistics.median(vals)), len(vals)


def prompt_band(tokens: Any) -> int:
    """The prompt-size band a latency baseline compares within: 0 below the first of
    PROMPT_BANDS (1k tokens), then one band per factor 4; -1 when the size is not known."""
    if not isinstance(tokens, int) or isinstance(tokens, bool):
        return -1
    return bisect.bisect_right(PROMPT_BANDS, tokens)


def baseline_group(r: Any) -> tuple[Any, Any, Any, int]:
    """What a record's latency is compared with: the same model, route (and upstream) and prompt-size band."""
    return (getattr(r, "model", None), getattr(r, "route", None), getattr(r, "upstream", None),
            prompt_band(getattr(r, "prompt_tokens_est", None)))


@functools.lru_cache(maxsize=256)
def _target(upstream_url: str | None, upstream: str | None) -> tuple[str, int | None, str, str]:
    u = urlsplit(upstream_url or upstream or "")
    host = u.hostname or "upstream"
    try:
        port = u.port
    except ValueError:
        port = None
    scheme = u.scheme or "http"
    if port is None:
        port = 443 if scheme == "https" else 80
    prefix = urlsplit(upstream or "").path.rstrip("/")
    return host, port, scheme, prefix


# ---- baselines over the recent records, kept in step with the analysis thread's deque ----------------
#
# ``Ctx.baseline`` is a median over up to 500 earlier records; rescanning them cost ~130 us a request.
# The analysis thread's ``recent`` only ever grows at the right and drops at the left (a deque with a
# maxlen, finished records that no longer change), so a window per deque follows it: each call takes
# in the records appended since the last one and lets go of those dropped, keeping per field and
# model the sorted values that count. Whatever it cannot answer exactly (an entry that is not a
# Record, a NaN, the record itself already in the window) falls back to the scan.

class _Field:
    """One field's values in the window: per model the sorted values of the records that count."""

    def __init__(self) -> None:
        self.by_model: dict[str | None, list[Any]] = {}
        self.values: collections.deque = collections.deque()  # per record: its counted value, or None
        self.nan = 0  # counted values that are NaN (they do not sort)

    def add(self, model: Any, counted: bool, v: Any) -> None:
        if counted and isinstance(v, (int, float)):
            if v != v:
                self.nan += 1
            else:
                bisect.insort(self.by_model.setdefault(model, []), v)
            self.values.append(v)
        else:
            self.values.append(None)

    def drop(self, model: Any) -> None:
        v = self.values.popleft()
        if v is None:
            return
        if v != v:
            self.nan -= 1
            return
        vals = self.by_model[model]
        del vals[bisect.bisect_left(vals, v)]


class _Window:
    """The records of one ``recent`` deque and, per field asked for, the values a baseline needs."""

    def __init__(self, src: collections.deque) -> None:
        key = id(src)
        self.ref = weakref.ref(src, lambda _r: _WINDOWS.pop(key, None))
        self.reset()

    def reset(self) -> None:
        self.records: collections.deque = collections.deque()
        self.keys: collections.deque = collections.deque()  # per record: (model, counted, id), or None if odd
        self.ids: dict[str, int] = {}
        self.odd = 0  # records the window cannot judge by itself (not a Record, odd model or id)
        self.fields: dict[str, _Field] = {}

    def sync(self, src: collections.deque) -> None:
        """Take in what was appended to ``src`` since the last call, drop what it dropped."""
        records = self.records
        n, m = len(src), len(records)
        if n and m:
            last = records[-1]
            k = -1
            for j in range(1, n + 1):  # most calls find it at once: one record was appended
                if src[-j] is last:
                    k = j - 1
                    break
            drop = m + k - n
            if k >= 0 and drop >= 0:
                for _ in range(drop):
                    self._drop()
                for j in range(n - k, n):
                    self._add(src[j])
                try:
                    if records == src:  # identity first, in C: the window is src's, record for record
                        return
                except Exception:  # an entry whose == raises: start over
                    pass
        self.reset()
        for r in list(src):
            self._add(r)

    def _add(self, r: Any) -> None:
        self.records.append(r)
        if type(r) is not Record or not isinstance(r.id, str) or (r.model is not None and type(r.model) is not str) \
                or (r.route is not None and type(r.route) is not str) or (r.upstream is not None and type(r.upstream) is not str):
            self.keys.append(None)
            self.odd += 1
            for f in self.fields.values():
                f.values.append(None)
            return
        model, counted, rid = baseline_group(r), r.status == 200 and r.conn_reused is not False and is_streamed(r), r.id
        self.keys.append((model, counted, rid))
        self.ids[rid] = self.ids.get(rid, 0) + 1
        for name, f in self.fields.items():
            f.add(model, counted, getattr(r, name, None))

    def _drop(self) -> None:
        self.records.popleft()
        key = self.keys.popleft()
        if key is None:
            self.odd -= 1
            for f in self.fields.values():
                f.values.popleft()
            return
        rid = key[2]
        left = self.ids[rid] - 1
        if left:
            self.ids[rid] = left
        else:
            del self.ids[rid]
        for f in self.fields.values():
            f.drop(key[0])

    def field(self, name: str) -> _Field:
        f = self.fields.get(name)
        if f is None:
            f = self.fields[name] = _Field()
            for r, key in zip(self.records, self.keys):
                if key is None:
                    f.values.append(None)
                else:
                    f.add(key[0], key[1], getattr(r, name, None))
        return f


_WINDOWS: dict[int, _Window] = {}
_WINDOWS_LOCK = threading.Lock()


def _baseline_of(src: collections.deque, field: str, model: Any, rid: Any) -> tuple[float | None, int] | None:
    """``Ctx.baseline`` from the window that follows ``src``; None when only the scan can tell.
    ``model`` is the record's ``baseline_group`` (the window keeps its values per group)."""
    if any(v is not None and type(v) is not str for v in model[:3]) or type(rid) is not str:
        return None
    with _WINDOWS_LOCK:
        w = _WINDOWS.get(id(src))
        if w is None or w.ref() is not src:
            while len(_WINDOWS) >= 16:
                _WINDOWS.pop(next(iter(_WINDOWS)), None)
            w = _WINDOWS[id(src)] = _Window(src)
        w.sync(src)
        f = w.field(field)
        if w.odd or f.nan or rid in w.ids:
            return None
        vals = f.by_model.get(model) or ()
        n = len(vals)
        if n < BASELINE_MIN_SAMPLES:
            return None, n
        i = n // 2
        return float(vals[i] if n % 2 else (vals[i - 1] + vals[i]) / 2), n


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
    """The upstream's own error text, quoted; empty when it sent none. An error response whose
    body is not JSON (a gateway's HTML page, a plain-text 429) says what its text says."""
    said = quote(rec.upstream_error)
    if not said and rec.status is not None and rec.status >= 400 and rec.malformed_sample:
        said = quote(readable(rec.malformed_sample))
    return said or ""


_TITLE = re.compile(r"<title[^>]*>(.*?)</title>", re.I | re.S)
_H1 = re.compile(r"<h1[^>]*>(.*?)</h1>", re.I | re.S)
_NOT_TEXT = re.compile(r"<(script|style)[^>]*>.*?(</\1>|$)|<!--.*?(-->|$)", re.I | re.S)
_TAG = re.compile(r"<[^>]*>?")
_HTML = re.compile(r"<(!doctype|html|head|body|title|h1|p|div|center|pre)\b", re.I)


def readable(text: str | None) -> str:
    """Body text as a person would read it: an HTML page's title (and first heading), else its
    text without tags, scripts and styles; plain text as it is. One line."""
    if not text:
        return ""
    odd = sum(1 for ch in text if ch == "\ufffd" or (ch < " " and ch not in "\t\r\n"))
    if odd > len(text) // 4:
        return f"binary data, not text ({odd} of its first {len(text)} characters are not text)"
    if _HTML.search(text):
        parts = [m.group(1) for m in (_TITLE.search(text), _H1.search(text)) if m]
        parts = [" ".join(_TAG.sub(" ", p).split()) for p in parts]
        if not parts:
            parts = [_TAG.sub(" ", _NOT_TEXT.sub(" ", text))]
        text = html.unescape(" — ".join(dict.fromkeys(p for p in parts if p)))  # title and heading, once each
    return " ".join(text.split())


def has_any(text: str | None, words: Iterable[str]) -> bool:
    t = (text or "").lower()
    return any(w in t for w in words)


def _num(v: Any, default: float) -> float:
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) else default


def _jsonable_params(params: dict[str, Any]) -> dict[str, Any]:
    """``_jsonable`` of a finding's params: the flat values most are, without a call each."""
    out = {}
    for k, v in params.items():
        t = type(v)
        if t is str or t is int or v is None or t is bool:
            out[k] = v
        elif t is float:
            out[k] = round(v, 3)
        else:
            out[k] = _jsonable(v)
    return out


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
