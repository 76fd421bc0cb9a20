"""Ollama's native wire through the proxy: the PyPI ``ollama`` client and the openai SDK against the loopback
Ollama of tests/ollama_upstream.py (written from Ollama's API reference and server source). Every exchange is
timed within what the upstream and the client saw, counted, split into load / prefill / decode from the final
object, and a cold load is a finding with its fix."""

from __future__ import annotations

import json
import time

import httpx
import ollama
import openai
import pytest
from conftest import findings, has, rows
from ollama_upstream import MIDSTREAM_ERROR, MIDSTREAM_TEXT, REPLY, THOUGHT, OllamaUpstream

from firsttoken.cli.proxy.server import ProxyServer


@pytest.fixture
def served(tmp_path):
    def start(**kw):
        up = OllamaUpstream(**kw).__enter__()
        db = tmp_path / "ft.db"
        proxy = ProxyServer([up.url], str(db), port=0).__enter__()
        opened.append((proxy, up))
        return up, proxy, db

    opened: list = []
    yield start
    for proxy, up in reversed(opened):
        proxy.__exit__(None, None, None)
        up.__exit__(None, None, None)


def done_rows(proxy, db, n):
    for _ in range(100):
        proxy.flush()
        rs = rows(db, "WHERE state = 'done'")
        if len(rs) >= n:
            return rs
        time.sleep(0.05)
    raise AssertionError(f"expected {n} rows, got {len(rows(db))}")


def test_streamed_chat_is_timed_counted_and_split(served):
    up, proxy, db = served(load_s=0.0)
    client = ollama.Client(host=proxy.url)
    t0 = time.perf_counter()
    first = None
    parts, final = [], None
    for ch in client.chat(model="llama3.2", messages=[{"role": "user", "content": "What is the capital of France?"}],
                          stream=True):
        if ch.message.content and first is None:
            first = time.perf_counter() - t0
        parts.append(ch.message.content or "")
        if ch.done:
            final = ch
    assert "".join(parts) == "".join(REPLY) and final is not None
    (r,) = done_rows(proxy, db, 1)
    ex = up.log[-1]
    assert r["api"] == "ollama.chat" and r["stream"] == 1 and r["status"] == 200 and r["stream_done"] == 1
    assert r["finish_reason"] == "stop"
    # TTFT: at least what the upstream took to its first line, at most what the client waited
    upstream_first = (ex.sent_at[0] - ex.received_at) * 1000
    assert upstream_first - 5 <= r["ttft_ms"] <= first * 1000 + 5, (upstream_first, r["ttft_ms"], first)
    # the engine's own report, from the final object (nanoseconds), as the client got it
    assert r["engine"] == "ollama"
    assert r["engine_prefill_ms"] == pytest.approx(final.prompt_eval_duration / 1e6, abs=0.01)
    assert r["engine_decode_ms"] == pytest.approx(final.eval_duration / 1e6, abs=0.01)
    assert r["engine_prompt_tokens"] == final.prompt_eval_count == r["usage_prompt_tokens"]
    assert r["engine_decode_tokens"] == final.eval_count
    assert r["prompt_tokens_est"] and r["prompt_tokens_est"] > 0
    assert not [f for f in findings(r) if f["severity"] == "error"]


def test_whole_generate_and_thinking(served):
    up, proxy, db = served()
    client = ollama.Client(host=proxy.url)
    out = client.generate(model="llama3.2", prompt="hello", stream=False)
    assert out.response == "".join(REPLY)
    (r,) = done_rows(proxy, db, 1)
    assert r["api"] == "ollama.generate" and r["stream"] == 0 and r["status"] == 200
    assert r["engine"] == "ollama" and r["engine_prompt_tokens"] == out.prompt_eval_count
    assert r["total_ms"] >= out.total_duration / 1e6 - 5


def test_a_cold_load_is_found_with_ollamas_fix(served):
    up, proxy, db = served(load_s=1.5)
    client = ollama.Client(host=proxy.url)
    msgs = [{"role": "user", "content": "hi"}]
    list(client.chat(model="llama3.2", messages=msgs, stream=True))  # loads the model first
    list(client.chat(model="llama3.2", messages=msgs, stream=True))  # loaded: no load this time
    cold, warm = done_rows(proxy, db, 2)
    f = has(cold, "engine.cold_load", "warn")
    assert cold["engine_load_ms"] == pytest.approx(up.load_s * 1000, rel=0.1) and "keep_alive" in f["hint"], f
    assert cold["ttfb_ms"] >= up.load_s * 1000  # the load comes before the headers
    assert "latency.network" not in [x["code"] for x in findings(cold)]
    assert "engine.cold_load" not in [x["code"] for x in findings(warm)] and not warm["engine_load_ms"]


