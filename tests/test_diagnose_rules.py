"""Diagnosis rules over hand-built records: every code, both languages, no double reporting."""

from __future__ import annotations

import collections
import json
import pathlib
import types

import pytest
from click.testing import CliRunner

from firsttoken.addon.diagnose import DiagnosisInput, diagnose, lang, render, render_finding
from firsttoken.addon.diagnose import engine as cat
from firsttoken.addon.diagnose.context import quote
from firsttoken.addon.diagnose.limits import retry_after_s
from firsttoken.addon.engines import Span
from firsttoken.addon.record import Record

DOCS = pathlib.Path(__file__).resolve().parent.parent / "docs" / "diagnoses.md"
KEY = "sk-proj-SUPERSECRET0123456789abcdefXYZ"

OPENAI = dict(upstream="https://api.openai.com", upstream_url="https://api.openai.com:443/v1/chat/completions",
              path="/v1/chat/completions", api="openai.chat", model="gpt-4o-mini")
ANTHROPIC = dict(upstream="https://api.anthropic.com", upstream_url="https://api.anthropic.com:443/v1/messages",
                 path="/v1/messages", api="anthropic.messages", model="claude-sonnet-4-5",
                 key_header="x-api-key")
GEMINI = dict(upstream="https://generativelanguage.googleapis.com",
              upstream_url="https://generativelanguage.googleapis.com:443/v1beta/models/gemini-2.5-flash:generateContent",
              path="/v1beta/models/gemini-2.5-flash:generateContent", api="gemini.generate", model="gemini-2.5-flash",
              key_header="x-goog-api-key", key_fingerprint="AIz…wxyz", content_type="application/json")


def healthy(**kw) -> Record:
    """A healthy streamed chat request: 20 token events spread over 200 ms after a 120 ms TTFT."""
    offs = [120.0 + 10.0 * i for i in range(20)]
    base = dict(
        id="r1", started_at="2025-01-01T00:00:00.000+00:00", state="done", phase="done", route="default",
        method="POST", stream=True, status=200, content_type="text/event-stream",
        connect_ms=2.0, conn_reused=False, ttfb_ms=50.0, first_byte_ms=51.0, first_token_ms=120.0,
        ttft_ms=120.0, gap_ms=70.0, total_ms=320.0, itl_p50_ms=10.0, itl_p95_ms=10.0, itl_max_ms=10.0,
        tpot_ms=10.0, events=20, event_offsets=offs, usage_prompt_tokens=30, usage_completion_tokens=20,
        usage_cached_tokens=0, output_chars=80, finish_reason="stop", stream_done=True,
        key_header="authorization", key_fingerprint="sk-proj-…fXYZ", key_scheme="Bearer", key_length=37,
        key_facts=[], prompt_tokens_est=30, system_tokens=0, tools_tokens=0, last_user_tokens=20, messages=1,
        images=0, prefix_tokens=0, prefix_seen_before=0, **OPENAI,
    )
    base.update(kw)
    return Record(**base)


def ctx(stall_ms=1000.0, warn_prompt_tokens=0, lang_="en", recent=(), prompt_change=None, proxy_url="", neighbours=()):
    return DiagnosisInput(stall_ms=stall_ms, warn_prompt_tokens=warn_prompt_tokens, lang=lang_, proxy_url=proxy_url,
                          recent=collections.deque(recent, maxlen=500), prompt_change=prompt_change,
                          neighbours=neighbours)


def codes(findings, severities=("error", "warn", "info")):
    return [f["code"] for f in findings if f["severity"] in severities]


def errors(findings):
    return codes(findings, ("error",))


# ---- one case per code: (name, record overrides, expected code, expected severity) --------------------

AUTH_401 = dict(status=401, content_type="application/json", stream_done=True, events=0, event_offsets=[],
                ttft_ms=None, first_token_ms=None, gap_ms=None, itl_max_ms=None, usage_prompt_tokens=None,
                usage_completion_tokens=None, output_chars=0, finish_reason=None)
ERR = dict(AUTH_401)
NOCONN = dict(status=None, content_type=None, ttfb_ms=None, first_byte_ms=None, ttft_ms=None, first_token_ms=None,
              gap_ms=None, connect_ms=None, conn_reused=None, events=0, event_offsets=[], itl_max_ms=None,
              stream_done=None, usage_prompt_tokens=None, usage_completion_tokens=None, output_chars=0,
              finish_reason=None)


def with_(*dicts, **kw):
    out = {}
    for d in dicts:
        out.update(d)
    out.update(kw)
    return out


#: a conversation's third main request, 2,000 tokens, nothing read from the cache
CACHE_MISS = dict(prompt_tokens_est=2000, usage_prompt_tokens=2000, usage_cached_tokens=0, request_kind="main",
                  turn=2, conversation_id="c0ffee000001")
CHANGE = {"previous": True, "since_previous_s": 4.0}


def buffered_offsets():
    # 2 events trickle in, then 18 arrive within 0.5 ms at the very end
    return [400.0, 900.0] + [1500.0 + 0.03 * i for i in range(18)]


#: a loopback llama-server (its Server header names it) and what it reported
LLAMA = dict(engine="llama.cpp", upstream="http://127.0.0.1:8080", upstream_url="http://127.0.0.1:8080/v1/chat/completions",
             server="llama.cpp", conn_reused=True)
ENGINE_CASES = [
    ("engine-truncated", dict(engine="ollama", upstream="http://127.0.0.1:11434", server=None, api="ollama.chat",
                              prompt_tokens_est=6000, engine_prompt_tokens=2048, usage_prompt_tokens=2048, num_ctx=2048),
     "engine.prompt_truncated", "warn"),
    ("engine-queued", dict(LLAMA, ttfb_ms=5200.0, first_token_ms=6000.0, ttft_ms=6000.0, gap_ms=800.0, total_ms=6200.0,
                           engine_prefill_ms=790.0, engine_prompt_tokens=1416, engine_cached_tokens=0,
                           usage_prompt_tokens=1416, prompt_tokens_est=1300, engine_queue_ms=5210.0,
                           engine_sources={"queue_ms": "inferred: time to the first token less the engine's load and prefill",
                                           "prefill_ms": "llama.cpp timings.prompt_ms"},
                           event_offsets=[6000.0 + 10 * i for i in range(20)],
                           neighbours_=(Span("o1", -300.0, 1.0, 900.0, 9000.0, 1416),)),
     "engine.queued", "warn"),
    ("engine-paused", dict(LLAMA, event_offsets=[120.0, 130.0, 140.0, 5940.0, 5950.0], events=5, itl_max_ms=5800.0,
                           neighbours_=(Span("o2", 100.0, 101.0, 5900.0, 8000.0, 1416),)),
     "engine.decode_paused", "warn"),
    ("engine-cold-load", dict(LLAMA, engine="ollama", server=None, engine_load_ms=3400.0, ttfb_ms=3500.0,
                              first_token_ms=3600.0, ttft_ms=3600.0, event_offsets=[3600.0 + 10 * i for i in range(20)]),
     "engine.cold_load", "warn"),
    ("engine-cache-hit", dict(LLAMA, engine_cached_tokens=3008, engine_prompt_tokens=3009, usage_prompt_tokens=3009,
                              engine_prefill_ms=12.0), "engine.cache_hit", "info"),
    # llama-server's own context error (its body, as the real server sends it: tests/test_llama_server.py)
    ("engine-context", with_(ERR, **LLAMA, status=400, prompt_tokens_est=5000, upstream_error_type="exceed_context_size_error",
                             upstream_error="request (5100 tokens) exceeds the available context size (4096 tokens), try increasing it"),
     "request.context_length", "error"),
]


