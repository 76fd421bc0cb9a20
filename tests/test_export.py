"""`firsttoken export` through a real proxy: with no format flag it still exports, and says how."""

from __future__ import annotations

import csv
import io
import json

import httpx
from click.testing import CliRunner

from firsttoken.cli.export import export


def _send(proxy, n=3):
    for i in range(n):
        r = httpx.post(proxy.url + "/v1/chat/completions", timeout=30,
                       json={"model": "sim-1", "stream": True, "messages": [{"role": "user", "content": f"hi {i}"}]})
        assert r.status_code == 200
    proxy.flush()


def test_export_without_a_format_writes_csv_and_says_so(proxy, db_path):
    _send(proxy)
    res = CliRunner().invoke(export, ["--db", str(db_path)], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert "no format given: writing CSV (--json for JSON Lines)" in res.stderr
    table = list(csv.DictReader(io.StringIO(res.stdout)))
    assert len(table) == 3 and {r["model"] for r in table} == {"sim-1"}


def test_export_without_a_format_follows_the_file_extension(proxy, db_path, tmp_path):
    _send(proxy, 2)
    out = tmp_path / "rows.jsonl"
    res = CliRunner().invoke(export, ["--db", str(db_path), "-o", str(out)], catch_exceptions=False)
    assert res.exit_code == 0
    assert "writing JSON Lines" in res.stderr and "exported 2 request(s)" in res.stderr
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(lines) == 2 and all(x["model"] == "sim-1" for x in lines)


def test_both_formats_is_refused(proxy, db_path):
    res = CliRunner().invoke(export, ["--db", str(db_path), "--csv", "--json"])
    assert res.exit_code == 2 and "not both" in res.output
