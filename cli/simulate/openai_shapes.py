"""OpenAI Chat Completions and legacy Completions: streamed chunks and full bodies, as the real API sends them."""

from __future__ import annotations

from typing import Any

from firsttoken.cli.simulate.context import Gen
from firsttoken.cli.simulate.wire import FINAL, HEAD, TAIL, Ev, sse

SERVER_ERROR_MESSAGE = "The server had an error while processing your request. Sorry about that!"


def _finish_reason(gen: Gen) -> str:
    if gen.tool is not None:
        return "tool_calls"
    return "length" if gen.limited else "stop"


# ---- chat.completions -------------------------------------------------------------------------


def _chat_chunk(gen: Gen, choices: list[dict[str, Any]] | None, usage: Any = "absent") -> dict[str, Any]:
    chunk: dict[str, Any] = {
        "id": gen.id("chat"),
        "object": "chat.completion.chunk",
        "created": gen.created,
        "model": gen.model,
        "service_tier": "default",
        "system_fingerprint": gen.fingerprint,
    }
    if choices is not None and not gen.no_choices:
        chunk["choices"] = choices
    if gen.include_usage and gen.usage_on:
        chunk["usage"] = None if usage == "absent" else usage
    return chunk


def _choice(delta: dict[str, Any], finish: str | None = None) -> list[dict[str, Any]]:
    return [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]


def chat_stream(gen: Gen) -> list[Ev]:
    evs: list[Ev] = []
    r = gen.n_reasoning
    first: dict[str, Any] = {"role": "assistant", "content": "", "refusal": None}
    if gen.rwords:
        first = {"role": "assistant", "content": None, "reasoning_content": ""}
    if gen.tool is not None:
        call = {"index": 0, "id": gen.id("call"), "type": "function", "function": {"name": gen.tool_name, "arguments": ""}}
        first = {"role": "assistant", "content": None, "tool_calls": [call], "refusal": None}
    evs.append(Ev(0, sse(_chat_chunk(gen, _choice(first))), HEAD))
    for k, w in enumerate(gen.rwords):
        evs.append(Ev(k, sse(_chat_chunk(gen, _choice({"content": None, "reasoning_content": w})))))
    for i, w in enumerate(gen.words):
        if gen.tool is not None:
            delta: dict[str, Any] = {"tool_calls": [{"index": 0, "function": {"arguments": w}}]}
        elif gen.rwords:
            delta = {"content": w, "reasoning_content": None}
        else:
            delta = {"content": w}
        evs.append(Ev(r + i, sse(_chat_chunk(gen, _choice(delta)))))
    evs.append(Ev(None, sse(_chat_chunk(gen, _choice({}, _finish_reason(gen)))), TAIL))
    if gen.include_usage and gen.usage_on:
        evs.append(Ev(None, sse(_chat_chunk(gen, [], gen.openai_usage())), TAIL))
    evs.append(Ev(None, b"data: [DONE]\n\n", FINAL))
    return evs


def chat_body(gen: Gen) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": gen.text, "refusal": None, "annotations": []}
    if gen.rwords:
        message["reasoning_content"] = gen.reasoning_text
    if gen.tool is not None:
        message["content"] = None
        message["tool_calls"] = [
            {"id": gen.id("call"), "type": "function", "function": {"name": gen.tool_name, "arguments": gen.text}}
        ]
    body: dict[str, Any] = {
        "id": gen.id("chat"),
        "object": "chat.completion",
        "created": gen.created,
        "model": gen.model,
    }
    if not gen.no_choices:
        body["choices"] = [{"index": 0, "message": message, "logprobs": None, "finish_reason": _finish_reason(gen)}]
    if gen.usage_on:
        body["usage"] = gen.openai_usage()
    body["service_tier"] = "default"
    body["system_fingerprint"] = gen.fingerprint
    return body


# ---- legacy completions -----------------------------------------------------------------------


def _cmpl_chunk(gen: Gen, text: str | None, finish: str | None = None, usage: Any = "absent") -> dict[str, Any]:
    chunk: dict[str, Any] = {"id": gen.id("cmpl"), "object": "text_completion", "created": gen.created}
    if text is not None and not gen.no_choices:
        chunk["choices"] = [{"text": text, "index": 0, "logprobs": None, "finish_reason": finish}]
    elif text is None:
        chunk["choices"] = []
    chunk["model"] = gen.model
    chunk["system_fingerprint"] = gen.fingerprint
    if gen.include_usage and gen.usage_on:
        chunk["usage"] = None if usage == "absent" else usage
    return chunk


def completions_stream(gen: Gen) -> list[Ev]:
    evs = [Ev(i, sse(_cmpl_chunk(gen, w))) for i, w in enumerate(gen.words)]
    evs.append(Ev(None, sse(_cmpl_chunk(gen, "", _finish_reason(gen))), TAIL))
    if gen.include_usage and gen.usage_on:
        evs.append(Ev(None, sse(_cmpl_chunk(gen, None, usage=gen.openai_usage())), TAIL))
    evs.append(Ev(None, b"data: [DONE]\n\n", FINAL))
    return evs


def completions_body(gen: Gen) -> dict[str, Any]:
    body: dict[str, Any] = {"id": gen.id("cmpl"), "object": "text_completion", "created": gen.created, "model": gen.model}
    if not gen.no_choices:
        body["choices"] = [{"text": gen.text, "index": 0, "logprobs": None, "finish_reason": _finish_reason(gen)}]
    if gen.usage_on:
        body["usage"] = gen.openai_usage()
    body["system_fingerprint"] = gen.fingerprint
    return body


# ---- in-stream error (mid_stream_error) -------------------------------------------------------


def stream_error(gen: Gen, seq: int = 0) -> bytes:
    err = {"message": SERVER_ERROR_MESSAGE, "type": "server_error", "param": None, "code": None}
    return sse({"error": err})

