"""Aggregate queries for `stats`, `sweep`, `baseline` and `report`: percentiles computed in SQLite.

Percentile definition: linear interpolation between closest ranks (numpy's default, Excel's
PERCENTILE.INC, the same as ``record.percentile``). For n sorted values v[0..n-1] and q in
0..100: pos = (n-1)*q/100, lo = floor(pos), P = v[lo] + (v[lo+1] - v[lo]) * (pos - lo).
Only v[lo] and v[lo+1] ever leave SQLite.

Two ways to get them, same answers (tests compare them):

* indexed (``stats`` grouped by model, filtered by model at most): the counts come from
  ``stats_totals`` (running totals kept by triggers, migration ``m006_stats_totals``), and
  each latency column has an index ``(model, metric, conn_reused, connect_ms)``
  (``m004_stats_indexes``) where ``ORDER BY metric LIMIT 2 OFFSET lo`` walks from the nearer
  end. The fit's sums are in ``stats_totals`` too. Queries run on two connections at once.
* general (any grouping or filter): the filtered rows, narrowed to the needed columns, go
  into a TEMP table once; a TEMP index on (group, metric) per metric (one sort in SQLite)
  then serves the same counts and OFFSET walks.

Every request counts by default, cold ones included (``conn_reused = 0 AND connect_ms IS NOT
NULL``: a new TCP/TLS connection, which the openai SDK and curl open for most requests). What
they paid for it is its own metric, ``connect`` (``connect_ms``). ``include_cold=False`` leaves
them out of latency figures (they still count in ``count`` and the error rate).

Errors are counted by the store's one rule, ``queries.ERROR``.

One population (``queries.STREAMED``, migration m021): TTFB, TTFT, gap, TPOT, ITL, total and
the TTFT-vs-input fit are over streamed requests only (a non-streamed answer's headers come
after the whole answer); the non-streamed ones have their own metric, ``whole`` (their
``total_ms``: the time to the whole answer). ``population`` says which a metric is over.
"""

from __future__ import annotations

import math
import os
import sqlite3
import threading
import urllib.parse
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import fields
from typing import Any

import sqlite_utils

from firsttoken.addon.store.db import schema_current
from firsttoken.addon.store.queries import ERROR, NOT_STREAMED, STREAMED, Filters, decode_row, model_clause

#: (name in output, column)
METRICS: tuple[tuple[str, str], ...] = (
    ("connect", "connect_ms"), ("ttfb", "ttfb_ms"), ("ttft", "ttft_ms"), ("gap", "gap_ms"),
    ("tpot", "tpot_ms"), ("itl", "itl_p50_ms"), ("total", "total_ms"), ("whole", "total_ms"),
)
INDEXED = {"ttfb_ms", "ttft_ms", "gap_ms", "tpot_ms", "itl_p50_ms", "total_ms"}  # m004's indexes (m021: partial)
#: the columns whose figures describe streamed requests only (``population``)
STREAMED_COLS = INDEXED
#: the metric of the non-streamed requests: their total, the time to the whole answer
WHOLE = "whole"
PERCENTILES: tuple[int, ...] = (50, 90, 95, 99)
WARM = "(conn_reused IS NOT 0 OR connect_ms IS NULL)"
COLD = "(conn_reused = 0 AND connect_ms IS NOT NULL)"  # the negation of WARM, NULLs included
PROMPT = "coalesce(usage_prompt_tokens, prompt_tokens_est)"
IN_FLIGHT = "state = 'in_flight'"
BUCKETS: tuple[int, ...] = (200, 500, 1000, 2000, 4000, 8000, 16000, 32000, 64000, 128000)
MIN_FIT_N = 5
MIN_FIT_SD = 50  # prompt tokens: below this spread the slope is mostly noise
#: below this share of TTFT's spread explained by the prompt size, a fitted line says nothing
MIN_FIT_R2 = 0.1
SWEEP_HINT = "to measure the cost per input token: firsttoken sweep --inputs 1k,8k,32k"


def population(name: str, expr: str) -> str | None:
    """The SQL rule of the requests a metric is over: ``whole`` the non-streamed ones, the
    latency columns the streamed ones, anything else (connect, prompt sizes) every request."""
    if name == WHOLE:
        return NOT_STREAMED
    if expr in STREAMED_COLS:
        return STREAMED
    return None


