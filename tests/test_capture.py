"""The capture core, end to end: real clients → the proxy → a real upstream on loopback."""

from __future__ import annotations

import gzip
import hashlib
import json
import socket
import time

import httpx
import pytest
from conftest import one_row, rows
from rawserver import RawUpstream

from firsttoken.cli.proxy.server import ProxyServer

CHAT = "/v1/chat/completions"


def chat_body(content="Say hi.", model="gpt-4o-mini", **kw):
    return {"model": model, "messages": [{"role": "user", "content": content}], "stream": True,
            "stream_options": {"include_usage": True}, **kw}


def _chunk(i: int, text: str) -> bytes:
    d = {"id": "chatcmpl-x", "object": "chat.completion.chunk", "model": "m", "choices": [{"index": 0, "delta": {"content": text}}]}
    return b"data: " + json.dumps(d).encode() + b"\n\n"


def test_bytes_reach_the_client_unchanged_and_unbuffered(db_path):
    # Awkward chunking on purpose: events split mid-line and mid-UTF-8 character.
    payload = b"".join(_chunk(i, "héllo ") for i in range(8)) + b"data: [DONE]\n\n"
    chunks = [payload[i:i + 37] for i in range(0, len(payload), 37)]
    with RawUpstream(chunks, delay=0.03) as up, ProxyServer([up.url], str(db_path), port=0) as p:
        got = hashlib.sha256()
        arrivals = []
        with httpx.stream("POST", p.url + CHAT, json=chat_body(), timeout=10) as r:
            for part in r.iter_raw():
                arrivals.append(time.perf_counter())
                got.update(part)
        assert got.hexdigest() == up.sent.hexdigest()
        # Unbuffered: the first bytes arrive long before the last ones (upstream spreads them over ~0.5 s).
        assert arrivals[-1] - arrivals[0] > 0.25
        row = one_row(p, db_path)
    assert row["status"] == 200 and row["api"] == "openai.chat"
    assert row["events"] == 8 and row["output_chars"] == 8 * len("héllo ")
    assert row["stream_done"] == 1


def test_gzip_stream_forwarded_compressed_and_parsed(db_path):
    comp = gzip.compress(b"".join(_chunk(i, "tok") for i in range(5)) + b"data: [DONE]\n\n")
    chunks = [comp[i:i + 20] for i in range(0, len(comp), 20)]
    with RawUpstream(chunks, headers={"content-type": "text/event-stream", "content-encoding": "gzip"}) as up, \
            ProxyServer([up.url], str(db_path), port=0) as p:
        with httpx.Client() as c:
            req = c.build_request("POST", p.url + CHAT, json=chat_body(), headers={"accept-encoding": "gzip"})
            r = c.send(req, stream=True)
            raw = b"".join(r.iter_raw())
            r.close()
        assert raw == comp  # still compressed: the proxy decoded a copy only
        row = one_row(p, db_path)
    assert row["events"] == 5 and row["content_encoding"] == "gzip"


def test_garbage_stream_is_forwarded_recorded_and_never_crashes(db_path):
    junk = [b"\xff\xfe\x00garbage\r", b"\ndata: {not json}\n\n", b"data: [1,2]\n\n:comment\n", b"event: x\ndata:\n\n" * 3]
    with RawUpstream(junk) as up, ProxyServer([up.url], str(db_path), port=0) as p:
        r = httpx.post(p.url + CHAT, json=chat_body(), timeout=10)
        assert r.content == b"".join(junk)
        row = one_row(p, db_path)
    assert row["status"] == 200 and row["events"] == 0
    assert row["malformed_events"] >= 1 and row["stream_done"] == 0


@pytest.mark.slow  # timing bounds: they want the machine to themselves
def test_sim_timings_match_the_schedule(sim, proxy, db_path):
    import openai

    client = openai.OpenAI(base_url=proxy.url + "/v1", api_key="sk-test-timing-000000000000000000")
    stream = client.chat.completions.create(**{k: v for k, v in chat_body().items()})
    text = "".join((c.choices[0].delta.content or "") for c in stream if c.choices)
    assert text
    row = one_row(proxy, db_path)
    cfg = sim.config
    assert row["ttfb_ms"] == pytest.approx(cfg.ttfb_ms, abs=25) or cfg.ttfb_ms <= row["ttfb_ms"] < cfg.ttfb_ms + 60
    # first visible token: headers + prefill; the stream then takes (n-1) * tpot more
    assert row["ttft_ms"] >= cfg.ttfb_ms + cfg.prefill_base_ms - 5
    assert row["ttft_ms"] < cfg.ttfb_ms + cfg.prefill_base_ms + 150
    assert row["gap_ms"] == pytest.approx(row["ttft_ms"] - row["ttfb_ms"], abs=0.01)
    assert row["total_ms"] >= row["ttft_ms"] + (cfg.output_tokens - 1) * cfg.tpot_ms * 0.8
    assert row["usage_completion_tokens"] == cfg.output_tokens
    assert row["events"] == cfg.output_tokens
    assert row["tpot_ms"] == pytest.approx(cfg.tpot_ms, rel=0.6)
    assert row["conn_reused"] == 0 and row["connect_ms"] is not None


