"""Amazon Bedrock's streams: Anthropic's Messages wrapped in AWS event-stream frames (``invoke``),
and Bedrock's own Converse dialect; exception frames become the upstream's error.

Which frame counts as what, and the usage mapping: docs/record.md ("What counts as a token").
"""

from __future__ import annotations

import binascii
from typing import Any

from firsttoken.addon.apis import base
from firsttoken.addon.apis.anthropic_messages import AnthropicMessages
from firsttoken.addon.apis.base import (
    REASONING,
    TEXT,
    TOOL,
    Delta,
    JsonInterpreter,
    add,
    as_int,
    as_str,
    as_text,
    error_of,
    load_json,
    note_malformed,
    note_no_choices,
    set_error,
)
from firsttoken.addon.apis.clouds import BEDROCK, CONVERSE
from firsttoken.addon.framing.eventstream import Message

#: the hop-reported timings a Bedrock stream carries in its body, as record.hop_headers names them
FIRST_BYTE = "amazon-bedrock-invocationmetrics.firstbytelatency"
INVOCATION = "amazon-bedrock-invocationmetrics.invocationlatency"
CONVERSE_LATENCY = "bedrock-converse-metrics.latencyms"


def frame_error(msg: Any) -> tuple[str, str | None] | None:
    """(message, type) of an ``exception`` or ``error`` frame, else None."""
    mt = msg.headers.get(":message-type", "event")
    if mt == "event":
        return None
    if mt == "exception":
        typ = as_str(msg.headers.get(":exception-type"))
        obj = load_json(msg.payload) if msg.payload else None
        found = error_of(obj, plain=True) if type(obj) is dict else None
        text = found[0] if found else (msg.payload.decode("utf-8", "replace").strip()[:1000] or typ or "exception frame")
        return text, typ or (found[1] if found else None)
    if mt == "error":
        return (as_str(msg.headers.get(":error-message")) or "error frame"), as_str(msg.headers.get(":error-code"))
    return None


def _reported(facts: Any, name: str, v: Any) -> None:
    if as_int(v) is not None or (type(v) is float and v >= 0):
        facts.reported[name] = str(v)


class _Frames:
    """What both Bedrock interpreters do with a frame before their dialect reads it."""

    def on_event(self, event: Any) -> list[Delta]:
        if type(event) is not Message:  # an SSE event: a mislabelled body, read as the base dialect
            return super().on_event(event)  # type: ignore[misc]
        out: list[Delta] = []
        try:
            if event.headers.get(":message-type", "event") == "event":
                self._frame(event, out)
            else:
                err = frame_error(event)
                if err is not None:
                    set_error(self.facts, *err)  # type: ignore[attr-defined]
        except Exception as e:
            if base.STRICT:
                raise
            note_malformed(self.facts, f"internal error: {type(e).__name__}")  # type: ignore[attr-defined]
        return out


class BedrockInvoke(_Frames, AnthropicMessages):
    """``/model/ID/invoke-with-response-stream``: each ``chunk`` frame's payload is
    ``{"bytes": base64 of one Anthropic stream event}``; ``/invoke`` answers a Message."""

    api = BEDROCK

    def _frame(self, msg: Any, out: list[Delta]) -> None:
        if msg.headers.get(":event-type") != "chunk":
            return  # (initial-response and the like carry nothing counted)
        raw = _chunk_bytes(msg.payload)
        if raw is None:
            note_malformed(self.facts, msg.payload.decode("utf-8", "replace"))
            return
        obj = load_json(raw)
        if type(obj) is not dict:
            note_malformed(self.facts, raw.decode("utf-8", "replace"))
            return
        self._chunk(obj, "", obj.get("type") if type(obj.get("type")) is str else "", out)
        metrics = obj.get("amazon-bedrock-invocationMetrics")
        if type(metrics) is dict:
            self._metrics(metrics)

    def _metrics(self, m: dict) -> None:
        f = self.facts
        _reported(f, FIRST_BYTE, m.get("firstByteLatency"))
        _reported(f, INVOCATION, m.get("invocationLatency"))
        if f.usage_prompt_tokens is None:
            f.usage_prompt_tokens = as_int(m.get("inputTokenCount"))
        if f.usage_completion_tokens is None:
            f.usage_completion_tokens = as_int(m.get("outputTokenCount"))


