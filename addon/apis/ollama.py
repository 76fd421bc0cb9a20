"""Ollama's native API: ``POST …/api/chat`` (``ollama.chat``) and ``…/api/generate`` (``ollama.generate``),
one JSON object per NDJSON line (or one whole body with ``stream: false``), the last ``done: true``
with the engine's report (addon/engines). What counts as what: docs/record.md ("Ollama").
"""

from __future__ import annotations

from typing import Any

from firsttoken.addon.apis.base import (
    REASONING,
    TEXT,
    TOOL,
    Delta,
    JsonInterpreter,
    add,
    as_int,
    as_text,
    error_of,
    load_json,
    note_ids,
    note_no_choices,
    set_error,
)
from firsttoken.addon.engines import read_ollama
from firsttoken.addon.sse import SSEEvent

CHAT, GENERATE = "ollama.chat", "ollama.generate"
#: the paths' last segments (after any prefix: ``/api/chat``, ``/ollama/api/generate``)
PATHS = {"/api/chat": CHAT, "/api/generate": GENERATE}
#: the terminal line, as docs and findings name it
TERMINATOR = '"done": true'


def detect(p: str) -> str | None:
    """The Ollama API of a POST path (lower case, no query, no trailing slash), else None."""
    for suffix, api in PATHS.items():
        if p.endswith(suffix):
            return api
    return None


def request_options(body: dict) -> dict[str, Any]:
    """What an Ollama request body says beside OpenAI's fields: ``stream`` defaults to true,
    ``options.num_predict`` is the output limit, ``options.num_ctx`` the context it asked for."""
    out: dict[str, Any] = {"stream": body["stream"] if type(body.get("stream")) is bool else True}
    opts = body.get("options")
    if type(opts) is dict:
        n = as_int(opts.get("num_predict"))
        if n is not None and n >= 0:
            out["max_tokens"] = n
        c = as_int(opts.get("num_ctx"))
        if c is not None and c > 0:
            out["num_ctx"] = c
    return out


class _Ollama(JsonInterpreter):
    """One object of either API; ``_text`` picks its visible text and reasoning."""

    def _chunk(self, obj: dict, raw: str, event: str, out: list[Delta]) -> None:
        self._object(obj, raw, out)

    def _body(self, obj: dict, raw: str, out: list[Delta]) -> None:
        self.facts.done = False  # (set by the object's own ``done``, not by a body that parsed)
        self._object(obj, raw, out)

    def on_body(self, body: bytes) -> list[Delta]:
        """A whole body: one object (``stream: false``, an error; pretty-printed too, by a hop or a
        mock), or several lines of a stream sent under a plain JSON Content-Type (each read as a
        stream line, untimed)."""
        raw = bytes(body) if isinstance(body, (bytes, bytearray, memoryview)) else b""
        text = raw.strip()
        if b"\n" not in text or isinstance(load_json(text), (dict, list)):
            return super().on_body(body)
        out: list[Delta] = []
        for line in text.split(b"\n"):
            out += self.on_event(SSEEvent("message", line.decode("utf-8", "replace").strip()))
        return out

    def _object(self, obj: dict, raw: str, out: list[Delta]) -> None:
        f = self.facts
        err = error_of(obj)
        if err is not None:
            set_error(f, *err)
        note_ids(f, obj.get("model"), None)
        known = self._text(obj, out)
        reason = obj.get("done_reason")
        if type(reason) is str and reason:
            f.finish_reason = reason
        if obj.get("done") is True:
            f.done = True
            read_ollama(obj, f.engine)
            p, c = as_int(obj.get("prompt_eval_count")), as_int(obj.get("eval_count"))
            if p is not None:
                f.usage_prompt_tokens = p
            if c is not None:
                f.usage_completion_tokens = c
        elif not known and err is None and "done" not in obj:
            note_no_choices(f, raw)

    def _text(self, obj: dict, out: list[Delta]) -> bool:
        raise NotImplementedError


def _tools(calls: Any, out: list[Delta]) -> None:
    """``tool_calls``: each whole in one object, its arguments a JSON object (not a string)."""
    if type(calls) is not list:
        return
    for tc in calls:
        fn = tc.get("function") if type(tc) is dict else None
        if type(fn) is not dict:
            continue
        add(out, TOOL, fn.get("name"))
        args = fn.get("arguments")
        if type(args) is str:
            add(out, TOOL, args)
        elif args:
            out.append(Delta(TOOL, as_text(args, 1 << 30)))


class OllamaChat(_Ollama):
    api = CHAT

    def _text(self, obj: dict, out: list[Delta]) -> bool:
        m = obj.get("message")
        if type(m) is not dict:
            return False
        add(out, REASONING, m.get("thinking"))
        add(out, TEXT, m.get("content"))
        _tools(m.get("tool_calls"), out)
        return True


class OllamaGenerate(_Ollama):
    api = GENERATE

    def _text(self, obj: dict, out: list[Delta]) -> bool:
        if "response" not in obj and "thinking" not in obj:
            return False
        add(out, REASONING, obj.get("thinking"))
        add(out, TEXT, obj.get("response"))
        return True


__all__ = ["CHAT", "GENERATE", "PATHS", "TERMINATOR", "OllamaChat", "OllamaGenerate", "detect", "request_options"]