def test_refused_upstream_becomes_a_record(db_path):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens here now
    with ProxyServer([f"http://127.0.0.1:{port}"], str(db_path), port=0) as p:
        r = httpx.post(p.url + CHAT, json=chat_body(), timeout=10)
        assert r.status_code == 502
        row = one_row(p, db_path)
    assert row["status"] is None and row["state"] == "done"
    assert "connect call failed" in row["error"].lower()  # mitmproxy's text for ECONNREFUSED


def test_dns_failure_becomes_a_record(db_path):
    with ProxyServer(["https://no-such-host.invalid"], str(db_path), port=0) as p:
        r = httpx.post(p.url + CHAT, json=chat_body(), timeout=20)
        assert r.status_code == 502
        row = one_row(p, db_path)
    assert row["status"] is None and row["error"]


def test_client_abort_mid_stream_is_recorded(db_path):
    chunks = [_chunk(i, "x") for i in range(40)] + [b"data: [DONE]\n\n"]
    with RawUpstream(chunks, delay=0.05) as up, ProxyServer([up.url], str(db_path), port=0) as p:
        with httpx.stream("POST", p.url + CHAT, json=chat_body(), timeout=10) as r:
            for i, _ in enumerate(r.iter_raw()):
                if i >= 3:
                    break
        deadline = time.time() + 5
        while time.time() < deadline and not rows(db_path, "WHERE state = 'done'"):
            time.sleep(0.05)
        row = one_row(p, db_path)
    assert row["client_aborted"] == 1
    assert row["events"] < 40


def test_routes_prefix_concatenation_and_no_route(db_path):
    with RawUpstream([_chunk(0, "a"), b"data: [DONE]\n\n"]) as up, \
            ProxyServer([f"oai={up.url}/api", f"other={up.url}"], str(db_path), port=0) as p:
        httpx.post(p.url + "/oai/v1/v1/chat/completions", json=chat_body(), timeout=10)
        httpx.post(p.url + "/other/v1/chat/completions?x=1", json=chat_body(), timeout=10)
        r = httpx.post(p.url + "/nowhere/v1/chat/completions", json=chat_body(), timeout=10)
        assert r.status_code == 404 and "no route" in r.text
        p.flush()
        rs = rows(db_path)
    # the doubled /v1 reaches the upstream as sent: a wrong path is diagnosed, never "fixed"
    assert [x[0] for x in up.requests] == ["/api/v1/v1/chat/completions", "/v1/chat/completions?x=1"]
    assert {r["route"] for r in rs} == {"oai", "other", None}
    assert len(rs) == 3
    host_headers = {x[1].get("Host") for x in up.requests}
    assert host_headers == {up.url.split("//")[1]}


def test_key_never_reaches_disk(sim, db_path, tmp_path):
    secret = "sk-proj-SUPERSECRET0123456789abcdefXYZ"
    with ProxyServer([sim.url], str(db_path), port=0, save_bodies=True) as p:
        httpx.post(p.url + CHAT, json=chat_body(f"my key is {secret}"), headers={"authorization": f"Bearer {secret}"}, timeout=10)
        httpx.post(p.url + "/v1/messages", json={"model": "claude-x", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]},
                   headers={"x-api-key": secret}, timeout=10)
        p.flush()
        rs = rows(db_path)
    assert len(rs) == 2
    assert all(r["key_fingerprint"] == "sk-proj-…fXYZ" for r in rs)
    for f in tmp_path.iterdir():
        assert secret.encode() not in f.read_bytes(), f"key found in {f.name}"
        assert secret[8:30].encode() not in f.read_bytes()


