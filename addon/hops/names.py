"""Naming the hop that answered, from ``Server``, ``Via`` and the allow-listed headers.

``name_hop`` is pure and cheap: a ``Hop`` (``kind`` for findings and docs, ``name`` for people,
e.g. "nginx/1.22.1") or None. A gateway's own headers win over the app server under it; which
hop each header names: docs/gateways.md ("Who answered").
"""

from __future__ import annotations

import re
from typing import NamedTuple


class Hop(NamedTuple):
    kind: str  # nginx | cloudflare | caddy | envoy | apache | iis | litellm | kong | oneapi | aws | cloudfront | gcp
    #           | azure | akamai | fastly | varnish | squid | vercel | other
    name: str  # what a person reads: "nginx/1.22.1", "Cloudflare", ...


#: kinds that pass a stream through as it comes unless configured otherwise: when a stream behind one
#: of them arrives buffered, the buffering is more likely further in (the origin, the provider), so a
#: finding does not say that this hop held it (its fix says where to look)
PASS_THROUGH = frozenset({"cloudflare", "aws", "gcp", "litellm", "oneapi", "app"})

#: (kind, display name or None for the Server value itself, pattern on the lower-cased Server value)
_SERVERS: tuple[tuple[str, str | None, re.Pattern[str]], ...] = tuple(
    (k, n, re.compile(p)) for k, n, p in (
        ("cloudflare", "Cloudflare", r"^cloudflare"),
        ("nginx", None, r"^(nginx|openresty|tengine|angie)\b"),
        ("caddy", "Caddy", r"^caddy\b"),
        ("envoy", "Envoy", r"^(istio-)?envoy\b"),
        ("apache", None, r"^apache\b"),
        ("iis", None, r"^microsoft-iis\b"),
        ("aws", "AWS load balancer", r"^awselb\b"),
        ("cloudfront", "CloudFront", r"^(amazons3|cloudfront)\b"),
        ("gcp", "Google Cloud load balancer", r"^(google frontend|gfe|esf)\b"),
        ("akamai", "Akamai", r"^akamai"),
        ("squid", None, r"^squid\b"),
        ("varnish", "Varnish", r"^varnish\b"),
        ("vercel", "Vercel", r"^vercel\b"),
        ("kong", None, r"^kong\b"),
        ("traefik", "Traefik", r"^traefik\b"),
        ("haproxy", "HAProxy", r"^haproxy\b"),
    )
)
#: (kind, display name, token in the lower-cased Via value)
_VIAS = (
    ("caddy", "Caddy", "caddy"), ("kong", "Kong", "kong/"), ("cloudfront", "CloudFront", "cloudfront"),
    ("gcp", "Google Cloud load balancer", "google"), ("varnish", "Varnish", "varnish"), ("squid", "Squid", "squid"),
    ("nginx", "nginx", "nginx"), ("envoy", "Envoy", "envoy"), ("apache", "Apache httpd", "apache"),
    ("akamai", "Akamai", "akamai"),
)
#: app servers under a gateway: named only when nothing else is
_APP_SERVERS = re.compile(r"^(uvicorn|gunicorn|hypercorn|granian|werkzeug|gin|fasthttp|go|python|node)\b")


def _short(value: str, limit: int = 40) -> str:
    value = value.strip()
    return value if len(value) <= limit else value[: limit - 1] + "\u2026"


def name_hop(server: str | None, via: str | None = None, headers: dict[str, str] | None = None) -> Hop | None:
    """The hop that answered, or None when no header says."""
    h = headers or {}
    s = (server or "").strip()
    low = s.lower()
    if any(k.startswith("x-litellm-") for k in h):
        version = h.get("x-litellm-version")
        return Hop("litellm", f"LiteLLM {_short(version, 16)}" if version else "LiteLLM")
    if any(k.startswith("x-kong-") for k in h) and not low.startswith("kong"):
        return Hop("kong", "Kong")
    if "x-oneapi-request-id" in h or "x-new-api-version" in h:
        return Hop("oneapi", "one-api/new-api")
    if low:
        for kind, name, pat in _SERVERS:
            if pat.match(low):
                if kind == "iis" and "arr" in (h.get("x-powered-by") or "").lower():
                    return Hop(kind, _short(s) + " (ARR)")
                return Hop(kind, name or _short(s))
    if "cf-ray" in h:
        return Hop("cloudflare", "Cloudflare")
    if "x-amz-cf-id" in h or "x-amz-cf-pop" in h:
        return Hop("cloudfront", "CloudFront")
    if "x-azure-ref" in h or "x-msedge-ref" in h:
        return Hop("azure", "Azure Front Door")
    if "apim-request-id" in h:
        return Hop("azure", "Azure API Management")
    if "x-served-by" in h and "x-timer" in h:
        return Hop("fastly", "Fastly")
    vlow = (via or "").lower()
    for kind, name, token in _VIAS:
        if token in vlow:
            return Hop(kind, name)
    if "x-envoy-upstream-service-time" in h:
        return Hop("envoy", "Envoy")
    if low and not _APP_SERVERS.match(low):
        return Hop("other", _short(s))
    if low:
        return Hop("app", _short(s))
    return None
