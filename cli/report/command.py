"""`firsttoken report --html FILE [filters]`: a single self-contained HTML page.

TTFT against prompt tokens per model with the least-squares line, TTFT split into TTFB + gap
at P50 and P95, percentile bars of TTFB and gap, requests per finding code (table
``findings``), the slowest and the latest failed requests with their top findings, each id
linked to a details section further down. Charts are inline SVG drawn by report.html; nothing
is loaded from anywhere. Nothing to report (an empty database, or filters matching nothing)
is an error, and no file is written.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt

import click

from firsttoken.addon.store import queries
from firsttoken.addon.store import stats_queries as sq
from firsttoken.addon.store.queries import Filters
from firsttoken.cli import output
from firsttoken.cli.options import cold_option, db_option, filter_options, make_filters
from firsttoken.cli.report import html as H


class NothingToReport(ValueError):
    pass


def build(db, filters: Filters, include_cold: bool = True, top: int = 20, source: str = "") -> str:
    res = sq.compute(db, filters, by="model", include_cold=include_cold)
    groups = res["groups"]
    total = sum(g["count"] for g in groups)
    if not total:
        if res["filters"]:
            raise NothingToReport(
                f"no requests match {', '.join(f'--{k.replace(chr(95), chr(45))} {v}' for k, v in res['filters'].items())} "
                f"in {source or 'the database'}: loosen the filters (`firsttoken logs` lists what is there); no report written")
        raise NothingToReport(
            f"{source or 'the database'} has no requests yet: point a client at `firsttoken proxy` (or run "
            "`firsttoken demo`), then run the report again; no report written")
    colors = {g["group"]: H.PALETTE[i % len(H.PALETTE)] for i, g in enumerate(groups)}
    name = lambda g: g if g is not None else "(no model)"  # noqa: E731
    span = sq.time_span(db, filters)
    meta = (f"{total:,} requests" + (f", {str(span[0])[:10]} {output.local_time(span[0])} → {str(span[1])[:10]} "
                                     f"{output.local_time(span[1])}" if span and span[0] else "")
            + f" · generated {_dt.datetime.now().astimezone().strftime('%Y-%m-%d %H:%M %Z')}"
            + (f" · filters: {H.esc(', '.join(f'{k}={v}' for k, v in res['filters'].items()))}" if res["filters"] else "")
            + (f" · {H.esc(source)}" if source else ""))
    sections: list[tuple[str, str]] = []
    summary_rows = []
    for g in groups:
        fit = (f"{g['ttft_intercept_ms']:.0f} ms + {g['ttft_slope_ms_per_1k']:.0f} ms/1k tokens (R² {g['ttft_fit_r2']:.2f}, n={g['ttft_fit_n']:,})"
               if g["ttft_slope_ms_per_1k"] is not None else "–")
        warn = f'<br/><span class="warn">⚠ {H.esc(g["ttft_fit_warning"])}</span>' if g["ttft_fit_warning"] else ""
        sw = f'<span class="sw" style="background:{colors[g["group"]]}"></span>'
        summary_rows.append([("html", f'<span class="nw">{sw}{H.esc(name(g["group"]))}</span>'), f"{g['count']:,}",
                             f"{(g['error_rate'] or 0) * 100:.1f}%", g["cold"],
                             *[f"{output.ms(g[m]['p50'])} / {output.ms(g[m]['p95'])}" for m in ("ttfb_ms", "ttft_ms", "gap_ms")],
                             ("html", H.esc(fit) + warn)])
    sections.append(("Per model", H.table(["model", "requests", "errors", "cold", "TTFB P50/P95", "TTFT P50/P95",
                                           "gap P50/P95", "TTFT = a + b × prompt tokens"], summary_rows, numeric=(1, 2, 3, 4, 5, 6))))
    counts = {g["group"]: g["ttft_ms"]["n"] for g in groups}
    pts = sq.scatter_points(db, filters, counts, include_cold=include_cold)
    fits = {g["group"]: (g["ttft_intercept_ms"], g["ttft_slope_ms_per_1k"] / 1000) for g in groups
            if g["ttft_slope_ms_per_1k"] is not None}
    slow = sq.slowest(db, filters, [g["group"] for g in groups], top)
    failed = [r for r in queries.recent(db, filters if filters.status else dataclasses.replace(filters, status="error"), top)
              if queries.is_error(r)]
    listed = {r["id"] for r in slow} | {r["id"] for r in failed}
    legend = '<p class="legend">' + "".join(f'<span><span class="sw" style="background:{colors[m]}"></span>{H.esc(name(m))}</span>'
                                            for m in pts) + "</p>"
    sections.append(("TTFT against prompt tokens", legend
                     + H.scatter_svg(pts, fits, colors, linked=listed, names={m: name(m) for m in pts})
                     + '<p class="dim">Dots: a sample of requests (hover for its id, model, TTFT and prompt size; the '
                       'slowest and failed ones link to their details); lines: least-squares fit per model. The slope '
                       'is the prefill cost of each extra input token.</p>'))
    charts = H.split_svg("TTFT = TTFB + gap (P50 · P95)", [(name(g["group"]), g["ttfb_ms"], g["gap_ms"], g["ttft_ms"])
                                                           for g in groups])
    charts += "".join(H.percentile_svg(f"{label} (P50 · P95)", [(name(g["group"]), g[m]) for g in groups])
                      for label, m in (("TTFB", "ttfb_ms"), ("gap = TTFT − TTFB", "gap_ms")))
    sections.append(("Percentiles", f'<div class="charts">{charts}</div><p class="dim">TTFT bars: the TTFB part (network + '
                     'gateway + queue) then the gap (prefill and the model), at P50 and at P95. TTFB and gap bars from '
                     'dark to light: P50, P90, P95, P99.</p>'))
    br = sq.finding_breakdown(db, filters, total)
    top_n = max([b["count"] for b in br] + [1])
    sections.append(("Findings", H.table(
        ["code", "severity", "requests", "share", ""],
        [[b["code"], b["severity"], f"{b['count']:,}", f"{(b['share'] or 0) * 100:.1f}%",
          ("html", f'<span class="bar" style="width:{200 * b["count"] / top_n:.0f}px;'
                   f'background:{H.SEV_COLOR.get(b["severity"], "#6b7280")}"></span>')] for b in br],
        numeric=(2, 3)) if br else '<p class="dim">No findings.</p>'))
    slow_rows, slow_findings = [], []
    for r in slow:
        found = r.get("findings") or []
        slow_findings.append("".join(
            f'<div><b style="color:{H.SEV_COLOR.get(f.get("severity"), "#374151")}">{H.esc(f.get("code"))}</b> '
            f'{H.esc(f.get("message"))}</div>' for f in found[:3] if isinstance(f, dict)) or '<span class="dim">no findings</span>')
        prompt = r.get("usage_prompt_tokens") if r.get("usage_prompt_tokens") is not None else r.get("prompt_tokens_est")
        cold = r.get("conn_reused") == 0 and r.get("connect_ms") is not None
        slow_rows.append([("html", _when(r)), ("html", H.id_link(r["id"])), ("html", H.model_name(name(r.get("model")))),
                          r.get("status") if r.get("status") is not None else "ERR", output.num(prompt),
                          output.ms(r.get("ttfb_ms")) + (" (cold)" if cold else ""), output.ms(r.get("ttft_ms")),
                          output.ms(r.get("gap_ms")), output.ms(r.get("total_ms"))])
    sections.append((f"Slowest {len(slow)} requests by TTFT", H.table(
        ["time", "id", "model", "status", "prompt", "TTFB", "TTFT", "gap", "total"], slow_rows,
        numeric=(3, 4, 5, 6, 7, 8), below=slow_findings) if slow_rows else '<p class="dim">No requests with a TTFT.</p>'))
    fail_rows = [[("html", _when(r)),
                  ("html", H.id_link(r["id"])), ("html", H.model_name(name(r.get("model")))), output.status_text(r),
                  ("html", _top(r))] for r in failed]
    sections.append((f"Latest {len(failed)} failed requests", H.table(["time", "id", "model", "status", "top finding"], fail_rows)
                     if fail_rows else '<p class="dim">No failed requests.</p>'))
    shown: dict[str, str] = {}
    for r in slow:
        shown.setdefault(r["id"], H.details(r, name(r.get("model")), f"slowest by TTFT ({output.ms(r.get('ttft_ms'))})"))
    for r in failed:
        shown.setdefault(r["id"], H.details(r, name(r.get("model")), f"failed ({output.status_text(r)})"))
    if shown:
        sections.append(("Request details", "".join(shown.values())))
    sections.append(("", f'<p class="dim">Percentiles: {H.esc(res["percentile"])}. '
                     + ("Every request included; requests that opened a new connection (cold) also paid its "
                        "connect time, shown separately." if include_cold else
                        "Requests that opened a new connection (cold) are left out of latency figures.")
                     + " Details of one request: <code>firsttoken show ID</code>.</p>"))
    return H.page("firsttoken report", meta, sections)


def _when(r: dict) -> str:
    return f'<span class="nw">{H.esc(str(r["started_at"])[:10])} {H.esc(output.local_time(r["started_at"]))}</span>'


def _top(r: dict) -> str:
    found = [f for f in (r.get("findings") or []) if isinstance(f, dict)]
    if not found:
        return H.esc(r.get("error") or "–")
    f = found[0]
    return f'<b style="color:{H.SEV_COLOR.get(f.get("severity"), "#374151")}">{H.esc(f.get("code"))}</b> {H.esc(f.get("message"))}'


@click.command("report")
@db_option
@filter_options
@click.option("--html", "html_path", required=True, type=click.Path(dir_okay=False), help="The HTML file to write.")
@cold_option
@click.option("--top", type=int, default=20, show_default=True, help="How many slowest requests to list.")
def report(db_path, html_path, include_cold, top, **kw):
    """Write a self-contained HTML report (opens offline): charts, error breakdown, slowest requests."""
    from firsttoken.cli.options import console, fail, reader, resolve_db

    db = reader(db_path)
    try:
        page = build(db, make_filters(kw), include_cold is not False, top, source=resolve_db(db_path))
    except ValueError as e:  # NothingToReport included: no file is written
        fail(str(e))
    with open(html_path, "w", encoding="utf-8") as fh:
        fh.write(page)
    console(stderr=True).print(f"wrote {html_path} ({len(page) / 1024:,.0f} KB)")
