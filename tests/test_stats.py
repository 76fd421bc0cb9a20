"""`firsttoken stats`, `export`, `bench-db`: percentiles in SQL checked by hand, both query paths, the fit."""

from __future__ import annotations

import csv
import io
import json
import random
import re

import pytest
from click.testing import CliRunner
from conftest import percentile_of

from firsttoken.addon.store import stats_queries as sq
from firsttoken.addon.store.db import open_db
from firsttoken.addon.store.queries import STREAMED, Filters
from firsttoken.cli.bench.db import bench_db, generate
from firsttoken.cli.export import export
from firsttoken.cli.output import ms
from firsttoken.cli.stats import stats

N = 0


def add(db, **kw):
    global N
    N += 1
    row = {"id": f"r{N:06d}", "started_at": f"2026-11-29T10:{N // 60 % 60:02d}:{N % 60:02d}.000+00:00", "state": "done",
           "model": "m", "route": "default", "api": "openai.chat", "status": 200, "conn_reused": 1, "stream": 1,
           **kw}
    db["requests"].insert(row, alter=False)


@pytest.fixture
def db(tmp_path):
    return open_db(tmp_path / "s.db")


def both(db, **kw):
    """The indexed and the general path must agree; return one of them."""
    a = sq.compute(db, Filters(**kw.pop("filters", {})), **kw)
    b = sq.compute(db, Filters(**(a["filters"])), force_general=True, **kw)
    assert _same(a["groups"], b["groups"])
    return a


def _same(x, y):
    """Equal, floats to 1e-6 (the indexed path sums the fit in another order)."""
    if isinstance(x, dict):
        assert isinstance(y, dict) and x.keys() == y.keys(), (x, y)
        return all(_same(x[k], y[k]) for k in x)
    if isinstance(x, list):
        assert isinstance(y, list) and len(x) == len(y), (x, y)
        return all(_same(a, b) for a, b in zip(x, y))
    if isinstance(x, float) and isinstance(y, float):
        assert x == pytest.approx(y, rel=1e-6, abs=1e-3), (x, y)
        return True
    assert x == y, (x, y)
    return True


def test_percentiles_match_a_hand_computed_list(db):
    # 10, 20, ..., 100 in random order. Linear interpolation, pos = (n-1) q / 100:
    # P50: pos 4.5 -> 50 + .5*10 = 55; P90: 8.1 -> 91; P95: 8.55 -> 95.5; P99: 8.91 -> 99.1
    vals = [10 * k for k in range(1, 11)]
    random.Random(3).shuffle(vals)
    for v in vals:
        add(db, ttft_ms=float(v), ttfb_ms=v / 10, gap_ms=v - v / 10)
    res = both(db)
    assert res["indexed"] is True
    t = res["groups"][0]["ttft_ms"]
    assert t == {"n": 10, "p50": 55.0, "p90": 91.0, "p95": 95.5, "p99": 99.1}
    assert res["groups"][0]["ttfb_ms"]["p50"] == 5.5
    assert percentile_of(vals, 95) == 95.5


def test_percentiles_of_five_and_one_value(db):
    # 15, 20, 35, 40, 50: P50 = 35; P90: pos 3.6 -> 40 + .6*10 = 46; P95: 3.8 -> 48; P99: 3.96 -> 49.6
    for v in (50, 15, 40, 20, 35):
        add(db, model="five", ttft_ms=float(v))
    add(db, model="one", ttft_ms=7.0)
    res = both(db)
    g = {e["group"]: e for e in res["groups"]}
    assert g["five"]["ttft_ms"] == {"n": 5, "p50": 35.0, "p90": 46.0, "p95": 48.0, "p99": 49.6}
    assert g["one"]["ttft_ms"] == {"n": 1, "p50": 7.0, "p90": 7.0, "p95": 7.0, "p99": 7.0}
    assert g["one"]["tpot_ms"] == {"n": 0, "p50": None, "p90": None, "p95": None, "p99": None}


