"""`firsttoken bench --json`: the overhead figures as one JSON document (real processes on loopback)."""

from __future__ import annotations

import json
import os
import re
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
    # what decoding one event costs the stream tap, per framing (figures vary: only that each was measured)
    assert set(doc["framing_us_per_event"]) == {"sse", "eventstream", "ndjson", "openai_sse"}
    assert all(v > 0 for v in doc["framing_us_per_event"].values())


def test_bench_prints_each_framings_decode_cost():
    r = subprocess.run([FT, "bench", "--requests", "2"], capture_output=True, text=True, timeout=300,
                       env={**os.environ, "COLUMNS": "400"})
    assert r.returncode == 0, r.stderr
    line = next(x for x in r.stdout.splitlines() if x.startswith("decoding one event in the stream tap"))
    assert re.search(r"SSE \(Anthropic's\) [\d.]+ µs, Bedrock's AWS event stream [\d.]+ µs, "
                     r"Ollama's NDJSON \(/api/chat\) [\d.]+ µs$", line.strip()), line


def test_framings_carry_the_same_content():
    """The bench's streams are the same text deltas, read whole by the tap (so their per-event
    costs compare like with like), each ending as its API ends a stream."""
    from firsttoken.addon.record import Clock
    from firsttoken.addon.tap import StreamTap
    from firsttoken.cli.bench import framing

    seen = {}
    for kind in framing.KINDS:
        api, ctype = framing.TAPS[kind]
        tap = StreamTap(Clock(t0=0.0, hook=0.0), api, ctype, None)
        for c in framing.chunks(kind, 100):
            tap(c)
        tap.finish()
        assert tap.framing == ("sse" if kind == "openai_sse" else kind) and tap.facts.done and tap.error is None, kind
        seen[kind] = tap.output_chars
    assert len(set(seen.values())) == 1 and seen["ndjson"] == sum(len(framing.WORDS[i % 9]) for i in range(100)), seen