def test_a_prompt_longer_than_num_ctx_is_cut_silently_and_found(served):
    up, proxy, db = served()
    client = ollama.Client(host=proxy.url)
    prompt = "the quick brown fox jumps over the lazy dog " * 400  # ~3,600 tokens
    out = client.chat(model="llama3.2", messages=[{"role": "user", "content": prompt}], options={"num_ctx": 1024})
    assert out.prompt_eval_count == 1024  # a 200 OK: the only tell is the count
    (r,) = done_rows(proxy, db, 1)
    assert r["status"] == 200 and r["num_ctx"] == 1024 and r["engine_prompt_tokens"] == 1024
    f = has(r, "engine.prompt_truncated", "warn", variant="num_ctx")
    assert f["params"]["sent"] == r["prompt_tokens_est"] > 3000 and "num_ctx" in f["hint"], f


def test_an_unknown_model_is_ollamas_404(served):
    up, proxy, db = served()
    client = ollama.Client(host=proxy.url)
    with pytest.raises(ollama.ResponseError) as e:
        client.chat(model="nosuch", messages=[{"role": "user", "content": "x"}])
    assert e.value.status_code == 404
    (r,) = done_rows(proxy, db, 1)
    assert r["status"] == 404 and "not found" in (r["upstream_error"] or "")
    f = has(r, "model.not_found", "error", variant="ollama")
    assert "ollama pull nosuch" in f["hint"] and "/api/tags" in f["hint"], f


def test_openai_compatible_v1_through_the_proxy(served):
    up, proxy, db = served()
    c = openai.OpenAI(base_url=proxy.url + "/v1", api_key="ollama", max_retries=0)
    text = "".join(ch.choices[0].delta.content or "" for ch in c.chat.completions.create(
        model="llama3.2", messages=[{"role": "user", "content": "hi"}], stream=True) if ch.choices)
    assert text == "".join(REPLY)
    (r,) = done_rows(proxy, db, 1)
    assert r["api"] == "openai.chat" and r["status"] == 200 and r["ttft_ms"] is not None


@pytest.mark.parametrize("stream", [True, False])
def test_v1_a_prompt_cut_to_the_default_context_is_found_with_the_servers_fix(served, stream):
    """/v1 carries no num_ctx and no final object: the tell is usage.prompt_tokens (Ollama's prompt_eval_count)
    far below what was sent; the fix is on the server or the model, since the request cannot set it."""
    up, proxy, db = served(ctx=2048)
    c = openai.OpenAI(base_url=proxy.url + "/v1", api_key="ollama", max_retries=0)
    prompt = "the quick brown fox jumps over the lazy dog " * 1000  # ~9,000 tokens
    kw = dict(model="llama3.2", messages=[{"role": "user", "content": prompt}])
    if stream:
        usage = [ch.usage for ch in c.chat.completions.create(stream=True, stream_options={"include_usage": True}, **kw)
                 if ch.usage]
        assert usage and usage[-1].prompt_tokens == 2048  # a 200 OK: the only tell is the count
    else:
        assert c.chat.completions.create(**kw).usage.prompt_tokens == 2048
    (r,) = done_rows(proxy, db, 1)
    assert r["api"] == "openai.chat" and r["status"] == 200 and r["num_ctx"] is None
    assert r["engine"] == "ollama" and r["engine_prompt_tokens"] == 2048  # recognised from system_fingerprint
    f = has(r, "engine.prompt_truncated", "warn", variant="count")
    assert f["params"]["sent"] == r["prompt_tokens_est"] > 8000 and f["params"]["evaluated"] == 2048, f
    assert "OLLAMA_CONTEXT_LENGTH" in f["hint"] and "PARAMETER num_ctx" in f["hint"], f
    assert "options" not in f["hint"], f  # a /v1 request cannot carry num_ctx: no advice to set it there


def test_v1_a_prompt_that_fits_is_no_truncation(served):
    up, proxy, db = served(ctx=2048)
    c = openai.OpenAI(base_url=proxy.url + "/v1", api_key="ollama", max_retries=0)
    prompt = "the quick brown fox jumps over the lazy dog " * 150  # ~1,350 tokens: fits
    usage = [ch.usage for ch in c.chat.completions.create(
        model="llama3.2", messages=[{"role": "user", "content": prompt}], stream=True,
        stream_options={"include_usage": True}) if ch.usage]
    (r,) = done_rows(proxy, db, 1)
    assert r["engine"] == "ollama" and r["engine_prompt_tokens"] == usage[-1].prompt_tokens > 1000
    assert "engine.prompt_truncated" not in [x["code"] for x in findings(r)]