def index_of(name: str, expr: str) -> tuple[str, str] | None:
    """(index, count column of stats_totals) that serve a metric on the indexed path, or None."""
    if name == WHOLE and expr == "total_ms":
        return "idx_requests_stats_whole", "n_whole"
    if expr in INDEXED:
        return f"idx_requests_stats_{expr}", f"n_{expr}"
    return None


def _bucket_sql() -> str:
    parts = [f"WHEN {PROMPT} IS NULL THEN 'unknown'", f"WHEN {PROMPT} < {BUCKETS[0]} THEN '0-{BUCKETS[0] - 1}'"]
    for lo, hi in zip(BUCKETS, BUCKETS[1:]):
        parts.append(f"WHEN {PROMPT} < {hi} THEN '{lo}-{hi - 1}'")
    parts.append(f"ELSE '{BUCKETS[-1]}+'")
    return "(CASE " + " ".join(parts) + " END)"


GROUPS: dict[str, str] = {
    "model": "model",
    "route": "route",
    "api": "api",
    "experiment": "experiment",
    "hour": "substr(started_at, 1, 13)",  # UTC hour, e.g. 2026-11-29T10
    "bucket": _bucket_sql(),
}


def bucket_key(label: str | None) -> float:
    """Sort key of a bucket label ('200-499' -> 200, 'unknown' last)."""
    if not label or label == "unknown":
        return math.inf
    return float(label.split("-")[0].rstrip("+"))


# ------------------------------------------------------------------ percentile arithmetic

def rank_pos(n: int, q: float) -> tuple[int, float]:
    """(lo, frac) of the q-th percentile of n sorted values (0-based lo)."""
    pos = ((n - 1) * q) / 100
    lo = int(pos)
    return lo, pos - lo


def percentile_sql(col: str, group: tuple[str, ...], qs: tuple[float, ...] = (50, 95), where: str = "") -> str:
    """One SELECT of ``group``'s columns, ``n`` and the ``p{q}`` percentiles of ``col`` per group, by
    this module's definition (``rank_pos`` + linear interpolation) in SQL window functions: for a
    query a person runs by hand (`firsttoken browse`'s canned query), where no index walk applies."""
    g = ", ".join(group)
    cond = f"{col} IS NOT NULL" + (f" AND ({where})" if where else "")
    outs = []
    for q in qs:
        pos = f"(((n - 1) * {q}) / 100.0)"
        lo = f"CAST({pos} AS INTEGER)"
        outs.append(f"round(total(CASE WHEN i = {lo} THEN v * (1 - ({pos} - {lo})) "
                    f"WHEN i = {lo} + 1 THEN v * ({pos} - {lo}) ELSE 0 END), 3) AS p{q:g}")
    return (f"SELECT {g}, max(n) AS n, {', '.join(outs)} FROM (SELECT {g}, {col} AS v, "
            f"row_number() OVER (PARTITION BY {g} ORDER BY {col}) - 1 AS i, count(*) OVER (PARTITION BY {g}) AS n "
            f"FROM requests WHERE {cond}) GROUP BY {g}")


def _interp(n: int, q: float, at: dict[int, float]) -> float | None:
    lo, frac = rank_pos(n, q)
    a = at.get(lo)
    if a is None:
        return None
    b = at.get(min(lo + 1, n - 1), a)
    return round(a + (b - a) * frac, 3)


# ------------------------------------------------------------------ least squares

