"""`firsttoken report --html FILE [filters]`: a single self-contained HTML page.

The command reads the rows and builds the sections; html.py draws them as inline SVG (nothing is
loaded from anywhere). Nothing to report is an error, and no file is written. What the page
shows: docs/stats.md ("firsttoken export and firsttoken report").
"""

from __future__ import annotations

import dataclasses
import datetime as _dt

import click

from firsttoken.addon.store import queries
from firsttoken.addon.store import stats_queries as sq
from firsttoken.addon.store.queries import Filters
from firsttoken.cli import output
from firsttoken.cli.labels import counted, label, severity
from firsttoken.cli.options import cold_option, db_option, filter_options, lang_option, make_filters
from firsttoken.cli.report import html as H
from firsttoken.cli.stats import fit_warning

#: the slowest requests drawn split into their own phases
PHASE_BARS = 10


class NothingToReport(ValueError):
    pass


def build(db, filters: Filters, include_cold: bool = True, top: int = 20, source: str = "",
          by: str | None = None, lang: str = "en") -> str:
    """The page, every word of it in ``lang`` (findings re-rendered in it too). ``by``: "route" adds the
    per-route section, "model" leaves it out, None decides (more than one route among the rows, or an
    --experiment filter)."""
    L = lambda key, **kw: label(lang, f"report.{key}", **kw)  # noqa: E731
    W = lambda key, **markup: H.words(lang, f"report.{key}", **markup)  # noqa: E731
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
    name = lambda g: g if g is not None else L("no_model")  # noqa: E731
    span = sq.time_span(db, filters)
    meta = (H.esc(counted(total, "requests", lang))
            + (H.esc(L("span", first=f"{str(span[0])[:10]} {output.local_time(span[0])}",
                       last=f"{str(span[1])[:10]} {output.local_time(span[1])}")) if span and span[0] else "")
            + " · " + H.esc(L("generated", when=_dt.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")))
            + (" · " + H.esc(L("filters", f=", ".join(f"{k}={v}" for k, v in res["filters"].items())))
               if res["filters"] else "")
            + (f" · {H.esc(source)}" if source else ""))
    sections: list[tuple[str, str]] = []
    summary_rows = []
    for g in groups:
        sw = f'<span class="sw" style="background:{colors[g["group"]]}"></span>'
        summary_rows.append([("html", f'<span class="nw">{sw}{H.esc(name(g["group"]))}</span>'), f"{g['count']:,}",
                             f"{(g['error_rate'] or 0) * 100:.1f}%", g["cold"],
                             *[f"{output.ms(g[m]['p50'])} / {output.ms(g[m]['p95'])}" for m in ("ttfb_ms", "ttft_ms", "gap_ms")],
                             f"{output.ms(g['whole_ms']['p50'])} / {output.ms(g['whole_ms']['p95'])} (n={g['whole_ms']['n']:,})"
                             if g["whole_ms"]["n"] else "–",
                             ("html", _fit_html(g, lang))])
    sections.append((L("h.per_model"), H.table(
        [label(lang, "col.model"), label(lang, "col.requests"), label(lang, "col.errors"), label(lang, "col.cold"),
         "TTFB P50/P95", "TTFT P50/P95", "gap P50/P95", L("col.whole"), L("col.fit")],
        summary_rows, numeric=(1, 2, 3, 4, 5, 6, 7)) + f'<p class="dim">{W("population")}</p>'))
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
    sections.append((L("h.scatter"), legend
                     + H.scatter_svg(pts, fits, colors, linked=listed, names={m: name(m) for m in pts}, lang=lang)
                     + f'<p class="dim">{W("scatter_note")}</p>'))
    if _by_route(db, filters, by):
        sections.append((L("h.per_route"), _routes_section(db, filters, include_cold, listed, lang)))
    cache = _cache_section(groups, name, lang)
    if cache:
        sections.append((L("h.cache"), cache))
    # side by side, never added up: P95 TTFT is not P95 TTFB + P95 gap (the slowest TTFBs and the
    # slowest gaps are mostly other requests); the split into phases is of actual requests
    charts = "".join(H.percentile_svg(f"{metric} (P50 · P95)", [(name(g["group"]), g[m]) for g in groups], lang=lang)
                     for metric, m in (("TTFT", "ttft_ms"), ("TTFB", "ttfb_ms"), ("gap = TTFT − TTFB", "gap_ms")))
    if any(g["whole_ms"]["n"] for g in groups):
        charts += H.percentile_svg(L("whole_chart"), [(name(g["group"]), g["whole_ms"]) for g in groups], lang=lang)
    charts += H.phases_svg(L("phases", n=min(len(slow), PHASE_BARS)),
                           [(name(r.get("model")), r["id"], r.get("ttfb_ms"), r.get("gap_ms")) for r in slow[:PHASE_BARS]],
                           lang=lang)
    sections.append((L("h.percentiles"), f'<div class="charts">{charts}</div><p class="dim">{W("percentiles_note")}</p>'))
    br = sq.finding_breakdown(db, filters, total)
    top_n = max([b["count"] for b in br] + [1])
    sections.append((L("h.findings"), H.table(
        [L("col.code"), L("col.severity"), label(lang, "col.requests"), L("col.share"), ""],
        [[b["code"], severity(b["severity"], lang), f"{b['count']:,}", f"{(b['share'] or 0) * 100:.1f}%",
          ("html", f'<span class="bar" style="width:{200 * b["count"] / top_n:.0f}px;'
                   f'background:{H.SEV_COLOR.get(b["severity"], "#6b7280")}"></span>')] for b in br],
        numeric=(2, 3)) if br else f'<p class="dim">{W("no_findings_all")}</p>'))
    for r in (*slow, *failed):  # re-rendered in the page's language, not the one they were recorded in
        r["findings"] = output.localize(r.get("findings") if isinstance(r.get("findings"), list) else [], lang)
    slow_rows, slow_findings = [], []
    for r in slow:
        found = r.get("findings") or []
        slow_findings.append("".join(
            f'<div><b style="color:{H.SEV_COLOR.get(f.get("severity"), "#374151")}">{H.esc(f.get("code"))}</b> '
            f'{H.esc(f.get("message"))}</div>' for f in found[:3] if isinstance(f, dict))
            or f'<span class="dim">{W("no_findings")}</span>')
        prompt = r.get("usage_prompt_tokens") if r.get("usage_prompt_tokens") is not None else r.get("prompt_tokens_est")
        cold = r.get("conn_reused") == 0 and r.get("connect_ms") is not None
        slow_rows.append([("html", _when(r)), ("html", H.id_link(r["id"])), ("html", H.model_name(name(r.get("model")))),
                          r.get("status") if r.get("status") is not None else "ERR", output.num(prompt),
                          output.ms(r.get("ttfb_ms")) + (L("cold") if cold else ""), output.ms(r.get("ttft_ms")),
                          output.ms(r.get("gap_ms")), output.ms(r.get("total_ms"))])
    col = lambda *keys: [label(lang, k) for k in keys]  # noqa: E731
    sections.append((L("h.slowest", n=len(slow)), H.table(
        col("col.time", "col.id", "col.model", "show.status", "col.prompt", "col.ttfb", "col.ttft", "col.gap", "col.total"),
        slow_rows, numeric=(3, 4, 5, 6, 7, 8), below=slow_findings) if slow_rows else f'<p class="dim">{W("no_ttft")}</p>'))
    fail_rows = [[("html", _when(r)),
                  ("html", H.id_link(r["id"])), ("html", H.model_name(name(r.get("model")))), _status(r, lang),
                  ("html", _top(r))] for r in failed]
    sections.append((L("h.failed", n=len(failed)), H.table(col("col.time", "col.id", "col.model", "show.status",
                                                               "report.col.top"), fail_rows)
                     if fail_rows else f'<p class="dim">{W("no_failed")}</p>'))
    shown: dict[str, str] = {}
    for r in slow:
        shown.setdefault(r["id"], H.details(r, name(r.get("model")), L("why_slow", ttft=output.ms(r.get("ttft_ms"))), lang,
                                            db=source))
    for r in failed:
        shown.setdefault(r["id"], H.details(r, name(r.get("model")), L("why_failed", status=_status(r, lang)), lang,
                                            db=source))
    if shown:
        sections.append((L("h.details"), "".join(shown.values())))
    sections.append(("", f'<p class="dim">{H.esc(L("note_method", method=res["percentile"]))}'
                     + W("note_cold" if include_cold else "note_warm")
                     + W("note_show", cmd=f"<code>{H.esc(H.show_command('ID', source))}</code>") + "</p>"))
    return H.page(L("title"), meta, sections, lang)


def _status(r: dict, lang: str) -> str:
    """A request's status as the page shows it (``output.status_text``, its one word in ``lang``)."""
    s = output.status_text(r)
    return label(lang, "report.aborted") if s == "aborted" else s


def _fit_text(g: dict, lang: str = "en") -> str:
    """``a ms + b ms/1k tokens (R² r, n=N)`` of a fit (all input tokens or uncached), or –."""
    if g.get("ttft_slope_ms_per_1k") is None:
        return "–"
    return label(lang, "report.fit", a=f"{g['ttft_intercept_ms']:.0f}", b=f"{g['ttft_slope_ms_per_1k']:.0f}",
                 r2=f"{g['ttft_fit_r2']:.2f}", n=f"{g['ttft_fit_n']:,}")


def _fit_html(g: dict, lang: str = "en") -> str:
    """A group's TTFT fit with its warning (worded as `stats` words it) and, when the server reported
    cache hits, the fit against uncached tokens beside it and which of the two explains TTFT better."""
    out = H.esc(_fit_text(g, lang))
    warning = fit_warning(g, lang)
    if warning:
        out += f'<br/><span class="warn">⚠ {H.esc(warning)}</span>'
    u = g.get("uncached_fit")
    if u and u.get("ttft_slope_ms_per_1k") is not None:
        out += f'<br/><span class="dim">{H.esc(label(lang, "report.vs_uncached", fit=_fit_text(u, lang)))}</span>'
        if g.get("better_fit"):
            out += f'<br/><b>{H.esc(label(lang, "stats.follows_" + _better(g)))}</b>'
    return out


def _better(g: dict) -> str:
    """Which fit explains TTFT better: "uncached" or "all" (input tokens)."""
    return "uncached" if g.get("better_fit") == "uncached" else "all"


def _by_route(db, filters: Filters, by: str | None) -> bool:
    """Whether the page compares routes: asked for (``--by route``), rows of one experiment (as
    `firsttoken compare` tags them), or requests that went through more than one route."""
    if by is not None:
        return by == "route"
    return bool(filters.experiment) or len(sq.group_values(db, filters, "route", 2)) > 1


def _routes_section(db, filters: Filters, include_cold: bool, linked: set[str], lang: str = "en") -> str:
    """One curve per route on one chart (dots and fitted line), a table of per-route TTFB, TTFT
    and fit, and with two routes the bisection `firsttoken compare` prints."""
    from firsttoken.addon.hops import route_holds
    from firsttoken.cli.compare import verdict

    shown = tuple(m for m in sq.METRICS if m[0] in ("ttfb", "gap", "ttft"))  # only what the table shows
    groups = sq.compute(db, filters, by="route", include_cold=include_cold, metrics=shown)["groups"]
    name = lambda g: g if g is not None else label(lang, "report.no_route")  # noqa: E731
    colors = {g["group"]: H.PALETTE[i % len(H.PALETTE)] for i, g in enumerate(groups)}
    pts = sq.scatter_points(db, filters, {g["group"]: g["ttft_ms"]["n"] for g in groups}, include_cold=include_cold,
                            by="route")
    fits = {g["group"]: (g["ttft_intercept_ms"], g["ttft_slope_ms_per_1k"] / 1000) for g in groups
            if g["ttft_slope_ms_per_1k"] is not None}
    legend = '<p class="legend">' + "".join(
        f'<span><span class="sw" style="background:{colors[g["group"]]}"></span>{H.esc(name(g["group"]))}</span>'
        for g in groups) + "</p>"
    rows = []
    for g in groups:
        g["ttft_slope_se_ms_per_1k"] = sq.slope_se(g)
        se = g["ttft_slope_se_ms_per_1k"]
        slope = "–" if g["ttft_slope_ms_per_1k"] is None else (
            f"{g['ttft_slope_ms_per_1k']:.0f}" + (f" ± {se:.{0 if se >= 10 else 1}f}" if se is not None and se != float("inf") else ""))
        sw = f'<span class="sw" style="background:{colors[g["group"]]}"></span>'
        rows.append([("html", f'<span class="nw">{sw}{H.esc(name(g["group"]))}</span>'), f"{g['count']:,}",
                     f"{(g['error_rate'] or 0) * 100:.1f}%",
                     *[f"{output.ms(g[m]['p50'])} / {output.ms(g[m]['p95'])}" for m in ("ttfb_ms", "gap_ms", "ttft_ms")],
                     slope, output.ms(g["ttft_intercept_ms"]),
                     "–" if g["ttft_fit_r2"] is None else f"{g['ttft_fit_r2']:.2f}"])
    text = ""
    if len(groups) == 2:
        a, b = groups
        served = [sq.group_values(db, dataclasses.replace(filters, route=g["group"]), "model", 10) for g in groups]
        if _same_models(*served):  # the bisection holds only for the same requests through both routes
            held = {name(g["group"]): route_holds(sq.head_timings(db, dataclasses.replace(filters, route=g["group"])))
                    for g in groups}  # behind a hop that holds headers, TTFB holds the prefill
            text = f'<p><b>{H.esc(verdict(name(a["group"]), name(b["group"]), a, b, held=held, lang=lang)["text"])}</b></p>'
        else:
            a_, b_ = H.esc(name(a["group"])), H.esc(name(b["group"]))
            text = '<p class="dim">' + H.words(
                lang, "report.routes_differ", a=a_, b=b_, ma=H.esc(", ".join(map(str, served[0]))),
                mb=H.esc(", ".join(map(str, served[1]))),
                compare=f"<code>firsttoken compare --route {a_} --route {b_}</code>",
                report="<code>firsttoken report --experiment NAME</code>") + "</p>"
    warnings = "".join(f'<p class="warn">{H.esc(label(lang, "report.route_warn", name=name(g["group"]), warning=w))}</p>'
                       for g in groups if (w := fit_warning(g, lang)))
    return (legend + H.scatter_svg(pts, fits, colors, linked=linked, names={r: name(r) for r in pts},
                                   aria=label(lang, "report.aria_routes"), lang=lang)
            + H.table([label(lang, k) for k in ("col.route", "col.requests", "col.errors")]
                      + ["TTFB P50/P95", "gap P50/P95", "TTFT P50/P95", label(lang, "report.col.slope"),
                         label(lang, "report.col.intercept"), "R²"], rows, numeric=(1, 2, 3, 4, 5, 6, 7, 8))
            + text + warnings + f'<p class="dim">{H.words(lang, "report.routes_note")}</p>')


def _same_models(a: list, b: list) -> bool:
    """Whether two routes served the same models (both lists complete: fewer than 10 each)."""
    return len(a) < 10 and sorted(map(str, a)) == sorted(map(str, b))


def _cache_section(groups: list[dict], name, lang: str = "en") -> str:
    """Per model, TTFT fitted against all input tokens and against the uncached ones (prompt
    tokens minus what the server reported as cache reads), with R² each: with prompt caching
    prefill grows with what was not cached. Empty when no server reported a cache hit."""
    rows = []
    for g in groups:
        u = g.get("uncached_fit")
        if not u:
            continue
        r2a, r2u = g.get("ttft_fit_r2"), u.get("ttft_fit_r2")
        better = (f"<b>{H.words(lang, 'report.better.' + _better(g))}</b>"
                  + (H.esc(label(lang, "report.r2_vs", a=f"{max(r2a, r2u):.2f}", b=f"{min(r2a, r2u):.2f}"))
                     if r2a is not None and r2u is not None else ""))
        rows.append([("html", H.model_name(name(g["group"]))), f"{u['cached_requests']:,}", _fit_text(g, lang),
                     _fit_text(u, lang), ("html", better) if g.get("better_fit") else "–"])
    if not rows:
        return ""
    return (H.table([label(lang, k) for k in ("col.model", "report.col.cache_hits", "report.col.vs_all",
                                              "report.col.vs_uncached", "report.col.better")], rows, numeric=(1,))
            + '<p class="dim">' + H.words(lang, "report.cache_note", oai="<code>cached_tokens</code>",
                                          ant="<code>cache_read_input_tokens</code>",
                                          ds="<code>prompt_cache_hit_tokens</code>") + "</p>")


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
@click.option("--by", type=click.Choice(["model", "route"]), default=None,
              help="route: also compare the upstream routes (one curve each, TTFB and fit per route); model: per model "
                   "only. Default: routes are compared when the requests went through more than one, or with "
                   "--experiment (as `firsttoken compare` tags its rows).")
@lang_option
def report(db_path, html_path, include_cold, top, by, lang, **kw):
    """Write a self-contained HTML report (opens offline): charts, error breakdown, slowest requests."""
    from firsttoken.cli.options import cannot_write, console, fail, open_output, reader, reading_db, resolve_lang

    db = reader(db_path)
    try:
        # cold requests count unless --exclude-cold (the option's None means "the default"), as in `stats`
        page = build(db, make_filters(kw), include_cold is not False, top, source=reading_db(db_path), by=by,
                     lang=resolve_lang(lang))
    except ValueError as e:  # NothingToReport included: no file is written
        fail(str(e))
    with open_output(html_path) as fh:
        try:
            fh.write(page)
        except OSError as e:  # the disk filled up
            fail(cannot_write(html_path, e))
    console(stderr=True).print(f"wrote {html_path} ({len(page) / 1024:,.0f} KB)")
