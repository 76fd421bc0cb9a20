"""Anthropic Messages (``POST .../messages``): its stream events and body as token deltas and usage.

Which event counts as what, and the usage mapping: docs/record.md ("What counts as a token").
"""

from __future__ import annotations

import orjson

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
    note_ids,
    note_no_choices,
    set_error,
)

_TOOL_BLOCKS = frozenset({"tool_use", "server_tool_use", "mcp_tool_use"})


def block_deltas(block: dict, out: list[Delta], whole: bool) -> None:
    """Deltas for one content block (``whole``: a finished block from a body, whose tool
    input is emitted as JSON; in a stream the input arrives as ``input_json_delta``)."""
    t = block.get("type")
    if type(t) is not str:
        return
    if t == "text":
        add(out, TEXT, block.get("text"))
    elif t == "thinking":
        add(out, REASONING, block.get("thinking"))
    elif t in _TOOL_BLOCKS:
        add(out, TOOL, block.get("name"))
        inp = block.get("input")
        if whole or (type(inp) is dict and inp):
            if type(inp) is str:
                add(out, TOOL, inp)
            elif inp is not None:
                add(out, TOOL, as_text(inp, 1 << 30))


class AnthropicMessages(JsonInterpreter):
    api = "anthropic.messages"

    def __init__(self) -> None:
        super().__init__()
        self._input: int | None = None
        self._cache_read: int | None = None
        self._cache_creation: int | None = None

    # -- stream ------------------------------------------------------------------
    def _chunk(self, obj: dict, raw: str, event: str, out: list[Delta]) -> None:
        f = self.facts
        t = obj.get("type")
        if type(t) is not str:
            t = event
        if t == "content_block_delta":
            d = obj.get("delta")
            if type(d) is dict:
                dt = d.get("type")
                if dt == "text_delta":
                    text = d.get("text")
                    add(out, TEXT, text)
                    if self._shape_tries > 0 and type(text) is str and obj.get("type") == t:
                        self._learn_shape(raw, "text", text, TEXT)  # (such a delta has no other effect)
                elif dt == "thinking_delta":
                    text = d.get("thinking")
                    add(out, REASONING, text)
                    if self._shape_tries > 0 and type(text) is str and obj.get("type") == t:
                        self._learn_shape(raw, "thinking", text, REASONING)
                elif dt == "input_json_delta":
                    add(out, TOOL, d.get("partial_json"))
        elif t == "content_block_start":
            block = obj.get("content_block")
            if type(block) is dict:
                block_deltas(block, out, whole=False)
        elif t == "message_delta":
            d = obj.get("delta")
            if type(d) is dict:
                reason = as_str(d.get("stop_reason"))
                if reason is not None:
                    f.finish_reason = reason
            usage = obj.get("usage")
            if type(usage) is dict:
                self._usage(usage)
        elif t == "message_start":
            msg = obj.get("message")
            if type(msg) is dict:
                self._message(msg, out)
        elif t == "message_stop":
            f.done = True
        elif t == "error":
            set_error(f, *(error_of(obj) or ("error event", None)))
        elif t == "message":
            if obj.get("type") == "message":  # a whole Message as one event (some gateways)
                self._message(obj, out)
            else:  # no type at all: not an Anthropic event
                err = error_of(obj)
                if err is not None:
                    set_error(f, *err)
                else:
                    note_no_choices(f, raw)
        # ping, content_block_stop and unknown types carry nothing we count

    def _message(self, msg: dict, out: list[Delta]) -> None:
        """A Message object (``message_start`` or a body)."""
        f = self.facts
        note_ids(f, msg.get("model"), msg.get("id"))
        usage = msg.get("usage")
        if type(usage) is dict:
            self._usage(usage)
        reason = as_str(msg.get("stop_reason"))
        if reason is not None:
            f.finish_reason = reason
        content = msg.get("content")
        if type(content) is list:  # empty in a real stream's message_start
            for block in content:
                if type(block) is dict:
                    block_deltas(block, out, whole=True)

    def _usage(self, u: dict) -> None:
        # message_delta's usage holds totals: a present value overwrites (some servers send the input
        # and cache counts only there), an absent one keeps message_start's
        f = self.facts
        v = as_int(u.get("input_tokens"))
        if v is not None:
            self._input = v
        v = as_int(u.get("cache_read_input_tokens"))
        if v is not None:
            self._cache_read = v
            f.usage_cached_tokens = v
        v = as_int(u.get("cache_creation_input_tokens"))
        if v is not None:
            self._cache_creation = v
            f.usage_cache_creation_tokens = v
        # Anthropic's input_tokens leaves the cached tokens out
        if self._input is not None or self._cache_read is not None or self._cache_creation is not None:
            f.usage_prompt_tokens = (self._input or 0) + (self._cache_read or 0) + (self._cache_creation or 0)
        v = as_int(u.get("output_tokens"))
        if v is not None:
            f.usage_completion_tokens = v
        details = u.get("output_tokens_details")
        if type(details) is dict:
            v = as_int(details.get("thinking_tokens"))
            if v is not None:
                f.usage_reasoning_tokens = v

    # -- body --------------------------------------------------------------------
    def _body(self, obj: dict, raw: str, out: list[Delta]) -> None:
        self._body_head(obj, raw, "content")
        self._message(obj, out)


class AnthropicVertex(AnthropicMessages):
    """Anthropic's Messages on Vertex AI (``…:streamRawPredict``, ``:rawPredict``): the same events
    and bodies; the model is in the URL (``addon.apis.clouds.url_facts``)."""

    api = "anthropic.vertex"

    def on_body(self, body: bytes) -> list[Delta]:
        # Vertex AI wraps some errors in a list ([{"error": {"code": 429, "status": ...}}]): read the first
        head = bytes(body[:64]).lstrip() if isinstance(body, (bytes, bytearray, memoryview)) else b""
        if head[:1] == b"[":
            obj = load_json(bytes(body))
            if type(obj) is list and obj and type(obj[0]) is dict:
                body = orjson.dumps(obj[0])
        return super().on_body(body)