def fit_from_sums(n: int, sx: float, sy: float, sxy: float, sxx: float, syy: float) -> dict[str, Any]:
    """TTFT = a + b * prompt tokens, from running sums. Slope in ms per 1k tokens."""
    n = int(n or 0)
    out: dict[str, Any] = {"ttft_slope_ms_per_1k": None, "ttft_intercept_ms": None, "ttft_fit_r2": None,
                           "ttft_fit_n": n, "ttft_fit_warning": None, "ttft_fit_rejected": None, "prompt_tokens_mean": None,
                           "prompt_tokens_sd": None,
                           "ttft_fit_notes": []}  # the warnings as {"code", params}: worded by the view, in its language
    if not n:
        out["ttft_fit_warning"] = "no requests with both a TTFT and a prompt size"
        out["ttft_fit_notes"].append({"code": "no_points"})
        return out
    cxx = max(0.0, sxx - sx * sx / n)
    cxy = sxy - sx * sy / n
    cyy = max(0.0, syy - sy * sy / n)
    mean, sd = sx / n, math.sqrt(cxx / n)
    out["prompt_tokens_mean"], out["prompt_tokens_sd"] = round(mean, 1), round(sd, 1)
    if n < MIN_FIT_N:
        note = rejection(n, 0.0, 1.0)
        out["ttft_fit_warning"] = f"no fit: {fit_rejected(n, 0.0, 1.0)}; {SWEEP_HINT}"
        out["ttft_fit_notes"].append(note)
        return out
    if sd < 0.5:
        out["ttft_fit_warning"] = (f"all {n:,} prompts have the same size (~{mean:,.0f} tokens): no slope; "
                                   "vary the input (firsttoken sweep --inputs ...)")
        out["ttft_fit_notes"].append({"code": "same_size", "n": n, "mean": round(mean)})
        return out
    b = cxy / cxx
    a = (sy - b * sx) / n
    r2 = round(min(1.0, cxy * cxy / (cxx * cyy)), 4) if cyy > 0 else 1.0
    out["ttft_fit_r2"] = r2
    why = fit_rejected(n, b * 1000, r2)
    if why:  # a line that explains nothing is not shown anywhere (stats, report, compare, baseline)
        out["ttft_fit_warning"] = f"no fit: {why}; {SWEEP_HINT}"
        out["ttft_fit_notes"].append(rejection(n, b * 1000, r2))
        out["ttft_fit_rejected"] = {"slope_ms_per_1k": round(b * 1000, 3), "intercept_ms": round(a, 3)}
        return out
    out["ttft_slope_ms_per_1k"] = round(b * 1000, 3)
    out["ttft_intercept_ms"] = round(a, 3)
    warn = []
    if sd < MIN_FIT_SD:
        warn.append(f"prompt sizes barely vary (~{mean:,.0f} ± {sd:,.0f} tokens): the slope is not reliable; "
                    "vary the input (firsttoken sweep --inputs ...)")
        out["ttft_fit_notes"].append({"code": "narrow", "mean": round(mean), "sd": round(sd)})
    out["ttft_fit_warning"] = "; ".join(warn) or None
    return out


def rejection(n: int, slope_ms_per_1k: float, r2: float) -> dict[str, Any] | None:
    """Why a fitted TTFT = a + b × prompt tokens line must not be shown, as a note (``code`` and its
    params; None: it may be): too few requests, a negative slope (TTFT does not grow with the input:
    something else drives it), or an R² so small the prompt size explains almost none of TTFT's
    spread. The one rule; the views word it in their language."""
    if n < MIN_FIT_N:
        return {"code": "too_few", "n": n, "min": MIN_FIT_N}
    if slope_ms_per_1k < 0:
        return {"code": "falling", "slope": f"{slope_ms_per_1k:,.0f}"}
    if r2 < MIN_FIT_R2:
        return {"code": "weak", "pct": f"{r2 * 100:.0f}", "r2": f"{r2:.2f}", "n": n}
    return None


def fit_rejected(n: int, slope_ms_per_1k: float, r2: float) -> str | None:
    """``rejection`` in English (JSON output, the report)."""
    note = rejection(n, slope_ms_per_1k, r2)
    if note is None:
        return None
    if note["code"] == "too_few":
        return f"only {n} request{'' if n == 1 else 's'} (a fit needs {MIN_FIT_N})"
    if note["code"] == "falling":
        return f"TTFT does not grow with the prompt (the line falls, {note['slope']} ms per 1k tokens)"
    return f"the prompt size explains only {note['pct']}% of TTFT (R² {note['r2']}, n={n:,})"


# ------------------------------------------------------------------ plumbing

def _db_file(db: sqlite_utils.Database) -> str | None:
    for _, name, file in db.execute("PRAGMA database_list").fetchall():
        if name == "main":
            return file or None
    return None


