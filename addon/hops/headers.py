"""Who answered: the response headers that identify or time the hops between firsttoken and the model.

``pick`` runs on the event loop once per response (a dict walk, no regex); ``clean`` (the
credential check, redaction, caps) runs on the analysis thread. Which headers are kept and
why: docs/gateways.md ("Who answered").
"""

from __future__ import annotations

from firsttoken.addon.secrets import is_secret_header, redact_text

#: headers kept whole (lower-case names)
EXACT = frozenset({
    # generic proxies, CDNs and load balancers
    "x-served-by", "x-cache", "x-cache-hits", "x-cache-status", "x-timer", "x-powered-by", "x-aspnet-version",
    "x-accel-buffering", "x-proxy-cache", "x-forwarded-server", "age",
    # Cloudflare, AWS, Google, Azure, Fastly, Akamai, Vercel, Fly, Netlify
    "cf-ray", "cf-cache-status", "x-amz-cf-id", "x-amz-cf-pop", "x-amzn-requestid", "x-amzn-trace-id",
    "x-amz-apigw-id", "x-amzn-errortype", "x-cloud-trace-context", "x-goog-request-id", "x-azure-ref", "x-msedge-ref", "x-ms-region",
    "apim-request-id", "x-ms-client-request-id", "azureml-model-session", "x-check-cacheable", "x-vercel-id",
    "x-vercel-cache", "fly-request-id", "x-nf-request-id", "akamai-grn", "x-akamai-request-id",
    # service meshes and API gateways
    "x-envoy-upstream-service-time", "x-envoy-decorator-operation", "x-upstream-latency",
    # providers' own timing and ids
    "openai-processing-ms", "openai-version", "x-request-id", "request-id", "openai-request-id",
    "x-oneapi-request-id", "x-new-api-version", "x-trace-id", "x-correlation-id", "x-groq-region",
    "server-timing",
    # model servers' own report (addon/engines): TGI's timing headers
    "x-queue-time", "x-inference-time", "x-time-per-token", "x-prompt-tokens", "x-generated-tokens",
    "x-validation-time", "x-total-time", "x-compute-time", "x-compute-type",
})
#: header families kept by prefix
PREFIXES = ("x-litellm-", "x-kong-", "x-envoy-", "x-portkey-", "helicone-", "x-helicone-", "x-openrouter-",
            "x-cache-", "x-akamai-", "x-amzn-bedrock-")
#: LiteLLM passes the upstream's own headers on under this prefix (``llm_provider-openai-processing-ms``):
#: kept when the name after it would be kept (or is the upstream's Server or Via)
PASSED_ON = "llm_provider-"
#: bookkeeping that says nothing about the hop (LiteLLM's eight cost headers): not kept
SKIP_PREFIXES = ("x-litellm-response-cost",)
#: at most this many headers besides Server and Via, each value at most VALUE_MAX characters,
#: and at most TOTAL_MAX characters of names and values together
MAX_HEADERS = 24
VALUE_MAX = 200
TOTAL_MAX = 2048


def _clean(value: str) -> str:
    """A header value fit to store and show: printable, key-like parts masked, capped."""
    v = value if len(value) <= 4 * VALUE_MAX else value[: 4 * VALUE_MAX]
    if not v.isprintable():
        v = "".join(ch if ch.isprintable() else " " for ch in v)
    v = redact_text(v.strip())
    return v if len(v) <= VALUE_MAX else v[: VALUE_MAX - 1] + "\u2026"


def _passed_on(name: str) -> bool:
    return name in EXACT or name in ("server", "via") or (name.startswith(PREFIXES) and not name.startswith(SKIP_PREFIXES))


def pick(headers: dict[str, str]) -> tuple[str | None, str | None, dict[str, str]]:
    """(Server, Via, the allow-listed headers) as they came, bounded in number and length but not yet
    cleaned: the event loop's part (a dict walk, no regex). ``clean`` finishes the job off the loop;
    until then the values stay in memory only, like the request's credentials."""
    out: dict[str, str] = {}
    cap = 4 * VALUE_MAX
    for name, value in headers.items():
        if name in EXACT or (name.startswith(PREFIXES) and not name.startswith(SKIP_PREFIXES)) or (
                name.startswith(PASSED_ON) and _passed_on(name[len(PASSED_ON):])):
            out[name] = value if len(value) <= cap else value[:cap]
            if len(out) >= MAX_HEADERS:
                break
    server, via = headers.get("server"), headers.get("via")
    return (server[:cap] if server else None), (via[:cap] if via else None), out


def clean(server: str | None, via: str | None, picked: dict[str, str]) -> tuple[str | None, str | None, dict[str, str]]:
    """What the record keeps of ``pick``'s result: never a credential header, printable, key-like
    parts masked, each value and the total capped."""
    out: dict[str, str] = {}
    total = 0
    for name, value in picked.items():
        if is_secret_header(name):
            continue
        v = _clean(value)
        total += len(name) + len(v)
        if total > TOTAL_MAX:
            break
        out[name] = v
    return (_clean(server) if server else None), (_clean(via) if via else None), out


def who_answered(headers: dict[str, str]) -> tuple[str | None, str | None, dict[str, str]]:
    """(Server, Via, the other allow-listed headers) of one response's headers (lower-case names),
    cleaned: ``clean(*pick(headers))``."""
    return clean(*pick(headers))
