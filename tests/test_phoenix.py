"""Traces into a real Arize Phoenix (`arize-phoenix` from PyPI in its own venv, .ci/phoenix, which
.ci/run installs): a fresh `firsttoken proxy` with nothing set but --otlp-endpoint files its spans
under the project "firsttoken" as LLM spans with the model, the provider's token counts (and
firsttoken's estimates under its own names only), the 401 as an error, TTFT as a child span; and
Phoenix's 405 to metrics is met once, not in a loop. Checked through Phoenix's REST API.

Slow (Phoenix takes ~30 s to start on a loaded machine). Skipped when .ci/phoenix is missing,
unless CI is set (then it fails)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import httpx
import openai
import pytest
from conftest import rows, start_proxy_process

from firsttoken.cli.loopback import free_port

pytestmark = pytest.mark.slow

PHOENIX = Path(__file__).resolve().parent.parent / ".ci" / "phoenix" / "bin" / "phoenix"


def phoenix_exe() -> str:
    if PHOENIX.exists():
        return str(PHOENIX)
    msg = "Arize Phoenix is not installed: python3 -m venv .ci/phoenix && .ci/phoenix/bin/pip install arize-phoenix"
    if os.environ.get("CI"):
        pytest.fail(msg + " -- CI is set, so this check must run (.ci/run installs it)")
    pytest.skip(msg)


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory):
    exe = phoenix_exe()
    work = tmp_path_factory.mktemp("phoenix")
    port, grpc = free_port(), free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "PHOENIX_"))}
    env.update(PHOENIX_WORKING_DIR=str(work), PHOENIX_HOST="127.0.0.1", PHOENIX_PORT=str(port),
               PHOENIX_GRPC_PORT=str(grpc), PHOENIX_TELEMETRY_ENABLED="false", DO_NOT_TRACK="1")
    log = open(work / "phoenix.log", "w")  # noqa: SIM115 - its access log: every POST it answered
    p = subprocess.Popen([exe, "serve"], env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 180
        while True:
            assert p.poll() is None, (work / "phoenix.log").read_text()[-3000:]
            try:
                if httpx.get(url + "/healthz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.time() < deadline, "Phoenix did not start within 180 s"
            time.sleep(0.5)
        yield url, work / "phoenix.log"
    finally:
        p.terminate()
        try:
            p.wait(20)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        log.close()


def project_spans(url: str, project: str) -> list[dict]:
    r = httpx.get(f"{url}/v1/projects/{project}/spans", params={"limit": 100}, timeout=10)
    return r.json().get("data", []) if r.status_code == 200 else []


def test_a_fresh_proxy_files_llm_spans_under_firsttoken_in_phoenix(phoenix, sim, tmp_path):
    url, log = phoenix
    db = tmp_path / "ft.db"
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    # (short export intervals: a push loop against the 405 would show within the test's seconds)
    env.update(OTEL_METRIC_EXPORT_INTERVAL="300", OTEL_BSP_SCHEDULE_DELAY="200")
    p, port = start_proxy_process(["-u", sim.url, "--db", str(db), "--otlp-endpoint", url], env=env)
    try:
        oa = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="sk-test-phoenix-000000000000000",
                           max_retries=0)
        stream = oa.chat.completions.create(model="gpt-4o-mini", max_tokens=30, stream=True,
                                            stream_options={"include_usage": True},
                                            messages=[{"role": "user", "content": "Say hello"}])
        assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
        stream = oa.chat.completions.create(model="gpt-4o-mini", max_tokens=30, stream=True,  # no usage asked
                                            messages=[{"role": "user", "content": "Say hello again, please"}])
        assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
        with pytest.raises(openai.AuthenticationError):
            oa.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "x"}],
                                       extra_headers={"x-sim-fault": "auth"})
        time.sleep(3)  # ten metric export intervals
    finally:
        p.send_signal(signal.SIGINT)
        try:
            out, err = p.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            out, err = p.communicate()
    recorded = {r["id"]: r for r in rows(db)}
    assert len(recorded) == 3

    deadline = time.time() + 30
    while len(llm := [s for s in project_spans(url, "firsttoken") if s.get("span_kind") == "LLM"]) < 3:
        assert time.time() < deadline, f"spans in Phoenix: {httpx.get(url + '/v1/projects', timeout=5).text}"
        time.sleep(0.5)
    names = {pr["name"] for pr in httpx.get(url + "/v1/projects", timeout=5).json()["data"]}
    assert "firsttoken" in names and not project_spans(url, "default")  # not in Phoenix's "default" project

    by_id = {s["attributes"]["firsttoken.request.id"]: s for s in llm}
    assert set(by_id) == set(recorded)
    for rid, s in by_id.items():
        row, a = recorded[rid], s["attributes"]
        assert a["llm.model_name"] == row["model"] == "gpt-4o-mini" and a["gen_ai.request.model"] == "gpt-4o-mini"
        if row["usage_prompt_tokens"] is not None:  # the provider's usage: Phoenix's token columns
            assert a["llm.token_count.prompt"] == row["usage_prompt_tokens"]
            assert a["llm.token_count.completion"] == row["usage_completion_tokens"]
            assert "firsttoken.tokens_estimated" not in a
        else:  # firsttoken's estimate: never as the provider's usage
            assert "llm.token_count.prompt" not in a and "gen_ai.usage.input_tokens" not in a
            assert a["firsttoken.estimated.input_tokens"] == row["prompt_tokens_est"] > 0
            assert a["firsttoken.tokens_estimated"] is True
    assert sum(recorded[r]["usage_prompt_tokens"] is not None for r in by_id) == 1
    bad = next(s for rid, s in by_id.items() if recorded[rid]["status"] == 401)
    assert bad["status_code"] == "ERROR" and "401" in bad["status_message"]
    assert recorded[bad["attributes"]["firsttoken.request.id"]]["top_code"] in bad["status_message"]
    # TTFT as a child span a backend charts (its latency is the TTFT)
    children = [s for s in project_spans(url, "firsttoken") if s["name"] == "time_to_first_token"]
    assert len(children) == sum(r["ttft_ms"] is not None for r in recorded.values()) == 2
    for c in children:
        assert c["parent_id"] == by_id[c["attributes"]["firsttoken.request.id"]]["context"]["span_id"]

    # Phoenix answers metrics with 405: met once, told once, not pushed to again
    metric_posts = [line for line in log.read_text().splitlines() if "POST /v1/metrics" in line]
    assert len(metric_posts) == 1 and "405" in metric_posts[0], metric_posts
    said = " ".join((out + err).split())
    assert said.count("does not take them") == 1, (out + err)[-3000:]
    told = said[said.index("does not take them") - 200:][:700]
    assert "405" in told and "--otlp-metrics-endpoint" in told, told