def test_cold_connections_count_by_default_and_their_connect_time_is_its_own_metric(db):
    for v in (100, 110, 120):
        add(db, ttft_ms=float(v), ttfb_ms=50.0)
    add(db, ttft_ms=900.0, ttfb_ms=800.0, conn_reused=0, connect_ms=300.0)  # cold
    add(db, ttft_ms=130.0, ttfb_ms=50.0, conn_reused=0)  # new connection but no connect time: not cold
    add(db, ttft_ms=140.0, ttfb_ms=50.0, conn_reused=None, connect_ms=5.0)  # unknown reuse: not cold
    g = both(db)["groups"][0]
    assert g["count"] == 6 and g["cold"] == 1 and g["cold_excluded"] == 0
    assert g["ttft_ms"]["n"] == 6 and g["ttft_ms"]["p99"] > 800
    assert g["connect_ms"]["n"] == 2 and g["connect_ms"]["p50"] == pytest.approx(152.5)
    g = both(db, include_cold=False)["groups"][0]
    assert g["ttft_ms"]["n"] == 5 and g["ttft_ms"]["p99"] < 200 and g["cold_excluded"] == 1


def test_errors_by_code(db):
    for _ in range(6):
        add(db, ttft_ms=100.0)
    add(db, status=429, top_code="rate.limited", top_severity="error")
    add(db, status=429, top_code="rate.limited", top_severity="error")
    add(db, status=None, error="connection refused")
    add(db, status=200, ttft_ms=100.0, error="client disconnected", top_code="client.aborted")
    add(db, status=None, state="in_flight")  # still running: not an error yet
    g = both(db)["groups"][0]
    assert g["count"] == 11 and g["in_flight"] == 1 and g["errors"] == 4
    assert g["error_rate"] == 0.4
    assert g["error_codes"][0] == {"code": "rate.limited", "count": 2, "rate": 0.2}
    assert {c["code"] for c in g["error_codes"]} == {"rate.limited", "no_response", "client.aborted"}


def test_fit_recovers_a_line_and_warns(db):
    for x in range(200, 4200, 400):
        add(db, model="lin", usage_prompt_tokens=x, prompt_tokens_est=x + 9, ttft_ms=100 + 0.3 * x)
    for x in (1000, 2000, 3000):
        add(db, model="few", prompt_tokens_est=x, ttft_ms=50 + 0.1 * x)
    for _ in range(6):
        add(db, model="flat", prompt_tokens_est=500, ttft_ms=123.0)
    g = {e["group"]: e for e in both(db)["groups"]}
    assert g["lin"]["ttft_slope_ms_per_1k"] == pytest.approx(300) and g["lin"]["ttft_intercept_ms"] == pytest.approx(100)
    assert g["lin"]["ttft_fit_r2"] == pytest.approx(1.0) and g["lin"]["ttft_fit_n"] == 10
    assert g["lin"]["ttft_fit_warning"] is None
    assert g["few"]["ttft_slope_ms_per_1k"] is None and "only 3 requests" in g["few"]["ttft_fit_warning"]
    assert g["flat"]["ttft_slope_ms_per_1k"] is None and "same size" in g["flat"]["ttft_fit_warning"]


