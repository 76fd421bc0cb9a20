"""What decoding one event costs the stream tap, per framing: SSE against AWS's event stream (Bedrock),
the same Anthropic events either way, Ollama's newline-delimited JSON (``/api/chat``) and OpenAI's chat
SSE with the same text deltas, fed a chunk an event as servers send them. docs/performance.md."""

from __future__ import annotations

import base64
import json
import time

from firsttoken.addon.framing import encode_frame
from firsttoken.addon.record import Clock
from firsttoken.addon.tap import StreamTap

EVENTSTREAM = "application/vnd.amazon.eventstream"
NDJSON = "application/x-ndjson"
KINDS = ("sse", "eventstream", "ndjson", "openai_sse")
#: (api, Content-Type) the tap is given for each kind
TAPS = {"sse": ("anthropic.messages", "text/event-stream"), "eventstream": ("anthropic.bedrock", EVENTSTREAM),
        "ndjson": ("ollama.chat", NDJSON), "openai_sse": ("openai.chat", "text/event-stream")}
WORDS = ("The", " quick", " brown", " fox", " jumps", " over", " the", " lazy", " dog.")


def _events(n: int) -> list[dict]:
    words = WORDS
    out = [{"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant", "model": "m",
                                                 "content": [], "usage": {"input_tokens": 10, "output_tokens": 1}}},
           {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}]
    out += [{"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": words[i % 9]}}
            for i in range(n)]
    out += [{"type": "content_block_stop", "index": 0},
            {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": n}},
            {"type": "message_stop"}]
    return out


def _ollama_lines(n: int) -> list[bytes]:
    """Ollama's ``/api/chat`` stream of ``n`` text deltas: one object a line (``message.content``), then the
    final ``done: true`` object with its durations in nanoseconds, as Ollama writes them."""
    head = {"model": "m", "created_at": "2026-12-07T10:00:00.123456789Z"}
    out = [{**head, "message": {"role": "assistant", "content": WORDS[i % 9]}, "done": False} for i in range(n)]
    out.append({**head, "message": {"role": "assistant", "content": ""}, "done": True, "done_reason": "stop",
                "total_duration": 5_191_566_416, "load_duration": 2_154_458, "prompt_eval_count": 10,
                "prompt_eval_duration": 383_809_000, "eval_count": n, "eval_duration": 4_709_213_000})
    return [json.dumps(o, separators=(",", ":")).encode() + b"\n" for o in out]


def _openai_events(n: int) -> list[bytes]:
    """OpenAI's chat stream of ``n`` text deltas, each chunk with the fields the real API sends (as
    ``firsttoken simulate`` sends them): the role first, the finish reason last, then ``[DONE]``."""
    head = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1765100000, "model": "m",
            "service_tier": "default", "system_fingerprint": "fp_1"}

    def chunk(delta: dict, finish: str | None = None) -> bytes:
        c = {**head, "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]}
        return b"data: " + json.dumps(c, separators=(",", ":")).encode() + b"\n\n"

    return ([chunk({"role": "assistant", "content": "", "refusal": None})]
            + [chunk({"content": WORDS[i % 9]}) for i in range(n)] + [chunk({}, "stop"), b"data: [DONE]\n\n"])


def chunks(kind: str, n: int) -> list[bytes]:
    """One stream of ``n`` text deltas as the chunks of ``kind``: "sse" (Anthropic's own), "eventstream"
    (Bedrock's), "ndjson" (Ollama's /api/chat) or "openai_sse" (OpenAI's chat completions)."""
    if kind == "ndjson":
        return _ollama_lines(n)
    if kind == "openai_sse":
        return _openai_events(n)
    out = []
    for e in _events(n):
        data = json.dumps(e, separators=(",", ":"))
        if kind == "sse":
            out.append(f"event: {e['type']}\ndata: {data}\n\n".encode())
        else:
            payload = json.dumps({"bytes": base64.b64encode(data.encode()).decode(), "p": "abcdefghijklmnop"},
                                 separators=(",", ":")).encode()
            out.append(encode_frame({":event-type": "chunk", ":content-type": "application/json",
                                     ":message-type": "event"}, payload))
    return out


def per_event_us(kind: str, n: int = 20000, repeats: int = 5) -> float:
    """Median microseconds of CPU (this thread's: a busy machine's other work is not counted) the tap
    spends per event of a stream of ``n`` events (decoded on the spot, as before the first token and in
    ``drain``)."""
    api, ctype = TAPS[kind]
    data = chunks(kind, n)
    times = []
    for _ in range(repeats):
        tap = StreamTap(Clock(t0=0.0, hook=0.0), api, ctype, None)
        t = time.thread_time()
        for c in data:
            tap(c)
        tap.finish()
        times.append((time.thread_time() - t) / len(data))
        assert tap.facts.done and tap.error is None and tap.output_chars
    times.sort()
    return times[len(times) // 2] * 1e6


def measure(n: int = 20000) -> dict[str, float]:
    return {kind: round(per_event_us(kind, n), 3) for kind in KINDS}