CASES = [
    ("missing", with_(AUTH_401, key_header=None, key_fingerprint=None, key_facts=["missing"], key_scheme=""),
     "auth.missing", "error"),
    ("whitespace-401", with_(AUTH_401, key_facts=["escaped_newline"]), "auth.whitespace", "error"),
    ("whitespace-200", dict(key_facts=["inner_whitespace"]), "auth.whitespace", "warn"),
    ("quoted", with_(AUTH_401, key_facts=["quoted"]), "auth.quoted", "error"),
    ("unexpanded", with_(AUTH_401, key_facts=["unexpanded_variable"], key_fingerprint="$OP…_KEY"), "auth.unexpanded", "error"),
    ("non-ascii", with_(AUTH_401, key_facts=["non_ascii"]), "auth.non_ascii", "error"),
    ("no-bearer", with_(AUTH_401, key_facts=["no_scheme"], key_scheme="raw"), "auth.no_bearer", "error"),
    ("bearer-case", with_(AUTH_401, key_facts=["bearer_case"], key_scheme="bearer"), "auth.no_bearer", "error"),
    ("bearer-in-api-key", with_(AUTH_401, ANTHROPIC, key_facts=["bearer_in_api_key"]), "auth.bearer_in_api_key", "error"),
    ("wrong-header-openai", with_(AUTH_401, key_header="x-api-key", key_scheme="raw",
                                  upstream_error="You didn't provide an API key."), "auth.wrong_header", "error"),
    ("wrong-header-anthropic", with_(AUTH_401, ANTHROPIC, key_header="authorization",
                                     upstream_error="invalid x-api-key"), "auth.wrong_header", "error"),
    ("conflict", with_(ANTHROPIC, key_header="authorization+x-api-key",
                       key_facts=["multiple_headers", "conflicting_keys"]), "auth.conflict", "warn"),
    ("rejected", with_(AUTH_401, upstream_error="Incorrect API key provided: sk-pr*****fXYZ.",
                       upstream_error_type="invalid_api_key"), "auth.rejected", "error"),
    ("sigv4-host", with_(AUTH_401, status=403, key_scheme="AWS4-HMAC-SHA256", key_fingerprint="AKI…MPLE",
                         key_facts=["sigv4:us-east-1/bedrock", "sigv4_rewritten"], api="anthropic.bedrock",
                         upstream_error="The request signature we calculated does not match the signature you provided."),
     "auth.sigv4_host", "error"),
    ("no-route", with_(NOCONN, status=404, route=None, upstream=None, upstream_url=None,
                       error="firsttoken has no route for '/x/v1/chat/completions'. Routes: /a, /b."),
     "path.no_route", "error"),
    ("double-v1", with_(ERR, status=404, upstream_url="https://api.openai.com:443/v1/v1/chat/completions",
                        path="/v1/v1/chat/completions", upstream_error="Invalid URL (POST /v1/v1/chat/completions)"),
     "path.double_v1", "error"),
    ("double-endpoint", with_(ERR, status=404, path="/v1/chat/completions/chat/completions",
                              upstream_url="https://api.openai.com:443/v1/chat/completions/chat/completions"),
     "path.double_endpoint", "error"),
    ("protocol-mismatch", with_(ERR, ANTHROPIC, status=404, upstream_error="Invalid URL (POST /v1/messages)",
                                upstream_error_type="invalid_request_error"), "path.protocol_mismatch", "error"),
    ("missing-v1", with_(ERR, status=404, path="/chat/completions",
                         upstream_url="https://api.openai.com:443/chat/completions",
                         upstream_error="Invalid URL (POST /chat/completions)"), "path.missing_v1", "error"),
    ("not-found", with_(ERR, status=404, api="other", path="/v1/things",
                        upstream_url="https://api.openai.com:443/v1/things"), "path.not_found", "error"),
    ("model", with_(ERR, status=404, model="gpt-5-mini-typo", upstream_error_type="model_not_found",
                    upstream_error="The model `gpt-5-mini-typo` does not exist or you do not have access to it."),
     "model.not_found", "error"),
    ("max-tokens", with_(ERR, status=400, max_tokens=16384, upstream_error=(
        "max_tokens is too large: 16384. This model supports at most 4096 completion tokens, whereas you provided 16384.")),
     "request.max_tokens_too_large", "error"),
    ("context", with_(ERR, status=400, prompt_tokens_est=9000, upstream_error_type="context_length_exceeded",
                      upstream_error="This model's maximum context length is 8192 tokens. However, your messages resulted in 9010 tokens."),
     "request.context_length", "error"),
    ("malformed-body", with_(ERR, status=400, request_error="request body is not valid JSON (Expecting value: line 1 column 1 (char 0))"),
     "request.malformed", "error"),
    ("malformed-server", with_(ERR, status=400, upstream_error="messages.0.role: Input should be 'user' or 'assistant'"),
     "request.malformed", "error"),
    ("rate-limited", with_(ERR, status=429, upstream_error_type="rate_limit_exceeded",
                           upstream_error="Rate limit reached for gpt-4o on requests per min (RPM): Limit 3, Used 3, Requested 1. Please try again in 2s."),
     "rate.limited", "error"),
    ("quota", with_(ERR, status=429, upstream_error_type="insufficient_quota",
                    upstream_error="You exceeded your current quota, please check your plan and billing details."),
     "rate.quota", "error"),
    ("server-error", with_(ERR, status=500, upstream_error="The server had an error", upstream_error_type="server_error",
                           upstream_request_id="req_123"), "upstream.server_error", "error"),
    ("overloaded", with_(ERR, ANTHROPIC, status=529, upstream_error="Overloaded", upstream_error_type="overloaded_error"),
     "upstream.overloaded", "error"),
    ("http-error", with_(ERR, status=405, upstream_error="Method Not Allowed"), "upstream.http_error", "error"),
    ("unreachable", with_(NOCONN, error="[Errno 111] Connect call failed ('127.0.0.1', 9)"), "upstream.unreachable", "error"),
    ("closed", with_(NOCONN, error="server closed connection"), "upstream.closed", "error"),
    ("aborted", with_(NOCONN, client_aborted=True, error="Client disconnected.", total_ms=1000.0), "client.aborted", "warn"),
    ("aborted-upload", with_(NOCONN, error="the client did not send a complete request: HTTP/1 protocol error: peer "
                                          "closed connection without sending complete message body (received 40 bytes, "
                                          "expected 187)"), "client.aborted_upload", "warn"),
    ("bad-framing", with_(NOCONN, error="the client did not send a complete request: HTTP/1 protocol error: illegal "
                                        "chunk header: bytearray(b'zz')"), "client.bad_framing", "error"),
    ("bad-header", dict(status=400, error="firsttoken answered 400 Bad Request: the request header 'X-A' contains a "
                                          "bare CR (RFC 9112 §2.2, §5.2); the request was not forwarded",
                        stream_done=False, finish_reason=None), "client.bad_framing", "error"),
    ("event-too-large", dict(oversize_events=1), "response.event_too_large", "warn"),
    ("corrupt-frame", dict(content_type="application/vnd.amazon.eventstream", api="anthropic.bedrock", stream_done=False,
                           finish_reason=None, frame_error="frame 4 at byte 812: the message fails the CRC32 check"),
     "stream.corrupt_frame", "error"),
    ("shutdown", dict(error="the proxy shut down before this request finished", stream_done=False, finish_reason=None),
     "proxy.shutdown", "warn"),
    ("interrupted", with_(NOCONN, state="in_flight", phase="prefill", proxy_pid=4242,
                          error="the proxy process ended before this request finished (pid 4242)"),
     "proxy.interrupted", "warn"),
    ("error-event", dict(upstream_error="upstream timeout", stream_done=False, finish_reason=None), "stream.error_event", "error"),
    ("bedrock-exception", dict(upstream_error="Too many tokens, please wait before trying again.", stream_done=False,
                               finish_reason=None, upstream_error_type="throttlingException", api="anthropic.bedrock",
                               content_type="application/vnd.amazon.eventstream"), "stream.bedrock_exception", "error"),
    ("truncated", dict(stream_done=False, finish_reason=None), "stream.truncated", "error"),
    ("not-sse", dict(content_type="application/json", event_offsets=[], events=0, ttft_ms=None, first_token_ms=None,
                     gap_ms=None, itl_max_ms=None), "stream.not_sse", "error"),
    ("no-choices", dict(no_choices='{"id":"x","object":"chat.completion.chunk"}', output_chars=0, events=0,
                        event_offsets=[], ttft_ms=None, first_token_ms=None, gap_ms=None, itl_max_ms=None),
     "response.no_choices", "error"),
    ("malformed-events", dict(malformed_events=1, malformed_sample='{"choices":[{"delta":{"cont'), "response.malformed", "warn"),
    ("usage", dict(usage_prompt_tokens=None, usage_completion_tokens=None, output_tokens_est=20), "usage.missing", "info"),
    ("not-requested", dict(stream=False, content_type="application/json", events=0, event_offsets=[], ttft_ms=None,
                           first_token_ms=None, gap_ms=None, itl_max_ms=None), "stream.not_requested", "info"),
    ("buffered", dict(event_offsets=buffered_offsets(), ttfb_ms=50.0, first_token_ms=400.0, ttft_ms=400.0,
                      gap_ms=350.0, total_ms=1501.0, itl_max_ms=600.0), "stream.buffered", "warn"),
    ("stall", dict(event_offsets=[120.0, 130.0, 1630.0, 1640.0], events=4, itl_max_ms=1500.0, total_ms=1640.0),
     "stream.stall", "warn"),
    ("network", dict(ttfb_ms=2400.0, first_token_ms=2500.0, ttft_ms=2500.0, gap_ms=100.0, total_ms=2700.0,
                     event_offsets=[2500.0 + 10 * i for i in range(20)]), "latency.network", "warn"),
    ("prefill", dict(ttfb_ms=60.0, first_token_ms=3060.0, ttft_ms=3060.0, gap_ms=3000.0, total_ms=3300.0,
                     prompt_tokens_est=12000, usage_prompt_tokens=12000, system_tokens=9000, last_user_tokens=3000, warn_=20000,
                     event_offsets=[3060.0 + 10 * i for i in range(20)]), "latency.prefill", "warn"),
    *ENGINE_CASES,
    ("headers-held", dict(ttfb_ms=2400.0, first_token_ms=2402.0, ttft_ms=2402.0, gap_ms=2.0, total_ms=2600.0,
                          prompt_tokens_est=12000, headers_held=True, warn_=20000,
                          event_offsets=[2402.0 + 10 * i for i in range(20)]), "latency.headers_held", "info"),
    ("reasoning", dict(first_token_ms=150.0, ttft_ms=2150.0, gap_ms=2100.0, reasoning_chars=400,
                       usage_reasoning_tokens=200, event_offsets=[150.0 + 10.0 * i for i in range(20)]),
     "latency.reasoning", "info"),
    ("cold", dict(connect_ms=350.0, conn_reused=False, ttfb_ms=420.0, ttft_ms=500.0, first_token_ms=500.0, gap_ms=80.0),
     "latency.cold_connection", "info"),
    ("prompt-large", dict(prompt_tokens_est=70000, system_tokens=60000, tools_tokens=8000, last_user_tokens=1000),
     "prompt.large", "warn"),
    ("repeated-prefix", dict(prefix_tokens=3000, prefix_seen_before=2, prompt_tokens_est=3100, usage_cached_tokens=0),
     "prompt.repeated_prefix", "info"),
    ("proxy-busy", dict(ttft_ms=420.0, proxy_delay_ms=310.0, proxy_lag_ms=240.0, proxy_cpu=0.98),
     "proxy.saturated", "warn"),
    ("proxy-starved", dict(ttft_ms=420.0, proxy_delay_ms=90.0, proxy_lag_ms=60.0, proxy_cpu=0.15),
     "proxy.saturated", "warn"),


    *[(f"cache-miss-{d.get('part', 'none')}", dict(CACHE_MISS, change_=dict(CHANGE, divergence=d, cache_marker=True)),
       "cache.miss", "warn") for d in (
        {"part": "system", "offset": 1843, "volatile": True, "before": "at 10:00:01", "after": "at 10:00:07"},
        {"part": "system", "offset": 12, "volatile": False, "before": "be brief", "after": "be terse"},
        {"part": "tools_order", "tools": 3}, {"part": "tools", "added": ["grep"], "removed": []},
        {"part": "messages", "index": 2, "previous_messages": 5}, {})],
    ("cache-miss-no-marker", with_(CACHE_MISS, ANTHROPIC, change_=dict(CHANGE, divergence=None, cache_marker=False)),
     "cache.miss", "warn"),
]