class _Pool:
    """Run independent read queries on two read-only connections at once (one per core)."""

    def __init__(self, db: sqlite_utils.Database, workers: int = 2) -> None:
        self.db = db
        self.path = _db_file(db)
        self.workers = workers if self.path and os.environ.get("FIRSTTOKEN_STATS_THREADS", "1") != "0" else 0
        self._local = threading.local()
        self._conns: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        if self.workers:
            try:  # a database we cannot open a second time read-only: stay on the one connection
                self._open().close()
            except sqlite3.Error:
                self.workers = 0

    def _open(self) -> sqlite3.Connection:
        c = sqlite3.connect(f"file:{urllib.parse.quote(self.path)}?mode=ro", uri=True, check_same_thread=False, timeout=10)
        c.execute("PRAGMA busy_timeout = 10000")
        c.execute("PRAGMA mmap_size = 1073741824")
        return c

    def conn(self):
        if not self.workers:
            return self.db.conn
        c = getattr(self._local, "conn", None)
        if c is None:
            c = self._local.conn = self._open()
            with self._lock:
                self._conns.append(c)
        return c

    def run(self, jobs: list[Callable[[], Any]]) -> list[Any]:
        if not self.workers:
            return [j() for j in jobs]
        try:
            with ThreadPoolExecutor(self.workers) as ex:
                return list(ex.map(lambda j: j(), jobs))
        finally:
            for c in self._conns:
                c.close()
            self._conns.clear()


def fast_ok(filters: Filters, by: str | None, db: sqlite_utils.Database | None = None) -> bool:
    """Whether the indexed path can answer: grouped by model, filtered by model at most, on a
    database whose running totals count errors by the current rule."""
    if by != "model" or (db is not None and not schema_current(db)):
        return False
    return all(getattr(filters, f.name) in (None, "", False) for f in fields(filters)
               if f.name not in ("model", "exact_model"))


def _and(where: str, *clauses: str) -> str:
    extra = " AND ".join(c for c in clauses if c)
    if not extra:
        return where
    return f"{where} AND {extra}" if where else f" WHERE {extra}"


# ------------------------------------------------------------------ per-metric percentiles

def _offset_percentiles(conn, src: str, gcol: str, col: str, cond: str, counts: dict[Any, int], qs):
    """{group: {n, p50, ...}} by ``ORDER BY col LIMIT 2 OFFSET lo`` on an index of (gcol, col).

    ``counts``: values per group. One that disagrees with the index (a running total that is
    stale, rows written meanwhile) is re-counted there, so it can never give a wrong answer."""
    base = f"SELECT {col} FROM {src} WHERE {gcol} IS ? AND {cond}"
    out: dict[Any, dict[str, Any]] = {}
    for g, n in counts.items():
        if not n:
            continue
        at: dict[int, float] = {}
        for q in qs:
            lo, _ = rank_pos(n, q)
            if lo in at and (lo + 1 in at or lo + 1 >= n):
                continue
            if lo < n / 2:  # walk from the nearer end
                vals = [r[0] for r in conn.execute(f"{base} ORDER BY {col} LIMIT 2 OFFSET ?", [g, lo])]
                ranks = [lo + k for k in range(len(vals))]
            else:
                off = max(0, n - 2 - lo)
                vals = [r[0] for r in conn.execute(f"{base} ORDER BY {col} DESC LIMIT 2 OFFSET ?", [g, off])]
                ranks = [n - 1 - off - k for k in range(len(vals))]
            if len(vals) < min(2, n):
                real = conn.execute(f"SELECT count(*) FROM ({base})", [g]).fetchone()[0]
                if real != n:
                    return _offset_percentiles(conn, src, gcol, col, cond, {**counts, g: real}, qs)
            at.update(zip(ranks, vals))
        out[g] = {"n": n, **{f"p{q:g}": _interp(n, q, at) for q in qs}}
    return out


def _indexed_percentiles(conn, name: str, col: str, counts: dict[Any, int], qs, include_cold: bool):
    index, _ = index_of(name, col)
    cond = f"{col} IS NOT NULL AND {population(name, col)}" + ("" if include_cold else f" AND {WARM}")
    return _offset_percentiles(conn, f"requests INDEXED BY {index}", "model", col, cond, counts, qs)


def _temp_percentiles(conn, name: str, qs, include_cold: bool):
    """Percentiles of column m_<name> of the TEMP table, by a TEMP partial index (one sort)."""
    col = f"m_{name}"
    cond = f"{col} IS NOT NULL" + ("" if include_cold else f" AND {WARM}")
    conn.execute(f"CREATE INDEX temp._ft_ix_{name} ON _ft_stats_rows (g, {col}) WHERE {cond}")
    src = f"{_TEMP} INDEXED BY _ft_ix_{name}"
    counts = dict(conn.execute(f"SELECT g, count(*) FROM {src} WHERE {cond} GROUP BY g").fetchall())
    return _offset_percentiles(conn, src, "g", col, cond, counts, qs)


