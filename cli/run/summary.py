"""`firsttoken run`: the summary printed when the child exits, a pure function of its records, and the
advice when nothing came through. What it shows: docs/run.md (The summary; When nothing came through)."""

from __future__ import annotations

import collections
import json
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from firsttoken.addon.record import prompt_count
from firsttoken.addon.store.queries import is_model_call
from firsttoken.cli import output

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(text: Any) -> str:
    """Text from a request or response, safe for a terminal: control characters become '?'."""
    return _CONTROL.sub("?", str(text)).replace("\n", " ")


@dataclass
class Finding:
    code: str
    severity: str
    count: int
    message: str
    hint: str | None


@dataclass
class Summary:
    run_id: str
    count: int = 0
    errors: int = 0
    in_flight: int = 0
    models: list[tuple[str, int]] = field(default_factory=list)  # most used first
    ttfb: tuple[float, float] | None = None  # (P50, P95) ms, over the streamed requests (the stats engine's)
    ttft: tuple[float, float] | None = None
    gap: tuple[float, float] | None = None
    whole: tuple[float, float] | None = None  # the non-streamed ones that were answered: time to the whole answer
    not_model_calls: int = 0  # recorded, but no model call (a probe, a model list: queries.is_model_call)
    prompt_tokens: int = 0
    prompt_estimated: bool = False  # some prompts had no server usage: our estimate counted
    cached_tokens: int = 0
    output_tokens: int = 0
    output_estimated: bool = False  # some outputs had no server usage: our estimate counted
    findings: list[Finding] = field(default_factory=list)

    @property
    def cached_share(self) -> float | None:
        return self.cached_tokens / self.prompt_tokens if self.prompt_tokens else None


def _pair_of(figure: Mapping[str, Any] | None) -> tuple[float, float] | None:
    if not figure or not figure.get("n") or figure.get("p50") is None:
        return None
    return figure["p50"], figure["p95"]


def summarize(run_id: str, rows: list[dict[str, Any]], figures: Mapping[str, Any] | None = None) -> Summary:
    """The run's summary: its model calls' counts and percentiles from ``figures``, the stats engine's
    group of this run (``stats_queries.overall``: the figures `stats --run ID` prints); the models,
    tokens and findings from its rows (those that are model calls)."""
    calls = [r for r in rows if is_model_call(r)]
    s = Summary(run_id, count=len(calls), not_model_calls=len(rows) - len(calls))
    if figures:
        s.count, s.errors, s.in_flight = figures["count"], figures["errors"], figures["in_flight"]
        s.ttfb, s.ttft, s.gap, s.whole = (_pair_of(figures.get(k)) for k in ("ttfb_ms", "ttft_ms", "gap_ms", "whole_ms"))
    rows = calls
    s.models = collections.Counter(r["model"] for r in rows if r.get("model")).most_common()
    for r in rows:
        n, reported, _ = prompt_count(r)
        if n is not None:
            s.prompt_tokens += n
            s.prompt_estimated |= not reported
        s.cached_tokens += r.get("usage_cached_tokens") or 0
        out = r.get("usage_completion_tokens")
        if out is None and r.get("output_tokens_est") is not None:
            s.output_estimated = True
        s.output_tokens += out if out is not None else (r.get("output_tokens_est") or 0)
    seen: dict[str, Finding] = {}
    for r in rows:
        for f in r.get("findings") or []:
            if not isinstance(f, dict) or not f.get("code"):
                continue
            if f["code"] in seen:
                seen[f["code"]].count += 1
            else:
                seen[f["code"]] = Finding(f["code"], f.get("severity") or "info", 1, f.get("message") or "", f.get("hint"))
    order = {"error": 0, "warn": 1, "info": 2}
    s.findings = sorted(seen.values(), key=lambda f: (order.get(f.severity, 3), -f.count))
    return s


def _pair(name: str, v: tuple[float, float] | None) -> str:
    return f"{name} P50 {output.ms(v[0])} P95 {output.ms(v[1])}" if v else f"{name} –"


def forward_can_help(upstream_url: str) -> bool:
    """Whether forward mode (HTTPS_PROXY and mitmproxy's CA) can record a client going to
    ``upstream_url``: only for HTTPS to a host off this machine. A plain-HTTP or loopback upstream
    (vLLM, Ollama, a LiteLLM proxy on localhost) is not reached through HTTPS_PROXY: clients send
    loopback and most plain-HTTP traffic directly (NO_PROXY, or no proxy support for http://)."""
    from urllib.parse import urlsplit

    from firsttoken.addon.forward import is_loopback

    u = urlsplit(upstream_url)
    return u.scheme == "https" and bool(u.hostname) and not is_loopback(u.hostname)


