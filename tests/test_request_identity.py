"""Every request is named (model, stream, size) as soon as its body has arrived, whatever its
size, and even when its upstream cannot be reached; the full token count may follow later."""

from __future__ import annotations

import json
import threading
import time

import httpx
import openai
from conftest import rows

from firsttoken.addon.analyzer import PEEK_BYTES, peek_request_facts
from firsttoken.cli.live.db import DbSource
from firsttoken.cli.loopback import free_port
from firsttoken.cli.proxy.server import ProxyServer
from firsttoken.cli.simulate import SimConfig, SimServer


def test_peek_reads_both_ends_of_a_body():
    msgs = [{"role": "user", "content": "x" * (3 * PEEK_BYTES)}]
    sdk_order = json.dumps({"messages": msgs, "model": "gpt-4o-mini", "stream": True}).encode()  # openai SDK
    curl_order = json.dumps({"model": "claude-sonnet-4-5", "stream": False, "messages": msgs}).encode()
    assert peek_request_facts(sdk_order) == {"model": "gpt-4o-mini", "stream": True}
    assert peek_request_facts(curl_order) == {"model": "claude-sonnet-4-5", "stream": False}
    # a "model" inside a string value is escaped, so it is never taken for the key
    trap = json.dumps({"messages": [{"role": "user", "content": 'say "model": "fake"'}]}).encode()
    assert peek_request_facts(trap) == {}
    assert peek_request_facts(b"\x1f\x8b garbage", "gzip") == {}
    assert peek_request_facts(b"not json at all") == {}


def test_an_unreachable_upstream_still_names_the_request(db_path):
    dead = free_port()
    with ProxyServer([f"http://127.0.0.1:{dead}"], str(db_path), port=0) as p:
        c = openai.OpenAI(base_url=p.url + "/v1", api_key="sk-test-unreachable-0000", max_retries=0)
        try:
            c.chat.completions.create(model="gpt-4o-mini", stream=True,
                                      messages=[{"role": "user", "content": "hello " * 40_000}])
        except openai.APIError:
            pass
        p.flush()
        (row,) = rows(db_path)
    assert row["top_code"] == "upstream.unreachable"
    assert row["model"] == "gpt-4o-mini" and row["stream"] == 1
    assert row["request_bytes"] > 200_000 and row["prompt_tokens_est"] > 30_000


def test_a_large_streaming_request_is_named_while_it_is_in_flight(db_path):
    slow = SimConfig(ttfb_ms=30, prefill_base_ms=20, prefill_ms_per_1k_tokens=0, tpot_ms=150, output_tokens=12)
    with SimServer(slow) as sim, ProxyServer([sim.url], str(db_path), port=0) as p:
        body = {"messages": [{"role": "user", "content": "word " * 60_000}], "model": "gpt-4o-mini", "stream": True}
        done = threading.Event()

        def send():
            with httpx.Client(timeout=30) as h, h.stream("POST", p.url + "/v1/chat/completions", json=body,
                                                        headers={"authorization": "Bearer sk-test"}) as r:
                for _ in r.iter_raw():
                    pass
            done.set()

        t = threading.Thread(target=send)
        t.start()
        seen = None
        deadline = time.time() + 10
        while time.time() < deadline and not done.is_set():
            src = DbSource(str(db_path))
            try:
                src.poll()
                snap = src.snapshot()
            finally:
                src.close()
            flying = [f for f in snap.in_flight if f.ttfb_ms is not None]
            if flying:
                seen = flying[0]
                break
            time.sleep(0.05)
        t.join(30)
    assert seen is not None, "the in-flight request never showed its TTFB in `firsttoken live`"
    assert seen.model == "gpt-4o-mini" and seen.ttfb_ms > 0