def _totals(conn, filters: Filters, include_cold: bool) -> dict[Any, dict[str, float]]:
    """stats_totals per model (cold and warm rows summed as asked), for the models ``filters`` match."""
    where, params = model_clause(filters.model, filters.exact_model) if filters.model else ("", [])
    cur = conn.execute("SELECT * FROM stats_totals" + (f" WHERE {where}" if where else ""), params)
    names = [d[0] for d in cur.description]
    out: dict[Any, dict[str, float]] = {}
    for row in cur.fetchall():
        r = dict(zip(names, row))
        key = r.pop("model") or None
        cold = r.pop("cold")
        acc = out.setdefault(key, {"cold": 0, "n_all": 0})
        acc["n_all"] += r["n"]
        acc["cold"] += r["n"] if cold else 0
        for k, v in r.items():
            if k in ("n", "n_in_flight", "n_errors"):
                acc[k] = acc.get(k, 0) + v
            elif include_cold or not cold:
                acc[k] = acc.get(k, 0) + v
            else:
                acc.setdefault(k, 0)
    return {k: v for k, v in out.items() if v["n"]}


# ------------------------------------------------------------------ stats

_TEMP = "temp._ft_stats_rows"


def _materialize(conn, filters: Filters, gsql: str, metrics) -> None:
    """The filtered rows, narrowed to what the aggregates need, in a TEMP table (one pass over requests)."""
    where, params = filters.where()
    mcols = "".join(f"{_only(population(name, expr), expr)} AS m_{name}, " for name, expr in metrics)
    conn.execute("PRAGMA temp_store = MEMORY")
    conn.execute(f"DROP TABLE IF EXISTS {_TEMP}")
    conn.execute(
        f"CREATE TEMP TABLE _ft_stats_rows AS SELECT {gsql} AS g, state, status, {ERROR} AS err, "
        f"top_code, conn_reused, connect_ms, "
        f"{mcols}{PROMPT} AS fx, {_only(STREAMED, 'ttft_ms')} AS fy FROM requests{where}", params)


def _only(rule: str | None, expr: str) -> str:
    """``expr`` where ``rule`` holds, else NULL (every row when there is no rule)."""
    return f"CASE WHEN {rule} THEN {expr} END" if rule else expr


