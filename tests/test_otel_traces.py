"""OpenTelemetry trace spans: real SDK clients through the real proxy, spans pushed over OTLP/HTTP
to a loopback receiver that decodes the protobuf (opentelemetry-proto)."""

from __future__ import annotations

import datetime as dt
import json
import threading

import anthropic
import httpx
import openai
import pytest
from conftest import rows
from test_otel import Receiver, make_record, needs_otel, no_otel_env  # noqa: F401 - the fixture keeps OTEL_* out

from firsttoken.addon import otel as O
from firsttoken.cli.proxy.server import ProxyServer

SPAN_KIND_CLIENT = 3
STATUS_UNSET, STATUS_ERROR = 0, 2


def _value(v):
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [_value(x) for x in v.array_value.values]
    return getattr(v, kind) if kind else None


def _attrs(kvs) -> dict:
    return {kv.key: _value(kv.value) for kv in kvs}


def spans(rcv: Receiver) -> tuple[list, list[dict]]:
    """(spans, resource attributes per span) from every /v1/traces POST, decoded by opentelemetry-proto."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    out, resources = [], []
    for path, headers, body in rcv.posts:
        if path != "/v1/traces":
            continue
        assert headers["content-type"] == "application/x-protobuf"
        req = ExportTraceServiceRequest.FromString(body)
        for rs in req.resource_spans:
            for ss in rs.scope_spans:
                assert ss.scope.name == "firsttoken"
                for sp in ss.spans:
                    out.append(sp)
                    resources.append(_attrs(rs.resource.attributes))
    return out, resources


def _ns(iso: str) -> int:
    return int(dt.datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp() * 1e9)


def _check_timing(sp, row) -> None:
    start = _ns(row["started_at"])
    assert abs(sp.start_time_unix_nano - start) < 1_000_000  # the record's wall-clock start (ms precision)
    assert (sp.end_time_unix_nano - sp.start_time_unix_nano) / 1e6 == pytest.approx(row["total_ms"], abs=0.01)
    events = {e.name: e for e in sp.events}
    assert (events["response.headers"].time_unix_nano - sp.start_time_unix_nano) / 1e6 == pytest.approx(row["ttfb_ms"], abs=0.01)
    if row["ttft_ms"] is not None:
        assert (events["first_token"].time_unix_nano - sp.start_time_unix_nano) / 1e6 == pytest.approx(row["ttft_ms"], abs=0.01)
        assert _attrs(events["first_token"].attributes)["firsttoken.gap_ms"] == pytest.approx(row["gap_ms"])
    else:
        assert "first_token" not in events
    assert _attrs(events["response.headers"].attributes)["http.response.status_code"] == row["status"]


@needs_otel
def test_sdk_calls_through_the_proxy_become_genai_spans(sim, db_path):
    threads: set[str] = set()
    with Receiver() as rcv:
        with ProxyServer([sim.url], str(db_path), port=0, otlp_endpoint=rcv.url) as p:
            assert p.otlp_traces_endpoint == rcv.url + "/v1/traces" and p.otlp_endpoint == rcv.url + "/v1/metrics"
            p.capture.listeners.append(lambda rec: threads.add(threading.current_thread().name))
            oa = openai.OpenAI(base_url=p.url + "/v1", api_key="sk-test-otel-traces-0000000000000", max_retries=0)
            stream = oa.chat.completions.create(model="gpt-4o-mini", max_tokens=40, stream=True,
                                                stream_options={"include_usage": True},
                                                messages=[{"role": "user", "content": "Say hello"}])
            text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
            assert text
            an = anthropic.Anthropic(base_url=p.url, api_key="sk-ant-test-otel-000000000000000000", max_retries=0)
            msg = an.messages.create(model="claude-sonnet-4-5", max_tokens=30,
                                     messages=[{"role": "user", "content": "Hi"}])
            assert msg.content
            with pytest.raises(openai.AuthenticationError):
                oa.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "x"}],
                                           extra_headers={"x-sim-fault": "auth"})
            assert httpx.get(p.url + "/v1/models", timeout=5).status_code == 200  # not an LLM call: no span
            p.flush()
        # stop() ran mitmproxy's done hooks: Capture handed over every record, then the batch was sent
        got, resources = spans(rcv)
    assert threads == {"firsttoken-analyzer"}  # spans are made by a Capture listener: the analysis thread
    db = {r["id"]: r for r in rows(db_path)}
    # one LLM span per call, and a TTFT child span under each call that had a first token
    children = [sp for sp in got if sp.name == O.TTFT_SPAN]
    got = [sp for sp in got if sp.name != O.TTFT_SPAN]
    assert len(db) == 4 and len(got) == 3
    by_id = {_attrs(sp.attributes)["firsttoken.request.id"]: sp for sp in got}
    assert set(by_id) == {i for i, r in db.items() if r["api"] != "other"}
    # filed under "firsttoken" with nothing set: the service (Jaeger, Tempo, Langfuse) and the project (Phoenix)
    assert all(r["service.name"] == "firsttoken" and r["openinference.project.name"] == "firsttoken" for r in resources)
    with_ttft = {rid for rid, sp in by_id.items() if db[rid]["ttft_ms"] is not None}
    assert with_ttft and {_attrs(c.attributes)["firsttoken.request.id"] for c in children} == with_ttft
    for c in children:
        parent = by_id[_attrs(c.attributes)["firsttoken.request.id"]]
        assert c.parent_span_id == parent.span_id and c.trace_id == parent.trace_id
        assert c.start_time_unix_nano == parent.start_time_unix_nano
        row = db[_attrs(c.attributes)["firsttoken.request.id"]]
        assert abs((c.end_time_unix_nano - c.start_time_unix_nano) / 1e6 - row["ttft_ms"]) < 0.01

    for rid, sp in by_id.items():
        row, a = db[rid], _attrs(sp.attributes)
        assert sp.kind == SPAN_KIND_CLIENT and a["openinference.span.kind"] == "LLM"
        assert a["llm.model_name"] == row["model"]
        assert sp.name == f"chat {row['model']}"
        assert a["gen_ai.operation.name"] == "chat" and a["gen_ai.request.model"] == row["model"]
        assert a["gen_ai.response.model"] == row["model"]
        assert a["server.address"] == "127.0.0.1" and a["server.port"] == sim.port
        assert a["http.response.status_code"] == row["status"]
        for col in ("ttfb_ms", "ttft_ms", "gap_ms", "tpot_ms"):
            assert a.get(f"firsttoken.{col}") == row[col]
        codes = [f["code"] for f in json.loads(row["findings"] or "[]")]
        assert a.get("firsttoken.findings", []) == codes and a.get("firsttoken.top_finding") == row["top_code"]
        _check_timing(sp, row)

    ok = next(sp for rid, sp in by_id.items() if db[rid]["api"] == "openai.chat" and db[rid]["status"] == 200)
    a, row = _attrs(ok.attributes), db[_attrs(ok.attributes)["firsttoken.request.id"]]
    assert a["gen_ai.provider.name"] == "openai" and a["gen_ai.request.max_tokens"] == 40
    assert a["gen_ai.usage.input_tokens"] == row["usage_prompt_tokens"] > 0
    assert a["gen_ai.usage.output_tokens"] == row["usage_completion_tokens"] > 0
    assert a["llm.token_count.prompt"] == row["usage_prompt_tokens"] and "firsttoken.tokens_estimated" not in a
    assert a["firsttoken.estimated.input_tokens"] == row["prompt_tokens_est"]  # beside it, under its own name
    assert a["gen_ai.response.finish_reasons"] == [row["finish_reason"]]
    assert ok.status.code == STATUS_UNSET and "error.type" not in a
    assert [e.name for e in ok.events] == ["response.headers", "first_token"]

    claude = next(sp for sp in got if _attrs(sp.attributes)["gen_ai.provider.name"] == "anthropic")
    a = _attrs(claude.attributes)
    assert claude.name == "chat claude-sonnet-4-5" and a["gen_ai.request.max_tokens"] == 30
    assert a["gen_ai.usage.input_tokens"] == msg.usage.input_tokens
    assert a["gen_ai.usage.output_tokens"] == msg.usage.output_tokens
    assert a["gen_ai.response.finish_reasons"] == [msg.stop_reason] and claude.status.code == STATUS_UNSET

    bad = next(sp for sp in got if _attrs(sp.attributes)["http.response.status_code"] == 401)
    a = _attrs(bad.attributes)
    assert bad.status.code == STATUS_ERROR and a["error.type"] == "401"
    assert a["firsttoken.top_finding"] and a["firsttoken.top_finding"] in bad.status.message
    assert a["firsttoken.top_finding"] in a["firsttoken.findings"]
    # a 401 has no usage: its token count is firsttoken's estimate, never exported as the provider's usage
    assert db[a["firsttoken.request.id"]]["usage_prompt_tokens"] is None
    assert not {"gen_ai.usage.input_tokens", "llm.token_count.prompt", "llm.token_count.total"} & set(a)
    assert a["firsttoken.estimated.input_tokens"] == db[a["firsttoken.request.id"]]["prompt_tokens_est"] > 0
    assert a["firsttoken.tokens_estimated"] is True


@needs_otel
def test_span_attributes_conversation_and_failure_without_response():
    rec = make_record(finish_reason="length", max_tokens=64,
               findings=[{"code": "stream.slow_first_token"}, {"code": "latency.slow_ttfb"}],
               top_code="stream.slow_first_token", top_severity="warning")
    rec.conversation_id = "conv-42"  # the conversations branch adds the column; spans carry it when there
    a = O.span_attributes(rec)
    assert a["gen_ai.conversation.id"] == "conv-42"
    assert a["gen_ai.response.finish_reasons"] == ["length"] and a["gen_ai.request.max_tokens"] == 64
    assert a["firsttoken.findings"] == ["stream.slow_first_token", "latency.slow_ttfb"]
    assert a["firsttoken.top_finding"] == "stream.slow_first_token"
    assert a["server.address"] == "api.openai.com" and a["server.port"] == 443
    assert "gen_ai.conversation.id" not in O.span_attributes(make_record())

    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    mem = InMemorySpanExporter()
    traces = O.OtelTraces([SimpleSpanProcessor(mem)])
    refused = make_record(id="r2", status=None, error="Connection refused", ttfb_ms=None, first_byte_ms=None, ttft_ms=None,
                   gap_ms=None, total_ms=3.5, usage_prompt_tokens=None, prompt_tokens_est=17,
                   usage_completion_tokens=None, event_offsets=[], model=None)
    traces.observe(refused)
    traces.observe(make_record(id="r3", api="other"))  # not an LLM call
    traces.observe(make_record(id="r4", started_at="not a time"))  # no wall-clock start: skipped, not an error
    (sp,) = mem.get_finished_spans()
    assert sp.name == "chat" and sp.status.status_code.name == "ERROR" and sp.events == ()
    assert sp.attributes["error.type"] == "connection_refused" and "gen_ai.request.model" not in sp.attributes
    assert "gen_ai.usage.input_tokens" not in sp.attributes  # an estimate is not the provider's usage
    assert sp.attributes["firsttoken.estimated.input_tokens"] == 17 and sp.attributes["firsttoken.tokens_estimated"] is True
    assert (sp.end_time - sp.start_time) == 3_500_000
    assert traces.errors == 0
    traces.close()
    traces.close()  # idempotent
    traces.observe(make_record(id="late"))
    assert len(mem.get_finished_spans()) == 1


def traces_url(endpoint: str) -> str:
    return O.signal_url(endpoint, "traces")


def test_endpoint_rules_for_both_signals():
    assert traces_url("http://c:4318") == "http://c:4318/v1/traces"
    assert traces_url("http://c:4318/") == "http://c:4318/v1/traces"
    # the form documented for metrics first: spans go beside it
    assert traces_url("http://c:4318/v1/metrics") == "http://c:4318/v1/traces"
    assert O.metrics_url("http://c:4318/v1/traces") == "http://c:4318/v1/metrics"
    # a base with a path (a gateway's /otlp): both signals under it, as OTEL_EXPORTER_OTLP_ENDPOINT does
    assert traces_url("https://gw.example/otlp") == "https://gw.example/otlp/v1/traces"
    assert O.metrics_url("https://gw.example/otlp") == "https://gw.example/otlp/v1/metrics"
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}
    assert O.env_endpoint(env, signal="traces") == "http://c:4318/v1/traces"
    assert O.env_endpoint({**env, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://t:1/x"}, signal="traces") == "http://t:1/x"
    assert O.env_endpoint({"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": "http://m:1/x"}, signal="traces") is None
    assert O.env_endpoint({**env, "OTEL_TRACES_EXPORTER": "none"}, signal="traces") is None
    assert O.env_endpoint({**env, "OTEL_TRACES_EXPORTER": "none"}) == "http://c:4318/v1/metrics"


@needs_otel
def test_addon_env_switches_one_signal_off(monkeypatch):
    from mitmproxy.test import taddons

    from firsttoken.addon.capture import Capture

    with Receiver() as rcv:
        cap = Capture()
        addon = O.OtelAddon(cap)
        monkeypatch.setenv("OTEL_METRICS_EXPORTER", "none")
        with taddons.context(addon) as tctx:
            tctx.configure(addon, firsttoken_otlp_endpoint=rcv.url + "/v1/metrics")  # the old form
            assert addon.otel is None and addon.traces_endpoint == rcv.url + "/v1/traces"
            cap.listeners[0](make_record())
            addon.done()
        got, _ = spans(rcv)
    assert {p for p, _, _ in rcv.posts} == {"/v1/traces"}
    assert [_attrs(sp.attributes)["firsttoken.request.id"] for sp in got if sp.name != O.TTFT_SPAN] == ["r1"]


def _push_three(refuse: dict[str, int]) -> Receiver:
    """Three records through a proxy's OTel addon to a receiver that refuses ``refuse``, each span
    flushed and several metric intervals apart: the receiver, stopped, with what it was sent."""
    import time

    from mitmproxy.test import taddons

    from firsttoken.addon.capture import Capture

    with Receiver(refuse=refuse) as rcv:
        cap = Capture()
        addon = O.OtelAddon(cap, export_interval_s=0.1)
        with taddons.context(addon) as tctx:
            tctx.configure(addon, firsttoken_otlp_endpoint=rcv.url)
            for i in range(3):
                cap.listeners[0](make_record(id=f"r{i}"))
                addon.traces.force_flush()
                time.sleep(0.4)  # several export intervals, each with new data
            addon.done()
    return rcv


@needs_otel
@pytest.mark.parametrize("status", [405, 404])
def test_an_endpoint_that_refuses_metrics_is_told_once_and_not_pushed_to_again(status, caplog):
    """Phoenix and Langfuse take traces, not metrics (405 / 404 to /v1/metrics): one plain warning,
    no more metrics pushed there, and the spans still go; --otlp-metrics-endpoint sends them elsewhere."""
    import logging

    from mitmproxy.test import taddons

    from firsttoken.addon.capture import Capture

    caplog.set_level(logging.WARNING, logger="firsttoken")
    rcv = _push_three(refuse={"/v1/metrics": status})
    sent = [p for p, _, _ in rcv.posts]
    assert sent.count("/v1/metrics") == 1, sent  # refused once, never again (no push loop)
    assert sent.count("/v1/traces") >= 1
    got, _ = spans(rcv)
    assert {_attrs(sp.attributes)["firsttoken.request.id"] for sp in got} == {"r0", "r1", "r2"}
    told = [r.getMessage() for r in caplog.records if "does not take them" in r.getMessage()]
    assert len(told) == 1, told
    assert str(status) in told[0] and "--otlp-metrics-endpoint" in told[0] and "OTEL_METRICS_EXPORTER=none" in told[0]

    # the metrics elsewhere: a collector that takes them, the spans still to the traces-only backend
    with Receiver(refuse={"/v1/metrics": status}) as phoenix, Receiver() as collector:
        cap = Capture()
        addon = O.OtelAddon(cap, export_interval_s=0.1)
        with taddons.context(addon) as tctx:
            tctx.configure(addon, firsttoken_otlp_endpoint=phoenix.url, firsttoken_otlp_metrics_endpoint=collector.url)
            assert addon.endpoint == collector.url + "/v1/metrics" and addon.traces_endpoint == phoenix.url + "/v1/traces"
            cap.listeners[0](make_record(id="m1"))
            addon.done()
        assert {p for p, _, _ in phoenix.posts} == {"/v1/traces"}
        assert {p for p, _, _ in collector.posts} == {"/v1/metrics"}


@needs_otel
@pytest.mark.parametrize("status", [401, 403])
def test_an_endpoint_that_wants_credentials_is_told_once_and_not_pushed_to_again(status, caplog):
    """A collector behind auth (Langfuse without its keys): each signal is refused once, said once, then left."""
    import logging

    caplog.set_level(logging.WARNING, logger="firsttoken")
    sent = [p for p, _, _ in _push_three(refuse={"/v1/metrics": status, "/v1/traces": status}).posts]
    assert sent.count("/v1/metrics") == 1 and sent.count("/v1/traces") == 1, sent
    told = [r.getMessage() for r in caplog.records if "wants credentials" in r.getMessage()]
    assert len(told) == 2 and all(str(status) in t and "OTEL_EXPORTER_OTLP_HEADERS" in t for t in told), told


@needs_otel
def test_spans_are_filed_under_firsttoken_unless_the_user_says_otherwise(monkeypatch):
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    def resource() -> dict:
        mem = InMemorySpanExporter()
        traces = O.OtelTraces([SimpleSpanProcessor(mem)])
        traces.observe(make_record())
        traces.close()
        return dict(mem.get_finished_spans()[0].resource.attributes)

    got = resource()
    assert got["service.name"] == got["openinference.project.name"] == "firsttoken"  # nothing set
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", "openinference.project.name=team-a,deployment.environment=dev")
    monkeypatch.setenv("OTEL_SERVICE_NAME", "gateway")
    got = resource()
    assert got["openinference.project.name"] == "team-a" and got["service.name"] == "gateway"  # the user's win
    assert got["deployment.environment"] == "dev"
