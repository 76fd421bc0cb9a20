"""Timings the hops and the provider report about themselves, read from a record's hop headers.

Through a hop that holds its headers, these (where present) split TTFT without a fit: LiteLLM's
own overhead, how long it waited for the upstream's headers, the provider's processing time.
See docs/gateways.md.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

#: (header, what it measures, who reports it); ``what`` is a label key of the reading views
HEADERS = (
    ("x-litellm-overhead-duration-ms", "gateway_overhead", "LiteLLM"),
    ("x-litellm-response-duration-ms", "gateway_waited", "LiteLLM"),
    ("x-kong-proxy-latency", "gateway_overhead", "Kong"),
    ("x-kong-upstream-latency", "gateway_waited", "Kong"),
    ("x-envoy-upstream-service-time", "gateway_waited", "Envoy"),
    ("x-upstream-latency", "gateway_waited", None),
    ("openai-processing-ms", "provider_processing", None),
    ("llm_provider-openai-processing-ms", "provider_processing", None),  # the upstream's, passed on by LiteLLM
    # Bedrock: a whole answer's headers, and a stream's last event (amazon-bedrock-invocationMetrics,
    # kept under these names by the analysis: addon/apis/bedrock.py)
    ("x-amzn-bedrock-invocation-latency", "provider_processing", "Bedrock"),
    ("amazon-bedrock-invocationmetrics.firstbytelatency", "provider_first_byte", "Bedrock"),
    ("amazon-bedrock-invocationmetrics.invocationlatency", "provider_processing", "Bedrock"),
    ("bedrock-converse-metrics.latencyms", "provider_processing", "Bedrock"),
)
_DUR = re.compile(r"(?:^|;)\s*dur\s*=\s*\"?([0-9]+(?:\.[0-9]+)?)", re.IGNORECASE)


@dataclass(frozen=True)
class Reported:
    what: str  # gateway_overhead | gateway_waited | provider_processing | provider_first_byte | server_timing
    ms: float
    header: str  # the header (and, for Server-Timing, the metric's name)
    who: str | None = None


def _ms(v: Any) -> float | None:
    try:
        x = float(str(v).strip())
    except (TypeError, ValueError):
        return None  # LiteLLM writes "None" when it has no figure
    return x if 0.0 <= x < 86_400_000.0 else None


def reported_timings(hop_headers: dict[str, Any] | None) -> list[Reported]:
    """What the record's hop headers say about where the time went, in a fixed order."""
    if not isinstance(hop_headers, dict):
        return []
    out = []
    for header, what, who in HEADERS:
        ms = _ms(hop_headers.get(header))
        if ms is not None:
            out.append(Reported(what, round(ms, 1), header, who))
    for prefix in ("", "llm_provider-"):
        st = hop_headers.get(prefix + "server-timing")
        for metric in str(st).split(",") if st else ():
            name, _, rest = metric.strip().partition(";")
            m = _DUR.search(";" + rest)
            if name and m and (ms := _ms(m.group(1))) is not None:
                out.append(Reported("server_timing", round(ms, 1), f"{prefix}server-timing {name.strip()[:40]}"))
    return out
