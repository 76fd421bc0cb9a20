"""`firsttoken stats`: percentiles of TTFB, TTFT, gap, TPOT, ITL and total per model (or route,
API, prompt-size bucket, hour), error rates by finding code, and TTFT = a + b x prompt tokens."""

from __future__ import annotations

from typing import Any

import click
from rich import box
from rich.cells import cell_len
from rich.console import Group
from rich.table import Table
from rich.text import Text

from firsttoken.addon.engines import knobs
from firsttoken.addon.safe_text import printable, printable_data, printable_json
from firsttoken.addon.store import stats_queries as sq
from firsttoken.cli import output
from firsttoken.cli.labels import LABELS, label
from firsttoken.cli.options import cold_option, db_option, filter_options, json_option, lang_option, make_filters


def fit_warning(g: dict[str, Any], lang: str = "en") -> str | None:
    """Why the fit is missing or unreliable, in ``lang`` (its notes' words; the stored English
    warning when a note has no words in the label table)."""
    notes = g.get("ttft_fit_notes") or []
    words = [label(lang, f"fitnote.{n.get('code')}", **{k: f"{v:,}" if isinstance(v, int) else v
                                                          for k, v in n.items() if k != "code"})
             for n in notes if isinstance(n, dict) and f"fitnote.{n.get('code')}" in LABELS["en"]]
    if notes and len(words) == len(notes):
        return label(lang, "stats.join").join(words)
    return g.get("ttft_fit_warning")


def fit_left_out(g: dict[str, Any], lang: str = "en") -> str | None:
    """What the fit left out as not prefill and why (``ttft_fit_excluded``), in ``lang``; None: nothing."""
    parts = [label(lang, "fitout.part", n=f"{e['n']:,}", code=e["code"],
                   why=label(lang, f"fitout.{e['code']}") if f"fitout.{e['code']}" in LABELS["en"] else e.get("why", ""))
             for e in g.get("ttft_fit_excluded") or [] if isinstance(e, dict)]
    return label(lang, "fitout.head", parts=label(lang, "stats.join").join(parts)) if parts else None


def fit_text(g: dict[str, Any], lang: str = "en") -> Text:
    """A group's TTFT fit: the line, or why there is none (the rule: stats_queries.rejection)."""
    L = lambda k, **kw: label(lang, f"stats.{k}", **kw)  # noqa: E731
    if g.get("ttft_slope_ms_per_1k") is None:
        t = Text(fit_warning(g, lang) or "–", style="dim")
    else:
        t = Text(L("fit", a=f"{g['ttft_intercept_ms']:.0f}", b=f"{g['ttft_slope_ms_per_1k']:.0f}") + "\n"
                 + L("fit_n", r2=f"{g['ttft_fit_r2']:.2f}", n=f"{g['ttft_fit_n']:,}"))
        if fit_warning(g, lang):
            t.append(f"\n⚠ {fit_warning(g, lang)}", style="yellow")
    out = fit_left_out(g, lang)
    if out:
        t.append(f"\n{out}", style="dim")
    u = g.get("uncached_fit")
    if u and u.get("ttft_slope_ms_per_1k") is not None:
        t.append("\n" + L("uncached", a=f"{u['ttft_intercept_ms']:.0f}", b=f"{u['ttft_slope_ms_per_1k']:.0f}",
                          r2=f"{u['ttft_fit_r2']:.2f}", n=f"{u['cached_requests']:,}"))
        t.append("\n" + L("follows_uncached" if g.get("better_fit") == "uncached" else "follows_all"), style="bold")
    return t


def _group_name(v: Any, by: str, lang: str = "en") -> Text:
    """A group's name as shown: a model, route or experiment is whatever the client or upstream
    sent, so its control characters are shown as escapes and its brackets are not markup."""
    if v is None:
        return Text(label(lang, "stats.none"))
    if by == "hour":
        return Text(printable(f"{v.replace('T', ' ')}:00Z"))
    return Text(printable(str(v)))


