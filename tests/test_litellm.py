"""Through a REAL LiteLLM proxy (PyPI `litellm[proxy]`, installed by .ci/run into .ci/litellm/, its own
venv because its pins clash with mitmproxy's): LiteLLM sends its response headers only with the
upstream's first chunk, so TTFB holds the prefill.

client → firsttoken → LiteLLM (one worker, its own config, a free port) → the simulator (known timings),
beside client → firsttoken → the simulator directly:
- `compare` states what LiteLLM adds to TTFT within ±20 ms of what a plain client measures without
  firsttoken (interleaved requests, medians), names LiteLLM's route as holding its headers, and
  still finds the prefill the same;
- a 40k-token prompt through LiteLLM is not called a network problem (headers held; the route's
  TTFT-vs-input fit says it was prefill).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import statistics
import subprocess
import time
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner
from conftest import rows

from firsttoken.cli.compare import compare
from firsttoken.cli.loopback import free_port
from firsttoken.cli.proxy.server import ProxyServer
from firsttoken.cli.show import show
from firsttoken.cli.simulate import SimConfig, SimServer
from firsttoken.cli.sweep import build_prompt

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
LITELLM = ROOT / ".ci" / "litellm" / "bin" / "litellm"
KEY = "sk-litellm-test-master-0a1b2c3d4e5f6a7b"
MODEL = "gpt-4o-mini"
# headers 30 ms after the request, then 10 ms + 60 ms per 1k prompt tokens to the first token
SIM = dict(ttfb_ms=30, prefill_base_ms=10, prefill_ms_per_1k_tokens=60, tpot_ms=2, output_tokens=6)
SIZES = (200, 2000, 6000)


def litellm_bin() -> str:
    for candidate in (os.environ.get("FIRSTTOKEN_LITELLM"), LITELLM, shutil.which("litellm")):
        if candidate and Path(candidate).exists():
            return str(candidate)
    msg = ("LiteLLM's proxy is not installed: `python3 -m venv .ci/litellm && .ci/litellm/bin/pip install "
           "'litellm[proxy]'` (.ci/run does it)")
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(msg)
    pytest.skip(msg)


def _config(tmp_path: Path, upstream: str) -> Path:
    cfg = tmp_path / "litellm.yaml"
    cfg.write_text(
        "model_list:\n"
        f"  - model_name: {MODEL}\n"
        "    litellm_params:\n"
        f"      model: openai/{MODEL}\n"
        f"      api_base: {upstream}/v1\n"
        "      api_key: sk-upstream-test\n"
        "litellm_settings:\n"
        "  telemetry: false\n"
        "  drop_params: true\n"
        "general_settings:\n"
        f"  master_key: {KEY}\n", encoding="utf-8")
    return cfg


@pytest.fixture
def litellm(tmp_path):
    """(simulator, LiteLLM's URL): LiteLLM started on a free port with its own config, offline."""
    exe = litellm_bin()
    with SimServer(SimConfig(**SIM)) as sim:
        port = free_port()
        env = dict(os.environ, LITELLM_LOCAL_MODEL_COST_MAP="True", LITELLM_TELEMETRY="False",
                   LITELLM_LOG="ERROR", NO_PROXY="127.0.0.1,localhost", no_proxy="127.0.0.1,localhost")
        for var in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY", "all_proxy"):
            env.pop(var, None)
        log = (tmp_path / "litellm.log").open("wb")
        proc = subprocess.Popen([exe, "--config", str(_config(tmp_path, sim.url)), "--host", "127.0.0.1",
                                 "--port", str(port), "--num_workers", "1"], env=env, stdout=log,
                                stderr=subprocess.STDOUT, cwd=tmp_path, start_new_session=True)
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 180
            while True:
                assert proc.poll() is None, (tmp_path / "litellm.log").read_text(errors="replace")[-3000:]
                try:
                    if httpx.get(url + "/health/liveliness", timeout=2).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                assert time.monotonic() < deadline, "LiteLLM did not start within 180 s (offline?)"
                time.sleep(0.5)
            yield sim, url
        finally:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(5)
            log.close()


def _ttft(client: httpx.Client, base: str, n_tokens: int, tag: str) -> float:
    """A plain client's TTFT (s): request sent -> the first chunk with visible text."""
    body = build_prompt("openai.chat", MODEL, n_tokens, 6, tag=tag)
    t0 = time.perf_counter()
    with client.stream("POST", base + "/v1/chat/completions", json=body,
                       headers={"Authorization": f"Bearer {KEY}"}) as r:
        assert r.status_code == 200, r.read()
        first = None
        for line in r.iter_lines():
            if first is None and line.startswith("data: {"):
                choices = json.loads(line[6:]).get("choices") or [{}]
                if (choices[0].get("delta") or {}).get("content"):
                    first = time.perf_counter() - t0
        assert first is not None
        return first


def _plain_added_ms(sim_url: str, litellm_url: str, rounds: int) -> float:
    """What LiteLLM adds to TTFT measured without firsttoken: interleaved (the order flips every
    request), the difference of the medians."""
    direct, through = [], []
    with httpx.Client(timeout=60) as c:
        for rnd in range(rounds + 1):
            for i, n in enumerate(SIZES):
                order = ((direct, sim_url), (through, litellm_url))
                for out, base in order if (rnd + i) % 2 == 0 else order[::-1]:
                    t = _ttft(c, base, n, f"plain {rnd} {i} {len(out)}")
                    if rnd:  # round 0 warms both paths up
                        out.append(t)
    return (statistics.median(through) - statistics.median(direct)) * 1000.0


def test_compare_through_litellm_states_the_added_ttft(litellm, tmp_path, monkeypatch):
    sim, litellm_url = litellm
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    db = tmp_path / "ft.db"
    truth_before = _plain_added_ms(sim.url, litellm_url, rounds=4)
    with ProxyServer([f"direct={sim.url}", f"litellm={litellm_url}"], str(db), port=0) as proxy:
        res = CliRunner().invoke(compare, [
            "--route", "direct", "--route", "litellm", "--model", MODEL, "--inputs", ",".join(map(str, SIZES)),
            "--max-tokens", "6", "--runs", "4", "--warmup", "1", "--experiment", "ll", "--port",
            str(proxy.bound_port), "--db", str(db), "--json"], catch_exceptions=False)
        assert res.exit_code == 0, res.output
        s = json.loads(res.output[res.output.index("{"):])

        # the 40k-token prompt through LiteLLM: its TTFB holds a ~2.4 s prefill
        body = build_prompt("openai.chat", MODEL, 40_000, 6, tag="big")
        with httpx.Client(timeout=120) as c:
            r = c.post(f"{proxy.url}/litellm/v1/chat/completions", json=body,
                       headers={"Authorization": f"Bearer {KEY}", "x-firsttoken-experiment": "big"})
            assert r.status_code == 200, r.text
        deadline = time.monotonic() + 30
        while not (big := rows(db, "WHERE experiment = 'big' AND state = 'done'")) and time.monotonic() < deadline:
            time.sleep(0.2)
    truth_after = _plain_added_ms(sim.url, litellm_url, rounds=2)
    truth = statistics.median([truth_before, truth_after])
    v = s["verdict"]
    print(f"\nLiteLLM adds {v.get('ttft_added_ms')} ms by compare (p25 {v.get('ttft_added_p25_ms')}, "
          f"p75 {v.get('ttft_added_p75_ms')}); plain client: {truth_before:.1f} / {truth_after:.1f} ms\n{v['text']}")

    # what compare states is what a plain client sees, within ±20 ms
    assert v["ttft_added_ms"] == pytest.approx(truth, abs=20), (v, truth_before, truth_after)
    assert v["ttft_added_p25_ms"] <= v["ttft_added_ms"] <= v["ttft_added_p75_ms"]
    # LiteLLM's route is named as holding its headers; the direct one is not
    assert s["per_route"]["litellm"]["headers_held"] is True and s["per_route"]["direct"]["headers_held"] is False
    assert v["headers_held"] == ["litellm"] and "route litellm holds its response headers" in v["text"]
    # ... so the headline is TTFT, not TTFB (whose difference holds the prefill)
    assert "of TTFB over" not in v["text"] and "to TTFT over direct" in v["text"]
    assert v["prefill"] == "same" and "prefill is the same" in v["text"], v

    # the records say so too
    ll = rows(db, "WHERE experiment = 'll' AND route = 'litellm'")
    assert ll and sum(r["headers_held"] == 1 for r in ll) >= 0.8 * len(ll)
    assert all(r["headers_held"] != 1 for r in rows(db, "WHERE experiment = 'll' AND route = 'direct'"))
    # what LiteLLM reports about its own time, and the upstream's processing time it passes on, are
    # on the record and in `show` (the split its held headers hide)
    hop = json.loads(ll[-1]["hop_headers"])
    assert {"x-litellm-overhead-duration-ms", "x-litellm-response-duration-ms",
            "llm_provider-openai-processing-ms"} <= set(hop), hop
    assert not any(k.startswith("x-litellm-response-cost") for k in hop), hop
    shown = CliRunner(env={"COLUMNS": "200"}).invoke(show, [ll[-1]["id"], "--db", str(db)]).output
    assert "LiteLLM's own time" in shown and "the provider's processing 30.0ms" in shown, shown

    assert big, "the 40k-token request was not recorded"
    rec = big[0]
    codes = [f["code"] for f in json.loads(rec["findings"])] if isinstance(rec["findings"], str) else \
        [f["code"] for f in rec["findings"]]
    assert rec["prompt_tokens_est"] >= 39_000 and rec["headers_held"] == 1, rec
    assert "latency.network" not in codes, codes
    assert "latency.headers_held" in codes and "latency.prefill" in codes, codes
