"""`firsttoken compare` end to end: CLI -> one real proxy with two named routes -> two simulated
upstreams whose TTFB and prefill cost are known."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from conftest import rows

from firsttoken.cli.compare import compare, plan, verdict
from firsttoken.cli.logs import logs
from firsttoken.cli.proxy.server import ProxyServer
from firsttoken.cli.proxy.state import write_state
from firsttoken.cli.simulate import SimConfig, SimServer

# headers after ttfb_ms, then 10 ms + 300 ms per 1k prompt tokens to the first token, 2 ms per token: a
# prefill cost well above a busy test machine's scheduling noise, so the fits can tell slopes apart
BASE = dict(ttfb_ms=30, prefill_base_ms=10, prefill_ms_per_1k_tokens=300, tpot_ms=2, output_tokens=6)
ARGS = ["--model", "gpt-4o-mini", "--inputs", "100,1100,2100", "--max-tokens", "6", "--runs", "3", "--warmup", "1"]


def _run(args, ok=True):
    res = CliRunner().invoke(compare, args, catch_exceptions=False)
    if ok:
        assert res.exit_code == 0, res.output
    return res


def _doc(res) -> dict:
    return json.loads(res.output[res.output.index("{"):])


def test_plan_interleaves_and_alternates_the_order():
    p = plan([(100, 5), (200, 5)], ["a", "b"], runs=2, warmup=1)
    assert len(p) == 2 * 2 * 3
    assert [w for _, _, w in p] == [True] * 4 + [False] * 8
    rounds = [p[i:i + 4] for i in range(0, 12, 4)]
    for rnd in rounds:  # every point through both routes, back to back
        assert [pt for _, pt, _ in rnd] == [(100, 5), (100, 5), (200, 5), (200, 5)]
    assert [r for r, _, _ in rounds[1]] == ["b", "a", "a", "b"]  # the order flips, so drift hits both alike
    assert [r for r, _, _ in rounds[2]] == ["a", "b", "b", "a"]


@pytest.mark.slow  # two routes, many paced requests: seconds
def test_compare_recovers_the_added_ttfb_and_same_prefill(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-compare-secret-key-0123456789")
    db = tmp_path / "ft.db"
    with SimServer(SimConfig(**BASE)) as direct, SimServer(SimConfig(**{**BASE, "ttfb_ms": 130})) as gateway, \
            ProxyServer([f"direct={direct.url}", f"gateway={gateway.url}"], str(db), port=0) as proxy:
        res = _run(["--route", "direct", "--route", "gateway", *ARGS, "--experiment", "ab",
                    "--port", str(proxy.bound_port), "--db", str(db), "--json"])
    assert "sk-compare-secret" not in res.output
    s = _doc(res)
    assert s["routes"] == ["direct", "gateway"] and s["sent"] == 18 and s["recorded"] == 18 and s["errors"] == 0
    d, g = s["per_route"]["direct"], s["per_route"]["gateway"]
    assert d["n"] == g["n"] == 9
    v = s["verdict"]
    assert v["ttfb"] == "adds" and v["prefill"] == "same", v
    assert v["ttfb_delta_ms"] == pytest.approx(100, rel=0.10)
    assert s["delta"]["ttfb_p50"] == pytest.approx(100, rel=0.10)
    assert s["delta"]["ttft_p50"] == pytest.approx(100, rel=0.20)  # the TTFB carries into TTFT, nothing else does
    assert abs(s["delta"]["gap_p50"]) < 20
    for side in (d, g):  # both fits recover the simulated prefill slope, and say what they left out as not prefill
        assert side["slope_ms_per_1k"] == pytest.approx(300, rel=0.15) and side["r2"] > 0.9
        left_out = sum(e["n"] for e in side["fit_excluded"])
        assert side["fit_n"] + left_out == 9 and (side["fit_left_out"] is None) == (left_out == 0)
    assert s["delta"]["intercept_ms"] == pytest.approx(100, rel=0.20)
    assert "route gateway adds" in v["text"] and "prefill is the same" in v["text"]

    # the rows are tagged: warm-ups apart, each route on its own rows
    recorded = rows(db, "WHERE experiment IN ('ab', 'ab/warmup')")
    assert len(recorded) == 24 and sum(r["experiment"] == "ab/warmup" for r in recorded) == 6
    assert {r["route"] for r in recorded} == {"direct", "gateway"}
    listed = CliRunner().invoke(logs, ["--experiment", "ab", "--db", str(db), "--json", "--limit", "100"])
    assert listed.exit_code == 0 and len(listed.output.strip().splitlines()) == 18


@pytest.mark.slow  # two routes, many paced requests: seconds
def test_compare_reports_a_different_prefill(tmp_path, monkeypatch):
    """Same TTFB, a third of the prefill cost behind the gateway; routes found in the proxy's state
    file, the gateway's upstream path holding the API version (base URL without /v1)."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    db = tmp_path / "ft.db"
    fast = {**BASE, "prefill_ms_per_1k_tokens": 100}
    with SimServer(SimConfig(**BASE)) as direct, SimServer(SimConfig(**fast)) as gateway, \
            ProxyServer([f"direct={direct.url}", f"gateway={gateway.url}/v1"], str(db), port=0) as proxy:
        write_state(proxy)
        res = _run(["--route", "direct", "--route", "gateway", *ARGS, "--experiment", "slope", "--db", str(db)])
        bad = _run(["--route", "direct", "--route", "nope", *ARGS, "--db", str(db)], ok=False)
    out = " ".join(res.output.split())  # rich wraps at the test terminal's width
    assert "TTFB P50" in out and "TTFT slope" in out and "direct" in out and "gateway" in out
    assert "prefill differs" in out and "TTFB is the same" in out
    assert "$OPENAI_API_KEY is not set: sending requests through direct and gateway" in out
    assert bad.exit_code != 0 and "no route named 'nope'" in bad.output
    paths = {r["route"]: r["upstream_url"] for r in rows(db, "WHERE experiment = 'slope'")}
    assert paths["gateway"].endswith("/v1/chat/completions") and "/v1/v1/" not in paths["gateway"]