def test_a_fit_that_explains_nothing_is_not_shown(db, tmp_path):
    """Issue 24: `stats` printed "225 ms + -1 ms per 1k tokens (R² 0.00, n=5)" and "110 ms + -154 ms
    per 1k tokens", and the report drew the R² 0.00 line. No line then: say why, point to sweep."""
    from firsttoken.cli.report.command import report

    for x, y in ((500, 220.0), (1500, 240.0), (2500, 215.0), (3500, 229.0), (4500, 214.0), (5500, 236.0)):
        add(db, model="noise", usage_prompt_tokens=x, ttft_ms=y)  # R² 0.01: TTFT does not follow the prompt
    for x in range(500, 5000, 500):
        add(db, model="falls", usage_prompt_tokens=x, ttft_ms=900.0 - 0.15 * x)  # the line falls
    for x in range(500, 5000, 500):
        add(db, model="grows", usage_prompt_tokens=x, ttft_ms=100.0 + 0.2 * x + (7 if x % 1000 else -7))
    g = {e["group"]: e for e in both(db)["groups"]}
    assert g["noise"]["ttft_fit_r2"] < sq.MIN_FIT_R2 and g["falls"]["ttft_fit_rejected"]["slope_ms_per_1k"] < 0
    for name, why in (("noise", "explains only"), ("falls", "does not grow")):
        assert g[name]["ttft_slope_ms_per_1k"] is None and g[name]["ttft_intercept_ms"] is None
        assert why in g[name]["ttft_fit_warning"] and "firsttoken sweep" in g[name]["ttft_fit_warning"]
    assert g["grows"]["ttft_slope_ms_per_1k"] == pytest.approx(200, abs=5)
    path = db.execute("PRAGMA database_list").fetchone()[2]
    out = CliRunner(env={"COLUMNS": "200"}).invoke(stats, ["--db", path]).output
    lines = re.findall(r"\d ms \+ -?[\d,]+ ms per 1k tokens", out)
    assert len(lines) == 1 and "+ -" not in out  # only the line that explains TTFT
    assert out.count("firsttoken sweep") >= 2
    html = tmp_path / "r.html"
    assert CliRunner().invoke(report, ["--db", path, "--html", str(html)]).exit_code == 0
    page = html.read_text()
    assert "+ -" not in page and "does not grow" in page and "explains only" in page
    scatter = page[page.index('aria-label="TTFT versus prompt tokens'):]
    scatter = scatter[:scatter.index("</svg>")]
    assert scatter.count('stroke-width="2.5"') == 1  # one fitted line: the model whose TTFT grows


def test_the_fit_leaves_out_what_is_not_prefill_and_says_how_many_and_why(db, tmp_path):
    """Issue 31: a buffered stream (its TTFT is a hop's delay), the proxy's own delay, a slow network
    or connection, held headers that no route fit splits: none is prefill. The fit leaves them out,
    on both query paths, and says how many and why (--json, the text view)."""
    for x in range(200, 4200, 400):
        add(db, model="m", usage_prompt_tokens=x, ttft_ms=100 + 0.03 * x)
    add(db, model="m", usage_prompt_tokens=15, ttft_ms=574.0, ttft_outlier="stream.buffered")
    add(db, model="m", usage_prompt_tokens=20, ttft_ms=900.0, ttft_outlier="stream.buffered")
    add(db, model="m", usage_prompt_tokens=300, ttft_ms=700.0, ttft_outlier="proxy.saturated")
    g = {e["group"]: e for e in both(db)["groups"]}["m"]
    assert g["ttft_slope_ms_per_1k"] == pytest.approx(30) and g["ttft_fit_r2"] == pytest.approx(1.0)
    assert g["ttft_fit_n"] == 10 and g["ttft_fit_excluded_n"] == 3 and g["ttft_ms"]["n"] == 13  # percentiles keep them
    assert [(e["code"], e["n"]) for e in g["ttft_fit_excluded"]] == [("stream.buffered", 2), ("proxy.saturated", 1)]
    assert "buffered" in g["ttft_fit_excluded"][0]["why"]
    path = db.execute("PRAGMA database_list").fetchone()[2]
    out = CliRunner(env={"COLUMNS": "200"}).invoke(stats, ["--db", path]).output
    assert "30 ms per 1k tokens" in out and "left out of the fit, not prefill: 2 buffered" in out
    assert json.loads(CliRunner().invoke(stats, ["--db", path, "--json"]).output)["groups"][0]["ttft_fit_excluded_n"] == 3


def test_which_findings_say_ttft_is_not_prefill():
    from firsttoken.addon.diagnose import NOT_PREFILL, ttft_outlier
    from firsttoken.addon.store.migrations import M026_NOT_PREFILL

    assert set(NOT_PREFILL) == set(M026_NOT_PREFILL)  # a new code needs a migration that refills older rows
    assert ttft_outlier([{"code": "usage.missing"}, {"code": "stream.buffered"}, {"code": "proxy.saturated"}]) == "stream.buffered"
    held = {"code": "latency.headers_held", "params": {"variant": "nofit"}}
    assert ttft_outlier([held]) == "latency.headers_held"
    assert ttft_outlier([{**held, "params": {"variant": "fit"}}]) is None  # the route's fit splits it: TTFT is prefill
    assert ttft_outlier([{"code": "stream.stall"}, {"code": "latency.reasoning"}]) is None and ttft_outlier(None) is None