#: cells a wrapping column (a model name, the fit) keeps before the tables give up their borders
MIN_FOLD = 12
#: below this, the fit's column would break its sentences and commands word by word: it goes under the table
MIN_FIT_COLUMN = 36


def _chrome(boxed: bool, ncols: int) -> int:
    """Cells a table of ``ncols`` columns spends on borders and padding (see ``_table``)."""
    return 3 * ncols + 1 if boxed else 2 * (ncols - 1)


def _table(title: str, width: int | None, fixed: list[int], folding: int) -> tuple[Table, bool]:
    """(table, boxed): boxed when the columns that never wrap (``fixed``: their widths) leave
    ``MIN_FOLD`` cells to each of the ``folding`` ones in ``width``; else without borders (a rule
    under the header, two spaces between columns), which leaves them more."""
    ncols = len(fixed) + folding
    if width is None or _chrome(True, ncols) + sum(fixed) + MIN_FOLD * folding <= width:
        return Table(title=title, header_style="bold", title_justify="left"), True
    return Table(title=title, header_style="bold", title_justify="left", box=box.SIMPLE_HEAD, show_edge=False,
                 pad_edge=False, padding=(0, 1, 0, 0)), False


def _widest(header: str, cells: list[str]) -> int:
    return max([cell_len(header)] + [cell_len(line) for c in cells for line in c.split("\n")])


def _name_lines(names: list[Text], header: str, room: int | None) -> tuple[int, list[list[Text]]]:
    """The group column's width and each name as lines of it: as wide as the widest name, at
    most ``room`` (None: no limit); a longer name folds, no character is lost."""
    w = max([cell_len(header)] + [n.cell_len for n in names])
    if room is not None:
        w = max(1, min(w, room))
    return w, [output.fold_name(n, w) if n.cell_len > w else [n] for n in names]


def _beside(lines: list[Text], rows: list[list[Any]]) -> list[list[Any]]:
    """A group's rows with its name's lines down the first column, one per row (more rows when
    the name has more lines than the group has rows), so the figures stay on their lines."""
    blank = ["" for _ in rows[0]] if rows else []
    out = []
    for i in range(max(len(lines), len(rows))):
        out.append([lines[i] if i < len(lines) else "", *(rows[i] if i < len(rows) else blank)])
    return out


def _rows_by_group(title: str, heads: list[str], groups: list[dict[str, Any]], figures: list[list[list[str]]],
                   by: str, width: int | None, lang: str) -> Table:
    """A table of rows per group (``figures``: each group's rows under ``heads``), the group's name down
    its first column: a row's name and its numbers never wrap, only the group name folds."""
    fixed = [_widest(h, [r[k] for rs in figures for r in rs]) for k, h in enumerate(heads)]
    t, boxed = _table(title, width, fixed, 1)
    room = None if width is None else width - _chrome(boxed, len(heads) + 1) - sum(fixed)
    by_head = label(lang, f"col.by.{by}")
    name_w, names = _name_lines([_group_name(g["group"], by, lang) for g in groups], by_head, room)
    t.add_column(by_head, width=name_w, no_wrap=True)
    for i, h in enumerate(heads):
        t.add_column(h, justify="left" if i == 0 else "right", no_wrap=True)
    for gi, (lines, rs) in enumerate(zip(names, figures)):
        if gi:
            t.add_section()
        for row in _beside(lines, rs):
            t.add_row(*row)
    return t


