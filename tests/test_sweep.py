"""`firsttoken sweep` end to end: CLI -> real proxy -> simulated upstream with a known prefill cost."""

from __future__ import annotations

import csv
import json
import re

import pytest
from click.testing import CliRunner
from conftest import rows

from firsttoken.addon import tokens
from firsttoken.cli.proxy.server import ProxyServer
from firsttoken.cli.simulate import SimConfig, SimServer
from firsttoken.cli.sweep import SweepError, build_prompt, sweep

# 0.5 ms per prompt token, headers after 20 ms, 2 ms per output token
PREFILL = dict(ttfb_ms=20, prefill_base_ms=10, prefill_ms_per_1k_tokens=500, tpot_ms=2, output_tokens=8)


@pytest.mark.parametrize("api,model", [("openai.chat", "gpt-4o-mini"), ("openai.chat", "sim-1"),
                                       ("anthropic.messages", "claude-sonnet-4-5")])
@pytest.mark.parametrize("n", [40, 200, 777, 4000])
def test_prompts_hit_the_token_count_exactly(api, model, n):
    body = build_prompt(api, model, n, 50, tag="x #1 abcd")
    assert tokens.count_request(api, body, model).prompt_tokens_est == n
    assert body["stream"] is True


def test_prompt_below_the_overhead_is_refused():
    with pytest.raises(SweepError, match="overhead"):
        build_prompt("openai.chat", "gpt-4o-mini", 5, 50)


