"""Prometheus metrics of the proxied LLM calls (OpenTelemetry GenAI names), fed by finished records.

:meth:`Metrics.attach` listens to Capture (analysis thread), :meth:`Metrics.serve` exposes
``/metrics`` on its own port; :class:`MetricsAddon` does both from ``firsttoken_metrics_port``.
The metrics and labels: docs/clients.md ("Prometheus metrics").
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.exposition import start_http_server

from firsttoken.addon.apis import gemini
from firsttoken.addon.apis.clouds import PLATFORM
from firsttoken.addon.forward import provider_for_host
from firsttoken.addon.framing import framing_of
from firsttoken.addon.record import Record
from firsttoken.addon.safe_text import clause

log = logging.getLogger("firsttoken")

#: semconv ExplicitBucketBoundaries for gen_ai.client.operation.duration, time_to_first_chunk,
#: time_per_output_chunk (seconds)
DURATION_BUCKETS = (0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92)
#: semconv ExplicitBucketBoundaries for gen_ai.client.token.usage
TOKEN_BUCKETS = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864)

OPERATION = {
    "openai.chat": "chat",
    "openai.responses": "chat",
    "anthropic.messages": "chat",
    "anthropic.vertex": "chat",
    "anthropic.bedrock": "chat",
    "bedrock.converse": "chat",
    "openai.completions": "text_completion",
    "gemini.generate": "generate_content",
    "ollama.chat": "chat",
    "ollama.generate": "text_completion",
}
#: any other known API: "openai" (its wire format); the clouds' APIs: their platform (gcp.vertex_ai, aws.bedrock)
API_PROVIDER = {"anthropic.messages": "anthropic", "ollama.chat": "ollama", "ollama.generate": "ollama", **PLATFORM}

GENAI_LABELS = ("gen_ai_operation_name", "gen_ai_provider_name", "gen_ai_request_model", "server_address", "server_port")
MAX_MODELS = 200  # distinct gen_ai_request_model values before the rest become "_OTHER"


class Metrics:
    """A registry of its own (several proxies in one process never clash)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry(auto_describe=True)
        r = self.registry
        self.duration = Histogram(
            "gen_ai_client_operation_duration_seconds", "GenAI operation duration (request start to last byte).",
            GENAI_LABELS + ("error_type",), buckets=DURATION_BUCKETS, registry=r)
        self.ttfc = Histogram(
            "gen_ai_client_operation_time_to_first_chunk_seconds",
            "Time to receive the first chunk of the response stream (streaming calls only).",
            GENAI_LABELS, buckets=DURATION_BUCKETS, registry=r)
        self.tpoc = Histogram(
            "gen_ai_client_operation_time_per_output_chunk_seconds",
            "Time between consecutive output chunks (token-bearing events), streaming calls only.",
            GENAI_LABELS, buckets=DURATION_BUCKETS, registry=r)
        self.tokens = Histogram(
            "gen_ai_client_token_usage", "Number of input and output tokens used, as the API reported them.",
            GENAI_LABELS + ("gen_ai_token_type",), buckets=TOKEN_BUCKETS, registry=r)
        self.estimated = Histogram(
            "firsttoken_client_token_estimated", "Input and output tokens as firsttoken estimated them, for "
            "calls whose API reported no usage.",
            GENAI_LABELS + ("gen_ai_token_type",), buckets=TOKEN_BUCKETS, registry=r)
        self.ttfb = Histogram(
            "firsttoken_ttfb_seconds", "Time to the upstream's response headers.",
            GENAI_LABELS + ("route",), buckets=DURATION_BUCKETS, registry=r)
        self.ttft = Histogram(
            "firsttoken_time_to_first_token_seconds", "Time to the first visible output token.",
            GENAI_LABELS + ("route",), buckets=DURATION_BUCKETS, registry=r)
        self.gap = Histogram(
            "firsttoken_gap_seconds", "TTFT minus TTFB: the model-side part of TTFT (prefill, reasoning); "
            "a large TTFB points at the network or a gateway instead.",
            GENAI_LABELS + ("route",), buckets=DURATION_BUCKETS, registry=r)
        self.requests = Counter(
            "firsttoken_requests", "Requests recorded by firsttoken.",
            ("route", "api", "gen_ai_request_model", "status_class"), registry=r)
        self.findings = Counter(
            "firsttoken_findings", "Diagnosis findings.", ("code", "severity"), registry=r)
        self.in_flight = Gauge("firsttoken_in_flight_requests", "Requests in flight through the proxy.", registry=r)
        self._models: set[str] = set()
        self._lock = threading.Lock()
        self.errors = 0  # observe() failures (logged, never raised into the proxy)

    # -- feeding ---------------------------------------------------------------------
    def attach(self, capture: Any) -> Metrics:
        """Observe every finished record of a Capture; report its in-flight count."""
        capture.listeners.append(self.observe)
        self.in_flight.set_function(capture.in_flight)
        return self

    def observe(self, rec: Record) -> None:
        try:
            self._observe(rec)
        except Exception:  # a metrics bug must never break the proxy
            self.errors += 1
            log.exception("firsttoken: metrics failed for %s", getattr(rec, "id", "?"))

    def _observe(self, rec: Record) -> None:
        base = self.labels(rec)
        self.requests.labels(rec.route or "", rec.api or "other", base[GENAI_LABELS.index("gen_ai_request_model")],
                             status_class(rec)).inc()
        for f in rec.findings or ():
            self.findings.labels(str(f.get("code", "")), str(f.get("severity", ""))).inc()
        if rec.ttfb_ms is not None:
            self.ttfb.labels(*base, rec.route or "").observe(rec.ttfb_ms / 1000.0)
        if rec.ttft_ms is not None:
            self.ttft.labels(*base, rec.route or "").observe(rec.ttft_ms / 1000.0)
        if rec.gap_ms is not None:
            self.gap.labels(*base, rec.route or "").observe(max(rec.gap_ms, 0.0) / 1000.0)
        if rec.api not in OPERATION:
            return  # not an LLM call (GET /v1/models, count_tokens, a wrong path…): no gen_ai_* metrics
        if rec.total_ms is not None:
            self.duration.labels(*base, error_type(rec)).observe(rec.total_ms / 1000.0)
        if is_streaming(rec):
            first = rec.first_byte_ms if rec.first_byte_ms is not None else rec.first_token_ms
            if first is not None:
                self.ttfc.labels(*base).observe(first / 1000.0)
            offsets = rec.event_offsets or []
            if len(offsets) >= 2:
                child = self.tpoc.labels(*base)
                for a, b in zip(offsets, offsets[1:]):
                    child.observe(max(b - a, 0.0) / 1000.0)
        for kind, n, estimated in token_counts(rec):
            (self.estimated if estimated else self.tokens).labels(*base, kind).observe(n)

    def labels(self, rec: Record) -> tuple[str, ...]:
        """The semconv attributes of a record, in GENAI_LABELS order."""
        operation, provider, host, port = genai_identity(rec)
        return (operation, provider, self._model(rec.model), host or "", str(port) if port else "")

    def _model(self, model: str | None) -> str:
        if not model:
            return ""
        model = model[:120]
        with self._lock:
            if model in self._models:
                return model
            if len(self._models) >= MAX_MODELS:
                return "_OTHER"
            self._models.add(model)
            return model

    # -- serving ---------------------------------------------------------------------
    def serve(self, host: str = "127.0.0.1", port: int = 9464) -> MetricsHTTP:
        return MetricsHTTP(self.registry, host, port)