#: the egress proxy's places (issue 22); kept out of CASES so that the golden corpus's mixes stay as recorded
GEMINI_CASES = [
    ("google-key", with_(ERR, GEMINI, status=400, upstream_error="API key not valid. Please pass a valid API key.",
                         upstream_error_type="API_KEY_INVALID"), "auth.rejected", "error"),
    ("google-denied", with_(ERR, GEMINI, status=403, upstream_error="Generative Language API has not been used in project 1",
                            upstream_error_type="SERVICE_DISABLED"), "auth.rejected", "error"),
    ("google-bearer", with_(ERR, GEMINI, status=401, key_header="authorization", key_scheme="Bearer",
                            upstream_error="Request had invalid authentication credentials. Expected OAuth 2 access token",
                            upstream_error_type="ACCESS_TOKEN_TYPE_UNSUPPORTED"), "auth.wrong_header", "error"),
    ("google-no-key", with_(ERR, GEMINI, status=403, key_header=None, key_fingerprint=None, key_facts=["missing"],
                            key_scheme="", upstream_error="Method doesn't allow unregistered callers",
                            upstream_error_type="PERMISSION_DENIED"), "auth.missing", "error"),
    ("google-exhausted", with_(ERR, GEMINI, status=429, retry_after=17.0, upstream_error_type="RESOURCE_EXHAUSTED",
                               upstream_error="You exceeded your current quota, please check your plan and billing details."),
     "rate.limited", "error"),
    ("google-model", with_(ERR, GEMINI, status=404, model="gemini-9", upstream_error_type="NOT_FOUND",
                           upstream_error="models/gemini-9 is not found for API version v1beta"), "model.not_found", "error"),
    ("google-deadline", with_(ERR, GEMINI, status=504, upstream_error_type="DEADLINE_EXCEEDED",
                              upstream_error="Deadline expired before operation could complete."),
     "upstream.server_error", "error"),
    ("prompt-blocked", with_(GEMINI, stream=True, content_type="text/event-stream", finish_reason="blocked:SAFETY",
                             events=0, event_offsets=[], output_chars=0, ttft_ms=None, first_token_ms=None,
                             itl_max_ms=None, gap_ms=None), "response.blocked", "error"),
    ("output-filtered", with_(GEMINI, stream=True, content_type="text/event-stream", finish_reason="RECITATION"),
     "response.blocked", "warn"),
]

EGRESS_CASES = [
    ("egress-down", with_(NOCONN, egress_proxy="http://127.0.0.1:3128",
                          error="[Errno 111] Connect call failed ('127.0.0.1', 3128)"), "egress.proxy_down", "error"),
    ("egress-407", with_(NOCONN, egress_proxy="http://127.0.0.1:3128",
                         error="Upstream proxy 127.0.0.1:3128 refused HTTP CONNECT request: 407 Proxy Authentication Required"),
     "egress.proxy_auth", "error"),
    ("egress-407-plain", with_(ERR, egress_proxy="http://127.0.0.1:3128", status=407, upstream_error=None,
                               upstream_error_type=None), "egress.proxy_auth", "error"),
    ("egress-403", with_(NOCONN, egress_proxy="http://127.0.0.1:3128",
                         error="Upstream proxy 127.0.0.1:3128 refused HTTP CONNECT request: 403 Forbidden"),
     "egress.proxy_refused", "error"),
    ("egress-502", with_(NOCONN, egress_proxy="http://127.0.0.1:3128",
                         error="Upstream proxy 127.0.0.1:3128 refused HTTP CONNECT request: 502 Bad Gateway"),
     "egress.proxy_upstream", "error"),
    ("egress-504-plain", with_(ERR, egress_proxy="http://127.0.0.1:3128", status=504, upstream_error=None,
                               upstream_error_type=None), "egress.proxy_upstream", "error"),
]
#: Responses over WebSocket (issue 29); kept out of CASES for the same reason
WS_TURN = dict(transport="websocket", method="WS", api="openai.responses", path="/v1/responses", ws_turn=1,
               ws_connection_id="c1", content_type=None)
WS_UPGRADE = with_(ERR, transport="websocket", method="GET", api="other", path="/v1/responses", ws_turn=None,
                   stream=None, upstream_error="Invalid URL (GET /v1/responses)", upstream_error_type=None)


def _refused_before(n: int) -> list[Record]:
    return [healthy(**with_(WS_UPGRADE, status=404, id=f"u{i}", started_at=f"2025-01-01T00:00:0{i}.000+00:00"))
            for i in range(n)]


WS_CASES = [
    ("ws-upgrade-404", with_(WS_UPGRADE, status=404), "ws.upgrade_refused", "error"),
    ("ws-upgrade-426", with_(WS_UPGRADE, status=426), "ws.upgrade_refused", "error"),
    ("ws-upgrade-401", with_(WS_UPGRADE, status=401), "ws.upgrade_refused", "warn"),
    ("ws-fallback", dict(api="openai.responses", path="/v1/responses", started_at="2025-01-01T00:00:07.000+00:00",
                         recent_=_refused_before(7)), "ws.fallback", "warn"),
    ("ws-closed-1011", with_(WS_TURN, error="the WebSocket closed mid-turn by the server (close code 1011)",
                             ws_close_code=1011, ws_closed_by="server", ws_close_reason="boom", stream_done=False),
     "ws.closed", "error"),
    ("ws-closed-client", with_(WS_TURN, error="the WebSocket closed mid-turn by the client (close code 1001)",
                               ws_close_code=1001, ws_closed_by="client", client_aborted=True, stream_done=False),
     "ws.closed", "warn"),
    ("ws-limit", with_(WS_TURN, upstream_error="websocket_connection_limit_reached: the connection is 60 minutes old",
                       upstream_error_type="websocket_connection_limit_reached", stream_done=False, events=0,
                       event_offsets=[], ttft_ms=None, first_token_ms=None, gap_ms=None, output_chars=0),
     "ws.connection_limit", "warn"),
    ("ws-binary", with_(WS_TURN, ws_binary_frames=12), "ws.binary_frames", "info"),
]
ALL_CASES = CASES + GEMINI_CASES + EGRESS_CASES + WS_CASES


