"""The record: one row per request, and the timing arithmetic that fills it.

Every interval is milliseconds from ``t0`` (the moment the proxy read the client's request
head, which in a busy proxy is earlier than its hooks ran), measured with ``time.perf_counter``. Only ``started_at`` is wall-clock time.
The field names here are the column names in SQLite and the keys of ``logs --json``;
docs/record.md describes each one.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, NamedTuple

#: token-bearing events kept per request (offsets in ms); longer streams keep the first N.
MAX_EVENT_OFFSETS = 4096


@dataclass
class Record:
    id: str
    started_at: str
    state: str = "in_flight"  # in_flight | done
    phase: str = "connecting"  # connecting | waiting_headers | prefill | streaming | done
    route: str | None = None
    upstream: str | None = None
    method: str | None = None
    path: str | None = None  # the path the client sent
    upstream_url: str | None = None  # where it was forwarded (query string dropped)
    api: str = "other"  # openai.* | anthropic.messages | anthropic.vertex | anthropic.bedrock | bedrock.converse | gemini.generate | ollama.chat | ollama.generate | other
    model: str | None = None
    stream: bool | None = None  # as requested in the body (Gemini: by the method, streamGenerateContent)
    max_tokens: int | None = None
    num_ctx: int | None = None  # the context window the request asked the engine for (Ollama's options.num_ctx)
    experiment: str | None = None
    run_id: str | None = None  # the `firsttoken run` this request belonged to
    egress_proxy: str | None = None  # the proxy the upstream leg went through (scheme://host:port), None: direct
    # what carried the exchange (docs/record.md "WebSocket turns"): http, or websocket (a Responses
    # `response.create` turn on an upgraded connection; also a refused upgrade, with no ws_turn)
    transport: str = "http"
    ws_connection_id: str | None = None  # the upgrade's id: every turn of one connection shares it
    ws_turn: int | None = None  # the turn's place on its connection (1, 2, ...)
    ws_connection: dict[str, Any] = field(default_factory=dict)  # the connection's set-up (connect, 101, headers)
    ws_close_code: int | None = None  # the close that hit this turn (or ended the connection after it)
    ws_close_reason: str | None = None
    ws_closed_by: str | None = None  # client | server | proxy
    ws_binary_frames: int = 0  # the server's frames of this turn that were binary, not text
    # conversation (see addon/conversations.py)
    conversation_id: str | None = None  # the client's session, else the chain of growing message lists
    turn: int | None = None  # the conversation's turn: a new user message starts one, tool results continue it
    request_kind: str | None = None  # main | side (small-model call) | count_tokens
    client_gap_ms: float | None = None  # since the conversation's previous request ended (tools, typing)
    # response
    status: int | None = None
    content_type: str | None = None
    content_encoding: str | None = None
    upstream_request_id: str | None = None
    retry_after: float | None = None  # seconds, from retry-after / retry-after-ms
    # who answered (addon/hops): the response's Server and Via, the allow-listed gateway/provider
    # headers (capped, never a credential), and the hop they name ("nginx/1.22.1", "Cloudflare")
    server: str | None = None
    via: str | None = None
    hop_headers: dict[str, str] = field(default_factory=dict)
    hop: str | None = None
    # the engine's own report (addon/engines, docs/record.md "Engine"): which model server answered and
    # what it says it spent; engine_sources says where each value came from ("inferred: …" where it did not say)
    engine: str | None = None
    engine_queue_ms: float | None = None
    engine_load_ms: float | None = None
    engine_prefill_ms: float | None = None
    engine_decode_ms: float | None = None
    engine_prompt_tokens: int | None = None
    engine_cached_tokens: int | None = None
    engine_decode_tokens: int | None = None
    engine_sources: dict[str, str] = field(default_factory=dict)
    # timings (ms from t0)
    connect_ms: float | None = None
    conn_reused: bool | None = None
    ttfb_ms: float | None = None
    first_byte_ms: float | None = None
    first_token_ms: float | None = None
    ttft_ms: float | None = None
    gap_ms: float | None = None
    headers_held: bool | None = None  # the headers came with the first token: TTFB holds the prefill (addon/hops/held.py)
    total_ms: float | None = None
    end_silence_ms: float | None = None  # an abnormal end (error, hang-up): how long it had been silent before it
    itl_p50_ms: float | None = None
    itl_p95_ms: float | None = None
    itl_max_ms: float | None = None
    tpot_ms: float | None = None
    proxy_delay_ms: float | None = None  # the proxy's own added delay (see Clock.apply)
    proxy_lag_ms: float | None = None  # its event loop's lag when the request arrived (before t0)
    proxy_start_wait_ms: float | None = None  # of proxy_lag_ms, the part while the proxy was still starting
    proxy_cpu: float | None = None  # the proxy process's CPU use around the request (1.0 = one core)
    machine_load: float | None = None  # the machine's load average per core when the proxy was late
    events: int = 0
    event_offsets: list[float] = field(default_factory=list)
    sse_comments: int = 0
    sse_foreign_lines: int = 0  # lines of an SSE body that are no SSE field (an error page, JSON sent as a stream)
    # what the stream / body said
    usage_prompt_tokens: int | None = None
    usage_completion_tokens: int | None = None
    usage_cached_tokens: int | None = None
    usage_cache_creation_tokens: int | None = None
    usage_reasoning_tokens: int | None = None
    output_chars: int = 0
    reasoning_chars: int = 0
    finish_reason: str | None = None
    stream_done: bool | None = None  # saw [DONE] / message_stop / response.completed
    upstream_error: str | None = None  # error object the upstream sent (body or mid-stream event)
    upstream_error_type: str | None = None
    no_choices: str | None = None  # snippet of a 200 body/chunk lacking choices/content
    malformed_events: int = 0
    malformed_sample: str | None = None
    oversize_events: int = 0  # SSE events larger than firsttoken's analysis cap: forwarded, not analysed
    frame_error: str | None = None  # a binary stream's corrupt frame (bad CRC, impossible length): forwarded, not analysed after it
    # transport
    error: str | None = None  # mitmproxy's error text
    client_aborted: bool = False
    proxy_pid: int | None = None  # the proxy process that recorded it (closes rows a dead proxy left in flight)
    proxy_worker: int | None = None  # which process of a `--workers N` proxy forwarded it (0: the analysing one)
    request_bytes: int = 0
    response_bytes: int = 0
    # key fingerprint (never the key)
    key_header: str | None = None
    key_fingerprint: str | None = None
    key_scheme: str | None = None
    key_length: int | None = None
    key_facts: list[str] = field(default_factory=list)
    # tokens (filled off the event loop)
    request_error: str | None = None  # why the request body could not be read
    tokenizer: str | None = None
    tokens_exact: bool | None = None
    prompt_tokens_est: int | None = None
    system_tokens: int | None = None
    tools_tokens: int | None = None
    last_user_tokens: int | None = None
    messages: int | None = None
    images: int | None = None
    output_tokens_est: int | None = None
    usage_ratio: float | None = None  # server prompt tokens / our estimate
    calibration_factor: float | None = None  # this model's median server/estimate so far
    prompt_tokens_calibrated: int | None = None  # estimate × factor, when the server reported none
    prefix_hash: str | None = None
    prefix_tokens: int | None = None
    prefix_seen_before: int | None = None
    # diagnosis
    findings: list[dict[str, Any]] = field(default_factory=list)
    top_code: str | None = None
    top_severity: str | None = None
    ttft_outlier: str | None = None  # the finding that says TTFT is not prefill (diagnose.ttft_outlier): out of the fit
    # bodies, only with --save-bodies (redacted, capped)
    request_body: str | None = None
    response_body: str | None = None

    def row(self) -> dict[str, Any]:
        """The record as a flat dict for SQLite / JSON: its own copy of every list and of each
        finding (``dataclasses.asdict`` copied recursively, ~60 us a record on a busy proxy)."""
        d = {f: getattr(self, f) for f in FIELDS}
        d["event_offsets"] = list(self.event_offsets)
        d["key_facts"] = list(self.key_facts)
        d["hop_headers"] = dict(self.hop_headers)
        d["ws_connection"] = dict(self.ws_connection)
        d["engine_sources"] = dict(self.engine_sources)
        d["findings"] = [dict(f) for f in self.findings]
        return d


FIELDS = [f.name for f in dataclasses.fields(Record)]


def visible_output_tokens(completion: int | None, reasoning: int | None, estimate: int | None) -> int | None:
    """The output tokens generated after the first visible token: what TPOT divides by.

    Reasoning tokens come before TTFT, so they are taken out of the server's completion count
    (OpenAI, DeepSeek, Groq and Azure count them inside it). A reasoning count larger than the
    completion count means the server counts them apart (xAI): then completion is already the
    visible part. Without server usage, ``estimate`` is our count of the visible text."""
    if completion:
        if reasoning and reasoning < completion:
            return completion - reasoning
        return completion
    return estimate


def _ms(a: float | None, t0: float) -> float | None:
    return None if a is None else round((a - t0) * 1000.0, 3)


class PromptCount(NamedTuple):
    """A request's prompt size as every view and finding shows it."""
    tokens: int | None
    reported: bool  # True: the model server counted it (its usage, or the engine's own report)
    exact: bool  # an estimate by the model's own tokenizer (tokens_exact); always True when reported

    def text(self) -> str:
        """``96,006`` (the server's, or an exact count), ``~96,009`` (an estimate), ``–`` (unknown)."""
        if self.tokens is None:
            return "–"
        return f"{self.tokens:,}" if self.exact else f"~{self.tokens:,}"


