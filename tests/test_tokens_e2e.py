"""Token accounting through the proxy: estimates, server usage, ratio, calibration, prefixes."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import openai
from conftest import rows

SYSTEM = "You are a careful assistant. " * 200  # a big stable prefix, re-sent every time


def test_estimates_usage_ratio_and_calibration_in_logs_json(proxy, db_path):
    client = openai.OpenAI(base_url=proxy.url + "/v1", api_key="sk-test-tokens-0000000000000000000")
    msgs = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "Count to three."}]
    for _ in range(3):
        s = client.chat.completions.create(model="gpt-4", messages=msgs, stream=True, stream_options={"include_usage": True})
        list(s)
    # the server stays silent about usage here: the learned factor fills in
    s = client.chat.completions.create(model="gpt-4", messages=msgs, stream=True, extra_headers={"x-sim-fault": "no_usage"})
    list(s)
    proxy.flush()
    out = subprocess.run(
        [str(Path(sys.executable).parent / "firsttoken"), "logs", "--json", "--db", str(db_path)],
        capture_output=True, text=True, check=True,
    ).stdout
    recs = [json.loads(line) for line in out.splitlines()]
    assert len(recs) == 4
    first, last = recs[0], recs[-1]
    assert first["tokenizer"] == "cl100k_base" and first["tokens_exact"] is True
    assert first["prompt_tokens_est"] > 1000 and first["system_tokens"] > 1000
    # the simulator counts its own way (4 per message instead of OpenAI's 3 + priming)
    assert first["usage_prompt_tokens"] != first["prompt_tokens_est"]
    assert abs(first["usage_ratio"] - first["usage_prompt_tokens"] / first["prompt_tokens_est"]) < 1e-3
    assert [r["prefix_seen_before"] for r in recs] == [0, 1, 2, 3]
    assert recs[0]["prefix_hash"] == recs[3]["prefix_hash"] and recs[0]["prefix_tokens"] > 1000
    assert last["usage_prompt_tokens"] is None
    assert last["calibration_factor"] == first["usage_ratio"]
    assert abs(last["prompt_tokens_calibrated"] - last["prompt_tokens_est"] * last["calibration_factor"]) <= 1
    assert last["output_tokens_est"] and last["tpot_ms"] is not None  # TPOT from the streamed text alone


def test_show_prints_prompt_breakdown(proxy, db_path):
    client = openai.OpenAI(base_url=proxy.url + "/v1", api_key="sk-test-tokens-0000000000000000000")
    list(client.chat.completions.create(model="gpt-4", messages=[{"role": "system", "content": SYSTEM},
                                                                {"role": "user", "content": "hi"}], stream=True))
    proxy.flush()
    rid = rows(db_path)[0]["id"]
    out = subprocess.run(
        [str(Path(sys.executable).parent / "firsttoken"), "show", rid[:8], "--db", str(db_path)],
        capture_output=True, text=True, check=True, env={"COLUMNS": "120", "PATH": "/usr/bin:/bin"},
    ).stdout
    assert "tokenizer cl100k_base (exact)" in out
    assert "system" in out and "last user turn" in out


def test_very_large_prompt_is_counted_in_the_helper_process(proxy, db_path):
    big = "The quick brown fox jumps over the lazy dog. " * 30000  # ~1.35 MB, ~300k tokens
    client = openai.OpenAI(base_url=proxy.url + "/v1", api_key="sk-test-tokens-0000000000000000000")
    list(client.chat.completions.create(model="gpt-4", messages=[{"role": "user", "content": big}], stream=True))
    proxy.flush(timeout=60)
    # the helper process is spawned on first use: on a loaded machine (4 test workers on 2 cores)
    # starting it and counting 300k tokens can outlast one flush
    deadline = time.monotonic() + 120
    while (row := rows(db_path)[0])["prompt_tokens_est"] is None and time.monotonic() < deadline:
        proxy.flush(timeout=5)
        time.sleep(0.2)
    assert proxy.capture.analyzer._procs is not None  # the helper process did the parsing
    assert row["request_bytes"] > 1024 * 1024
    assert row["prompt_tokens_est"] is not None, {k: row[k] for k in ("state", "tokenizer", "request_error", "error")}
    assert 290_000 < row["prompt_tokens_est"] < 310_000 and row["tokenizer"] == "cl100k_base"
