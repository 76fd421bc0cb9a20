"""Every finding code, in English and Chinese: severity, title, when it fires, message and hint.

A finding stores ``code`` + ``params`` (the facts of the request); ``render`` turns them into
the one-line message and the concrete hint in either language, so stored findings can be
re-rendered later (``firsttoken show --lang zh``). Templates use ``str.format`` fields named
after params; an entry may have *variants* (a dict of templates chosen by
``params["variant"]``). Params named in ``LABELLED`` are codes translated through ``LABELS``.
The texts live in one module per family (``auth.py``, ``paths.py``, ...),
assembled here in the order of ``FAMILIES``; this module is the catalog's only API.
``docs/diagnoses.md`` is generated from it (``firsttoken diagnoses --markdown``).
"""

from __future__ import annotations

import logging
import re
import string
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from firsttoken.addon.diagnose import auth, cache, connectivity, latency, limits, paths, streams
from firsttoken.addon.diagnose.context import SEVERITY_ORDER, Ctx, DiagnosisInput
from firsttoken.addon.hops import HOP_LABELS
from firsttoken.addon.secrets import KEY_FACT_TEXT

LANGS = ("en", "zh")
SEVERITIES = ("error", "warn", "info")
#: params whose values are label codes (or lists of them), shown translated
LABELLED = ("facts", "largest", "hop_fix", "who", "setting")

#: family -> (en, zh) heading, in the order rules run and docs list them
FAMILIES: dict[str, tuple[str, str]] = {
    "auth": ("Authentication", "认证"),
    "paths": ("Paths and models", "路径与模型"),
    "limits": ("Request limits and upstream errors", "请求限制与上游错误"),
    "connectivity": ("Connectivity", "连接"),
    "streams": ("Streams and response bodies", "流与响应体"),
    "latency": ("Latency verdicts and prompt size", "延迟判定与提示词大小"),
    "cache": ("Prompt cache", "提示词缓存"),
}

#: label codes used inside params (key facts, prompt parts)
LABELS: dict[str, dict[str, str]] = {
    **KEY_FACT_TEXT,  # key facts: the words doctor uses too
    **HOP_LABELS,  # each hop's own fix for a stream it buffers, "hop.unnamed" (stream.buffered)
    "system": {"en": "the system prompt", "zh": "系统提示词"},
    "tools": {"en": "the tool definitions", "zh": "工具定义"},
    "history": {"en": "the earlier turns", "zh": "之前的对话轮次"},
    "last_user": {"en": "the last user message", "zh": "最后一条用户消息"},
    # where an upstream came from (connectivity.setting): the option the user gave, or what `run` read
    "setting.upstream": {"en": "--upstream", "zh": "--upstream"},
    "setting.run": {"en": "the client's base URL (which `firsttoken run` read from its settings)",
                    "zh": "客户端的 base URL（`firsttoken run` 从其设置中读取）"},
}

# (code, family, usual severity, other possible severities, {lang: (title, when, message, hint)}),
# family by family, in the order rules run and docs list them
ENTRIES: list[tuple[str, str, str, tuple[str, ...], dict[str, tuple[Any, Any, Any, Any]]]] = [
    *auth.ENTRIES,
    *paths.ENTRIES,
    *limits.ENTRIES,
    *connectivity.ENTRIES,
    *streams.ENTRIES,
    *latency.ENTRIES,
    *cache.ENTRIES,
]


@dataclass(frozen=True)
class Entry:
    code: str
    family: str
    severity: str  # the usual severity
    also: tuple[str, ...]  # other severities a rule may give it, depending on the request
    title: dict[str, str]
    when: dict[str, str]
    message: dict[str, Any]  # lang -> template, or lang -> {variant: template}
    hint: dict[str, Any]
    variants: tuple[str, ...] = field(default=())

    @property
    def severities(self) -> tuple[str, ...]:
        return (self.severity,) + tuple(s for s in self.also if s != self.severity)


def _build() -> dict[str, Entry]:
    out: dict[str, Entry] = {}
    for code, family, severity, also, texts in ENTRIES:
        if code in out:
            raise ValueError(f"duplicate catalog code {code}")
        title, when, message, hint = {}, {}, {}, {}
        for lang in LANGS:
            t = texts.get(lang)
            if t is None:
                continue
            title[lang], when[lang], message[lang], hint[lang] = t
        variants: list[str] = []
        for tmpl in list(message.values()) + list(hint.values()):
            if isinstance(tmpl, dict):
                variants += [v for v in tmpl if v not in variants]
        out[code] = Entry(code, family, severity, tuple(also), title, when, message, hint, tuple(variants))
    return out


CATALOG: dict[str, Entry] = _build()


class _Lenient(string.Formatter):
    """Missing fields and values that don't fit their format spec never raise."""

    def get_value(self, key, args, kwargs):
        if isinstance(key, str):
            return kwargs.get(key)
        return super().get_value(key, args, kwargs)

    def format_field(self, value, format_spec):
        if value is None:
            return "?"
        try:
            return super().format_field(value, format_spec)
        except (ValueError, TypeError):
            return str(value)


_FMT = _Lenient()


def _label(value: Any, lang: str) -> str:
    if isinstance(value, (list, tuple)):
        sep = "、" if lang == "zh" else ", "
        return sep.join(_label(v, lang) for v in value)
    entry = LABELS.get(value) if isinstance(value, str) else None
    return entry.get(lang, entry["en"]) if entry else str(value)


