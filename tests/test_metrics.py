"""Prometheus metrics: a real proxy in front of the simulator, the endpoint scraped and parsed."""

from __future__ import annotations

import inspect
import json
from collections import defaultdict

import httpx
import pytest
from conftest import rows
from prometheus_client.parser import text_string_to_metric_families

from firsttoken.addon import metrics as M
from firsttoken.addon.record import Record
from firsttoken.cli.proxy.server import ProxyServer

DUR = "gen_ai_client_operation_duration_seconds"
TTFC = "gen_ai_client_operation_time_to_first_chunk_seconds"
TPOC = "gen_ai_client_operation_time_per_output_chunk_seconds"
TOK = "gen_ai_client_token_usage"


def scrape(url: str) -> dict[str, list]:
    """{sample name: [(labels, value), ...]} of a /metrics page, parsed by prometheus_client."""
    r = httpx.get(url, timeout=5)
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/plain")
    out: dict[str, list] = defaultdict(list)
    for fam in text_string_to_metric_families(r.text):
        for s in fam.samples:
            out[s.name].append((s.labels, s.value))
    return out


def value(samples, name, **labels) -> float:
    """Sum of the samples of ``name`` whose labels include ``labels``."""
    return sum(v for lab, v in samples.get(name, []) if all(lab.get(k) == str(x) for k, x in labels.items()))


@pytest.fixture
def metered(proxy):
    m = M.Metrics().attach(proxy.capture)
    srv = m.serve("127.0.0.1", 0)
    yield m, srv
    srv.close()


def test_scraped_metrics_match_the_records(sim, proxy, db_path, metered):
    import anthropic
    import openai

    m, srv = metered
    oai = openai.OpenAI(base_url=proxy.url + "/v1", api_key="sk-test-metrics-0000000000000000")
    stream = oai.chat.completions.create(model="sim-1", messages=[{"role": "user", "content": "Hello there"}],
                                         stream=True, stream_options={"include_usage": True})
    assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    oai.chat.completions.create(model="sim-1", messages=[{"role": "user", "content": "no stream"}])
    with pytest.raises(openai.AuthenticationError):
        oai.with_options(max_retries=0).chat.completions.create(
            model="sim-1", messages=[{"role": "user", "content": "x"}], extra_headers={"x-sim-fault": "auth"})
    ant = anthropic.Anthropic(base_url=proxy.url, api_key="sk-ant-test-metrics-000000000000")
    with ant.messages.stream(model="claude-sim", max_tokens=50, messages=[{"role": "user", "content": "Hi"}]) as s:
        assert s.get_final_text()
    httpx.get(proxy.url + "/v1/models", timeout=5)  # not an LLM call: counted, no gen_ai_* sample
    proxy.flush()
    db = {r["model"] or "models": r for r in rows(db_path)}
    assert len(rows(db_path)) == 5
    got = scrape(srv.url)

    common = dict(server_address="127.0.0.1", server_port=sim.port)
    # duration: every LLM call once; error_type on the 401 only
    assert value(got, DUR + "_count") == 4
    assert value(got, DUR + "_count", gen_ai_operation_name="chat", gen_ai_provider_name="openai",
                 gen_ai_request_model="sim-1", error_type="", **common) == 2
    assert value(got, DUR + "_count", gen_ai_provider_name="openai", error_type="401") == 1
    assert value(got, DUR + "_count", gen_ai_provider_name="anthropic", gen_ai_request_model="claude-sim",
                 error_type="", **common) == 1
    openai_rows = [r for r in rows(db_path) if r["api"] == "openai.chat"]
    assert value(got, DUR + "_sum", gen_ai_provider_name="openai") == pytest.approx(
        sum(r["total_ms"] for r in openai_rows) / 1000, rel=1e-6)
    # +Inf bucket == count; the semconv's boundaries are there
    assert value(got, DUR + "_bucket", le="+Inf") == 4
    les = {lab["le"] for lab, _ in got[DUR + "_bucket"]}
    assert {"0.01", "0.16", "81.92", "+Inf"} <= les

    # streaming-only metrics: the two streams, not the plain or failed calls
    assert value(got, TTFC + "_count") == 2
    stream_rows = [r for r in rows(db_path) if r["stream"] == 1 and r["status"] == 200]
    assert len(stream_rows) == 2
    assert value(got, TTFC + "_sum") == pytest.approx(sum(r["first_byte_ms"] for r in stream_rows) / 1000, rel=1e-6)
    gaps = sum(len(json.loads(r["event_offsets"])) - 1 for r in stream_rows)
    assert gaps > 10 and value(got, TPOC + "_count") == gaps

    # tokens: the API's usage, by type
    ant_row = db["claude-sim"]
    assert value(got, TOK + "_sum", gen_ai_token_type="output", gen_ai_provider_name="anthropic") == \
        ant_row["usage_completion_tokens"]
    assert value(got, TOK + "_sum", gen_ai_token_type="input", gen_ai_provider_name="anthropic") == \
        ant_row["usage_prompt_tokens"]
    assert value(got, TOK + "_count", gen_ai_token_type="output", gen_ai_request_model="sim-1") >= 2

    # firsttoken's own
    assert value(got, "firsttoken_requests_total") == 5
    assert value(got, "firsttoken_requests_total", api="other", status_class="2xx") == 1
    assert value(got, "firsttoken_requests_total", status_class="4xx") == 1
    assert value(got, "firsttoken_requests_total", gen_ai_request_model="claude-sim") == 1
    # the TTFT - TTFB split, per request that had both
    split = [r for r in rows(db_path) if r["gap_ms"] is not None]
    assert split and value(got, "firsttoken_gap_seconds_count") == len(split)
    assert value(got, "firsttoken_gap_seconds_sum") == pytest.approx(sum(max(r["gap_ms"], 0) for r in split) / 1000, rel=1e-6)
    assert value(got, "firsttoken_ttfb_seconds_count", route="default") == 5
    assert value(got, "firsttoken_time_to_first_token_seconds_count") == sum(
        1 for r in rows(db_path) if r["ttft_ms"] is not None)
    findings = defaultdict(int)
    for r in rows(db_path):
        for f in json.loads(r["findings"] or "[]"):
            findings[(f["code"], f["severity"])] += 1
    for (code, sev), n in findings.items():
        assert value(got, "firsttoken_findings_total", code=code, severity=sev) == n
    assert value(got, "firsttoken_in_flight_requests") == 0
    assert m.errors == 0


