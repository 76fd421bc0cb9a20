"""SimConfig (the knobs of the simulated upstream) and the names of the faults it can inject."""

from __future__ import annotations

from dataclasses import dataclass, field

# Faults that replace the whole answer by an error response (status + API-shaped error body).
ERROR_FAULTS: tuple[str, ...] = (
    "auth",
    "model_not_found",
    "rate_limit",
    "quota",
    "server_error",
    "overloaded",
    "max_tokens",
    "context_length",
)

# Faults that change how a (successful) answer is delivered.
DELIVERY_FAULTS: tuple[str, ...] = (
    "no_choices",
    "buffered",
    "buffer_4k",
    "mid_stream_error",
    "stall",
    "drop",
    "truncated",
    "keepalive",
    "not_sse",
    "no_usage",
    "malformed_stream",
    "gzip",
    "error_line",
    "slow_ttfb",
    "cache_hit",
    "hold_headers",
)

FAULTS: tuple[str, ...] = ERROR_FAULTS + DELIVERY_FAULTS

FAULT_HELP: dict[str, str] = {
    "auth": "401 invalid API key (OpenAI invalid_api_key / Anthropic authentication_error)",
    "model_not_found": "404 the model does not exist (OpenAI model_not_found / Anthropic not_found_error)",
    "rate_limit": "429 rate limit with retry-after: 2 and x-ratelimit-* headers",
    "quota": "OpenAI 429 insufficient_quota / Anthropic 400 'credit balance is too low'",
    "server_error": "500 internal server error",
    "overloaded": "OpenAI 503 / Anthropic 529 overloaded_error",
    "max_tokens": "400 max_tokens is too large",
    "context_length": "400 context length exceeded",
    "no_choices": "200 but the body / chunks have no choices (Anthropic: no content blocks)",
    "buffered": "stream computed on schedule but every event delivered at once at the end",
    "buffer_4k": "like nginx's default proxy buffering: the headers and the events held and sent in 4 KB blocks, the rest at the end",
    "mid_stream_error": "some tokens, then an in-stream error event",
    "stall": "a pause of stall_ms in the middle of the stream",
    "drop": "TCP connection closed mid-stream, no terminator",
    "truncated": "stream ends cleanly but without [DONE] / message_stop / response.completed",
    "keepalive": "': keep-alive' SSE comments after every 100 ms without output (prefill, stalls)",
    "not_sse": "stream requested, plain application/json body returned",
    "no_usage": "never report usage (even with stream_options.include_usage)",
    "malformed_stream": "one data line in the stream is cut-off, invalid JSON",
    "gzip": "Content-Encoding: gzip body, flushed per event",
    "error_line": "some tokens, then a bare `error: {...}` SSE line and the end of the stream",
    "slow_ttfb": "response headers 1000 ms later than ttfb_ms",
    "cache_hit": "usage reports a prompt-cache read of 80% of the input (and prefill gets faster)",
    "hold_headers": "stream headers held until the first token, as LiteLLM's proxy does (TTFB includes the prefill)",
}

assert set(FAULT_HELP) == set(FAULTS)

FAULT_HEADER = "x-sim-fault"
FAULT_MODEL_PREFIX = "fault-"


@dataclass
class SimConfig:
    """Timing model and behaviour of the simulated upstream. Times are in milliseconds."""

    ttfb_ms: float = 60.0
    prefill_base_ms: float = 40.0
    prefill_ms_per_1k_tokens: float = 30.0
    tpot_ms: float = 15.0
    output_tokens: int = 32
    fill_max_tokens: bool = False
    ignore_max_tokens: bool = False  # answer output_tokens whatever max_tokens says (as some gateways do)
    reasoning_tokens: int = 16
    jitter: float = 0.0
    seed: int | None = None
    prefix: str = ""
    api_key: str | None = None
    protocols: tuple[str, ...] = field(default_factory=lambda: ("openai", "anthropic"))
    stall_ms: float = 1500.0
    max_fill_tokens: int = 8192
    verbose: bool = False  # print one line per request on stderr
    prompt_cache: bool = False  # report cached tokens for the prefix earlier requests sent (cache.py)
    websocket: bool = True  # serve Responses over a WebSocket on GET /v1/responses (else that upgrade is a 404)

    def __post_init__(self) -> None:
        p = (self.prefix or "").strip()
        if p and not p.startswith("/"):
            p = "/" + p
        self.prefix = p.rstrip("/")
        if isinstance(self.protocols, str):
            self.protocols = tuple(x.strip() for x in self.protocols.split(",") if x.strip())
        self.protocols = tuple(self.protocols)
        unknown = set(self.protocols) - {"openai", "anthropic"}
        if unknown or not self.protocols:
            raise ValueError(f"protocols must be a subset of ('openai', 'anthropic'), got {self.protocols!r}")
        if not 0.0 <= self.jitter < 1.0:
            raise ValueError("jitter is a fraction in [0, 1)")


class UnknownFault(ValueError):
    pass


def parse_faults(header_value: str | None, model: str | None) -> frozenset[str]:
    """Faults asked for by the `x-sim-fault` header (comma-separated) and/or a model named `fault-NAME`."""
    names: list[str] = []
    if header_value:
        names += [n.strip().lower().replace("-", "_") for n in header_value.split(",") if n.strip()]
    if isinstance(model, str) and model.startswith(FAULT_MODEL_PREFIX):
        names += [n.strip().lower().replace("-", "_") for n in model[len(FAULT_MODEL_PREFIX) :].split(",") if n.strip()]
    bad = [n for n in names if n not in FAULTS]
    if bad:
        raise UnknownFault(f"unknown fault {bad[0]!r}; known faults: {', '.join(FAULTS)}")
    return frozenset(names)
