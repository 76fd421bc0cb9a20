"""`firsttoken browse`: the database in a real Datasette (started by the command, --port 0),
checked through Datasette's JSON API and as headless Chromium renders it; and the readable
`findings` table (migration m018) it links requests and findings through.

Datasette is the optional extra `firsttoken[browse]`: the tests that need it skip when it is
missing, unless CI is set (then they fail: the test extra installs it)."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from conftest import percentile_of

from firsttoken.addon.diagnose import render
from firsttoken.addon.record import Record
from firsttoken.addon.store import migrations
from firsttoken.addon.store.db import open_db
from firsttoken.addon.store.queries import is_error
from firsttoken.addon.store.stats_queries import percentile_sql
from firsttoken.addon.store.writer import Writer
from firsttoken.cli.browse import READ_FIRST
from firsttoken.cli.browse.metadata import canned_queries

FT = str(Path(sys.executable).parent / "firsttoken")
MODELS = ("gpt-4o-mini", "claude-sonnet-4-5", "qwen-max")
ROUTES = ("openai", "anthropic")


def finding(code: str, severity: str, **params) -> dict:
    message, hint = render(code, params, "en")
    return {"code": code, "severity": severity, "message": message, "hint": hint, "params": params}


def make_records(n: int = 60) -> list[Record]:
    out = []
    for i in range(n):
        model, route = MODELS[i % 3], ROUTES[i % 2]
        # started_at out of id order: the default sort must be by time, not by the UUID-like id
        rec = Record(id=f"{(i * 7919) % 1000:04d}-req", started_at=f"2026-11-{1 + i // 24:02d}T{i % 24:02d}:00:00+00:00")
        rec.state, rec.phase, rec.model, rec.route, rec.api = "done", "done", model, route, "openai.chat"
        rec.status = 401 if i % 10 == 3 else 200
        rec.stream, rec.conn_reused = True, i % 4 != 0
        rec.ttfb_ms = 50.0 + (i * 37) % 400
        rec.ttft_ms = rec.ttfb_ms + 100.0 + (i * 53) % 900
        rec.total_ms = rec.ttft_ms + 500.0
        rec.conversation_id = f"conv-{i % 5}"
        rec.turn = i // 5 + 1
        rec.prompt_tokens_est = 100 + i
        if rec.status == 401:
            rec.findings = [finding("auth.rejected", "error", status=401), finding("latency.prefill", "warn")]
        elif i % 7 == 0:
            rec.findings = [finding("latency.prefill", "warn"), finding("prompt.large", "info", tokens=rec.prompt_tokens_est)]
        if rec.findings:
            rec.top_code, rec.top_severity = rec.findings[0]["code"], rec.findings[0]["severity"]
        out.append(rec)
    return out


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> tuple[Path, list[Record]]:
    """A database written by the proxy's one writer thread."""
    path = tmp_path_factory.mktemp("browse") / "firsttoken.db"
    recs = make_records()
    w = Writer(str(path))
    for r in recs:
        w.put(r.row())
    w.flush()
    w.close()
    return path, recs


# -- the findings table (m018) -------------------------------------------------------------------------
def test_the_writer_fills_readable_findings_with_a_foreign_key(recorded):
    path, recs = recorded
    conn = sqlite3.connect(path)
    fks = conn.execute("PRAGMA foreign_key_list(findings)").fetchall()
    assert [(f[2], f[3], f[4]) for f in fks] == [("requests", "request_id", "id")]
    rows = conn.execute("SELECT request_id, code, severity, position, message, hint, params FROM findings "
                        "ORDER BY request_id, position").fetchall()
    want = [(r.id, f["code"], f["severity"], i, f["message"], f["hint"], f["params"])
            for r in sorted(recs, key=lambda r: r.id) for i, f in enumerate(r.findings)]
    assert [(a, b, c, d, e, f_, json.loads(g)) for a, b, c, d, e, f_, g in rows] == want
    assert all(m and h for *_, m, h, _ in rows)  # the texts a person reads, as recorded
    assert conn.execute("PRAGMA foreign_key_check(findings)").fetchall() == []


