"""Who answered (Server, Via, allow-listed headers), naming the hop, and buffering read from a stream's
shape: pure functions, tested on token-event times recorded through a real nginx 1.22.1 in front of the
simulator (32 tokens 25 ms apart after ~110 ms; 8 tokens for the short one), and on the shapes of streams
a model paces itself, which must never qualify."""

from __future__ import annotations

import pytest

from firsttoken.addon.diagnose import DiagnosisInput, diagnose
from firsttoken.addon.hops import buffer_shape, clumps, fix_code, name_hop, reported_timings, who_answered
from firsttoken.addon.hops.headers import MAX_HEADERS, TOTAL_MAX, VALUE_MAX
from firsttoken.addon.record import Record


def _rep(at: float, n: int) -> list[float]:
    return [at] * n


#: recorded through real nginx (default `proxy_buffering on`, upstream HTTP/1.0): three 4 KB releases
NGINX_DEFAULT = (433.5, _rep(437.9, 12) + _rep(782.4, 14) + _rep(907.9, 6))
#: `proxy_buffers 8 64k`: the first buffer with the headers, the rest at the end
NGINX_BIG_BUFFERS = (427.7, _rep(428.7, 12) + _rep(899.8, 20))
#: `gzip on; gzip_types text/event-stream`: everything with the headers, at the end
NGINX_GZIP = (911.2, _rep(919.3, 32))
#: `postpone_output 0`: the headers early, the body in 4 KB releases
NGINX_POSTPONE0 = (58.5, _rep(430.5, 12) + _rep(783.6, 14) + _rep(905.4, 6))
#: default buffering, an 8-token answer: headers and all of it together
NGINX_SHORT = (312.2, _rep(315.0, 8))
#: `proxy_buffering off`: every token on its own, as the model made it
NGINX_OFF = (56.8, [131.6, 157.9, 183.5, 205.3, 230.3, 255.3, 282.5, 305.4, 330.4, 355.3, 380.3, 405.3, 430.5, 455.8,
                    480.2, 505.3, 530.3, 559.5, 580.4, 605.3, 630.3, 659.3, 680.3, 705.4, 730.8, 755.5, 780.5, 805.6,
                    830.4, 855.3, 880.5, 905.5])
#: default buffering with `proxy_http_version 1.1` (chunked upstream): nginx passed each chunk on
NGINX_HTTP11 = (114.7, [118.1, 140.0, 165.1, 189.2, 215.6, 239.2, 264.5, 289.2, 314.2, 339.5, 365.7, 389.1, 414.3,
                        439.8, 464.4, 489.1, 514.4, 539.6, 564.9, 589.3, 614.1, 639.2, 664.2, 689.2, 714.3, 739.3,
                        765.0, 789.2, 814.3, 839.6, 864.2, 889.3])


@pytest.mark.parametrize("case,variant,bursts", [
    (NGINX_DEFAULT, "with_headers", 3), (NGINX_BIG_BUFFERS, "with_headers", 2), (NGINX_GZIP, "with_headers", 1),
    (NGINX_POSTPONE0, "bursts", 3), (NGINX_SHORT, "with_headers", 1),
])
def test_recorded_nginx_buffering_is_buffering(case, variant, bursts):
    ttfb, offs = case
    s = buffer_shape(offs, ttfb, events=len(offs))
    assert s is not None and s["variant"] == variant and s["bursts"] == bursts
    assert s["held_events"] == len(offs) and s["first_ms"] == offs[0]


def test_recorded_unbuffered_nginx_streams_are_not():
    for ttfb, offs in (NGINX_OFF, NGINX_HTTP11):
        assert buffer_shape(offs, ttfb, events=len(offs)) is None


def test_postpone_output_0_says_how_long_the_headers_waited_for_the_first_release():
    s = buffer_shape(NGINX_POSTPONE0[1], NGINX_POSTPONE0[0])
    assert s["wait_ms"] == pytest.approx(372.0) and s["held_ms"] == pytest.approx(372.0)