def test_v1_old_turns_dropped_to_fit_are_found(served):
    """Ollama drops whole turns from the front until the rest fits (system messages kept): the count it reports
    is below its context, and still far below what was sent."""
    up, proxy, db = served(ctx=2048)
    c = openai.OpenAI(base_url=proxy.url + "/v1", api_key="ollama", max_retries=0)
    turn = "the quick brown fox jumps over the lazy dog " * 150  # ~1,350 tokens a turn
    msgs = [{"role": "system", "content": "You are terse."}]
    for i in range(6):
        msgs += [{"role": "user", "content": f"{i} {turn}"}, {"role": "assistant", "content": "ok"}]
    msgs.append({"role": "user", "content": "And the last?"})
    out = c.chat.completions.create(model="llama3.2", messages=msgs)
    assert 1000 < out.usage.prompt_tokens < 2048
    (r,) = done_rows(proxy, db, 1)
    f = has(r, "engine.prompt_truncated", "warn", variant="count")
    assert f["params"]["evaluated"] == out.usage.prompt_tokens and f["params"]["sent"] > 7000, f


def test_v1_a_tokenizer_that_counts_fewer_is_no_truncation(served):
    """A model whose tokenizer counts a quarter fewer tokens than firsttoken's estimate, with a context that
    holds the prompt: a different count, not a cut."""
    up, proxy, db = served(ctx=131072, token_share=0.75)
    c = openai.OpenAI(base_url=proxy.url + "/v1", api_key="ollama", max_retries=0)
    prompt = "the quick brown fox jumps over the lazy dog " * 1000
    out = c.chat.completions.create(model="llama3.2", messages=[{"role": "user", "content": prompt}])
    (r,) = done_rows(proxy, db, 1)
    assert r["engine_prompt_tokens"] == out.usage.prompt_tokens and r["prompt_tokens_est"] - out.usage.prompt_tokens > 1000
    assert "engine.prompt_truncated" not in [x["code"] for x in findings(r)]


#: how late the proxy may stamp a line it has been sent (its event loop under load)
LATE_MS = 60.0

WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "The weather in a city",
                                            "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                                           "required": ["city"]}}}


def _since(ex, i: int) -> float:
    """ms from the upstream's receipt of the request to its writing line ``i``."""
    return (ex.sent_at[i] - ex.received_at) * 1000


def test_thinking_is_the_first_token_and_the_content_the_ttft(served):
    up, proxy, db = served()
    client = ollama.Client(host=proxy.url)
    t0 = time.perf_counter()
    first_thought = first_text = None
    thinking, content = [], []
    for ch in client.chat(model="llama3.2", messages=[{"role": "user", "content": "Where is Paris?"}], think=True,
                          stream=True):
        now = time.perf_counter() - t0
        if ch.message.thinking:
            first_thought = now if first_thought is None else first_thought
            thinking.append(ch.message.thinking)
        if ch.message.content:
            first_text = now if first_text is None else first_text
            content.append(ch.message.content)
    assert "".join(thinking) == "".join(THOUGHT) and "".join(content) == "".join(REPLY)
    (r,) = done_rows(proxy, db, 1)
    ex = up.log[-1]
    assert ex.body["think"] is True
    # the first thinking line starts first_token_ms, the first content line (after len(THOUGHT) of them) the TTFT
    assert _since(ex, 0) - 5 <= r["first_token_ms"] <= first_thought * 1000 + 5, (r["first_token_ms"], first_thought)
    assert _since(ex, len(THOUGHT)) - 5 <= r["ttft_ms"] <= first_text * 1000 + 5, (r["ttft_ms"], first_text)
    assert r["ttft_ms"] - r["first_token_ms"] >= (ex.sent_at[len(THOUGHT)] - ex.sent_at[0]) * 1000 - 10
    assert r["reasoning_chars"] == len("".join(THOUGHT)) and r["output_chars"] == len("".join(REPLY))
    assert r["events"] == len(THOUGHT) + len(REPLY) and r["stream_done"] == 1 and r["finish_reason"] == "stop"
    assert not [f for f in findings(r) if f["severity"] == "error"]


