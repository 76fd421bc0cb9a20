"""Aggregate queries for `stats`, `sweep`, `baseline`, `compare` and `report`, computed in SQLite.

One engine: plain counts per group, then per metric ``ORDER BY value LIMIT 2 OFFSET k`` walks an
index of (group, value) from its nearer end: ``requests``' own indexes when grouped by model, else
those of a TEMP copy of the matching rows. Definitions and costs: docs/stats.md ("How it stays fast").
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, fields
from typing import Any

import sqlite_utils

from firsttoken.addon import engines
from firsttoken.addon.diagnose.latency import NOT_PREFILL
from firsttoken.addon.record import percentile
from firsttoken.addon.store.db import schema_current
from firsttoken.addon.store.queries import (
    ERROR,
    MODEL_CALL,
    NOT_STREAMED,
    STREAMED,
    Filters,
    columns,
    decode_row,
    model_clause,
)

#: (name in output, column)
METRICS: tuple[tuple[str, str], ...] = (
    ("connect", "connect_ms"), ("ttfb", "ttfb_ms"), ("ttft", "ttft_ms"), ("gap", "gap_ms"),
    ("tpot", "tpot_ms"), ("itl", "itl_p50_ms"), ("total", "total_ms"), ("whole", "total_ms"),
)
#: the columns whose figures describe streamed requests only (``population``)
STREAMED_COLS = frozenset({"ttfb_ms", "ttft_ms", "gap_ms", "tpot_ms", "itl_p50_ms", "total_ms"})
#: the metric of the non-streamed requests: their total, the time to the whole answer
WHOLE = "whole"
#: whose time ``whole`` is: non-streamed model calls that got an answer (a 401 or a 404 is no answer);
#: its columns are all in ``idx_requests_stats_whole`` (migration m028)
ANSWERED_NOT_STREAMED = f"({NOT_STREAMED} AND {MODEL_CALL} AND coalesce(status, 0) BETWEEN 100 AND 399 AND error IS NULL)"
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
#: the column naming why a request's TTFT is not prefill (m026; ``diagnose.ttft_outlier`` fills it)
OUTLIER = "ttft_outlier"


def population(name: str, expr: str) -> str | None:
    """The SQL rule of the requests a metric is over: ``whole`` the non-streamed model calls that
    were answered, the latency columns the streamed ones, anything else (connect, prompt sizes)
    every request."""
    if name == WHOLE:
        return ANSWERED_NOT_STREAMED
    if expr in STREAMED_COLS:
        return STREAMED
    return None


def index_of(name: str, expr: str) -> str | None:
    """The index of ``requests`` that holds a metric in (model, value) order, or None: the
    streamed latency columns (m004, partial since m021), ``whole`` (m021) and ``connect`` (m022)."""
    if name == WHOLE and expr == "total_ms":
        return "idx_requests_stats_whole"
    if expr in STREAMED_COLS:
        return f"idx_requests_stats_{expr}"
    if expr == "connect_ms":
        return "idx_requests_stats_connect"
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


TAIL_MIN_N = 20  # fewest values whose P95 is not mostly the single slowest one


def tail_is_judged(n: int | None) -> bool:
    """Whether a P95 over n requests may be judged (a regression, a verdict): at 20 the slowest request
    weighs 5 % of it; at 5 it weighs 80 %, so one hiccup would decide."""
    return (n or 0) >= TAIL_MIN_N


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

def fit_from_sums(n: int, sx: float, sy: float, sxy: float, sxx: float, syy: float,
                  excluded: dict[str, int] | None = None) -> dict[str, Any]:
    """TTFT = a + b * prompt tokens, from running sums. Slope in ms per 1k tokens. ``excluded``: the
    requests left out as not prefill, per finding code (``ttft_fit_excluded``, and a note saying so)."""
    n = int(n or 0)
    left_out = [{"code": k, "n": int(v), "why": NOT_PREFILL.get(k, k)}
                for k, v in sorted((excluded or {}).items(), key=lambda kv: (-kv[1], str(kv[0]))) if v]
    out: dict[str, Any] = {"ttft_slope_ms_per_1k": None, "ttft_intercept_ms": None, "ttft_fit_r2": None,
                           "ttft_fit_n": n, "ttft_fit_warning": None, "ttft_fit_rejected": None, "prompt_tokens_mean": None,
                           "prompt_tokens_sd": None, "ttft_fit_excluded": left_out,
                           "ttft_fit_excluded_n": sum(e["n"] for e in left_out),
                           "ttft_fit_notes": []}  # the warnings as {"code", params}: worded by the view, in its language
    if not n and left_out:  # every one left out as not prefill: too few to fit (they say why)
        out["ttft_fit_warning"] = f"no fit: {fit_rejected(0, 0.0, 1.0)}; {SWEEP_HINT}"
        out["ttft_fit_notes"].append(rejection(0, 0.0, 1.0))
        return out
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


# ------------------------------------------------------------------ where the rows are read

def indexes_serve(filters: Filters, by: str | None, db: sqlite_utils.Database | None = None) -> bool:
    """Whether ``requests``' own (model, value) indexes can answer: grouped by model, filtered by
    model at most, on a database that has them all (every migration applied)."""
    if by != "model" or (db is not None and not schema_current(db)):
        return False
    return all(getattr(filters, f.name) in (None, "", False) for f in fields(filters)
               if f.name not in ("model", "exact_model"))


def _and(where: str, *clauses: str) -> str:
    extra = " AND ".join(c for c in clauses if c)
    if not extra:
        return where
    return f"{where} AND {extra}" if where else f" WHERE {extra}"


_TEMP = "temp._ft_stats_rows"
UNCACHED = "(usage_prompt_tokens - usage_cached_tokens)"
_CODE = "coalesce(top_code, CASE WHEN status IS NULL THEN 'no_response' ELSE 'http_' || status END)"
_MS_NAMES = {name for name, _ in METRICS}
#: the SQL the aggregates evaluate: a copy of the rows keeps every column of ``requests`` it names
_READS = (ERROR, MODEL_CALL, IN_FLIGHT, COLD, WARM, _CODE, PROMPT, STREAMED, NOT_STREAMED, UNCACHED, "ttft_ms", OUTLIER)


@dataclass(frozen=True)
class _Source:
    """Rows to aggregate: a FROM clause, the column that names the group, the WHERE that picks them."""
    table: str
    group: str
    where: str = ""
    params: tuple = ()

    def select(self, conn, what: str, *where: str, by: str = "1") -> list[tuple]:
        """``SELECT group, what ... GROUP BY by`` over these rows, narrowed by ``where``."""
        return conn.execute(f"SELECT {self.group}, {what} FROM {self.table}{_and(self.where, *where)} GROUP BY {by}",
                            self.params).fetchall()


def _models(conn, filters: Filters) -> list[str]:
    """The models ``--model`` matches, by its rule (``queries.model_clause``) applied to each distinct
    name once: the indexes are then read for those names only, not matched entry by entry."""
    names = [m for (m,) in conn.execute("SELECT DISTINCT model FROM requests") if m is not None]
    if not names:
        return []
    clause, params = model_clause(filters.model, filters.exact_model)
    return [m for (m,) in conn.execute(f"WITH names(model) AS (VALUES {', '.join(['(?)'] * len(names))}) "
                                       f"SELECT model FROM names WHERE {clause}", [*names, *params])]


class _Rows:
    """What one `compute` reads: ``requests`` itself when its indexes serve (``direct``), else, and
    for a metric without an index of its own, a TEMP copy of the matching rows (made once, the
    columns the queries read under their own names), so the same SQL runs on either."""

    def __init__(self, db: sqlite_utils.Database, filters: Filters, gsql: str, metrics, direct: bool) -> None:
        self.db, self.conn, self.filters, self.gsql, self.metrics = db, db.conn, filters, gsql, metrics
        names = _models(self.conn, filters) if direct and filters.model else None
        # (a --model that matches no model: an empty IN () leaves the indexes nothing to search)
        self.direct, self.copied = direct and names != [], False
        self.outlier = OUTLIER if OUTLIER in columns(db) else "NULL"  # a database before m026: nothing known
        if names:
            self.base = _Source("requests", "model", f" WHERE model IN ({', '.join('?' * len(names))})", tuple(names))
        elif self.direct:
            self.base = _Source("requests", "model")
        else:
            self.base = self.copy()

    def copy(self) -> _Source:
        if not self.copied:
            text = " ".join(_READS)
            cols = [c for c in columns(self.db) if re.search(rf"\b{re.escape(c)}\b", text)]
            values = "".join(f", {expr} AS m_{name}" for name, expr in self.metrics)
            where, params = self.filters.where()
            self.conn.execute("PRAGMA temp_store = MEMORY")
            self.conn.execute(f"DROP TABLE IF EXISTS {_TEMP}")
            self.conn.execute(f"CREATE TEMP TABLE _ft_stats_rows AS SELECT {self.gsql} AS g, {', '.join(cols)}{values} "
                              f"FROM requests{where}", params)
            self.copied = True
        return _Source(_TEMP, "g")

    def close(self) -> None:
        if self.copied:
            self.conn.execute(f"DROP TABLE IF EXISTS {_TEMP}")  # and its indexes

    def counts(self) -> tuple[dict[Any, list[int]], list[tuple]]:
        """({group: [requests, in flight, cold, errors]}, [(group, code, failed requests)]) of the model
        calls, and {group: requests that are no model call} (``queries.MODEL_CALL``: left out). One
        query each, so that ``requests`` answers from an index (count, in flight, cold), except the
        errors and the calls that are none: both rules are read off every row, in one pass
        (``NOT INDEXED``: an index of every row's state is slower)."""
        b, c = self.base, self.conn
        out = {g: [n, 0, 0, 0] for g, n in b.select(c, "count(*)")}
        for i, rule in ((1, IN_FLIGHT), (2, COLD)):
            for g, n in b.select(c, "count(*)", rule):
                if g in out:  # (a group first written meanwhile is not counted yet)
                    out[g][i] = n
        rows = _Source(f"{b.table} NOT INDEXED", b.group, b.where, b.params).select(
            c, f"{_CODE} AS code, {MODEL_CALL} AS call, count(*), total({IN_FLIGHT}), total({COLD})",
            f"({ERROR} OR NOT {MODEL_CALL})", by="1, code, call")
        codes, other = [], {}
        for g, code, call, n, flying, cold in rows:
            if g not in out:
                continue
            if call:
                out[g][3] += n
                codes.append((g, code, n))
            else:
                for i, k in ((0, n), (1, int(flying)), (2, int(cold))):
                    out[g][i] -= k
                other[g] = other.get(g, 0) + n
        return {g: v for g, v in out.items() if v[0] > 0}, codes, other

    def fits(self, include_cold: bool) -> tuple[list[tuple], list[tuple], dict[Any, dict[str, int]]]:
        """The sums of TTFT = a + b x prompt tokens per group, and of the same over uncached tokens
        (groups whose server reported cached tokens: with prompt caching the prefill grows with what
        was not cached; each also counts the requests with a cache hit), over the requests whose TTFT
        is prefill; and per group the requests left out as not prefill, by finding code (``OUTLIER``).
        One read per fit: grouped by the outlier code too, its NULL row holds the sums."""
        warm = "" if include_cold else WARM
        x, u, o = PROMPT, UNCACHED, self.outlier
        rows = self.base.select(self.conn, f"{o} AS why, count(*), total({x}), total(ttft_ms), total({x} * ttft_ms), "
                                f"total({x} * {x}), total(ttft_ms * ttft_ms)", "ttft_ms IS NOT NULL", STREAMED,
                                f"{x} IS NOT NULL", warm, by="1, why")
        fit = [(g, *sums) for g, why, *sums in rows if why is None]
        left_out: dict[Any, dict[str, int]] = {}
        for g, why, n, *_ in rows:
            if why is not None:
                left_out.setdefault(g, {})[why] = n
        uncached = self.base.select(
            self.conn, f"total(usage_cached_tokens > 0), count(*), total({u}), total(ttft_ms), total({u} * ttft_ms), "
            f"total({u} * {u}), total(ttft_ms * ttft_ms)", "ttft_ms IS NOT NULL", "usage_prompt_tokens IS NOT NULL",
            "usage_cached_tokens IS NOT NULL", STREAMED, warm, f"{o} IS NULL")
        return fit, uncached, left_out

    def percentiles(self, name: str, expr: str, qs, include_cold: bool) -> dict[Any, dict[str, Any]]:
        """{group: {n, p50, ...}} of one metric over its population (cold requests too, or not)."""
        ix = index_of(name, expr) if self.direct else None
        value = expr if ix else f"m_{name}"
        cond = " AND ".join(c for c in (f"{value} IS NOT NULL", population(name, expr),
                                        "" if include_cold else WARM) if c)
        if ix:
            src = _Source(f"requests INDEXED BY {ix}", "model", self.base.where, self.base.params)
        else:
            self.copy()
            self.conn.execute(f"CREATE INDEX temp._ft_ix_{name} ON _ft_stats_rows (g, {value}) WHERE {cond}")
            src = _Source(f"{_TEMP} INDEXED BY _ft_ix_{name}", "g")
        counts = dict(src.select(self.conn, "count(*)", cond))
        return _offset_percentiles(self.conn, src.table, src.group, value, cond, counts, qs)


# ------------------------------------------------------------------ per-metric percentiles

def _offset_percentiles(conn, src: str, gcol: str, col: str, cond: str, counts: dict[Any, int], qs):
    """{group: {n, p50, ...}} by ``ORDER BY col LIMIT 2 OFFSET lo`` on an index of (gcol, col).

    ``counts``: values per group, counted just before. One that disagrees with the index (rows
    written meanwhile) is re-counted there, so it can never give a wrong answer."""
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


# ------------------------------------------------------------------ stats

def compute(db: sqlite_utils.Database, filters: Filters | None = None, by: str | None = "model",
            include_cold: bool = True, qs=PERCENTILES, metrics=METRICS, fit: bool = True,
            force_general: bool = False, group_expr: str | None = None, engine: bool = False) -> dict[str, Any]:
    """The numbers behind `firsttoken stats` (see the module docstring).

    ``metrics``: (name, column or SQL expression) pairs; ``group_expr`` groups by any SQL
    expression instead of ``by`` (e.g. ``prompt_tokens_est`` for a sweep); ``force_general``
    reads a copy of the rows even where ``requests``' indexes would serve (the tests compare); ``engine``
    adds each group's split of TTFT into an engine's own terms where one reported them (``engine_split``)."""
    filters = filters or Filters()
    if group_expr is None and by not in GROUPS:
        raise ValueError(f"--by {by!r}: use one of {', '.join(GROUPS)}")
    gsql = group_expr or GROUPS[by]
    direct = group_expr is None and not force_general and indexes_serve(filters, by, db)
    rows = _Rows(db, filters, gsql, metrics, direct)
    try:
        counts, code_rows, other = rows.counts()
        per_metric = {name: rows.percentiles(name, expr, qs, include_cold) for name, expr in metrics}
        fit_rows, uncached_rows, left_out = rows.fits(include_cold) if fit else ([], [], {})
    finally:
        rows.close()

    split = engine_split(db, filters, gsql, include_cold) if engine else {}
    code_map: dict[Any, list] = {}
    for g, code, n in code_rows:
        code_map.setdefault(g, []).append((code, n))
    fits = {r[0]: fit_from_sums(*r[1:], excluded=left_out.get(r[0])) for r in fit_rows}
    uncached = {g: dict(fit_from_sums(*sums), cached_requests=int(hits)) for g, hits, *sums in uncached_rows if hits}
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
            entry.update(fits.get(g) or fit_from_sums(0, 0, 0, 0, 0, 0, excluded=left_out.get(g)))
            if g in uncached:
                entry["uncached_fit"] = uncached[g]
                r2_all, r2_unc = entry.get("ttft_fit_r2"), uncached[g].get("ttft_fit_r2")
                if r2_all is not None and r2_unc is not None:
                    entry["better_fit"] = "uncached" if r2_unc > r2_all else "all"
        if g in split:
            entry["engine"] = split[g]
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
        "indexed": rows.direct, "not_model_calls": sum(other.values()), "filters": {f.name: getattr(filters, f.name) for f in fields(filters) if getattr(filters, f.name)},
        "groups": groups,
    }


