"""OpenTelemetry export (optional extra): real records through the SDK, and OTLP/HTTP to a real receiver."""

from __future__ import annotations

import gzip
import inspect
import json
import logging
import sys
import threading
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest
from conftest import rows

from firsttoken.addon import metrics as M
from firsttoken.addon import otel as O
from firsttoken.addon.capture import Capture
from firsttoken.addon.record import Record
from firsttoken.cli.proxy.server import ProxyServer


def otel_available() -> bool:
    """Whether the `otel` extra is installed: the SDK and the OTLP/HTTP exporter of both signals."""
    try:
        import opentelemetry.exporter.otlp.proto.http.metric_exporter  # noqa: F401
        import opentelemetry.exporter.otlp.proto.http.trace_exporter  # noqa: F401
        import opentelemetry.sdk.metrics  # noqa: F401
        import opentelemetry.sdk.trace  # noqa: F401
    except ImportError:
        return False
    return True


HAVE_OTEL = otel_available()
needs_otel = pytest.mark.skipif(
    not HAVE_OTEL, reason="opentelemetry-sdk / opentelemetry-exporter-otlp-proto-http not installed "
                          "(pip install 'firsttoken[otel]')")

NAMES = {O.DURATION, O.TTFC, O.TPOC, O.TOKENS}
CHAT = {"model": "sim-1", "messages": [{"role": "user", "content": "Hello there"}], "stream": True,
        "stream_options": {"include_usage": True}}


@pytest.fixture(autouse=True)
def no_otel_env(monkeypatch):
    """The developer's own OTEL_* settings must not leak into these tests."""
    import os

    for k in list(os.environ):
        if k.startswith("OTEL_"):
            monkeypatch.delenv(k)


# -- helpers -------------------------------------------------------------------------------

def points(reader) -> dict[str, tuple[str, list]]:
    """{instrument name: (unit, [data points])} from an InMemoryMetricReader."""
    out: dict[str, tuple[str, list]] = {}
    data = reader.get_metrics_data()
    for rm in data.resource_metrics if data else ():
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                out[m.name] = (m.unit, list(m.data.data_points))
    return out


def only(pts, **attrs):
    return [p for p in pts if all(p.attributes.get(k) == v for k, v in attrs.items())]


class Receiver:
    """A minimal OTLP/HTTP collector on loopback: keeps each POST's path, headers and decoded body;
    answers /v1/metrics and /v1/traces as a collector does, anything else 404."""

    def __init__(self, refuse: dict[str, int] | None = None) -> None:
        self.refuse = refuse or {}  # path -> the status a backend that takes no such signal answers (Phoenix: 405)
        self.posts: list[tuple[str, dict, bytes]] = []
        self.got = threading.Event()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                enc = (self.headers.get("content-encoding") or "").lower()
                body = gzip.decompress(body) if enc == "gzip" else zlib.decompress(body) if enc == "deflate" else body
                outer.posts.append((self.path, {k.lower(): v for k, v in self.headers.items()}, body))
                from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceResponse
                from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

                reply = (ExportTraceServiceResponse() if self.path == "/v1/traces" else
                         ExportMetricsServiceResponse()).SerializeToString()
                self.send_response(outer.refuse.get(self.path) or (200 if self.path in ("/v1/metrics", "/v1/traces")
                                                                   else 404))
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)
                outer.got.set()

            def log_message(self, *a) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> Receiver:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def metrics(self) -> dict[str, list]:
        """{metric name: [histogram data points]} over every request received, decoded by opentelemetry-proto."""
        from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest

        out: dict[str, list] = {}
        for path, headers, body in self.posts:
            if path == "/v1/traces":
                continue
            assert path == "/v1/metrics" and headers["content-type"] == "application/x-protobuf"
            req = ExportMetricsServiceRequest.FromString(body)
            for rm in req.resource_metrics:
                for sm in rm.scope_metrics:
                    for m in sm.metrics:
                        out.setdefault(m.name, []).extend(m.histogram.data_points)
        return out

    def resource(self) -> dict[str, str]:
        from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest

        req = ExportMetricsServiceRequest.FromString([b for p, _, b in self.posts if p == "/v1/metrics"][-1])
        return {kv.key: kv.value.string_value for kv in req.resource_metrics[0].resource.attributes}


