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
from firsttoken.cli.labels import LABELS, counted, label, severity
from firsttoken.cli.options import cold_option, db_option, filter_options, lang_option, make_filters
from firsttoken.cli.report import html as H
from firsttoken.cli.stats import fit_left_out

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
    overall = sq.overall(db, filters, include_cold=include_cold, qs=(50, 75, 95), metrics=(("ttft", "ttft_ms"),))
    ttft_all = overall["ttft_ms"] if overall else {"n": 0, "p50": None, "p75": None, "p95": None}
    br = sq.finding_breakdown(db, filters, total)
    sections.append(("", _summary(groups, total, ttft_all, br, name, lang)))
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
        summary_rows, numeric=(1, 2, 3, 4, 5, 6, 7)) + _fit_warnings(groups, name, lang)
        + f'<p class="dim">{W("population")}</p>'))
    counts = {g["group"]: g["ttft_ms"]["n"] for g in groups}
    pts = sq.scatter_points(db, filters, counts, include_cold=include_cold)
    fits = {g["group"]: (g["ttft_intercept_ms"], g["ttft_slope_ms_per_1k"] / 1000) for g in groups
            if g["ttft_slope_ms_per_1k"] is not None}
    p75 = ttft_all.get("p75")  # "slow": above P75 of every streamed request's TTFT, the slowest `top` of them
    slow = [r for r in sq.slowest(db, filters, [g["group"] for g in groups], top)
            if p75 is not None and (r["ttft_ms"] or 0) > p75]
    failed = [r for r in queries.recent(db, filters if filters.status else dataclasses.replace(filters, status="error"), top)
              if queries.is_error(r)]
    listed = {r["id"] for r in slow} | {r["id"] for r in failed}
    legend = '<p class="legend">' + "".join(f'<span><span class="sw" style="background:{colors[m]}"></span>{H.esc(name(m))}</span>'
                                            for m in pts) + "</p>"
    sections.append((L("h.scatter"), legend
                     + H.scatter_svg(pts, fits, colors, linked=listed, names={m: name(m) for m in pts}, lang=lang)
                     + f'<p class="dim">{W("scatter_note")}{_scatter_notes(pts, lang)}</p>'))
    if _by_route(db, filters, by):
        sections.append((L("h.per_route"), _routes_section(db, filters, include_cold, listed, lang)))
    cache = _cache_section(groups, name, lang)
    if cache:
        sections.append((L("h.cache"), cache))
    # side by side, never added up: P95 TTFT is not P95 TTFB + P95 gap (the slowest TTFBs and the
    # slowest gaps are mostly other requests); the split into phases is of actual requests
    # one time axis for TTFT, TTFB and the gap: bars of unequal times never look equal side by side
    shared = H.chart_top(g[m] for g in groups for m in ("ttft_ms", "ttfb_ms", "gap_ms"))
    charts = "".join(H.percentile_svg(f"{metric} (P50 · P95)", [(name(g["group"]), g[m]) for g in groups], lang=lang,
                                      top=shared)
                     for metric, m in (("TTFT", "ttft_ms"), ("TTFB", "ttfb_ms"), ("gap = TTFT − TTFB", "gap_ms")))
    if any(g["whole_ms"]["n"] for g in groups):
        charts += H.percentile_svg(L("whole_chart"), [(name(g["group"]), g["whole_ms"]) for g in groups], lang=lang)
    charts += H.phases_svg(L("phases", n=min(len(slow), PHASE_BARS)),
                           [(name(r.get("model")), r["id"], r.get("ttfb_ms"), r.get("gap_ms")) for r in slow[:PHASE_BARS]],
                           lang=lang)
    sections.append((L("h.percentiles"), f'<div class="charts">{charts}</div><p class="dim">{W("percentiles_note")}</p>'))
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
        found = [f for f in r.get("findings") or [] if isinstance(f, dict)]
        slow_findings.append(_found_html(found[:3]) or f'<span class="dim">{W("no_findings")}</span>')
        prompt = r.get("usage_prompt_tokens") if r.get("usage_prompt_tokens") is not None else r.get("prompt_tokens_est")
        cold = r.get("conn_reused") == 0 and r.get("connect_ms") is not None
        slow_rows.append([("html", _when(r)), ("html", H.id_link(r["id"])), ("html", H.model_name(name(r.get("model")))),
                          r.get("status") if r.get("status") is not None else "ERR", output.num(prompt),
                          output.ms(r.get("ttfb_ms")) + (L("cold") if cold else ""), output.ms(r.get("ttft_ms")),
                          output.ms(r.get("gap_ms")), output.ms(r.get("total_ms"))])
    col = lambda *keys: [label(lang, k) for k in keys]  # noqa: E731
    slow_note = (W("slow_note", p75=H.esc(output.ms(p75)), top=f"{top:,}") if slow_rows else
                 W("no_slow", p75=H.esc(output.ms(p75))) if p75 is not None else W("no_ttft"))
    sections.append((L("h.slowest", n=len(slow)), (H.table(
        col("col.time", "col.id", "col.model", "show.status", "col.prompt", "col.ttfb", "col.ttft", "col.gap", "col.total"),
        slow_rows, numeric=(3, 4, 5, 6, 7, 8), below=slow_findings, ids=[r["id"] for r in slow]) if slow_rows else "")
        + f'<p class="dim">{slow_note}</p>'))
    # one row per request: a failed one already listed among the slowest links there, not to a second copy
    slow_ids = {r["id"] for r in slow}
    fail_rows = [[("html", _when(r)),
                  ("html", H.id_link(r["id"])), ("html", H.model_name(name(r.get("model")))), _status(r, lang),
                  ("html", _top(r))] for r in failed]
    fail_hints = [_hint(r) for r in failed]
    sections.append((L("h.failed", n=len(failed)), H.table(col("col.time", "col.id", "col.model", "show.status",
                                                               "report.col.top"), fail_rows,
                                                           below=fail_hints if any(fail_hints) else None,
                                                           ids=[None if r["id"] in slow_ids else r["id"] for r in failed])
                     if fail_rows else f'<p class="dim">{W("no_failed")}</p>'))
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
    """A group's TTFT fit (its warnings are said once per cause under the table: ``_fit_warnings``),
    what it left out as not prefill and, when the server reported cache hits, the fit against
    uncached tokens beside it and which of the two explains TTFT better."""
    out = H.esc(_fit_text(g, lang))
    left_out = fit_left_out(g, lang)
    if left_out:
        out += f'<br/><span class="dim">{H.esc(left_out)}</span>'
    u = g.get("uncached_fit")
    if u and u.get("ttft_slope_ms_per_1k") is not None:
        out += f'<br/><span class="dim">{H.esc(label(lang, "report.vs_uncached", fit=_fit_text(u, lang)))}</span>'
        if g.get("better_fit"):
            out += f'<br/><b>{H.esc(label(lang, "stats.follows_" + _better(g)))}</b>'
    return out