def _run(overrides, **ctx_kw):
    overrides = dict(overrides)
    if "change_" in overrides:
        ctx_kw["prompt_change"] = dict(overrides.pop("change_"), id="r1")
    if "recent_" in overrides:
        ctx_kw["recent"] = overrides.pop("recent_")
    if "neighbours_" in overrides:
        ctx_kw["neighbours"] = overrides.pop("neighbours_")
    warn = overrides.pop("warn_", None)
    if warn:
        ctx_kw.setdefault("warn_prompt_tokens", warn)
    return diagnose(healthy(**overrides), ctx(**ctx_kw))


@pytest.mark.parametrize("name,overrides,code,severity", ALL_CASES, ids=[c[0] for c in ALL_CASES])
def test_each_rule(name, overrides, code, severity):
    findings = _run(overrides)
    got = [(f["code"], f["severity"]) for f in findings]
    assert (code, severity) in got, got
    # one root cause -> at most one error, and it is this one when the case is an error
    errs = errors(findings)
    assert len(errs) <= 1, errs
    if severity == "error":
        assert errs == [code]
    for f in findings:
        assert f["code"] in cat.CATALOG
        json.dumps(f)  # JSON-serialisable


def test_every_catalog_code_has_a_case():
    assert {c[2] for c in ALL_CASES} == set(cat.CATALOG)


@pytest.mark.parametrize("name,overrides,code,severity", ALL_CASES, ids=[c[0] for c in ALL_CASES])
def test_templates_get_every_param_they_use(name, overrides, code, severity):
    for f in _run(overrides):
        variant = f["params"].get("variant")
        for lang_ in cat.LANGS:
            for part in ("message", "hint"):
                used = cat.fields(cat.template(f["code"], part, lang_, variant))
                missing = used - set(f["params"])
                assert not missing, f"{f['code']} {part} ({lang_}, {variant}) lacks {missing}"


def test_catalog_is_complete_in_both_languages():
    for code, e in cat.CATALOG.items():
        assert e.severity in cat.SEVERITIES and set(e.also) <= set(cat.SEVERITIES), code
        assert e.family in cat.FAMILIES, code
        for part in ("title", "when", "message", "hint"):
            texts = getattr(e, part)
            assert set(texts) == set(cat.LANGS), f"{code} {part} lacks a language"
            en, zh = texts["en"], texts["zh"]
            assert type(en) is type(zh), f"{code} {part}: variants differ between languages"
            if isinstance(en, dict):
                assert set(en) == set(zh), f"{code} {part}: variant names differ"
                assert all(v.strip() for v in list(en.values()) + list(zh.values())), code
            else:
                assert en.strip() and zh.strip(), f"{code} {part} empty"
            if part in ("message", "hint"):
                for tmpl in (en.values() if isinstance(en, dict) else [en]):
                    assert cat.fields(tmpl) is not None
        for variant in e.variants:
            for lang_ in cat.LANGS:
                assert cat.template(code, "message", lang_, variant)


def test_a_rule_emitting_an_unknown_code_is_caught(monkeypatch):
    from firsttoken.addon.diagnose import engine

    def bogus(rec, c):
        c.add("bogus.code", "error")

    monkeypatch.setattr(engine, "ORDER", engine.ORDER + (bogus,))
    found = diagnose(healthy(), ctx())
    assert [f["code"] for f in found if f["code"] not in cat.CATALOG] == ["bogus.code"]


# ---- healthy requests: nothing above info ------------------------------------------------------------

@pytest.mark.parametrize("api,url", [
    ("openai.chat", "/v1/chat/completions"), ("openai.completions", "/v1/completions"),
    ("openai.responses", "/v1/responses"), ("anthropic.messages", "/v1/messages"),
])
def test_healthy_requests_have_no_error_or_warn(api, url):
    extra = dict(key_header="x-api-key") if api.startswith("anthropic") else {}
    r = healthy(api=api, path=url, upstream_url="https://h.example:443" + url, **extra)
    assert codes(diagnose(r, ctx()), ("error", "warn")) == []


def test_healthy_non_streamed_is_info_only():
    r = healthy(**dict(CASES[[c[0] for c in CASES].index("not-requested")][1]))
    assert codes(diagnose(r, ctx()), ("error", "warn")) == []


# ---- no double reporting --------------------------------------------------------------------------------

def test_whitespace_401_is_not_also_rejected():
    f = _run(with_(AUTH_401, key_facts=["escaped_newline"], upstream_error="Incorrect API key provided"))
    assert codes(f) == ["auth.whitespace"]


def test_two_key_defects_one_error():
    f = _run(with_(AUTH_401, key_facts=["escaped_newline", "quoted"]))
    assert errors(f) == ["auth.whitespace"] and "auth.quoted" in codes(f, ("warn",))


def test_dns_failure_is_only_unreachable():
    f = _run(with_(NOCONN, upstream="https://no-such-host.invalid",
                   upstream_url="https://no-such-host.invalid:443/v1/chat/completions",
                   error="[Errno -2] Name or service not known"))
    assert codes(f) == ["upstream.unreachable"]
    assert f[0]["params"]["variant"] == "dns" and f[0]["params"]["host"] == "no-such-host.invalid"
    assert "no-such-host.invalid" in f[0]["message"]


@pytest.mark.parametrize("error,variant", [
    ("[Errno 111] Connect call failed ('127.0.0.1', 5)", "refused"),
    ("[Errno -2] Name or service not known", "dns"),
    ("[Errno 8] nodename nor servname provided, or not known", "dns"),
    ("Certificate verify failed: self-signed certificate", "tls"),
    ("The remote server does not speak TLS.", "not_tls"),
    ("[Errno 110] Connection timed out", "timeout"),
    ("[Errno 101] Network is unreachable", "network"),
    ("Cannot parse HTTP response: Bad HTTP response line: b'SSH-2.0'", "not_http"),
    ("something else entirely", "other"),
])
def test_unreachable_sub_causes(error, variant):
    f = _run(with_(NOCONN, upstream="http://10.0.0.5:8000", upstream_url="http://10.0.0.5:8000/v1/chat/completions",
                   error=error))
    assert codes(f) == ["upstream.unreachable"] and f[0]["params"]["variant"] == variant
    assert "10.0.0.5" in f[0]["message"] and ("8000" in f[0]["message"] or variant == "dns")


def test_closed_mid_response_is_not_truncated():
    f = _run(dict(stream_done=False, finish_reason=None, error=(
        "HTTP/1 protocol error: peer closed connection without sending complete message body")))
    assert errors(f) == ["upstream.closed"] and f[0]["params"]["variant"] == "mid_response"
    assert "stream.truncated" not in codes(f)


def test_client_abort_mid_stream_is_info_and_not_truncated():
    f = _run(dict(client_aborted=True, error="Client disconnected.", stream_done=False, finish_reason=None))
    assert [(x["code"], x["severity"]) for x in f if x["severity"] != "info" or x["code"] == "client.aborted"] == [
        ("client.aborted", "info")]


def test_truncated_with_finish_reason_is_a_warning():
    f = _run(dict(stream_done=False, finish_reason="stop"))
    assert [(x["code"], x["severity"]) for x in f] == [("stream.truncated", "warn")]


def test_auth_missing_on_200_is_not_reported():
    assert codes(_run(dict(key_header=None, key_facts=["missing"]))) == []


def test_quota_on_anthropic_400():
    f = _run(with_(ERR, ANTHROPIC, status=400, upstream_error_type="invalid_request_error",
                   upstream_error="Your credit balance is too low to access the Anthropic API."))
    assert codes(f) == ["rate.quota"]


# ---- message facts ---------------------------------------------------------------------------------------

def test_findings_never_quote_a_key():
    f = _run(with_(AUTH_401, upstream_error=f"Incorrect API key provided: {KEY}. Also sk-pr*************fXYZ."))
    blob = json.dumps(f, ensure_ascii=False)
    assert KEY not in blob and KEY[8:30] not in blob and "*****" not in blob
    assert "sk-proj-…fXYZ" in f[0]["message"]


def test_quote_keeps_ordinary_text():
    assert quote("The model `gpt-4o` does not exist") == "The model `gpt-4o` does not exist"
    assert "[REDACTED]" in quote("key sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123 rejected")