def test_m026_fills_in_the_outliers_of_older_rows(tmp_path, monkeypatch):
    import sqlite_utils

    from firsttoken.addon.store import migrations as M

    path = tmp_path / "old.db"
    older = [fn for fn in M.MIGRATIONS if fn.__name__ != "m026_ttft_outlier"]
    monkeypatch.setattr(M, "MIGRATIONS", older)
    db = sqlite_utils.Database(path)
    M.migrate(db)
    for i, (code, params) in enumerate((("stream.buffered", None), ("latency.headers_held", '{"variant": "fit"}'),
                                        ("latency.headers_held", '{"variant": "nofit"}'), ("usage.missing", None))):
        db["requests"].insert({"id": f"o{i}", "state": "done", "model": "m", "stream": 1, "ttft_ms": 100.0})
        db["findings"].insert({"request_id": f"o{i}", "code": "usage.missing", "severity": "info", "position": 0})
        if code != "usage.missing":
            db["findings"].insert({"request_id": f"o{i}", "code": code, "severity": "warn", "position": 1, "params": params})
    monkeypatch.undo()
    assert "m026_ttft_outlier" in M.migrate(db)
    got = dict(db.execute("SELECT id, ttft_outlier FROM requests ORDER BY id").fetchall())
    assert got == {"o0": "stream.buffered", "o1": None, "o2": "latency.headers_held", "o3": None}


def test_buckets_and_hours(db):
    for x, t in ((150, 100.0), (250, 110.0), (700, 150.0), (1500, 200.0), (9000, 900.0), (None, 50.0)):
        add(db, prompt_tokens_est=x, ttft_ms=t)
    res = both(db, by="bucket")
    assert [g["group"] for g in res["groups"]] == ["0-199", "200-499", "500-999", "1000-1999", "8000-15999", "unknown"]
    assert both(db, by="hour")["groups"][0]["group"] == "2026-11-29T10"


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    path = tmp_path_factory.mktemp("bench") / "bench.db"
    generate(path, 4000, days=2, seed=5)
    return open_db(path, write=False)


@pytest.mark.parametrize("kw", [{}, {"include_cold": False}, {"filters": {"model": "gpt-4.1"}}])
def test_indexed_and_general_paths_agree_on_synthetic_traffic(bench, kw):
    res = both(bench, **kw)
    assert res["indexed"] is True and len(res["groups"]) == (1 if "filters" in kw else 5)
    g = res["groups"][0]
    assert g["count"] > 100 and g["errors"] > 0 and g["cold"] > 0
    # against plain Python on the same rows
    warm = "" if kw.get("include_cold", True) else f" AND {sq.WARM}"
    vals = [r[0] for r in bench.execute(f"SELECT gap_ms FROM requests WHERE model = ? AND gap_ms IS NOT NULL"
                                        f" AND {STREAMED}{warm}", [g["group"]])]
    whole = [r[0] for r in bench.execute(f"SELECT total_ms FROM requests WHERE model = ? AND total_ms IS NOT NULL"
                                         f" AND NOT {STREAMED}{warm}", [g["group"]])]
    assert whole and g["whole_ms"]["n"] == len(whole)  # the non-streamed ones: their own figure
    for q in (50, 90, 95, 99):
        assert g["gap_ms"][f"p{q}"] == pytest.approx(percentile_of(vals, q), abs=1e-3)
        assert g["whole_ms"][f"p{q}"] == pytest.approx(percentile_of(whole, q), abs=1e-3)


def test_a_model_filter_that_matches_no_model_gives_no_groups(bench):
    """--model is matched against the model names first; none matching leaves the indexes nothing
    to search (an empty ``IN ()``): the rows are read as for any other filter, and there are none."""
    for model in ("no-such-model", "zz*"):
        res = both(bench, filters={"model": model})
        assert res["groups"] == [] and res["indexed"] is False


