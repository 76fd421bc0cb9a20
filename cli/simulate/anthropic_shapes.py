"""Anthropic Messages API: the named SSE event sequence and the full message body."""

from __future__ import annotations

import json
from typing import Any

from firsttoken.cli.simulate.context import Gen
from firsttoken.cli.simulate.wire import FINAL, HEAD, TAIL, TOKEN, Ev, signature, sse

PING = b'event: ping\ndata: {"type": "ping"}\n\n'


def _stop_reason(gen: Gen) -> str:
    if gen.tool is not None:
        return "tool_use"
    return "max_tokens" if gen.limited else "end_turn"


def _tool_input(gen: Gen) -> dict[str, Any]:
    try:
        value = json.loads(gen.text)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _message(gen: Gen, content: list[dict[str, Any]], stop_reason: str | None, output_tokens: int) -> dict[str, Any]:
    msg: dict[str, Any] = {
        "id": gen.id("anthropic"),
        "type": "message",
        "role": "assistant",
        "model": gen.model,
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
    }
    if gen.usage_on:
        msg["usage"] = gen.anthropic_usage(output_tokens)
    return msg


def _signature(gen: Gen) -> str:
    if "signature" not in gen.ids:
        gen.ids["signature"] = signature()
    return gen.ids["signature"]


def messages_stream(gen: Gen) -> list[Ev]:
    evs = [Ev(None, sse({"type": "message_start", "message": _message(gen, [], None, 1)}, "message_start"), HEAD)]
    r = gen.n_reasoning
    index = 0
    pinged = False

    def block(slot: int, content_block: dict[str, Any]) -> None:
        nonlocal pinged
        start = {"type": "content_block_start", "index": index, "content_block": content_block}
        evs.append(Ev(slot, sse(start, "content_block_start"), HEAD))
        if not pinged:
            evs.append(Ev(slot, PING, HEAD))
            pinged = True

    def delta(slot: int | None, d: dict[str, Any], kind: str = TOKEN) -> None:
        evs.append(Ev(slot, sse({"type": "content_block_delta", "index": index, "delta": d}, "content_block_delta"), kind))

    def stop() -> None:
        evs.append(Ev(None, sse({"type": "content_block_stop", "index": index}, "content_block_stop"), TAIL))

    if not gen.no_choices:
        if gen.rwords:
            block(0, {"type": "thinking", "thinking": "", "signature": ""})
            for k, w in enumerate(gen.rwords):
                delta(k, {"type": "thinking_delta", "thinking": w})
            delta(None, {"type": "signature_delta", "signature": _signature(gen)}, TAIL)
            stop()
            index += 1
        if gen.tool is not None:
            block(r, {"type": "tool_use", "id": gen.id("toolu"), "name": gen.tool_name, "input": {}})
            for i, frag in enumerate(gen.words):
                delta(r + i, {"type": "input_json_delta", "partial_json": frag})
        else:
            block(r, {"type": "text", "text": ""})
            for i, w in enumerate(gen.words):
                delta(r + i, {"type": "text_delta", "text": w})
        stop()
    last = None if not gen.no_choices else max(0, gen.n_output - 1)
    md: dict[str, Any] = {"type": "message_delta", "delta": {"stop_reason": _stop_reason(gen), "stop_sequence": None}}
    if gen.usage_on:
        u = gen.anthropic_usage()
        keys = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "output_tokens")
        md["usage"] = {k: u[k] for k in keys}
    evs.append(Ev(last, sse(md, "message_delta"), TAIL))
    evs.append(Ev(None, sse({"type": "message_stop"}, "message_stop"), FINAL))
    return evs


def messages_body(gen: Gen) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if not gen.no_choices:
        if gen.rwords:
            content.append({"type": "thinking", "thinking": gen.reasoning_text, "signature": _signature(gen)})
        if gen.tool is not None:
            content.append({"type": "tool_use", "id": gen.id("toolu"), "name": gen.tool_name, "input": _tool_input(gen)})
        else:
            content.append({"type": "text", "text": gen.text})
    return _message(gen, content, _stop_reason(gen), gen.n_output)


def stream_error(gen: Gen, seq: int = 0) -> bytes:
    body = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}, "request_id": gen.request_id}
    return sse(body, "error")