def make_record(**kw) -> Record:
    base = dict(id="r1", started_at="2025-01-01T00:00:00Z", route="default", api="openai.chat",
                upstream="https://api.openai.com", upstream_url="https://api.openai.com:443/v1/chat/completions",
                model="gpt-4o", status=200, total_ms=1500.0, ttfb_ms=200.0, first_byte_ms=210.0,
                ttft_ms=400.0, stream=True, event_offsets=[400.0, 420.0, 460.0])
    base.update(kw)
    return Record(**base)


def test_observe_labels_errors_findings_and_model_cap(monkeypatch):
    m = M.Metrics()
    srv = m.serve("127.0.0.1", 0)
    try:
        m.observe(make_record(findings=[{"code": "slow_prefill", "severity": "warn", "message": "x"},
                                 {"code": "usage_missing", "severity": "info", "message": "y"}],
                       usage_prompt_tokens=None, prompt_tokens_est=1234, usage_completion_tokens=7))
        m.observe(make_record(id="r2", status=None, error="Connection refused", ttfb_ms=None, first_byte_ms=None,
                       ttft_ms=None, event_offsets=[], upstream_url="https://x.openai.azure.com:443/openai/x"))
        m.observe(make_record(id="r3", upstream_url="https://api.deepseek.com/chat/completions", stream=False,
                       content_type="text/event-stream", stream_done=False, model=None))
        m.observe(make_record(id="r4", api="openai.completions", upstream_url="http://127.0.0.1:9/v1/completions",
                       upstream_error="boom", upstream_error_type="overloaded_error"))
        m.observe(make_record(id="r5", api="anthropic.messages", upstream_url="http://10.0.0.2:8000/v1/messages"))
        m.observe(Record(id="broken", started_at="x", api="openai.chat", event_offsets=None))  # tolerated
        got = scrape(srv.url)
    finally:
        srv.close()
    assert value(got, "firsttoken_findings_total", code="slow_prefill", severity="warn") == 1
    assert value(got, "firsttoken_findings_total", code="usage_missing", severity="info") == 1
    # an estimate is never passed off as the API's usage: it has its own histogram
    assert value(got, "firsttoken_client_token_estimated_sum", gen_ai_token_type="input",
                 gen_ai_request_model="gpt-4o") == 1234
    assert value(got, TOK + "_count", gen_ai_token_type="input", gen_ai_request_model="gpt-4o") == 0
    assert value(got, TOK + "_sum", gen_ai_token_type="output", gen_ai_request_model="gpt-4o") == 7
    assert value(got, DUR + "_count", error_type="connection_refused", gen_ai_provider_name="azure.ai.openai",
                 server_address="x.openai.azure.com", server_port=443) == 1
    assert value(got, "firsttoken_requests_total", status_class="error") == 2
    assert value(got, DUR + "_count", gen_ai_provider_name="deepseek", error_type="incomplete_stream",
                 gen_ai_request_model="") == 1
    assert value(got, DUR + "_count", gen_ai_operation_name="text_completion", error_type="overloaded_error") == 1
    assert value(got, DUR + "_count", gen_ai_provider_name="anthropic", server_address="10.0.0.2") == 1
    assert value(got, TPOC + "_count", server_address="api.openai.com") == 2
    assert value(got, TTFC + "_count", gen_ai_provider_name="deepseek") == 1  # SSE content type = streaming
    assert m.errors == 0

    monkeypatch.setattr(M, "MAX_MODELS", 5)
    cap = M.Metrics()
    for i in range(M.MAX_MODELS + 5):
        cap.observe(make_record(id=str(i), model=f"m{i}"))
    models = {lab["gen_ai_request_model"] for lab, _ in
              (s for s in _samples(cap) if s[0].get("gen_ai_request_model") is not None)}
    assert "_OTHER" in models and len(models) == M.MAX_MODELS + 1


