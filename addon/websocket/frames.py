"""WebSocket frames as events: what a frame is (a bounded look at its type) and the decoder that
hands each whole message to an API interpreter as one event. Pure: no I/O, no clocks.
How turns are cut from frames: docs/record.md ("WebSocket turns").
"""

from __future__ import annotations

import re

import orjson

from firsttoken.addon.sse import MAX_EVENT_DATA, SSEEvent

#: the frame a client sends to start a Responses turn
CREATE = "response.create"
#: server events that end a turn (an ``error`` frame answers the request that failed; Realtime: response.done)
TERMINAL = frozenset({"response.completed", "response.incomplete", "response.failed", "error", "response.done"})
#: the Realtime API's path end, and its record's api
REALTIME_PATH, REALTIME_API = "/realtime", "openai.realtime"
#: bytes of each end of a frame the type is looked for in (the event loop's bounded look)
PEEK_BYTES = 256
#: a frame whose type sits in neither end is parsed on the event loop only up to this size
PARSE_MAX = 16 * 1024
_HEAD = re.compile(rb'\A\s*\{\s*"type"\s*:\s*"([A-Za-z0-9_.\-]{1,100})"')
_TAIL = re.compile(rb'"type"\s*:\s*"([A-Za-z0-9_.\-]{1,100})"\s*\}\s*\Z')


def frame_type(content: bytes) -> str | None:
    """The top-level ``type`` of a JSON frame, from a bounded look: first key (how OpenAI and
    Codex write it), last key, else a parse of a small frame. None when it cannot be told cheaply."""
    m = _HEAD.match(content[:PEEK_BYTES])
    if m is None:
        m = _TAIL.search(content[-PEEK_BYTES:])
    if m is not None:
        return m.group(1).decode("ascii")
    if len(content) <= PARSE_MAX:
        try:
            obj = orjson.loads(content)
        except (orjson.JSONDecodeError, TypeError):
            return None
        t = obj.get("type") if type(obj) is dict else None
        return t if type(t) is str else None
    return None


def is_upgrade(headers) -> bool:
    """Whether a request asks to become a WebSocket (``Upgrade: websocket``)."""
    return "websocket" in (headers.get("upgrade") or "").lower()


class FrameDecoder:
    """The SSE decoder's interface for a WebSocket: each fed message is one whole event (its text
    is the event's data). A message larger than MAX_EVENT_DATA is a truncated event: counted by
    the tap as too large to analyse, never parsed."""

    __slots__ = ("events", "truncated")

    comments = 0
    foreign = 0
    foreign_text = ""

    def __init__(self) -> None:
        self.events = 0
        self.truncated = 0

    def feed_one(self, data: bytes) -> SSEEvent | None:
        if len(data) > MAX_EVENT_DATA:
            return None  # feed() says it was too large
        self.events += 1
        return SSEEvent("message", data.decode("utf-8", "replace"))

    def feed(self, data: bytes) -> list[SSEEvent]:
        if len(data) > MAX_EVENT_DATA:
            self.truncated += 1
            return [SSEEvent("message", "", truncated=True)]
        ev = self.feed_one(data)
        return [ev] if ev is not None else []

    def close(self) -> list[SSEEvent]:
        return []