def test_verdict_needs_real_evidence_before_saying_differs():
    def g(ttfb, slope, se, r2=0.9, n=20):
        return {"ttfb_ms": {"p50": ttfb}, "gap_ms": {"p50": 50.0}, "ttft_slope_ms_per_1k": slope,
                "ttft_slope_se_ms_per_1k": se, "ttft_fit_r2": r2, "ttft_fit_n": n}

    v = verdict("a", "b", g(200, 100, 2), g(198, 104, 2))
    assert (v["ttfb"], v["prefill"]) == ("same", "same")
    v = verdict("a", "b", g(200, 100, 40), g(150, 160, 40))  # a big difference inside the noise
    assert (v["ttfb"], v["prefill"]) == ("saves", "inconclusive") and "add --runs" in v["text"]
    assert "route a adds 50 ms of TTFB over b" in v["text"]
    v = verdict("a", "b", g(200, 100, 2), g(200, 160, 2))
    assert v["prefill"] == "differs" and "60 ms more per 1k on b, 1.6× on b" in v["text"]
    v = verdict("a", "b", g(200, None, None), g(200, None, None))  # one input size: the gap decides
    assert v["prefill"] == "same" and "several --inputs" in v["text"]


def test_a_steady_difference_under_the_relative_tolerance_is_still_added():
    """LiteLLM in CI: +15 ms on every pair (middle half +14 to +17) under a 16 ms (10 %) tolerance."""
    g = {"ttft_ms": {"p50": 160.0}, "ttfb_ms": {"p50": 30.0}, "gap_ms": {"p50": 130.0}}
    steady = verdict("direct", "litellm", g, g, {"added_ms": 15.0, "p25_ms": 14.0, "p75_ms": 17.0, "pairs": 12})
    assert steady["ttft"] == "adds" and "route litellm adds 15 ms to TTFT over direct" in steady["text"], steady
    noisy = verdict("direct", "litellm", g, g, {"added_ms": 15.0, "p25_ms": -10.0, "p75_ms": 30.0, "pairs": 12})
    assert noisy["ttft"] == "same" and "within 16 ms" in noisy["text"], noisy
    tiny = verdict("direct", "litellm", g, g, {"added_ms": 3.0, "p25_ms": 2.0, "p75_ms": 4.0, "pairs": 12})
    assert tiny["ttft"] == "same", tiny  # steady but under 5 ms


def test_a_message_ending_in_a_period_joins_the_sentence_with_one(tmp_path, monkeypatch):
    """'routes: a, gw.' (a route name may end with a period) or a network error's own full stop:
    then our advice, after one period, not two."""
    import firsttoken.cli.compare as C
    from firsttoken.cli.sweep import SweepError

    monkeypatch.setenv("OPENAI_API_KEY", "sk-compare-0000000000")
    db = tmp_path / "ft.db"
    with SimServer(SimConfig(**BASE)) as sim, ProxyServer([f"a={sim.url}", f"gw.={sim.url}"], str(db), port=0) as proxy:
        write_state(proxy)  # the routes are read from it
        said = " ".join(_run(["--route", "nope", "--route", "a", *ARGS, "--db", str(db)],
                             ok=False).output.split())
        assert "routes: a, gw. Start the proxy with one --upstream" in said, said

        def hung_up(*a, **k):
            raise SweepError("connection to 127.0.0.1 failed: the peer said goodbye.")
        monkeypatch.setattr(C, "send_all", hung_up)
        said = " ".join(_run(["--route", "a", "--route", "gw.", *ARGS, "--db", str(db)],
                             ok=False).output.split())
        assert "said goodbye. The proxy was looked for at" in said, said