def _fit_warnings(groups: list[dict], name, lang: str = "en") -> str:
    """Why some groups have no fit (or an unreliable one), one line per cause naming every group it
    applies to, and how to get a fit said once: not the same warning under each model."""
    by_cause: dict[str, list[str]] = {}
    mins: dict[str, int] = {}
    for g in groups:
        for n in g.get("ttft_fit_notes") or []:
            if isinstance(n, dict) and f"report.nofit.{n.get('code')}" in LABELS["en"]:
                by_cause.setdefault(n["code"], []).append(str(name(g["group"])))
                mins[n["code"]] = n.get("min", sq.MIN_FIT_N)
    if not by_cause:
        return ""
    lines = [label(lang, f"report.nofit.{code}", models=", ".join(models), min=mins[code])
             for code, models in by_cause.items()]
    hint = H.words(lang, "report.nofit.hint", cmd="<code>firsttoken sweep --inputs 1k,8k,32k</code>")
    return "".join(f'<p class="warn">⚠ {H.esc(t)}</p>' for t in lines) + f'<p class="dim">{hint}</p>'


def _summary(groups: list[dict], total: int, ttft: dict, br: list[dict], name, lang: str = "en") -> str:
    """The few things that matter, first: a verdict (failures, else warnings, by finding code), P50/P95
    TTFT of every streamed request, and what each extra 1k prompt tokens costs (the models' fits)."""
    L = lambda key, **kw: label(lang, f"report.sum.{key}", **kw)  # noqa: E731
    errors = sum(g["errors"] for g in groups)
    codes = lambda sev: ", ".join([f"{b['code']} ({b['count']:,})" for b in br if b["severity"] == sev][:3])  # noqa: E731
    warned = sum(b["count"] for b in br if b["severity"] == "warn")
    if errors:
        verdict, cls = L("failed", e=f"{errors:,}", n=f"{total:,}", pct=f"{errors / total * 100:.0f}%",
                         codes=codes("error") or "–"), "bad"
    elif warned:
        verdict, cls = L("warned", k=f"{warned:,}", n=f"{total:,}", codes=codes("warn")), ""
    else:
        verdict, cls = L("healthy", n=f"{total:,}"), "ok"
    cards = [(L("verdict"), f'<div class="s">{H.esc(verdict)}</div>', cls)]
    if ttft.get("n"):
        figures = H.esc(L("ttft_v", p50=output.ms(ttft["p50"]), p95=output.ms(ttft["p95"])))
        cards.append((L("ttft"), f'<div class="v">{figures}</div>'
                                 f'<div class="s dim">{H.esc(L("ttft_n", n=format(ttft["n"], ",")))}</div>', ""))
    fitted = [g for g in groups if g.get("ttft_slope_ms_per_1k") is not None][:3]
    body = ""
    for g in fitted:
        slope = H.esc(L("slope_v", b=format(g["ttft_slope_ms_per_1k"], ".0f")))
        of = H.esc(L("slope_of", model=name(g["group"]), r2=format(g["ttft_fit_r2"], ".2f"), n=format(g["ttft_fit_n"], ",")))
        body += f'<div><span class="v">{slope}</span> <span class="s">{of}</span></div>'
        left = g.get("ttft_fit_excluded") or []
        if left:
            why = L("left_out", n=format(sum(e["n"] for e in left), ","), codes=", ".join(e["code"] for e in left))
            body += f'<div class="s dim">{H.esc(why)}</div>'
    if not fitted:
        sweep = "<code>firsttoken sweep --inputs 1k,8k,32k</code>"
        body = f'<div class="s">{H.words(lang, "report.sum.no_slope", cmd=sweep)}</div>'
        left = {}
        for g in groups:
            for e in g.get("ttft_fit_excluded") or []:
                left[e["code"]] = left.get(e["code"], 0) + e["n"]
        if left:  # what kept the fit from having enough requests, when firsttoken left them out itself
            why = L("left_out", n=format(sum(left.values()), ","), codes=", ".join(left))
            body += f'<div class="s dim">{H.esc(why)}</div>'
    cards.append((L("slope"), body, ""))
    return '<div class="summary">' + "".join(f'<div class="card {c}"><div class="k">{H.esc(k)}</div>{v}</div>'
                                             for k, v, c in cards) + "</div>"