def test_the_default_view_reads_requests_through_covering_indexes_but_for_the_error_rule(bench):
    """Grouped by model, no query `stats` runs reads all of ``requests``' rows but from a covering
    index (counts, walks, fits), except one: the error rule, read off every row (no index holds it)."""
    seen: list[str] = []
    bench.conn.set_trace_callback(seen.append)
    try:
        for kw in ({}, {"include_cold": False}, {"filters": Filters(model="gpt-4")}):
            assert sq.compute(bench, kw.get("filters"), include_cold=kw.get("include_cold", True))["indexed"] is True
    finally:
        bench.conn.set_trace_callback(None)
    reads = sorted({s for s in seen if s.lstrip().upper().startswith("SELECT") and " FROM requests" in s})
    scans = []
    for sql in reads:
        plan = [r[3] for r in bench.execute("EXPLAIN QUERY PLAN " + sql)]
        full = [step for step in plan if step.startswith("SCAN requests") and "COVERING INDEX" not in step]
        assert not full or (full == ["SCAN requests"] and "NOT INDEXED" in sql), (sql, plan)
        scans += [sql for _ in full]
    assert len(reads) > 40 and len(scans) == 2 and all(sq.ERROR in sql for sql in scans)  # all models, one model
    walks = [sql for sql in reads if "OFFSET" in sql]
    assert walks and all("TEMP B-TREE" not in " ".join(r[3] for r in bench.execute("EXPLAIN QUERY PLAN " + sql))
                         for sql in walks)


def test_stats_count_what_the_capture_core_wrote(tmp_path):
    """After the writer's inserts and updates, and a delete and an update by hand, `stats` counts
    what the table holds: requests, in flight, cold, errors (the store's rule) per model."""
    from firsttoken.addon.store.queries import is_error, recent
    from firsttoken.addon.store.writer import Writer

    path = tmp_path / "w.db"
    w = Writer(str(path))
    rnd = random.Random(1)
    for i in range(300):  # as the capture core does: an in-flight row, a phase, then the final row
        rid = f"w{i}"
        w.put({"id": rid, "started_at": f"2026-11-29T11:{i // 60:02d}:{i % 60:02d}.000+00:00", "state": "in_flight",
               "phase": "connecting", "api": "openai.chat"})
        w.put({"id": rid, "model": rnd.choice(["a", "b", None]), "prompt_tokens_est": rnd.randint(10, 5000)})
        w.put({"id": rid, "phase": "streaming"})
        if i % 7:
            cold = rnd.random() < 0.2
            ttfb = rnd.uniform(10, 100)
            w.put({"id": rid, "state": "done", "phase": "done", "status": rnd.choice([200, 200, 200, 429]),
                   "conn_reused": not cold, "connect_ms": 5.0 if cold else None, "ttfb_ms": ttfb, "stream": True,
                   "ttft_ms": ttfb + rnd.uniform(5, 500), "gap_ms": rnd.uniform(5, 500), "usage_prompt_tokens": rnd.randint(10, 5000),
                   "findings": []})
    w.flush()
    w.close()
    db = open_db(path)
    db.execute("DELETE FROM requests WHERE id IN ('w3', 'w10', 'w11')")
    db.execute("UPDATE requests SET model = 'c' WHERE id = 'w12'")
    db.conn.commit()
    rows = recent(db, limit=None)
    for include_cold in (True, False):
        got = {g["group"]: g for g in both(db, include_cold=include_cold)["groups"]}
        assert set(got) == {"a", "b", "c", None}
        for model, g in got.items():
            mine = [r for r in rows if r["model"] == model]
            assert g["count"] == len(mine) and g["in_flight"] == sum(r["state"] == "in_flight" for r in mine)
            assert g["cold"] == sum(r["conn_reused"] is False and r["connect_ms"] is not None for r in mine)
            assert g["errors"] == sum(map(is_error, mine)) and (model == "c" or g["errors"] > 0)


