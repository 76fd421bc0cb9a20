"""`firsttoken sessions` and `firsttoken session ID`: conversations (a coding agent's requests,
grouped), and one conversation's per-turn timeline where each request's TTFB, gap and
generation sit beside the client-side time between requests (tool execution, the user typing).

Rendering is a pure function of the rows; columns that do not fit are dropped (least important
first) and cells wrap: no character is ever cut.
"""

from __future__ import annotations

import sys
from typing import Any

import click
from rich.console import Group
from rich.text import Text

from firsttoken.addon.safe_text import printable_data, printable_json
from firsttoken.cli import output
from firsttoken.cli.labels import label
from firsttoken.cli.options import db_option, json_option, lang_option
from firsttoken.cli.output import Col

R = output.REQUIRED
LIST_COLUMNS = [
    Col("id", "conversation", R),
    Col("start", "start", 70),
    Col("api", "api", 30),
    Col("models", "model(s)", 80),
    Col("turns", "turns", R, right=True),
    Col("requests", "requests", R, right=True),
    Col("tokens", "tokens", 60, right=True),
    Col("cached", "cached", 65, right=True),
    Col("model_time", "model time", R, right=True),
    Col("client_time", "between requests", 90, right=True),
]
TIMELINE_COLUMNS = [
    Col("turn", "turn", R, right=True),
    Col("at", "at", 40, right=True),
    Col("kind", "kind", R),
    Col("model", "model", 50),
    Col("client", "client gap", R, right=True),
    Col("TTFB", "TTFB", 85, right=True),
    Col("gap", "gap", 80, right=True),
    Col("generation", "generation", 75, right=True),
    Col("total", "total", R, right=True),
    Col("prompt", "prompt", 60, right=True),
    Col("cached", "cached", 70, right=True),
    Col("finding", "finding", 20),
]


def _share(v: float | None) -> str:
    return "–" if v is None else f"{v * 100:.0f}%"


def _secs(ms: float | None) -> str:
    return output.ms(ms)


def _api(apis: list[str]) -> str:
    return ",".join(output.api_name(a) for a in apis) or "–"


def _columns(cols: list[Col], lang: str) -> list[Col]:
    """``cols`` with their headers in ``lang``."""
    return [Col(c.key, label(lang, f"sess.col.{c.key}"), c.prio, c.right) for c in cols]


def list_cells(s: dict[str, Any], lang: str = "en") -> dict[str, str]:
    reqs = f"{s['requests']:,}"
    extra = s["side_requests"] + s["count_tokens_requests"]
    if extra:
        reqs += label(lang, "sess.side", n=extra)
    return {
        "id": s["id"], "start": output.local_time(s.get("started_at")), "api": _api(s.get("apis") or []),
        "models": ", ".join(s.get("models") or []) or "–", "turns": str(s.get("turns") or "–"), "requests": reqs,
        "tokens": output.num(s.get("prompt_tokens") or None), "cached": _share(s.get("cached_share")),
        "model_time": _secs(s.get("model_ms")), "client_time": _secs(s.get("client_ms")),
    }


def render_list(sessions: list[dict[str, Any]], width: int = 160, lang: str = "en") -> Group:
    """The conversations as lines of Text fitted to ``width``, in ``lang``."""
    data = [list_cells(printable_data(s), lang) for s in sessions]
    chosen = output.fit_columns(_columns(LIST_COLUMNS, lang), data, width)
    lines = output.table_lines(chosen, {c.key: c.header for c, _ in chosen}, bold=True)
    for d in data:
        lines += output.table_lines(chosen, d)
    lines += output.indented(Text(label(lang, "sess.list_note"), style="dim"), width, 0)
    return Group(*lines)


def timeline_cells(r: dict[str, Any], t_start: str | None, prev_turn: int | None) -> dict[str, str]:
    gen = None
    if r.get("total_ms") is not None and r.get("ttft_ms") is not None:
        gen = r["total_ms"] - r["ttft_ms"]
    cached = None
    if r.get("usage_cached_tokens") is not None and r.get("usage_prompt_tokens"):
        cached = r["usage_cached_tokens"] / r["usage_prompt_tokens"]
    code = r.get("top_code") or ""
    return {
        "turn": "" if r.get("turn") == prev_turn else str(r.get("turn") or "–"),
        "at": _offset(t_start, r.get("started_at")),
        "kind": r.get("request_kind") or "–",
        "model": r.get("model") or "–",
        "client": output.ms(r.get("client_gap_ms")),
        "TTFB": output.ms(r.get("ttfb_ms")), "gap": output.ms(r.get("gap_ms")), "generation": output.ms(gen),
        "total": output.ms(r.get("total_ms")), "prompt": output.prompt_tokens(r), "cached": _share(cached),
        "finding": code,
    }


def _offset(t0: str | None, t: str | None) -> str:
    import datetime as dt

    try:
        d = (dt.datetime.fromisoformat(str(t).replace("Z", "+00:00"))
             - dt.datetime.fromisoformat(str(t0).replace("Z", "+00:00"))).total_seconds()
    except (TypeError, ValueError):
        return "–"
    return f"+{d:,.1f}s"


