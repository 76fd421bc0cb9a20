"""`firsttoken show ID`: one request as a waterfall, with tokens and findings.

``render(row, width)`` is a pure function of the stored row.
"""

from __future__ import annotations

from typing import Any

import click
from rich.console import Group
from rich.table import Table
from rich.text import Text

from firsttoken.addon.safe_text import printable_data, printable_json
from firsttoken.cli import output
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


def timeline(r: dict[str, Any]) -> Table:
    """The waterfall: one row per phase, each drawn from where it starts to where it ends; the
    "starts at" column is that start (ms after the request was sent), "took" its length.
    For a reasoning model the wait after the headers is split in two: prefill (headers → the
    first token of any kind) and reasoning (first token → first visible token)."""
    total = r.get("total_ms") or max(
        [v for v in (r.get("ttft_ms"), r.get("ttfb_ms"), r.get("first_byte_ms")) if v] or [1.0]
    )
    t = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    t.add_column("phase", no_wrap=True)
    t.add_column(f"0 → {output.ms(total)}", no_wrap=True)
    t.add_column("starts at", justify="right", no_wrap=True)
    t.add_column("took", justify="right", no_wrap=True)
    ttfb, ttft, ft = r.get("ttfb_ms"), r.get("ttft_ms"), r.get("first_token_ms")
    conn = r.get("connect_ms")

    def row(name: str, start: float, end: float, char: str, style: str) -> None:
        t.add_row(name, _bar(start, end, total, char, style), output.ms(start), output.ms(end - start))

    if conn is not None:
        row("connect", 0, conn, "▒", "magenta")
    elif r.get("conn_reused"):
        t.add_row("connect", Text("reused connection", style="dim"), output.ms(0), "0")
    held = bool(r.get("headers_held"))
    if ttfb is not None:  # behind a hop that held the headers, TTFB contains the prefill
        row("TTFB+prefill" if held else "TTFB (headers)", conn or 0, ttfb, "█", "blue")
    reasoning = ft is not None and ttft is not None and ttfb is not None and ttfb <= ft < ttft
    if held and ttft is not None and ttfb is not None:
        row("gap", ttfb, ttft, "░", "cyan")
    elif reasoning:
        row("prefill", ttfb, ft, "░", "cyan")
        row("reasoning", ft, ttft, "▓", "yellow")
    elif ttft is not None and ttfb is not None:
        row("gap (prefill)", ttfb, ttft, "░", "cyan")
    offsets = r.get("event_offsets") or []
    if offsets:
        t.add_row(f"stream ×{r.get('events', len(offsets))}", _events_strip(offsets, 0, total), output.ms(offsets[0]),
                  output.ms(total - offsets[0]))
    elif r.get("total_ms") is not None:
        row("body", ttfb or 0, total, "█", "green")
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