def overall(db: sqlite_utils.Database, filters: Filters | None = None, qs=(50, 95), metrics=METRICS,
            include_cold: bool = True) -> dict[str, Any] | None:
    """Every matching model call as one group: ``compute``'s group entry (count, errors, in flight and
    each metric's percentiles over its population), or None when no model call matches. The figures of
    every summary (`run`'s, the live view's and the proxy's on exit, the report's header)."""
    res = compute(db, filters, group_expr="'all'", include_cold=include_cold, qs=qs, metrics=metrics, fit=False)
    return dict(res["groups"][0], not_model_calls=res["not_model_calls"]) if res["groups"] else None


# ------------------------------------------------------------------ the engine's own clock

#: the terms `stats` splits TTFT into (``engines.ttft_terms``' keys), in the order they happen
ENGINE_TERMS = ("wait", "load", "prefill", "first_decode", "decode", "rest")


def _terms_of(values: list[float | None], inferred: list[int] | None, qs) -> dict[str, Any] | None:
    got = sorted(v for v in values if v is not None)
    if not got:
        return None
    out: dict[str, Any] = {"n": len(got), **{f"p{q:g}": round(percentile(got, q), 3) for q in qs}}
    if inferred is not None:
        out["inferred"] = sum(1 for v, i in zip(values, inferred) if v is not None and i)
    return out


