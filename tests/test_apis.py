"""API detection and the four interpreters: exact deltas and facts for realistic streams and
bodies, plus robustness (they never raise, whatever they are fed)."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path
from typing import Any

import pytest

from firsttoken.addon.apis import (
    AnthropicMessages,
    OpenAIChat,
    OpenAICompletions,
    OpenAIResponses,
    base,
    detect_api,
    make_interpreter,
)
from firsttoken.addon.apis.base import BODY_SAMPLE_CHARS, REASONING, REFUSAL, TEXT, TOOL, ApiFacts
from firsttoken.addon.sse import SSEDecoder, SSEEvent

STREAMS = Path(__file__).parent / "fixtures" / "streams"
APIS = ["openai.chat", "openai.completions", "openai.responses", "anthropic.messages"]


@pytest.fixture(autouse=True)
def strict(monkeypatch: pytest.MonkeyPatch) -> None:
    """Internal errors raise in tests instead of being counted as malformed input."""
    monkeypatch.setattr(base, "STRICT", True)


def ev(data: Any, event: str = "message") -> SSEEvent:
    return SSEEvent(event, data if isinstance(data, str) else json.dumps(data))


def feed(interp: Any, *payloads: Any, event: str = "message") -> list[list[tuple[str, str]]]:
    """Feed payloads (dicts are JSON-encoded) and return the deltas per event."""
    return [[(d.kind, d.text) for d in interp.on_event(ev(p, event))] for p in payloads]


def flat(groups: list[list[tuple[str, str]]]) -> list[tuple[str, str]]:
    return [d for g in groups for d in g]


def run_fixture(name: str, api: str, parts: list[bytes] | None = None) -> tuple[list[list[tuple[str, str]]], ApiFacts, int]:
    raw = (STREAMS / name).read_bytes()
    dec, interp = SSEDecoder(), make_interpreter(api)
    assert interp is not None
    groups = []
    events = [e for p in (parts or [raw]) for e in dec.feed(p)] + dec.close()
    for e in events:
        out = interp.on_event(e)
        if out:
            groups.append([(d.kind, d.text) for d in out])
    return groups, interp.facts, dec.comments


def body(interp: Any, obj: Any) -> list[tuple[str, str]]:
    raw = obj if isinstance(obj, bytes) else json.dumps(obj).encode()
    return [(d.kind, d.text) for d in interp.on_body(raw)]


# -- detect_api / make_interpreter ------------------------------------------------------


@pytest.mark.parametrize(
    "method,path,api",
    [
        ("POST", "/v1/chat/completions", "openai.chat"),
        ("POST", "/api/v1/chat/completions", "openai.chat"),
        ("POST", "/openai/deployments/gpt-4o/chat/completions?api-version=2024-10-21", "openai.chat"),
        ("POST", "/v1/chat/completions/", "openai.chat"),
        ("POST", "/chat/completions", "openai.chat"),
        ("post", "/V1/Chat/Completions", "openai.chat"),
        ("POST", "http://127.0.0.1:8000/v1/chat/completions", "openai.chat"),
        ("POST", "/v1/completions", "openai.completions"),
        ("POST", "/openai/deployments/x/completions?api-version=1", "openai.completions"),
        ("POST", "/v1/responses", "openai.responses"),
        ("POST", "/openai/v1/responses?x=1#frag", "openai.responses"),
        ("POST", "/v1/messages", "anthropic.messages"),
        ("POST", "/v1/messages?beta=true", "anthropic.messages"),
        ("POST", "/anthropic/v1/messages", "anthropic.messages"),
        ("POST", "/v1/messages/count_tokens", "other"),
        ("POST", "/v1/messages/batches", "other"),
        ("POST", "/v1/threads/thread_abc/messages", "other"),
        ("POST", "/v1/responses/resp_123/cancel", "other"),
        ("GET", "/v1/responses/resp_123", "other"),
        ("GET", "/v1/responses", "other"),
        ("GET", "/v1/chat/completions", "other"),
        ("POST", "/v1/embeddings", "other"),
        ("POST", "/v1/models", "other"),
        ("POST", "", "other"),
        ("POST", "/", "other"),
        ("POST", "/v1/chat/completions-extra", "other"),
    ],
)
def test_detect_api(method: str, path: str, api: str) -> None:
    assert detect_api(method, path) == api


def test_detect_api_odd_inputs() -> None:
    assert detect_api(None, "/v1/messages") == "other"  # type: ignore[arg-type]
    assert detect_api("POST", None) == "other"  # type: ignore[arg-type]


def test_make_interpreter() -> None:
    kinds = {"openai.chat": OpenAIChat, "openai.completions": OpenAICompletions,
             "openai.responses": OpenAIResponses, "anthropic.messages": AnthropicMessages}
    for api, cls in kinds.items():
        i = make_interpreter(api)
        assert type(i) is cls and i.api == api and i.facts == ApiFacts()
        assert make_interpreter(api) is not i  # fresh each time
    assert make_interpreter("other") is None
    assert make_interpreter("nope") is None


# -- fixture streams: exact deltas (grouped per SSE event) and facts -------------------------

EXPECTED: dict[str, tuple[str, list[list[tuple[str, str]]], ApiFacts]] = {
    "openai_chat_text.sse": (
        "openai.chat",
        [[(TEXT, "Hello")], [(TEXT, "!")], [(TEXT, " 👋")], [(TEXT, " Comment ça")], [(TEXT, " va?")]],
        ApiFacts(model="gpt-4o-mini-2024-07-18", response_id="chatcmpl-BjP8Xq2yQeA0fZ7mVn1tLk3sR9wUc",
                 usage_prompt_tokens=19, usage_completion_tokens=9, usage_cached_tokens=0,
                 usage_reasoning_tokens=0, finish_reason="stop", done=True),
    ),
    "openai_chat_tools.sse": (
        "openai.chat",
        [[(TOOL, "get_weather")], [(TOOL, '{"lo')], [(TOOL, 'cation": "Par')], [(TOOL, 'is, FR"}')],
         [(TOOL, "get_time")], [(TOOL, '{"tz": "Europe/Paris"}')]],
        ApiFacts(model="gpt-4o-2024-08-06", response_id="chatcmpl-BjPA1nQ0c7pVfMcW2eZrYb8sTgH4K",
                 finish_reason="tool_calls", done=True),
    ),
    "deepseek_reasoner_crlf.sse": (
        "openai.chat",
        [[(REASONING, "Okay")], [(REASONING, ", the user says hi.")], [(TEXT, "Hi")], [(TEXT, " there!")]],
        ApiFacts(model="deepseek-reasoner", response_id="7c1f3e2a-9b4d-4c8e-a1f0-5d6b2e9c3a71",
                 usage_prompt_tokens=74, usage_completion_tokens=42, usage_cached_tokens=64,
                 usage_reasoning_tokens=35, finish_reason="stop", done=True),
    ),
    "openrouter_reasoning.sse": (
        "openai.chat",
        [[(REASONING, "**Planning**")], [(REASONING, " the answer")], [(REASONING, " (summary)")], [(TEXT, "Paris.")]],
        ApiFacts(model="google/gemini-2.5-flash", response_id="gen-1750203000-Xq8RbT2nLmP4vZ7cW1aF",
                 usage_prompt_tokens=11, usage_completion_tokens=58, usage_cached_tokens=0,
                 usage_reasoning_tokens=55, finish_reason="stop", done=True),
    ),
    "openai_chat_midstream_error.sse": (
        "openai.chat",
        [[(TEXT, "The answer")], [(TEXT, " is")]],
        ApiFacts(model="gpt-4o-mini-2024-07-18", response_id="chatcmpl-BjPC7yH2kLq9TnVwX3zR5aD0mF6bE",
                 error_message="The server had an error while processing your request. Sorry about that!",
                 error_type="server_error"),
    ),
    "gateway_error_line.sse": (
        "openai.chat",
        [[(TEXT, "Once upon")], [(TEXT, " a time")]],
        ApiFacts(model="llama-3.3-70b-instruct", response_id="chatcmpl-9f2c1b7e5d3a4c8b",
                 error_message="upstream idle timeout after 60s", error_type="gateway_timeout"),
    ),
    "openai_completions.sse": (
        "openai.completions",
        [[(TEXT, "\n\n")], [(TEXT, "This")], [(TEXT, " is")], [(TEXT, " a")], [(TEXT, " test")]],
        ApiFacts(model="gpt-3.5-turbo-instruct", response_id="cmpl-BjPE2tR8yQ1wN5vL0kX7mZ3aH9cJ",
                 usage_prompt_tokens=5, usage_completion_tokens=5, finish_reason="length", done=True),
    ),
    "openai_responses_text.sse": (
        "openai.responses",
        [[(TEXT, "Hi")], [(TEXT, " there")], [(TEXT, "! Wie")], [(TEXT, " geht’s?")]],
        ApiFacts(model="gpt-4.1-2025-04-14", response_id="resp_68b1f0c2d4e88190a3b5c7d9e1f20304",
                 usage_prompt_tokens=12, usage_completion_tokens=9, usage_cached_tokens=0,
                 usage_cache_creation_tokens=0, usage_reasoning_tokens=0, done=True),
    ),
    "openai_responses_reasoning_tool.sse": (
        "openai.responses",
        [[(REASONING, "**Checking")], [(REASONING, " the weather**\n\nThe user wants")], [(REASONING, " Paris.")],
         [(TOOL, "get_weather")], [(TOOL, '{"')], [(TOOL, "city")], [(TOOL, '":"')], [(TOOL, "Paris")], [(TOOL, '"}')]],
        ApiFacts(model="o4-mini-2025-04-16", response_id="resp_0a1b2c3d4e5f60718293a4b5c6d7e8f9",
                 usage_prompt_tokens=1180, usage_completion_tokens=85, usage_cached_tokens=1024,
                 usage_cache_creation_tokens=0, usage_reasoning_tokens=64, done=True),
    ),
    "openai_responses_incomplete.sse": (
        "openai.responses",
        [[(TEXT, "Once")], [(TEXT, " upon")]],
        ApiFacts(model="gpt-4.1-2025-04-14", response_id="resp_68b1f3bb02d58190c2e3f4a5b6c7d8e9",
                 usage_prompt_tokens=20, usage_completion_tokens=2, usage_cached_tokens=0,
                 usage_cache_creation_tokens=0, usage_reasoning_tokens=0,
                 finish_reason="max_output_tokens", done=True),
    ),
    "openai_responses_failed.sse": (
        "openai.responses",
        [],
        ApiFacts(model="gpt-4.1-2025-04-14", response_id="resp_68b1f2aa01c48190b1d2e3f4a5b6c7d8", done=True,
                 error_message="An error occurred while processing your request. You can retry your request, "
                 "or contact us through our help center at help.openai.com if the error persists.",
                 error_type="server_error"),
    ),
    "openai_responses_error.sse": (
        "openai.responses",
        [],
        ApiFacts(model="gpt-4.1-2025-04-14", response_id="resp_68b1f4cc03e68190d3f4a5b6c7d8e9f0",
                 error_message="Rate limit reached for gpt-4.1 in organization org-abc on tokens per min (TPM): "
                 "Limit 30000, Used 29000, Requested 1500.",
                 error_type="rate_limit_exceeded"),
    ),
    "anthropic_text.sse": (
        "anthropic.messages",
        [[(TEXT, "Hello")], [(TEXT, "! Schön, dich")], [(TEXT, " zu sehen 🙂")]],
        ApiFacts(model="claude-sonnet-4-20250514", response_id="msg_01XFDUDYJgAACzvnptvVoYEL",
                 usage_prompt_tokens=25 + 2048, usage_completion_tokens=15, usage_cached_tokens=2048,
                 usage_cache_creation_tokens=0, finish_reason="end_turn", done=True),
    ),
    "anthropic_thinking_tool.sse": (
        "anthropic.messages",
        [[(REASONING, "The user wants the weather")], [(REASONING, " in San Francisco.")], [(TEXT, "Let me check.")],
         [(TOOL, "get_weather")], [(TOOL, '{"location": "San Fra')], [(TOOL, 'ncisco, CA"}')]],
        ApiFacts(model="claude-opus-4-1-20250805", response_id="msg_01Aq9bX3mT7yL0pR4sW8nD1f",
                 usage_prompt_tokens=472 + 1500, usage_completion_tokens=89, usage_cached_tokens=0,
                 usage_cache_creation_tokens=1500, finish_reason="tool_use", done=True),
    ),
    "anthropic_overloaded.sse": (
        "anthropic.messages",
        [[(TEXT, "Sure")]],
        ApiFacts(model="claude-3-5-haiku-20241022", response_id="msg_01Hx7Yq2Zk5Wv8Ut3Sr6Qp9N",
                 usage_prompt_tokens=12, usage_completion_tokens=1, usage_cached_tokens=0,
                 usage_cache_creation_tokens=0, error_message="Overloaded", error_type="overloaded_error"),
    ),
}

COMMENTS = {"deepseek_reasoner_crlf.sse": 2, "openrouter_reasoning.sse": 2, "gateway_error_line.sse": 2}


def test_every_fixture_has_expectations() -> None:
    assert sorted(EXPECTED) == sorted(p.name for p in STREAMS.glob("*.sse"))


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture_stream(name: str) -> None:
    api, deltas, facts = EXPECTED[name]
    got, got_facts, comments = run_fixture(name, api)
    assert got == deltas
    assert got_facts == facts
    assert comments == COMMENTS.get(name, 0)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture_stream_any_chunking(name: str) -> None:
    api, deltas, facts = EXPECTED[name]
    raw = (STREAMS / name).read_bytes()
    rng = random.Random(name)
    splits = [[raw[i : i + 1] for i in range(len(raw))]]
    for _ in range(25):
        cuts = sorted(rng.sample(range(1, len(raw)), rng.randint(1, 40)))
        splits.append([raw[a:b] for a, b in zip([0, *cuts], [*cuts, len(raw)])])
    for parts in splits:
        got, got_facts, _ = run_fixture(name, api, parts)
        assert flat(got) == flat(deltas) and got_facts == facts


# (the SDK's Completion type rejects the null finish_reason that real completion streams carry)
@pytest.mark.parametrize("name", sorted(n for n, v in EXPECTED.items() if v[0] != "openai.completions"))
def test_fixture_payloads_are_sdk_shaped(name: str) -> None:
    """The fixtures' JSON validates against the official SDKs' wire types."""
    pydantic = pytest.importorskip("pydantic")
    api = EXPECTED[name][0]
    pytest.importorskip(api.split(".")[0])
    if api == "openai.chat":
        from openai.types.chat import ChatCompletionChunk as typ
    elif api == "openai.responses":
        from openai.types.responses import ResponseStreamEvent as typ
    else:
        from anthropic.types import RawMessageStreamEvent as typ
    adapter = pydantic.TypeAdapter(typ)
    dec = SSEDecoder()
    checked = 0
    for e in dec.feed((STREAMS / name).read_bytes()) + dec.close():
        if e.data == "[DONE]" or e.event == "error":
            continue
        obj = json.loads(e.data)
        if "error" in obj or obj.get("type") == "ping":
            continue
        adapter.validate_python(obj)
        checked += 1
    assert checked


# -- openai.chat ------------------------------------------------------------------------


def chat_chunk(delta: dict | None = None, finish: str | None = None, **extra: Any) -> dict:
    c = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m",
         "choices": [{"index": 0, "delta": delta or {}, "finish_reason": finish}]}
    c.update(extra)
    return c


def test_chat_non_tokens() -> None:
    i = OpenAIChat()
    assert feed(i, chat_chunk({"role": "assistant", "content": ""}), chat_chunk({"content": None}),
                chat_chunk({}), chat_chunk({"content": "", "reasoning_content": "", "refusal": ""}),
                chat_chunk({"tool_calls": [{"index": 0, "id": "call_1", "type": "function"}]}),
                chat_chunk({"tool_calls": [{"index": 0, "function": {"arguments": ""}}]}),
                {"choices": [{"delta": None}, None, 3, {"delta": {"content": 7}}]}) == [[]] * 7
    assert i.facts.no_choices is None and i.facts.malformed == 0


def test_chat_reasoning_variants_no_double_count() -> None:
    i = OpenAIChat()
    groups = feed(
        i,
        chat_chunk({"reasoning_content": "a", "reasoning": "a"}),  # vLLM sent both names
        chat_chunk({"reasoning": "b", "reasoning_details": [{"type": "reasoning.text", "text": "b"}]}),
        chat_chunk({"reasoning_details": [{"type": "reasoning.text", "text": "c"}, {"type": "reasoning.summary", "summary": "d"},
                                          {"type": "reasoning.encrypted", "data": "xx"}, "junk", {"text": 5}]}),
        chat_chunk({"reasoning": None, "content": "e"}),
    )
    assert groups == [[(REASONING, "a")], [(REASONING, "b")], [(REASONING, "c"), (REASONING, "d")], [(TEXT, "e")]]


def test_chat_content_parts() -> None:
    i = OpenAIChat()
    groups = feed(i, chat_chunk({"content": [{"type": "thinking", "thinking": [{"type": "text", "text": "hmm"}]},
                                             {"type": "text", "text": "Hi"}, {"type": "image_url", "image_url": {}}]}))
    assert groups == [[(REASONING, "hmm"), (TEXT, "Hi")]]


def test_chat_refusal() -> None:
    i = OpenAIChat()
    assert feed(i, chat_chunk({"refusal": "I can't"}), chat_chunk({"refusal": " help."}, "stop")) == [
        [(REFUSAL, "I can't")], [(REFUSAL, " help.")]]
    assert i.facts.finish_reason == "stop"


def test_chat_tool_name_counted_once_even_if_repeated() -> None:
    i = OpenAIChat()
    groups = feed(
        i,
        chat_chunk({"tool_calls": [{"index": 0, "id": "c1", "function": {"name": "f", "arguments": ""}}]}),
        chat_chunk({"tool_calls": [{"index": 0, "function": {"name": "f", "arguments": "{}"}}]}),  # name echoed
        chat_chunk({"tool_calls": [{"index": 1, "id": "c2", "function": {"name": "g", "arguments": '{"a":1}'}}]}),  # whole call
    )
    assert groups == [[(TOOL, "f")], [(TOOL, "{}")], [(TOOL, "g"), (TOOL, '{"a":1}')]]


def test_chat_tool_variants() -> None:
    i = OpenAIChat()
    groups = feed(
        i,
        chat_chunk({"function_call": {"name": "legacy", "arguments": ""}}),
        chat_chunk({"function_call": {"arguments": '{"x"'}}),
        chat_chunk({"tool_calls": [{"index": 0, "type": "custom", "custom": {"name": "sql", "input": "SELECT 1"}}]}),
        chat_chunk({"tool_calls": [{"id": "g1", "function": {"name": "h", "arguments": {"q": "x"}}}]}),  # parsed args, no index
    )
    assert groups == [[(TOOL, "legacy")], [(TOOL, '{"x"')], [(TOOL, "sql"), (TOOL, "SELECT 1")],
                      [(TOOL, "h"), (TOOL, '{"q":"x"}')]]


def test_chat_multiple_choices() -> None:
    i = OpenAIChat()
    c = {"id": "x", "choices": [{"index": 0, "delta": {"content": "A"}, "finish_reason": None},
                                {"index": 1, "delta": {"content": "B"}, "finish_reason": "length"}]}
    assert feed(i, c) == [[(TEXT, "A"), (TEXT, "B")]]
    assert i.facts.finish_reason == "length"


def test_chat_usage_variants() -> None:
    i = OpenAIChat()
    feed(i, chat_chunk({"content": "x"}, usage=None),
         chat_chunk({}, "stop", usage={"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12,
                                       "cache_read_input_tokens": 4, "cache_creation_input_tokens": 6}))
    f = i.facts
    assert (f.usage_prompt_tokens, f.usage_completion_tokens, f.usage_cached_tokens, f.usage_cache_creation_tokens) == (10, 2, 4, 6)
    # a later usage chunk overwrites (totals), absent/invalid values keep what was there
    feed(i, {"id": "x", "choices": [], "usage": {"prompt_tokens": 11, "completion_tokens": "3", "prompt_tokens_details": None,
                                                 "completion_tokens_details": {"reasoning_tokens": 1.0}}})
    assert (f.usage_prompt_tokens, f.usage_completion_tokens, f.usage_cached_tokens, f.usage_reasoning_tokens) == (11, 2, 4, 1)
    j = OpenAIChat()
    feed(j, {"choices": [], "usage": {"prompt_tokens": True, "completion_tokens": float("nan"),
                                      "prompt_tokens_details": {"cached_tokens": 5, "cache_write_tokens": 7}}})
    assert (j.facts.usage_prompt_tokens, j.facts.usage_completion_tokens) == (None, None)
    assert (j.facts.usage_cached_tokens, j.facts.usage_cache_creation_tokens) == (5, 7)
    assert j.facts.no_choices is None


def test_chat_no_choices() -> None:
    i = OpenAIChat()
    odd = {"object": "chat.completion.chunk", "note": "x" * 400}
    assert feed(i, odd, {"choices": None, "other": 1}) == [[], []]
    assert i.facts.no_choices == json.dumps(odd)[:300]
    # usage-only, error and moderation chunks are not "no choices"; neither are named events
    for payload in ({"usage": {"prompt_tokens": 1}}, {"error": {"message": "x"}}, {"moderation": {}}):
        j = OpenAIChat()
        feed(j, payload)
        assert j.facts.no_choices is None
    k = OpenAIChat()
    feed(k, {"status": "queued"}, event="ping")
    assert k.facts.no_choices is None


def test_chat_done_and_ignored_payloads() -> None:
    i = OpenAIChat()
    assert feed(i, "", "   ", "[DONE]  ") == [[], [], []]
    assert i.facts.done and i.facts.malformed == 0


def test_chat_malformed() -> None:
    i = OpenAIChat()
    assert feed(i, "{not json", "[1, 2]", "42", '"text"', "null", "x" * 500, "[DONE") == [[]] * 7
    assert i.facts.malformed == 7
    assert i.facts.malformed_sample == "{not json"
    j = OpenAIChat()
    feed(j, "y" * 500)
    assert j.facts.malformed_sample == "y" * 200


def test_chat_hostile_json() -> None:
    i = OpenAIChat()
    assert feed(i, "[" * 100000, "1" * 5000, '{"a": NaN, "choices": [{"delta": {"content": Infinity}}]}') == [[], [], []]
    assert i.facts.malformed == 2
    deep: Any = "x"
    for _ in range(900):
        deep = [deep]
    feed(i, {"error": {"message": deep}})
    assert i.facts.error_message  # something printable, no crash


def test_chat_errors() -> None:
    i = OpenAIChat()
    feed(i, chat_chunk({"content": "a"}),
         {"error": {"message": "Rate limit", "type": "tokens", "code": "rate_limit_exceeded", "param": None}},
         {"error": {"message": "second", "type": "x"}})
    assert (i.facts.error_message, i.facts.error_type) == ("Rate limit", "rate_limit_exceeded")  # code wins; first wins
    cases = [
        (ev('{"error":{"message":"boom","type":"server_error","code":null}}', "error"), ("boom", "server_error")),
        (ev('{"message":"upstream idle timeout","type":"gateway_timeout"}', "error"), ("upstream idle timeout", "gateway_timeout")),
        (ev("upstream connect error or disconnect/reset before headers", "error"),
         ("upstream connect error or disconnect/reset before headers", None)),
        (ev('"quota exceeded"', "error"), ("quota exceeded", None)),
        (ev("", "error"), ("error event", None)),
        (ev('{"foo": 1}', "error"), ('{"foo": 1}', None)),
        (ev({"error": "Internal Server Error", "code": 500}), ("Internal Server Error", "500")),
        (ev({"error": {"type": "overloaded_error"}}), ('{"type":"overloaded_error"}', "overloaded_error")),
        (ev({"object": "error", "message": "bad", "type": "BadRequestError", "param": None, "code": 400}), ("bad", "BadRequestError")),
        (ev({"error": ["a", 1]}), ('["a",1]', None)),
    ]
    for e, expected in cases:
        j = OpenAIChat()
        assert j.on_event(e) == []
        assert (j.facts.error_message, j.facts.error_type) == expected, e
        assert j.facts.malformed == 0


def test_chat_ids_first_non_empty() -> None:
    i = OpenAIChat()
    feed(i, {"id": "", "model": "", "choices": []}, {"id": "a", "model": "m1", "choices": []}, {"id": "b", "model": "m2", "choices": []})
    assert (i.facts.response_id, i.facts.model) == ("a", "m1")


# -- openai.completions -------------------------------------------------------------------


def test_completions_stream_basics() -> None:
    i = OpenAICompletions()
    assert feed(i, {"id": "cmpl-1", "model": "m", "choices": [{"text": "", "index": 0}, {"text": "a", "index": 1}]},
                {"choices": [{"text": None, "finish_reason": "stop"}]}, {"model": "m"}, "[DONE]") == [
        [(TEXT, "a")], [], [], []]
    assert i.facts.done and i.facts.finish_reason == "stop" and i.facts.no_choices == '{"model": "m"}'


# -- openai.responses ----------------------------------------------------------------------


def test_responses_delta_kinds() -> None:
    i = OpenAIResponses()
    kinds = {"response.output_text.delta": TEXT, "response.refusal.delta": REFUSAL,
             "response.reasoning_summary_text.delta": REASONING, "response.reasoning_text.delta": REASONING,
             "response.function_call_arguments.delta": TOOL, "response.custom_tool_call_input.delta": TOOL,
             "response.mcp_call_arguments.delta": TOOL, "response.code_interpreter_call_code.delta": TOOL}
    for t, kind in kinds.items():
        assert feed(i, {"type": t, "delta": "x", "item_id": "i", "output_index": 0, "sequence_number": 1}) == [[(kind, "x")]]
        assert feed(i, {"type": t, "delta": ""}, {"type": t, "delta": None}, {"type": t}) == [[], [], []]


def test_responses_ignored_events() -> None:
    i = OpenAIResponses()
    for t in ("response.created", "response.in_progress", "response.queued", "keepalive", "response.output_text.done",
              "response.content_part.added", "response.output_item.done", "response.web_search_call.searching",
              "response.audio.delta", "something.new"):
        assert feed(i, {"type": t, "sequence_number": 1, "response": {"id": "resp_1", "model": "gpt-x"}}) == [[]]
    assert feed(i, {"type": "response.output_item.added", "item": {"type": "message", "content": []}}) == [[]]
    assert feed(i, "[DONE]") == [[]]
    assert i.facts == ApiFacts(model="gpt-x", response_id="resp_1")


def test_responses_type_from_sse_event_name_and_untyped_objects() -> None:
    i = OpenAIResponses()
    assert feed(i, {"delta": "hi"}, event="response.output_text.delta") == [[(TEXT, "hi")]]
    assert feed(i, {"hello": "world"}) == [[]]
    assert i.facts.no_choices == '{"hello": "world"}'


def test_responses_error_events() -> None:
    nested = {"type": "error", "sequence_number": 3,
              "error": {"type": "invalid_request_error", "code": "context_length_exceeded", "message": "Too long", "param": "input"}}
    flat_ = {"type": "error", "code": None, "message": "Something went wrong", "param": None, "sequence_number": 0}
    for payload, event, expected in [(nested, "message", ("Too long", "context_length_exceeded")),
                                     (nested, "error", ("Too long", "context_length_exceeded")),
                                     (flat_, "message", ("Something went wrong", None)),
                                     (flat_, "error", ("Something went wrong", None))]:
        i = OpenAIResponses()
        assert feed(i, payload, event=event) == [[]]
        assert (i.facts.error_message, i.facts.error_type) == expected
        assert not i.facts.done


def test_responses_failed_without_error_object() -> None:
    i = OpenAIResponses()
    feed(i, {"type": "response.failed", "response": {"id": "resp_1", "status": "failed", "error": None}})
    assert i.facts.done and i.facts.error_type == "response.failed"
    j = OpenAIResponses()
    feed(j, {"type": "response.failed"})
    assert j.facts.done and j.facts.error_message


def test_responses_terminal_output_when_nothing_was_streamed() -> None:
    output = [{"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "think"}]},
              {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
               "content": [{"type": "output_text", "text": "Hello", "annotations": []}]}]
    i = OpenAIResponses()
    assert feed(i, {"type": "response.created", "response": {"id": "resp_1", "output": []}},
                {"type": "response.completed", "response": {"id": "resp_1", "output": output, "usage": {"input_tokens": 3, "output_tokens": 2}}}) == [
        [], [(REASONING, "think"), (TEXT, "Hello")]]
    # a real stream: the final output is not counted again
    j = OpenAIResponses()
    assert feed(j, {"type": "response.output_text.delta", "delta": "Hello"},
                {"type": "response.completed", "response": {"output": output}}) == [[(TEXT, "Hello")], []]


# -- anthropic.messages ----------------------------------------------------------------------


def msg_start(usage: dict, content: list | None = None) -> dict:
    return {"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-x",
                                                 "content": content or [], "stop_reason": None, "usage": usage}}


def test_anthropic_message_delta_usage_is_cumulative() -> None:
    i = AnthropicMessages()
    feed(i, msg_start({"input_tokens": 100, "cache_read_input_tokens": 50, "cache_creation_input_tokens": 10, "output_tokens": 1}),
         {"type": "message_delta", "delta": {"stop_reason": None}, "usage": {"output_tokens": 10}},
         {"type": "message_delta", "delta": {"stop_reason": "max_tokens", "stop_sequence": None},
          "usage": {"output_tokens": 25, "output_tokens_details": {"thinking_tokens": 7}}})
    f = i.facts
    assert (f.usage_prompt_tokens, f.usage_cached_tokens, f.usage_cache_creation_tokens) == (160, 50, 10)
    assert (f.usage_completion_tokens, f.usage_reasoning_tokens, f.finish_reason) == (25, 7, "max_tokens")


def test_anthropic_input_counts_only_in_message_delta() -> None:
    i = AnthropicMessages()
    feed(i, msg_start({"input_tokens": 0, "output_tokens": 0}),
         {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"input_tokens": 120, "output_tokens": 5}})
    assert (i.facts.usage_prompt_tokens, i.facts.usage_completion_tokens, i.facts.usage_cached_tokens) == (120, 5, None)
    j = AnthropicMessages()
    feed(j, msg_start({"input_tokens": 30, "output_tokens": 1}),
         {"type": "message_delta", "delta": {}, "usage": {"cache_read_input_tokens": 900, "output_tokens": 4}})
    assert (j.facts.usage_prompt_tokens, j.facts.usage_cached_tokens) == (930, 900)


def test_anthropic_non_tokens_and_blocks() -> None:
    i = AnthropicMessages()
    groups = feed(
        i,
        '{"type": "ping"}',
        {"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "EqQB"}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "citations_delta", "citation": {"type": "char_location", "cited_text": "x"}}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": ""}},
        {"type": "content_block_start", "index": 1, "content_block": {"type": "redacted_thinking", "data": "abc"}},
        {"type": "content_block_start", "index": 2, "content_block": {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}}},
        {"type": "content_block_start", "index": 3, "content_block": {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": []}},
        {"type": "content_block_start", "index": 4, "content_block": {"type": "text", "text": "pre"}},
        {"type": "content_block_stop", "index": 4},
        {"type": "unknown_future_event", "x": 1},
    )
    assert groups == [[], [], [], [], [], [(TOOL, "web_search")], [], [(TEXT, "pre")], [], []]
    assert i.facts == ApiFacts()


def test_anthropic_errors() -> None:
    body_ = {"type": "error", "error": {"details": None, "type": "overloaded_error", "message": "Overloaded"},
             "request_id": "req_011CSHoEeqs5C35K2UUqR7Fy"}
    for e in (ev(body_), ev(body_, "error"), ev(json.dumps(body_), "message")):
        i = AnthropicMessages()
        assert i.on_event(e) == []
        assert (i.facts.error_message, i.facts.error_type) == ("Overloaded", "overloaded_error")
    j = AnthropicMessages()
    j.on_event(ev("Internal server error", "error"))
    assert j.facts.error_message == "Internal server error"


def test_anthropic_untyped_and_whole_message_events() -> None:
    i = AnthropicMessages()
    assert feed(i, {"choices": []}) == [[]]
    assert i.facts.no_choices == '{"choices": []}'
    j = AnthropicMessages()
    whole = {"type": "message", "id": "msg_2", "model": "claude-x", "stop_reason": "end_turn",
             "content": [{"type": "text", "text": "all at once"}], "usage": {"input_tokens": 3, "output_tokens": 4}}
    assert feed(j, whole) == [[(TEXT, "all at once")]]
    assert (j.facts.finish_reason, j.facts.usage_prompt_tokens) == ("end_turn", 3)


# -- bodies --------------------------------------------------------------------------------------

CHAT_BODY = {
    "id": "chatcmpl-BjPZ0aB1cD2eF3gH4iJ5kL6mN7oP8", "object": "chat.completion", "created": 1750205000,
    "model": "gpt-4o-2024-08-06", "system_fingerprint": "fp_07871e2ad8", "service_tier": "default",
    "choices": [{"index": 0, "logprobs": None, "finish_reason": "tool_calls",
                 "message": {"role": "assistant", "content": "Checking.", "refusal": None, "annotations": [],
                             "reasoning_content": "why",
                             "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}},
                                            {"id": "call_2", "type": "custom", "custom": {"name": "sql", "input": "SELECT 1"}}]}}],
    "usage": {"prompt_tokens": 82, "completion_tokens": 17, "total_tokens": 99,
              "prompt_tokens_details": {"cached_tokens": 64, "audio_tokens": 0},
              "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0, "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0}},
}


def test_chat_body() -> None:
    i = OpenAIChat()
    assert body(i, CHAT_BODY) == [(REASONING, "why"), (TEXT, "Checking."), (TOOL, "get_weather"), (TOOL, '{"city":"Paris"}'),
                                  (TOOL, "sql"), (TOOL, "SELECT 1")]
    assert i.facts == ApiFacts(model="gpt-4o-2024-08-06", response_id="chatcmpl-BjPZ0aB1cD2eF3gH4iJ5kL6mN7oP8",
                               usage_prompt_tokens=82, usage_completion_tokens=17, usage_cached_tokens=64,
                               usage_reasoning_tokens=0, finish_reason="tool_calls", done=True)


def test_chat_body_sdk_validates() -> None:
    pytest.importorskip("openai")
    from openai.types.chat import ChatCompletion

    ChatCompletion.model_validate(CHAT_BODY)


@pytest.mark.parametrize(
    "payload,expected",
    [
        ({"error": {"message": "You exceeded your current quota.", "type": "insufficient_quota", "param": None, "code": "insufficient_quota"}},
         ("You exceeded your current quota.", "insufficient_quota")),
        ({"error": {"message": "This model's maximum context length is 128000 tokens.", "type": "invalid_request_error",
                    "param": "messages", "code": "context_length_exceeded"}},
         ("This model's maximum context length is 128000 tokens.", "context_length_exceeded")),
        ({"type": "error", "error": {"type": "rate_limit_error", "message": "Number of request tokens has exceeded your per-minute rate limit"},
          "request_id": "req_1"}, ("Number of request tokens has exceeded your per-minute rate limit", "rate_limit_error")),
        ({"error": "Internal Server Error"}, ("Internal Server Error", None)),
        ({"detail": "Not Found"}, ("Not Found", None)),
        ({"detail": [{"loc": ["body", "model"], "msg": "field required", "type": "value_error.missing"}]},
         ('[{"loc":["body","model"],"msg":"field required","type":"value_error.missing"}]', None)),
        ({"message": "Invalid API key", "code": 401}, ("Invalid API key", "401")),
        ({"object": "error", "message": "max_tokens is too large", "type": "BadRequestError", "param": None, "code": 400},
         ("max_tokens is too large", "BadRequestError")),
    ],
)
@pytest.mark.parametrize("api", APIS)
def test_error_bodies(api: str, payload: dict, expected: tuple) -> None:
    i = make_interpreter(api)
    assert body(i, payload) == []
    assert (i.facts.error_message, i.facts.error_type) == expected
    assert i.facts.no_choices is None and i.facts.malformed == 0
    assert i.facts.done  # the body was complete


@pytest.mark.parametrize("api,payload", [
    ("openai.chat", {"id": "x", "object": "chat.completion", "model": "m", "usage": {"prompt_tokens": 3}}),
    ("openai.completions", {"id": "x", "object": "text_completion", "choices": None}),
    ("openai.responses", {"id": "resp_1", "object": "response", "status": "completed"}),
    ("anthropic.messages", {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-x"}),
    ("anthropic.messages", {}),
])
def test_bodies_without_payload(api: str, payload: dict) -> None:
    i = make_interpreter(api)
    assert body(i, payload) == []
    assert i.facts.no_choices == json.dumps(payload)[:300]
    assert i.facts.error_message is None


@pytest.mark.parametrize("api", APIS)
def test_body_not_json(api: str) -> None:
    for raw, sample in [(b"<html><body>502 Bad Gateway</body></html>", "<html><body>502 Bad Gateway</body></html>"),
                        (b"[1,2]", "[1,2]"), (b"", ""), (b"\xff\xfe{", "\ufffd\ufffd{"),
                        (b"x" * 3000, "x" * BODY_SAMPLE_CHARS)]:  # a whole body: more is kept (an error page's title may come late)
        i = make_interpreter(api)
        assert body(i, raw) == []
        assert (i.facts.malformed, i.facts.malformed_sample, i.facts.done) == (1, sample, False)


def test_body_with_bom_and_message_as_bytearray() -> None:
    i = OpenAIChat()
    raw = b"\xef\xbb\xbf" + json.dumps({"choices": [{"message": {"content": "ok"}}]}).encode()
    assert [(d.kind, d.text) for d in i.on_body(bytearray(raw))] == [(TEXT, "ok")]
    assert i.on_body(None) == [] and i.on_body(12) == []  # type: ignore[arg-type]


def test_body_that_is_really_an_event_stream() -> None:
    i = OpenAIChat()
    raw = (STREAMS / "openai_chat_text.sse").read_bytes()
    assert body(i, raw) == [(TEXT, "Hello"), (TEXT, "!"), (TEXT, " 👋"), (TEXT, " Comment ça"), (TEXT, " va?")]
    assert i.facts.done and i.facts.usage_prompt_tokens == 19


def test_completions_body() -> None:
    i = OpenAICompletions()
    b = {"id": "cmpl-1", "object": "text_completion", "created": 1, "model": "gpt-3.5-turbo-instruct",
         "choices": [{"text": "\n\nThis is a test.", "index": 0, "logprobs": None, "finish_reason": "stop"}],
         "usage": {"prompt_tokens": 5, "completion_tokens": 7, "total_tokens": 12}}
    assert body(i, b) == [(TEXT, "\n\nThis is a test.")]
    assert i.facts == ApiFacts(model="gpt-3.5-turbo-instruct", response_id="cmpl-1", usage_prompt_tokens=5,
                               usage_completion_tokens=7, finish_reason="stop", done=True)


RESPONSES_BODY = {
    "id": "resp_67ccd2bed1ec8190b14f964abc0542670bb6a6b452d3795b", "object": "response", "created_at": 1741476542,
    "status": "incomplete", "error": None, "incomplete_details": {"reason": "max_output_tokens"}, "model": "o3-2025-04-16",
    "output": [
        {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "Plan"}],
         "content": [{"type": "reasoning_text", "text": "raw"}]},
        {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "lookup", "arguments": "{\"q\":1}", "status": "completed"},
        {"type": "custom_tool_call", "id": "ctc_1", "call_id": "call_2", "name": "grammar", "input": "a+b"},
        {"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {"type": "search", "query": "weather"}},
        {"type": "message", "id": "msg_1", "status": "incomplete", "role": "assistant",
         "content": [{"type": "output_text", "text": "Answer", "annotations": []}, {"type": "refusal", "refusal": "no"}]},
    ],
    "usage": {"input_tokens": 36, "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 12}, "output_tokens": 87,
              "output_tokens_details": {"reasoning_tokens": 64}, "total_tokens": 123},
}


def test_responses_body() -> None:
    i = OpenAIResponses()
    assert body(i, RESPONSES_BODY) == [(REASONING, "Plan"), (REASONING, "raw"), (TOOL, "lookup"), (TOOL, '{"q":1}'),
                                       (TOOL, "grammar"), (TOOL, "a+b"), (TEXT, "Answer"), (REFUSAL, "no")]
    assert i.facts == ApiFacts(model="o3-2025-04-16", response_id="resp_67ccd2bed1ec8190b14f964abc0542670bb6a6b452d3795b",
                               usage_prompt_tokens=36, usage_completion_tokens=87, usage_cached_tokens=0,
                               usage_cache_creation_tokens=12, usage_reasoning_tokens=64,
                               finish_reason="max_output_tokens", done=True)


def test_responses_failed_body() -> None:
    i = OpenAIResponses()
    assert body(i, {"id": "resp_1", "object": "response", "status": "failed", "output": [],
                    "error": {"code": "server_error", "message": "The model failed"}}) == []
    assert (i.facts.error_message, i.facts.error_type, i.facts.no_choices) == ("The model failed", "server_error", None)


ANTHROPIC_BODY = {
    "id": "msg_01Aq9bX3mT7yL0pR4sW8nD1f", "type": "message", "role": "assistant", "model": "claude-sonnet-4-20250514",
    "content": [{"type": "thinking", "thinking": "Let me think", "signature": "EqQB"},
                {"type": "redacted_thinking", "data": "abc"},
                {"type": "text", "text": "I'll check."},
                {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"location": "San Francisco, CA", "unit": "°C"}}],
    "stop_reason": "tool_use", "stop_sequence": None,
    "usage": {"input_tokens": 10, "cache_creation_input_tokens": 200, "cache_read_input_tokens": 3000, "output_tokens": 60,
              "service_tier": "standard"},
}


def test_anthropic_body() -> None:
    i = AnthropicMessages()
    assert body(i, ANTHROPIC_BODY) == [(REASONING, "Let me think"), (TEXT, "I'll check."), (TOOL, "get_weather"),
                                       (TOOL, '{"location":"San Francisco, CA","unit":"°C"}')]
    assert i.facts == ApiFacts(model="claude-sonnet-4-20250514", response_id="msg_01Aq9bX3mT7yL0pR4sW8nD1f",
                               usage_prompt_tokens=3210, usage_completion_tokens=60, usage_cached_tokens=3000,
                               usage_cache_creation_tokens=200, finish_reason="tool_use", done=True)


def test_bodies_sdk_validate() -> None:
    pytest.importorskip("openai")
    pytest.importorskip("anthropic")
    from anthropic.types import Message
    from openai.types.responses import Response

    Message.model_validate(ANTHROPIC_BODY)
    Response.model_validate({**RESPONSES_BODY, "parallel_tool_calls": True, "tool_choice": "auto", "tools": []})


# -- never raise ----------------------------------------------------------------------------------

_KEYS = ["choices", "delta", "message", "content", "text", "reasoning_content", "reasoning", "reasoning_details", "summary",
         "refusal", "tool_calls", "function", "function_call", "custom", "name", "arguments", "input", "index", "id", "model",
         "usage", "prompt_tokens", "completion_tokens", "input_tokens", "output_tokens", "cache_read_input_tokens",
         "cache_creation_input_tokens", "prompt_tokens_details", "input_tokens_details", "output_tokens_details",
         "completion_tokens_details", "cached_tokens", "reasoning_tokens", "thinking_tokens", "prompt_cache_hit_tokens",
         "finish_reason", "stop_reason", "error", "code", "detail", "object", "type", "response", "output", "item",
         "incomplete_details", "content_block", "partial_json", "thinking", "moderation", "status"]
_TYPES = ["message_start", "content_block_start", "content_block_delta", "message_delta", "message_stop", "ping", "error",
          "text_delta", "thinking_delta", "input_json_delta", "tool_use", "text", "thinking", "message", "function_call",
          "custom_tool_call", "reasoning", "output_text", "refusal", "response.completed", "response.failed",
          "response.incomplete", "response.output_item.added", "response.output_text.delta", "response.created",
          "reasoning.text", "summary_text", "custom"]


def _value(rng: random.Random, depth: int) -> Any:
    r = rng.random()
    if depth > 5 or r < 0.35:
        return rng.choice([None, True, False, 0, -1, 7, 2**70, 1.5, math.nan, math.inf, "", "x", "é👋", "[DONE]",
                           rng.choice(_TYPES), "a" * rng.randint(0, 50)])
    if r < 0.55:
        return [_value(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    d = {rng.choice(_KEYS): _value(rng, depth + 1) for _ in range(rng.randint(0, 6))}
    if rng.random() < 0.5:
        d["type"] = rng.choice(_TYPES)
    return d


def _payloads(rng: random.Random) -> Any:
    r = rng.random()
    if r < 0.15:
        return rng.randbytes(rng.randint(0, 60)).decode("latin-1")
    if r < 0.25:
        return rng.choice(["", " ", "[DONE]", "null", "[]", "{}", "1e999", "-0", '"s"', "[" * 5000, "{" * 3, '{"a":'])
    return json.dumps(_value(rng, 0), allow_nan=True)


@pytest.mark.parametrize("api", APIS)
def test_interpreters_never_raise_on_garbage(api: str) -> None:
    rng = random.Random(api)
    events = ["message", "error", "ping", "message_start", "response.completed", "content_block_delta", ""]
    for _ in range(300):
        i = make_interpreter(api)
        for _ in range(rng.randint(1, 12)):
            out = i.on_event(SSEEvent(rng.choice(events), _payloads(rng), rng.choice([None, "1"])))
            assert isinstance(out, list)
            assert all(d.kind in (TEXT, REASONING, TOOL, REFUSAL) and type(d.text) is str and d.text for d in out)
        j = make_interpreter(api)
        raw = _payloads(rng).encode("utf-8", "surrogatepass") if rng.random() < 0.8 else rng.randbytes(rng.randint(0, 100))
        out = j.on_body(raw)
        assert all(type(d.text) is str and d.text for d in out)
        assert isinstance(i.facts.malformed, int) and isinstance(j.facts.malformed, int)


@pytest.mark.parametrize("api", APIS)
def test_interpreters_never_raise_on_corrupted_fixtures(api: str) -> None:
    rng = random.Random(f"corrupt-{api}")
    raws = [p.read_bytes() for p in sorted(STREAMS.glob("*.sse"))]
    for _ in range(150):
        raw = bytearray(rng.choice(raws))
        for _ in range(rng.randint(1, 12)):
            pos = rng.randrange(len(raw))
            raw[pos : pos + rng.randint(0, 3)] = rng.randbytes(rng.randint(0, 3))
        dec, interp = SSEDecoder(), make_interpreter(api)
        for k in range(0, len(raw), 113):
            for e in dec.feed(bytes(raw[k : k + 113])):
                interp.on_event(e)
        for e in dec.close():
            interp.on_event(e)
        interp.on_body(bytes(raw))


def _mutate(v: Any, rng: random.Random) -> Any:
    if rng.random() < 0.15:
        return _value(rng, 3)
    if isinstance(v, dict):
        return {k: _mutate(x, rng) for k, x in v.items() if rng.random() > 0.05}
    if isinstance(v, list):
        return [_mutate(x, rng) for x in v]
    return v


def test_interpreters_never_raise_on_mutated_payloads() -> None:
    """Real payloads with random parts replaced by values of random types."""
    events = []
    for p in sorted(STREAMS.glob("*.sse")):
        dec = SSEDecoder()
        events += [e for e in dec.feed(p.read_bytes()) + dec.close() if e.data.startswith("{")]
    bodies = [CHAT_BODY, RESPONSES_BODY, ANTHROPIC_BODY]
    rng = random.Random(99)
    for _ in range(250):
        for api in APIS:
            i = make_interpreter(api)
            for _ in range(15):
                e = rng.choice(events)
                i.on_event(SSEEvent(rng.choice([e.event, "message"]), json.dumps(_mutate(json.loads(e.data), rng))))
            make_interpreter(api).on_body(json.dumps(_mutate(rng.choice(bodies), rng)).encode())


def test_internal_errors_are_counted_not_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(base, "STRICT", False)
    i = OpenAIChat()

    def boom(*a: Any) -> None:
        raise RuntimeError("bug")

    monkeypatch.setattr(i, "_chunk", boom)
    monkeypatch.setattr(i, "_body", boom)
    assert i.on_event(ev({"choices": []})) == []
    assert i.on_body(b"{}") == []
    assert i.facts.malformed == 2 and i.facts.malformed_sample == "internal error: RuntimeError"


_JSON_CASES = [
    '{"a": 1}', '[1, 2.5, "x", null, true]', '{"n": NaN, "i": Infinity}', '1e400', str(2**70),
    '{"s": "\\ud800"}', '"\\u00e9\\n"', '  {"a": {"b": [1, {"c": 2}]}}  ', '{"a": 1, "a": 2}', '{"a": 1,}',
    '{not json', '', '[' * 5000 + ']' * 5000, '{"x": "tab\there"}', '-0', '0.1', '1.7976931348623157e308',
    '{"usage": {"t": 18446744073709551616}}', str(-2**64), '123456789012345678', '1234567890123456789.5',
]


@pytest.mark.parametrize("text", _JSON_CASES + [c.encode() for c in _JSON_CASES[:8]]
                         + ["\ufeff{}".encode(), '{"a": "é"}'.encode("utf-16"), b'{"a": "\xff"}'])
def test_load_json_is_json_loads(text):
    """The fast path (orjson) gives json.loads's values, and "not JSON" wherever json.loads
    raises; the one documented difference: integers beyond 64 bits come back as floats."""
    import json
    import math

    from firsttoken.addon.apis.base import load_json

    try:
        want = json.loads(text)
    except Exception:
        assert type(load_json(text)) is object  # the "not JSON" marker: no JSON value is one
        return
    got = load_json(text)
    if isinstance(want, float) and math.isnan(want):
        assert math.isnan(got)
        return
    if "18446744073709551616" in str(text) or "1180591620717411303424" in str(text):
        want = json.loads(text, parse_int=lambda s: int(s) if abs(int(s)) < 2**64 else float(s))
    assert json.dumps(got, allow_nan=True) == json.dumps(want, allow_nan=True) and type(got) is type(want)


def _read_whole_and_by_shape(events: list[SSEEvent], cls: Any = OpenAIChat) -> tuple[list, list, int]:
    """Deltas and facts of one stream read by an interpreter that learns its chunks' shape, and by one
    that reads every chunk whole; and how many events took the shape."""
    fast, whole = cls(), cls()
    whole._shape_tries = 0  # never learns a shape: every chunk parsed
    out, ref, by_shape = [], [], 0
    for e in events:
        shaped = fast._shape is not None and e.data.startswith(fast._shape[0])
        got = [(d.kind, d.text) for d in fast.on_event(e)]
        out.append(got)
        ref.append([(d.kind, d.text) for d in whole.on_event(e)])
        by_shape += shaped and fast.facts == whole.facts and got == ref[-1]
    return [out, fast.facts], [ref, whole.facts], by_shape


def test_chat_chunks_of_one_shape_read_as_if_parsed() -> None:
    """A chunk that is an earlier plain text chunk with only its text changed is not parsed again: its
    deltas and every fact are what parsing it gives, whatever the text or the chunk's other fields."""
    head = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m",
            "system_fingerprint": "fp_1"}

    def chunk(delta: Any, finish: Any = None, **extra: Any) -> str:
        return json.dumps({**head, **extra, "choices": [{"index": 0, "delta": delta, "logprobs": None,
                                                         "finish_reason": finish}]}, separators=(",", ":"))

    plain = chunk({"content": "hello"})
    before, after = plain.split("hello")
    texts = ["The", " fox", "", "日本語 🦊", " a\"quote", "back\\slash", "tab\tand\nline", "\u2028", "x\x7f",
             '","finish_reason":"stop', '"}],"usage":{"prompt_tokens":9},"x":"', "\ud800", "content", '"content"']
    events = [ev(chunk({"role": "assistant", "content": ""})), ev(plain)]
    events += [ev(before + t + after) for t in texts]  # raw: quotes and backslashes change what the chunk is
    events += [ev(chunk({"content": t})) for t in texts]  # as JSON writes them (escaped)
    events += [ev(plain.replace('"content":', '"content" : ')), ev(plain, "error"), ev(before), ev(after),
               ev(before + after), ev(before + after[1:]), ev(chunk({}, "stop")), ev("[DONE]")]
    got, want, by_shape = _read_whole_and_by_shape(events)
    assert got == want
    assert by_shape >= len(texts)  # (the shape was used: not a comparison of two whole reads)
    # a chunk with more than its text (usage, a finish reason, an error, another model): read again whole,
    # so what a later chunk changed is changed back as parsing would
    for extra in ({"usage": {"prompt_tokens": 3}}, {"error": {"message": "boom"}}, {"object": "error"},
                  {"model": "other"}, {"obfuscation": "ab"}, {"timings": {"prompt_n": 1}}, {"done": True}):
        other = {k: ({"prompt_tokens": 4} if k == "usage" else {"message": "two"} if k == "error"
                     else {"prompt_n": 2} if k == "timings" else "x") for k in extra}
        events = [ev(chunk({"content": "u"}, **extra)), ev(chunk({"content": "v"}, **other)),
                  ev(chunk({"content": "w"}, **extra)), ev(plain), ev(chunk({"content": "w"}, **extra))]
        got, want, _ = _read_whole_and_by_shape(events)
        assert got == want, extra
    for finish in ("stop", ""):
        events = [ev(chunk({"content": "u"}, finish)), ev(chunk({}, "length")), ev(chunk({"content": "w"}, finish))]
        got, want, _ = _read_whole_and_by_shape(events)
        assert got == want, finish
    events = [ev(chunk({"content": "u", "refusal": "r"})), ev(chunk({"content": "w", "refusal": "r"}))]
    got, want, _ = _read_whole_and_by_shape(events)
    assert got == want and want[0][1] == [(TEXT, "w"), (REFUSAL, "r")]
    two = [{"index": 0, "delta": {"content": "u"}}, {"index": 1, "delta": {}, "finish_reason": "stop"}]
    events = [ev({**head, "choices": two}), ev(chunk({"content": "v"}, "length")),
              ev(json.dumps({**head, "choices": two}).replace('"u"', '"w"'))]
    got, want, _ = _read_whole_and_by_shape(events)
    assert got == want
    # "content" elsewhere in the chunk, with the same text: not where the text is
    logprobs = [{"index": 0, "logprobs": {"content": "u"}, "delta": {"content": "u"}}]
    events = [ev({**head, "choices": logprobs}), ev(json.dumps({**head, "choices": logprobs}).replace('t": "u"}, "d', 't": "v"}, "d'))]
    got, want, _ = _read_whole_and_by_shape(events)
    assert got == want
    escaped = json.dumps({**head, "choices": logprobs}).replace('{"content": "u"}}', '{"cont\\u0065nt": "u"}}')
    events = [ev(escaped), ev(escaped.replace('"content": "u"', '"content": "v"'))]
    got, want, _ = _read_whole_and_by_shape(events)
    assert got == want and want[0][1] == [(TEXT, "u")]
    # a null field is an absent one (OpenAI's "usage": null with include_usage): the shape is used
    nulls = [ev(chunk({"content": t}, usage=None, x_extra=None)) for t in ("a", "b", "c")]
    got, want, by_shape = _read_whole_and_by_shape(nulls)
    assert got == want and by_shape == 2
    # random texts, in raw and as JSON writes them, and random cuts of the shape
    rng = random.Random(37)
    alphabet = 'ab "\\{}[],:\t\n\x00\x1f\x7fé€🦊\ud83d'
    events = [ev(plain)]
    for _ in range(400):
        t = "".join(rng.choice(alphabet) for _ in range(rng.randrange(6)))
        events.append(ev(rng.choice([before + t + after, chunk({"content": t}), before[:rng.randrange(len(before))] + t
                                     + after, before + t + after[rng.randrange(len(after)):]])))
    got, want, by_shape = _read_whole_and_by_shape(events)
    assert got == want and by_shape > 0