def render(res: dict[str, Any], width: int | None = None, lang: str = "en") -> Group:
    """The summary and percentile tables for a ``width``-column terminal (None: as wide as they
    need), every label in ``lang``. Names and text wrap inside their column; a number is never
    wrapped or cut."""
    res = printable_data(res)  # group names, codes, warnings: request-derived text never reaches the terminal raw
    by = res["by"]
    C = lambda k: label(lang, f"col.{k}")  # noqa: E731
    by_head = C(f"by.{by}")
    groups = res["groups"]
    rows = []
    for g in groups:
        rate = g["error_rate"]
        errors = f"{g['errors']:,}" + (f" ({rate * 100:.1f}%)" if rate is not None else "")
        codes = "\n".join(f"{c['code']} {c['rate'] * 100:.1f}%" for c in g["error_codes"][:3] if c["rate"] is not None)
        rows.append((g, f"{g['count']:,}", errors, codes or "–", f"{g['cold']:,}"))
    heads3 = ((C("requests"), 1), (C("errors"), 2), (C("cold"), 4))
    fixed = [_widest(h, [r[i] for r in rows]) for h, i in heads3]
    # a name and an error code stay whole (only the fit's words wrap) while the terminal has room for them
    group_names = [_group_name(g["group"], by, lang) for g in groups]
    code_w = max([max(cell_len(w) for w in C("codes").split())] + [cell_len(w) for r in rows for w in r[3].split()])
    name_w = max([cell_len(by_head)] + [n.cell_len for n in group_names])
    summary, boxed = _table(label(lang, "stats.summary", by=by_head), width, fixed + [name_w, code_w], 1)
    if not boxed:  # the count above its share: each stays whole
        rows = [(g, n, e.replace(" (", "\n("), codes, cold) for g, n, e, codes, cold in rows]
        fixed = [_widest(h, [r[i] for r in rows]) for h, i in heads3]
    avail = None if width is None else width - _chrome(boxed, 6) - sum(fixed)  # for the name, the codes and the fit
    if avail is not None and avail < name_w + code_w + MIN_FOLD:  # too narrow: the codes fold, the name takes its share
        code_w = max(max(cell_len(w) for w in C("codes").split()), min(code_w, (avail - MIN_FOLD) // 2))
    name_w, name_lines = _name_lines(group_names, by_head, None if avail is None else max(1, avail - MIN_FOLD - code_w))
    # the fit's sentences (a command among them) need a line's room: where the column would be narrower,
    # they go under the table, one group each, and the table keeps its figures
    fit_room = None if avail is None else avail - name_w - code_w
    fit_below = fit_room is not None and fit_room < MIN_FIT_COLUMN
    if fit_below:
        summary, boxed = _table(label(lang, "stats.summary", by=by_head), width, fixed + [name_w, code_w], 0)
        if boxed:  # the room the fit gave back: the count and its share on one line again
            rows = [(g, n, e.replace("\n(", " ("), codes, cold) for g, n, e, codes, cold in rows]
    heads = [(by_head, "left", False), (C("requests"), "right", False), (C("errors"), "right", False),
             (C("codes"), "left", True), (C("cold"), "right", False)]
    if not fit_below:
        heads.append((C("fit"), "left", True))
    for c, j, wraps in heads:
        summary.add_column(c, justify=j, overflow="fold", no_wrap=not wraps,
                           width=name_w if c == by_head else code_w if c == C("codes") else None)
    below: list[Any] = []
    for (g, n, errors, codes, cold), lines in zip(rows, name_lines):
        cells = [Text("\n").join(lines), n, Text(errors, style="red" if g["errors"] else ""), Text(codes), cold]
        if fit_below:  # the group's name, then its fit, each further line indented under the name
            head = Text(f"{printable(str(g['group'])) if g['group'] is not None else label(lang, 'stats.none')}: ",
                        style="bold")
            below += output.wrap(head.append_text(fit_text(g, lang)), width, 0, 2)
        else:
            cells.append(output.Wrapped(fit_text(g, lang)))
        summary.add_row(*cells)
    if below:
        below.insert(0, Text(C("fit"), style="bold"))

    qs = [k for k in (groups[0]["ttft_ms"] if groups else {}) if k != "n"]
    figures = [[[label(lang, f"metric.{name}"), f"{m['n']:,}", *[output.ms(m.get(q)) for q in qs]]
                for name, _ in sq.METRICS if (m := g.get(f"{name}_ms")) is not None
                and (m["n"] or name != sq.WHOLE)] for g in groups]
    pct = _rows_by_group(label(lang, "stats.percentiles") + label(lang, "stats.population")
                         + ("" if res["include_cold"] else label(lang, "stats.cold_excluded")),
                         [C("metric"), C("n"), *[q.upper() for q in qs]], groups, figures, by, width, lang)
    note = output.Wrapped(Text(label(lang, "stats.note") + label(lang, "stats.note_population")
                               + label(lang, "stats.note_cold" if res["include_cold"] else "stats.note_warm"), style="dim"))
    parts = [summary, *below, pct, note]
    if any(g.get("engine") for g in groups):
        parts += engine_tables(res, width, lang)
    return Group(*parts)


#: above/below these times the engine's own prefill per token, TTFT's slope says more than prefill grows
SLOPE_AGREES = (0.8, 1.25)


def engine_reading(g: dict[str, Any], lang: str = "en") -> str | None:
    """A group's line of the engine's own prefill per 1k tokens beside TTFT's fit slope, and what the two
    say together; None when the engine reported no prefill to fit."""
    L = lambda k, **kw: label(lang, f"stats.eng.{k}", **kw)  # noqa: E731
    e = g["engine"]
    f = e["prefill_fit"]
    if f["slope_ms_per_1k"] is None:
        if not f["n"]:
            return None
        return L("own_none", n=f"{f['n']:,}", mean=output.ms(f["ms_per_1k_mean"]) if f["ms_per_1k_mean"] else "–")
    own = f["slope_ms_per_1k"]
    text = L("own", b=f"{own:,.0f}", r2=f"{f['r2']:.2f}", n=f"{f['n']:,}")
    u = g.get("uncached_fit") or {}
    use_uncached = g.get("better_fit") == "uncached" and u.get("ttft_slope_ms_per_1k") is not None
    ttft = u["ttft_slope_ms_per_1k"] if use_uncached else g.get("ttft_slope_ms_per_1k")
    if ttft is None:
        return text + L("no_ttft")
    text += L("ttft_uncached" if use_uncached else "ttft", b=f"{ttft:,.0f}")
    ratio = ttft / own if own > 0 else None
    if ratio is None:
        return text
    if ratio > SLOPE_AGREES[1]:
        return text + L("faster", x=f"{ratio:.1f}")
    if ratio < SLOPE_AGREES[0]:
        return text + L("slower", x=f"{ratio:.1f}")
    return text + L("agrees")


def engine_tables(res: dict[str, Any], width: int | None = None, lang: str = "en") -> list[Any]:
    """The engine's own clock per group: TTFT split into its terms (P50, P95 and n of each; how many
    of a term's values the proxy inferred), then its prefill per 1k tokens beside TTFT's slope and its
    cache hits. Numbers never wrap; a group name folds; the lines below wrap by words."""
    by = res["by"]
    groups = [g for g in res["groups"] if g.get("engine")]
    C = lambda k: label(lang, f"col.{k}")  # noqa: E731
    L = lambda k, **kw: label(lang, f"stats.eng.{k}", **kw)  # noqa: E731
    figures = []
    for g in groups:
        rs = []
        for key in sq.ENGINE_TERMS:
            t = g["engine"]["terms"].get(key)
            if t is None:
                continue
            name = label(lang, f"show.eng.{key}").strip()
            if t.get("inferred"):
                name += L("inferred", n=f"{t['inferred']:,}")
            rs.append([name, f"{t['n']:,}", output.ms(t.get("p50")), output.ms(t.get("p95"))])
        figures.append(rs)
    out: list[Any] = [_rows_by_group(L("title"), [L("term"), C("n"), "P50", "P95"], groups, figures, by, width, lang)]
    for g in groups:
        e = g["engine"]
        said = [engine_reading(g, lang)]
        c = e["cache"]
        if c["hits"]:
            said.append(L("cache", hits=f"{c['hits']:,}", n=f"{c['requests']:,}", cached=f"{c['cached_tokens']:,}",
                          prompt=f"{c['prompt_tokens']:,}"))
        said = [x for x in said if x]
        if said:
            head = printable(str(g["group"])) if g["group"] is not None else label(lang, "stats.none")
            engine = ", ".join(knobs.name(x) for x in e["engines"]) or L("unnamed")
            out.append(output.Wrapped(Text(L("group", group=head, engine=engine) + " ".join(said))))
    out.append(output.Wrapped(Text(L("note"), style="dim")))
    return out


def bar(parts: list[tuple], scale: float, width: int) -> Text:
    """Segments (value, style[, character]) end to end, ``scale`` cells per unit."""
    t = Text()
    for v, style, *char in parts:
        n = int(round(max(0.0, v) * scale))
        t.append((char[0] if char else "█") * n, style=style)
    return t


def plot(res: dict[str, Any], width: int = 48, columns: int | None = None, lang: str = "en") -> Group:
    """TTFB, gap and TTFT per group, each its own bar: P50 dark, up to P95 light (percentiles do
    not add up: P95 TTFT is not P95 TTFB + P95 gap, so no bar is a sum). Bars of up to ``width``
    cells, narrower when a ``columns``-wide terminal needs it. A long group name folds down its
    column; the bars and the numbers are never cut."""
    res = printable_data(res)
    by = res["by"]
    groups = [g for g in res["groups"] if g["ttft_ms"]["n"]]
    parts = (("TTFB", "ttfb_ms", "blue"), ("gap", "gap_ms", "magenta"), ("TTFT", "ttft_ms", "green"))
    figures = [[(name, g[key].get("p50"), g[key].get("p95"), style) for name, key, style in parts] for g in groups]
    texts = [f"{output.ms(p50)} · {output.ms(p95)}" for rs in figures for _, p50, p95, _ in rs]
    ms_w = _widest("P50 · P95", texts)
    chrome = 10  # box=None: one cell of padding either side of each of the 5 columns
    if columns is not None:
        width = max(8, min(width, columns - chrome - MIN_FOLD - 4 - ms_w))
    by_head = label(lang, f"col.by.{by}")
    name_w, names = _name_lines([_group_name(g["group"], by, lang) for g in groups], by_head,
                                None if columns is None else columns - chrome - 4 - width - ms_w)
    top = max([p95 or 0 for rs in figures for _, _, p95, _ in rs] + [1.0])
    scale = width / top
    t = Table(title=label(lang, "stats.plot_apart"),
              header_style="bold", title_justify="left", show_edge=False, box=None)
    t.add_column(by_head, width=name_w, no_wrap=True)
    t.add_column("", no_wrap=True)
    t.add_column("", no_wrap=True)
    t.add_column("P50 · P95", justify="right", no_wrap=True)
    for lines, rs in zip(names, figures):
        bars = [[name, bar([(p50 or 0, style), (max(0.0, (p95 or 0) - (p50 or 0)), style, "░")], scale, width),
                 f"{output.ms(p50)} · {output.ms(p95)}"] for name, p50, p95, style in rs]
        for row in _beside(lines, bars):
            t.add_row(*row)
    return Group(t)


@click.command("stats")
@db_option
@filter_options
@click.option("--by", type=click.Choice(list(sq.GROUPS)), default="model", show_default=True,
              help="Group by model, route, API, prompt-size bucket (prompt tokens), UTC hour or experiment.")
@cold_option
@json_option("summary")
@click.option("--plot", "plot_", is_flag=True, help="Also draw TTFB, gap and TTFT bars (P50, P95) per group.")
@lang_option
def stats(db_path, by, include_cold, as_json, plot_, lang, **kw):
    """Percentiles (P50/P90/P95/P99) of TTFB, TTFT, gap, TPOT, ITL and total; error rates; TTFT vs prompt size."""
    from firsttoken.cli.options import console, fail, filter_flags, reader, resolve_lang

    filters = make_filters(kw)
    db = reader(db_path)
    try:
        res = sq.compute(db, filters, by=by, include_cold=include_cold is not False, engine=True)
    except ValueError as e:
        fail(str(e))
    if as_json:
        click.echo(printable_json(res, default=str, indent=2))  # exact values; no raw control character
        return
    con = console()
    code = resolve_lang(lang)
    if not res["groups"]:
        output.say(con, output.no_rows(db, filter_flags(filters), code))
        return
    con.print(render(res, width=con.width, lang=code))
    if plot_:
        con.print(plot(res, columns=con.width, lang=code))