def _samples(m: M.Metrics):
    from prometheus_client import generate_latest

    for fam in text_string_to_metric_families(generate_latest(m.registry).decode()):
        for s in fam.samples:
            yield s.labels, s.value


def test_metrics_addon_serves_while_the_option_is_set():
    from mitmproxy.test import taddons

    from firsttoken.addon.capture import Capture

    cap = Capture()
    addon = M.MetricsAddon(cap)
    with taddons.context(addon) as tctx:
        assert addon.server is None  # off by default
        tctx.configure(addon, firsttoken_metrics_port=0)
        assert addon.server is not None and addon.url.endswith("/metrics")
        cap.listeners[0](make_record())  # the Capture listener feeds the registry
        assert value(scrape(addon.url), DUR + "_count") == 1
        busy = addon.server.port
        tctx.configure(addon, firsttoken_metrics_port=None)
        assert addon.server is None
        with pytest.raises(httpx.ConnectError):
            httpx.get(f"http://127.0.0.1:{busy}/metrics", timeout=2)
        # a port in use is a clear option error, not a crash
        import socket

        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        s.listen()
        try:
            from mitmproxy import exceptions

            with pytest.raises(exceptions.OptionsError, match="cannot serve metrics"):
                tctx.configure(addon, firsttoken_metrics_port=s.getsockname()[1])
        finally:
            s.close()
        addon.done()
    assert len(cap.listeners) == 1  # attached once, however often reconfigured


@pytest.mark.skipif("metrics_port" not in inspect.signature(ProxyServer.__init__).parameters,
                    reason="needs the lead's wiring: ProxyServer(metrics_port=) adding MetricsAddon")
def test_proxy_server_metrics_port(sim, db_path):
    with ProxyServer([sim.url], str(db_path), port=0, metrics_port=0) as p:
        assert p.metrics_url and p.metrics_url.endswith("/metrics")
        httpx.post(p.url + "/v1/chat/completions", timeout=10,
                   json={"model": "sim-1", "messages": [{"role": "user", "content": "x"}], "stream": True})
        p.flush()
        got = scrape(p.metrics_url)
    assert value(got, DUR + "_count", gen_ai_request_model="sim-1") == 1
    assert value(got, TTFC + "_count") == 1
    with ProxyServer([sim.url], str(db_path), port=0) as p:
        assert p.metrics_url is None  # off unless asked for


def test_a_metrics_port_out_of_range_is_an_option_error_not_a_silent_nothing():
    """`mitmdump -s … --set firsttoken_metrics_port=70000` (no click option in between): socket
    bind raises OverflowError, which mitmproxy would log and carry on with no endpoint."""
    from mitmproxy import exceptions
    from mitmproxy.test import taddons

    from firsttoken.addon.capture import Capture

    addon = M.MetricsAddon(Capture())
    with taddons.context(addon) as tctx:
        with pytest.raises(exceptions.OptionsError, match="cannot serve metrics on 127.0.0.1:70000.*--metrics-port") as e:
            tctx.configure(addon, firsttoken_metrics_port=70000)
        assert addon.server is None
        # socket's message ends with a period of its own ("port must be 0-65535."): joined, one period
        assert "0-65535. Pick another --metrics-port." in str(e.value) and ".." not in str(e.value)
        addon.done()


def test_a_message_joined_into_a_sentence_keeps_one_period():
    from firsttoken.addon.safe_text import clause

    for said in ("for details.", "for details", " for details. ", "for details。"):
        assert f"mitmproxy: {clause(said)}. Check --upstream." == "mitmproxy: for details. Check --upstream."
    assert clause("wait...") == "wait..."  # an ellipsis stays
    assert clause(OSError(98, "Address already in use")) == "[Errno 98] Address already in use"
