"""OpenTelemetry metrics of the proxied LLM calls, pushed over OTLP/HTTP (optional).

The same GenAI client instruments as the Prometheus endpoint (metrics.py), for a team that
already runs an OpenTelemetry collector::

    pip install 'firsttoken[otel]'
    firsttoken proxy --upstream https://api.openai.com --otlp-endpoint http://127.0.0.1:4318/v1/metrics

* ``gen_ai.client.operation.duration`` (s): each LLM call; ``error.type`` on failures
* ``gen_ai.client.operation.time_to_first_chunk`` (s): first response chunk, streaming calls only
* ``gen_ai.client.operation.time_per_output_chunk`` (s): each gap between output chunks, streaming
* ``gen_ai.client.token.usage`` ({token}): ``gen_ai.token.type`` = input | output

Attributes (``gen_ai.operation.name``, ``gen_ai.provider.name``, ``gen_ai.request.model``,
``server.address``, ``server.port``, ``error.type``) come from metrics.py's own extraction
(:meth:`Metrics.labels`, :func:`error_type`, :func:`is_streaming`), so both exports always
agree; an empty value is left out rather than sent as "". Histograms use the semconv's
explicit bucket boundaries through Views.

Threads: :meth:`OtelMetrics.observe` is a Capture listener, so it runs on the analysis thread
with each finished Record (never on the event loop); the SDK's PeriodicExportingMetricReader
exports from its own daemon thread every ``OTEL_METRIC_EXPORT_INTERVAL`` ms (default 60 s);
:meth:`OtelMetrics.close` collects and exports what is left, then stops.

opentelemetry is imported only when an export is set up: without the extra, firsttoken runs
as before and asking for OTLP fails with :class:`OtelMissing` (an option error in mitmproxy)
naming ``pip install 'firsttoken[otel]'``.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterable, Sequence
from typing import Any
from urllib.parse import urlsplit

from firsttoken.addon.metrics import DURATION_BUCKETS, GENAI_LABELS, OPERATION, TOKEN_BUCKETS, Metrics, error_type, is_streaming
from firsttoken.addon.record import Record

log = logging.getLogger("firsttoken")

INSTALL_HINT = "pip install 'firsttoken[otel]'"

DURATION = "gen_ai.client.operation.duration"
TTFC = "gen_ai.client.operation.time_to_first_chunk"
TPOC = "gen_ai.client.operation.time_per_output_chunk"
TOKENS = "gen_ai.client.token.usage"

#: metrics.py's label names -> the semconv attribute names (server.port is an int there)
ATTRIBUTES = {
    "gen_ai_operation_name": "gen_ai.operation.name",
    "gen_ai_provider_name": "gen_ai.provider.name",
    "gen_ai_request_model": "gen_ai.request.model",
    "server_address": "server.address",
    "server_port": "server.port",
}

#: where OTLP/HTTP metrics go when no endpoint is given: the OpenTelemetry SDK's variables
ENV_METRICS_ENDPOINT = "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"  # full URL, used as is
ENV_ENDPOINT = "OTEL_EXPORTER_OTLP_ENDPOINT"  # base URL: /v1/metrics is appended
METRICS_PATH = "/v1/metrics"
SHUTDOWN_TIMEOUT_S = 5.0  # a collector that is down must not hold the proxy's exit for long


class OtelMissing(RuntimeError):
    """OTLP export was asked for, but the OpenTelemetry SDK / OTLP exporter is not installed."""


def _require_sdk() -> None:
    try:
        import opentelemetry.exporter.otlp.proto.http.metric_exporter  # noqa: F401
        import opentelemetry.sdk.metrics  # noqa: F401
    except ImportError as e:
        raise OtelMissing(
            f"firsttoken: OTLP metrics need the OpenTelemetry SDK and OTLP/HTTP exporter, which are not "
            f"installed ({e}). Install them with: {INSTALL_HINT}"
        ) from None


def otel_available() -> bool:
    try:
        _require_sdk()
    except OtelMissing:
        return False
    return True


def check_url(url: str) -> str:
    """``url`` (stripped) when it is an http(s) URL with a host; ValueError otherwise."""
    url = url.strip()
    try:
        u = urlsplit(url)
        u.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError as e:
        raise ValueError(f"bad OTLP endpoint {url!r}: {e}") from None
    if u.scheme not in ("http", "https") or not u.hostname:
        raise ValueError(f"bad OTLP endpoint {url!r}: expected http(s)://HOST:4318/v1/metrics")
    return url


def metrics_url(endpoint: str) -> str:
    """The ``--otlp-endpoint`` as a metrics URL: a bare ``http://host:4318`` gets ``/v1/metrics``."""
    url = check_url(endpoint)
    return url.rstrip("/") + METRICS_PATH if urlsplit(url).path in ("", "/") else url