@pytest.mark.parametrize("msg,limit,param", [
    ("max_tokens is too large: 16384. This model supports at most 4096 completion tokens, whereas you provided 16384.", 4096, "max_tokens"),
    ("max_tokens: 64000 > 8192, which is the maximum allowed number of output tokens for claude-3-5-haiku", 8192, "max_tokens"),
    ("Invalid 'max_completion_tokens': integer above maximum value. Expected a value <= 32768, but got 100000 instead.", 32768, "max_completion_tokens"),
    ("max_tokens must be in the range of [1, 8192]", 8192, "max_tokens"),
])
def test_max_tokens_limit_is_parsed(msg, limit, param):
    f = _run(with_(ERR, status=400, upstream_error=msg, max_tokens=None))
    assert codes(f) == ["request.max_tokens_too_large"]
    assert f[0]["params"]["limit"] == limit and f[0]["params"]["param"] == param
    assert f"{param} to {limit} or less" in f[0]["hint"]


def test_an_engines_context_error_carries_that_engines_fix():
    f = _run(with_(ERR, **LLAMA, status=400, prompt_tokens_est=5000, upstream_error_type="exceed_context_size_error",
                  upstream_error="request (5100 tokens) exceeds the available context size (4096 tokens), try increasing it"))
    ctx = next(x for x in f if x["code"] == "request.context_length")
    assert ctx["params"]["limit"] == 4096 and ctx["params"]["server_tokens"] == 5100 and ctx["params"]["excess"] == 1004
    assert "--ctx-size" in ctx["hint"] and "--parallel" in ctx["hint"] and "llama.cpp" in ctx["message"], ctx
    # the same error text from a cloud keeps the cloud's advice; a vLLM error type names vLLM's knob
    cloud = _run(with_(ERR, status=400, upstream_error="This model's maximum context length is 8192 tokens. However, your messages resulted in 9010 tokens."))
    assert "--ctx-size" not in cloud[0]["hint"]
    vllm = _run(with_(ERR, status=400, engine="vllm", upstream="http://127.0.0.1:8000", upstream_error_type="BadRequestError",
                     upstream_error="This model's maximum context length is 2048 tokens. However, you requested 3000 tokens."))
    assert "--max-model-len" in vllm[0]["hint"]


def test_a_cut_prompt_is_told_apart_from_a_tokenizer_that_counts_differently():
    base = dict(engine="ollama", upstream="http://127.0.0.1:11434", api="ollama.chat")
    cut = _run(dict(base, prompt_tokens_est=6000, engine_prompt_tokens=3000))
    assert "engine.prompt_truncated" in codes(cut) and "OLLAMA_CONTEXT_LENGTH" in cut[0]["hint"]
    for fine in (dict(prompt_tokens_est=6000, engine_prompt_tokens=4500),  # a third fewer: another tokenizer
                 dict(prompt_tokens_est=700, engine_prompt_tokens=300),  # too few tokens to tell
                 dict(prompt_tokens_est=6000, engine_prompt_tokens=1000, engine_cached_tokens=5000),
                 dict(prompt_tokens_est=6000, engine_prompt_tokens=2048, num_ctx=8192)):  # it fitted: not cut
        assert "engine.prompt_truncated" not in codes(_run(dict(base, **fine))), fine


def test_context_length_anthropic_uses_counted_tokens():
    f = _run(with_(ERR, ANTHROPIC, status=400, prompt_tokens_est=210500, max_tokens=1024, system_tokens=200000,
                   upstream_error="prompt is too long: 210532 tokens > 200000 maximum"))
    p = f[0]["params"]
    assert codes(f) == ["request.context_length"]
    assert (p["limit"], p["server_tokens"], p["prompt_tokens"], p["excess"], p["largest"]) == (
        200000, 210532, 210500, 10532, "system")
    assert "210,500" in f[0]["message"] and "the system prompt" in f[0]["hint"]


@pytest.mark.parametrize("text,secs", [
    ("Please try again in 2s.", 2.0), ("Please try again in 20ms.", 0.02), ("try again in 1m30s", 90.0),
    ("Please try again in 6.5s", 6.5), ("slow down", None),
])
def test_retry_after_from_text(text, secs):
    assert retry_after_s(healthy(upstream_error=text)) == secs


def test_retry_after_field_wins_when_the_core_records_it():
    r = healthy(upstream_error="Please try again in 2s.")
    r.retry_after = 7  # what the capture core may add later
    assert retry_after_s(r) == 7.0


def test_rate_limited_message_names_the_wait():
    f = _run(dict(CASES[[c[0] for c in CASES].index("rate-limited")][1]))
    assert f[0]["params"]["retry_after"] == 2.0 and "retry in 2 s" in f[0]["message"] and "RPM" in f[0]["message"]


def test_double_v1_names_the_base_url():
    # upstream given with /v1, client base URL also ends in /v1
    r = with_(ERR, status=404, upstream="https://api.openai.com/v1",
              upstream_url="https://api.openai.com:443/v1/v1/chat/completions", path="/v1/chat/completions")
    f = _run(r)
    p = f[0]["params"]
    assert p["variant"] == "prefix" and p["base"] == "http://127.0.0.1:8787"
    assert "OPENAI_BASE_URL=http://127.0.0.1:8787 " in f[0]["hint"]
    assert "--upstream https://api.openai.com" in f[0]["hint"]
    # the client doubled it
    f = _run(with_(r, upstream="https://api.openai.com", path="/v1/v1/chat/completions"))
    assert f[0]["params"]["variant"] == "client" and "OPENAI_BASE_URL=http://127.0.0.1:8787/v1 (not" in f[0]["hint"]
    # a named route and the proxy's real address
    c = ctx(proxy_url="http://127.0.0.1:9999")
    f = diagnose(healthy(**with_(r, route="oai", upstream="https://api.openai.com", path="/oai/v1/v1/chat/completions")), c)
    assert f[0]["params"]["base"] == "http://127.0.0.1:9999/oai/v1"
    # Anthropic SDK always adds /v1: fix the upstream
    f = _run(with_(ERR, ANTHROPIC, status=404, upstream="https://api.anthropic.com/v1",
                   upstream_url="https://api.anthropic.com:443/v1/v1/messages"))
    assert f[0]["params"]["variant"] == "prefix_anthropic" and "--upstream https://api.anthropic.com " in f[0]["hint"]


def test_double_endpoint_in_the_upstream_prefix():
    f = _run(with_(ERR, status=404, upstream="https://gw.example/v1/chat/completions",
                   upstream_url="https://gw.example:443/v1/chat/completions/chat/completions"))
    assert f[0]["code"] == "path.double_endpoint" and f[0]["params"]["variant"] == "prefix"
    assert "--upstream https://gw.example/v1 " in f[0]["hint"]


def test_openai_path_to_anthropic_upstream():
    f = _run(with_(ERR, status=404, upstream_error="Not Found", upstream_error_type="not_found_error"))
    assert codes(f) == ["path.protocol_mismatch"] and f[0]["params"]["variant"] == "openai_to_anthropic"


def test_anthropic_own_404_for_a_model_is_model_not_found():
    f = _run(with_(ERR, ANTHROPIC, status=404, model="claude-nope", upstream_error="model: claude-nope",
                   upstream_error_type="not_found_error"))
    assert codes(f) == ["model.not_found"] and "x-api-key" in f[0]["hint"]
    assert f[0]["params"]["models_url"] == "https://api.anthropic.com/v1/models"


# ---- streams -----------------------------------------------------------------------------------------------

def test_long_prefill_then_short_fast_output_is_not_buffered():
    offs = [2000.0 + 2.0 * i for i in range(10)]  # 10 tokens at 2 ms after a 2 s prefill
    f = _run(dict(event_offsets=offs, events=10, ttft_ms=2000.0, first_token_ms=2000.0, gap_ms=1950.0, total_ms=2020.0))
    assert "stream.buffered" not in codes(f)


def test_buffered_message_says_how_long_the_client_waited():
    f = _run(dict(CASES[[c[0] for c in CASES].index("buffered")][1]))
    b = next(x for x in f if x["code"] == "stream.buffered")
    assert b["params"]["burst_events"] == 18 and b["params"]["wait_ms"] == pytest.approx(1450.0)
    assert "1,450 ms" in b["message"] and "proxy_buffering off" in b["hint"]
    assert "stream.stall" not in codes(f)  # the buffered wait is not also a stall


def test_stall_threshold_comes_from_settings():
    case = dict(CASES[[c[0] for c in CASES].index("stall")][1])
    assert "stream.stall" not in codes(_run(case, stall_ms=2000))
    f = _run(case, stall_ms=1000)
    s = next(x for x in f if x["code"] == "stream.stall")
    assert s["params"]["at_event"] == 2 and s["params"]["at_ms"] == 130.0


# ---- latency -----------------------------------------------------------------------------------------------