class MetricsHTTP:
    """prometheus_client's threaded HTTP server on ``host:port`` (0: any free port)."""

    def __init__(self, registry: CollectorRegistry, host: str, port: int) -> None:
        self.httpd, self.thread = start_http_server(port, addr=host, registry=registry)
        self.host = host
        self.port = self.httpd.server_address[1]

    @property
    def url(self) -> str:
        host = "127.0.0.1" if self.host in ("0.0.0.0", "") else self.host
        host = f"[{host}]" if ":" in host else host
        return f"http://{host}:{self.port}/metrics"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(5)


def status_class(rec: Record) -> str:
    if rec.status is None:
        return "error"  # no response at all (refused, DNS, TLS, timeout, client gone)
    return f"{rec.status // 100}xx"


def token_counts(rec: Record) -> list[tuple[str, int, bool]]:
    """(``input`` | ``output``, tokens, estimated): the API's usage where it reported one, else
    firsttoken's estimate, flagged, never passed off as usage (Prometheus and OTel both ask)."""
    out = []
    for kind, usage, est in (("input", rec.usage_prompt_tokens, rec.prompt_tokens_est),
                             ("output", rec.usage_completion_tokens, rec.output_tokens_est)):
        if usage is not None:
            out.append((kind, usage, False))
        elif est is not None:
            out.append((kind, est, True))
    return out