def env_endpoint(environ: dict[str, str] | None = None) -> str | None:
    """The metrics URL the OpenTelemetry SDK's environment variables name, else None."""
    env = os.environ if environ is None else environ
    if (env.get("OTEL_SDK_DISABLED") or "").strip().lower() == "true":
        return None
    if env.get(ENV_METRICS_ENDPOINT, "").strip():
        return env[ENV_METRICS_ENDPOINT].strip()
    if env.get(ENV_ENDPOINT, "").strip():
        return env[ENV_ENDPOINT].strip().rstrip("/") + METRICS_PATH
    return None


def otlp_reader(endpoint: str, export_interval_s: float | None = None, timeout_s: float | None = None) -> Any:
    """A PeriodicExportingMetricReader pushing OTLP/HTTP protobuf to ``endpoint`` (full metrics URL).

    Headers (``OTEL_EXPORTER_OTLP_HEADERS``), compression, TLS files and the interval
    (``OTEL_METRIC_EXPORT_INTERVAL``) come from the SDK's usual environment variables."""
    _require_sdk()
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
    from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader

    exporter = OTLPMetricExporter(endpoint=endpoint, timeout=timeout_s)
    interval = None if export_interval_s is None else export_interval_s * 1000.0
    return PeriodicExportingMetricReader(exporter, export_interval_millis=interval)


def _version() -> str | None:
    try:
        from importlib.metadata import version

        return version("firsttoken")
    except Exception:
        return None


class OtelMetrics:
    """A MeterProvider of its own (never the global one) with the GenAI instruments.

    ``readers``: SDK MetricReaders (e.g. ``[otlp_reader(url)]``, or an InMemoryMetricReader in
    tests). ``metrics``: the Prometheus :class:`Metrics` whose attribute extraction to use;
    pass the one already serving so both exports share one model cap (else a private one)."""

    def __init__(self, readers: Sequence[Any], *, metrics: Metrics | None = None) -> None:
        _require_sdk()
        from opentelemetry.sdk.metrics import Histogram, MeterProvider
        from opentelemetry.sdk.metrics.view import ExplicitBucketHistogramAggregation, View
        from opentelemetry.sdk.resources import OTELResourceDetector, Resource

        self.labeller = metrics or Metrics()
        version = _version()
        defaults = {"service.name": "firsttoken"}
        if version:
            defaults["service.version"] = version
        # OTEL_SERVICE_NAME / OTEL_RESOURCE_ATTRIBUTES override the defaults
        resource = Resource.create(defaults).merge(OTELResourceDetector().detect())
        views = [View(instrument_type=Histogram, instrument_name=name,
                      aggregation=ExplicitBucketHistogramAggregation(boundaries=buckets))
                 for name, buckets in ((DURATION, DURATION_BUCKETS), (TTFC, DURATION_BUCKETS),
                                       (TPOC, DURATION_BUCKETS), (TOKENS, TOKEN_BUCKETS))]
        self.provider = MeterProvider(metric_readers=list(readers), resource=resource, views=views)
        meter = self.provider.get_meter("firsttoken", version)
        self.duration = meter.create_histogram(
            DURATION, unit="s", description="GenAI operation duration (request start to last byte).")
        self.ttfc = meter.create_histogram(
            TTFC, unit="s", description="Time to receive the first chunk of the response stream.")
        self.tpoc = meter.create_histogram(
            TPOC, unit="s", description="Time between consecutive output chunks (token-bearing events).")
        self.tokens = meter.create_histogram(
            TOKENS, unit="{token}", description="Number of input and output tokens used (the API's usage; "
            "firsttoken's own count when the API reports none).")
        self.errors = 0  # observe() failures (logged, never raised into the proxy)
        self._capture: Any = None
        self._closed = False
        self._close_lock = threading.Lock()

    @classmethod
    def otlp(cls, endpoint: str, *, export_interval_s: float | None = None, metrics: Metrics | None = None,
             timeout_s: float | None = None) -> OtelMetrics:
        """Push to ``endpoint``, the full metrics URL (ValueError if it is not http(s))."""
        return cls([otlp_reader(check_url(endpoint), export_interval_s, timeout_s)], metrics=metrics)

    # -- feeding (analysis thread) ------------------------------------------------------
    def attach(self, capture: Any) -> OtelMetrics:
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
            log.exception("firsttoken: OpenTelemetry metrics failed for %s", getattr(rec, "id", "?"))

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
        inp = rec.usage_prompt_tokens if rec.usage_prompt_tokens is not None else rec.prompt_tokens_est
        out = rec.usage_completion_tokens if rec.usage_completion_tokens is not None else rec.output_tokens_est
        if inp is not None:
            self.tokens.record(inp, {**attrs, "gen_ai.token.type": "input"})
        if out is not None:
            self.tokens.record(out, {**attrs, "gen_ai.token.type": "output"})

    # -- flushing ---------------------------------------------------------------------
    def force_flush(self, timeout_s: float = 10.0) -> bool:
        return bool(self.provider.force_flush(timeout_millis=timeout_s * 1000.0))

    def close(self, timeout_s: float = SHUTDOWN_TIMEOUT_S) -> None:
        """Stop observing, export what was recorded, stop the export thread. Idempotent."""
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
        if self._capture is not None:
            try:
                self._capture.listeners.remove(self.observe)
            except ValueError:
                pass
        try:
            self.provider.shutdown(timeout_millis=timeout_s * 1000.0)
        except Exception:
            log.exception("firsttoken: OpenTelemetry shutdown failed")