def test_network_against_the_models_baseline():
    earlier = [healthy(id=f"e{i}", ttfb_ms=100.0 + i, conn_reused=True) for i in range(6)]
    slow = dict(ttfb_ms=600.0, first_token_ms=680.0, ttft_ms=680.0, gap_ms=80.0, conn_reused=True)
    f = _run(slow, recent=earlier)
    n = next(x for x in f if x["code"] == "latency.network")
    assert n["params"]["variant"] == "baseline" and n["params"]["samples"] == 6
    assert n["params"]["median_ms"] == pytest.approx(102.5)
    # too few samples and below the absolute limit: no verdict
    assert "latency.network" not in codes(_run(slow, recent=earlier[:3]))
    # another model's history does not count
    assert "latency.network" not in codes(_run(slow, recent=[healthy(model="other", ttfb_ms=50.0)] * 8))


def test_prefill_names_ms_per_1k_tokens():
    f = _run(dict(CASES[[c[0] for c in CASES].index("prefill")][1]))
    p = next(x for x in f if x["code"] == "latency.prefill")["params"]
    assert p["ms_per_1k"] == pytest.approx(250.0) and p["largest"] == "system"
    assert "latency.network" not in codes(f)


def test_small_prompt_slow_gap_is_not_prefill():
    f = _run(dict(ttfb_ms=60.0, first_token_ms=3060.0, ttft_ms=3060.0, gap_ms=3000.0, prompt_tokens_est=200))
    assert "latency.prefill" not in codes(f)


def test_hidden_reasoning():
    f = _run(dict(ttfb_ms=60.0, first_token_ms=2060.0, ttft_ms=2060.0, gap_ms=2000.0, usage_reasoning_tokens=512,
                  prompt_tokens_est=3000))
    assert [x["params"]["variant"] for x in f if x["code"] == "latency.reasoning"] == ["hidden"]
    assert "latency.prefill" not in codes(f)


def test_cold_connection_does_not_make_a_network_verdict():
    f = _run(dict(connect_ms=1500.0, conn_reused=False, ttfb_ms=1600.0, ttft_ms=1700.0, first_token_ms=1700.0, gap_ms=100.0))
    assert codes(f) == ["latency.cold_connection"]


def test_repeated_prefix_with_cache_hits_is_fine():
    assert "prompt.repeated_prefix" not in codes(_run(dict(prefix_tokens=3000, prefix_seen_before=2, usage_cached_tokens=2048)))
    f = _run(with_(ANTHROPIC, prefix_tokens=3000, prefix_seen_before=1, usage_cached_tokens=0))
    assert "cache_control" in next(x for x in f if x["code"] == "prompt.repeated_prefix")["hint"]


# ---- language ----------------------------------------------------------------------------------------------

def test_lang_resolution_order():
    env = {"FIRSTTOKEN_LANG": "zh", "LANG": "en_US.UTF-8"}
    assert lang.resolve("en", env) == "en"
    assert lang.resolve(None, env) == "zh"
    assert lang.resolve("", {"LANG": "zh_CN.UTF-8"}) == "zh"
    assert lang.resolve(None, {"LC_ALL": "zh_TW.UTF-8", "LANG": "en_US"}) == "zh"
    assert lang.resolve(None, {"LANG": "en_US.UTF-8"}) == "en"
    assert lang.resolve(None, {"LANG": "fr_FR.UTF-8"}) == "en"
    assert lang.resolve("xx", {}) in ("en", "zh")


def test_findings_follow_settings_lang_and_rerender():
    case = dict(CASES[[c[0] for c in CASES].index("rejected")][1])
    zh = diagnose(healthy(**case), ctx(lang_="zh"))
    en = diagnose(healthy(**case), ctx(lang_="en"))
    assert zh[0]["params"] == en[0]["params"] and zh[0]["message"] != en[0]["message"]
    assert "拒绝" in zh[0]["message"] and "refused" in en[0]["message"]
    again = render_finding(zh[0], "en")
    assert (again["message"], again["hint"]) == (en[0]["message"], en[0]["hint"])
    assert render(zh[0]["code"], zh[0]["params"], "zh") == (zh[0]["message"], zh[0]["hint"])


def test_lang_from_environment_when_setting_empty(monkeypatch):
    monkeypatch.setenv("FIRSTTOKEN_LANG", "zh")
    f = diagnose(healthy(**dict(CASES[0][1])), ctx(lang_=""))
    assert "未" in f[0]["message"] or "没有" in f[0]["message"]


def test_render_is_lenient():
    assert render("no.such.code", {}, "en") == ("no.such.code", "")
    msg, hint = render("auth.rejected", {}, "zh")
    assert "?" in msg and hint


# ---- the command and the generated docs -----------------------------------------------------------------------

def test_docs_file_is_generated_from_the_catalog():
    from firsttoken.cli.diagnoses import markdown

    assert DOCS.exists(), "run: firsttoken diagnoses --markdown > docs/diagnoses.md"
    assert DOCS.read_text(encoding="utf-8") == markdown(), "docs/diagnoses.md is stale: regenerate it"
    for code in cat.CATALOG:
        assert f"`{code}`" in markdown()


def test_command_outputs():
    from firsttoken.cli.diagnoses import diagnoses, markdown

    runner = CliRunner()
    r = runner.invoke(diagnoses, ["--json", "--lang", "zh"])
    assert r.exit_code == 0, r.output
    data = json.loads(r.output)
    assert {d["code"] for d in data} == set(cat.CATALOG)
    assert next(d for d in data if d["code"] == "auth.missing")["title"] == "未发送 API 密钥"
    r = runner.invoke(diagnoses, ["--markdown"])
    assert r.exit_code == 0 and r.output == markdown()
    r = runner.invoke(diagnoses, ["--lang", "en"], terminal_width=200)
    assert r.exit_code == 0 and "upstream.unreachable" in r.output and "Rate limited" in r.output
    assert "[no_scheme]" in r.output and "[bearer_case]" in r.output  # variant labels are not eaten as markup


# -- prompt.large is relative to the model's context window ------------------------------------------

@pytest.mark.parametrize("model,tokens,fires", [
    ("claude-sonnet-4-5-20250929", 21_000, False),  # every Claude Code request: normal, no warning
    ("claude-sonnet-4-5-20250929", 120_000, True),  # over half of a 200k window
    ("gpt-4o-mini", 60_000, False),
    ("gpt-4o-mini", 70_000, True),  # over half of 128k
    ("openai/gpt-4o-2024-08-06", 70_000, True),  # provider prefix and dated id
    ("my-local-model", 60_000, False),  # window unknown: the 64,000 floor
    ("my-local-model", 65_000, True),
])
def test_prompt_large_is_relative_to_the_context_window(model, tokens, fires):
    rec = healthy(model=model, prompt_tokens_est=tokens, system_tokens=tokens - 1000, last_user_tokens=500)
    found = [f for f in diagnose(rec, ctx()) if f["code"] == "prompt.large"]
    assert bool(found) == fires
    if found and "unknown" not in model and "local" not in model:
        assert "context window" in found[0]["message"] and found[0]["params"]["window"] >= 128_000


def test_prompt_large_fixed_limit_wins_when_set():
    rec = healthy(model="claude-sonnet-4-5", prompt_tokens_est=21_000, system_tokens=20_000, last_user_tokens=500)
    (f,) = [f for f in diagnose(rec, ctx(warn_prompt_tokens=8000)) if f["code"] == "prompt.large"]
    assert f["params"]["limit"] == 8000 and "above the 8,000 tokens firsttoken warns at" in f["message"] and "limit" not in f["message"]


def test_no_unknown_value_placeholder_leaks_into_a_message():
    """A missing value never shows as "?" ("after token event ? at ? ms", "answered ?.")."""
    import re

    extra = [
        ("stall-unlocated", dict(itl_max_ms=5000.0, event_offsets=[]), "stream.stall"),
        ("malformed-no-answer", with_(NOCONN, request_error="request body is not valid JSON (x)",
                                      error="Client disconnected.", client_aborted=True), "request.malformed"),
    ]
    for name, overrides, _code in [(c[0], c[1], c[2]) for c in CASES] + extra:
        for lang_ in ("en", "zh"):
            for f in _run(overrides, lang_=lang_):
                for part in (f["message"], f["hint"]):
                    assert not re.search(r"(^|[\s(（])\?([\s.,;)。，）]|$)", part), (name, f["code"], part)
    codes = {f["code"] for f in _run(extra[0][1])}
    assert "stream.stall" in codes


@pytest.mark.parametrize("status", [500, 501, 503])
def test_a_5xx_without_a_message_does_not_quote_a_dash(status):
    """A HEAD probe answered 501 with an empty body read "failed with 501 (-): “-”"."""
    rec = healthy(status=status, upstream_error=None, upstream_error_type=None, ttft_ms=None, first_token_ms=None,
                  event_offsets=[], events=0)
    for lang_ in ("en", "zh"):
        (f,) = [f for f in diagnose(rec, ctx(lang_=lang_)) if f["code"].startswith("upstream.")]
        assert "“-”" not in f["message"] and "(-)" not in f["message"] and "（-）" not in f["message"], f["message"]
        assert str(status) in f["message"]