def render(r: dict[str, Any], width: int = 100) -> Group:
    global BAR
    BAR = max(12, min(64, width - 40))
    r = printable_data(r)  # upstream-controlled text never reaches the terminal raw
    parts: list[Any] = []
    head = Text()
    head.append(f"{r['id']}\n", style="bold")
    head.append(f"{r.get('started_at')}  {r.get('method') or ''} {r.get('path') or ''}")
    if r.get("upstream_url"):
        head.append(f"  →  {r['upstream_url']}", style="dim")
    parts.append(head)
    parts.append(_kv([
        ("route", r.get("route")), ("api", r.get("api")), ("model", r.get("model")),
        ("stream", {True: "yes", False: "no"}.get(r.get("stream"))), ("status", output.status_text(r)),
        ("content-type", r.get("content_type")), ("experiment", r.get("experiment")),
    ]))
    key = None
    if r.get("key_header"):
        facts = ", ".join(r.get("key_facts") or [])
        key = f"{r['key_header']}: {r.get('key_scheme') or ''} {r.get('key_fingerprint') or ''} ({r.get('key_length')} chars{'; ' + facts if facts else ''})"
    elif "missing" in (r.get("key_facts") or []):
        key = "no API key header"
    parts.append(_kv([("key", key), ("request id", r.get("upstream_request_id"))]))
    parts.append(Text(""))
    parts.append(timeline(r))
    parts.append(_kv([
        ("TTFB", output.ms(r.get("ttfb_ms"))), ("TTFT", output.ms(r.get("ttft_ms"))), ("gap", output.ms(r.get("gap_ms"))),
        ("first token incl. reasoning", output.ms(r.get("first_token_ms"))), ("TPOT", output.ms(r.get("tpot_ms"))),
        ("ITL p50/p95/max", "/".join(output.ms(r.get(k)) for k in ("itl_p50_ms", "itl_p95_ms", "itl_max_ms")) if r.get("itl_p50_ms") is not None else None),
        ("total", output.ms(r.get("total_ms"))),
    ]))
    if r.get("headers_held"):
        parts += output.wrap(Text("headers held until the first token: the TTFB/prefill split is not visible through "
                                  "this hop (TTFB includes the prefill); judge this route by TTFT, and see "
                                  "latency.headers_held below for the split by the route's TTFT-vs-input fit",
                                  style="yellow"), width)
    parts.append(Text(""))
    tok = Table(title="tokens", title_justify="left", box=None, show_header=True, header_style="bold")
    for c in ("", "prompt", "output", "cached", "reasoning"):
        tok.add_column(c, justify="right" if c else "left")
    exact = r.get("tokens_exact")
    tok.add_row("estimate" if exact or not r.get("tokenizer") else "estimate ~", output.num(r.get("prompt_tokens_est"), est=not exact), output.num(r.get("output_tokens_est"), est=True), "", "")
    tok.add_row("server usage", output.num(r.get("usage_prompt_tokens")), output.num(r.get("usage_completion_tokens")),
                output.num(r.get("usage_cached_tokens")), output.num(r.get("usage_reasoning_tokens")))
    parts.append(tok)
    parts.append(_kv([
        ("tokenizer", f"{r['tokenizer']} ({'exact' if exact else 'approximate'})" if r.get("tokenizer") else None),
        ("server/estimate", r.get("usage_ratio")),
        ("calibrated", f"~{r['prompt_tokens_calibrated']:,} (×{r.get('calibration_factor')} learned for this model)" if r.get("prompt_tokens_calibrated") else None), ("system", r.get("system_tokens")), ("tools", r.get("tools_tokens")),
        ("last user turn", r.get("last_user_tokens")), ("messages", r.get("messages")), ("images", r.get("images") or None),
        ("prefix", f"{r.get('prefix_tokens')} tokens, sent {r.get('prefix_seen_before')}× before" if r.get("prefix_hash") else None),
    ]))
    parts.append(_kv([("request bytes", r.get("request_bytes")), ("response bytes", r.get("response_bytes")),
                      ("finish", r.get("finish_reason")), ("stream complete", {True: "yes", False: "no"}.get(r.get("stream_done")))]))
    for label, k in (("error", "error"), ("upstream said", "upstream_error"), ("request", "request_error")):
        if r.get(k):
            parts.append(Text(f"{label}: {r[k]}", style="red"))
    parts.append(Text(""))
    findings = r.get("findings") or []
    if findings:
        parts.append(Text("findings", style="bold"))
        for f in findings:  # wrapped under its own text, never back to column 0
            line = Text(f"{f['severity']:<5} ", style=SEVERITY_STYLE.get(f["severity"], ""))
            line.append(f"{f['code']}: ", style="bold")
            line.append(f["message"])
            parts += output.wrap(line, width, 2, 8)
            if f.get("hint"):
                parts += output.wrap(Text(f"→ {f['hint']}", style="dim"), width, 8, 10)
    elif r.get("state") == "done":
        parts.append(Text("no findings: this request looks healthy", style="green"))
    else:
        parts.append(Text("still in flight", style="yellow"))
    return Group(*parts)


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
    row["findings"] = output.localize(row.get("findings"), resolve_lang(lang))
    if as_json:
        click.echo(printable_json(row, indent=2, default=str))
    else:
        c = console()
        c.print(render(row, width=c.width))