def test_m018_fills_the_findings_of_an_older_database_from_the_json(tmp_path):
    path = tmp_path / "old.db"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE _migrations (name TEXT PRIMARY KEY, applied_at TEXT)")
    import sqlite_utils

    old = sqlite_utils.Database(db)
    before = migrations.MIGRATIONS[:migrations.MIGRATIONS.index(migrations.m018_readable_findings)]
    for fn in before:
        with db:
            fn(old)
            db.execute("INSERT INTO _migrations VALUES (?, '')", [fn.__name__])
    fs = [finding("auth.rejected", "error", status=401), finding("prompt.large", "info", tokens=9000)]
    with db:
        db.execute("INSERT INTO requests (id, started_at, state, findings) VALUES ('a', '2026-01-01', 'done', ?)",
                   [json.dumps(fs)])
        db.execute("INSERT INTO requests (id, started_at, state, findings) VALUES ('b', '2026-01-02', 'done', 'not json')")
        db.execute("INSERT INTO requests (id, started_at, state, findings) VALUES ('c', '2026-01-03', 'done', '[1, {}]')")
        db.executemany("INSERT INTO findings VALUES (?, ?, ?)",
                       [("a", "auth.rejected", "error"), ("a", "prompt.large", "info"), ("b", "x.only_here", "warn")])
    db.close()
    new = open_db(path)  # migrates
    rows = new.execute("SELECT request_id, code, severity, position, message, hint, params FROM findings "
                       "ORDER BY request_id, code").fetchall()
    assert rows == [("a", "auth.rejected", "error", 0, fs[0]["message"], fs[0]["hint"], '{"status":401}'),
                    ("a", "prompt.large", "info", 1, fs[1]["message"], fs[1]["hint"], '{"tokens":9000}'),
                    ("b", "x.only_here", "warn", None, None, None, None)]  # kept (no JSON to read it from)
    assert new.execute("PRAGMA foreign_key_list(findings)").fetchall()[0][2] == "requests"
    assert {r[1] for r in new.execute("PRAGMA index_list(findings)")} >= {"idx_findings_code"}


def test_the_percentile_sql_agrees_with_the_stats_definition(recorded):
    path, recs = recorded
    conn = sqlite3.connect(path)
    got = {(m, r): (n, p50, p95) for m, r, n, p50, p95 in
           conn.execute(percentile_sql("ttft_ms", ("model", "route"), (50, 95)))}
    for (m, r), (n, p50, p95) in got.items():
        vals = [x.ttft_ms for x in recs if x.model == m and x.route == r]
        assert n == len(vals)
        assert p50 == pytest.approx(percentile_of(vals, 50), abs=0.01)
        assert p95 == pytest.approx(percentile_of(vals, 95), abs=0.01)
    assert len(got) == 6


def test_the_canned_queries_run_and_errors_follow_the_one_rule(recorded):
    path, recs = recorded
    conn = sqlite3.connect(path)
    q = canned_queries()
    for spec in q.values():
        params = {"code": "latency.prefill", "conversation_id": "conv-1"}
        conn.execute(spec["sql"], {k: v for k, v in params.items() if f":{k}" in spec["sql"]}).fetchall()
    by_code = conn.execute(q["errors_by_code"]["sql"]).fetchall()
    assert sum(r[2] for r in by_code) == sum(is_error(r) for r in recs) > 0


def test_the_canned_latency_queries_are_over_streamed_requests_as_stats_is(tmp_path):
    """A non-streamed answer's headers come after the whole answer: its TTFB is no network time."""
    path = tmp_path / "mixed.db"
    recs = make_records(30)
    for i, r in enumerate(recs[:6]):
        r.stream, r.ttfb_ms = False, 5000.0 + i
        r.ttft_ms = r.total_ms = r.ttfb_ms + 1.0
    w = Writer(str(path))
    for r in recs:
        w.put(r.row())
    w.flush()
    w.close()
    conn = sqlite3.connect(path)
    q = canned_queries()
    slowest = [row[0] for row in conn.execute(q["slowest_ttft"]["sql"])]
    assert slowest and not {r.id for r in recs[:6]} & set(slowest)
    got = {(m, r): (n, p95) for m, r, n, _, p95, *_ in conn.execute(q["percentiles_by_model_route"]["sql"])}
    for (m, r), (n, p95) in got.items():
        vals = [x.ttfb_ms for x in recs if x.model == m and x.route == r and x.stream]
        assert n == len(vals) and p95 == pytest.approx(percentile_of(vals, 95), abs=0.01)
        assert p95 < 5000


# -- browse in a real Datasette ------------------------------------------------------------------------
def need_datasette() -> None:
    try:
        import datasette  # noqa: F401
    except ImportError:
        msg = "Datasette is not installed: pip install 'firsttoken[browse]'"
        if os.environ.get("CI"):
            pytest.fail(msg + " -- CI is set, so this check must run (the test extra installs it)")
        pytest.skip(msg)


