"""`firsttoken prune --before`: retention that keeps `stats` exact, next to a running proxy."""

from __future__ import annotations

import datetime as dt
import json
import sqlite3

import httpx
import pytest
from click.testing import CliRunner
from conftest import rows

from firsttoken.cli.bench.db import generate
from firsttoken.cli.main import cli
from firsttoken.cli.proxy.server import ProxyServer


def chat(base: str) -> int:
    r = httpx.post(base + "/v1/chat/completions", json={"model": "sim-1", "stream": True, "max_tokens": 5,
                                                         "messages": [{"role": "user", "content": "hi"}]}, timeout=30)
    return r.status_code


def invoke(*args):
    return CliRunner().invoke(cli, ["prune", *args], catch_exceptions=False)


def test_prune_next_to_a_running_proxy_keeps_stats_exact(sim, tmp_path):
    db = tmp_path / "ft.db"
    generate(db, 800, days=3, seed=5)  # three days of older traffic, up to now
    cutoff = dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds")
    old = len(rows(db))
    with ProxyServer([sim.url], str(db), port=0) as proxy:
        assert chat(proxy.url) == 200
        proxy.flush()
        dry = invoke("--db", str(db), "--before", cutoff, "--dry-run", "--json")
        assert dry.exit_code == 0, dry.output
        plan = json.loads(dry.output)
        assert plan["requests"] == old and plan["kept"] == 1 and plan["findings"] > 0 and "deleted" not in plan
        assert len(rows(db)) == old + 1  # a dry run deletes nothing
        res = invoke("--db", str(db), "--before", cutoff, "--vacuum")
        assert res.exit_code == 0, res.output
        text = " ".join(res.output.split())
        assert f"deleted {old:,} requests" in text and "1 remain" in text and "vacuumed" in text
        assert chat(proxy.url) == 200  # the proxy keeps recording after the prune
        proxy.flush()
    left = rows(db)
    assert len(left) == 2 and all(r["started_at"] >= cutoff for r in left)
    conn = sqlite3.connect(str(db))
    orphans = conn.execute("SELECT count(*) FROM findings WHERE request_id NOT IN (SELECT id FROM requests)").fetchone()[0]
    conn.close()
    assert orphans == 0
    stats = CliRunner().invoke(cli, ["stats", "--db", str(db), "--json"], catch_exceptions=False)
    assert json.loads(stats.output)["groups"][0]["count"] == 2


def test_prune_part_of_the_history_keeps_stats_exact(tmp_path):
    db = tmp_path / "ft.db"
    generate(db, 1200, days=4, seed=8)
    res = invoke("--db", str(db), "--before", "2d")
    assert res.exit_code == 0, res.output
    n = len(rows(db))
    assert 0 < n < 1200
    stats = json.loads(CliRunner().invoke(cli, ["stats", "--db", str(db), "--json"], catch_exceptions=False).output)
    assert sum(g["count"] for g in stats["groups"]) == n
    again = invoke("--db", str(db), "--before", "2d")
    assert "nothing to delete" in again.output


@pytest.mark.parametrize("before", ["yesterday", "30x"])
def test_a_bad_time_is_refused(tmp_path, before):
    db = tmp_path / "ft.db"
    generate(db, 10, days=1, seed=1)
    res = CliRunner().invoke(cli, ["prune", "--db", str(db), "--before", before])
    assert res.exit_code == 2 and "30m, 2h, 7d" in res.output
    assert len(rows(db)) == 10


def test_prune_never_creates_a_database(tmp_path):
    res = CliRunner().invoke(cli, ["prune", "--db", str(tmp_path / "none.db"), "--before", "1d"])
    assert res.exit_code != 0 and "no database" in res.output
    assert not (tmp_path / "none.db").exists()
