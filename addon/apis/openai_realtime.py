"""OpenAI Realtime (``/v1/realtime`` over a WebSocket): a turn's server events as token deltas.

A turn is the client's ``response.create`` to the server's ``response.done``; text, audio
transcript and audio deltas are visible output (GA names and the beta ones). The prompt is the
session's conversation, sent before the turn: not counted. docs/record.md ("WebSocket turns").
"""

from __future__ import annotations

from typing import Any

from firsttoken.addon.apis.base import (
    AUDIO,
    TEXT,
    TOOL,
    Delta,
    JsonInterpreter,
    as_int,
    as_str,
    error_of,
    note_ids,
    set_error,
)

_DELTA_KIND = {
    "response.output_text.delta": TEXT,
    "response.text.delta": TEXT,
    "response.output_audio_transcript.delta": TEXT,
    "response.audio_transcript.delta": TEXT,
    "response.function_call_arguments.delta": TOOL,
}
_AUDIO = frozenset({"response.output_audio.delta", "response.audio.delta"})


class OpenAIRealtime(JsonInterpreter):
    api = "openai.realtime"

    def _chunk(self, obj: dict, raw: str, event: str, out: list[Delta]) -> None:
        t = obj.get("type")
        kind = _DELTA_KIND.get(t)
        if kind is not None:
            d = obj.get("delta")
            if type(d) is str and d:
                out.append(Delta(kind, d))
        elif t in _AUDIO:
            if obj.get("delta"):
                out.append(Delta(AUDIO, ""))  # timed as output; base64 audio is no text to count
        elif t == "response.created":
            resp = obj.get("response")
            if type(resp) is dict:
                note_ids(self.facts, resp.get("model"), resp.get("id"))
        elif t == "response.done":
            self._done(obj.get("response"))
        elif t == "error":
            set_error(self.facts, *(error_of(obj) or ("error event", None)))

    def _done(self, resp: Any) -> None:
        f = self.facts
        f.done = True
        if type(resp) is not dict:
            return
        note_ids(f, resp.get("model"), resp.get("id"))
        u = resp.get("usage")
        if type(u) is dict:
            f.usage_prompt_tokens = as_int(u.get("input_tokens"))
            f.usage_completion_tokens = as_int(u.get("output_tokens"))
            d = u.get("input_token_details")
            if type(d) is dict:
                f.usage_cached_tokens = as_int(d.get("cached_tokens"))
        status = as_str(resp.get("status"))
        details = resp.get("status_details")
        if type(details) is dict:
            reason = as_str(details.get("reason"))
            if reason is not None:
                f.finish_reason = reason
            err = details.get("error")
            if type(err) is dict and status == "failed":
                set_error(f, *(error_of({"error": err}) or ("response failed", None)))
        if status == "failed" and f.error_message is None:
            set_error(f, "response.done with status failed", "response.failed")
        if f.finish_reason is None and status in ("completed", "cancelled", "incomplete"):
            f.finish_reason = status

    def _body(self, obj: dict, raw: str, out: list[Delta]) -> None:
        self._done(obj)