def compute(db: sqlite_utils.Database, filters: Filters | None = None, by: str | None = "model",
            include_cold: bool = True, qs=PERCENTILES, metrics=METRICS, fit: bool = True,
            force_general: bool = False, group_expr: str | None = None) -> dict[str, Any]:
    """The numbers behind `firsttoken stats` (see the module docstring).

    ``metrics``: (name, column or SQL expression) pairs; ``group_expr`` groups by any SQL
    expression instead of ``by`` (e.g. ``prompt_tokens_est`` for a sweep)."""
    filters = filters or Filters()
    if group_expr is None and by not in GROUPS:
        raise ValueError(f"--by {by!r}: use one of {', '.join(GROUPS)}")
    gsql = group_expr or GROUPS[by]
    fast = group_expr is None and fast_ok(filters, by, db) and not force_general
    where, params = filters.where()

    if fast:
        pool = _Pool(db)
        totals = _totals(db.conn, filters, include_cold)
        counts = {g: (int(t["n"]), int(t["n_in_flight"]), int(t["cold"]), int(t["n_errors"])) for g, t in totals.items()}

        def codes_job():
            return pool.conn().execute(
                f"SELECT model, {_CODE} AS code, count(*) FROM requests INDEXED BY idx_requests_stats_errors"
                f"{_and(where, ERROR)} GROUP BY model, code", params).fetchall()

        def metric_job(name, expr):
            def job():
                c = pool.conn()
                if (ix := index_of(name, expr)) is not None:
                    return _indexed_percentiles(c, name, expr, {g: int(t[ix[1]]) for g, t in totals.items()},
                                                qs, include_cold)
                _materialize(c, filters, "model", [(name, expr)])
                try:
                    return _temp_percentiles(c, name, qs, include_cold)
                finally:
                    c.execute(f"DROP TABLE {_TEMP}")
            return job

        results = pool.run([metric_job(name, expr) for name, expr in metrics] + [codes_job])
        per_metric = dict(zip((name for name, _ in metrics), results[: len(metrics)]))
        code_rows = results[-1]
        fit_rows = [(g, t["fit_n"], t["fit_sx"], t["fit_sy"], t["fit_sxy"], t["fit_sxx"], t["fit_syy"])
                    for g, t in totals.items()] if fit else []
    else:
        conn = db.conn
        _materialize(conn, filters, gsql, metrics)
        try:
            per_metric = {name: _temp_percentiles(conn, name, qs, include_cold) for name, _ in metrics}
            counts = {g: (n, int(i), int(cl), int(e)) for g, n, i, cl, e in conn.execute(
                f"SELECT g, count(*), total({IN_FLIGHT}), total({COLD}), total(err) FROM {_TEMP} GROUP BY g")}
            code_rows = conn.execute(f"SELECT g, {_CODE} AS code, count(*) FROM {_TEMP} WHERE err "
                                     f"GROUP BY g, code").fetchall()
            w = _and("", "fy IS NOT NULL", "fx IS NOT NULL", "" if include_cold else WARM)
            fit_rows = conn.execute(f"SELECT g, count(*), total(fx), total(fy), total(fx * fy), total(fx * fx), total(fy * fy) "
                                    f"FROM {_TEMP}{w} GROUP BY g").fetchall() if fit else []
        finally:
            conn.execute(f"DROP TABLE IF EXISTS {_TEMP}")

    code_map: dict[Any, list] = {}
    for g, code, n in code_rows:
        code_map.setdefault(g, []).append((code, n))
    fits = {r[0]: fit_from_sums(*r[1:]) for r in fit_rows}
    uncached = uncached_fits(db, filters, gsql, include_cold) if fit else {}
    groups = []
    for g, (count, in_flight, cold, errors) in counts.items():
        finished = count - in_flight
        entry: dict[str, Any] = {
            "group": g, "count": count, "in_flight": in_flight,
            "cold": cold, "cold_excluded": 0 if include_cold else cold,
            "errors": errors, "error_rate": round(errors / finished, 4) if finished else None,
            "error_codes": [
                {"code": code, "count": n, "rate": round(n / finished, 4) if finished else None}
                for code, n in sorted(code_map.get(g, []), key=lambda t: (-t[1], str(t[0])))[:10]
            ],
        }
        for name, _ in metrics:
            entry[f"{name}_ms" if name in _MS_NAMES else name] = per_metric[name].get(
                g, {"n": 0, **{f"p{q:g}": None for q in qs}})
        if fit:
            entry.update(fits.get(g) or fit_from_sums(0, 0, 0, 0, 0, 0))
            if g in uncached:
                entry["uncached_fit"] = uncached[g]
                r2_all, r2_unc = entry.get("ttft_fit_r2"), uncached[g].get("ttft_fit_r2")
                if r2_all is not None and r2_unc is not None:
                    entry["better_fit"] = "uncached" if r2_unc > r2_all else "all"
        groups.append(entry)
    if by == "hour" and group_expr is None:
        groups.sort(key=lambda e: str(e["group"]))
    elif by == "bucket" and group_expr is None:
        groups.sort(key=lambda e: bucket_key(e["group"]))
    elif group_expr is not None:
        groups.sort(key=lambda e: (e["group"] is None, e["group"] if isinstance(e["group"], (int, float)) else 0, str(e["group"])))
    else:
        groups.sort(key=lambda e: (-e["count"], str(e["group"])))
    return {
        "by": by if group_expr is None else group_expr, "include_cold": include_cold,
        "percentile": "linear interpolation between closest ranks (numpy default, PERCENTILE.INC)",
        "indexed": fast, "filters": {f.name: getattr(filters, f.name) for f in fields(filters) if getattr(filters, f.name)},
        "groups": groups,
    }


UNCACHED = "(usage_prompt_tokens - usage_cached_tokens)"


def uncached_fits(db: sqlite_utils.Database, filters: Filters, gsql: str, include_cold: bool) -> dict[Any, dict[str, Any]]:
    """Per group, TTFT = a + b x UNCACHED input tokens (the server's prompt tokens minus its cache
    reads), for groups where the server reported cached tokens at least once: with prompt caching
    the prefill grows with what was not cached. Each fit also says how many requests had a cache hit."""
    where, params = filters.where()
    w = _and(where, "ttft_ms IS NOT NULL", "usage_prompt_tokens IS NOT NULL", "usage_cached_tokens IS NOT NULL",
             STREAMED, "" if include_cold else WARM)
    out: dict[Any, dict[str, Any]] = {}
    for g, hits, *sums in db.execute(
            f"SELECT {gsql} AS g, total(usage_cached_tokens > 0), count(*), total({UNCACHED}), total(ttft_ms), "
            f"total({UNCACHED} * ttft_ms), total({UNCACHED} * {UNCACHED}), total(ttft_ms * ttft_ms) "
            f"FROM requests{w} GROUP BY g", params).fetchall():
        if hits:
            out[g] = dict(fit_from_sums(*sums), cached_requests=int(hits))
    return out


