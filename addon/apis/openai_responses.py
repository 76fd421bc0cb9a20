"""OpenAI Responses (``POST .../responses``): typed stream events and the Response body as token deltas.

The type is the JSON ``type`` field (the SSE ``event:`` line, which may be absent, is only a
fallback). Which event counts as what: docs/record.md ("What counts as a token").
"""

from __future__ import annotations

from typing import Any

from firsttoken.addon.apis.base import (
    REASONING,
    REFUSAL,
    TEXT,
    TOOL,
    Delta,
    JsonInterpreter,
    add,
    apply_openai_usage,
    as_str,
    error_of,
    note_ids,
    note_no_choices,
    set_error,
)

_DELTA_KIND = {
    "response.output_text.delta": TEXT,
    "response.refusal.delta": REFUSAL,
    "response.reasoning_summary_text.delta": REASONING,
    "response.reasoning_text.delta": REASONING,
    "response.function_call_arguments.delta": TOOL,
    "response.custom_tool_call_input.delta": TOOL,
    "response.mcp_call_arguments.delta": TOOL,
    "response.code_interpreter_call_code.delta": TOOL,
}
_TOOL_ITEMS = frozenset({"function_call", "custom_tool_call", "mcp_call"})
_TERMINAL = frozenset({"response.completed", "response.incomplete", "response.failed"})
_STARTED = frozenset({"response.created", "response.in_progress", "response.queued"})


def _texts(parts: Any, kind: str, key: str, out: list[Delta]) -> None:
    if type(parts) is list:
        for p in parts:
            if type(p) is dict:
                add(out, kind, p.get(key))


def output_deltas(output: list, out: list[Delta]) -> None:
    """Deltas for the items of a Response's ``output``."""
    for item in output:
        if type(item) is not dict:
            continue
        t = item.get("type")
        if type(t) is not str:
            continue
        if t == "message":
            content = item.get("content")
            if type(content) is list:
                for p in content:
                    if type(p) is dict:
                        pt = p.get("type")
                        if pt == "refusal":
                            add(out, REFUSAL, p.get("refusal"))
                        else:
                            add(out, TEXT, p.get("text"))
        elif t == "reasoning":
            _texts(item.get("summary"), REASONING, "text", out)
            _texts(item.get("content"), REASONING, "text", out)
        elif t in _TOOL_ITEMS:
            add(out, TOOL, item.get("name"))
            add(out, TOOL, item.get("input") if t == "custom_tool_call" else item.get("arguments"))
        elif t == "code_interpreter_call":
            add(out, TOOL, item.get("code"))


class OpenAIResponses(JsonInterpreter):
    api = "openai.responses"

    def __init__(self) -> None:
        super().__init__()
        self._emitted = False  # any delta returned yet

    # -- stream ------------------------------------------------------------------
    def _chunk(self, obj: dict, raw: str, event: str, out: list[Delta]) -> None:
        t = obj.get("type")
        if type(t) is not str:
            if event != "message":
                t = event
            else:
                err = error_of(obj)
                if err is not None:
                    set_error(self.facts, *err)
                else:
                    note_no_choices(self.facts, raw)
                return
        kind = _DELTA_KIND.get(t)
        if kind is not None:
            d = obj.get("delta")
            if type(d) is str and d:
                out.append(Delta(kind, d))
                self._emitted = True
        elif t == "response.output_item.added":
            item = obj.get("item")
            if type(item) is dict and item.get("type") in ("function_call", "custom_tool_call", "mcp_call"):
                name = as_str(item.get("name"))
                if name is not None:
                    out.append(Delta(TOOL, name))
                    self._emitted = True
        elif t in _STARTED:
            resp = obj.get("response")
            if type(resp) is dict:
                note_ids(self.facts, resp.get("model"), resp.get("id"))
        elif t in _TERMINAL:
            self._terminal(t, obj.get("response"), out)
        elif t == "error":
            err = error_of(obj)
            set_error(self.facts, *(err or ("error event", None)))

    def _terminal(self, t: str, resp: Any, out: list[Delta]) -> None:
        f = self.facts
        f.done = True
        if type(resp) is not dict:
            resp = {}
        self._response(resp)
        if t == "response.failed" and f.error_message is None:
            set_error(f, "response.failed without an error object", "response.failed")
        if not self._emitted:  # a gateway that "streams" only the final response
            output = resp.get("output")
            if type(output) is list:
                output_deltas(output, out)
            self._emitted = bool(out)

    def _response(self, resp: dict) -> None:
        """Facts from a Response object (terminal event or body)."""
        f = self.facts
        note_ids(f, resp.get("model"), resp.get("id"))
        usage = resp.get("usage")
        if type(usage) is dict:
            apply_openai_usage(f, usage)
        err = resp.get("error")
        if type(err) is dict and err:
            found = error_of(resp)
            if found is not None:
                set_error(f, *found)
        details = resp.get("incomplete_details")
        if type(details) is dict:
            reason = as_str(details.get("reason"))
            if reason is not None:
                f.finish_reason = reason

    # -- body --------------------------------------------------------------------
    def _body(self, obj: dict, raw: str, out: list[Delta]) -> None:
        output = self._body_head(obj, raw, "output")
        self._response(obj)
        if output is not None:
            output_deltas(output, out)