def _pick(tmpl: Any, variant: Any) -> str:
    if isinstance(tmpl, dict):
        if variant in tmpl:
            return tmpl[variant]
        return next(iter(tmpl.values()))
    return tmpl


def template(code: str, part: str, lang: str, variant: str | None = None) -> str:
    """The raw template of ``part`` ("message" / "hint" / "title" / "when")."""
    e = CATALOG[code]
    texts = getattr(e, part)
    return _pick(texts.get(lang) or texts["en"], variant)


def fields(tmpl: str) -> set[str]:
    """Names of the params a template uses."""
    return {name.split(".")[0].split("[")[0] for _, name, _, _ in string.Formatter().parse(tmpl) if name}


def render(code: str, params: dict[str, Any] | None, lang: str = "en") -> tuple[str, str]:
    """(message, hint) of a finding in ``lang``; unknown codes render as the code itself."""
    params = dict(params or {})
    lang = lang if lang in LANGS else "en"
    entry = CATALOG.get(code)
    if entry is None:
        return code, ""
    for k in LABELLED:
        if k in params:
            params[k] = _label(params[k], lang)
    variant = params.get("variant")
    msg = _format(template(code, "message", lang, variant), params)
    hint = _format(template(code, "hint", lang, variant), params)
    return msg, hint


#: template -> the params it names (None: fields the fast path does not handle, e.g. ``{a.b}``, ``{}``)
_NAMES: dict[str, tuple[str, ...] | None] = {}
_SIMPLE_FIELD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _names(tmpl: str) -> tuple[str, ...] | None:
    names: list[str] = []
    for _, name, spec, conversion in string.Formatter().parse(tmpl):
        if name is None:
            continue
        if not _SIMPLE_FIELD.fullmatch(name) or conversion is not None or "{" in (spec or ""):
            return None
        names.append(name)
    return tuple(dict.fromkeys(names))


def _format(tmpl: str, params: dict[str, Any]) -> str:
    """``_FMT.format(tmpl, **params)``: in C (``str.format_map``) when every field it names has a
    value that formats; else leniently, field by field."""
    try:
        names = _NAMES[tmpl]
    except KeyError:
        try:
            names = _names(tmpl)
        except ValueError:  # not a valid template: the lenient formatter says how
            names = None
        if len(_NAMES) < 4096:
            _NAMES[tmpl] = names
    if names is not None:
        get = params.get
        for n in names:
            if get(n) is None:  # missing or None: shown as "?"
                break
        else:
            try:
                return tmpl.format_map(params)
            except (ValueError, TypeError):  # a value that does not fit its format spec
                pass
    return _FMT.format(tmpl, **params)


def when(code: str, lang: str = "en") -> str:
    """When the code fires, with the thresholds filled in."""
    from firsttoken.addon.diagnose.thresholds import THRESHOLDS

    values = {name: value for name, value, _, _ in THRESHOLDS}
    return _FMT.format(template(code, "when", lang), **values)


def title(code: str, lang: str = "en") -> str:
    e = CATALOG.get(code)
    if e is None:
        return code
    return e.title.get(lang) or e.title["en"]


def render_finding(finding: dict[str, Any], lang: str) -> dict[str, Any]:
    """A stored finding with message and hint re-rendered in ``lang`` (other keys kept)."""
    out = dict(finding)
    if finding.get("code") in CATALOG:
        out["message"], out["hint"] = render(finding["code"], finding.get("params") or {}, lang)
    return out


__all__ = ["CATALOG", "Entry", "FAMILIES", "LABELS", "LANGS", "SEVERITIES", "fields", "render",
           "render_finding", "template", "title", "when"]


# ---- The rule engine: run every family in order over one finished record, render the findings.

log = logging.getLogger("firsttoken")

Rule = Callable[[Any, Ctx], None]

ORDER: tuple[Rule, ...] = (
    *connectivity.RULES,
    *paths.RULES,
    *limits.RULES,
    *auth.RULES,
    *limits.FALLBACKS,
    *paths.FALLBACKS,
    *streams.RULES,
    *cache.RULES,
    *latency.RULES,
)


def collect(rec: Any, inp: DiagnosisInput) -> list[dict[str, Any]]:
    """Raw findings (code, severity, params) in rule order; a failing rule is logged and skipped."""
    c = Ctx(rec, inp)
    for rule in ORDER:
        try:
            rule(rec, c)
        except Exception:  # a rule bug must never cost the record
            log.exception("firsttoken: diagnosis rule %s failed on %s", rule.__name__, getattr(rec, "id", "?"))
    return c.findings


def run_rules(rec: Any, inp: DiagnosisInput) -> list[dict[str, Any]]:
    """Findings with message and hint rendered in ``inp.lang``, most severe first (stable within a severity)."""
    if not isinstance(inp, DiagnosisInput):
        raise TypeError(f"diagnose needs a DiagnosisInput, not {type(inp).__name__}")
    lang = inp.lang
    out = []
    for f in collect(rec, inp):
        message, hint = render(f["code"], f["params"], lang)
        out.append({"code": f["code"], "severity": f["severity"], "message": message, "hint": hint,
                    "params": f["params"]})
    return sorted(out, key=lambda f: SEVERITY_ORDER.get(f["severity"], 9))