# -- as a mitmproxy addon -----------------------------------------------------------------

class OtelAddon:
    """Pushes the OpenTelemetry metrics of ``capture`` while an OTLP endpoint is configured.

    The endpoint is the option ``firsttoken_otlp_endpoint``, else the SDK's
    ``OTEL_EXPORTER_OTLP_METRICS_ENDPOINT`` / ``OTEL_EXPORTER_OTLP_ENDPOINT`` (unless
    ``OTEL_SDK_DISABLED=true``). Add it after ``capture``, so that at shutdown Capture has
    handed over every record before this one flushes:
    ``addons = [capture, MetricsAddon(capture), OtelAddon(capture)]``."""

    def __init__(self, capture: Any, metrics: Metrics | None = None, *,
                 export_interval_s: float | None = None) -> None:
        self.capture = capture
        self.metrics = metrics  # Prometheus Metrics to share labels (model cap) with, if any
        self.export_interval_s = export_interval_s
        self.otel: OtelMetrics | None = None
        self.endpoint: str | None = None  # where metrics are pushed, while on
        self._configured = False
        self._attached = False

    def load(self, loader) -> None:
        loader.add_option(
            "firsttoken_otlp_endpoint", str, "",
            "Push OpenTelemetry GenAI metrics over OTLP/HTTP to this URL (e.g. http://127.0.0.1:4318/v1/metrics). "
            f"Empty: $OTEL_EXPORTER_OTLP_METRICS_ENDPOINT or $OTEL_EXPORTER_OTLP_ENDPOINT when set, else off. "
            f"Needs {INSTALL_HINT}.")

    def configure(self, updated: Iterable[str]) -> None:
        """Starts (or restarts) the export at the first configure and when the option changes."""
        from mitmproxy import ctx, exceptions

        if self._configured and "firsttoken_otlp_endpoint" not in set(updated):
            return
        explicit = ctx.options.firsttoken_otlp_endpoint.strip()
        if explicit:
            try:
                metrics_url(explicit)
                _require_sdk()
            except (ValueError, OtelMissing) as e:
                raise exceptions.OptionsError(str(e)) from None
        restart, self._configured = self._configured, True
        self._start(background_close=restart)

    def done(self) -> None:
        """mitmproxy shuts down (after Capture.done handed over every record): export the rest."""
        self._stop()

    # -- internals --------------------------------------------------------------------
    def _wanted(self) -> tuple[str | None, bool]:
        """(endpoint, explicit): the option's URL, else the environment's, else (None, False)."""
        from mitmproxy import ctx

        explicit = ctx.options.firsttoken_otlp_endpoint.strip()
        if explicit:
            return metrics_url(explicit), True
        return env_endpoint(), False

    def _start(self, background_close: bool = False) -> None:
        from mitmproxy import exceptions

        self._stop(background=background_close)
        endpoint, explicit = self._wanted()
        if endpoint is None:
            return
        protocol = os.environ.get("OTEL_EXPORTER_OTLP_METRICS_PROTOCOL") or os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL")
        if not explicit and protocol and protocol.strip() != "http/protobuf":
            log.warning("firsttoken: OTEL_EXPORTER_OTLP_PROTOCOL=%s, but firsttoken sends OTLP over http/protobuf "
                        "only; metrics go to %s", protocol, endpoint)
        try:
            otel = OtelMetrics.otlp(endpoint, export_interval_s=self.export_interval_s, metrics=self.metrics)
        except OtelMissing as e:
            if explicit:
                raise exceptions.OptionsError(str(e)) from None
            # only implied by the environment (set for other programs, perhaps): say so, go on
            log.warning("%s (OTEL_EXPORTER_OTLP_ENDPOINT is set; metrics are not exported)", e)
            return
        except ValueError as e:
            if explicit:
                raise exceptions.OptionsError(str(e)) from None
            log.warning("firsttoken: %s (from the environment); metrics are not exported", e)
            return
        self.otel, self.endpoint = otel, endpoint
        if not self._attached:
            self.capture.listeners.append(self._observe)
            self._attached = True
        log.info("firsttoken OpenTelemetry metrics -> %s", endpoint)

    def _observe(self, rec: Record) -> None:
        otel = self.otel
        if otel is not None:
            otel.observe(rec)

    def _stop(self, background: bool = False) -> None:
        otel, self.otel, self.endpoint = self.otel, None, None
        if otel is None:
            return
        if background:  # a change while running: do not hold the event loop for the final export
            threading.Thread(target=otel.close, name="firsttoken-otel-close", daemon=True).start()
        else:
            otel.close()
