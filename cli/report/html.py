"""The HTML of `firsttoken report`: one self-contained file, charts as inline SVG drawn here.

No scripts, no fonts, no images, no links out of the page (only ``#req-ID`` anchors to a request's own
row): it opens offline and can be mailed around. Charts scale to the page width
(viewBox, ``width:100%``) and wide tables scroll inside their box, so the page fits at 800 px.
"""

from __future__ import annotations

import html
import math
from collections.abc import Iterable
from typing import Any

from firsttoken.addon.safe_text import printable
from firsttoken.cli import output
from firsttoken.cli.labels import label

PALETTE = ("#2563eb", "#dc2626", "#059669", "#d97706", "#7c3aed", "#0891b2", "#db2777", "#4b5563")
SEV_COLOR = {"error": "#dc2626", "warn": "#d97706", "info": "#0891b2"}
PCT_SHADES = {"p99": "#dbeafe", "p95": "#93c5fd", "p90": "#60a5fa", "p50": "#1d4ed8"}
#: the two parts of TTFT in the split bars
SPLIT_COLORS = {"ttfb": "#1d4ed8", "gap": "#f59e0b"}

CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;color:#111827;margin:24px auto;max-width:1100px;padding:0 16px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #e5e7eb;padding-bottom:4px}
.meta{color:#6b7280;font-size:13px}table{border-collapse:collapse;width:100%;font-size:13px}
th,td{padding:4px 8px;border-bottom:1px solid #f3f4f6;text-align:left;vertical-align:top}th{background:#f9fafb;font-weight:600}
td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}.warn{color:#b45309}.dim{color:#6b7280}
.bar{display:inline-block;height:10px;border-radius:2px;vertical-align:middle}
svg{display:block;margin:8px 0;width:100%;height:auto}svg text{font:12px system-ui,sans-serif;fill:#374151}
.legend span{display:inline-block;margin-right:14px;font-size:12px;white-space:nowrap}.sw{display:inline-block;width:10px;height:10px;border-radius:5px;margin-right:4px;vertical-align:middle}
.charts svg{margin-bottom:14px}.scroll{overflow-x:auto;max-width:100%}
.nw{white-space:nowrap}a.id{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:12px;white-space:nowrap;color:#1d4ed8}
.req{border:1px solid #e5e7eb;border-radius:6px;padding:8px 12px;margin:10px 0}.req:target{border-color:#2563eb;box-shadow:0 0 0 2px #bfdbfe}
.req h3{font-size:14px;margin:0 0 6px;font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;white-space:nowrap;overflow-x:auto}
.req dl{display:grid;grid-template-columns:max-content 1fr;gap:2px 12px;margin:0 0 6px;font-size:13px}.req dt{color:#6b7280}.req dd{margin:0}
.hint{color:#4b5563;margin-left:1.2em}tr.has-sub td{border-bottom:none}tr.sub td{padding:0 8px 6px 24px;font-size:12px}circle:hover{stroke:#111827;stroke-width:1.5}
tr:target td{background:#eff6ff}.summary{display:flex;flex-wrap:wrap;gap:12px;margin:14px 0 4px}
.card{flex:1 1 260px;border:1px solid #e5e7eb;border-radius:8px;padding:10px 14px;background:#f9fafb}
.card .k{color:#6b7280;font-size:12px;margin-bottom:2px}.card .v{font-size:20px;font-weight:600;line-height:1.3}
.card.bad{border-color:#fca5a5;background:#fef2f2}.card.ok{border-color:#86efac;background:#f0fdf4}.card .s{font-size:13px}
"""


def esc(v: Any) -> str:
    """HTML-escaped, with control characters shown as escapes (never raw in the file)."""
    return html.escape(printable("" if v is None else str(v), keep_newlines=True), quote=True)


def words(lang: str, key: str, **markup: str) -> str:
    """The ``key`` label in ``lang``, escaped, its fields filled with ``markup`` (HTML, escaped by the caller)."""
    text = esc(label(lang, key))
    return text.format(**markup) if markup else text


def nice_ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    if hi <= lo:
        hi = lo + 1
    raw = (hi - lo) / n
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    start = math.floor(lo / step) * step
    return [start + i * step for i in range(int(math.ceil((hi - start) / step)) + 1)]


def _num(v: float) -> str:
    if abs(v) >= 1000:
        return f"{v / 1000:g}k"
    return f"{v:g}"


def anchor(request_id: str) -> str:
    """The id attribute of a request's details section (``#req-…``)."""
    return "req-" + esc(request_id)


def id_link(request_id: str, n: int = 8) -> str:
    """A request id that never wraps, linked to its details further down the page."""
    return f'<a class="id" href="#{anchor(request_id)}" title="{esc(request_id)}">{esc(str(request_id)[:n])}</a>'


def model_name(name: Any) -> str:
    """A model name that never breaks at its hyphens."""
    return f'<span class="nw">{esc(name)}</span>'


def log_axis(xs: list[float]) -> bool:
    """Whether a prompt-token axis should be logarithmic: the prompts span two decades or more and
    most of them sit in the lowest tenth of a linear axis (where they would be squashed at x≈0)."""
    pos = sorted(x for x in xs if x and x > 0)
    if len(pos) < 3 or pos[-1] / pos[0] < 100:
        return False
    return pos[len(pos) // 2] < pos[-1] / 10


def scatter_svg(series: dict[Any, list[tuple]], fits: dict[Any, tuple[float, float]],
                colors: dict[Any, str], w: int = 900, h: int = 380, linked: set[str] | frozenset[str] = frozenset(),
                names: dict[Any, str] | None = None, aria: str | None = None, lang: str = "en") -> str:
    """TTFT (y, ms) against prompt tokens (x), one colour per group (model, route), with each
    group's fitted line. Points are (prompt tokens, TTFT, request id[, why left out of the fit]).

    A log x axis when the prompts span decades (``log_axis``; the line is then drawn as a curve);
    dots left out of the fit are hollow. Each dot has a hover title (id, model, TTFT, prompt tokens);
    dots of requests in ``linked`` link to their row."""
    pts = [p for ps in series.values() for p in ps]
    if not pts:
        return f'<p class="dim">{words(lang, "report.no_points")}</p>'
    ml, mr, mt, mb = 60, 16, 12, 40
    log = log_axis([p[0] for p in pts])
    if log:
        lo_dec = math.floor(math.log10(max(1.0, min(p[0] for p in pts if p[0] > 0))))
        hi_dec = math.ceil(math.log10(max(p[0] for p in pts)))
        xs = [10.0 ** d for d in range(lo_dec, hi_dec + 1)]
        span = (lo_dec, max(hi_dec, lo_dec + 1))
        sx = lambda x: ml + (w - ml - mr) * (math.log10(max(x, 10.0 ** span[0])) - span[0]) / (span[1] - span[0])  # noqa: E731
    else:
        xs = nice_ticks(0, max(p[0] for p in pts))
        sx = lambda x: ml + (w - ml - mr) * x / xs[-1]  # noqa: E731
    ys = nice_ticks(0, max(p[1] for p in pts))
    y1 = ys[-1]
    sy = lambda y: h - mb - (h - mt - mb) * y / y1  # noqa: E731
    aria = aria or label(lang, "report.aria_scatter")
    out = [f'<svg viewBox="0 0 {w} {h}" style="max-width:{w}px" role="img" aria-label="{esc(aria)}"'
           + (' data-x="log"' if log else "") + ">"]
    for t in xs:
        out.append(f'<line x1="{sx(t):.1f}" y1="{mt}" x2="{sx(t):.1f}" y2="{h - mb}" stroke="#f3f4f6"/>'
                   f'<text x="{sx(t):.1f}" y="{h - mb + 16}" text-anchor="middle">{_num(t)}</text>')
    for t in ys:
        out.append(f'<line x1="{ml}" y1="{sy(t):.1f}" x2="{w - mr}" y2="{sy(t):.1f}" stroke="#f3f4f6"/>'
                   f'<text x="{ml - 6}" y="{sy(t) + 4:.1f}" text-anchor="end">{esc(output.ms(t))}</text>')
    out.append(f'<line x1="{ml}" y1="{h - mb}" x2="{w - mr}" y2="{h - mb}" stroke="#9ca3af"/>'
               f'<line x1="{ml}" y1="{mt}" x2="{ml}" y2="{h - mb}" stroke="#9ca3af"/>'
               f'<text x="{(w + ml) / 2:.0f}" y="{h - 6}" text-anchor="middle">{words(lang, "report.axis_prompt")}</text>'
               f'<text x="14" y="{(h - mb) / 2:.0f}" transform="rotate(-90 14 {(h - mb) / 2:.0f})" text-anchor="middle">TTFT</text>')
    for model, ps in series.items():
        c = colors[model]
        name = (names or {}).get(model, model)
        for hollow in (False, True):
            dots = []
            for x, y, rid, *why in ps:
                if y > y1 or bool(why and why[0]) != hollow:
                    continue
                out_of_fit = f' · {esc(label(lang, "report.out_dot", code=why[0]))}' if hollow else ""
                dot = (f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="4.5"><title>{esc(rid)} · {esc(name)} · TTFT '
                       f'{esc(output.ms(y))} · {esc(label(lang, "report.dot_prompt", n=f"{x:,.0f}"))}{out_of_fit}</title></circle>')
                dots.append(f'<a href="#{anchor(rid)}">{dot}</a>' if rid in linked else dot)
            if dots:
                head = (f'<g class="out" fill="#ffffff" stroke="{c}" stroke-width="1.5">' if hollow else
                        f'<g fill="{c}" fill-opacity="0.85" stroke="#ffffff" stroke-width="0.75">')
                out.append(head + "".join(dots) + "</g>")
    for model, (a, b) in fits.items():
        ps = [p for p in series.get(model) or [] if not (len(p) > 3 and p[3])]
        if not ps:
            continue
        lo, hi = min(p[0] for p in ps), max(p[0] for p in ps)
        if log:
            lo = max(lo, 10.0 ** span[0])
            at = [lo * (hi / lo) ** (k / 40) for k in range(41)] if hi > lo else [lo]
            line = " ".join(f"{sx(x):.1f},{sy(max(0, min(y1, a + b * x))):.1f}" for x in at)
            out.append(f'<polyline points="{line}" fill="none" stroke="{colors[model]}" stroke-width="2.5"/>')
        else:
            ya, yb = a + b * lo, a + b * hi
            out.append(f'<line x1="{sx(lo):.1f}" y1="{sy(max(0, min(y1, ya))):.1f}" x2="{sx(hi):.1f}" '
                       f'y2="{sy(max(0, min(y1, yb))):.1f}" stroke="{colors[model]}" stroke-width="2.5"/>')
    out.append("</svg>")
    return "".join(out)


def chart_top(rows: Iterable[dict[str, Any]]) -> float:
    """The largest value percentile bars of these figures draw (P99, else P95): pass the largest
    over sibling charts as their ``top`` so that they share one time axis."""
    return max([m.get("p99") or m.get("p95") or 0 for m in rows if m.get("n")] + [0])


def percentile_svg(title: str, rows: list[tuple[str, dict[str, Any]]], w: int = 900, lang: str = "en",
                   top: float | None = None) -> str:
    """Horizontal bars: P99 (lightest) behind P95, P90 and P50 (darkest), one row per group.
    ``top``: the axis's end (shared with sibling charts), at least this chart's own largest bar."""
    rows = [(g, m) for g, m in rows if m.get("n")]
    if not rows:
        return f'<p class="dim">{esc(label(lang, "report.no_data", title=title))}</p>'
    ml, mr, row_h, mt = 170, 130, 24, 26
    h = mt + row_h * len(rows) + 24
    top = max(top or 0, chart_top(m for _, m in rows)) or 1
    ticks = nice_ticks(0, top, 4)
    sx = lambda v: ml + (w - ml - mr) * v / ticks[-1]  # noqa: E731
    out = [f'<svg viewBox="0 0 {w} {h}" style="max-width:{w}px" role="img" aria-label="{esc(title)}">',
           f'<text x="0" y="14" style="font-weight:600">{esc(title)}</text>']
    for t in ticks:
        out.append(f'<line x1="{sx(t):.1f}" y1="{mt - 4}" x2="{sx(t):.1f}" y2="{h - 20}" stroke="#f3f4f6"/>'
                   f'<text x="{sx(t):.1f}" y="{h - 6}" text-anchor="middle">{esc(output.ms(t))}</text>')
    for i, (g, m) in enumerate(rows):
        y = mt + i * row_h
        out.append(f'<text x="{ml - 6}" y="{y + 15}" text-anchor="end">{esc(str(g)[:24])}</text>')
        for q in ("p99", "p95", "p90", "p50"):
            v = m.get(q)
            if v is not None:
                out.append(f'<rect x="{ml}" y="{y + 3}" width="{max(0.5, sx(v) - ml):.1f}" height="{row_h - 8}" '
                           f'fill="{PCT_SHADES[q]}"><title>{q.upper()} {esc(output.ms(v))}</title></rect>')
        out.append(f'<text x="{sx(m.get("p99") or m.get("p50") or 0) + 4:.1f}" y="{y + 15}">'
                   f'{esc(output.ms(m.get("p50")))} · {esc(output.ms(m.get("p95")))}</text>')
    out.append("</svg>")
    return "".join(out)


def phases_svg(title: str, rows: list[tuple[str, str, float, float]], w: int = 900, lang: str = "en") -> str:
    """One bar per actual request (rows: label, request id, its TTFB, its gap): its own TTFB then
    its own gap, which add up to its own TTFT. (Percentiles of TTFB and gap never add up to a
    percentile of TTFT, so no bar here is built from percentiles.)"""
    rows = [(g, rid, b, gp) for g, rid, b, gp in rows if b is not None and gp is not None]
    if not rows:
        return f'<p class="dim">{esc(label(lang, "report.no_data", title=title))}</p>'
    ml, mr, bar_h, mt = 250, 190, 20, 26
    h = mt + bar_h * len(rows) + 24
    top = max(b + max(0.0, gp) for _, _, b, gp in rows) or 1
    ticks = nice_ticks(0, top, 4)
    sx = lambda v: ml + (w - ml - mr) * v / ticks[-1]  # noqa: E731
    out = [f'<svg viewBox="0 0 {w} {h}" style="max-width:{w}px" role="img" aria-label="{esc(title)}" class="phases">',
           f'<text x="0" y="14" style="font-weight:600">{esc(title)}</text>',
           f'<rect x="{w - 200}" y="4" width="10" height="10" fill="{SPLIT_COLORS["ttfb"]}"/>'
           f'<text x="{w - 186}" y="13">TTFB</text>'
           f'<rect x="{w - 140}" y="4" width="10" height="10" fill="{SPLIT_COLORS["gap"]}"/>'
           f'<text x="{w - 126}" y="13">{words(lang, "report.phases_gap")}</text>']
    for t in ticks:
        out.append(f'<line x1="{sx(t):.1f}" y1="{mt - 4}" x2="{sx(t):.1f}" y2="{h - 20}" stroke="#f3f4f6"/>'
                   f'<text x="{sx(t):.1f}" y="{h - 6}" text-anchor="middle">{esc(output.ms(t))}</text>')
    for i, (g, rid, ttfb, gap) in enumerate(rows):
        y = mt + i * bar_h
        gap = max(0.0, gap)
        ttft = ttfb + gap
        tip = label(lang, "report.phases_tip", rid=rid, ttft=output.ms(ttft), ttfb=output.ms(ttfb), gap=output.ms(gap))
        out.append(f'<g data-request="{esc(rid)}" data-ttfb="{ttfb:.3f}" data-gap="{gap:.3f}">'
                   f'<text x="{ml - 6}" y="{y + 14}" text-anchor="end">{esc(str(rid)[:8])} {esc(str(g)[:22])}</text>'
                   f'<rect x="{ml}" y="{y + 3}" width="{max(0.5, sx(ttfb) - ml):.1f}" height="{bar_h - 6}" '
                   f'fill="{SPLIT_COLORS["ttfb"]}"><title>{esc(tip)}</title></rect>'
                   f'<rect x="{sx(ttfb):.1f}" y="{y + 3}" width="{max(0.5, sx(ttft) - sx(ttfb)):.1f}" '
                   f'height="{bar_h - 6}" fill="{SPLIT_COLORS["gap"]}"><title>{esc(tip)}</title></rect>'
                   f'<text x="{sx(ttft) + 4:.1f}" y="{y + 14}">{esc(output.ms(ttft))} = {esc(output.ms(ttfb))} '
                   f'+ {esc(output.ms(gap))}</text></g>')
    out.append("</svg>")
    return "".join(out)


def show_command(request_id: str, db: str = "") -> str:
    """The `firsttoken show` command for one request of the database ``db`` the page was made from
    (a page is read later, elsewhere: the default database may be another file by then)."""
    import shlex

    return f"firsttoken show {request_id}" + (f" --db {shlex.quote(db)}" if db else "")


def table(head: Iterable[str], rows: Iterable[Iterable[Any]], numeric: Iterable[int] = (),
          below: Iterable[str | None] | None = None, ids: Iterable[str | None] | None = None) -> str:
    """rows: cells are escaped unless given as ('html', markup). ``below``: per row, markup shown on a
    full-width line under it (e.g. its findings), so that long text never squeezes the columns.
    ``ids``: per row, the request id whose links (``id_link``, the scatter's dots) land on it, or None."""
    num = set(numeric)
    head = list(head)
    rows = [list(r) for r in rows]
    subs = list(below) if below is not None else [None] * len(rows)
    targets = list(ids) if ids is not None else [None] * len(rows)
    cell = lambda i, v: v[1] if isinstance(v, tuple) and v and v[0] == "html" else esc(v)  # noqa: E731
    th = "".join(f'<th class="n">{esc(h)}</th>' if i in num else f"<th>{esc(h)}</th>" for i, h in enumerate(head))
    body = "".join("<tr" + (f' id="{anchor(rid)}"' if rid else "") + ("" if sub is None else ' class="has-sub"') + ">"
                   + "".join(f'<td class="n">{cell(i, v)}</td>' if i in num else f"<td>{cell(i, v)}</td>"
                             for i, v in enumerate(r)) + "</tr>"
                   + (f'<tr class="sub"><td colspan="{len(head)}">{sub}</td></tr>' if sub is not None else "")
                   for r, sub, rid in zip(rows, subs, targets))
    return f'<div class="scroll"><table><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table></div>'


def page(title: str, meta: str, sections: list[tuple[str, str]], lang: str = "en") -> str:
    body = "".join(f"<h2>{esc(h)}</h2>{content}" if h else content for h, content in sections)
    return (f'<!DOCTYPE html><html lang="{esc(lang)}"><head><meta charset="utf-8"/><meta name="viewport" '
            f'content="width=device-width, initial-scale=1"/><title>{esc(title)}</title><style>{CSS}</style></head>'
            f'<body><h1>{esc(title)}</h1><p class="meta">{meta}</p>{body}</body></html>\n')
