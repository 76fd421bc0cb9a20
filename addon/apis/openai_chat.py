"""OpenAI Chat Completions (``POST .../chat/completions``) and the many servers that copy it.

Which delta counts as what (text, reasoning, refusal, tool calls): docs/record.md ("What counts as a token").
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
    as_text,
    error_of,
    note_ids,
    note_no_choices,
    set_error,
)
from firsttoken.addon.engines import read_object as read_engine

#: a chunk with only these keys (or others, null: what every reader takes for absent) and one choice whose
#: delta is text alone and with no finish reason has no effect but its text once a chunk of its shape was
#: read: what else it sets is set only if unset (ids, an error, the engine's name), and was by that chunk
_SHAPE_KEYS = frozenset({"id", "object", "created", "model", "service_tier", "system_fingerprint", "choices"})
#: a key no reader reads, whose string value differs from chunk to chunk (OpenAI pads each chunk with it)
_FREE_KEY = "obfuscation"
#: a delta's one string, when its other fields are null: the delta it is (``_delta``: ``_content``, ``_reasoning``)
_DELTA_KINDS = {"content": TEXT, "reasoning_content": REASONING, "reasoning": REASONING}


def _content(c: Any, out: list[Delta]) -> None:
    if type(c) is str:
        if c:
            out.append(Delta(TEXT, c))
    elif type(c) is list:  # content parts (Mistral and others)
        for part in c:
            if type(part) is str:
                add(out, TEXT, part)
            elif type(part) is dict:
                t = part.get("type")
                if t == "thinking":
                    _thinking(part.get("thinking"), out)
                elif t is None or t == "text" or t == "output_text":
                    add(out, TEXT, part.get("text"))


def _thinking(v: Any, out: list[Delta]) -> None:
    if type(v) is str:
        add(out, REASONING, v)
    elif type(v) is list:
        for p in v:
            if type(p) is dict:
                add(out, REASONING, p.get("text"))
            else:
                add(out, REASONING, p)


def _reasoning(d: dict, out: list[Delta]) -> None:
    r = d.get("reasoning_content")
    if type(r) is not str or not r:
        r = d.get("reasoning")
    if type(r) is str and r:
        out.append(Delta(REASONING, r))
        return
    # only when neither carries text: OpenRouter sends the same text in both
    details = d.get("reasoning_details")
    if type(details) is list:
        for item in details:
            if type(item) is dict:
                t = item.get("text")
                if type(t) is not str or not t:
                    t = item.get("summary")
                add(out, REASONING, t)


class OpenAIChat(JsonInterpreter):
    api = "openai.chat"

    def __init__(self) -> None:
        super().__init__()
        self._named: set = set()  # tool calls whose name was already counted
        self._sglang_text = ""  # SGLang's native stream: the output so far

    # -- stream ------------------------------------------------------------------
    def _text_only(self, obj: dict, raw: str) -> None:
        """Keep ``raw`` as the stream's shape (``_learn_shape``) if it is a chunk of no other effect than
        its text (see _SHAPE_KEYS): a delta of one string (``content``, or ``reasoning_content`` /
        ``reasoning``: reasoning) whose other fields are all null, as reasoning models send them."""
        for k, v in obj.items():
            if v is not None and k not in _SHAPE_KEYS and (k != _FREE_KEY or type(v) is not str):
                self._shape_tries -= 1
                return
        choices = obj.get("choices")
        if type(choices) is list and len(choices) == 1 and type(ch := choices[0]) is dict \
                and ch.get("finish_reason") is None and type(d := ch.get("delta")) is dict:
            key = None
            for k, v in d.items():
                if v is not None:
                    if key is not None or type(v) is not str or k not in _DELTA_KINDS:
                        break
                    key = k
            else:
                if key is not None:
                    free = obj.get(_FREE_KEY)
                    self._learn_shape(raw, key, d[key], _DELTA_KINDS[key], _FREE_KEY if free is not None else None,
                                      free)
                    return
        self._shape_tries -= 1

    def _done_marker(self) -> None:
        self.facts.done = True

    def _chunk(self, obj: dict, raw: str, event: str, out: list[Delta]) -> None:
        f = self.facts
        if f.model is None or f.response_id is None:
            note_ids(f, obj.get("model"), obj.get("id"))
        choices = obj.get("choices")
        usage = obj.get("usage")
        err = error_of(obj)
        if err is not None:
            set_error(f, *err)
        if type(usage) is dict:
            apply_openai_usage(f, usage)
        read_engine(obj, f.engine)
        if type(choices) is list:
            for ch in choices:
                if type(ch) is not dict:
                    continue
                d = ch.get("delta")
                if type(d) is not dict:
                    d = ch.get("message")  # a few servers stream whole messages
                if type(d) is dict:
                    if len(d) == 1 and type(c := d.get("content")) is str:  # _delta's common case, inline
                        if c:
                            out.append(Delta(TEXT, c))
                    else:
                        self._delta(d, ch.get("index"), out)
                fr = ch.get("finish_reason")
                if type(fr) is str and fr:
                    f.finish_reason = fr
        elif type(obj.get("token")) is dict:  # TGI's own /generate_stream, read where its path is unknown
            self._tgi_token(obj, out)
        elif type(obj.get("meta_info")) is dict and type(obj.get("text")) is str:  # SGLang's own /generate stream
            self._sglang(obj, out)
        elif err is None and type(usage) is not dict and "moderation" not in obj:
            if event == "message":
                note_no_choices(f, raw)
        if self._shape_tries > 0:
            self._text_only(obj, raw)

    def _sglang(self, obj: dict, out: list[Delta]) -> None:
        """One event of SGLang's native ``/generate`` stream: ``text`` is the whole output so far (its default), or
        only the new part (``--incremental-streaming-output``); ``meta_info`` holds the counts (read as the engine's
        report) and, at the end, ``finish_reason`` (``{"type": "length", ...}``)."""
        text, seen = obj["text"], self._sglang_text
        if seen and text.startswith(seen):  # the whole output so far: the new part is what it adds
            add(out, TEXT, text[len(seen):])
            self._sglang_text = text
        else:
            add(out, TEXT, text)
            self._sglang_text = seen + text
        meta = obj["meta_info"]
        fr = meta.get("finish_reason")
        if type(fr) is dict and type(fr.get("type")) is str and fr["type"]:
            self.facts.finish_reason = fr["type"]
        for key, attr in (("prompt_tokens", "usage_prompt_tokens"), ("completion_tokens", "usage_completion_tokens")):
            n = meta.get(key)
            if type(n) is int and not isinstance(n, bool):
                setattr(self.facts, attr, n)

    def _tgi_token(self, obj: dict, out: list[Delta]) -> None:
        """One event of text-generation-inference's native stream (its ``StreamResponse``): ``token.text`` is the
        output unless the token is ``special``; the last event adds ``details`` (``finish_reason``,
        ``generated_tokens``) and the whole ``generated_text``, which repeats the tokens and is not counted again."""
        tok = obj["token"]
        if tok.get("special") is not True:
            add(out, TEXT, tok.get("text"))
        details = obj.get("details")
        if type(details) is dict:
            fr = details.get("finish_reason")
            if type(fr) is str and fr:
                self.facts.finish_reason = fr
                self.facts.done = True  # (TGI sends no [DONE]: the event with details is its last)
            n = details.get("generated_tokens")
            if type(n) is int and not isinstance(n, bool):
                self.facts.usage_completion_tokens = n

    def _delta(self, d: dict, choice: Any, out: list[Delta]) -> None:
        if len(d) == 1 and "content" in d:  # the common delta: nothing else to look for
            _content(d["content"], out)
            return
        _reasoning(d, out)
        _content(d.get("content"), out)
        add(out, REFUSAL, d.get("refusal"))
        calls = d.get("tool_calls")
        if type(calls) is list:
            for i, tc in enumerate(calls):
                if type(tc) is dict:
                    idx = tc.get("index")
                    if type(idx) is not int:
                        idx = tc.get("id") or i
                    fn = tc.get("function")
                    if type(fn) is dict:
                        self._tool(choice, idx, fn.get("name"), fn.get("arguments"), out)
                    else:
                        fn = tc.get("custom")
                        if type(fn) is dict:
                            self._tool(choice, idx, fn.get("name"), fn.get("input"), out)
        fc = d.get("function_call")
        if type(fc) is dict:
            self._tool(choice, "function_call", fc.get("name"), fc.get("arguments"), out)

    def _tool(self, choice: Any, idx: Any, name: Any, args: Any, out: list[Delta]) -> None:
        if type(name) is str and name:  # the model generates the name: output, so it stops the TTFT clock
            key = (choice if type(choice) is int else 0, idx if type(idx) in (int, str) else 0)
            if key not in self._named:
                self._named.add(key)
                out.append(Delta(TOOL, name))
        if type(args) is str:
            if args:
                out.append(Delta(TOOL, args))
        elif type(args) is dict and args:  # some servers send parsed arguments
            out.append(Delta(TOOL, as_text(args, 1 << 30)))

    # -- body --------------------------------------------------------------------
    def _body(self, obj: dict, raw: str, out: list[Delta]) -> None:
        f = self.facts
        choices = self._body_head(obj, raw, "choices")
        usage = obj.get("usage")
        if type(usage) is dict:
            apply_openai_usage(f, usage)
        read_engine(obj, f.engine)
        if choices is None:
            return
        for ch in choices:
            if type(ch) is not dict:
                continue
            m = ch.get("message")
            if type(m) is not dict:
                m = ch.get("delta")
            if type(m) is dict:
                self._delta(m, ch.get("index"), out)
            elif type(ch.get("text")) is str:  # a completions-shaped choice
                add(out, TEXT, ch.get("text"))
            fr = ch.get("finish_reason")
            if type(fr) is str and fr:
                f.finish_reason = fr