def test_compare_speaks_one_language():
    """Issue 24 #7: every reading command takes --lang; compare's verdict and table are wholly in it."""
    import io
    import re

    from rich.console import Console

    from firsttoken.cli.compare import render
    from firsttoken.cli.labels import LABELS

    def g(ttfb, gap, ttft, slope, se=1.0, intercept=30.0):
        return {"ttfb_ms": {"p50": ttfb}, "gap_ms": {"p50": gap}, "ttft_ms": {"p50": ttft},
                "ttft_slope_ms_per_1k": slope, "ttft_slope_se_ms_per_1k": se, "ttft_intercept_ms": intercept}

    added = {"added_ms": 40.0, "p25_ms": 35.0, "p75_ms": 44.0, "pairs": 12}
    cases = [  # every sentence of the verdict at least once
        ("a", "b", g(30, 100, 130, 60), g(70, 100, 170, 60), added, None),
        ("a", "b", g(30, 100, 130, 60), g(31, 100, 131, 160), {**added, "added_ms": 1.0, "p25_ms": -3, "p75_ms": 4}, None),
        ("a", "b", g(30, 100, 130, 60, 40), g(30, 100, 130, 100, 40), None, None),
        ("a", "b", g(30, 100, 130, None), g(30, 150, 180, None), None, None),
        ("a", "b", g(30, 100, 130, None), g(30, 101, 131, None), None, None),
        ("a", "b", g(None, None, 130, None), g(30, None, 131, None), None, None),
        ("direct", "gw", g(30, 100, 130, 60), g(130, 1, 131, 60, intercept=45), added, {"gw": True}),
        ("direct", "gw", g(30, 100, 130, None), g(130, 1, 131, None), added, {"gw": True, "direct": True}),
    ]
    zh = [verdict(*c, lang="zh")["text"] for c in cases]
    side = {k: None for k in ("ttfb_p50", "ttfb_p95", "gap_p50", "gap_p95", "ttft_p50", "ttft_p95", "tpot_p50",
                              "tpot_p95", "slope_ms_per_1k", "intercept_ms", "r2")}
    summary = {"experiment": "exp", "routes": ["direct", "gw"], "delta": {},
               "per_route": {r: {**side, "n": 5, "errors": 0, "headers_held": r == "gw", "fit_warning": None}
                             for r in ("direct", "gw")}, "verdict": verdict(*cases[6], lang="zh")}
    buf = io.StringIO()
    render(Console(file=buf, width=120), summary, "zh")
    text = "\n".join(zh) + buf.getvalue()
    left = [f"{k}: {w}" for k, en in LABELS["en"].items() if k.startswith("cmp.") and en != LABELS["zh"].get(k)
            for w in (w.strip(" ()·:;,~.%/") for w in re.split(r"\{[^}]*\}", en))
            if len(w) >= 4 and not w.startswith(("firsttoken", "--")) and w in text]
    assert not left, (left, text)
    assert all(t.endswith("。") for t in zh) and "扣住响应头" in buf.getvalue() and "是" in buf.getvalue()
    en = verdict(*cases[0])["text"]
    assert "route b adds 40 ms to TTFT over a" in en and en.endswith(".")
    assert "--lang" in CliRunner().invoke(compare, ["--help"]).output


def test_compare_in_chinese_end_to_end(tmp_path, monkeypatch):
    """`compare --lang zh` as a person runs it: its notes, table, verdict and footer in Chinese."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    db = tmp_path / "ft.db"
    with SimServer(SimConfig(**BASE)) as a, SimServer(SimConfig(**BASE)) as b, \
            ProxyServer([f"a={a.url}", f"b={b.url}"], str(db), port=0) as proxy:
        res = _run(["--route", "a", "--route", "b", "--model", "gpt-4o-mini", "--inputs", "100", "--max-tokens", "4",
                    "--runs", "1", "--warmup", "0", "--port", str(proxy.bound_port), "--db", str(db), "--lang", "zh"])
    out = res.output
    assert "没有设置 $OPENAI_API_KEY" in out and "扣住响应头" in out and "标记为" in out, out
    assert "→ " in out and "。" in out and "not set" not in out and "rows tagged" not in out, out