def test_query_string_keys_never_reach_disk(sim, db_path, tmp_path):
    secret = "AIzaSyTESTKEY0123456789abcdefghijklmno"
    with ProxyServer([sim.url], str(db_path), port=0) as p:
        httpx.post(p.url + f"/v1/chat/completions?key={secret}&alt=sse", json=chat_body(), timeout=10)
        httpx.post(p.url.replace("127.0.0.1", "localhost") + f"/nowhere?api_key={secret}", json=chat_body(), timeout=10)
        p.flush()
        rs = rows(db_path)
    assert len(rs) == 2
    assert rs[0]["path"] == "/v1/chat/completions?key=[REDACTED]&alt=sse"
    assert rs[0]["key_header"] == "query:key" and rs[0]["key_fingerprint"] == "AIz…lmno"
    for f in tmp_path.iterdir():
        assert secret.encode() not in f.read_bytes(), f"key found in {f.name}"


def test_http2_empty_data_frames_do_not_end_the_analysis(db_path):
    """An empty chunk mid-stream (HTTP/2 empty DATA frames reach the tap as b"") is not the end."""
    from firsttoken.addon.record import Clock
    from firsttoken.addon.tap import StreamTap

    tap = StreamTap(Clock(t0=time.perf_counter()), "openai.chat", "text/event-stream", None)
    for i in range(3):
        assert tap(_chunk(i, "a")) == _chunk(i, "a")
        assert tap(b"") == b""
    tap(b"data: [DONE]\n\n")
    tap.finish()
    assert len(tap.clock.token_events) == 3 and tap.facts.done


class _Collect:  # a real mitmproxy addon beside the capture
    def __init__(self):
        self.flows = []

    def response(self, flow):
        self.flows.append(flow)


@pytest.mark.parametrize("with_view", [True, False])
def test_findings_become_flow_comments_and_marks_for_mitmweb(sim, db_path, with_view):
    """Where flows are shown (mitmweb, the console: a ``view`` addon) findings become the
    flow's comment and mark; where nobody sees flows (``firsttoken proxy``) the event loop
    is not asked to annotate them."""
    from mitmproxy.addons.view import View

    collect = _Collect()
    with ProxyServer([sim.url], str(db_path), port=0) as p:
        extra = (View(), collect) if with_view else (collect,)
        p.loop.call_soon_threadsafe(p.master.addons.add, *extra)
        time.sleep(0.2)
        r = httpx.post(p.url + CHAT, json=chat_body(), headers={"x-sim-fault": "auth", "authorization": "Bearer sk-wrong-0000000000000000"}, timeout=10)
        assert r.status_code == 401
        p.flush()
        deadline = time.time() + (5 if with_view else 0.5)
        while time.time() < deadline and not (collect.flows and collect.flows[0].comment):
            time.sleep(0.05)
        assert "auth.rejected" in one_row(p, db_path)["findings"]
    flow = collect.flows[0]
    if with_view:
        assert "auth.rejected" in flow.comment and "[error]" in flow.comment
        assert flow.marked
    else:
        assert not flow.comment and not flow.marked


def test_decompression_bomb_is_forwarded_but_not_analysed(db_path):
    import zlib

    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    bomb = c.compress(b"\0" * (80 * 2**20)) + c.flush()  # 80 MiB of zeros in ~80 KB
    with RawUpstream([bomb], headers={"content-type": "text/event-stream", "content-encoding": "gzip"}) as up, \
            ProxyServer([up.url], str(db_path), port=0) as p:
        with httpx.Client() as cl:
            r = cl.send(cl.build_request("POST", p.url + CHAT, json=chat_body()), stream=True)
            raw = b"".join(r.iter_raw())
            r.close()
        assert raw == bomb
        row = one_row(p, db_path)
    assert row["status"] == 200 and "decompress" in (row["error"] or "")


def test_a_response_firsttoken_cannot_read_still_ends_with_its_last_byte(db_path):
    # firsttoken's own note ("forwarded unchanged but not analysed") is no failure of the
    # exchange: the response completed, so it is timed to its last byte and has no
    # "silent before it ended" figure, which belongs to hang-ups and broken connections.
    chunks = [_chunk(i, "x") for i in range(4)] + [b"data: [DONE]\n\n"]
    with RawUpstream(chunks, delay=0.05, headers={"content-type": "text/event-stream",
                                                  "content-encoding": "x-snappy"}) as up, \
            ProxyServer([up.url], str(db_path), port=0) as p:
        r = httpx.post(p.url + CHAT, json=chat_body(), timeout=10)
        assert r.content == b"".join(chunks)
        row = one_row(p, db_path)
    assert row["status"] == 200 and "unsupported content-encoding" in (row["error"] or "")
    assert row["end_silence_ms"] is None and not row["client_aborted"]
    assert 4 * 50 * 0.8 <= row["total_ms"] < 4 * 50 + 1000