def engine_split(db: sqlite_utils.Database, filters: Filters | None = None, group: str = "model",
                 include_cold: bool = True, qs=(50, 95)) -> dict[Any, dict[str, Any]]:
    """Per group (``group``: its SQL), the answered model calls an engine reported on, their TTFT split
    into the engine's terms (``engines.TERMS_SQL``: P50/P95 of each, and how many of a term's values the
    proxy inferred), and the engine's own prefill as a line, prefill ms = a + b x tokens it prefilled
    (its reported prefill only: an inferred one is the route's fit again), with its cache hits. {} when no
    row has an engine's report (answered from ``idx_requests_engine``, not a scan)."""
    filters = filters or Filters()
    where, params = filters.where()
    rows_sql = _and(where, engines.ENGINE_ROWS_SQL, MODEL_CALL, "status BETWEEN 200 AND 299", "error IS NULL",
                    "" if include_cold else WARM)
    if db.conn.execute(f"SELECT 1 FROM requests{_and('', engines.ENGINE_ROWS_SQL)} LIMIT 1").fetchone() is None:
        return {}
    terms = [engines.TERMS_SQL[k] for k in ENGINE_TERMS]
    flags = [engines.INFERRED_SQL.get(k, "0") for k in ENGINE_TERMS]
    x, y = engines.PREFILLED_SQL, "engine_prefill_ms"
    sql = (f"SELECT {group}, engine, {', '.join(terms)}, {', '.join(flags)}, "
           f"CASE WHEN {y} IS NOT NULL AND NOT {engines.INFERRED_SQL['prefill']} AND {x} > 0 THEN {x} END, {y}, "
           f"engine_prompt_tokens, engine_cached_tokens FROM requests{rows_sql}")
    per: dict[Any, list[tuple]] = {}
    for row in db.conn.execute(sql, params):
        per.setdefault(row[0], []).append(row[1:])
    out: dict[Any, dict[str, Any]] = {}
    k = len(ENGINE_TERMS)
    for g, rows in per.items():
        split = {}
        for i, key in enumerate(ENGINE_TERMS):
            t = _terms_of([r[1 + i] for r in rows], [r[1 + k + i] for r in rows] if key in engines.INFERRED_SQL else None, qs)
            if t is not None:
                split[key] = t
        pts = [(r[1 + 2 * k], r[2 + 2 * k]) for r in rows if r[1 + 2 * k] is not None]
        sx, sy = sum(p for p, _ in pts), sum(m for _, m in pts)
        fit = fit_from_sums(len(pts), sx, sy, sum(p * m for p, m in pts), sum(p * p for p, _ in pts),
                            sum(m * m for _, m in pts))
        prompts = [(r[3 + 2 * k], r[4 + 2 * k] or 0) for r in rows if r[3 + 2 * k] is not None]
        out[g] = {
            "n": len(rows), "engines": sorted({r[0] for r in rows if r[0]}), "terms": split,
            "prefill_fit": {"slope_ms_per_1k": fit["ttft_slope_ms_per_1k"], "intercept_ms": fit["ttft_intercept_ms"],
                            "r2": fit["ttft_fit_r2"], "n": fit["ttft_fit_n"], "notes": fit["ttft_fit_notes"],
                            "ms_per_1k_mean": round(sy * 1000 / sx, 3) if sx else None},
            "cache": {"requests": len(prompts), "hits": sum(1 for _, c in prompts if c > 0),
                      "cached_tokens": sum(c for _, c in prompts), "prompt_tokens": sum(p for p, _ in prompts)},
        }
    return out