_CODE = "coalesce(top_code, CASE WHEN status IS NULL THEN 'no_response' ELSE 'http_' || status END)"
_MS_NAMES = {name for name, _ in METRICS}


# ------------------------------------------------------------------ report helpers

def scatter_points(db: sqlite_utils.Database, filters: Filters, counts: dict[Any, int], per_model: int = 800,
                   include_cold: bool = True, by: str = "model") -> dict[Any, list[tuple[float, float, str]]]:
    """(prompt tokens, TTFT, request id) per group of ``by`` (model, route...; ``counts`` keyed by
    its values), about per_model points each: every k-th row by rowid."""
    where, params = filters.where()
    out: dict[Any, list[tuple[float, float, str]]] = {}
    for model, n in counts.items():
        if not n:
            continue
        k = max(1, n // per_model)
        w = _and(where, f"{GROUPS[by]} IS ?", "ttft_ms IS NOT NULL", f"{PROMPT} IS NOT NULL", STREAMED,
                 "" if include_cold else WARM, "rowid % ? = 0")
        rows = db.execute(f"SELECT {PROMPT}, ttft_ms, id FROM requests{w} LIMIT ?", [*params, model, k, per_model * 2])
        out[model] = [(x, y, i) for x, y, i in rows.fetchall()]
    return out


def group_values(db: sqlite_utils.Database, filters: Filters, by: str, limit: int = 2) -> list[Any]:
    """Up to ``limit`` distinct values of ``by`` (model, route...) among the matching requests:
    whether there is more than one route to compare, without aggregating anything."""
    where, params = filters.where()
    return [v for (v,) in db.execute(f"SELECT DISTINCT {GROUPS[by]} FROM requests{where} LIMIT ?",
                                     [*params, limit]).fetchall()]


def finding_breakdown(db: sqlite_utils.Database, filters: Filters, total: int) -> list[dict[str, Any]]:
    """Requests per finding code and severity (table ``findings``), most frequent first."""
    where, params = filters.where()
    scope = f"WHERE f.request_id IN (SELECT id FROM requests{where}) " if where else ""
    sql = f"SELECT f.code, f.severity, count(*) FROM findings f {scope}GROUP BY f.code, f.severity ORDER BY 3 DESC, 1"
    return [{"code": c, "severity": s, "count": n, "share": n / total if total else None}
            for c, s, n in db.execute(sql, params).fetchall()]


def slowest(db: sqlite_utils.Database, filters: Filters, models: list[Any], limit: int = 20) -> list[dict[str, Any]]:
    """The streamed requests with the highest TTFT (per-model index walks when only --model filters)."""
    cols = ("id, started_at, model, route, api, status, usage_prompt_tokens, prompt_tokens_est, ttfb_ms, ttft_ms, "
            "gap_ms, total_ms, conn_reused, connect_ms, findings")
    where, params = filters.where()
    if fast_ok(filters, "model"):
        sqls = [(f"SELECT {cols} FROM requests WHERE model IS ? AND ttft_ms IS NOT NULL AND {STREAMED} "
                 "ORDER BY ttft_ms DESC LIMIT ?", [m, limit]) for m in models]
    else:
        sqls = [(f"SELECT {cols} FROM requests{_and(where, 'ttft_ms IS NOT NULL', STREAMED)} ORDER BY ttft_ms DESC LIMIT ?",
                 [*params, limit])]
    rows = []
    for sql, p in sqls:
        cur = db.execute(sql, p)
        names = [d[0] for d in cur.description]
        rows += [decode_row(dict(zip(names, r))) for r in cur.fetchall()]
    return sorted(rows, key=lambda r: -(r["ttft_ms"] or 0))[:limit]


def time_span(db: sqlite_utils.Database, filters: Filters) -> tuple[str | None, str | None]:
    """(first, last) started_at of the matching requests."""
    where, params = filters.where()
    first, last = db.execute(f"SELECT min(started_at), max(started_at) FROM requests{where}", params).fetchone()
    return first, last


# ------------------------------------------------------------------ compare (route A/B)

#: what `firsttoken compare` puts side by side, per route
COMPARE_METRICS: tuple[tuple[str, str], ...] = (("ttfb", "ttfb_ms"), ("gap", "gap_ms"), ("ttft", "ttft_ms"), ("tpot", "tpot_ms"))


def slope_se(fit: dict[str, Any]) -> float | None:
    """Standard error of a fit's slope (ms per 1k tokens), from its slope, R² and n:
    SE = |b| · sqrt((1 − R²) / (R² · (n − 2))). None when it cannot be told (n < 3, no slope)."""
    b, r2, n = fit.get("ttft_slope_ms_per_1k"), fit.get("ttft_fit_r2"), fit.get("ttft_fit_n") or 0
    if b is None or r2 is None or n < 3:
        return None
    if r2 <= 0:
        return math.inf
    return round(abs(b) * math.sqrt(max(0.0, 1.0 - r2) / (r2 * (n - 2))), 3)


def compare_routes(db: sqlite_utils.Database, experiment: str, routes: list[str],
                   qs: tuple[int, ...] = (50, 95)) -> dict[str, dict[str, Any]]:
    """Per route (the ``route`` column) of one experiment's rows: count, errors, percentiles of
    TTFB, gap, TTFT and TPOT, and the TTFT-vs-input fit with its slope's standard error.

    Warm-up rows carry their own tag (``EXPERIMENT/warmup``) and are not counted. A route
    without rows comes back with ``count`` 0 and empty figures."""
    res = compute(db, Filters(experiment=experiment), by="route", metrics=COMPARE_METRICS, qs=qs, fit=True)
    by_route = {g["group"]: g for g in res["groups"]}
    out: dict[str, dict[str, Any]] = {}
    for name in routes:
        g = by_route.get(name)
        if g is None:  # no rows: the shape of an empty group
            g = {"group": name, "count": 0, "in_flight": 0, "errors": 0, "error_rate": None, "error_codes": [],
                 **{f"{m}_ms": {"n": 0, **{f"p{q:g}": None for q in qs}} for m, _ in COMPARE_METRICS},
                 **fit_from_sums(0, 0, 0, 0, 0, 0)}
        g = dict(g)
        g["ttft_slope_se_ms_per_1k"] = slope_se(g)
        out[name] = g
    return out


def compare_timings(db: sqlite_utils.Database, experiment: str, routes: list[str]) -> dict[str, list[dict[str, Any]]]:
    """Per route, the experiment's timed streams in the order they were sent: prompt tokens,
    TTFB, TTFT and ``headers_held`` (for pairing the interleaved requests and telling a route
    that holds its headers)."""
    out: dict[str, list[dict[str, Any]]] = {r: [] for r in routes}
    if not routes:
        return out
    held = "headers_held" if "headers_held" in db["requests"].columns_dict else "NULL"  # a database before m016
    sql = (f"SELECT route, prompt_tokens_est, ttfb_ms, ttft_ms, {held} FROM requests "
           "WHERE experiment = ? AND status = 200 AND ttft_ms IS NOT NULL AND route IN (%s) "
           "ORDER BY started_at, rowid" % ",".join("?" * len(routes)))
    for route, tokens, ttfb, ttft, held in db.execute(sql, [experiment, *routes]).fetchall():
        out[route].append({"prompt_tokens": tokens, "ttfb_ms": ttfb, "ttft_ms": ttft,
                           "headers_held": None if held is None else bool(held)})
    return out


def head_timings(db: sqlite_utils.Database, filters: Filters, limit: int = 200) -> list[tuple[Any, float, float]]:
    """(prompt_tokens_est, ttfb_ms, ttft_ms) of the newest ``limit`` timed streams matching
    ``filters``: whether a route's hop holds its headers until the first token (``hops.route_holds``)."""
    where, params = filters.where()
    sql = (f"SELECT prompt_tokens_est, ttfb_ms, ttft_ms FROM requests{_and(where, 'status = 200', 'ttft_ms IS NOT NULL', 'ttfb_ms IS NOT NULL')} "
           "ORDER BY started_at DESC LIMIT ?")
    return [tuple(r) for r in db.execute(sql, [*params, int(limit)]).fetchall()]
