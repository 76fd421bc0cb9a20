"""OpenAI legacy Completions (``POST .../completions``).

Stream: ``data: {text_completion}`` events (``choices[].text`` -> TEXT, ``finish_reason``,
``usage`` on the last chunk when asked for), then ``data: [DONE]``. Body: the same object
with whole texts. Errors and chunks without ``choices``/``usage`` as for chat.
"""

from __future__ import annotations

from firsttoken.addon.apis.base import (
    TEXT,
    Delta,
    JsonInterpreter,
    add,
    apply_openai_usage,
    error_of,
    note_ids,
    note_no_choices,
    set_error,
)
from firsttoken.addon.engines import read_object as read_engine


class OpenAICompletions(JsonInterpreter):
    api = "openai.completions"

    def _done_marker(self) -> None:
        self.facts.done = True

    def _choices(self, choices: list, out: list[Delta]) -> None:
        f = self.facts
        for ch in choices:
            if type(ch) is dict:
                add(out, TEXT, ch.get("text"))
                fr = ch.get("finish_reason")
                if type(fr) is str and fr:
                    f.finish_reason = fr

    def _chunk(self, obj: dict, raw: str, event: str, out: list[Delta]) -> None:
        f = self.facts
        note_ids(f, obj.get("model"), obj.get("id"))
        err = error_of(obj)
        if err is not None:
            set_error(f, *err)
        usage = obj.get("usage")
        if type(usage) is dict:
            apply_openai_usage(f, usage)
        read_engine(obj, f.engine)
        choices = obj.get("choices")
        if type(choices) is list:
            self._choices(choices, out)
        elif err is None and type(usage) is not dict and event == "message":
            note_no_choices(f, raw)

    def _body(self, obj: dict, raw: str, out: list[Delta]) -> None:
        choices = self._body_head(obj, raw, "choices")
        usage = obj.get("usage")
        if type(usage) is dict:
            apply_openai_usage(self.facts, usage)
        read_engine(obj, self.facts.engine)
        if choices is not None:
            self._choices(choices, out)