def _scatter_notes(pts: dict, lang: str = "en") -> str:
    """The scatter's axis and hollow dots, said where they apply: a log axis, the dots left out of the fit."""
    xs = [p[0] for ps in pts.values() for p in ps]
    out = ""
    if H.log_axis(xs):
        pos = [x for x in xs if x and x > 0]
        out += " " + H.esc(label(lang, "report.scatter_log", lo=f"{min(pos):,.0f}", hi=f"{max(pos):,.0f}"))
    why = sorted({p[3] for ps in pts.values() for p in ps if len(p) > 3 and p[3]})
    if why:
        out += " " + H.esc(label(lang, "report.scatter_out", codes=", ".join(why)))
    return out


def _found_html(found: list[dict]) -> str:
    """Findings as code + message lines, the first one's fix right under it."""
    out = ""
    for i, f in enumerate(found):
        out += (f'<div><b style="color:{H.SEV_COLOR.get(f.get("severity"), "#374151")}">{H.esc(f.get("code"))}</b> '
                f'{H.esc(f.get("message"))}</div>')
        if i == 0 and f.get("hint"):
            out += f'<div class="hint">→ {H.esc(f["hint"])}</div>'
    return out


def _hint(r: dict) -> str | None:
    found = [f for f in (r.get("findings") or []) if isinstance(f, dict)]
    return f'<div class="hint">→ {H.esc(found[0]["hint"])}</div>' if found and found[0].get("hint") else None


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
    warnings = _fit_warnings(groups, name, lang)
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
@click.option("--top", type=int, default=20, show_default=True,
              help="At most this many slow requests to list (TTFT above P75 of every streamed request), slowest first.")
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
