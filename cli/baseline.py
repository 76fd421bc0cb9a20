"""`firsttoken baseline save|check|list|delete`: freeze P50/P95 of TTFB, TTFT and gap per model, then
compare recent traffic (or a fresh probe) with it, alerting on TTFB and gap separately.

TTFB drift points at the network / gateway / provider queue (headers came late); gap drift at
the model side (prefill: longer prompts, a slower or overloaded model). Exit codes of `check`:
0 within tolerance, 1 regression, 2 not enough data to tell.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
from typing import Any

import click

from firsttoken.addon.safe_text import printable
from firsttoken.addon.store import baselines as store
from firsttoken.addon.store import queries
from firsttoken.addon.store import stats_queries as sq
from firsttoken.addon.store.queries import Filters
from firsttoken.cli import output
from firsttoken.cli.labels import label
from firsttoken.cli.options import cold_option, db_option, filter_options, json_option, lang_option, make_filters

BASE_METRICS = (("ttfb", "ttfb_ms"), ("ttft", "ttft_ms"), ("gap", "gap_ms"), ("prompt", sq.PROMPT), ("max_tokens", "max_tokens"))
COMPARED = ("ttfb", "gap", "ttft")
EXIT_OK, EXIT_REGRESSION, EXIT_NO_DATA = 0, 1, 2


def measure(db, filters: Filters, include_cold: bool = True) -> dict[str, dict[str, Any]]:
    """{model: {n, ttfb_p50, ..., gap_p95, prompt_tokens_p50, max_tokens_p50}} over the filtered rows."""
    res = sq.compute(db, filters, by="model", include_cold=include_cold, qs=(50, 95), metrics=BASE_METRICS, fit=False)
    out = {}
    for g in res["groups"]:
        if g["group"] is None:
            continue
        row: dict[str, Any] = {"n": g["ttft_ms"]["n"]}
        for name in ("ttfb", "ttft", "gap"):
            row[f"{name}_p50"], row[f"{name}_p95"] = g[f"{name}_ms"]["p50"], g[f"{name}_ms"]["p95"]
        row["prompt_tokens_p50"] = g["prompt"]["p50"]
        row["max_tokens_p50"] = g["max_tokens"]["p50"]
        out[g["group"]] = row
    return out


def parse_tolerance(text: str) -> float:
    t = str(text).strip()
    try:
        v = float(t[:-1]) / 100 if t.endswith("%") else float(t)
    except ValueError:
        raise click.BadParameter(f"{text!r}: use e.g. 20% or 0.2", param_hint="--tolerance") from None
    if v > 1 and not t.endswith("%"):
        v /= 100  # "20" means 20 %
    if v < 0:
        raise click.BadParameter("must not be negative", param_hint="--tolerance")
    return v


def compare(base: dict[str, Any], cur: dict[str, Any], tol: float, min_delta: float) -> list[dict[str, Any]]:
    """One entry per metric and percentile: baseline, current, change, judged?, regressed?

    A P95 is judged only when both sides hold enough requests (``sq.tail_is_judged``): over five
    requests it is mostly the slowest one, and one hiccup would fail the check."""
    out = []
    tail = sq.tail_is_judged(base.get("n")) and sq.tail_is_judged(cur.get("n"))
    for name in COMPARED:
        for q in ("p50", "p95"):
            b, c = base.get(f"{name}_{q}"), cur.get(f"{name}_{q}")
            if b is None or c is None:
                continue
            delta = c - b
            judged = q == "p50" or tail
            out.append({"metric": name, "q": q, "baseline": b, "current": c, "delta_ms": round(delta, 3),
                        "change": round(delta / b, 4) if b else None, "judged": judged,
                        "regressed": bool(judged and c > b * (1 + tol) and delta > min_delta)})
    return out


def explain(model: str, items: list[dict[str, Any]], base: dict[str, Any], cur: dict[str, Any],
            lang: str = "en") -> list[str]:
    """Sentences, in ``lang``, saying which metric drifted and what that points to."""
    bad = {(i["metric"], i["q"]): i for i in items if i["regressed"]}
    lines = []
    for name in ("ttfb", "gap"):
        hits = [bad[(name, q)] for q in ("p50", "p95") if (name, q) in bad]
        if not hits:
            continue
        parts = ", ".join(f"{h['q'].upper()} {output.ms(h['baseline'])} → {output.ms(h['current'])}" for h in hits)
        lines.append(label(lang, "bl.drift", model=model, metric=name.upper() if name == "ttfb" else "gap",
                           parts=parts, meaning=label(lang, f"bl.meaning.{name}")))
        if name == "gap":
            bp, cp = base.get("prompt_tokens_p50"), cur.get("prompt_tokens_p50")
            if bp and cp:
                key = "bl.prompt_grew" if abs(cp - bp) / bp > 0.2 else "bl.prompt_same"
                lines.append(label(lang, key, a=f"{bp:,.0f}", b=f"{cp:,.0f}"))
    ttft = [bad[("ttft", q)] for q in ("p50", "p95") if ("ttft", q) in bad]
    if ttft and not lines:
        parts = ", ".join(f"{h['q'].upper()} {output.ms(h['baseline'])} → {output.ms(h['current'])}" for h in ttft)
        lines.append(label(lang, "bl.ttft_drift", model=model, parts=parts))
    return lines


@click.group("baseline")
def baseline() -> None:
    """Save latency baselines (P50/P95 of TTFB, TTFT, gap per model) and check traffic against them."""


@baseline.command("save")
@click.argument("name")
@db_option
@filter_options
@cold_option
@click.option("--min-n", type=int, default=5, show_default=True, help="Fewest requests with a TTFT per model.")
@lang_option
def save(name, db_path, include_cold, min_n, lang, **kw):
    """Store the current P50/P95 of TTFB, TTFT and gap per model as NAME (replacing an older NAME)."""
    from rich.markup import escape

    from firsttoken.addon.store.db import open_db
    from firsttoken.cli.options import console, fail, reader, reading_db, resolve_lang

    lang = resolve_lang(lang)
    filters = make_filters(kw)
    include_cold = include_cold is not False
    db = reader(db_path)
    try:
        found = measure(db, filters, include_cold)
    except ValueError as e:
        fail(str(e))
    keep = {m: r for m, r in found.items() if r["n"] >= min_n}
    for m in sorted(set(found) - set(keep)):
        console(stderr=True).print(f"[yellow]skipped {m}:[/] only {output.plural(found[m]['n'], 'request')} with a TTFT (< {min_n})")
    if not keep:
        most = max(found.values(), key=lambda r: r["n"])["n"] if found else 0
        fail(f"not enough data for a baseline: no model has {min_n} requests with a TTFT under these filters "
             f"(the most any has is {most}"
             + ("; --exclude-cold left out those that opened a new connection" if not include_cold else "")
             + "); send more traffic through the proxy, lower --min-n, or run `firsttoken sweep ... --experiment NAME` "
             "first", code=EXIT_NO_DATA)
    source = filters.active() | {"include_cold": include_cold}
    now = _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")
    db.conn.close()
    wdb = open_db(reading_db(db_path))  # saving is a write: into the file the reader above checked is firsttoken's
    try:
        store.save(wdb, name, keep, source, now)
    finally:
        wdb.conn.close()
    con = console()
    con.print(label(lang, "bl.saved", name=escape(printable(name)), n=len(keep)))
    con.print(_table({m: {"name": name, "model": m, "created_at": now, **r} for m, r in keep.items()}.values(), lang))


def _table(rows, lang: str = "en"):
    from rich import box
    from rich.table import Table

    # no borders, P50 over P95, the date over the time: a model name and a date stay whole at 80 columns
    t = Table(header_style="bold", title=label(lang, "bl.table", population=queries.STREAMED_LABEL), title_justify="left",
              box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    for c in ("name", "model", "created", "n", "TTFB\nP50/P95", "TTFT\nP50/P95", "gap\nP50/P95", "prompt"):
        head = label(lang, f"bl.col.{c}") if c in ("name", "model", "created", "prompt") else c
        t.add_column(head, justify="right" if c not in ("name", "model", "created") else "left",
                     no_wrap=c in ("model", "created"), overflow="fold")
    for r in rows:
        t.add_row(printable(r["name"]), printable(r["model"]),
                  r["created_at"][:10] + "\n" + output.local_time(r["created_at"]), f"{r['n']:,}",
                  *[f"{output.ms(r[f'{m}_p50'])}\n{output.ms(r[f'{m}_p95'])}" for m in ("ttfb", "ttft", "gap")],
                  output.num(None if r.get("prompt_tokens_p50") is None else int(r["prompt_tokens_p50"])))
    return t


@baseline.command("list")
@db_option
@json_option("summary")
@lang_option
def list_(db_path, as_json, lang):
    """The saved baselines."""
    from firsttoken.cli.options import console, reader, resolve_lang

    lang = resolve_lang(lang)
    db = reader(db_path)
    rows = store.all_rows(db)
    if as_json:
        click.echo(json.dumps(rows, indent=2))
    elif not rows:
        console().print(label(lang, "bl.none"))
    else:
        console().print(_table(rows, lang))


@baseline.command("delete")
@click.argument("name")
@db_option
def delete(name, db_path):
    """Forget baseline NAME."""
    from firsttoken.addon.store.db import open_db
    from firsttoken.cli.options import console, fail, reader, reading_db

    reader(db_path).conn.close()  # a firsttoken database, or a clear error
    db = open_db(reading_db(db_path))
    n = store.delete(db, name)
    if not n:
        fail(f"no baseline named {name!r} (see `firsttoken baseline list`)", code=EXIT_NO_DATA)
    console().print(f"deleted baseline {name} ({n} model(s))")


@baseline.command("check")
@click.argument("name")
@db_option
@click.option("--tolerance", default="20%", show_default=True, help="Allowed rise over the baseline, e.g. 20% or 0.2.")
@click.option("--min-delta-ms", type=float, default=10.0, show_default=True, help="Ignore rises smaller than this.")
@click.option("--since", default="1h", show_default=True, help="Recent traffic to compare (ignored with --sweep / --experiment).")
@click.option("--model", help="Only this model of the baseline.")
@click.option("--experiment", help="Compare the rows of this experiment (e.g. a sweep) instead of recent traffic.")
@click.option("--route")
@click.option("--min-n", type=int, default=5, show_default=True, help="Fewest requests per model to judge.")
@cold_option
@click.option("--sweep", "sweep_url", metavar="BASE_URL",
              help="Probe now: send --runs requests per model through the proxy at BASE_URL with the baseline's prompt size.")
@click.option("--runs", type=int, default=5, show_default=True, help="With --sweep: measured requests per model.")
@click.option("--api", type=click.Choice(["openai.chat", "anthropic.messages"]), help="With --sweep: request shape.")
@click.option("--key-env", help="With --sweep: env var holding the API key.")
@json_option("summary")
@lang_option
def check(name, db_path, tolerance, min_delta_ms, since, model, experiment, route, min_n, include_cold, sweep_url,
          runs, api, key_env, as_json, lang):
    """Compare recent traffic with baseline NAME: exit 0 within tolerance, 1 on regression, 2 without enough data.

    Recent traffic is measured the way the baseline was made (its filters, cold requests in or out)."""
    from firsttoken.cli.options import fail, reader, resolve_db, resolve_lang

    lang = resolve_lang(lang)
    tol = parse_tolerance(tolerance)
    db = reader(db_path)
    base_rows = store.rows_of(db, name, model)
    if not base_rows:
        fail(f"no baseline named {name!r}" + (f" for model {model}" if model else "")
             + ": save one with `firsttoken baseline save NAME` (see `firsttoken baseline list`)", code=EXIT_NO_DATA)
    if sweep_url:
        experiment = _probe(base_rows, name, sweep_url, runs, api, key_env, resolve_db(db_path))
    report: dict[str, Any] = {"baseline": name, "tolerance": tol, "min_delta_ms": min_delta_ms,
                              "compared": experiment and {"experiment": experiment} or {"since": since}, "models": []}
    regressed = judged = 0
    lines: list[str] = []
    made = store.how_made(base_rows[0]) if base_rows else {}
    cold = made["include_cold"] if include_cold is None else include_cold
    report["include_cold"] = cold
    report["baseline_filters"] = {k: v for k, v in made.items() if k in store.REUSED_FILTERS}
    for b in base_rows:
        same = {k: v for k, v in store.how_made(b).items() if k in store.REUSED_FILTERS}
        f = Filters(**(same | ({"route": route} if route else {})), model=b["model"], exact_model=True,
                    experiment=experiment, since=None if experiment else since)
        cur = measure(db, f, cold).get(b["model"], {"n": 0})
        entry: dict[str, Any] = {"model": b["model"], "n": cur["n"], "baseline_n": b["n"]}
        if cur["n"] < min_n:
            entry["status"] = "not_enough_data"
            where = label(lang, "bl.in_experiment", v=experiment) if experiment else label(lang, "bl.in_last", v=since)
            lines.append(label(lang, "bl.little_data", model=b["model"], n=cur["n"], where=where, min_n=min_n))
        else:
            judged += 1
            items = compare(b, cur, tol, min_delta_ms)
            why = explain(b["model"], items, b, cur, lang)
            entry.update(status="regressed" if any(i["regressed"] for i in items) else "ok", metrics=items,
                         current=cur, explanation=why)
            regressed += entry["status"] == "regressed"
            lines += why or [label(lang, "bl.within", model=b["model"], tol=f"{tol * 100:.0f}", n=cur["n"])]
            entry["p95_judged"] = all(i["judged"] for i in items)
            if not entry["p95_judged"]:
                lines.append(label(lang, "bl.p95_not_judged", b=b["n"], c=cur["n"], k=sq.TAIL_MIN_N))
        report["models"].append(entry)
    code = EXIT_REGRESSION if regressed else (EXIT_OK if judged else EXIT_NO_DATA)
    report["exit_code"] = code
    if as_json:
        click.echo(json.dumps(report, indent=2, default=str))
    else:
        _print_check(report, lines, lang)
    raise SystemExit(code)


def _print_check(report: dict[str, Any], lines: list[str], lang: str = "en") -> None:
    from rich.table import Table
    from rich.text import Text

    from firsttoken.cli.options import console

    con = console()
    what = ", ".join(label(lang, f"bl.{k}", v=v) for k, v in report["compared"].items())
    from rich import box

    # no borders, as the saved baselines' table: at 60 columns every figure and word stays whole (a long model
    # name folds down its column, nothing is cut)
    t = Table(title=label(lang, "bl.title", name=report["baseline"], what=what), header_style="bold", title_justify="left",
              box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, padding=(0, 1, 0, 0))
    widest = max([len(printable(m["model"] or "")) for m in report["models"]] + [5])
    for c in ("model", "metric", "baseline", "now", "change", ""):
        t.add_column(label(lang, f"bl.col.{c}") if c else "", justify="left" if c in ("model", "metric", "") else "right",
                     overflow="fold", no_wrap=c != "model", min_width=min(widest, 24) if c == "model" else None)
    for m in report["models"]:
        for i, it in enumerate(m.get("metrics", [])):
            ch = f"{it['change'] * 100:+.0f}%" if it["change"] is not None else "–"
            t.add_row(m["model"] if i == 0 else "", f"{it['metric'].upper() if it['metric'] != 'gap' else 'gap'} {it['q'].upper()}",
                      output.ms(it["baseline"]), output.ms(it["current"]), ch,
                      f"[bold red]{label(lang, 'bl.regressed')}[/]" if it["regressed"] else
                      f"[green]{label(lang, 'bl.ok')}[/]" if it["judged"] else f"[dim]{label(lang, 'bl.too_few')}[/]")
    if t.rows:
        con.print(t)
    style = {0: "green", 1: "bold red", 2: "yellow"}[report["exit_code"]]
    for line in lines:  # as plain text (a model name is no markup), wrapped by the one rule, under its own indent
        ind = len(line) - len(line.lstrip(" "))
        output.say(con, Text(printable(line.lstrip(" ")), style="" if ind else style), ind, ind + 2)


def _probe(base_rows, name, base_url, runs, api, key_env, db_path) -> str:
    """Send runs (+1 warm-up) requests per model with the baseline's prompt size; returns the experiment tag."""
    from firsttoken.cli.options import console, fail
    from firsttoken.cli.sweep import Client, SweepError, guess_api, run

    experiment = f"check-{name}-{_dt.datetime.now().strftime('%Y%m%d-%H%M%S')}"
    for b in base_rows:
        a = api or b.get("api")
        if a not in ("openai.chat", "anthropic.messages"):
            a = guess_api(base_url, b["model"])
        env = key_env or ("ANTHROPIC_API_KEY" if a == "anthropic.messages" else "OPENAI_API_KEY")
        size = int(round(b.get("prompt_tokens_p50") or 200))
        out = int(round(b.get("max_tokens_p50") or 50))
        client = Client(base_url, a, os.environ.get(env) or None)
        try:
            info = run(client, a, b["model"], [(max(size, 40), out)], runs, 1, experiment, db_path, 15.0)
        except SweepError as e:
            fail(f"probe of {b['model']} failed: {e}")
        finally:
            client.close()
        if info["errors"]:
            console(stderr=True).print(f"[yellow]{info['errors']} probe request(s) of {b['model']} failed:[/] {info['first_error']}")
    return experiment