def test_stats_command(bench):
    path = bench.execute("PRAGMA database_list").fetchone()[2]
    r = CliRunner(env={"COLUMNS": "160"}).invoke(stats, ["--db", path, "--plot"])
    assert r.exit_code == 0, r.output
    assert "gpt-4o-mini" in r.output and "P95" in r.output and "ms per 1k tokens" in r.output and "█" in r.output
    # issue 24: no bar stacks P95 TTFB and "the rest" into a P95 TTFT; each percentile is its own figure
    assert "TTFT = TTFB" not in r.output and "percentiles do not add up" in r.output
    g = next(x for x in sq.compute(bench, Filters())["groups"] if x["group"] == "gpt-4o-mini")
    for label, key in (("TTFB", "ttfb_ms"), ("gap", "gap_ms"), ("TTFT", "ttft_ms")):
        want = f"{label} .* {re.escape(ms(g[key]['p50']))} · {re.escape(ms(g[key]['p95']))}"
        assert re.search(want, r.output), want
    r = CliRunner().invoke(stats, ["--db", path, "--json", "--by", "route", "--since", "3d"])
    res = json.loads(r.output)
    assert res["by"] == "route" and {g["group"] for g in res["groups"]} == {"openai", "anthropic"}
    for key in ("ttft_slope_ms_per_1k", "ttft_intercept_ms", "ttft_fit_r2", "ttft_fit_n", "itl_ms", "tpot_ms", "error_codes"):
        assert key in res["groups"][0]
    r = CliRunner().invoke(stats, ["--db", path, "--status", "nonsense"])
    assert r.exit_code == 2 and "--status" in r.output


def test_export_csv_and_json(bench):
    path = bench.execute("PRAGMA database_list").fetchone()[2]
    r = CliRunner().invoke(export, ["--db", path, "--csv", "--model", "gpt-4.1", "--limit", "50"])
    assert r.exit_code == 0, r.output
    rows = list(csv.DictReader(io.StringIO(r.output)))
    assert len(rows) == 50 and {x["model"] for x in rows} == {"gpt-4.1"} and "request_body" not in rows[0]
    assert rows == sorted(rows, key=lambda x: x["started_at"])
    r = CliRunner().invoke(export, ["--db", path, "--json", "--code", "rate.limited", "--columns", "id,status,findings"])
    lines = [json.loads(x) for x in r.output.splitlines()]
    assert lines and all(set(x) == {"id", "status", "findings"} and x["status"] == 429 for x in lines)
    assert isinstance(lines[0]["findings"], list)
    assert CliRunner().invoke(export, ["--db", path, "--csv", "--json"]).exit_code == 2  # both: refused
    r = CliRunner().invoke(export, ["--db", path, "--limit", "5"])  # neither: CSV, and it says so
    assert r.exit_code == 0 and "writing CSV" in r.stderr and len(list(csv.DictReader(io.StringIO(r.stdout)))) == 5


def test_bench_db_command(tmp_path):
    r = CliRunner().invoke(bench_db, ["--rows", "3000", "--repeat", "1", "--json", "--db", str(tmp_path / "b.db")])
    assert r.exit_code == 0, r.output
    info = json.loads(r.output)
    assert info["rows"] == 3000 and info["generate"]["rows"] == 3000
    assert {q["query"].split(" ")[0] for q in info["queries"]} == {"stats", "logs"}
    db = open_db(tmp_path / "b.db", write=False)
    names = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
    assert {"idx_requests_stats_ttft_ms", "idx_requests_started_at", "idx_findings_code"} <= names  # rebuilt after the load


def test_the_population_rule_is_the_one_m021_froze(db):
    """queries.STREAMED is written verbatim into m021's partial indexes: a change of the rule needs
    a new migration. Its Python twin (live view, demo, diagnosis) agrees with it."""
    from firsttoken.addon.store import queries
    from firsttoken.addon.store.migrations import M021_NOT_STREAMED_BARE, M021_STREAMED, M021_STREAMED_BARE

    assert queries.streamed_sql("r") == M021_STREAMED.format(r="r")
    assert queries.STREAMED == M021_STREAMED_BARE and queries.NOT_STREAMED == M021_NOT_STREAMED_BARE
    for value in (1, 0, None):
        add(db, stream=value, ttfb_ms=10.0)
    rows = db.execute(f"SELECT stream, {queries.STREAMED}, {queries.NOT_STREAMED} FROM requests").fetchall()
    for stream, yes, no in rows:
        assert bool(yes) == queries.is_streamed({"stream": stream}) == (not no)
    assert queries.is_streamed({"stream": True}) and not queries.is_streamed({"stream": False})
