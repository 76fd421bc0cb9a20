"""What decoding one event costs the stream tap, per framing: SSE against AWS's event stream (Bedrock),
the same Anthropic events either way, fed a chunk an event as servers send them. docs/performance.md."""

from __future__ import annotations

import base64
import json
import time

from firsttoken.addon.framing import encode_frame
from firsttoken.addon.record import Clock
from firsttoken.addon.tap import StreamTap

EVENTSTREAM = "application/vnd.amazon.eventstream"


def _events(n: int) -> list[dict]:
    words = ("The", " quick", " brown", " fox", " jumps", " over", " the", " lazy", " dog.")
    out = [{"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant", "model": "m",
                                                 "content": [], "usage": {"input_tokens": 10, "output_tokens": 1}}},
           {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}]
    out += [{"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": words[i % 9]}}
            for i in range(n)]
    out += [{"type": "content_block_stop", "index": 0},
            {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": n}},
            {"type": "message_stop"}]
    return out


def chunks(kind: str, n: int) -> list[bytes]:
    """One stream of ``n`` text deltas as the chunks of ``kind``: "sse" (Anthropic's own) or "eventstream" (Bedrock's)."""
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
    """Median microseconds the tap spends per event of a stream of ``n`` events (decoded on the spot,
    as before the first token and in ``drain``)."""
    api, ctype = ("anthropic.messages", "text/event-stream") if kind == "sse" else ("anthropic.bedrock", EVENTSTREAM)
    data = chunks(kind, n)
    times = []
    for _ in range(repeats):
        tap = StreamTap(Clock(t0=0.0, hook=0.0), api, ctype, None)
        t = time.perf_counter()
        for c in data:
            tap(c)
        tap.finish()
        times.append((time.perf_counter() - t) / len(data))
        assert tap.facts.done and tap.error is None and tap.output_chars
    times.sort()
    return times[len(times) // 2] * 1e6


def measure(n: int = 20000) -> dict[str, float]:
    return {kind: round(per_event_us(kind, n), 3) for kind in ("sse", "eventstream")}
