"""Framing: how a response's bytes become events, apart from what the events mean (the dialect).

Each decoder is pure and incremental (``feed`` / ``feed_one`` / ``close``); ``decoder_for`` picks
one by the response's Content-Type. See docs/architecture.md ("Framing and dialects").
"""

from __future__ import annotations

from firsttoken.addon.framing.eventstream import EVENTSTREAM_TYPE, EventStreamDecoder, Message, encode_frame
from firsttoken.addon.framing.ndjson import NDJSON_TYPES, NDJSONDecoder
from firsttoken.addon.sse import SSEDecoder, SSEEvent

__all__ = ["EVENTSTREAM_TYPE", "NDJSON_TYPES", "EventStreamDecoder", "Message", "NDJSONDecoder", "encode_frame",
           "SSEDecoder", "SSEEvent", "decoder_for", "framing_of"]


def framing_of(content_type: str | None) -> str | None:
    """"sse", "eventstream", "ndjson", or None (a plain body, parsed whole when it ends)."""
    ct = (content_type or "").lower()
    if "text/event-stream" in ct:
        return "sse"
    if EVENTSTREAM_TYPE in ct:
        return "eventstream"
    if any(t in ct for t in NDJSON_TYPES):
        return "ndjson"
    return None


def decoder_for(content_type: str | None) -> SSEDecoder | EventStreamDecoder | NDJSONDecoder | None:
    """A fresh decoder for a response of this Content-Type, or None for a plain body."""
    kind = framing_of(content_type)
    if kind == "sse":
        return SSEDecoder()
    if kind == "eventstream":
        return EventStreamDecoder()
    if kind == "ndjson":
        return NDJSONDecoder()
    return None