def _invoke(args):
    res = CliRunner().invoke(sweep, args, catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return res


@pytest.mark.slow  # real processes and paced requests: seconds
def test_inputs_sweep_recovers_the_prefill_slope(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-sweep-secret-key-0123456789")
    db = tmp_path / "ft.db"
    out_csv = tmp_path / "sweep.csv"
    with SimServer(SimConfig(**PREFILL)) as sim, ProxyServer([sim.url], str(db), port=0) as proxy:
        res = _invoke(["--base-url", proxy.url + "/v1", "--model", "gpt-4o-mini", "--inputs", "100,500,900,1300",
                       "--max-tokens", "8", "--runs", "2", "--warmup", "1", "--experiment", "slope",
                       "--db", str(db), "--csv", str(out_csv), "--json"])
    assert "sk-sweep-secret" not in res.output
    s = json.loads(res.output[res.output.index("{"):])
    assert [p["input_tokens"] for p in s["points"]] == [100, 500, 900, 1300]
    assert all(p["n"] == 2 for p in s["points"])
    assert s["fit"]["ttft_slope_ms_per_1k"] == pytest.approx(500, rel=0.10)
    assert s["fit"]["ttft_fit_n"] == 8 and s["fit"]["ttft_fit_r2"] > 0.95
    # TTFB stays put while the gap carries the prefill
    ttfb = [p["ttfb_p50"] for p in s["points"]]
    assert max(ttfb) - min(ttfb) < 60
    assert s["points"][-1]["gap_p50"] - s["points"][0]["gap_p50"] == pytest.approx(600, rel=0.15)
    recorded = rows(db, "WHERE experiment IN ('slope', 'slope/warmup')")
    assert len(recorded) == 12 and sum(r["experiment"] == "slope/warmup" for r in recorded) == 4
    assert {r["prompt_tokens_est"] for r in recorded} == {100, 500, 900, 1300}
    with open(out_csv) as fh:
        table = list(csv.DictReader(fh))
    assert [int(r["input_tokens"]) for r in table] == [100, 500, 900, 1300]


@pytest.mark.slow  # real processes and paced requests: seconds
def test_outputs_sweep_keeps_ttft_flat(tmp_path):
    db = tmp_path / "ft.db"
    cfg = SimConfig(**{**PREFILL, "fill_max_tokens": True})
    with SimServer(cfg) as sim, ProxyServer([sim.url], str(db), port=0) as proxy:
        res = _invoke(["--base-url", proxy.url, "--model", "claude-sonnet-4-5", "--api", "anthropic.messages",
                       "--outputs", "10,60,150", "--input", "200", "--runs", "2", "--warmup", "1",
                       "--experiment", "flat", "--db", str(db)])
    assert "TTFT medians vary by" in res.output and "flat, as expected" in res.output
    from firsttoken.addon.store.db import open_db
    from firsttoken.cli.sweep import summarize

    s = summarize(open_db(db, write=False), "flat", "outputs")
    meds = [p["ttft_p50"] for p in s["points"]]
    assert [p["max_tokens"] for p in s["points"]] == [10, 60, 150]
    assert max(meds) - min(meds) < 0.25 * min(meds)
    assert [p["server_output_tokens"] for p in s["points"]] == [10, 60, 150]
    totals = [p["total_p50"] for p in s["points"]]
    assert totals[0] < totals[1] < totals[2]  # the output length shows up in the total only


def test_sweep_not_through_the_proxy_says_so(tmp_path):
    with SimServer(SimConfig(**PREFILL)) as sim:
        res = CliRunner().invoke(sweep, ["--base-url", sim.openai_base_url, "--model", "sim-1", "--inputs", "100",
                                         "--runs", "1", "--warmup", "0", "--wait", "0.5", "--db", str(tmp_path / "x.db")])
    assert res.exit_code == 1
    assert "nothing was recorded" in res.output


def test_a_csv_that_cannot_be_written_is_a_clear_error(tmp_path):
    db = tmp_path / "ft.db"
    where = tmp_path / "missing" / "s.csv"
    with SimServer(SimConfig(**PREFILL)) as sim, ProxyServer([sim.url], str(db), port=0) as proxy:
        res = CliRunner(env={"COLUMNS": "400", "OPENAI_API_KEY": "sk-sweep-0000000000"}).invoke(
            sweep, ["--base-url", proxy.url + "/v1", "--model", "sim-1", "--inputs", "100", "--runs", "1",
                    "--warmup", "0", "--db", str(db), "--csv", str(where)], catch_exceptions=False)
    said = " ".join(res.output.split())
    assert res.exit_code == 1 and f"error: cannot write {where}: No such file or directory; choose an existing" in said
    assert "Traceback" not in said


def test_first_request_failing_stops_the_sweep(tmp_path):
    db = tmp_path / "ft.db"
    with SimServer(SimConfig(**PREFILL, api_key="sk-right")) as sim, ProxyServer([sim.url], str(db), port=0) as proxy:
        res = CliRunner(env={"OPENAI_API_KEY": "sk-wrong-0000000000"}).invoke(
            sweep, ["--base-url", proxy.url + "/v1", "--model", "sim-1", "--inputs", "100", "--db", str(db)])
    assert res.exit_code == 1
    assert "HTTP 401" in res.output and "sk-wrong-0000000000" not in res.output


@pytest.mark.parametrize("ignore,reason", [(False, "short"), (True, "ignored")])
def test_outputs_sweep_says_when_the_output_length_did_not_change(tmp_path, ignore, reason):
    # not ignoring: every answer is 8 tokens, below the smallest cap; ignoring: 40 tokens, above every cap
    db = tmp_path / "ft.db"
    cfg = SimConfig(**{**PREFILL, "output_tokens": 8 if not ignore else 40, "ignore_max_tokens": ignore})
    caps = "10,60,150" if not ignore else "10,20,30"
    with SimServer(cfg) as sim, ProxyServer([sim.url], str(db), port=0) as proxy:
        res = _invoke(["--base-url", proxy.url + "/v1", "--model", "gpt-4o-mini", "--outputs", caps, "--input", "100",
                       "--runs", "1", "--warmup", "0", "--experiment", "same", "--db", str(db)])
        js = _invoke(["--base-url", proxy.url + "/v1", "--model", "gpt-4o-mini", "--outputs", caps, "--input", "100",
                      "--runs", "1", "--warmup", "0", "--experiment", "same-json", "--db", str(db), "--json"])
    text = " ".join(res.output.split())
    assert "flat, as expected" not in text
    assert "the output length did not change" in text
    n = 8 if not ignore else 40
    assert f"produced ~{n} output tokens" in text and "max_tokens went from" in text
    assert ("ignored max_tokens" in text) == ignore
    assert ("ended on its own" in text) == (not ignore)
    s = json.loads(js.output[js.output.index("{"):])
    assert s["output_check"] == {"unchanged": True, "output_tokens": [n, n, n], "reason": reason}


def test_outputs_that_follow_the_cap_are_not_flagged(tmp_path):
    from firsttoken.cli.sweep import output_check

    pts = [{"max_tokens": m, "server_output_tokens": m, "counted_output_tokens": m} for m in (10, 60, 150)]
    assert output_check(pts)["unchanged"] is False
    # no usage from the server: firsttoken's own count decides
    pts = [{"max_tokens": m, "server_output_tokens": None, "counted_output_tokens": 31} for m in (50, 200)]
    assert output_check(pts) == {"unchanged": True, "output_tokens": [31, 31], "reason": "short"}


def test_default_tags_differ_within_one_second():
    import datetime as dt

    from firsttoken.cli.sweep import new_tag

    now = dt.datetime(2026, 1, 2, 3, 4, 5)
    tags = {new_tag("inputs", now) for _ in range(50)}
    assert len(tags) == 50
    assert all(t.startswith("sweep-inputs-20260102-030405-") for t in tags)


@pytest.mark.slow  # real processes and paced requests: seconds
def test_ctrl_c_shows_the_partial_table_and_keeps_the_rows(tmp_path):
    """On a real terminal: the progress shows the ETA and the size being sent; SIGINT prints the table of
    the points measured so far, says where the rows are, and exits 130 (no bare `Aborted!`)."""
    import sys
    import time
    from pathlib import Path

    from firsttoken.addon.store.db import open_reader
    from firsttoken.addon.store.queries import count_finished
    from firsttoken.cli.terminal import PseudoTerminal

    ft = str(Path(sys.executable).parent / "firsttoken")
    db = tmp_path / "ft.db"
    slow = {**PREFILL, "tpot_ms": 40, "output_tokens": 6}  # ~0.3 s a request
    term = PseudoTerminal(160, 40)
    with SimServer(SimConfig(**slow)) as sim, ProxyServer([sim.url], str(db), port=0) as proxy:
        try:
            term.spawn([ft, "sweep", "--base-url", proxy.url + "/v1", "--model", "gpt-4o-mini", "--inputs",
                        "100,300", "--runs", "40", "--warmup", "1", "--db", str(db)])
            screen = term.wait_for(r"ETA.*input [\d,]+ tok · max_tokens 50", timeout=30)
            assert "sweep-inputs-" in screen
            deadline = time.monotonic() + 30
            n = 0
            while n < 5 and time.monotonic() < deadline:  # a few measured rows of each point
                time.sleep(0.2)
                db_ = open_reader(str(db))
                n = db_.execute("SELECT count(*) FROM requests WHERE state = 'done' AND experiment LIKE 'sweep-inputs-%' "
                                "AND experiment NOT LIKE '%/warmup'").fetchone()[0]
                db_.conn.close()
            assert n >= 5
            code = term.interrupt(timeout=30)
            screen = term.text()
        finally:
            term.close()
    assert code == 130, screen
    assert "Aborted!" not in screen and "Traceback" not in screen
    flat = " ".join(screen.split())
    assert "interrupted after" in flat
    assert "interrupted: the points measured so far" in flat
    tag = next(w for w in flat.split() if w.startswith("'sweep-inputs-")).strip("':,")
    assert f"firsttoken logs --experiment {tag}" in flat and "are kept in" in flat
    table = screen[screen.index("interrupted: the"):]
    assert re.search(r"│\s+100 │", table) and re.search(r"│\s+300 │", table) and "TTFT P50" in table
    reader = open_reader(str(db))
    assert count_finished(reader, tag) >= n  # nothing finished was lost


def test_every_prompt_differs_from_its_first_token():
    """No prefix cache can serve one sweep prompt from another: each starts with its own nonce, and its
    filler words are drawn from it (same size, same tag, still exactly the size asked for)."""
    enc, _ = tokens.load_encoding(tokens.encoding_for_model("gpt-4o-mini")[0])
    texts = []
    for nonce in ("5f1c09aa", "c27e4b10"):
        body = build_prompt("openai.chat", "gpt-4o-mini", 500, 50, tag="sweep-x #0", nonce=nonce)
        assert tokens.count_request("openai.chat", body, "gpt-4o-mini").prompt_tokens_est == 500
        texts.append(body["messages"][0]["content"])
        assert texts[-1].startswith(nonce + " [sweep-x #0] ")
    a, b = (enc.encode_ordinary(t) for t in texts)
    assert a[0] != b[0]
    tail = len(enc.encode_ordinary(texts[0].split("\n\n", 1)[0]))
    assert a[tail:tail + 50] != b[tail:tail + 50]  # the filler too
    # unnamed nonces are random
    assert build_prompt("openai.chat", "gpt-4o-mini", 300, 50) != build_prompt("openai.chat", "gpt-4o-mini", 300, 50)


@pytest.mark.parametrize("column", ["engine_cached_tokens", "usage_cached_tokens"])
def test_a_cache_hit_the_engine_reports_is_said(db, column):
    from conftest import add_request
    from rich.console import Console

    from firsttoken.cli.sweep import CACHE_HIT_MIN_TOKENS, print_summary, summarize

    prompt = "engine_prompt_tokens" if column == "engine_cached_tokens" else "usage_prompt_tokens"
    for i, cached in enumerate([0, 3, 1500, 1800, None]):  # the chat template's 3 tokens are no hit
        add_request(db, experiment="hit", prompt_tokens_est=1000 + i, ttft_ms=100.0 + i, ttfb_ms=10.0,
                    **{prompt: 2000, column: cached})
    s = summarize(db, "hit", "inputs")
    assert s["cache"] == {"reported": 4, "hits": 2, "max_cached_tokens": 1800, "median_cached_tokens": 1800,
                          "median_prompt_tokens": 2000}
    con = Console(width=400, highlight=False)
    with con.capture() as cap:
        print_summary(con, s)
    said = " ".join(cap.get().split())
    assert "⚠ the engine reported cache hits: 2 of 4 measured requests had part of their prompt served" in said
    assert "keyed on something else" in said and "slope above are too low" in said
    assert "--no-enable-prefix-caching" in said and "firsttoken logs --experiment hit" in said
    assert CACHE_HIT_MIN_TOKENS > 3
    # under the threshold (a template's head) nothing is said
    add_request(db, experiment="nohit", prompt_tokens_est=500, ttft_ms=50.0, **{prompt: 900, column: 3})
    s = summarize(db, "nohit", "inputs")
    assert s["cache"]["hits"] == 0
    with con.capture() as cap:
        print_summary(con, s)
    assert "cache hits" not in cap.get()
