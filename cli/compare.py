"""`firsttoken compare --route a --route b`: how much does one route (a gateway) add over another?

Both routes of one running proxy get `sweep`'s requests, interleaved; the verdict is the median of
the paired TTFT differences, then where it went (TTFB, or the prefill slope; behind a hop that
holds its headers, only the fits). See docs/stats.md ("firsttoken compare").
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import os
import secrets
import sys
from collections.abc import Callable
from typing import Any

import click
from rich.markup import escape as esc

from firsttoken.addon import routing
from firsttoken.addon.hops import route_holds
from firsttoken.addon.record import percentile
from firsttoken.addon.safe_text import clause, printable
from firsttoken.addon.store import queries
from firsttoken.addon.store import stats_queries as sq
from firsttoken.cli import output
from firsttoken.cli.labels import label
from firsttoken.cli.options import PORT, db_option, lang_option
from firsttoken.cli.stats import fit_left_out, fit_warning
from firsttoken.cli.sweep import APIS, Client, SweepError, build_prompt, error_text, guess_api, parse_ints, wait_for_rows

#: TTFB medians closer than this (ms), or than TTFB_REL of the smaller one, count as the same
TTFB_ABS_MS = 5.0
TTFB_REL = 0.10
#: prefill slopes closer than SLOPE_REL of their mean (or SLOPE_ABS ms per 1k tokens) are the same
SLOPE_REL = 0.15
SLOPE_ABS = 2.0


class CompareError(RuntimeError):
    pass


# -- sending ---------------------------------------------------------------------------------

def plan(points: list[tuple[int, int]], routes: list[str], runs: int, warmup: int) -> list[tuple[str, tuple[int, int], bool]]:
    """(route, point, is_warmup) in sending order: warm-up rounds first, then measured rounds;
    within a round every point goes to every route back to back, the route order alternating."""
    out = []
    for rnd in range(warmup + runs):
        for i, p in enumerate(points):
            order = routes if (rnd + i) % 2 == 0 else routes[::-1]
            out += [(r, p, rnd < warmup) for r in order]
    return out


def send_all(clients: dict[str, Client], models: dict[str, str], api: str, points: list[tuple[int, int]], runs: int,
             warmup: int, experiment: str, db_path: str, wait: float, progress=None) -> dict[str, Any]:
    """Send the interleaved plan through each route's client; returns counts (per route, too)."""
    sent = {r: 0 for r in clients}
    tried = {r: 0 for r in clients}
    errors = {r: 0 for r in clients}
    first_error: dict[str, str] = {}
    checked = False
    for i, (route, (n_in, n_out), is_warmup) in enumerate(plan(points, list(clients), runs, warmup)):
        client = clients[route]
        body = build_prompt(api, models[route], n_in, n_out, tag=f"{experiment} #{i} {secrets.token_hex(4)}")
        status, head = client.send(body, f"{experiment}/warmup" if is_warmup else experiment)
        tried[route] += 1
        if status >= 400:
            errors[route] += 1
            first_error.setdefault(route, error_text(status, head, client.key))
            if tried[route] == 1:  # a route that fails at once (wrong key, model, upstream) would fail throughout
                raise CompareError(f"route {route!r}: the first request failed with {first_error[route]}")
        if not is_warmup:
            sent[route] += 1
        if not checked:  # the proxy must be recording, or nothing will come back
            checked = True
            if wait_for_rows(db_path, experiment, 1, wait, prefix=True) == 0:
                raise CompareError(
                    f"nothing was recorded in {db_path} for experiment {experiment!r}: is the proxy at "
                    f"{client.host}:{client.port} a `firsttoken proxy` writing that database? Pass its --port, "
                    "and --db when it writes another database")
        if progress:
            progress()
    total = sum(sent.values())
    got = wait_for_rows(db_path, experiment, total, wait)
    return {"sent": total, "recorded": got, "errors": sum(errors.values()), "sent_per_route": sent,
            "errors_per_route": errors, "first_error": first_error}