def test_chat_shape_of_spaced_json_and_its_limit() -> None:
    """A server that writes JSON with spaces has a shape too; a stream whose chunks all differ (here an
    unknown field) stops being looked at for one after SHAPE_TRIES chunks."""
    from firsttoken.addon.apis.base import SHAPE_TRIES

    i = OpenAIChat()
    feed(i, json.dumps({"id": "x", "choices": [{"index": 0, "delta": {"content": "a b"}}]}))
    assert i._shape == ('{"id": "x", "choices": [{"index": 0, "delta": {"content": "', '"}}]}', TEXT, None, True)
    assert feed(i, '{"id": "x", "choices": [{"index": 0, "delta": {"content": "cd"}}]}') == [[(TEXT, "cd")]]
    j = OpenAIChat()
    feed(j, *[{"id": "x", "x_seq": n, "choices": [{"delta": {"content": "a"}}]} for n in range(20)])
    assert j._shape is None and j._shape_tries == 0 and SHAPE_TRIES < 20


def test_chat_shape_with_openais_obfuscation() -> None:
    """OpenAI pads each chunk with an ``obfuscation`` string of its own (no reader reads it): the shape has a
    second value, before or after the text, and reads as parsing does whatever either holds."""
    rng = random.Random(38)
    alphabet = 'ab "\\{}:,\t\x7f€'
    for order in ("after", "before"):
        def chunk(t: str, obf: Any, order: str = order) -> str:
            choices = [{"delta": {"content": t}, "finish_reason": None, "index": 0, "logprobs": None}]
            d = {"choices": choices, "obfuscation": obf} if order == "after" else {"obfuscation": obf, "choices": choices}
            return json.dumps({"id": "chatcmpl-1", **d, "model": "m", "object": "chat.completion.chunk",
                               "usage": None}, separators=(",", ":"))

        plain = chunk("hello", "XyZ")
        a, rest = plain.split("hello") if order == "after" else plain.split("XyZ")
        b, c = rest.split("XyZ") if order == "after" else rest.split("hello")
        events = [ev(chunk("", "Q1")), ev(plain), ev(chunk("fox", "abcdef")), ev(chunk(" ", "")), ev(chunk("", "z")),
                  ev(a + "t" + b + c[1:]), ev(a + b + c[1:])]  # (the middle's closing quote is the end's opening one)
        for _ in range(300):
            t = "".join(rng.choice(alphabet) for _ in range(rng.randrange(5)))
            o = "".join(rng.choice(alphabet) for _ in range(rng.randrange(5)))
            events.append(ev(rng.choice([a + t + b + o + c, a + o + b + t + c, chunk(t, o), a + t + c, a + t + b + c,
                                         chunk(t, None), chunk(t, 5), chunk(t, "hello")])))
        got, want, by_shape = _read_whole_and_by_shape(events)
        assert got == want, order
        assert by_shape >= 3, order  # (the shape was used)