def test_proxy_saturated_only_when_the_proxy_delayed_the_request():
    assert "proxy.saturated" not in codes(_run(dict(proxy_delay_ms=12.0, proxy_lag_ms=3.0, proxy_cpu=0.95)))
    assert "proxy.saturated" not in codes(_run({}))  # no measurement (an old row)
    busy = [f for f in _run(dict(proxy_delay_ms=310.0, proxy_lag_ms=240.0, proxy_cpu=0.98)) if f["code"] == "proxy.saturated"]
    starved = [f for f in _run(dict(proxy_delay_ms=90.0, proxy_lag_ms=60.0, proxy_cpu=0.15)) if f["code"] == "proxy.saturated"]
    assert busy[0]["params"]["variant"] == "busy" and "CPU-bound" in busy[0]["message"]
    assert starved[0]["params"]["variant"] == "starved" and "other processes" in starved[0]["message"]


def test_cache_miss_needs_a_recent_repeat_and_a_reported_zero():
    change = dict(CHANGE, divergence={"part": "tools_order", "tools": 2}, cache_marker=True)
    assert "cache.miss" in codes(_run(dict(CACHE_MISS, change_=change)))
    assert "cache.miss" not in codes(_run(dict(CACHE_MISS, usage_cached_tokens=1500, change_=change)))  # a hit
    assert "cache.miss" not in codes(_run(dict(CACHE_MISS, usage_cached_tokens=None, change_=change)))  # no caching info
    assert "cache.miss" not in codes(_run(dict(CACHE_MISS, change_=dict(change, previous=False))))  # first request
    assert "cache.miss" not in codes(_run(dict(CACHE_MISS, change_=dict(change, since_previous_s=900.0))))  # expired
    assert "cache.miss" not in codes(_run(dict(CACHE_MISS, prompt_tokens_est=300, usage_prompt_tokens=300,
                                               change_=change)))  # below the cacheable minimum
    assert "cache.miss" not in codes(_run(dict(CACHE_MISS, request_kind="side", change_=change)))
    # the prompt change of another record is never applied
    other = diagnose(healthy(**CACHE_MISS), ctx(prompt_change=dict(change, id="someone-else")))
    assert "cache.miss" not in codes(other)
    # the specific finding replaces the generic repeated-prefix one
    both = _run(dict(CACHE_MISS, prefix_tokens=1900, prefix_seen_before=1, change_=change))
    assert "cache.miss" in codes(both) and "prompt.repeated_prefix" not in codes(both)



def test_the_cache_verdict_says_whether_the_route_ever_cached_from_the_input():
    change = dict(CHANGE, divergence={}, cache_marker=True, id="r1")
    never = diagnose(healthy(**CACHE_MISS), ctx(prompt_change=change))
    before = diagnose(healthy(**CACHE_MISS), DiagnosisInput(lang="en", prompt_change=change, route_cached=True))
    assert [f["params"]["variant"] for f in never if f["code"] == "cache.miss"] == ["same_prefix_never"]
    assert [f["params"]["variant"] for f in before if f["code"] == "cache.miss"] == ["same_prefix"]


def test_the_diagnosis_input_is_frozen_normalised_and_required():
    import dataclasses

    inp = DiagnosisInput(stall_ms=None, warn_prompt_tokens="x", proxy_url="http://127.0.0.1:9/", lang="zh_CN.UTF-8",
                         recent=None, prompt_change={"id": "r1", "previous": True})
    assert (inp.stall_ms, inp.warn_prompt_tokens, inp.proxy_url, inp.lang, inp.recent) == (
        1000.0, 0, "http://127.0.0.1:9", "zh", ())
    with pytest.raises(dataclasses.FrozenInstanceError):
        inp.stall_ms = 5.0
    with pytest.raises(TypeError):
        inp.prompt_change["previous"] = False  # read-only for the rules too
    with pytest.raises(TypeError):
        diagnose(healthy(), types.SimpleNamespace(settings=None, recent=[]))  # the old duck-typed context


def test_the_analyzer_builds_the_input_from_its_settings_as_they_are_now(tmp_path):
    from firsttoken.addon.analyzer import Analyzer, Settings
    from firsttoken.addon.store.writer import Writer

    w = Writer(str(tmp_path / "d.db"))
    an = Analyzer(w, Settings(stall_ms=250.0, warn_prompt_tokens=9000, lang="zh", proxy_url="http://127.0.0.1:9999/"))
    try:
        inp = an.diagnosis_input({"id": "r1"}, route_cached=True)
        assert (inp.stall_ms, inp.warn_prompt_tokens, inp.lang, inp.proxy_url) == (250.0, 9000, "zh", "http://127.0.0.1:9999")
        assert inp.recent is an.recent and inp.route_cached and inp.prompt_change["id"] == "r1"
        an.settings.lang = "en"  # an option changed (capture.configure): the next input has it, this one not
        assert an.diagnosis_input().lang == "en" and inp.lang == "zh" and an.diagnosis_input().prompt_change is None
        assert not hasattr(an, "prompt_change")  # nothing set before a diagnosis and cleared after
    finally:
        an.close()
        w.close()

# ---- golden findings: what the rules and the renderer said before they were made faster ---------------------

GOLDEN = pathlib.Path(__file__).resolve().parent / "fixtures" / "diagnose_golden.json"


def _golden_mixes() -> list[tuple[str, dict]]:
    """Deterministic combinations of the cases above: two or three causes at once, another route, family, load."""
    import random

    rng = random.Random(13)
    out = []
    for i in range(160):
        picked = rng.sample(CASES, rng.choice((2, 3)))
        over = with_(*[dict(c[1]) for c in picked])
        if rng.random() < 0.3:
            over.update(route="team", upstream="https://gw.example/openai",
                        upstream_url="https://gw.example/openai" + over.get("path", "/v1/chat/completions"))
        if rng.random() < 0.3:
            over.update(proxy_delay_ms=rng.choice((12.0, 75.0, 400.0)), proxy_lag_ms=30.0,
                        proxy_cpu=rng.choice((None, 0.2, 0.99)))
        if rng.random() < 0.2:
            over.update(ttfb_ms=rng.choice((None, 250.0, 900.0, 1400.0)), conn_reused=rng.choice((None, True, False)))
        out.append(("mix-" + "+".join(c[0] for c in picked) + f"-{i}", over))
    return out


def _golden_sequence(maxlen: int, n: int, seed: int) -> list:
    """Records diagnosed one after the other with the earlier ones as ``recent`` (the analysis thread's
    order): the network baseline over a window that fills up and then slides."""
    import random

    rng = random.Random(seed)
    recent: collections.deque = collections.deque(maxlen=maxlen)
    out = []
    for i in range(n):
        model = rng.choice(("gpt-4o-mini", "gpt-4o-mini", "gpt-4o", None))
        ttfb = rng.choice((None, 0, 80.0, 95, 120.5, 140.0, 2.0)) if rng.random() < 0.15 else round(rng.uniform(40, 160), 3)
        if rng.random() < 0.12 and ttfb is not None:
            ttfb = rng.choice((350.0, 700.0, 1500.0, 2600.0))
        ttft = None if ttfb is None else ttfb + rng.choice((5.0, 40.0, 900.0))
        rec = healthy(id=rng.choice((f"s{i}", f"s{i}", f"s{i}", f"s{max(0, i - 3)}")), model=model,
                      status=rng.choice((200, 200, 200, 200, 429, None)),
                      conn_reused=rng.choice((True, True, None, False)), ttfb_ms=ttfb, ttft_ms=ttft,
                      first_token_ms=ttft, gap_ms=None if ttft is None else ttft - ttfb)
        if i % 97 == 0 and i < 400:  # something that is not a Record in the history (for a while)
            recent.append(types.SimpleNamespace(model=model, ttfb_ms=ttfb, status=200))
        if i == n // 2:
            recent.clear()  # a new history: nothing of the old one counts
        lang_ = "zh" if i % 7 == 0 else "en"
        c = DiagnosisInput(lang=lang_, recent=recent)
        found = diagnose(rec, c)
        # the same history as a plain list (read afresh every time) says the same
        assert diagnose(rec, DiagnosisInput(lang=lang_, recent=list(recent))) == found
        out.append(_golden_findings(found))
        recent.append(rec)
        if i % 89 == 0:
            recent.append(rec)  # the same record twice
    return out


