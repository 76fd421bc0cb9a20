"""`firsttoken stats`: percentiles of TTFB, TTFT, gap, TPOT, ITL and total per model (or route,
API, prompt-size bucket, hour), error rates by finding code, and TTFT = a + b x prompt tokens."""

from __future__ import annotations

import json
from typing import Any

import click
from rich.console import Group
from rich.table import Table
from rich.text import Text

from firsttoken.addon.safe_text import printable, printable_data
from firsttoken.addon.store import stats_queries as sq
from firsttoken.cli import output
from firsttoken.cli.options import cold_option, db_option, filter_options, json_option, make_filters

LABELS = {"connect": "connect", "ttfb": "TTFB", "ttft": "TTFT", "gap": "gap", "tpot": "TPOT", "itl": "ITL p50", "total": "total"}
def fit_text(g: dict[str, Any]) -> Text:
    if g.get("ttft_slope_ms_per_1k") is None:
        return Text(g.get("ttft_fit_warning") or "–", style="dim")
    t = Text(f"{g['ttft_intercept_ms']:.0f} ms + {g['ttft_slope_ms_per_1k']:.0f} ms per 1k tokens\n"
             f"R² {g['ttft_fit_r2']:.2f}, n={g['ttft_fit_n']:,}")
    if g.get("ttft_fit_warning"):
        t.append(f"\n⚠ {g['ttft_fit_warning']}", style="yellow")
    u = g.get("uncached_fit")
    if u and u.get("ttft_slope_ms_per_1k") is not None:
        t.append(f"\nvs uncached tokens: {u['ttft_intercept_ms']:.0f} ms + {u['ttft_slope_ms_per_1k']:.0f} ms per 1k, "
                 f"R² {u['ttft_fit_r2']:.2f} ({u['cached_requests']:,} cache hits)")
        better = "uncached input tokens" if g.get("better_fit") == "uncached" else "all input tokens"
        t.append(f"\n→ TTFT follows {better} better", style="bold")
    return t


def _group_name(v: Any, by: str) -> Text:
    """A group's name as shown: a model, route or experiment is whatever the client or upstream
    sent, so its control characters are shown as escapes and its brackets are not markup."""
    if v is None:
        return Text("(none)")
    if by == "hour":
        return Text(printable(f"{v.replace('T', ' ')}:00Z"))
    return Text(printable(str(v)))


def render(res: dict[str, Any]) -> Group:
    res = printable_data(res)  # group names, codes, warnings: request-derived text never reaches the terminal raw
    by = res["by"]
    groups = res["groups"]
    summary = Table(title=f"Requests by {by}", header_style="bold", title_justify="left")
    for c, j in ((by, "left"), ("requests", "right"), ("errors", "right"), ("top error codes", "left"),
                 ("cold", "right"), ("TTFT vs prompt tokens", "left")):
        summary.add_column(c, justify=j, overflow="fold")
    for g in groups:
        rate = g["error_rate"]
        err = Text(f"{g['errors']:,} ({rate * 100:.1f}%)" if rate is not None else f"{g['errors']:,}",
                   style="red" if g["errors"] else "")
        codes = "\n".join(f"{c['code']} {c['rate'] * 100:.1f}%" for c in g["error_codes"][:3] if c["rate"] is not None)
        summary.add_row(_group_name(g["group"], by), f"{g['count']:,}", err, Text(codes or "–"),
                        f"{g['cold']:,}", fit_text(g))
    pct = Table(title="Latency percentiles" + ("" if res["include_cold"] else " (cold connections excluded)"),

                header_style="bold", title_justify="left")
    pct.add_column(by)
    pct.add_column("metric")
    pct.add_column("n", justify="right")
    qs = [k for k in (groups[0]["ttft_ms"] if groups else {}) if k != "n"]
    for q in qs:
        pct.add_column(q.upper(), justify="right")
    for gi, g in enumerate(groups):
        if gi:
            pct.add_section()
        for i, (name, _) in enumerate(sq.METRICS):
            m = g.get(f"{name}_ms")
            if m is None:
                continue
            pct.add_row(_group_name(g["group"], by) if i == 0 else "", LABELS[name], f"{m['n']:,}",
                        *[output.ms(m.get(q)) for q in qs])
    note = Text("Percentiles: linear interpolation between closest ranks (as numpy). gap = TTFT - TTFB. "
                + ("Every request counts; connect is what the cold ones (a new TCP/TLS connection, included in "
                   "their TTFB) paid for it; --exclude-cold leaves them out." if res["include_cold"] else
                   "Cold connections (new TCP/TLS connection) are left out of latency figures; --include-cold keeps them."),
                style="dim")
    return Group(summary, pct, note)


def bar(parts: list[tuple[float, str]], scale: float, width: int) -> Text:
    t = Text()
    for v, style in parts:
        n = int(round(max(0.0, v) * scale))
        t.append("█" * n, style=style)
    return t


def plot(res: dict[str, Any], width: int = 48) -> Group:
    """TTFT P50/P95 per group as bars split into TTFB (network/gateway) and gap (model)."""
    res = printable_data(res)
    by = res["by"]
    rows = [g for g in res["groups"] if g["ttft_ms"]["n"]]
    top = max([g["ttft_ms"]["p95"] or 0 for g in rows] + [1.0])
    scale = width / top
    t = Table(title="TTFT = TTFB (blue: network, gateway) + gap (magenta: prefill, model)", header_style="bold",
              title_justify="left", show_edge=False, box=None)
    t.add_column(by)
    t.add_column("")
    t.add_column("", no_wrap=True)
    t.add_column("TTFT", justify="right")
    for g in rows:
        for q in ("p50", "p95"):
            ttfb, ttft = g["ttfb_ms"].get(q) or 0, g["ttft_ms"].get(q) or 0
            # percentiles do not add up; draw TTFB then the rest of TTFT
            b = bar([(min(ttfb, ttft), "blue"), (max(0.0, ttft - min(ttfb, ttft)), "magenta")], scale, width)
            t.add_row(_group_name(g["group"], by) if q == "p50" else "", q.upper(), b, output.ms(ttft))
    return Group(t)


@click.command("stats")
@db_option
@filter_options
@click.option("--by", type=click.Choice(list(sq.GROUPS)), default="model", show_default=True,
              help="Group by model, route, API, prompt-size bucket (prompt tokens), UTC hour or experiment.")
@cold_option
@json_option("summary")
@click.option("--plot", "plot_", is_flag=True, help="Also draw TTFT bars (TTFB + gap) per group.")
def stats(db_path, by, include_cold, as_json, plot_, **kw):
    """Percentiles (P50/P90/P95/P99) of TTFB, TTFT, gap, TPOT, ITL and total; error rates; TTFT vs prompt size."""
    from firsttoken.cli.options import console, fail, reader

    filters = make_filters(kw)
    db = reader(db_path)
    try:
        res = sq.compute(db, filters, by=by, include_cold=include_cold is not False)
    except ValueError as e:
        fail(str(e))
    if as_json:
        click.echo(json.dumps(res, ensure_ascii=False, default=str, indent=2))
        return
    con = console()
    if not res["groups"]:
        con.print("No requests recorded (with these filters). Point a client at `firsttoken proxy`, or try `firsttoken demo`.")
        return
    con.print(render(res))
    if plot_:
        con.print(plot(res))