def test_anthropic_deltas_of_one_shape_read_as_if_parsed() -> None:
    """Anthropic's text and thinking deltas: the same as parsing them, whatever the text; a delta whose type
    is only its event's name is always parsed (the same bytes under another event name are another thing)."""
    def delta(kind: str, key: str, t: str, **extra: Any) -> str:
        return json.dumps({"type": "content_block_delta", "index": 0, **extra,
                           "delta": {"type": kind, key: t}}, separators=(",", ":"))

    texts = ["The", "", " a\"quote", "back\\slash", "tab\tline", "\ud800", "x\x7f", '"}}', "text", '"text"']
    for kind, key in (("text_delta", "text"), ("thinking_delta", "thinking")):
        plain = delta(kind, key, "hello")
        before, after = plain.split("hello")
        events = [ev(plain, "content_block_delta")]
        events += [ev(before + t + after, "content_block_delta") for t in texts]
        events += [ev(delta(kind, key, t), "content_block_delta") for t in texts]
        events += [ev(plain, "error"), ev(before + after[1:]), ev(delta("text_delta", "thinking", "z")),
                   ev(delta(kind, key, "u", extra=key)), ev(delta(kind, key, "u", extra=key)),
                   ev(plain.replace('"type":"content_block_delta",', ""), "content_block_delta"),
                   ev(plain.replace('"type":"content_block_delta",', ""), "message"), ev(plain)]
        got, want, by_shape = _read_whole_and_by_shape(events, AnthropicMessages)
        assert got == want and by_shape >= len(texts), kind
    untyped = json.dumps({"index": 0, "delta": {"type": "text_delta", "text": "a"}})
    events = [ev(untyped, "content_block_delta"), ev(untyped.replace('"a"', '"b"'), "message")]
    got, want, _ = _read_whole_and_by_shape(events, AnthropicMessages)
    assert got == want and want[1].no_choices is not None