def pb_attrs(dp) -> dict:
    out = {}
    for kv in dp.attributes:
        v = kv.value
        out[kv.key] = v.int_value if v.WhichOneof("value") == "int_value" else v.string_value
    return out


def make_record(**kw) -> Record:
    base = dict(id="r1", started_at="2025-01-01T00:00:00Z", route="default", api="openai.chat",
                upstream="https://api.openai.com", upstream_url="https://api.openai.com:443/v1/chat/completions",
                model="gpt-4o", status=200, total_ms=1500.0, ttfb_ms=200.0, first_byte_ms=210.0,
                ttft_ms=400.0, stream=True, event_offsets=[400.0, 420.0, 460.0],
                usage_prompt_tokens=30, usage_completion_tokens=3)
    base.update(kw)
    return Record(**base)


# -- (1) real records through the SDK ---------------------------------------------------

@needs_otel
def test_proxy_records_become_genai_instruments(sim, proxy, db_path):
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    reader = InMemoryMetricReader()
    otel = O.OtelMetrics([reader])
    threads: set[str] = set()
    proxy.capture.listeners.append(lambda rec: (threads.add(threading.current_thread().name), otel.observe(rec)))

    with httpx.stream("POST", proxy.url + "/v1/chat/completions", json=CHAT, timeout=20,
                      headers={"authorization": "Bearer sk-test-otel-000000000000000000"}) as r:
        assert r.status_code == 200 and b"[DONE]" in b"".join(r.iter_raw())
    r = httpx.post(proxy.url + "/v1/chat/completions", timeout=20, headers={"x-sim-fault": "auth"},
                   json={"model": "sim-1", "messages": [{"role": "user", "content": "x"}]})
    assert r.status_code == 401
    assert httpx.get(proxy.url + "/v1/models", timeout=5).status_code == 200  # not an LLM call: no instrument
    proxy.flush()
    db = rows(db_path)
    assert len(db) == 3
    ok = next(r for r in db if r["status"] == 200 and r["api"] == "openai.chat")
    bad = next(r for r in db if r["status"] == 401)

    got = points(reader)
    assert set(got) - {O.ESTIMATED_TOKENS} == NAMES
    assert {n: u for n, (u, _) in got.items() if n in NAMES} == {O.DURATION: "s", O.TTFC: "s", O.TPOC: "s",
                                                                  O.TOKENS: "{token}"}
    assert threads == {"firsttoken-analyzer"}  # the analysis thread, not the proxy's event loop
    assert otel.errors == 0

    common = {"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "gen_ai.request.model": "sim-1",
              "server.address": "127.0.0.1", "server.port": sim.port}
    # duration: one point per attribute set; error.type only on the 401
    _, dur = got[O.DURATION]
    assert len(dur) == 2 and sum(p.count for p in dur) == 2
    (good,) = [p for p in dur if "error.type" not in p.attributes]
    (fail,) = only(dur, **{"error.type": "401"})
    assert dict(good.attributes) == common and dict(fail.attributes) == {**common, "error.type": "401"}
    assert good.count == 1 and good.sum == pytest.approx(ok["total_ms"] / 1000)
    assert fail.count == 1 and fail.sum == pytest.approx(bad["total_ms"] / 1000)
    for p in dur:
        assert tuple(p.explicit_bounds) == M.DURATION_BUCKETS and len(p.bucket_counts) == len(M.DURATION_BUCKETS) + 1
        assert sum(p.bucket_counts) == p.count

    # streaming-only instruments: the stream, not the 401
    _, ttfc = got[O.TTFC]
    assert [(dict(p.attributes), p.count) for p in ttfc] == [(common, 1)]
    assert ttfc[0].sum == pytest.approx(ok["first_byte_ms"] / 1000)
    assert tuple(ttfc[0].explicit_bounds) == M.DURATION_BUCKETS
    _, tpoc = got[O.TPOC]
    offsets = json.loads(ok["event_offsets"])
    assert len(offsets) == sim.config.output_tokens and len(tpoc) == 1
    assert dict(tpoc[0].attributes) == common and tpoc[0].count == len(offsets) - 1
    assert tpoc[0].sum == pytest.approx((offsets[-1] - offsets[0]) / 1000, abs=1e-3)

    # tokens: the API's usage only, by gen_ai.token.type; firsttoken's estimate (when there is no usage) apart
    _, tok = got[O.TOKENS]
    for p in tok:
        assert set(p.attributes) == set(common) | {"gen_ai.token.type"}
        assert tuple(p.explicit_bounds) == M.TOKEN_BUCKETS
    (out,) = only(tok, **{"gen_ai.token.type": "output"})
    (inp,) = only(tok, **{"gen_ai.token.type": "input"})

    ins = [r["usage_prompt_tokens"] for r in (ok, bad) if r["usage_prompt_tokens"] is not None]
    outs = [r["usage_completion_tokens"] for r in (ok, bad) if r["usage_completion_tokens"] is not None]
    assert ok["usage_prompt_tokens"] and ok["usage_completion_tokens"]  # the stream's own usage
    assert (inp.count, inp.sum) == (len(ins), sum(ins))
    assert (out.count, out.sum) == (len(outs), sum(outs))
    est = [r["prompt_tokens_est"] for r in (ok, bad) if r["usage_prompt_tokens"] is None and r["prompt_tokens_est"]]
    assert est  # the 401 has no usage, only firsttoken's estimate: under its own name, never as usage
    (e_in,) = only(got[O.ESTIMATED_TOKENS][1], **{"gen_ai.token.type": "input"})
    assert (e_in.count, e_in.sum) == (len(est), sum(est)) and got[O.ESTIMATED_TOKENS][0] == "{token}"

    otel.close()


