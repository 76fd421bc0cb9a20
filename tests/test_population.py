"""One population (issue 24, item 1): a non-streamed answer's headers come after the whole answer,
so every view's TTFB (stats, the live view, report, baseline, the demo's table) counts streamed
requests only, and they all agree; the non-streamed requests get their own figure."""

from __future__ import annotations

import json
import sqlite3

import httpx
import pytest
from click.testing import CliRunner
from rich.console import Console

from firsttoken.addon.record import percentile
from firsttoken.cli import output
from firsttoken.cli.proxy.server import ProxyServer
from firsttoken.cli.simulate import SimConfig, SimServer

pytestmark = pytest.mark.slow  # a real proxy and simulator, fifteen requests

#: a long answer (20 tokens at 15 ms): a non-streamed request waits for all of it before its headers
SLOW_ANSWER = dict(ttfb_ms=30, prefill_base_ms=10, prefill_ms_per_1k_tokens=10, tpot_ms=15, output_tokens=20)
STREAMED, NOT_STREAMED = 12, 3


@pytest.fixture(scope="module")
def mixed_db(tmp_path_factory):
    path = tmp_path_factory.mktemp("mix") / "mix.db"
    with SimServer(SimConfig(**SLOW_ANSWER)) as sim, ProxyServer([sim.url], str(path), port=0) as proxy:
        with httpx.Client(timeout=30) as c:
            for i in range(STREAMED + NOT_STREAMED):
                stream = i % 5 != 4  # interleaved: every fifth asks for the whole answer at once
                body = {"model": "sim-1", "messages": [{"role": "user", "content": f"hello {i}"}], "stream": stream}
                if stream:
                    body["stream_options"] = {"include_usage": True}
                r = c.post(f"{proxy.url}/v1/chat/completions", json=body,
                           headers={"authorization": "Bearer sk-test-000000000000000000000000"})
                assert r.status_code == 200, r.text
        proxy.flush()
    return path


def _rows(path) -> list[dict]:
    conn = sqlite3.connect(path)
    conn.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in conn.execute("SELECT * FROM requests ORDER BY started_at")]
    finally:
        conn.close()


def _p(vals, q):
    return percentile(sorted(vals), q)


def test_every_view_agrees_on_ttfb_p95_of_streamed_requests(mixed_db, tmp_path):
    from firsttoken.addon.store.db import open_db
    from firsttoken.addon.store.queries import Filters
    from firsttoken.cli.baseline import baseline, measure
    from firsttoken.cli.demo import summary
    from firsttoken.cli.live.db import DbSource
    from firsttoken.cli.report.command import report
    from firsttoken.cli.stats import stats

    rows = _rows(mixed_db)
    streamed = [r for r in rows if r["stream"]]
    whole = [r for r in rows if not r["stream"]]
    assert len(streamed) == STREAMED and len(whole) == NOT_STREAMED
    want50 = _p([r["ttfb_ms"] for r in streamed], 50)
    want = _p([r["ttfb_ms"] for r in streamed], 95)
    mixed = _p([r["ttfb_ms"] for r in rows], 95)
    # the mix really differs: counting the non-streamed ones would be another figure
    assert output.ms(mixed) != output.ms(want) and mixed > 2 * want

    # stats (--json: the exact value), and the non-streamed requests' own figure
    res = json.loads(CliRunner().invoke(stats, ["--db", str(mixed_db), "--json"]).output)
    g = res["groups"][0]
    assert g["ttfb_ms"]["p95"] == pytest.approx(want, abs=1e-3) and g["ttfb_ms"]["n"] == STREAMED
    assert g["whole_ms"]["n"] == NOT_STREAMED
    assert g["whole_ms"]["p50"] == pytest.approx(_p([r["total_ms"] for r in whole], 50), abs=1e-3)
    text = CliRunner(env={"COLUMNS": "120"}).invoke(stats, ["--db", str(mixed_db)]).output
    assert "streamed requests" in text and "whole" in text  # it says which population

    # the live view (following the database, as `firsttoken live` does)
    src = DbSource(mixed_db)
    try:
        src._cutoff = 0  # everything recorded counts as new
        src.poll()
        live = src.snapshot().models
    finally:
        src.close()
    assert len(live) == 1 and live[0].ttfb_p95 == pytest.approx(want, abs=1e-3) and live[0].n == len(rows)

    # baseline
    db = open_db(mixed_db, write=False)
    assert measure(db, Filters())["sim-1"]["ttfb_p95"] == pytest.approx(want, abs=1e-3)
    r = CliRunner().invoke(baseline, ["save", "mix", "--db", str(mixed_db)])
    assert r.exit_code == 0, r.output
    saved = json.loads(CliRunner().invoke(baseline, ["list", "--db", str(mixed_db), "--json"]).output)
    assert saved[0]["ttfb_p95"] == pytest.approx(want, abs=1e-3)

    # report: the per-model table's TTFB P50/P95 cell
    html = tmp_path / "r.html"
    r = CliRunner().invoke(report, ["--db", str(mixed_db), "--html", str(html)])
    assert r.exit_code == 0, r.output
    page = html.read_text()
    assert f"<td>{output.ms(want50)} / {output.ms(want)}</td>" in page.replace(' class="n"', "")
    assert "streamed requests" in page

    # the demo's table
    con = Console(width=160, record=True)
    con.print(summary(rows))
    assert f"{output.ms(want50)}/{output.ms(want)}" in con.export_text()