# -- reading the two routes ------------------------------------------------------------------

def _p(g: dict[str, Any], metric: str, q: str = "p50") -> float | None:
    return (g.get(f"{metric}_ms") or {}).get(q)


def _delta(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else round(b - a, 3)


def paired_deltas(ra: list[dict[str, Any]], rb: list[dict[str, Any]]) -> list[float]:
    """TTFT(b) - TTFT(a) of each request and its twin: the same prompt size, the same occurrence
    of it (the plan sends every point through both routes back to back, round after round)."""
    def by_size(rows):
        out: dict[int, list[float]] = {}
        for r in rows:
            out.setdefault(r.get("prompt_tokens") or 0, []).append(r["ttft_ms"])
        return out
    sa, sb = by_size(ra), by_size(rb)
    if len(sa) == len(sb) and set(sa) != set(sb):  # the routes name the model differently: pair the sizes by rank
        sb = dict(zip(sorted(sa), (sb[k] for k in sorted(sb))))
    return [round(y - x, 3) for k, xs in sa.items() for x, y in zip(xs, sb.get(k, ()))]


def added_ttft(deltas: list[float]) -> dict[str, Any] | None:
    """What route b adds to TTFT: the median paired difference and the middle half of them."""
    if not deltas:
        return None
    s = sorted(deltas)
    return {"added_ms": round(percentile(s, 50), 1), "p25_ms": round(percentile(s, 25), 1),
            "p75_ms": round(percentile(s, 75), 1), "pairs": len(s)}


def holds_headers(rows: list[dict[str, Any]]) -> bool | None:
    """Whether a route's hop holds its headers until the first token, from its rows (the one rule: hops.route_holds)."""
    return route_holds((r.get("prompt_tokens"), r["ttfb_ms"], r["ttft_ms"]) for r in rows)


def same_or_adds(d: float, tol: float, a: str, b: str, same: str,
                 adds: Callable[[str, str], str]) -> tuple[str, str]:
    """The verdict on what route b adds (d ms, b minus a): "same" within tol ms, else "adds" or "saves"
    (from b's side), with its text: `same`, or ``adds(slow, fast)`` said from the slower route's side (pure)."""
    if abs(d) <= tol:
        return "same", same
    slow, fast = (b, a) if d > 0 else (a, b)
    return ("adds" if d > 0 else "saves"), adds(slow, fast)


def verdict(a: str, b: str, ga: dict[str, Any], gb: dict[str, Any], added: dict[str, Any] | None = None,
            held: dict[str, bool | None] | None = None, lang: str = "en") -> dict[str, Any]:
    """The bisection on two routes' figures: what route b adds to TTFT, and where it went, from
    evidence that holds on both routes, worded in ``lang`` (pure)."""
    L = lambda key, **kw: label(lang, f"cmp.{key}", **kw)  # noqa: E731
    out: dict[str, Any] = {}
    held = held or {}
    holding = [r for r in (a, b) if held.get(r)]
    out["headers_held"] = holding
    head = ""
    if added is not None:
        out.update(ttft_added_ms=added["added_ms"], ttft_added_p25_ms=added["p25_ms"],
                   ttft_added_p75_ms=added["p75_ms"], pairs=added["pairs"])
        d, lo, hi = added["added_ms"], added["p25_ms"], added["p75_ms"]
        if d < 0:  # said from the slower route's side: what it adds
            lo, hi = -hi, -lo
        spread = L("spread", n=added["pairs"], lo=f"{lo:+.0f}", hi=f"{hi:+.0f}")
        base = min(v for v in (_p(ga, "ttft"), _p(gb, "ttft"), math.inf) if v is not None)
        tol = max(TTFB_ABS_MS, TTFB_REL * base) if math.isfinite(base) else TTFB_ABS_MS
        if lo > 0 or hi < 0:  # the middle half of the pairs lies on one side of 0: a steady difference, not noise
            tol = TTFB_ABS_MS
        out["ttft"], head = same_or_adds(
            d, tol, a, b, L("ttft_same", d=f"{d:+.0f}", b=b, tol=f"{tol:.0f}", spread=spread),
            lambda slow, fast: L("ttft_adds", d=f"{abs(d):.0f}", spread=spread, slow=slow, fast=fast))
    if holding:
        held_text = L("held_one" if len(holding) == 1 else "held_many", names=L("and").join(holding))
        head = f"{head}{L('sep')}{held_text}" if head else held_text
    ta, tb = _p(ga, "ttfb"), _p(gb, "ttfb")
    ia, ib = ga.get("ttft_intercept_ms"), gb.get("ttft_intercept_ms")
    if holding:
        if ia is None or ib is None or ga.get("ttft_slope_ms_per_1k") is None or gb.get("ttft_slope_ms_per_1k") is None:
            out["ttfb"] = "unknown"
            ttfb_text = L("where_unknown")
        else:
            d = ib - ia
            out["intercept_delta_ms"] = round(d, 1)
            out["ttfb"] = "before_model"
            ttfb_text = L("before_model", d=f"{d:+.0f}", b=b)
    elif ta is None or tb is None:
        out["ttfb"] = "unknown"
        ttfb_text = L("ttfb_unknown", r=a if ta is None else b)
    else:
        d = tb - ta
        tol = max(TTFB_ABS_MS, TTFB_REL * min(ta, tb))
        out["ttfb_delta_ms"], out["ttfb_tolerance_ms"] = round(d, 1), round(tol, 1)
        out["ttfb"], ttfb_text = same_or_adds(
            d, tol, a, b, L("ttfb_same", ta=f"{ta:.0f}", tb=f"{tb:.0f}", tol=f"{tol:.0f}"),
            lambda slow, fast: L("ttfb_adds", d=f"{abs(d):.0f}", slow=slow, fast=fast))

    sa, sb = ga.get("ttft_slope_ms_per_1k"), gb.get("ttft_slope_ms_per_1k")
    if sa is None or sb is None:
        # no slope (one input size): the gap's medians are what is left of prefill
        xa, xb = _p(ga, "gap"), _p(gb, "gap")
        if holding:  # the gap is ~0 behind a hop that holds the headers: it says nothing of prefill
            out["prefill"] = "unknown"
            prefill_text = L("prefill_unknown_held")
        elif xa is None or xb is None:
            out["prefill"] = "unknown"
            prefill_text = L("prefill_unknown")
        else:
            d = xb - xa
            tol = max(TTFB_ABS_MS, SLOPE_REL * min(xa, xb))
            out["gap_delta_ms"] = round(d, 1)
            out["prefill"] = "same" if abs(d) <= tol else "differs"
            prefill_text = L("gap_same" if out["prefill"] == "same" else "gap_differs", xa=f"{xa:.0f}",
                             xb=f"{xb:.0f}", a=a, b=b)
    else:
        d = sb - sa
        mean = (abs(sa) + abs(sb)) / 2
        tol = max(SLOPE_REL * mean, SLOPE_ABS)
        se_a, se_b = ga.get("ttft_slope_se_ms_per_1k"), gb.get("ttft_slope_se_ms_per_1k")
        noise = 2 * math.hypot(se_a, se_b) if se_a is not None and se_b is not None else math.inf
        out["slope_delta_ms_per_1k"], out["slope_tolerance_ms_per_1k"] = round(d, 2), round(tol, 2)
        out["slope_noise_ms_per_1k"] = None if math.isinf(noise) else round(noise, 2)
        if abs(d) <= tol:
            out["prefill"] = "same"
            within = L("within_pct", v=f"{abs(d) / mean * 100:.0f}") if mean else L("within_ms", v=f"{abs(d):.1f}")
            prefill_text = L("prefill_same", sa=f"{sa:.0f}", sb=f"{sb:.0f}", within=within)
        elif abs(d) <= noise:
            out["prefill"] = "inconclusive"
            prefill_text = L("prefill_noisy", sa=f"{sa:.0f}", sb=f"{sb:.0f}", noise=f"{noise:.0f}")
        else:
            out["prefill"] = "differs"
            slow, fast = (b, a) if d > 0 else (a, b)
            lo = min(abs(sa), abs(sb))
            ratio = L("ratio", r=f"{max(abs(sa), abs(sb)) / lo:.1f}", slow=slow) if lo >= SLOPE_ABS else ""
            prefill_text = L("prefill_differs", sa=f"{sa:.0f}", sb=f"{sb:.0f}", a=a, b=b, d=f"{abs(d):.0f}", slow=slow,
                             ratio=ratio, fast=fast)
    out["text"] = L("sep").join(t for t in (head, ttfb_text, prefill_text) if t) + L("end")
    return out


def summarize(db, experiment: str, routes: list[str], lang: str = "en") -> dict[str, Any]:
    """The side-by-side figures of both routes and the verdict (the document `--json` prints)."""
    per = sq.compare_routes(db, experiment, routes)
    a, b = routes
    ga, gb = per[a], per[b]
    timings = sq.compare_timings(db, experiment, routes)
    held = {r: holds_headers(timings[r]) for r in routes}
    added = added_ttft(paired_deltas(timings[a], timings[b]))
    side = {}
    for name, g in per.items():
        side[name] = {
            "n": g["count"], "errors": g["errors"],
            **{f"{m}_{q}": _p(g, m, q) for m in ("ttfb", "gap", "ttft", "tpot") for q in ("p50", "p95")},
            "slope_ms_per_1k": g["ttft_slope_ms_per_1k"], "slope_se_ms_per_1k": g["ttft_slope_se_ms_per_1k"],
            "intercept_ms": g["ttft_intercept_ms"], "r2": g["ttft_fit_r2"], "fit_n": g["ttft_fit_n"],
            "fit_warning": fit_warning(g, lang), "headers_held": held[name],
            "fit_excluded": g.get("ttft_fit_excluded") or [], "fit_left_out": fit_left_out(g, lang),
        }
    delta = {k: _delta(side[a][k], side[b][k]) for k in side[a]
             if k not in ("n", "errors", "fit_n", "fit_warning", "r2", "headers_held", "fit_excluded", "fit_left_out")
             and not k.startswith("slope_se")}
    return {"experiment": experiment, "routes": routes, "per_route": side, "delta": delta,
            "verdict": verdict(a, b, ga, gb, added, held, lang)}


#: the table's rows: (the metric's name, or "cmp.row.*" label, the key, its kind)
ROWS = (("TTFB P50", "ttfb_p50", "ms"), ("TTFB P95", "ttfb_p95", "ms"), ("gap P50", "gap_p50", "ms"),
        ("gap P95", "gap_p95", "ms"), ("TTFT P50", "ttft_p50", "ms"), ("TTFT P95", "ttft_p95", "ms"),
        ("TPOT P50", "tpot_p50", "ms"), ("TPOT P95", "tpot_p95", "ms"),
        ("cmp.row.slope", "slope_ms_per_1k", "slope"), ("cmp.row.intercept", "intercept_ms", "ms"),
        ("cmp.row.r2", "r2", "r2"), ("cmp.row.held", "headers_held", "held"), ("cmp.row.requests", "n", "int"),
        ("cmp.row.errors", "errors", "int"))


def _cell(v, kind: str, signed: bool = False, lang: str = "en") -> str:
    if v is None:
        return "—"
    if kind == "held":  # whether the route's hop held its headers until the first token
        return label(lang, "cmp.yes" if v else "cmp.no")
    if kind == "slope":
        return f"{round(v, 1) + 0.0:+.1f}" if signed else f"{v:.1f}"
    if kind == "r2":
        return f"{v:.3f}"
    if kind == "int":
        return str(v)
    if signed:  # output.ms's precision, with a sign (never "-0")
        r = round(v, 1) if abs(v) < 10 else round(v)
        return f"{r + 0:+,}ms" if r else "±0ms"
    return output.ms(v)


def render(con, s: dict[str, Any], lang: str = "en") -> None:
    from rich.table import Table
    from rich.text import Text

    a, b = s["routes"]
    t = Table(title=Text(label(lang, "cmp.title", experiment=printable(s["experiment"]),
                               population=queries.STREAMED_LABEL)), header_style="bold", title_justify="left")
    t.add_column("")
    for c in (a, b, f"{b} − {a}"):
        t.add_column(Text(printable(c)), justify="right")
    for name, key, kind in ROWS:
        pa, pb = s["per_route"][a].get(key), s["per_route"][b].get(key)
        d = s["delta"].get(key) if kind not in ("int", "held") else None
        t.add_row(label(lang, name) if name.startswith("cmp.") else name, _cell(pa, kind, lang=lang),
                  _cell(pb, kind, lang=lang), _cell(d, kind, signed=True) if d is not None else "")
    con.print(t)
    for name in (a, b):
        w = s["per_route"][name]["fit_warning"]
        if w:
            con.print(output.Wrapped(Text.assemble((f"⚠ {printable(name)}: ", "yellow"), printable(w))))
        out = s["per_route"][name].get("fit_left_out")
        if out:
            con.print(output.Wrapped(Text.assemble((f"{printable(name)}: ", "dim"), (printable(out), "dim"))))
    v = s["verdict"]
    style = "green" if v.get("prefill") == "same" else "yellow"
    con.print(output.Wrapped(Text.assemble(("→ ", f"bold {style}"), printable(v["text"]))))


# -- the command ---------------------------------------------------------------------------

def _per_route(values: tuple[str, ...], routes: list[str], what: str) -> list[str | None]:
    if not values:
        return [None, None]
    if len(values) == 1:
        return [values[0], values[0]]
    if len(values) == 2:
        return list(values)
    raise click.UsageError(f"give {what} once (both routes) or twice (one per --route, in order)")


@click.command("compare")
@click.option("--route", "routes", multiple=True, required=True, metavar="NAME",
              help="A route of the running proxy (its --upstream NAME=URL; 'default' for the unnamed one). Give two.")
@click.option("--model", "models", multiple=True, required=True,
              help="Model name; give it twice when the routes name the model differently (in --route order).")
@click.option("--api", type=click.Choice(APIS), default=None, help="Request shape (default: from the model name).")
@click.option("--key-env", "key_envs", multiple=True,
              help="Env var with the API key (default OPENAI_API_KEY / ANTHROPIC_API_KEY); twice for one per route.")
@click.option("--inputs", default="200,1000,2000,4000", show_default=True,
              help="Input sizes in tokens: the TTFT-vs-input slope per route needs several.")
@click.option("--max-tokens", type=int, default=20, show_default=True, help="Output cap of every request.")
@click.option("--runs", type=int, default=5, show_default=True, help="Measured rounds (each point through each route).")
@click.option("--warmup", type=int, default=1, show_default=True, help="Rounds sent first and dropped.")
@click.option("--experiment", help="Tag for the rows (default: compare-A-B-YYYYmmdd-HHMMSS).")
@click.option("--port", type=PORT, default=None, help="Port of the running proxy (default: the one its state file names, else 8787).")
@click.option("--host", default=None, help="Address of the proxy (default 127.0.0.1).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@click.option("--timeout", type=float, default=300.0, show_default=True, help="Seconds per request.")
@click.option("--wait", type=float, default=15.0, show_default=True, help="Seconds to wait for the proxy to record rows.")
@db_option
@lang_option
def compare(routes, models, api, key_envs, inputs, max_tokens, runs, warmup, experiment, port, host, as_json, timeout,
            wait, db_path, lang):
    """Send the same requests through two routes of a running proxy, interleaved, and show what one adds."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from firsttoken.addon.store.db import open_db
    from firsttoken.cli.env.target import resolve_target
    from firsttoken.cli.options import console, fail, resolve_db, resolve_lang

    lang = resolve_lang(lang)
    if len(routes) != 2 or routes[0] == routes[1]:
        raise click.UsageError("give two different routes: --route A --route B (the proxy's --upstream names)")
    routes = list(routes)
    if runs < 1 or warmup < 0:
        raise click.UsageError("--runs must be at least 1 and --warmup at least 0")
    points = [(n, max_tokens) for n in parse_ints(inputs, "--inputs")]
    model_of = dict(zip(routes, _per_route(models, routes, "--model")))
    api = api or guess_api("", model_of[routes[0]])
    family = routing.family_of_api(api)
    default_env = "ANTHROPIC_API_KEY" if api == "anthropic.messages" else "OPENAI_API_KEY"
    env_of = {r: e or default_env for r, e in zip(routes, _per_route(key_envs, routes, "--key-env"))}
    err = console(stderr=True)
    for var in dict.fromkeys(env_of.values()):
        if not os.environ.get(var):
            through = " and ".join(r for r in routes if env_of[r] == var)
            err.print(label(lang, "cmp.no_key", var=var, through=esc(printable(through))))

    path = resolve_db(db_path)
    target = resolve_target(port=port, host=host, db_path=db_path)
    if target.forward:
        fail(f"the proxy at {target.url} runs in forward mode, which has no routes: start one with "
             "`firsttoken proxy --upstream A=URL --upstream B=URL`")
    clients: dict[str, Client] = {}
    try:
        for r in routes:
            route = routing.pick_route(target.routes, family, r)
            base = routing.client_base_url(target.url, route, family)
            clients[r] = Client(base, api, os.environ.get(env_of[r]) or None, timeout)
    except routing.RouteError as e:
        fail(f"{clause(e)}. Start the proxy with one --upstream NAME=URL per route, e.g. "
             "`firsttoken proxy --upstream direct=https://api.openai.com/v1 --upstream gateway=https://gw.example/v1`")
    except SweepError as e:
        fail(str(e))
    experiment = experiment or f"compare-{routes[0]}-{routes[1]}-{_dt.datetime.now().strftime('%Y%m%d-%H%M%S')}"
    try:
        for r in routes:
            for n, m in points[:1] + points[-1:]:
                build_prompt(api, model_of[r], n, m)  # fail on an impossible size before sending anything
    except SweepError as e:
        fail(str(e))
    try:
        total = len(points) * len(routes) * (runs + warmup)
        with Progress(TextColumn(f"[bold]{experiment}[/]"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      console=err, transient=True) as bar:
            task = bar.add_task("requests", total=total)
            info = send_all(clients, model_of, api, points, runs, warmup, experiment, path, wait,
                            lambda: bar.advance(task))
    except CompareError as e:
        fail(str(e))
    except SweepError as e:  # the proxy is not there, or hung up
        fail(f"{clause(e)}. The proxy was looked for at {target.url} ({target.source}): start it with "
             "`firsttoken proxy --upstream A=URL --upstream B=URL`, or pass its --port")
    finally:
        for c in clients.values():
            c.close()
    if info["recorded"] < info["sent"]:
        err.print(label(lang, "cmp.unrecorded", rec=info["recorded"], sent=info["sent"], wait=f"{wait:.0f}"))
    for r, text in info["first_error"].items():
        err.print(label(lang, "cmp.failed", n=info["errors_per_route"][r], r=esc(printable(r)), text=esc(printable(text))))
    summary = summarize(open_db(path, write=False), experiment, routes, lang)
    summary.update(models=model_of, api=api, inputs=[n for n, _ in points], max_tokens=max_tokens, runs=runs,
                   warmup=warmup, proxy=target.url, **{k: info[k] for k in ("sent", "recorded", "errors")})
    if as_json:
        click.echo(json.dumps(summary, indent=2, default=str))
    else:
        from rich.text import Text

        render(console(), summary, lang)
        console().print(Text(label(lang, "cmp.rows_tagged", e=printable(experiment)), style="dim"))
    sys.stdout.flush()