def is_streaming(rec: Record) -> bool:
    if rec.stream:
        return True
    return framing_of(rec.content_type) is not None  # an event stream, SSE or AWS's (addon/framing)


def error_type(rec: Record) -> str:
    """A low-cardinality ``error.type``; "" when the operation succeeded."""
    if rec.status is not None and rec.status >= 400:
        return str(rec.status)
    if rec.upstream_error_type:
        return str(rec.upstream_error_type)[:60]
    if rec.upstream_error:
        return "stream_error"
    if rec.client_aborted:
        return "client_aborted"
    if rec.error:
        msg = rec.error.lower()
        for needle, kind in (("timed out", "timeout"), ("timeout", "timeout"), ("refused", "connection_refused"),
                             ("name or service", "dns"), ("getaddrinfo", "dns"), ("resolve", "dns"),
                             ("certificate", "tls"), ("tls", "tls"), ("ssl", "tls"), ("reset", "connection_reset"),
                             ("shut down", "proxy_shutdown"), ("no route", "no_route")):
            if needle in msg:
                return kind
        return "_OTHER"
    if is_streaming(rec) and rec.stream_done is False and rec.status is not None:
        return "incomplete_stream"
    return ""


def genai_identity(rec: Record) -> tuple[str, str, str | None, int | None]:
    """(gen_ai.operation.name, gen_ai.provider.name, server.address, server.port) of a record: the
    one extraction the Prometheus labels, the OTLP metrics and the OTLP spans share."""
    host, port = _host_port(rec.upstream_url or rec.upstream)
    if rec.api == gemini.API:  # behind a gateway: Vertex AI's project paths, else the Gemini API
        fallback = "gcp.vertex_ai" if gemini.is_vertex(rec.path) else "gcp.gemini"
    else:
        fallback = API_PROVIDER.get(rec.api, "openai")
    return OPERATION.get(rec.api, rec.api or "other"), provider_for_host(host) or fallback, host, port


def _host_port(url: str | None) -> tuple[str | None, int | None]:
    if not url:
        return None, None
    try:
        u = urlsplit(url)
        return u.hostname, u.port or (443 if u.scheme == "https" else 80 if u.scheme == "http" else None)
    except ValueError:
        return None, None


# -- as a mitmproxy addon -----------------------------------------------------------------

class MetricsAddon:
    """Serves the metrics of ``capture`` while ``firsttoken_metrics_port`` is set.

    ``mitmdump -s`` / embedded: ``addons = [capture, MetricsAddon(capture)]``."""

    def __init__(self, capture: Any, metrics: Metrics | None = None) -> None:
        self.capture = capture
        self.metrics = metrics or Metrics()
        self.server: MetricsHTTP | None = None
        self._attached = False

    def load(self, loader) -> None:
        from typing import Optional

        loader.add_option("firsttoken_metrics_port", Optional[int], None,  # noqa: UP045 - mitmproxy option typespec
                          "Serve Prometheus metrics on this port (0: any free port). Off when unset.")
        loader.add_option("firsttoken_metrics_host", str, "127.0.0.1", "Address of the metrics endpoint.")

    def configure(self, updated: Iterable[str]) -> None:
        from mitmproxy import ctx, exceptions

        if not ({"firsttoken_metrics_port", "firsttoken_metrics_host"} & set(updated)):
            return
        self._close()
        port = ctx.options.firsttoken_metrics_port
        if port is None:
            return
        if not self._attached:
            self.metrics.attach(self.capture)
            self._attached = True
        try:
            self.server = self.metrics.serve(ctx.options.firsttoken_metrics_host, port)
        except (OSError, OverflowError) as e:  # OverflowError: a port outside 0-65535
            raise exceptions.OptionsError(
                f"firsttoken cannot serve metrics on {ctx.options.firsttoken_metrics_host}:{port}: {clause(e)}. "
                "Pick another --metrics-port."
            ) from None
        log.info("firsttoken metrics on %s", self.server.url)

    @property
    def url(self) -> str | None:
        return self.server.url if self.server else None

    def done(self) -> None:
        self._close()

    def _close(self) -> None:
        if self.server is not None:
            self.server.close()
            self.server = None