def verdict(s: dict[str, Any], lang: str = "en") -> str:
    model, client = s.get("model_ms") or 0.0, s.get("client_ms") or 0.0
    if not model and not client:
        return label(lang, "sess.no_time")
    share = model / (model + client)
    who = label(lang, "sess.who_model" if share >= 0.5 else "sess.who_client")
    return label(lang, "sess.verdict", model=output.ms(model), client=output.ms(client), pct=f"{share * 100:.0f}", who=who)


def render_session(summary: dict[str, Any], rows: list[dict[str, Any]], width: int = 160, lang: str = "en") -> Group:
    """One conversation: a summary, then each request (a turn number where a turn starts), side
    calls labelled, then where the time went."""
    summary = printable_data(summary)
    rows = [printable_data(r) for r in rows]
    head = Text(label(lang, "sess.head", id=summary["id"]), style="bold")
    n = summary["requests"]
    requests = label(lang, "sess.requests.1" if n == 1 else "sess.requests", n=f"{n:,}")
    head.append(f"  {output.local_time(summary.get('started_at'))}  {_api(summary.get('apis') or [])}  "
                f"{', '.join(summary.get('models') or []) or '–'}  "
                + label(lang, "sess.head_rest", turns=summary.get("turns") or 0, requests=requests,
                        side=summary["side_requests"], count=summary["count_tokens_requests"],
                        cached=_share(summary.get("cached_share"))), style="")
    lines = output.indented(head, width, 0)
    t0 = rows[0].get("started_at") if rows else None
    data, prev = [], None
    for r in rows:
        data.append(timeline_cells(r, t0, prev))
        prev = r.get("turn")
    chosen = output.fit_columns(_columns(TIMELINE_COLUMNS, lang), data, width)
    lines += output.table_lines(chosen, {c.key: c.header for c, _ in chosen}, bold=True)
    for r, d in zip(rows, data):
        style = "dim" if r.get("request_kind") in ("side", "count_tokens") else ""
        lines += output.table_lines(chosen, d, styles={k: style for k in d})
    lines += output.indented(Text(verdict(summary, lang)), width, 0)
    lines += output.indented(Text(label(lang, "sess.note"), style="dim"), width, 0)
    return Group(*lines)


def _open(db_path):
    from firsttoken.addon.store import queries
    from firsttoken.cli.options import fail, reader

    db = reader(db_path)
    if "conversation_id" not in queries.columns(db):
        fail("this database was recorded before conversations existed: run `firsttoken proxy` on it once "
             "(it upgrades the file), then record some requests")
    return db


@click.command("sessions")
@db_option
@click.option("-n", "--limit", type=int, default=20, show_default=True, help="How many of the newest conversations (0: all).")
@click.option("--all", "show_all", is_flag=True, help="Also conversations of a single request (scripts, benchmarks).")
@json_option("rows")
@lang_option
def sessions(db_path, limit, show_all, as_json, lang):
    """Conversations (a coding agent's requests grouped by its session, or by the growing message
    history), newest first: turns, requests, tokens, cached share, model time vs. time between requests."""
    from firsttoken.addon.store import conversations
    from firsttoken.cli.options import console, resolve_lang

    code = resolve_lang(lang)
    db = _open(db_path)
    rows = conversations.sessions(db, limit=limit or None, min_requests=1 if show_all else 2)
    if as_json:
        for r in rows:
            sys.stdout.write(printable_json(r, default=str) + "\n")
    elif not rows:
        console().print(label(code, "sess.none", more="" if show_all else label(code, "sess.none_more")))
    else:
        c = console()
        c.print(render_list(rows, width=c.width, lang=code))


@click.command("session")
@db_option
@click.argument("conversation_id")
@json_option("summary")
@lang_option
def session(db_path, conversation_id, as_json, lang):
    """One conversation turn by turn: each request's TTFB, gap and generation beside the client's
    own time between requests; side calls labelled. CONVERSATION_ID: an id or its first characters."""
    from firsttoken.addon.store import conversations
    from firsttoken.addon.store.queries import NotFound
    from firsttoken.cli.options import console, fail, resolve_lang

    db = _open(db_path)
    try:
        summary, rows = conversations.session(db, conversation_id)
    except NotFound as e:
        fail(str(e))
    code = resolve_lang(lang)
    for r in rows:
        r["findings"] = output.localize(r.get("findings"), code)
    if as_json:
        keep = ("id", "started_at", "turn", "request_kind", "model", "client_gap_ms", "ttfb_ms", "gap_ms", "ttft_ms",
                "total_ms", "usage_prompt_tokens", "prompt_tokens_est", "usage_cached_tokens", "top_code", "findings")
        doc = dict(summary, requests_detail=[{k: r.get(k) for k in keep} for r in rows])
        sys.stdout.write(printable_json(doc, default=str, indent=2) + "\n")
        return
    c = console()
    c.print(render_session(summary, rows, width=c.width, lang=code))
