"""What the tests' Bedrock and Vertex upstreams send: Anthropic events wrapped the way each cloud
wraps them (Bedrock: AWS event-stream frames around base64 JSON; Converse: its own events)."""

from __future__ import annotations

import base64
import json

from firsttoken.addon.framing import encode_frame

MODEL = "anthropic.claude-sonnet-4-5-20250929-v1:0"
METRICS = {"inputTokenCount": 12, "outputTokenCount": 7, "invocationLatency": 420, "firstByteLatency": 123}


def anthropic_events(text_parts=("Hel", "lo", "!"), thinking: str | None = "hmm", tool: bool = False,
                     metrics: dict | None = METRICS) -> list[dict]:
    """An Anthropic Messages stream as event objects (the last one carries Bedrock's metrics when given)."""
    evs = [{"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant",
                                                 "model": "claude-sonnet-4-5-20250929", "content": [],
                                                 "stop_reason": None, "usage": {"input_tokens": 10,
                                                 "cache_read_input_tokens": 2, "output_tokens": 1}}}]
    i = 0
    if thinking:
        evs += [{"type": "content_block_start", "index": i, "content_block": {"type": "thinking", "thinking": ""}},
                {"type": "content_block_delta", "index": i, "delta": {"type": "thinking_delta", "thinking": thinking}},
                {"type": "content_block_stop", "index": i}]
        i += 1
    evs.append({"type": "content_block_start", "index": i, "content_block": {"type": "text", "text": ""}})
    evs += [{"type": "content_block_delta", "index": i, "delta": {"type": "text_delta", "text": t}} for t in text_parts]
    evs.append({"type": "content_block_stop", "index": i})
    if tool:
        i += 1
        evs += [{"type": "content_block_start", "index": i,
                 "content_block": {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {}}},
                {"type": "content_block_delta", "index": i,
                 "delta": {"type": "input_json_delta", "partial_json": '{"city": "Paris"}'}},
                {"type": "content_block_stop", "index": i}]
    evs.append({"type": "message_delta", "delta": {"stop_reason": "tool_use" if tool else "end_turn"},
                "usage": {"output_tokens": 7}})
    stop: dict = {"type": "message_stop"}
    if metrics:
        stop["amazon-bedrock-invocationMetrics"] = metrics
    evs.append(stop)
    return evs


def chunk_frame(event: dict) -> bytes:
    b64 = base64.b64encode(json.dumps(event).encode()).decode()
    payload = json.dumps({"bytes": b64, "p": "abcdefghij"}, separators=(",", ":")).encode()
    return encode_frame({":event-type": "chunk", ":content-type": "application/json", ":message-type": "event"}, payload)


def exception_frame(kind: str, message: str) -> bytes:
    return encode_frame({":exception-type": kind, ":content-type": "application/json", ":message-type": "exception"},
                        json.dumps({"message": message}).encode())


def converse_frames(text_parts=("Hel", "lo"), reasoning: str | None = "hmm", tool: bool = True) -> list[bytes]:
    def ev(kind: str, obj: dict) -> bytes:
        return encode_frame({":event-type": kind, ":content-type": "application/json", ":message-type": "event"},
                            json.dumps(obj).encode())
    out = [ev("messageStart", {"role": "assistant"})]
    i = 0
    if reasoning:
        out.append(ev("contentBlockDelta", {"contentBlockIndex": i, "delta": {"reasoningContent": {"text": reasoning}}}))
        out.append(ev("contentBlockStop", {"contentBlockIndex": i}))
        i += 1
    out += [ev("contentBlockDelta", {"contentBlockIndex": i, "delta": {"text": t}}) for t in text_parts]
    out.append(ev("contentBlockStop", {"contentBlockIndex": i}))
    if tool:
        i += 1
        out.append(ev("contentBlockStart", {"contentBlockIndex": i,
                                            "start": {"toolUse": {"toolUseId": "t1", "name": "get_weather"}}}))
        out.append(ev("contentBlockDelta", {"contentBlockIndex": i, "delta": {"toolUse": {"input": '{"city":"Paris"}'}}}))
        out.append(ev("contentBlockStop", {"contentBlockIndex": i}))
    out.append(ev("messageStop", {"stopReason": "tool_use" if tool else "end_turn"}))
    out.append(ev("metadata", {"usage": {"inputTokens": 20, "outputTokens": 9, "totalTokens": 29,
                                         "cacheReadInputTokens": 4, "cacheWriteInputTokens": 0},
                               "metrics": {"latencyMs": 321}}))
    return out