@pytest.fixture(scope="module")
def browse(recorded):
    """`firsttoken browse --port 0` as a user runs it; yields (base URL, db name, records)."""
    need_datasette()
    path, recs = recorded
    p = subprocess.Popen([FT, "browse", "--db", str(path), "--port", "0"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        line = p.stdout.readline()
        m = re.search(r"(http://127\.0\.0\.1:\d+)(/\S+)", line)
        assert m, f"no URL in {line!r}: {p.stderr.read() if p.poll() is not None else ''}"
        base = m.group(1)
        deadline = time.time() + 60
        while True:
            try:
                urllib.request.urlopen(base + "/-/versions.json", timeout=5).read()
                break
            except OSError:
                assert p.poll() is None and time.time() < deadline, p.stderr.read() if p.poll() is not None else "slow"
                time.sleep(0.2)
        yield base, path.stem, recs, m.group(2)
    finally:
        p.terminate()
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=30) as r:
        return json.loads(r.read())


def test_browse_listens_on_loopback_and_names_the_read_first_view(browse):
    base, name, _, path = browse
    assert path.startswith(f"/{name}/requests?") and "_sort_desc=started_at" in path
    assert all(f"_col={c}" in path for c in READ_FIRST)


def test_requests_newest_first_with_facets(browse):
    base, name, recs, _ = browse
    data = get(f"{base}/{name}/requests.json?_shape=objects&_size=100")
    got = [r["started_at"] for r in data["rows"]]
    assert got == sorted((r.started_at for r in recs), reverse=True)
    facets = data["facet_results"]
    assert set(facets) == {"model", "route", "api", "status", "top_code", "top_severity"}
    assert {v["value"]: v["count"] for v in facets["model"]["results"]} == {m: 20 for m in MODELS}
    assert {v["value"]: v["count"] for v in facets["status"]["results"]} == {200: 54, 401: 6}
    fdata = get(f"{base}/{name}/findings.json?_shape=objects")
    assert set(fdata["facet_results"]) == {"code", "severity"}


def test_a_canned_query_and_the_links_between_findings_and_requests(browse):
    base, name, recs, _ = browse
    data = get(f"{base}/{name}/requests_with_finding.json?_shape=objects&code=prompt.large")
    want = sorted((r for r in recs if any(f["code"] == "prompt.large" for f in r.findings)),
                  key=lambda r: r.started_at, reverse=True)
    assert [r["id"] for r in data["rows"]] == [r.id for r in want] and want
    # a finding -> its request (the foreign key Datasette follows)
    fdata = get(f"{base}/{name}/findings.json?_shape=objects&_labels=on&code=auth.rejected")
    assert fdata["rows"] and all(isinstance(r["request_id"], dict) for r in fdata["rows"])
    # a request -> its findings
    rid = want[0].id
    row = get(f"{base}/{name}/requests/{rid}.json?_extras=foreign_key_tables")
    links = {(t["other_table"], t["other_column"]): t["count"] for t in row.get("foreign_key_tables", [])}
    assert links == {("findings", "request_id"): len(want[0].findings)}


def test_browse_is_read_only(browse, recorded):
    base, name, _, _ = browse
    before = sqlite3.connect(recorded[0]).execute("SELECT count(*) FROM requests").fetchone()[0]
    try:
        res = get(f"{base}/{name}.json?sql=" + urllib.request.quote("DELETE FROM requests"))
        assert res.get("ok") is False
    except urllib.error.HTTPError as e:
        assert e.code >= 400
    assert sqlite3.connect(recorded[0]).execute("SELECT count(*) FROM requests").fetchone()[0] == before


def test_a_missing_datasette_names_the_install_command(tmp_path):
    """Without the extra: the message says what to run (a Python that cannot import datasette)."""
    code = ("import sys; sys.modules['datasette'] = None; sys.argv = ['firsttoken', 'browse', '--db', %r]; "
            "from firsttoken.cli.main import cli; cli()" % str(tmp_path / "x.db"))
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    said = " ".join((res.stdout + res.stderr).split())
    assert res.returncode == 1 and "pip install 'firsttoken[browse]'" in said and "Traceback" not in said


# -- as a person sees it: headless Chromium ---------------------------------------------------------------
def dom(url: str, tmp_path: Path) -> str:
    from test_report_browser import chromium

    exe = chromium()
    cmd = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1400,2000", "--virtual-time-budget=5000",
           "--dump-dom", url]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert "<table" in proc.stdout, f"Chromium rendered no table (exit {proc.returncode}): {proc.stderr[-2000:]}"
    return proc.stdout


