"""OpenTelemetry metrics and GenAI trace spans of the proxied LLM calls, pushed over OTLP/HTTP (optional).

Capture listeners (analysis thread) feed the SDK, which exports from its own threads; opentelemetry
is imported only when an export is set up (else :class:`OtelMissing` names ``pip install
'firsttoken[otel]'``). The spans, endpoints and refusals: docs/otel.md; the metrics: docs/clients.md.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from firsttoken.addon.metrics import (
    DURATION_BUCKETS,
    GENAI_LABELS,
    OPERATION,
    TOKEN_BUCKETS,
    Metrics,
    error_type,
    genai_identity,
    is_streaming,
    token_counts,
)
from firsttoken.addon.record import Record

log = logging.getLogger("firsttoken")

INSTALL_HINT = "pip install 'firsttoken[otel]'"

DURATION = "gen_ai.client.operation.duration"
TTFC = "gen_ai.client.operation.time_to_first_chunk"
TPOC = "gen_ai.client.operation.time_per_output_chunk"
TOKENS = "gen_ai.client.token.usage"
ESTIMATED_TOKENS = "firsttoken.client.token.estimated"

#: metrics.py's label names -> the semconv attribute names (server.port is an int there)
ATTRIBUTES = {
    "gen_ai_operation_name": "gen_ai.operation.name",
    "gen_ai_provider_name": "gen_ai.provider.name",
    "gen_ai_request_model": "gen_ai.request.model",
    "server_address": "server.address",
    "server_port": "server.port",
}

#: where OTLP/HTTP data goes when no endpoint is given: the OpenTelemetry SDK's variables
ENV_METRICS_ENDPOINT = "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"  # full URL, used as is
ENV_TRACES_ENDPOINT = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"  # full URL, used as is
ENV_ENDPOINT = "OTEL_EXPORTER_OTLP_ENDPOINT"  # base URL: /v1/metrics and /v1/traces are appended
METRICS_PATH = "/v1/metrics"
TRACES_PATH = "/v1/traces"
SIGNALS = {"metrics": (METRICS_PATH, ENV_METRICS_ENDPOINT, "OTEL_METRICS_EXPORTER"),
           "traces": (TRACES_PATH, ENV_TRACES_ENDPOINT, "OTEL_TRACES_EXPORTER")}
SHUTDOWN_TIMEOUT_S = 5.0  # a collector that is down must not hold the proxy's exit for long


class OtelMissing(RuntimeError):
    """OTLP export was asked for, but the OpenTelemetry SDK / OTLP exporter is not installed."""


def _require_sdk(signal: str = "metrics") -> None:
    try:
        if signal == "traces":
            import opentelemetry.exporter.otlp.proto.http.trace_exporter  # noqa: F401
            import opentelemetry.sdk.trace  # noqa: F401
        else:
            import opentelemetry.exporter.otlp.proto.http.metric_exporter  # noqa: F401
            import opentelemetry.sdk.metrics  # noqa: F401
    except ImportError as e:
        raise OtelMissing(
            f"firsttoken: OTLP {signal} need the OpenTelemetry SDK and OTLP/HTTP exporter, which are not "
            f"installed ({e}). Install them with: {INSTALL_HINT}"
        ) from None


def check_url(url: str) -> str:
    """``url`` (stripped) when it is an http(s) URL with a host; ValueError otherwise."""
    url = url.strip()
    try:
        u = urlsplit(url)
        u.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError as e:
        raise ValueError(f"bad OTLP endpoint {url!r}: {e}") from None
    if u.scheme not in ("http", "https") or not u.hostname:
        raise ValueError(f"bad OTLP endpoint {url!r}: expected http(s)://HOST:4318 (the collector's OTLP/HTTP port)")
    return url


def signal_url(endpoint: str, signal: str) -> str:
    """The ``--otlp-endpoint`` as the URL of one signal ("metrics" or "traces").

    A base URL (``http://host:4318``, ``https://gw/otlp``) gets ``/v1/<signal>`` appended, as
    ``OTEL_EXPORTER_OTLP_ENDPOINT`` does; one ending in ``/v1/metrics`` or ``/v1/traces`` names a
    signal's full URL, and the other signal's is the same URL with its own last segment."""
    url = check_url(endpoint)
    u = urlsplit(url)
    path = u.path.rstrip("/")
    for p, _, _ in SIGNALS.values():
        if path.endswith(p):
            path = path[: -len(p)]
            break
    return urlunsplit(u._replace(path=path + SIGNALS[signal][0]))


def metrics_url(endpoint: str) -> str:
    """The ``--otlp-endpoint`` as a metrics URL: a bare ``http://host:4318`` gets ``/v1/metrics``."""
    return signal_url(endpoint, "metrics")


def signal_disabled(signal: str, environ: dict[str, str] | None = None) -> bool:
    """``OTEL_METRICS_EXPORTER=none`` / ``OTEL_TRACES_EXPORTER=none`` turn one signal off."""
    env = os.environ if environ is None else environ
    return (env.get(SIGNALS[signal][2]) or "").strip().lower() == "none"


def env_endpoint(environ: dict[str, str] | None = None, signal: str = "metrics") -> str | None:
    """The URL of ``signal`` the OpenTelemetry SDK's environment variables name, else None:
    ``OTEL_EXPORTER_OTLP_<SIGNAL>_ENDPOINT`` as is, else ``OTEL_EXPORTER_OTLP_ENDPOINT`` + ``/v1/<signal>``."""
    env = os.environ if environ is None else environ
    if (env.get("OTEL_SDK_DISABLED") or "").strip().lower() == "true" or signal_disabled(signal, env):
        return None
    path, full, _ = SIGNALS[signal]
    if env.get(full, "").strip():
        return env[full].strip()
    if env.get(ENV_ENDPOINT, "").strip():
        return env[ENV_ENDPOINT].strip().rstrip("/") + path
    return None


#: answers that mean "this endpoint takes no such signal" (Phoenix and Langfuse take traces, not
#: metrics): the signal stops going there, reported once, instead of being pushed every interval
REFUSED_STATUS = {404: "404 Not Found", 405: "405 Method Not Allowed", 501: "501 Not Implemented"}
#: answers that mean "not without credentials": pushing every interval would only repeat them
AUTH_STATUS = {401: "401 Unauthorized", 403: "403 Forbidden"}


class Refusal:
    """Watches one signal's HTTP answers (a requests response hook on the exporter's own session):
    the first 404/405/501 (or 401/403) turns the signal off for good, with one plain warning
    saying what to do."""

    def __init__(self, signal: str, url: str, notices: Sequence[Callable[[str], None]] = ()) -> None:
        self.signal = signal
        self.url = url
        self.notices = notices  # called (export thread) with the message: the proxy's terminal shows it
        self.refused: int | None = None  # the status that refused it
        self.sent = 0  # HTTP requests made (the tests: no retry loop)

    def session(self) -> Any:
        import requests

        s = requests.Session()
        s.hooks["response"].append(self._hook)
        return s

    def _hook(self, resp: Any, *args: Any, **kwargs: Any) -> Any:
        self.sent += 1
        status = getattr(resp, "status_code", None)
        if (status in REFUSED_STATUS or status in AUTH_STATUS) and self.refused is None:
            self.refused = status
            other = "traces" if self.signal == "metrics" else "metrics"
            elsewhere = ("--otlp-metrics-endpoint URL (a collector that takes metrics)" if self.signal == "metrics"
                         else "--otlp-endpoint URL of a collector that takes traces")
            if status in AUTH_STATUS:
                msg = (f"{self.url} answered {AUTH_STATUS[status]} to OpenTelemetry {self.signal}: it wants "
                       f"credentials that were not sent or not accepted. firsttoken stops sending {self.signal} "
                       f"there until it restarts. Give them in OTEL_EXPORTER_OTLP_HEADERS (e.g. Langfuse: "
                       f"Authorization=Basic%20<base64 of public-key:secret-key>), then restart the proxy.")
            else:
                msg = (f"{self.url} answered {REFUSED_STATUS[status]} to OpenTelemetry {self.signal}: it does not "
                       f"take them (Phoenix and Langfuse take traces only). firsttoken stops sending {self.signal} "
                       f"there; {other} still go where they are accepted. To send {self.signal} elsewhere give "
                       f"{elsewhere}; to silence this, set OTEL_{self.signal.upper()}_EXPORTER=none.")
            log.warning("firsttoken: %s", msg)
            for fn in list(self.notices):
                try:
                    fn(msg)
                except Exception:
                    log.exception("firsttoken: an OpenTelemetry notice listener failed")
        return resp


def otlp_reader(endpoint: str, export_interval_s: float | None = None, timeout_s: float | None = None,
                refusal: Refusal | None = None) -> Any:
    """A PeriodicExportingMetricReader pushing OTLP/HTTP protobuf to ``endpoint`` (full metrics URL),
    until the endpoint refuses metrics (``Refusal``): then it stops sending.

    Headers (``OTEL_EXPORTER_OTLP_HEADERS``), compression, TLS files and the interval
    (``OTEL_METRIC_EXPORT_INTERVAL``) come from the SDK's usual environment variables."""
    _require_sdk()
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
    from opentelemetry.sdk.metrics.export import MetricExportResult, PeriodicExportingMetricReader

    refusal = refusal or Refusal("metrics", endpoint)

    class RefusableMetricExporter(OTLPMetricExporter):
        def export(self, metrics_data: Any, *args: Any, **kwargs: Any) -> Any:
            if refusal.refused is not None:
                return MetricExportResult.SUCCESS  # (nothing to retry: the endpoint takes no metrics)
            return super().export(metrics_data, *args, **kwargs)

    exporter = RefusableMetricExporter(endpoint=endpoint, timeout=timeout_s, session=refusal.session())
    interval = None if export_interval_s is None else export_interval_s * 1000.0
    reader = PeriodicExportingMetricReader(exporter, export_interval_millis=interval)
    reader.refusal = refusal
    return reader


def _version() -> str | None:
    try:
        from importlib.metadata import version

        return version("firsttoken")
    except Exception:
        return None


#: the project (Phoenix, Arize) and service (Jaeger, Tempo, Langfuse, every backend) spans are filed under
PROJECT = "firsttoken"
RESOURCE_DEFAULTS = {"service.name": PROJECT, "openinference.project.name": PROJECT}


def _resource() -> Any:
    """service.name and openinference.project.name firsttoken (and its version), so that a backend
    files the spans under "firsttoken" with nothing set; OTEL_SERVICE_NAME / OTEL_RESOURCE_ATTRIBUTES
    override them."""
    from opentelemetry.sdk.resources import OTELResourceDetector, Resource

    defaults = dict(RESOURCE_DEFAULTS)
    version = _version()
    if version:
        defaults["service.version"] = version
    return Resource.create(defaults).merge(OTELResourceDetector().detect())


class RecordExporter:
    """What the OTLP exporters share: fed with every finished record of a Capture on the analysis
    thread (``attach``), an export bug counted and logged but never raised into the proxy, and a
    close that stops observing once. Subclasses define ``_observe`` and ``_shutdown``."""

    #: what one record becomes, for the log line of a failure
    signal = "export"

    def __init__(self) -> None:
        self.errors = 0  # observe() failures (logged, never raised into the proxy)
        self._capture: Any = None
        self._closed = False
        self._close_lock = threading.Lock()

    def attach(self, capture: Any) -> RecordExporter:
        """Observe every finished record of a Capture (until :meth:`close`)."""
        capture.listeners.append(self.observe)
        self._capture = capture
        return self

    def observe(self, rec: Record) -> None:
        if self._closed:
            return
        try:
            self._observe(rec)
        except Exception:  # an export bug must never break the proxy
            self.errors += 1
            log.exception("firsttoken: OpenTelemetry %s failed for %s", self.signal, getattr(rec, "id", "?"))

    def close(self, timeout_s: float = SHUTDOWN_TIMEOUT_S) -> None:
        """Stop observing, export what is still pending, stop the export thread. Idempotent."""
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
        if self._capture is not None:
            try:
                self._capture.listeners.remove(self.observe)
            except ValueError:
                pass
        self._shutdown(timeout_s)

    def _observe(self, rec: Record) -> None:
        raise NotImplementedError

    def _shutdown(self, timeout_s: float) -> None:
        raise NotImplementedError


class OtelMetrics(RecordExporter):
    """A MeterProvider of its own (never the global one) with the GenAI instruments.

    ``readers``: SDK MetricReaders (e.g. ``[otlp_reader(url)]``, or an InMemoryMetricReader in
    tests). ``metrics``: the Prometheus :class:`Metrics` whose attribute extraction to use;
    pass the one already serving so both exports share one model cap (else a private one)."""

    signal = "metrics"

    def __init__(self, readers: Sequence[Any], *, metrics: Metrics | None = None) -> None:
        super().__init__()
        _require_sdk()
        from opentelemetry.sdk.metrics import Histogram, MeterProvider
        from opentelemetry.sdk.metrics.view import ExplicitBucketHistogramAggregation, View

        self.labeller = metrics or Metrics()
        version = _version()
        resource = _resource()
        views = [View(instrument_type=Histogram, instrument_name=name,
                      aggregation=ExplicitBucketHistogramAggregation(boundaries=buckets))
                 for name, buckets in ((DURATION, DURATION_BUCKETS), (TTFC, DURATION_BUCKETS),
                                       (TPOC, DURATION_BUCKETS), (TOKENS, TOKEN_BUCKETS),
                                       (ESTIMATED_TOKENS, TOKEN_BUCKETS))]
        self.provider = MeterProvider(metric_readers=list(readers), resource=resource, views=views)
        meter = self.provider.get_meter("firsttoken", version)
        self.duration = meter.create_histogram(
            DURATION, unit="s", description="GenAI operation duration (request start to last byte).")
        self.ttfc = meter.create_histogram(
            TTFC, unit="s", description="Time to receive the first chunk of the response stream.")
        self.tpoc = meter.create_histogram(
            TPOC, unit="s", description="Time between consecutive output chunks (token-bearing events).")
        self.tokens = meter.create_histogram(
            TOKENS, unit="{token}", description="Number of input and output tokens used (the API's usage).")
        self.estimated = meter.create_histogram(
            ESTIMATED_TOKENS, unit="{token}", description="Input and output tokens as firsttoken estimated them "
            "(its tokenizer), for calls whose API reported no usage: an estimate, not the provider's count.")

    @classmethod
    def otlp(cls, endpoint: str, *, export_interval_s: float | None = None, metrics: Metrics | None = None,
             timeout_s: float | None = None, notices: Sequence[Callable[[str], None]] = ()) -> OtelMetrics:
        """Push to ``endpoint``, the full metrics URL (ValueError if it is not http(s)); ``notices``
        hear (once) that the endpoint refused metrics."""
        url = check_url(endpoint)
        return cls([otlp_reader(url, export_interval_s, timeout_s, Refusal("metrics", url, notices))], metrics=metrics)


    def attributes(self, rec: Record) -> dict[str, Any]:
        """The semconv attributes of a record (metrics.py's labels, empty ones left out)."""
        out: dict[str, Any] = {}
        for key, value in zip(GENAI_LABELS, self.labeller.labels(rec)):
            if value:
                out[ATTRIBUTES[key]] = int(value) if key == "server_port" else value
        return out

    def _observe(self, rec: Record) -> None:
        if rec.api not in OPERATION:
            return  # not an LLM call (GET /v1/models, count_tokens, a wrong path…)
        attrs = self.attributes(rec)
        if rec.total_ms is not None:
            err = error_type(rec)
            self.duration.record(rec.total_ms / 1000.0, {**attrs, "error.type": err} if err else attrs)
        if is_streaming(rec):
            first = rec.first_byte_ms if rec.first_byte_ms is not None else rec.first_token_ms
            if first is not None:
                self.ttfc.record(first / 1000.0, attrs)
            offsets = rec.event_offsets or []
            for a, b in zip(offsets, offsets[1:]):
                self.tpoc.record(max(b - a, 0.0) / 1000.0, attrs)
        for kind, n, estimated in token_counts(rec):
            (self.estimated if estimated else self.tokens).record(n, {**attrs, "gen_ai.token.type": kind})

    # -- flushing ---------------------------------------------------------------------
    def force_flush(self, timeout_s: float = 10.0) -> bool:
        return bool(self.provider.force_flush(timeout_millis=timeout_s * 1000.0))

    def _shutdown(self, timeout_s: float) -> None:
        try:
            self.provider.shutdown(timeout_millis=timeout_s * 1000.0)
        except Exception:
            log.exception("firsttoken: OpenTelemetry shutdown failed")


# -- trace spans --------------------------------------------------------------------------

def span_exporter(endpoint: str, timeout_s: float | None = None, notices: Sequence[Callable[[str], None]] = ()) -> Any:
    """A BatchSpanProcessor pushing OTLP/HTTP protobuf to ``endpoint`` (the full traces URL).

    Headers (``OTEL_EXPORTER_OTLP_HEADERS``), compression, TLS files and the batching
    (``OTEL_BSP_*``) come from the SDK's usual environment variables."""
    _require_sdk("traces")
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExportResult

    refusal = Refusal("traces", check_url(endpoint), notices)

    class RefusableSpanExporter(OTLPSpanExporter):
        def export(self, spans: Any, *args: Any, **kwargs: Any) -> Any:
            if refusal.refused is not None:
                return SpanExportResult.SUCCESS  # (nothing to retry: the endpoint takes no traces)
            return super().export(spans, *args, **kwargs)

    processor = BatchSpanProcessor(RefusableSpanExporter(endpoint=refusal.url, timeout=timeout_s,
                                                         session=refusal.session()))
    processor.refusal = refusal
    return processor


def _epoch_ns(iso: str | None) -> int | None:
    import datetime as _dt

    try:
        t = _dt.datetime.fromisoformat(str(iso).replace("Z", "+00:00"))
    except (TypeError, ValueError):
        return None
    if t.tzinfo is None:
        t = t.replace(tzinfo=_dt.UTC)
    return int(t.timestamp() * 1_000_000) * 1000


def _ns(start: int, ms: float | None) -> int | None:
    return None if ms is None else start + int(round(ms * 1_000_000))


def span_attributes(rec: Record) -> dict[str, Any]:
    """The span attributes of a finished LLM call (GenAI semantic conventions + firsttoken's
    own); empty values are left out."""
    operation, provider, host, port = genai_identity(rec)
    response_model = getattr(rec, "response_model", None) or rec.model
    inp, out = rec.usage_prompt_tokens, rec.usage_completion_tokens  # the provider's usage only
    estimated = inp is None and out is None and (rec.prompt_tokens_est is not None or rec.output_tokens_est is not None)
    codes = [str(f.get("code")) for f in (rec.findings or []) if isinstance(f, dict) and f.get("code")]
    attrs: dict[str, Any] = {
        "gen_ai.operation.name": operation,
        "gen_ai.provider.name": provider,
        "gen_ai.system": provider,  # the attribute's name before semconv 1.37 (aws.bedrock, gcp.vertex_ai ...)
        "gen_ai.request.model": rec.model,
        "gen_ai.response.model": response_model,
        "gen_ai.request.max_tokens": rec.max_tokens,
        "gen_ai.usage.input_tokens": inp,
        "gen_ai.usage.output_tokens": out,
        # OpenInference (Phoenix, Arize): the span kind, the model and the provider's usage, never an estimate
        "openinference.span.kind": "LLM",
        "llm.model_name": response_model,
        "llm.token_count.prompt": inp,
        "llm.token_count.completion": out,
        "llm.token_count.total": inp + out if inp is not None and out is not None else None,
        "gen_ai.response.finish_reasons": [str(rec.finish_reason)] if rec.finish_reason else None,
        "gen_ai.conversation.id": getattr(rec, "conversation_id", None),
        "server.address": host,
        "server.port": port,
        "http.response.status_code": rec.status,
        "error.type": error_type(rec) or None,
        "firsttoken.request.id": rec.id,
        "firsttoken.route": rec.route,
        "firsttoken.experiment": rec.experiment,
        "firsttoken.run.id": rec.run_id,
        "firsttoken.stream": is_streaming(rec),
        # what carried it: http, or websocket (a Responses turn; its connection is the upgrade's id)
        "firsttoken.transport": getattr(rec, "transport", None),
        "firsttoken.ws.connection_id": getattr(rec, "ws_connection_id", None),
        "firsttoken.ws.turn": getattr(rec, "ws_turn", None),
        # firsttoken's own counts (its tokenizer), under its own names: never the provider's usage
        "firsttoken.estimated.input_tokens": rec.prompt_tokens_est,
        "firsttoken.estimated.output_tokens": rec.output_tokens_est,
        "firsttoken.tokens_estimated": estimated or None,
        "firsttoken.usage.cached_tokens": rec.usage_cached_tokens,
        "firsttoken.connect_ms": rec.connect_ms,
        "firsttoken.ttfb_ms": rec.ttfb_ms,
        "firsttoken.ttft_ms": rec.ttft_ms,
        "firsttoken.gap_ms": rec.gap_ms,
        "firsttoken.tpot_ms": rec.tpot_ms,
        "firsttoken.total_ms": rec.total_ms,
        "firsttoken.findings": codes or None,
        "firsttoken.top_finding": rec.top_code,
        "firsttoken.top_severity": rec.top_severity,
    }
    return {k: v for k, v in attrs.items() if v is not None and v != ""}


#: the child span from a call's start to its first token
TTFT_SPAN = "time_to_first_token"


class OtelTraces(RecordExporter):
    """A TracerProvider of its own (never the global one) making one span per finished LLM call.

    ``processors``: SDK SpanProcessors (e.g. ``[span_exporter(url)]``, or a SimpleSpanProcessor
    on an InMemorySpanExporter in tests)."""

    signal = "span"

    def __init__(self, processors: Sequence[Any]) -> None:
        super().__init__()
        _require_sdk("traces")
        from opentelemetry.sdk.trace import TracerProvider

        # no atexit hook: close() (bounded) runs at the proxy's shutdown; a collector that is down
        # must not hold the process's exit for the SDK's 30 s
        self.provider = TracerProvider(resource=_resource(), shutdown_on_exit=False)
        for p in processors:
            self.provider.add_span_processor(p)
        self.tracer = self.provider.get_tracer("firsttoken", _version())

    @classmethod
    def otlp(cls, endpoint: str, *, timeout_s: float | None = None,
             notices: Sequence[Callable[[str], None]] = ()) -> OtelTraces:
        """Push to ``endpoint``, the full traces URL (ValueError if it is not http(s))."""
        return cls([span_exporter(endpoint, timeout_s, notices)])


    def _observe(self, rec: Record) -> None:
        from opentelemetry.trace import SpanKind, Status, StatusCode

        if rec.api not in OPERATION:
            return  # not an LLM call (GET /v1/models, count_tokens, a wrong path…)
        start = _epoch_ns(rec.started_at)
        if start is None:
            return
        attrs = span_attributes(rec)
        name = f"{attrs['gen_ai.operation.name']} {rec.model}" if rec.model else attrs["gen_ai.operation.name"]
        span = self.tracer.start_span(name, kind=SpanKind.CLIENT, start_time=start, attributes=attrs)
        at = _ns(start, rec.ttfb_ms)
        if at is not None:
            span.add_event("response.headers", {"http.response.status_code": rec.status} if rec.status else {}, at)
        at = _ns(start, rec.ttft_ms)
        if at is not None:
            span.add_event("first_token", {"firsttoken.gap_ms": rec.gap_ms} if rec.gap_ms is not None else {}, at)
            # and as a child span from the request's start to its first token: a backend's latency
            # column and charts show TTFT beside the call's total
            from opentelemetry import trace as _trace

            child = self.tracer.start_span(TTFT_SPAN, context=_trace.set_span_in_context(span),
                                           kind=SpanKind.INTERNAL, start_time=start,
                                           attributes={k: v for k, v in (("firsttoken.ttft_ms", rec.ttft_ms),
                                                                         ("firsttoken.ttfb_ms", rec.ttfb_ms),
                                                                         ("firsttoken.request.id", rec.id))
                                                       if v is not None})
            child.end(end_time=at)
        err = attrs.get("error.type")
        if err:
            span.set_status(Status(StatusCode.ERROR, f"{err}: {rec.top_code}" if rec.top_code else err))
        ends = [t for t in (rec.total_ms, rec.ttft_ms, rec.ttfb_ms) if t is not None]
        span.end(end_time=_ns(start, max(ends)) if ends else start)

    def force_flush(self, timeout_s: float = 10.0) -> bool:
        return bool(self.provider.force_flush(timeout_millis=int(timeout_s * 1000)))

    def _shutdown(self, timeout_s: float) -> None:
        def shutdown() -> None:  # the batch processor drains its queue, then stops its thread
            try:
                self.provider.shutdown()
            except Exception:
                log.exception("firsttoken: OpenTelemetry shutdown failed")

        t = threading.Thread(target=shutdown, name="firsttoken-otel-spans-close", daemon=True)
        t.start()
        t.join(timeout_s)
        if t.is_alive():
            log.warning("firsttoken: the OTLP collector did not take the last spans within %.0f s; "
                        "they are dropped", timeout_s)


# -- as a mitmproxy addon -----------------------------------------------------------------

class OtelAddon:
    """Pushes the OpenTelemetry metrics and spans of ``capture`` while an OTLP endpoint is configured.

    The endpoint is the option ``firsttoken_otlp_endpoint`` (a base URL: see :func:`signal_url`),
    else the SDK's ``OTEL_EXPORTER_OTLP_{METRICS,TRACES}_ENDPOINT`` / ``OTEL_EXPORTER_OTLP_ENDPOINT``
    (unless ``OTEL_SDK_DISABLED=true``); ``OTEL_METRICS_EXPORTER=none`` or
    ``OTEL_TRACES_EXPORTER=none`` turns one signal off. Add it after ``capture``, so that at
    shutdown Capture has handed over every record before this one flushes:
    ``addons = [capture, MetricsAddon(capture), OtelAddon(capture)]``."""

    def __init__(self, capture: Any, metrics: Metrics | None = None, *,
                 export_interval_s: float | None = None) -> None:
        self.capture = capture
        self.metrics = metrics  # Prometheus Metrics to share labels (model cap) with, if any
        self.export_interval_s = export_interval_s
        self.otel: OtelMetrics | None = None
        self.traces: OtelTraces | None = None
        self.endpoint: str | None = None  # where metrics are pushed, while on
        self.traces_endpoint: str | None = None  # where spans are pushed, while on
        self._configured = False
        self._attached = False
        #: called (on an export thread) with a message for the user: an endpoint refused a signal
        self.notices: list[Callable[[str], None]] = []

    def load(self, loader) -> None:
        loader.add_option(
            "firsttoken_otlp_endpoint", str, "",
            "Push OpenTelemetry GenAI metrics and trace spans over OTLP/HTTP to this collector (e.g. "
            "http://127.0.0.1:4318: metrics to /v1/metrics, spans to /v1/traces). Empty: "
            "$OTEL_EXPORTER_OTLP_ENDPOINT (or the _METRICS_ / _TRACES_ variants) when set, else off. "
            f"Needs {INSTALL_HINT}.")
        loader.add_option(
            "firsttoken_otlp_metrics_endpoint", str, "",
            "Push the OpenTelemetry metrics to this OTLP/HTTP endpoint instead of firsttoken_otlp_endpoint's "
            "(a base URL gets /v1/metrics): for a traces-only backend such as Phoenix or Langfuse. "
            f"Needs {INSTALL_HINT}.")

    def configure(self, updated: Iterable[str]) -> None:
        """Starts (or restarts) the export at the first configure and when the option changes."""
        from mitmproxy import ctx, exceptions

        if self._configured and not {"firsttoken_otlp_endpoint", "firsttoken_otlp_metrics_endpoint"} & set(updated):
            return
        for explicit in (ctx.options.firsttoken_otlp_endpoint.strip(), ctx.options.firsttoken_otlp_metrics_endpoint.strip()):
            if not explicit:
                continue
            try:
                signal_url(explicit, "metrics")
                _require_sdk("metrics")
                _require_sdk("traces")
            except (ValueError, OtelMissing) as e:
                raise exceptions.OptionsError(str(e)) from None
        restart, self._configured = self._configured, True
        self._start(background_close=restart)

    def done(self) -> None:
        """mitmproxy shuts down (after Capture.done handed over every record): export the rest."""
        self._stop()

    # -- internals --------------------------------------------------------------------
    def _wanted(self) -> tuple[dict[str, str | None], bool]:
        """({signal: URL or None}, explicit): from the option, else from the environment."""
        from mitmproxy import ctx

        explicit = ctx.options.firsttoken_otlp_endpoint.strip()
        metrics = ctx.options.firsttoken_otlp_metrics_endpoint.strip()
        if explicit:
            wanted = {sig: None if signal_disabled(sig) else signal_url(explicit, sig) for sig in SIGNALS}
        else:
            wanted = {sig: env_endpoint(signal=sig) for sig in SIGNALS}
        if metrics:  # metrics elsewhere (a traces-only backend at --otlp-endpoint)
            wanted["metrics"] = None if signal_disabled("metrics") else signal_url(metrics, "metrics")
        return wanted, bool(explicit or metrics)

    def _start(self, background_close: bool = False) -> None:
        from mitmproxy import exceptions

        self._stop(background=background_close)
        wanted, explicit = self._wanted()
        if not any(wanted.values()):
            return
        protocol = os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL")
        if not explicit and protocol and protocol.strip() != "http/protobuf":
            log.warning("firsttoken: OTEL_EXPORTER_OTLP_PROTOCOL=%s, but firsttoken sends OTLP over http/protobuf "
                        "only; it sends to %s", protocol, ", ".join(u for u in wanted.values() if u))
        makers = {"metrics": lambda url: OtelMetrics.otlp(url, export_interval_s=self.export_interval_s,
                                                          metrics=self.metrics, notices=self.notices),
                  "traces": lambda url: OtelTraces.otlp(url, notices=self.notices)}
        made: dict[str, Any] = {}
        for sig, url in wanted.items():
            if not url:
                continue
            try:
                made[sig] = makers[sig](url)
            except OtelMissing as e:
                if explicit:
                    self._close_all(made)
                    raise exceptions.OptionsError(str(e)) from None
                # only implied by the environment (set for other programs, perhaps): say so, go on
                log.warning("%s (OTEL_EXPORTER_OTLP_ENDPOINT is set; %s are not exported)", e, sig)
            except ValueError as e:
                if explicit:
                    self._close_all(made)
                    raise exceptions.OptionsError(str(e)) from None
                log.warning("firsttoken: %s (from the environment); %s are not exported", e, sig)
        if not made:
            return
        self.otel, self.traces = made.get("metrics"), made.get("traces")
        self.endpoint = wanted["metrics"] if self.otel else None
        self.traces_endpoint = wanted["traces"] if self.traces else None
        if not self._attached:
            self.capture.listeners.append(self._observe)
            self._attached = True
        for sig in made:
            log.info("firsttoken OpenTelemetry %s -> %s", sig, wanted[sig])

    @staticmethod
    def _close_all(made: dict[str, Any]) -> None:
        for exporter in made.values():
            exporter.close()

    def _observe(self, rec: Record) -> None:
        for exporter in (self.otel, self.traces):
            if exporter is not None:
                exporter.observe(rec)

    def _stop(self, background: bool = False) -> None:
        made = {"metrics": self.otel, "traces": self.traces}
        self.otel = self.traces = self.endpoint = self.traces_endpoint = None
        made = {k: v for k, v in made.items() if v is not None}
        if not made:
            return
        if background:  # a change while running: do not hold the event loop for the final export
            threading.Thread(target=self._close_all, args=(made,), name="firsttoken-otel-close", daemon=True).start()
        else:
            self._close_all(made)
