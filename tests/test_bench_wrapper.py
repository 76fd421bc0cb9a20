"""`firsttoken bench --wrapper`: pairs of runs of a client with and without `firsttoken run`
(real processes: the simulator, `firsttoken run`, the stand-in client). Figures are printed, not
asserted: only that every run happened, was recorded, and the medians are what the pairs say."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

FT = str(Path(sys.executable).parent / "firsttoken")


def test_bench_wrapper_pairs_runs_with_and_without_run(tmp_path):
    r = subprocess.run([FT, "bench", "--wrapper", "--pairs", "2", "--client-startup-ms", "300", "--json"],
                       capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["pairs"] == 2 and len(doc["runs"]) == 2 and doc["failed_runs"] == 0, doc
    for pair in doc["runs"]:
        for side in ("with", "without"):
            assert pair[side]["exit"] == 0 and pair[side]["status"] == 200
            assert pair[side]["wall_s"] > 0.3  # at least the client's own start-up
            assert 0 <= pair[side]["child_start_s"] < pair[side]["wall_s"]
        assert pair["added_s"] == pytest.approx(pair["with"]["wall_s"] - pair["without"]["wall_s"])
    assert doc["median_added_s"] == pytest.approx(statistics.median(p["added_s"] for p in doc["runs"]))
    assert doc["recorded_first_requests"] == 2  # every wrapped run recorded its request
    assert 0 <= doc["first_requests_waited_for_start"] <= 2


def test_bench_wrapper_prints_the_medians(tmp_path):
    r = subprocess.run([FT, "bench", "--wrapper", "--pairs", "1", "--client-startup-ms", "0"],
                       capture_output=True, text=True, timeout=600, cwd=tmp_path, env={
                           "PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "COLUMNS": "100"})
    assert r.returncode == 0, r.stderr
    assert "median wall time" in r.stdout and "run added" in r.stdout and "records: 1 run(s)" in r.stdout


def test_a_command_needs_wrapper():
    r = subprocess.run([FT, "bench", "--", "true"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "--wrapper" in r.stderr