@pytest.mark.slow  # headless Chromium
def test_in_a_browser_newest_first_read_first_columns_facets_and_links(browse, tmp_path):
    base, name, recs, _ = browse
    page = dom(f"{base}/{name}/requests", tmp_path)  # the bare table URL, as the database page links it
    heads = re.findall(r'<th [^>]*data-column="([^"]+)"', page)
    assert heads == ["id", *READ_FIRST] or heads == ["Link", "id", *READ_FIRST], heads
    shown = re.findall(r'<td class="col-started_at[^"]*"[^>]*>([^<]+)</td>', page)
    assert shown and shown == sorted(shown, reverse=True)
    assert shown[0] == max(r.started_at for r in recs)
    facets = re.findall(r'<div class="facet-info [^"]*" id="facet-([a-z_]+)[^"]*" data-column="([a-z_]+)"', page)
    assert sorted(c for _, c in facets) == sorted(("model", "route", "api", "status", "top_code", "top_severity"))
    assert re.search(r'href="[^"]*model=qwen-max[^"]*">qwen-max</a>\s*20', page)  # a facet value with its count
    # a request's top finding links to its findings; booleans read yes/no (not 0/1) on a row page
    assert re.search(rf'href="/{name}/findings\?request_id=[^"]+">auth\.rejected</a>', page)
    err = next(r for r in recs if r.status == 401)
    row_page = dom(f"{base}/{name}/requests/{err.id}", tmp_path)
    assert re.search(rf'href="/{name}/findings\?request_id={re.escape(err.id)}"', row_page)  # "Links from other tables"
    assert re.search(r'class="col-conn_reused[^"]*"[^>]*>(yes|no)</td>', row_page)
    f_page = dom(f"{base}/{name}/findings?request_id={err.id}", tmp_path)
    assert f'href="/{name}/requests/{err.id}"' in f_page  # each finding links to its request
    assert err.findings[0]["message"] in f_page.replace("&#39;", "'").replace("&amp;", "&").replace("&quot;", '"')
    q_page = dom(f"{base}/{name}/slowest_ttft", tmp_path)
    slowest = max(recs, key=lambda r: r.ttft_ms)
    assert f'href="/{name}/requests/{slowest.id}"' in q_page


def test_a_request_recorded_while_browsing_shows_on_the_next_read(browse, recorded):
    """The database is live (a proxy keeps writing, WAL): Datasette reads it read-only, not immutable."""
    base, name, recs, _ = browse
    rec = Record(id="zzzz-live", started_at="2026-12-31T23:59:00+00:00")
    rec.state, rec.phase, rec.model, rec.route, rec.status = "done", "done", "gpt-4o-mini", "openai", 200
    rec.findings = [finding("usage.missing", "info")]
    w = Writer(str(recorded[0]))  # the proxy's one writer, as while a proxy runs
    try:
        w.put(rec.row())
        w.flush()
        data = get(f"{base}/{name}/requests.json?_shape=objects&_size=1")
        assert data["rows"][0]["id"] == rec.id  # newest first
        f = get(f"{base}/{name}/findings.json?_shape=objects&request_id={rec.id}")
        assert [r["code"] for r in f["rows"]] == ["usage.missing"]
    finally:
        with w.db.conn:
            w.db.conn.execute("DELETE FROM findings WHERE request_id = ?", [rec.id])
            w.db.conn.execute("DELETE FROM requests WHERE id = ?", [rec.id])
        w.close()


def test_a_request_naming_another_host_is_refused(browse):
    """It listens on 127.0.0.1 only; a Host that is not loopback is a page elsewhere rebinding DNS."""
    base, name, _, _ = browse
    req = urllib.request.Request(f"{base}/{name}/requests.json", headers={"Host": "evil.example:80"})
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(req, timeout=10)
    assert e.value.code == 403 and b"127.0.0.1" in e.value.read()
    req = urllib.request.Request(f"{base}/{name}/requests.json", headers={"Host": "localhost"})
    assert json.loads(urllib.request.urlopen(req, timeout=10).read())["rows"]


def test_a_taken_port_and_a_missing_database_are_clear_errors(recorded, tmp_path):
    import socket

    need_datasette()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        res = subprocess.run([FT, "browse", "--db", str(recorded[0]), "--port", str(port)],
                             capture_output=True, text=True, timeout=60)
    said = " ".join(res.stderr.split())
    assert res.returncode == 1 and f"cannot listen on 127.0.0.1:{port}" in said and "--port" in said, said
    res = subprocess.run([FT, "browse", "--db", str(tmp_path / "none.db")], capture_output=True, text=True, timeout=60)
    said = " ".join(res.stderr.split())
    assert res.returncode == 1 and "no database at" in said and "Traceback" not in said
    assert not (tmp_path / "none.db").exists()  # browsing never creates a database