def test_client_closing_after_the_final_event_is_a_complete_request(db_path):
    # The openai SDK stops reading at `data: [DONE]` and closes the connection, without
    # waiting for the chunked terminator. When the terminator is late, the proxy sees the
    # client hang up: that is a complete response, not an abort.
    import openai

    chunks = [_chunk(i, "x") for i in range(5)] + [b"data: [DONE]\n\n"]
    with RawUpstream(chunks, delay=0.02, end_delay=1.0) as up, ProxyServer([up.url], str(db_path), port=0) as p:
        oai = openai.OpenAI(base_url=p.url + "/v1", api_key="sk-test-closing-000000000000", max_retries=0)
        stream = oai.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}],
                                             stream=True)
        assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices) == "xxxxx"
        deadline = time.time() + 5
        while time.time() < deadline and not rows(db_path, "WHERE state = 'done'"):
            time.sleep(0.05)
        row = one_row(p, db_path)
    assert row["stream_done"] == 1 and row["events"] == 5
    assert row["client_aborted"] == 0 and row["error"] is None
    assert "client.aborted" not in row["findings"]
    assert row["total_ms"] < 800  # ended when the client had everything, not when the terminator came


def test_flush_counts_its_settle_in_the_proxys_own_time(tmp_path):
    """A client can have its answer before the proxy's last hook ran; on a busy machine the proxy's
    loop runs late. flush's wait for requests in flight is measured on that loop's clock, so a
    starved loop (blocked here for 1.5 s) does not cut it short at two seconds of wall time."""
    import threading
    import time

    import httpx

    from firsttoken.cli.proxy.server import ProxyServer
    from firsttoken.cli.simulate import SimConfig, SimServer

    cfg = SimConfig(ttfb_ms=5, prefill_base_ms=5, tpot_ms=60, output_tokens=40)
    with SimServer(cfg) as sim, ProxyServer([sim.url], str(tmp_path / "ft.db"), port=0) as p:
        body = {"model": "sim-1", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
        t = threading.Thread(target=lambda: httpx.post(f"{p.url}/v1/chat/completions", json=body, timeout=30))
        t.start()
        deadline = time.monotonic() + 10
        while not p.capture.flights and time.monotonic() < deadline:
            time.sleep(0.005)
        assert p.capture.flights
        p.loop.call_soon_threadsafe(time.sleep, 1.5)  # the proxy's loop stalls, as on a starved machine
        time.sleep(0.05)
        t0 = time.monotonic()
        p.flush(settle=0.5)
        waited = time.monotonic() - t0
        t.join()
    assert waited >= 1.4  # the stall and then half a second of the loop's own time, not 0.5 s of wall time


def test_a_flight_leaves_the_in_flight_set_only_once_queued_for_its_row(proxy, db_path):
    """ProxyServer.flush() waits while ``capture.flights`` holds a request, then for the analyzer's queue. A flight
    taken out of that set before its record was queued let a flush() on another thread return with the row still
    `in_flight` (seen once in CI as a non-streamed answer missing from the whole-answer figure): every flight is
    queued first, then leaves the set."""
    order: list[tuple[str, str]] = []
    analyzer = proxy.capture.analyzer
    queue_finish = analyzer.finish

    class Flights(dict):
        def pop(self, key, *default):
            order.append(("left the set", key))
            return super().pop(key, *default)

    def finish(flight):
        order.append(("queued", flight.record.id))
        queue_finish(flight)

    analyzer.finish = finish
    proxy.capture.flights = Flights(proxy.capture.flights)
    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}
    for stream in (False, True):
        httpx.post(f"{proxy.url}/v1/chat/completions", json={**body, "stream": stream}, timeout=10)
    httpx.get(f"{proxy.url}/", timeout=10)
    proxy.flush()
    ids = [r["id"] for r in rows(db_path)]
    assert len(ids) == 3
    for i in ids:
        steps = [what for what, key in order if key == i]
        assert steps[:2] == ["queued", "left the set"], (i, steps)
    assert all(r["state"] == "done" for r in rows(db_path))