@needs_otel
def test_attributes_follow_metrics_labels_and_leave_out_empty_ones(monkeypatch):
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    assert set(O.ATTRIBUTES) == set(M.GENAI_LABELS)  # a new Prometheus label needs its OTel name here
    reader = InMemoryMetricReader()
    shared = M.Metrics()  # the Prometheus side, already holding one model name
    shared.observe(make_record(id="prom", model="prom-model"))
    cap = Capture()
    otel = O.OtelMetrics([reader], metrics=shared).attach(cap)
    assert cap.listeners == [otel.observe]
    otel.observe(make_record(status=None, error="Connection refused", ttfb_ms=None, first_byte_ms=None, ttft_ms=None,
                      event_offsets=[], usage_prompt_tokens=None, prompt_tokens_est=1234, usage_completion_tokens=None,
                      upstream_url="https://x.openai.azure.com/openai/deployments/x/chat/completions"))
    otel.observe(make_record(id="r2", model=None, api="anthropic.messages", upstream_url="http://10.0.0.2:8000/v1/messages"))
    otel.observe(make_record(id="r3", api="other", upstream_url="http://10.0.0.2:8000/v1/models"))  # ignored
    otel.observe(Record(id="broken", started_at="x", api="openai.chat", event_offsets=None))  # tolerated
    got = points(reader)
    _, dur = got[O.DURATION]
    assert sorted((dict(p.attributes) for p in dur), key=str) == sorted([
        {"gen_ai.operation.name": "chat", "gen_ai.provider.name": "azure.ai.openai", "gen_ai.request.model": "gpt-4o",
         "server.address": "x.openai.azure.com", "server.port": 443, "error.type": "connection_refused"},
        {"gen_ai.operation.name": "chat", "gen_ai.provider.name": "anthropic",  # no model: attribute left out
         "server.address": "10.0.0.2", "server.port": 8000},
    ], key=str)
    assert not only(got[O.TOKENS][1], **{"gen_ai.token.type": "input", "gen_ai.provider.name": "azure.ai.openai"})
    (inp,) = only(got[O.ESTIMATED_TOKENS][1], **{"gen_ai.token.type": "input", "gen_ai.provider.name": "azure.ai.openai"})
    assert inp.sum == 1234  # firsttoken's estimate when the API reported no usage: not passed off as usage
    assert sum(p.count for p in got[O.TTFC][1]) == 1 and sum(p.count for p in got[O.TPOC][1]) == 2
    assert otel.errors == 0
    monkeypatch.setattr(M, "MAX_MODELS", 2)  # one cap for both exports: a third model is "_OTHER" in OTel too
    otel.observe(make_record(id="r4", model="third-model"))
    assert {p.attributes.get("gen_ai.request.model") for p in points(reader)[O.DURATION][1]} == {
        "gpt-4o", None, "_OTHER"}
    otel.close()
    otel.close()  # idempotent
    assert cap.listeners == []  # detached
    otel.observe(make_record(id="late"))  # after close: ignored, not an error
    assert otel.errors == 0