# ------------------------------------------------------------------ report helpers

def scatter_points(db: sqlite_utils.Database, filters: Filters, counts: dict[Any, int], per_model: int = 800,
                   include_cold: bool = True, by: str = "model") -> dict[Any, list[tuple[float, float, str, str | None]]]:
    """(prompt tokens, TTFT, request id, why the fit leaves it out or None) per group of ``by`` (model,
    route...; ``counts`` keyed by its values), about per_model points each: every k-th row by rowid."""
    where, params = filters.where()
    why = OUTLIER if OUTLIER in columns(db) else "NULL"
    out: dict[Any, list[tuple[float, float, str, str | None]]] = {}
    for model, n in counts.items():
        if not n:
            continue
        k = max(1, n // per_model)
        w = _and(where, f"{GROUPS[by]} IS ?", "ttft_ms IS NOT NULL", f"{PROMPT} IS NOT NULL", STREAMED,
                 "" if include_cold else WARM, "rowid % ? = 0")
        rows = db.execute(f"SELECT {PROMPT}, ttft_ms, id, {why} FROM requests{w} LIMIT ?", [*params, model, k, per_model * 2])
        out[model] = [(x, y, i, o) for x, y, i, o in rows.fetchall()]
    return out


def group_values(db: sqlite_utils.Database, filters: Filters, by: str, limit: int = 2) -> list[Any]:
    """Up to ``limit`` distinct values of ``by`` (model, route...) among the matching requests:
    whether there is more than one route to compare, without aggregating anything."""
    where, params = filters.where()
    return [v for (v,) in db.execute(f"SELECT DISTINCT {GROUPS[by]} FROM requests{where} LIMIT ?",
                                     [*params, limit]).fetchall()]


def finding_breakdown(db: sqlite_utils.Database, filters: Filters, total: int) -> list[dict[str, Any]]:
    """Model calls per finding code and severity (table ``findings``), most frequent first (a request that
    is no model call, ``queries.MODEL_CALL``, is left out as ``compute`` leaves it out of ``total``)."""
    where, params = filters.where()
    scope = f"WHERE f.request_id IN (SELECT id FROM requests{_and(where, MODEL_CALL)}) "
    sql = f"SELECT f.code, f.severity, count(*) FROM findings f {scope}GROUP BY f.code, f.severity ORDER BY 3 DESC, 1"
    return [{"code": c, "severity": s, "count": n, "share": n / total if total else None}
            for c, s, n in db.execute(sql, params).fetchall()]


def slowest(db: sqlite_utils.Database, filters: Filters, models: list[Any], limit: int = 20) -> list[dict[str, Any]]:
    """The streamed requests with the highest TTFT (per-model index walks when only --model filters)."""
    cols = ("id, started_at, model, route, api, status, usage_prompt_tokens, prompt_tokens_est, ttfb_ms, ttft_ms, "
            "gap_ms, total_ms, conn_reused, connect_ms, findings")
    where, params = filters.where()
    if indexes_serve(filters, "model"):
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