def test_a_release_stamped_chunk_by_chunk_is_one_release():
    # a hop that releases a block holding one HTTP chunk per event: firsttoken stamps each chunk as it
    # processes it, a few hundred us apart, and the first visible token (decoded live) later still
    offs = [406.2] + [408.3 + 0.05 * i for i in range(10)] + [724.1 + 0.06 * i for i in range(13)]
    s = buffer_shape(offs, 403.7)
    assert s is not None and s["variant"] == "with_headers" and s["held_events"] == 24


def test_the_old_tail_shape_still_counts():
    offs = [400.0, 900.0] + [1500.0 + 0.03 * i for i in range(18)]
    s = buffer_shape(offs, 50.0)
    assert s["variant"] == "tail" and s["burst_events"] == 18 and s["wait_ms"] == pytest.approx(1450.0)


@pytest.mark.parametrize("offs,ttfb", [
    ([300.0 + 1.0 * i for i in range(400)], 290.0),  # a fast small model, 1,000 tokens/s, every event read alone
    ([300.0 + 5.0 * (i // 5) for i in range(400)], 290.0),  # ... its events coalesced by TCP, 5 per read
    ([2000.0 + 2.0 * i for i in range(10)], 50.0),  # a 2 s prefill, then 10 quick tokens
    ([500.0 + 0.6 * i for i in range(30)], 20.0),  # 1,600 tokens/s
    ([500.0 + 0.33 * i for i in range(600)], 20.0),  # 3,000 tokens/s, the fastest served models, one event a read
    ([500.0 + 1.3 * (i // 4) for i in range(600)], 20.0),  # ... coalesced 4 a read
    ([100.0 + 20.0 * i for i in range(100)] + _rep(2400.0, 12) + [2400.0 + 20.0 * i for i in range(1, 60)], 50.0),
    # one network stall in a paced stream releases one clump: not most of the stream
])
def test_paced_streams_never_qualify(offs, ttfb):
    assert buffer_shape(offs, ttfb) is None


def test_too_few_events_capped_offsets_and_fast_routes_are_not_judged():
    assert buffer_shape(_rep(300.0, 7), 299.0) is None
    assert buffer_shape(_rep(300.0, 20), 299.0, events=5000) is None  # offsets capped: shape unknown
    assert buffer_shape(_rep(300.0, 20), 299.0, ref_itl_ms=0.2) is None  # this route's streams clump anyway
    assert buffer_shape(_rep(300.0, 20), 299.0, ref_itl_ms=25.0) is not None


def test_a_proxy_that_read_late_is_not_blamed_on_a_hop():
    offs = [100.0 + 20.0 * i for i in range(5)] + _rep(400.0, 20)
    assert buffer_shape(offs, 50.0, proxy_delay_ms=10.0) is not None
    assert buffer_shape(offs, 50.0, proxy_delay_ms=200.0) is None  # its own loop stalled that long


def test_a_busy_proxy_stamping_the_body_late_still_sees_it_came_with_the_headers():
    offs = [473.5] + [473.7 + 0.02 * i for i in range(10)] + [723.7] + [728.0 + 0.01 * i for i in range(20)]
    assert buffer_shape(offs, 408.4, proxy_delay_ms=59.8)["variant"] == "with_headers"  # recorded under load
    # on an idle proxy those 65 ms after the headers were a real wait, too short to call a hold: not judged
    assert buffer_shape(offs, 408.4, proxy_delay_ms=0.0) is None


def test_clumps():
    assert clumps([]) == []
    assert clumps([1.0, 1.2, 1.3, 5.0, 9.0, 9.1], 0.5) == [(0, 3), (3, 1), (4, 2)]
    assert clumps([1.0, 1.2, 1.3, 5.0, 19.0, 19.1]) == [(0, 4), (4, 2)]


# ---- who answered ---------------------------------------------------------------------------------------

def test_who_answered_keeps_the_allow_list_and_never_a_credential():
    server, via, kept = who_answered({
        "server": "nginx/1.22.1", "via": "1.1 varnish", "cf-ray": "8f1a2b3c4d5e6f70-FRA",
        "x-envoy-upstream-service-time": "412", "openai-processing-ms": "398", "server-timing": "upstream;dur=401",
        "x-litellm-version": "1.74.3", "x-litellm-key-spend": "0.0", "x-kong-upstream-latency": "405",
        "x-kong-api-key": "kong-secret-value", "x-litellm-master-key": "sk-1234567890abcdef1234567890",
        "set-cookie": "__cf_bm=abc", "authorization": "Bearer sk-x", "content-type": "text/event-stream",
        "x-request-id": "req_1",
    })
    assert server == "nginx/1.22.1" and via == "1.1 varnish"
    assert {"cf-ray", "x-envoy-upstream-service-time", "openai-processing-ms", "server-timing", "x-litellm-version",
            "x-litellm-key-spend", "x-kong-upstream-latency", "x-request-id"} == set(kept)
    assert not any("secret" in v or "sk-" in v for v in kept.values())


def test_the_upstreams_headers_litellm_passes_on_are_kept_and_its_cost_bookkeeping_is_not():
    """LiteLLM 1.108 as recorded: its own timing headers, the upstream's passed on under
    llm_provider-, eight cost headers that say nothing about the hop."""
    _, _, kept = who_answered({
        **{f"x-litellm-response-cost{s}": "0.0" for s in ("", "-original", "-input", "-output", "-margin-amount",
                                                           "-margin-percent", "-discount-amount", "-tool-usage")},
        "x-litellm-version": "1.108.7", "x-litellm-response-duration-ms": "48.59614372253418",
        "x-litellm-overhead-duration-ms": "15.3241", "x-litellm-callback-duration-ms": "0.0",
        "llm_provider-server": "cloudflare", "llm_provider-openai-processing-ms": "30",
        "llm_provider-x-request-id": "req_1", "llm_provider-set-cookie": "__cf_bm=abc",
        "llm_provider-authorization": "Bearer sk-1234567890abcdef1234567890", "llm_provider-date": "today"})
    assert set(kept) == {"x-litellm-version", "x-litellm-response-duration-ms", "x-litellm-overhead-duration-ms",
                         "x-litellm-callback-duration-ms", "llm_provider-server", "llm_provider-openai-processing-ms",
                         "llm_provider-x-request-id"}


def test_what_the_hops_report_about_their_own_time():
    got = reported_timings({"x-litellm-overhead-duration-ms": "15.3241", "x-litellm-response-duration-ms": "48.596",
                            "llm_provider-openai-processing-ms": "30", "x-kong-proxy-latency": "None",
                            "server-timing": 'cache;desc="hit", upstream;dur=401.5, db;dur="12"',
                            "x-envoy-upstream-service-time": "-3"})
    assert [(x.what, x.ms, x.header, x.who) for x in got] == [
        ("gateway_overhead", 15.3, "x-litellm-overhead-duration-ms", "LiteLLM"),
        ("gateway_waited", 48.6, "x-litellm-response-duration-ms", "LiteLLM"),
        ("provider_processing", 30.0, "llm_provider-openai-processing-ms", None),
        ("server_timing", 401.5, "server-timing upstream", None),
        ("server_timing", 12.0, "server-timing db", None)]
    assert reported_timings(None) == [] and reported_timings({"server-timing": "garbage;;;dur="}) == []


def test_who_answered_caps_and_cleans_what_it_keeps():
    _, _, kept = who_answered({f"x-litellm-h{i}": "v" * 1000 for i in range(100)})
    assert len(kept) <= MAX_HEADERS and all(len(v) <= VALUE_MAX for v in kept.values())
    assert sum(len(k) + len(v) for k, v in kept.items()) <= TOTAL_MAX
    server, _, kept = who_answered({"server": "evil\x1b[31m\r\nX", "x-request-id": "a\x00b"})
    assert server.isprintable() and kept["x-request-id"].isprintable()
    _, _, kept = who_answered({"x-request-id": "sk-ant-api03-" + "a1" * 30})  # a key echoed in an id: masked
    assert "a1a1a1a1a1a1" not in kept["x-request-id"]


@pytest.mark.parametrize("server,via,headers,kind,name", [
    ("nginx/1.22.1", None, {}, "nginx", "nginx/1.22.1"),
    ("openresty", None, {}, "nginx", "openresty"),
    ("cloudflare", None, {"cf-ray": "x", "x-envoy-upstream-service-time": "3"}, "cloudflare", "Cloudflare"),
    (None, None, {"cf-ray": "x"}, "cloudflare", "Cloudflare"),
    ("Caddy", None, {}, "caddy", "Caddy"),
    (None, "1.1 Caddy", {}, "caddy", "Caddy"),
    ("envoy", None, {}, "envoy", "Envoy"),
    ("istio-envoy", None, {}, "envoy", "Envoy"),
    (None, None, {"x-envoy-upstream-service-time": "12"}, "envoy", "Envoy"),
    ("Apache/2.4.57 (Debian)", None, {}, "apache", "Apache/2.4.57 (Debian)"),
    ("Microsoft-IIS/10.0", None, {"x-powered-by": "ARR/3.0"}, "iis", "Microsoft-IIS/10.0 (ARR)"),
    ("awselb/2.0", None, {}, "aws", "AWS load balancer"),
    ("Google Frontend", None, {}, "gcp", "Google Cloud load balancer"),
    (None, "1.1 google", {}, "gcp", "Google Cloud load balancer"),
    ("uvicorn", None, {"x-litellm-version": "1.74.3"}, "litellm", "LiteLLM 1.74.3"),
    (None, None, {"x-oneapi-request-id": "2024"}, "oneapi", "one-api/new-api"),
    (None, None, {"x-azure-ref": "0abc"}, "azure", "Azure Front Door"),
    ("uvicorn", None, {}, "app", "uvicorn"),
    ("SomethingElse/2", None, {}, "other", "SomethingElse/2"),
])
def test_name_hop(server, via, headers, kind, name):
    assert name_hop(server, via, headers) == (kind, name)


def test_name_hop_knows_nothing_without_headers():
    assert name_hop(None) is None and name_hop("", "", {}) is None


def test_every_hop_kind_with_a_fix_has_its_own_and_others_the_generic_one():
    assert fix_code("nginx") == "hop_fix.nginx" and fix_code("app") == fix_code(None) == "hop_fix.generic"


# ---- the finding --------------------------------------------------------------------------------------------

def _rec(ttfb: float, offs: list[float], id: str = "r1", **kw) -> Record:
    r = Record(id=id, started_at="2026-01-01T00:00:00Z", state="done", route="default",
               upstream="http://127.0.0.1:9", upstream_url="http://127.0.0.1:9/v1/chat/completions",
               api="openai.chat", model="gpt-4o-mini", stream=True, status=200, content_type="text/event-stream",
               ttfb_ms=ttfb, first_byte_ms=offs[0], first_token_ms=offs[0], ttft_ms=offs[0],
               gap_ms=offs[0] - ttfb, total_ms=offs[-1] + 1, events=len(offs), event_offsets=list(offs),
               itl_p50_ms=0.0, itl_max_ms=max(b - a for a, b in zip(offs, offs[1:])), stream_done=True,
               finish_reason="stop", usage_prompt_tokens=20, usage_completion_tokens=len(offs), conn_reused=True,
               prompt_tokens_est=20, **kw)
    return r


def test_whole_stream_with_the_headers_is_buffering_named_by_its_hop_not_network():
    offs = _rep(1060.0, 32)
    rec = _rec(1058.0, offs, server="nginx/1.22.1", hop="nginx/1.22.1")
    found = diagnose(rec, DiagnosisInput())
    codes = [f["code"] for f in found]
    assert "stream.buffered" in codes and "latency.network" not in codes and "latency.prefill" not in codes
    b = found[codes.index("stream.buffered")]
    assert b["message"].startswith("nginx/1.22.1 held this stream for 1,060 ms")
    assert "proxy_buffering off" in b["hint"] and "gzip_types" in b["hint"]
    assert b["params"]["hop_kind"] == "nginx" and b["params"]["hop_fix"] == "hop_fix.nginx"
    zh = diagnose(rec, DiagnosisInput(lang="zh"))
    zb = next(f for f in zh if f["code"] == "stream.buffered")
    assert "nginx/1.22.1" in zb["message"] and "proxy_buffering off" in zb["hint"] and "扣住" in zb["message"]


def test_unnamed_hop_gets_the_generic_fix_and_the_same_record_unbuffered_gets_network():
    rec = _rec(1058.0, _rep(1060.0, 32))
    b = next(f for f in diagnose(rec, DiagnosisInput()) if f["code"] == "stream.buffered")
    assert b["message"].startswith("A hop between the model and firsttoken held") and "proxy_buffering" in b["hint"]
    paced = _rec(1058.0, [1060.0 + 20 * i for i in range(32)])
    codes = [f["code"] for f in diagnose(paced, DiagnosisInput())]
    assert "stream.buffered" not in codes and "latency.network" in codes  # the verdict it stands in for


def test_a_cdn_that_passes_streams_through_is_not_said_to_have_held_it():
    rec = _rec(1058.0, _rep(1060.0, 32), server="cloudflare", hop_headers={"cf-ray": "8f1a-FRA"}, hop="Cloudflare")
    b = next(f for f in diagnose(rec, DiagnosisInput()) if f["code"] == "stream.buffered")
    assert b["message"].startswith("A hop between the model and firsttoken held") and b["params"]["hop"] == "Cloudflare"
    assert "Cloudflare" in b["hint"] and "origin" in b["hint"]  # its own advice: where to look behind it


def test_a_route_whose_unbuffered_streams_clump_takes_the_verdict_back():
    recent = [_rec(100.0, [200.0 + 0.1 * i for i in range(20)], id=f"o{i}", findings=[]) for i in range(6)]
    for r in recent:
        r.itl_p50_ms = 0.1
    ctx = DiagnosisInput(recent=recent)
    assert "stream.buffered" not in [f["code"] for f in diagnose(_rec(300.0, _rep(301.0, 20)), ctx)]
    for r in recent:
        r.itl_p50_ms = 20.0
    b = next(f for f in diagnose(_rec(300.0, _rep(301.0, 20)), ctx) if f["code"] == "stream.buffered")
    assert b["params"]["ref_itl_ms"] == 20.0 and b["params"]["ref_samples"] == 6


@pytest.mark.slow  # timing: with 4 busy workers on 2 cores the proxy's own late reads split a block (seen once in CI)
def test_the_simulators_buffer_4k_mode_is_reported_as_buffering(tmp_path):
    """`x-sim-fault: buffer_4k` holds the headers and the events in 4 KB blocks, as nginx's default does:
    the demo's way to show the finding without an nginx."""
    import json
    import sqlite3

    import httpx

    from firsttoken.cli.proxy.server import ProxyServer
    from firsttoken.cli.simulate import SimConfig, SimServer

    body = {"model": "gpt-4o-mini", "stream": True, "stream_options": {"include_usage": True},
            "messages": [{"role": "user", "content": "hi"}]}
    with SimServer(SimConfig(ttfb_ms=30, prefill_base_ms=80, tpot_ms=25, output_tokens=32)) as sim, \
            ProxyServer([sim.url], str(tmp_path / "ft.db"), port=0) as p:
        for _ in range(2):  # the connection closes after each: the next one is not held behind it
            with httpx.stream("POST", p.url + "/v1/chat/completions", json=body, timeout=10,
                              headers={"x-sim-fault": "buffer_4k", "authorization": "Bearer sk-test"}) as r:
                assert r.status_code == 200 and b"[DONE]" in b"".join(r.iter_raw())
        p.flush()
    conn = sqlite3.connect(str(tmp_path / "ft.db"))
    rows = conn.execute("SELECT ttfb_ms, event_offsets, findings, proxy_delay_ms FROM requests").fetchall()
    conn.close()
    assert len(rows) == 2
    for ttfb, offs, found, delay in rows:
        b = [f for f in json.loads(found) if f["code"] == "stream.buffered"]
        assert b and b[0]["params"]["variant"] == "with_headers", (ttfb, offs, found, delay)
        assert json.loads(offs)[0] - ttfb < 50  # the headers came with the first block