def test_chat_reasoning_deltas_of_one_shape_read_as_if_parsed() -> None:
    """Reasoning models' deltas (one string, the other fields null: DeepSeek's ``reasoning_content``, the
    ``reasoning`` of others, then ``content``) keep a shape each phase, and read as parsing does."""
    def chunk(delta: dict) -> str:
        return json.dumps({"id": "c", "model": "m", "choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
                          separators=(",", ":"))

    rng = random.Random(39)
    alphabet = 'ab "\\{}:\t€'
    shapes = [lambda t: {"content": None, "reasoning_content": t}, lambda t: {"content": t, "reasoning_content": None},
              lambda t: {"reasoning": t, "content": None}, lambda t: {"reasoning_content": t, "reasoning": None},
              lambda t: {"reasoning_content": "", "reasoning": t}, lambda t: {"reasoning_content": t, "role": "assistant"},
              lambda t: {"reasoning_content": t, "reasoning": t}, lambda t: {"content": t, "refusal": None, "tool_calls": None},
              lambda t: {"reasoning_content": "x", "reasoning": t}, lambda t: {"content": [{"type": "text", "text": t}]},
              lambda t: {"role": t, "content": None}]
    for first in range(len(shapes)):
        events = []
        for phase in (first, rng.randrange(len(shapes)), first):
            for _ in range(60):
                t = "".join(rng.choice(alphabet) for _ in range(rng.randrange(5)))
                events.append(ev(chunk(shapes[phase if rng.random() < 0.8 else rng.randrange(len(shapes))](t))))
        got, want, by_shape = _read_whole_and_by_shape(events)
        assert got == want, first
    events = [ev(chunk(shapes[0](t))) for t in ("think", "ing", "")] + [ev(chunk(shapes[1](t))) for t in ("an", "swer")]
    got, want, by_shape = _read_whole_and_by_shape(events)
    assert got == want and by_shape == 3 and flat(want[0]) == [(REASONING, "think"), (REASONING, "ing"), (TEXT, "an"),
                                                                 (TEXT, "swer")]
