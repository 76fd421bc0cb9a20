"""`firsttoken bench --json`: the overhead figures as one JSON document (real processes on loopback)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # the benchmark command: the slow tier (`pytest -m slow`)

FT = str(Path(sys.executable).parent / "firsttoken")


def test_bench_json():
    r = subprocess.run([FT, "bench", "--requests", "2", "--json"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)  # nothing but the document on stdout
    assert set(doc["paths"]) == {"direct", "bare mitmproxy (streaming)", "firsttoken"}
    d = doc["paths"]["direct"]
    assert d["added_ttft_ms"] == 0 and 0 < d["ttfb_ms"] <= d["ttft_ms"]
    ft = doc["paths"]["firsttoken"]
    assert ft["ttft_ms"] > 0 and abs(ft["added_ttft_ms"] - (ft["ttft_ms"] - d["ttft_ms"])) < 0.002  # each rounded to µs
    assert doc["prompt_size"]["big_body_bytes"] > 500_000 and doc["tokenizer"]["tokens"] > 100_000