def mode_notes(plan: Any, forward_reason: str | None, recorded: bool = False) -> list[str]:
    """The plan's notes for the mode the run is in: the one rule for whether a note suggests a mode.

    Redirected (reverse mode), the notes about the redirect, then what it leaves unrecorded, each with
    `firsttoken run --forward` when forward mode would record it (:func:`forward_can_help`). In forward
    mode (chosen by the adapter, or ``--forward``; its reason is said with `via:`) nothing is redirected,
    so the redirect's notes do not apply and no note suggests forward mode: only what it cannot carry
    either (plain HTTP, this machine). ``recorded``: the run is over and recorded requests, so the
    variables it left unset (``plan.unset``) are not mentioned: the calls went by the ones that were set."""
    unrecorded = ([] if recorded else list(plan.unset)) + list(plan.unrecorded)
    if forward_reason:
        return [f"{text} (forward mode cannot carry {url} either: plain HTTP or this machine)"
                for text, url in unrecorded if not forward_can_help(url)]
    return list(plan.notes) + [text + ("; `firsttoken run --forward` records them through HTTPS_PROXY"
                                       if forward_can_help(url) else "") for text, url in unrecorded]


def claude_first_run(home: Path) -> bool:
    """Whether Claude Code has never finished its first-run setup in ``home`` (no ~/.claude.json,
    or one without ``hasCompletedOnboarding``)."""
    try:
        data = json.loads((home / ".claude.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return True
    return not (isinstance(data, dict) and data.get("hasCompletedOnboarding"))


#: variables that name a proxy or its exceptions, never an endpoint a client calls
_PROXY_VARS = ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "NO_PROXY", "FTP_PROXY")


def direct_endpoints(env: Mapping[str, str], known: set[str] = frozenset()) -> list[tuple[str, str]]:
    """(variable, URL) of the environment's values that are an endpoint forward mode cannot carry (a
    loopback host, or plain http://: :func:`forward_can_help` is false), other than ``known`` URLs and
    the proxy variables: where a command that sent nothing through forward mode may have gone instead."""
    from urllib.parse import urlsplit

    out = []
    for k, v in sorted(env.items()):
        if k.upper() in _PROXY_VARS or not isinstance(v, str) or not v.startswith(("http://", "https://")):
            continue
        if v in known or " " in v or not urlsplit(v).hostname or forward_can_help(v):
            continue
        out.append((k, v))
    return out[:4]


def no_request_advice(cmd: list[str], client: str, upstreams: Mapping[str, str], forward_used: bool,
                      home: Path | None = None, env: Mapping[str, str] | None = None) -> list[str]:
    """What happened and what to do when a command sent nothing through firsttoken: the one rule
    behind `run`'s zero-request summary. ``upstreams``: family -> the URL the client would use.

    --forward is suggested only when it was not used and can help (an HTTPS upstream off this
    machine); for a plain-HTTP or loopback upstream, the client's own base URL setting is. After forward
    mode, a loopback or plain-HTTP URL in ``env`` (a variable run does not know) is named as the cause."""
    shown = shlex.join(cmd[:3]) + (" …" if len(cmd) > 3 else "")
    out: list[str] = []
    one_shot = any(a in ("-p", "--print") for a in cmd[1:])  # `claude -p` does no first-run setup
    if client == "claude-code" and home is not None and claude_first_run(home) and not forward_used and not one_shot:
        out.append(f"Claude Code has not been set up in this HOME ({home}: no finished first run in .claude.json). "
                   "Its first-run check goes straight to api.anthropic.com, whatever ANTHROPIC_BASE_URL says, so "
                   "nothing reached firsttoken; offline or behind a firewall the check fails and Claude Code stops. "
                   "Finish its setup once (run `claude` without firsttoken, or log in), or use `claude -p …`, which "
                   "skips it; then run again.")
    helpful = [u for u in upstreams.values() if forward_can_help(u)]
    local = [u for u in upstreams.values() if not forward_can_help(u)]
    if forward_used:
        direct = direct_endpoints(env or {}, set(upstreams.values()))
        if direct:  # the likelier cause: an endpoint forward mode never sees, in a variable run does not know
            name, url = direct[0]
            out.append(f"Even in forward mode nothing came through. The environment points {name} at {url}: a "
                       "client going there never passes HTTPS_PROXY (NO_PROXY holds this machine, and plain "
                       "http:// is mostly sent directly), so forward mode cannot record it. Start "
                       f"`firsttoken proxy --upstream {url}` and set {name} to the proxy's address "
                       "(`firsttoken env` prints it), then run again"
                       + (f"; the same goes for {', '.join(n for n, _ in direct[1:])}." if direct[1:] else "."))
        else:
            out.append("Even in forward mode nothing came through: the command may not honour HTTPS_PROXY, or it "
                       "sent no LLM request. Start `firsttoken proxy --upstream URL` and set the client's own base "
                       "URL setting to the proxy's address (`firsttoken env` prints it).")
    elif helpful:
        out.append("If it should have: it may read its base URL from somewhere firsttoken does not know; "
                   f"`firsttoken run --print-env -- {shown}` shows what was set, `firsttoken run --forward -- "
                   f"{shown}` records it through HTTPS_PROXY instead.")
    if local and not forward_used:
        urls = ", ".join(local)
        out.append(f"For {urls} (plain HTTP or on this machine) forward mode cannot help: start "
                   f"`firsttoken proxy --upstream {local[0]}` and set the client's own base URL setting to the "
                   "proxy's address (`firsttoken env` prints the exact value), then run it as usual.")
    return out


def render(s: Summary, more: str, *, via: str | None = None, notes: list[str] | tuple[str, ...] = (),
           max_findings: int = 5, advice: list[str] | tuple[str, ...] = ()) -> list[str]:
    """The summary as plain lines (stderr): ``more`` is the command that lists the requests,
    ``via`` how the child was sent through the proxy, ``notes`` what to know about its upstreams,
    ``advice`` what to do when nothing came through (:func:`no_request_advice`)."""
    head = f"firsttoken run {s.run_id}: "
    tail = [f"  note: {n}" for n in notes] + ([f"  via: {via}"] if via else [])
    other = (f"{s.not_model_calls} request{'s' if s.not_model_calls != 1 else ''} that {'is' if s.not_model_calls == 1 else 'are'} "
             "no model call (a probe, a model list: left out of these figures)") if s.not_model_calls else ""
    if not s.count and not other:
        return [head + "the command sent no request through firsttoken.", *(f"  {a}" for a in advice), *tail]
    if not s.count:
        return [head + f"no model call, only {other}.", *(f"  {a}" for a in advice), *tail, f"  more: {more}"]
    n = f"{s.count} request{'s' if s.count != 1 else ''}"
    extra = [f"{s.errors} error{'s' if s.errors != 1 else ''}"] if s.errors else []
    extra += [f"{s.in_flight} unfinished"] if s.in_flight else []
    if extra:
        n += f" ({', '.join(extra)})"
    models = ", ".join(f"{printable(m)} ×{c}" for m, c in s.models[:4]) + (" …" if len(s.models) > 4 else "")
    lines = [head + n + (f" · {models}" if models else "") + (f" · and {other}" if other else "")]
    # the stats engine's populations: TTFB/TTFT/gap of the streamed requests, the whole answer of the others
    pairs = [("TTFB", s.ttfb), ("TTFT", s.ttft), ("gap", s.gap)] if s.ttfb or s.ttft or not s.whole else []
    pairs += [("not streamed: whole answer", s.whole)] if s.whole else []
    lines.append("  " + " · ".join(_pair(k, v) for k, v in pairs))
    tok = f"  tokens: {'~' if s.prompt_estimated else ''}{s.prompt_tokens:,} in"
    if s.cached_share is not None:
        tok += f" ({s.cached_share:.0%} cached)"
    lines.append(tok + f" · {'~' if s.output_estimated else ''}{s.output_tokens:,} out")
    for f in s.findings[:max_findings]:
        lines.append(f"  {f.severity} {f.code} ×{f.count}: {printable(f.message)}")
        if f.hint:
            lines.append(f"    fix: {printable(f.hint)}")
    if len(s.findings) > max_findings:
        lines.append(f"  … and {len(s.findings) - max_findings} more kinds of finding")
    return lines + tail + [f"  more: {more}"]