# -- (2) OTLP/HTTP to a real receiver --------------------------------------------------------

@needs_otel
def test_otlp_http_periodic_export_and_flush_on_close():
    with Receiver() as rcv:
        otel = O.OtelMetrics.otlp(rcv.url + "/v1/metrics", export_interval_s=0.2)
        otel.observe(make_record())
        assert rcv.got.wait(10), "no periodic export within 10 s"  # the reader's own thread sent it
        otel.observe(make_record(id="r2", status=429, usage_completion_tokens=None))
        otel.close()  # collects and sends what is left
        got = rcv.metrics()
    assert set(got) == NAMES
    dur = got[O.DURATION]
    assert max(p.count for p in dur if not any(kv.key == "error.type" for kv in p.attributes)) == 1
    assert [pb_attrs(p)["error.type"] for p in dur if any(kv.key == "error.type" for kv in p.attributes)][-1] == "429"
    assert tuple(dur[0].explicit_bounds) == M.DURATION_BUCKETS
    assert tuple(got[O.TOKENS][0].explicit_bounds) == M.TOKEN_BUCKETS
    attrs = pb_attrs(dur[0])
    assert attrs["gen_ai.provider.name"] == "openai" and attrs["server.port"] == 443
    assert rcv.resource()["service.name"] == "firsttoken"


@needs_otel
def test_addon_option_env_fallback_and_flush_on_done(monkeypatch):
    from mitmproxy import exceptions
    from mitmproxy.test import taddons

    with Receiver() as rcv:
        cap = Capture()
        addon = O.OtelAddon(cap)
        with taddons.context(addon) as tctx:
            tctx.configure(addon)  # the first configure decides
            assert addon.otel is None and cap.listeners == []  # off: no option, no environment
            with pytest.raises(exceptions.OptionsError, match="bad OTLP endpoint"):
                tctx.configure(addon, firsttoken_otlp_endpoint="grpc://127.0.0.1:4317")
            tctx.configure(addon, firsttoken_otlp_endpoint=rcv.url)  # a bare URL gets /v1/metrics
            assert addon.endpoint == rcv.url + "/v1/metrics"
            cap.listeners[0](make_record())  # what the analysis thread calls
            addon.done()  # shutdown flushes: the interval (60 s) never ran
            assert addon.otel is None
            assert set(rcv.metrics()) == NAMES
            n = len(rcv.posts)

            # the OpenTelemetry SDK's variable, when the option is empty
            monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rcv.url + "/")
            monkeypatch.setenv("OTEL_SERVICE_NAME", "team-proxy")
            tctx.configure(addon, firsttoken_otlp_endpoint="")
            assert addon.endpoint == rcv.url + "/v1/metrics"
            cap.listeners[0](make_record(id="r2", model="from-env"))
            addon.done()
        assert len(cap.listeners) == 1  # attached once, however often restarted
    assert len(rcv.posts) > n and rcv.resource()["service.name"] == "team-proxy"
    models = {pb_attrs(p).get("gen_ai.request.model") for p in rcv.metrics()[O.DURATION]}
    assert "from-env" in models


@needs_otel
@pytest.mark.skipif("otlp_endpoint" not in inspect.signature(ProxyServer.__init__).parameters,
                    reason="needs the lead's wiring: ProxyServer(otlp_endpoint=) adding OtelAddon")