def _golden_renders() -> dict:
    """Every template rendered with no params, odd params and unknown codes and languages."""
    out = {}
    for code, e in cat.CATALOG.items():
        for variant in (e.variants or (None,)):
            names = set()
            for lang_ in cat.LANGS:
                for part in ("message", "hint"):
                    names |= cat.fields(cat.template(code, part, lang_, variant))
            for label, value in (("none", None), ("text", "x{y}"), ("int", 1234567), ("float", 0.51234),
                                 ("list", ["system", "newline"]), ("bool", True)):
                params = {n: value for n in names}
                params["variant"] = variant
                for lang_ in ("en", "zh", "fr"):
                    out[f"{code}/{variant}/{label}/{lang_}"] = list(render(code, params, lang_))
            out[f"{code}/{variant}/empty"] = list(render(code, {"variant": variant}, "en"))
        for lang_ in cat.LANGS:
            out[f"{code}/when/{lang_}"] = cat.when(code, lang_)
    out["unknown"] = list(render("no.such.code", {"a": 1}, "zh"))
    out["finding"] = render_finding({"code": "usage.missing", "params": None, "extra": 1}, "zh")
    return out


def _digest(value) -> str:
    import hashlib

    return hashlib.sha256(json.dumps(value, ensure_ascii=False, sort_keys=True).encode()).hexdigest()[:16]


def _golden_findings(found: list) -> list:
    """[code, severity, digest of message + hint + params] per finding, in order."""
    return [[f["code"], f["severity"], _digest([f["message"], f["hint"], f["params"]])] for f in found]


def golden_corpus() -> dict:
    cases = {}
    for name, overrides, _code, _severity in CASES:
        for lang_ in ("en", "zh"):
            cases[f"{name}/{lang_}"] = _golden_findings(_run(overrides, lang_=lang_))
    for name, overrides in _golden_mixes():
        cases[name] = _golden_findings(_run(overrides, lang_="zh" if len(name) % 3 == 0 else "en"))
    return {"cases": cases, "sequence-500": _golden_sequence(500, 1200, 5), "sequence-7": _golden_sequence(7, 300, 6),
            "renders": {k: _digest(v) for k, v in _golden_renders().items()}}


def test_findings_match_the_golden_corpus():
    """Every finding's code, severity, message, hint, params and order, byte for byte, as recorded before the
    rules and the renderer were made faster (regenerate only for an intended change:
    python tests/test_diagnose_rules.py)."""
    want = json.loads(GOLDEN.read_text(encoding="utf-8"))
    got = golden_corpus()
    assert set(got) == set(want)
    for part in want:
        if isinstance(want[part], dict):
            assert set(got[part]) == set(want[part]), part
            for key in want[part]:
                assert got[part][key] == want[part][key], (part, key)
        else:
            for i, (g, w) in enumerate(zip(got[part], want[part], strict=True)):
                assert g == w, (part, i)


if __name__ == "__main__":
    GOLDEN.write_text(json.dumps(golden_corpus(), ensure_ascii=False, indent=0, sort_keys=True) + "\n", encoding="utf-8")


def test_render_matches_the_lenient_formatter_for_any_values():
    """The fast path (str.format_map) renders exactly what string.Formatter field by field would,
    for values of every type, missing ones and ones that do not fit their format spec."""
    import random
    import string

    class Lenient(string.Formatter):
        def get_value(self, key, args, kwargs):
            return kwargs.get(key) if isinstance(key, str) else super().get_value(key, args, kwargs)

        def format_field(self, value, format_spec):
            if value is None:
                return "?"
            try:
                return super().format_field(value, format_spec)
            except (ValueError, TypeError):
                return str(value)

    def label(v, lang_):  # label codes shown in words, lists joined
        if isinstance(v, (list, tuple)):
            return ("、" if lang_ == "zh" else ", ").join(label(x, lang_) for x in v)
        return cat.LABELS[v].get(lang_, cat.LABELS[v]["en"]) if isinstance(v, str) and v in cat.LABELS else str(v)

    ref = Lenient()
    rng = random.Random(21)
    values = (None, "", "text {x}", 0, -3, 12345678, 2**70, 0.5, -1234.5678, float("inf"), True, False,
              ["system", "tools"], {"a": 1}, (1, 2))
    for code, e in cat.CATALOG.items():
        for variant in (e.variants or (None,)):
            for lang_ in cat.LANGS:
                tmpls = [cat.template(code, part, lang_, variant) for part in ("message", "hint")]
                names = set().union(*(cat.fields(t) for t in tmpls))
                for _ in range(12):
                    params = {n: rng.choice(values) for n in names if rng.random() < 0.9}
                    params["variant"] = variant
                    shown = {k: (label(v, lang_) if k in cat.LABELLED else v) for k, v in params.items()}
                    want = tuple(ref.format(t, **shown) for t in tmpls)
                    assert render(code, params, lang_) == want, (code, variant, lang_, params)


@pytest.mark.parametrize("error", ["Client does not speak TLS.", "Connection refused", "Connection killed."])
def test_an_upstream_message_joins_the_sentence_with_one_period(error):
    for lang_ in ("en", "zh"):
        found = _run(dict(status=None, ttfb_ms=None, ttft_ms=None, events=0, error=error), lang_=lang_)
        texts = [f["message"] for f in found]
        assert texts and not any(".." in t or ".。" in t for t in texts), texts


@pytest.mark.parametrize("error", ["[Errno -2] Name or service not known", "[Errno 111] Connect call failed ('1.2.3.4', 443)",
                                   "server closed connection", "Certificate verify failed: self-signed certificate"])
def test_no_fix_names_upstream_when_run_chose_it(error):
    """`firsttoken run` chose the upstream from the client's settings: a fix must not say --upstream."""
    for lang_ in ("en", "zh"):
        ran = [render_finding(f, lang_) for f in _run(with_(NOCONN, error=error, run_id="abcd1234"), lang_=lang_)]
        assert ran and not any("--upstream " in f["hint"] or "--upstream（" in f["hint"] for f in ran), ran
        given = [render_finding(f, lang_) for f in _run(with_(NOCONN, error=error), lang_=lang_)]
        if "verify" not in error:
            assert any("--upstream" in f["hint"] for f in given), given
    assert "firsttoken run" in ran[0]["hint"] or "verify" in error
    # forward mode (`proxy --forward`): the upstream is the client's own target, no --upstream either
    for lang_ in ("en", "zh"):
        fwd = [render_finding(f, lang_) for f in _run(with_(NOCONN, error=error, route="default",
                                                             upstream="https://api.example.com:443"), lang_=lang_)]
        assert fwd and not any("--upstream " in f["hint"] or "--upstream（" in f["hint"] for f in fwd), fwd


def test_a_non_streamed_answer_gets_no_network_or_prefill_verdict():
    """Issue 24: for `stream: false` the headers come after the whole answer, so its TTFB is the whole
    generation, not the network; and such requests do not raise a model's TTFB baseline either."""
    whole = dict(stream=False, content_type="application/json", ttfb_ms=3000.0, first_byte_ms=3001.0,
                 first_token_ms=3002.0, ttft_ms=3002.0, gap_ms=2.0, total_ms=3003.0, conn_reused=True,
                 prompt_tokens_est=9000, events=0, event_offsets=[])
    f = _run(whole)
    assert not {"latency.network", "latency.prefill"} & set(codes(f))
    # eight non-streamed answers of 2 s and six streamed ones of ~100 ms: the baseline is the streamed ones'
    earlier = ([healthy(id=f"w{i}", ttfb_ms=2000.0, conn_reused=True, stream=False, content_type="application/json")
                for i in range(8)] + [healthy(id=f"e{i}", ttfb_ms=100.0 + i, conn_reused=True) for i in range(6)])
    slow = dict(ttfb_ms=600.0, first_token_ms=680.0, ttft_ms=680.0, gap_ms=80.0, conn_reused=True)
    n = next(x for x in _run(slow, recent=earlier) if x["code"] == "latency.network")
    assert n["params"]["variant"] == "baseline" and n["params"]["samples"] == 6


def test_a_burst_in_one_read_arrived_at_once_not_within_0_0_ms():
    """Issue 24: `show` printed "29 of 32 token events arrived within 0.0 ms"."""
    at_once = [400.0, 900.0] + [1500.0] * 18
    for offs, says, never in ((at_once, "arrived at once", "within 0.0 ms"),
                              (buffered_offsets(), "arrived within 0.5 ms", "at once")):
        f = next(x for x in _run(dict(event_offsets=offs, ttfb_ms=50.0, first_token_ms=400.0, ttft_ms=400.0, gap_ms=350.0,
                                      total_ms=1501.0, itl_max_ms=600.0)) if x["code"] == "stream.buffered")
        assert says in f["message"] and never not in f["message"]
        zh = next(x for x in _run(dict(event_offsets=offs, ttfb_ms=50.0, first_token_ms=400.0, ttft_ms=400.0, gap_ms=350.0,
                                       total_ms=1501.0, itl_max_ms=600.0), lang_="zh") if x["code"] == "stream.buffered")
        assert "0.0 毫秒" not in zh["message"]