def prompt_count(rec: Any) -> PromptCount:
    """The prompt count a view shows, and whether it is the server's or an estimate: the one rule.

    The server's ``usage_prompt_tokens`` when it reported them, else the engine's own count
    (``engine_prompt_tokens``: llama.cpp's timings, Ollama's final object), else firsttoken's
    estimate ``prompt_tokens_est``. ``rec``: a Record or a row dict."""
    def get(k: str) -> Any:
        return rec.get(k) if isinstance(rec, dict) else getattr(rec, k, None)

    for k in ("usage_prompt_tokens", "engine_prompt_tokens"):
        v = get(k)
        if v is not None:
            return PromptCount(v, True, True)
    return PromptCount(get("prompt_tokens_est"), False, bool(get("tokens_exact")))


def percentile(sorted_values: list[float], q: float) -> float:
    """Linear-interpolated percentile (q in 0..100) of an already sorted list."""
    if not sorted_values:
        raise ValueError("percentile of empty list")
    if len(sorted_values) == 1:
        return sorted_values[0]
    pos = (len(sorted_values) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


@dataclass
class Clock:
    """Raw perf_counter stamps for one request; ``apply`` turns them into record fields."""

    t0: float
    hook: float | None = None  # when the first hook ran (t0 is earlier when the proxy is busy)
    lag_in: float = 0.0  # event-loop lag when the request arrived (s): its bytes waited that long unread
    start_wait: float = 0.0  # of lag_in, the part before the proxy had started (s)
    lag_measured: bool = False  # lag_in came from the kernel (TCP_INFO), not from the lag samples
    machine_load: float | None = None  # the machine's load average per core (read when the proxy was late)
    lag_during: float = 0.0  # the largest event-loop lag while it was in flight (s)
    cpu: float | None = None  # the proxy process's CPU use around it (1.0 = one core)
    connect_start: float | None = None
    connect_end: float | None = None
    conn_reused: bool | None = None
    headers: float | None = None
    first_byte: float | None = None
    first_token: float | None = None
    first_visible: float | None = None
    last_byte: float | None = None
    end: float | None = None
    token_events: list[float] = field(default_factory=list)
    events_over_cap: int = 0  # token events beyond the tap's cap: counted, not timed

    def apply(self, rec: Record, output_tokens: int | None, *, abnormal_end: bool) -> None:
        """Fill ``rec``'s timing fields. ``abnormal_end``: the exchange itself failed (the client
        hung up, the connection broke or timed out), as against firsttoken failing to read a
        response that completed."""
        t0 = self.t0
        if self.connect_start is not None and self.connect_end is not None:
            rec.connect_ms = round((self.connect_end - self.connect_start) * 1000.0, 3)
        rec.conn_reused = self.conn_reused
        rec.ttfb_ms = _ms(self.headers, t0)
        rec.first_byte_ms = _ms(self.first_byte, t0)
        rec.first_token_ms = _ms(self.first_token, t0)
        rec.ttft_ms = _ms(self.first_visible, t0)
        # A request that ended normally ends with its last byte (a client lingering before it
        # closes is not the upstream's time); one that ended abnormally (the client hung up, the
        # upstream closed or failed) ends when that happened, and says how long it had been
        # silent by then: a client read timeout during a stall is the stall, not a short stream.
        abnormal = self.end is not None and abnormal_end
        end = self.end if abnormal else (self.last_byte if self.last_byte is not None else self.end)
        rec.total_ms = _ms(end, t0)
        if abnormal:
            last = self.token_events[-1] if self.token_events and not self.events_over_cap else self.last_byte
            last = last if last is not None else self.headers
            rec.end_silence_ms = round(max(0.0, self.end - last) * 1000.0, 3) if last is not None else None
        if rec.ttft_ms is not None and rec.ttfb_ms is not None:
            rec.gap_ms = round(rec.ttft_ms - rec.ttfb_ms, 3)
        # The proxy's own delay: waiting to be read (lag at arrival, not inside the timings),
        # read but not yet handled (inside them), and the worst lag any of its chunks met.
        queued = max(0.0, self.hook - t0) if self.hook is not None else 0.0
        rec.proxy_lag_ms = round(self.lag_in * 1000.0, 1)
        rec.proxy_start_wait_ms = round(self.start_wait * 1000.0, 1) if self.start_wait > 0 else None
        rec.proxy_delay_ms = round((self.lag_in + queued + self.lag_during) * 1000.0, 1)
        rec.proxy_cpu = None if self.cpu is None else round(self.cpu, 2)
        rec.machine_load = None if self.machine_load is None else round(self.machine_load, 2)
        ev = self.token_events
        rec.events = len(ev) + self.events_over_cap
        rec.event_offsets = [round((t - t0) * 1000.0, 1) for t in ev[:MAX_EVENT_OFFSETS]]
        if len(ev) >= 2:
            gaps = sorted((b - a) * 1000.0 for a, b in zip(ev, ev[1:]))
            mid = len(gaps) // 2  # the median of the sorted gaps, as statistics.median takes it
            rec.itl_p50_ms = round(gaps[mid] if len(gaps) % 2 else (gaps[mid - 1] + gaps[mid]) / 2, 3)
            rec.itl_p95_ms = round(percentile(gaps, 95), 3)
            rec.itl_max_ms = round(gaps[-1], 3)
        if (
            output_tokens is not None
            and output_tokens > 1
            and rec.total_ms is not None
            and rec.ttft_ms is not None
        ):
            rec.tpot_ms = round((rec.total_ms - rec.ttft_ms) / (output_tokens - 1), 3)