def test_proxy_server_otlp_endpoint(sim, db_path):
    with Receiver() as rcv:
        with ProxyServer([sim.url], str(db_path), port=0, otlp_endpoint=rcv.url + "/v1/metrics") as p:
            assert httpx.post(p.url + "/v1/chat/completions", json=CHAT, timeout=20).status_code == 200
            p.flush()
        # stop() ran mitmproxy's done hooks: Capture first, then the OTLP flush
        got = rcv.metrics()
    assert set(got) == NAMES
    assert {pb_attrs(d)["gen_ai.request.model"] for d in got[O.DURATION]} == {"sim-1"}


@needs_otel
def test_mitmdump_script_flushes_on_sigint(sim, tmp_path, db_path):
    from test_script_mode import MITMDUMP, Mitmdump

    if not MITMDUMP.exists():
        pytest.skip(f"no mitmdump next to {sys.executable}")
    script = tmp_path / "ft_otel_script.py"
    script.write_text("from firsttoken.addon.capture import Capture\n"
                      "from firsttoken.addon.metrics import MetricsAddon\n"
                      "from firsttoken.addon.otel import OtelAddon\n"
                      "capture = Capture()\n"
                      "addons = [capture, MetricsAddon(capture), OtelAddon(capture)]\n")
    with Receiver() as rcv:
        with Mitmdump(tmp_path, str(script), "--mode", f"reverse:{sim.url}", "--set", f"firsttoken_db={db_path}",
                      "--set", f"firsttoken_otlp_endpoint={rcv.url}/v1/metrics") as m:
            assert httpx.post(m.url + "/v1/chat/completions", json=CHAT, timeout=20).status_code == 200
        got = rcv.metrics()  # sent on SIGINT, well before the 60 s interval
    assert set(got) == NAMES
    assert pb_attrs(got[O.DURATION][0])["server.port"] == sim.port


# -- without the extra -------------------------------------------------------------------

def _hide_otel(monkeypatch) -> None:
    for name in ("opentelemetry.sdk.metrics", "opentelemetry.exporter.otlp.proto.http.metric_exporter",
                 "opentelemetry.sdk.trace", "opentelemetry.exporter.otlp.proto.http.trace_exporter"):
        monkeypatch.setitem(sys.modules, name, None)  # "import" now raises ImportError


def test_missing_sdk_is_a_clear_option_error(monkeypatch):
    from mitmproxy import exceptions
    from mitmproxy.test import taddons

    _hide_otel(monkeypatch)
    assert not otel_available()
    with pytest.raises(O.OtelMissing, match=r"pip install 'firsttoken\[otel\]'"):
        O.OtelMetrics([])
    cap = Capture()
    addon = O.OtelAddon(cap)
    with taddons.context(addon) as tctx:
        with pytest.raises(exceptions.OptionsError, match=r"pip install 'firsttoken\[otel\]'"):
            tctx.configure(addon, firsttoken_otlp_endpoint="http://127.0.0.1:4318/v1/metrics")
    # only implied by the environment (maybe set for other programs): a warning, the proxy runs on
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")
    seen: list[str] = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = lambda record: seen.append(record.getMessage())
    logging.getLogger("firsttoken").addHandler(handler)  # not caplog: an embedded proxy may have cut propagation
    try:
        addon = O.OtelAddon(cap)
        with taddons.context(addon) as tctx:
            tctx.configure(addon)
            assert addon.otel is None and cap.listeners == []
            addon.done()
    finally:
        logging.getLogger("firsttoken").removeHandler(handler)
    assert any("pip install 'firsttoken[otel]'" in m for m in seen)


def test_env_endpoint_rules():
    assert O.env_endpoint({}) is None
    assert O.env_endpoint({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318/"}) == "http://c:4318/v1/metrics"
    assert O.env_endpoint({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318",
                           "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": "http://m:1/custom"}) == "http://m:1/custom"
    assert O.env_endpoint({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_SDK_DISABLED": "true"}) is None
    assert O.metrics_url("http://c:4318") == "http://c:4318/v1/metrics"
    assert O.metrics_url("https://c/otlp/v1/metrics") == "https://c/otlp/v1/metrics"
    for bad in ("c:4318", "ftp://c/v1/metrics", "http://c:99999/v1/metrics", "http:///v1/metrics"):
        with pytest.raises(ValueError, match="bad OTLP endpoint"):
            O.metrics_url(bad)