def _chunk_bytes(payload: bytes) -> bytes | None:
    """The Anthropic event a ``chunk`` payload wraps: ``{"bytes":"<base64>","p":"…"}``, read
    without a JSON parse when it has that exact shape, else parsed."""
    try:
        if payload.startswith(b'{"bytes":"'):
            end = payload.find(b'"', 10)
            if end > 0 and b"\\" not in payload[10:end]:
                return binascii.a2b_base64(payload[10:end])
        obj = load_json(payload)
        b64 = obj.get("bytes") if type(obj) is dict else None
        return binascii.a2b_base64(b64) if type(b64) is str else None
    except (binascii.Error, ValueError):
        return None


class BedrockConverse(_Frames, JsonInterpreter):
    """``/model/ID/converse-stream`` (frames named by ``:event-type``: messageStart,
    contentBlockStart, contentBlockDelta, contentBlockStop, messageStop, metadata) and ``/converse``."""

    api = CONVERSE

    def _frame(self, msg: Any, out: list[Delta]) -> None:
        obj = load_json(msg.payload) if msg.payload else {}
        if type(obj) is not dict:
            note_malformed(self.facts, msg.payload.decode("utf-8", "replace"))
            return
        self._event_obj(msg.event_type or "", obj, out)

    def _chunk(self, obj: dict, raw: str, event: str, out: list[Delta]) -> None:  # an SSE-framed copy (gateways)
        err = error_of(obj)
        if err is not None:
            set_error(self.facts, *err)
            return
        for name in ("contentBlockDelta", "contentBlockStart", "messageStop", "metadata", "messageStart"):
            inner = obj.get(name)
            if type(inner) is dict:
                self._event_obj(name, inner, out)
                return
        self._event_obj(event, obj, out)

    def _event_obj(self, kind: str, obj: dict, out: list[Delta]) -> None:
        f = self.facts
        if kind == "contentBlockDelta":
            d = obj.get("delta")
            if type(d) is dict:
                add(out, TEXT, d.get("text"))
                tool = d.get("toolUse")
                if type(tool) is dict:
                    add(out, TOOL, tool.get("input"))
                r = d.get("reasoningContent")
                if type(r) is dict:
                    add(out, REASONING, r.get("text"))
        elif kind == "contentBlockStart":
            start = obj.get("start")
            tool = start.get("toolUse") if type(start) is dict else None
            if type(tool) is dict:
                add(out, TOOL, tool.get("name"))
        elif kind == "messageStop":
            f.done = True
            reason = as_str(obj.get("stopReason"))
            if reason is not None:
                f.finish_reason = reason
        elif kind == "metadata":
            self._usage_metrics(obj)

    def _usage_metrics(self, obj: dict) -> None:
        f = self.facts
        u = obj.get("usage")
        if type(u) is dict:
            inp = as_int(u.get("inputTokens"))
            read = as_int(u.get("cacheReadInputTokens"))
            write = as_int(u.get("cacheWriteInputTokens"))
            if inp is not None or read is not None or write is not None:
                # like Anthropic's input_tokens, Converse's inputTokens leaves the cached tokens out
                f.usage_prompt_tokens = (inp or 0) + (read or 0) + (write or 0)
            if read is not None:
                f.usage_cached_tokens = read
            if write is not None:
                f.usage_cache_creation_tokens = write
            v = as_int(u.get("outputTokens"))
            if v is not None:
                f.usage_completion_tokens = v
        m = obj.get("metrics")
        if type(m) is dict:
            _reported(f, CONVERSE_LATENCY, m.get("latencyMs"))

    def _body(self, obj: dict, raw: str, out: list[Delta]) -> None:
        f = self.facts
        output = obj.get("output")
        message = output.get("message") if type(output) is dict else None
        err = error_of(obj, plain=message is None)
        if err is not None:
            set_error(f, *err)
        elif type(message) is not dict:
            note_no_choices(f, raw)
            return
        if type(message) is dict:
            for block in message.get("content") or ():
                if type(block) is not dict:
                    continue
                add(out, TEXT, block.get("text"))
                tool = block.get("toolUse")
                if type(tool) is dict:
                    add(out, TOOL, tool.get("name"))
                    if tool.get("input") is not None:
                        add(out, TOOL, as_text(tool.get("input"), 1 << 30))
                r = block.get("reasoningContent")
                rt = r.get("reasoningText") if type(r) is dict else None
                if type(rt) is dict:
                    add(out, REASONING, rt.get("text"))
        reason = as_str(obj.get("stopReason"))
        if reason is not None:
            f.finish_reason = reason
        self._usage_metrics(obj)