def test_a_tool_call_is_visible_output_with_its_arguments_an_object(served):
    up, proxy, db = served()
    client = ollama.Client(host=proxy.url)
    t0 = time.perf_counter()
    calls, first = [], None
    for ch in client.chat(model="llama3.2", messages=[{"role": "user", "content": "Weather in Paris?"}],
                          tools=[WEATHER], stream=True):
        if ch.message.tool_calls:
            first = time.perf_counter() - t0 if first is None else first
            calls += ch.message.tool_calls
    (call,) = calls
    assert call.function.name == "get_weather" and call.function.arguments == {"city": "Paris"}
    (r,) = done_rows(proxy, db, 1)
    ex = up.log[-1]
    line = json.loads(bytes(ex.wire).split(b"\n")[0])
    sent = line["message"]["tool_calls"][0]["function"]
    assert type(sent["arguments"]) is dict  # Ollama's arguments are a JSON object, not a string
    # the call is the answer: it stops the TTFT clock, its name and its arguments are the visible output
    assert _since(ex, 0) - 5 <= r["ttft_ms"] <= first * 1000 + 5, (r["ttft_ms"], first)
    assert r["first_token_ms"] == r["ttft_ms"] and r["reasoning_chars"] == 0
    assert r["output_chars"] == len(sent["name"]) + len(json.dumps(sent["arguments"], separators=(",", ":")))
    assert r["events"] == 1 and r["stream_done"] == 1
    assert r["tools_tokens"] and r["tools_tokens"] > 0  # the tool's schema is part of the prompt sent
    assert not [f for f in findings(r) if f["severity"] == "error"]


def test_an_error_line_inside_a_200_stream_is_an_error_and_reaches_the_client_unchanged(served):
    up, proxy, db = served()
    body = json.dumps({"model": MIDSTREAM_ERROR, "messages": [{"role": "user", "content": "hi"}]}).encode()
    with httpx.Client(timeout=10) as http, http.stream("POST", proxy.url + "/api/chat", content=body,
                                                       headers={"content-type": "application/json"}) as resp:
        got = b"".join(resp.iter_bytes())
        assert resp.status_code == 200 and resp.headers["content-type"] == "application/x-ndjson"
    ex = up.log[-1]
    assert ex.done.wait(5)
    assert got == bytes(ex.wire)  # every line forwarded as the upstream wrote it, the error line too
    lines = [json.loads(x) for x in got.splitlines()]
    assert lines[-1] == {"error": MIDSTREAM_TEXT} and len(lines) == 3
    (r,) = done_rows(proxy, db, 1)
    assert r["status"] == 200 and r["upstream_error"] == MIDSTREAM_TEXT
    assert r["stream_done"] == 0 and r["events"] == 2
    assert r["output_chars"] == sum(len(x["message"]["content"]) for x in lines[:-1])
    f = has(r, "stream.error_event", "error")
    assert f["message"].endswith(f"\u201c{MIDSTREAM_TEXT}\u201d.") and f["params"]["events"] == 2, f  # no "(-)"
    # the ollama client fails the same call with Ollama's text
    with pytest.raises(ollama.ResponseError) as e:
        list(ollama.Client(host=proxy.url).chat(model=MIDSTREAM_ERROR, messages=[{"role": "user", "content": "hi"}],
                                                stream=True))
    assert MIDSTREAM_TEXT in str(e.value)


def test_generate_streams_its_thinking_before_its_response(served):
    up, proxy, db = served()
    parts = list(ollama.Client(host=proxy.url).generate(model="llama3.2", prompt="Where is Paris?", think=True,
                                                         stream=True))
    assert "".join(p.thinking or "" for p in parts) == "".join(THOUGHT)
    assert "".join(p.response or "" for p in parts) == "".join(REPLY)
    (r,) = done_rows(proxy, db, 1)
    ex = up.log[-1]
    assert r["api"] == "ollama.generate" and r["stream"] == 1 and r["stream_done"] == 1
    assert r["reasoning_chars"] == len("".join(THOUGHT)) and r["output_chars"] == len("".join(REPLY))
    # first_token_ms at the first thought, the TTFT at the first response line, len(THOUGHT) lines later
    assert r["first_token_ms"] >= _since(ex, 0) - 5 and r["ttft_ms"] >= _since(ex, len(THOUGHT)) - 5
    assert r["ttft_ms"] - r["first_token_ms"] >= (ex.sent_at[len(THOUGHT)] - ex.sent_at[0]) * 1000 - 10
    assert r["ttft_ms"] - r["first_token_ms"] <= (ex.sent_at[len(THOUGHT)] - ex.sent_at[0]) * 1000 + LATE_MS
