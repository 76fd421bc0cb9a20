"""`firsttoken sweep` end to end: CLI -> real proxy -> simulated upstream with a known prefill cost."""

from __future__ import annotations

import csv
import json

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


def test_first_request_failing_stops_the_sweep(tmp_path):
    db = tmp_path / "ft.db"
    with SimServer(SimConfig(**PREFILL, api_key="sk-right")) as sim, ProxyServer([sim.url], str(db), port=0) as proxy:
        res = CliRunner(env={"OPENAI_API_KEY": "sk-wrong-0000000000"}).invoke(
            sweep, ["--base-url", proxy.url + "/v1", "--model", "sim-1", "--inputs", "100", "--db", str(db)])
    assert res.exit_code == 1
    assert "HTTP 401" in res.output and "sk-wrong-0000000000" not in res.output
