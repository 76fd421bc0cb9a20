"""Shared types for the API interpreters.

An interpreter is pure and incremental: it is fed SSE events (``on_event``) or one whole
non-streaming body (``on_body``) and returns the token-bearing deltas each one carried,
while accumulating what the stream said about itself in ``facts``. No I/O, no clocks.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from typing import Any, Protocol

import orjson

from firsttoken.addon.engines import EngineReport
from firsttoken.addon.sse import SSEDecoder, SSEEvent

#: delta kinds; all but "reasoning" are visible output (they stop the TTFT clock); "audio" (the
#: Realtime API's audio chunks) carries no text: it times, it is not counted as characters
TEXT, REASONING, TOOL, REFUSAL, AUDIO = "text", "reasoning", "tool", "refusal", "audio"
VISIBLE = frozenset({TEXT, TOOL, REFUSAL, AUDIO})


@dataclass(slots=True)
class Delta:
    kind: str  # TEXT | REASONING | TOOL | REFUSAL
    text: str  # the generated characters (tool-call argument fragments for TOOL)


@dataclass
class ApiFacts:
    model: str | None = None
    response_id: str | None = None
    usage_prompt_tokens: int | None = None  # total input (Anthropic: input + cache read + cache creation)
    usage_completion_tokens: int | None = None
    usage_cached_tokens: int | None = None  # cache hits
    usage_cache_creation_tokens: int | None = None
    usage_reasoning_tokens: int | None = None
    finish_reason: str | None = None
    done: bool = False  # saw the API's terminal event ([DONE], message_stop, response.completed ...)
    error_message: str | None = None  # error object from the upstream (body, or event inside a 200 stream)
    error_type: str | None = None
    no_choices: str | None = None  # first ~300 chars of a 200 JSON body/chunk without choices/content
    malformed: int = 0  # data payloads that were not JSON
    malformed_sample: str | None = None  # first ~200 chars of the first one
    #: timings the provider reported in the body (Bedrock's invocationMetrics), hop_headers' names -> text
    reported: dict[str, str] = dataclasses.field(default_factory=dict)
    #: the model server's own report (llama.cpp timings, Ollama's final object, …): addon/engines
    engine: EngineReport = dataclasses.field(default_factory=EngineReport)


class Interpreter(Protocol):
    api: str
    facts: ApiFacts

    def on_event(self, event: SSEEvent) -> list[Delta]: ...

    def on_not_sse(self, text: str) -> None: ...

    def on_body(self, body: bytes) -> list[Delta]: ...


# ---- Helpers shared by the API interpreters: safe JSON, error and usage extraction, and the

#: tests set this to re-raise internal errors instead of counting them as malformed
STRICT = False

NO_CHOICES_CHARS = 300
MALFORMED_CHARS = 200
#: ... of a whole body that is not what the API sends (an error page: its title may come late)
BODY_SAMPLE_CHARS = 2000
ERROR_CHARS = 1000

#: chunks a stream's shape is looked for in (``JsonInterpreter._learn_shape``): a stream whose chunks
#: all differ stops being looked at
SHAPE_TRIES = 8
_JSON_SPACE = " \t\n\r"

_BAD: Any = object()  # load_json's "not JSON" marker
_loads = json.loads
_fast_loads = orjson.loads
def path_only(path: str) -> str:
    """A request target without its query string and fragment (the path a route or an API is judged by)."""
    for sep in ("?", "#"):
        i = path.find(sep)
        if i >= 0:
            path = path[:i]
    return path


def load_json(text: str | bytes) -> Any:
    """The parsed JSON value, or ``_BAD`` (never raises).

    orjson parses first: an event's JSON is the biggest cost of analysing a stream, and
    orjson takes a third of ``json.loads``'s time. Where it refuses (invalid JSON, but also
    NaN, lone surrogates, UTF-16) ``json.loads`` decides, so the values are the standard
    library's, with one difference: an integer beyond 64 bits comes back as a float (no API
    sends a count that large; ``as_int`` reads both alike)."""
    try:
        return _fast_loads(text)
    except Exception:
        pass
    try:
        return _loads(text)
    except (ValueError, TypeError, RecursionError):
        return _BAD


def first_int(*values: Any) -> int | None:
    """The first of ``values`` that is an integer count (see ``as_int``), else None."""
    for v in values:
        i = as_int(v)
        if i is not None:
            return i
    return None


def as_int(v: Any) -> int | None:
    """An integer count, or None (bools, strings, NaN, fractions are not counts)."""
    t = type(v)
    if t is int:
        return v
    if t is float and math.isfinite(v) and v.is_integer():
        return int(v)
    return None


def as_str(v: Any) -> str | None:
    """A non-empty string, or None."""
    return v if type(v) is str and v else None


def as_text(v: Any, limit: int = ERROR_CHARS) -> str:
    """Any JSON value as short text (strings as they are, the rest as compact JSON)."""
    if isinstance(v, str):
        return v[:limit]
    try:
        return json.dumps(v, ensure_ascii=False, separators=(",", ":"))[:limit]
    except (ValueError, TypeError, RecursionError):  # too deep to print
        return f"<{type(v).__name__}>"


def _code(v: Any) -> str | None:
    if type(v) is str:
        return v or None
    if type(v) is int:
        return str(v)
    return None


def _error_type(err: dict) -> str | None:
    """The most specific label: a string ``code``, else ``type``, else a numeric code."""
    code = err.get("code")
    if type(code) is str and code:
        return code
    typ = err.get("type")
    if type(typ) is str and typ and typ != "error":
        return typ
    return _code(code)


def error_of(obj: dict, plain: bool = False) -> tuple[str, str | None] | None:
    """(message, type) of an error object in ``obj``, or None.

    Recognises ``{"error": {...}}`` (OpenAI, Anthropic), ``{"error": "text"}``,
    ``{"type": "error", "message": ..., "code": ...}`` (flat Responses error event),
    ``{"object": "error", "message": ...}`` (vLLM) and,
    when ``plain`` (a body without the API's normal payload), ``{"detail": ...}`` and
    ``{"message": ...}`` bodies some gateways send.
    """
    err = obj.get("error")
    if type(err) is dict:
        if err:
            msg = err.get("message")
            if type(msg) is not str or not msg:
                msg = as_text(err)
            return msg[:ERROR_CHARS], _error_type(err)
    elif type(err) is str:
        if err:
            return err[:ERROR_CHARS], _code(obj.get("code"))
    elif err:  # a list, a number, true: still an error
        return as_text(err), None
    if obj.get("type") == "error" or obj.get("object") == "error":  # flat: Responses, vLLM
        msg = obj.get("message")
        if type(msg) is not str or not msg:
            msg = as_text(obj)
        return msg[:ERROR_CHARS], _error_type(obj)
    if plain:
        detail = obj.get("detail")
        if detail:
            return as_text(detail), _error_type(obj)
        msg = obj.get("message")
        if type(msg) is str and msg:
            return msg[:ERROR_CHARS], _error_type(obj)
    return None


def set_error(facts: ApiFacts, msg: str, typ: str | None) -> None:
    """Record an upstream error; the first one wins (later ones are usually echoes)."""
    if facts.error_message is None:
        facts.error_message = msg
        facts.error_type = typ


def note_malformed(facts: ApiFacts, raw: str, limit: int = MALFORMED_CHARS) -> None:
    facts.malformed += 1
    if facts.malformed_sample is None:
        facts.malformed_sample = raw[:limit]


def note_no_choices(facts: ApiFacts, raw: str) -> None:
    if facts.no_choices is None:
        facts.no_choices = raw[:NO_CHOICES_CHARS]


def note_ids(facts: ApiFacts, model: Any, rid: Any) -> None:
    """Take the first non-empty model and id the stream names."""
    if facts.model is None and type(model) is str and model:
        facts.model = model
    if facts.response_id is None and type(rid) is str and rid:
        facts.response_id = rid


def _details(u: dict, a: str, b: str) -> dict:
    d = u.get(a)
    if type(d) is not dict:
        d = u.get(b)
    return d if type(d) is dict else {}


def apply_openai_usage(facts: ApiFacts, u: dict) -> None:
    """Chat/Completions (``prompt_tokens`` ...) and Responses (``input_tokens`` ...) usage.

    Values are totals: present ones overwrite, absent ones leave what was there.
    Cache hits: ``*_details.cached_tokens``, else DeepSeek's ``prompt_cache_hit_tokens``,
    else ``cache_read_input_tokens`` (gateways fronting Anthropic). Cache writes:
    ``*_details.cache_write_tokens``, else ``cache_creation_input_tokens``.
    """
    pd = _details(u, "prompt_tokens_details", "input_tokens_details")
    found = {
        "usage_prompt_tokens": first_int(u.get("prompt_tokens"), u.get("input_tokens")),
        "usage_completion_tokens": first_int(u.get("completion_tokens"), u.get("output_tokens")),
        "usage_cached_tokens": first_int(pd.get("cached_tokens"), u.get("prompt_cache_hit_tokens"),
                                         u.get("cache_read_input_tokens")),
        "usage_cache_creation_tokens": first_int(pd.get("cache_write_tokens"), u.get("cache_creation_input_tokens")),
    }
    for field, v in found.items():
        if v is not None:  # a field the server did not send keeps what an earlier event said
            setattr(facts, field, v)
    cd = _details(u, "completion_tokens_details", "output_tokens_details")
    v = as_int(cd.get("reasoning_tokens"))
    if v is not None:
        facts.usage_reasoning_tokens = v


def add(out: list[Delta], kind: str, text: Any) -> None:
    """Append a delta when ``text`` is a non-empty string (empty strings are not tokens)."""
    if type(text) is str and text:
        out.append(Delta(kind, text))


def plain_text(text: str) -> bool:
    """Text JSON writes as it is between quotes (no quote, backslash or control character)."""
    return '"' not in text and "\\" not in text and text.isprintable()


def _value_at(raw: str, key: str, value: str) -> int | None:
    """Where the string ``value`` of ``key`` starts in ``raw`` (after its quote), when ``key`` occurs once
    in ``raw`` and ``value`` is written there as it is; else None."""
    quoted = f'"{key}"'
    if raw.count(quoted) != 1:
        return None
    i = raw.index(quoted) + len(quoted)
    n = len(raw)
    while i < n and raw[i] in _JSON_SPACE:
        i += 1
    if raw[i:i + 1] != ":":
        return None
    i += 1
    while i < n and raw[i] in _JSON_SPACE:
        i += 1
    if raw[i:i + 1] != '"' or not raw.startswith(value + '"', i + 1):
        return None
    return i + 1


def _is_done_marker(data: str) -> bool:
    return data.startswith("[DONE]") or (len(data) < 64 and data.strip().startswith("[DONE]"))


def _looks_like_sse(text: str) -> bool:
    head = text[:64].lstrip()
    return head.startswith(("data:", "event:", ":", "id:"))


class JsonInterpreter:
    """Plumbing shared by the interpreters; subclasses implement ``_chunk`` and ``_body``.

    ``on_event``: an SSE ``error`` event becomes the error fields; an empty payload is
    ignored; ``[DONE]`` calls ``_done_marker``; a payload that is not a JSON object is
    counted as malformed; a JSON object goes to ``_chunk``.
    ``on_body``: the whole body as one JSON object to ``_body`` (``facts.done`` is set once
    it parses); a body that is really an event stream (a mislabelled Content-Type) is
    decoded as one and fed through ``on_event``.
    """

    api = "other"

    def __init__(self) -> None:
        self.facts = ApiFacts()
        #: (before, after, kind, middle, text_first): the bytes around the text of a chunk read whole whose
        #: only effect was that text, as a delta of ``kind``; with ``middle``, the bytes between the text
        #: and a value no reader reads, ``text_first`` saying which comes first (``_learn_shape``)
        self._shape: tuple[str, str, str, str | None, bool] | None = None
        self._shape_tries = SHAPE_TRIES

    # -- public ------------------------------------------------------------------
    def on_event(self, event: SSEEvent) -> list[Delta]:
        shape = self._shape
        if shape is not None:  # an earlier chunk of no other effect, with only its text changed: unparsed
            data = event.data
            before, after, kind, middle, text_first = shape
            if (type(data) is str and data.startswith(before) and data.endswith(after)
                    and len(data) >= len(before) + len(after) and event.event != "error"):
                end = len(data) - len(after)
                if middle is None:
                    text = data[len(before):end]
                    if plain_text(text):
                        return [Delta(kind, text)] if text else []
                else:  # the first value ends at the first quote (a plain value has none)
                    q = data.find('"', len(before), end)
                    if q >= 0 and q + len(middle) <= end and data.startswith(middle, q):
                        first, second = data[len(before):q], data[q + len(middle):end]
                        if plain_text(first) and plain_text(second):
                            text = first if text_first else second
                            return [Delta(kind, text)] if text else []
        out: list[Delta] = []
        try:
            self._event(event, out)
        except Exception as e:  # a bug or an input shape we did not foresee: count it
            if STRICT:
                raise
            note_malformed(self.facts, f"internal error: {type(e).__name__}")
        return out

    def on_not_sse(self, text: str) -> None:
        """What an event-stream response sent instead of events (the lines that are no SSE
        field): a JSON error object becomes the error; anything else the malformed sample."""
        try:
            obj = load_json(text.strip())
            found = error_of(obj, plain=True) if type(obj) is dict else None
            if found is not None:
                set_error(self.facts, *found)
            else:
                note_malformed(self.facts, text.strip(), BODY_SAMPLE_CHARS)
        except Exception as e:
            if STRICT:
                raise
            note_malformed(self.facts, f"internal error: {type(e).__name__}")

    def on_body(self, body: bytes) -> list[Delta]:
        out: list[Delta] = []
        try:
            self._whole(body, out)
        except Exception as e:
            if STRICT:
                raise
            note_malformed(self.facts, f"internal error: {type(e).__name__}")
        return out

    # -- plumbing ----------------------------------------------------------------
    def _event(self, event: SSEEvent, out: list[Delta]) -> None:
        data = event.data
        if type(data) is not str:
            return
        if event.event == "error":
            self._error_payload(data)
            return
        if data[:1] != "{":  # (a JSON object, the common case, is neither blank nor [DONE])
            if not data or data.isspace():
                return
            if _is_done_marker(data):
                self._done_marker()
                return
        try:  # load_json, its first step inline (once an event: the common case is valid JSON)
            obj = _fast_loads(data)
        except Exception:
            obj = load_json(data)
        if type(obj) is not dict:
            note_malformed(self.facts, data)
            return
        self._chunk(obj, data, event.event, out)

    def _error_payload(self, data: str) -> None:
        obj = load_json(data) if data else _BAD
        found = None
        if type(obj) is dict:
            found = error_of(obj, plain=True)
        elif type(obj) is str and obj:
            found = (obj[:ERROR_CHARS], None)
        if found is None:
            found = (data.strip()[:ERROR_CHARS] or "error event", None)
        set_error(self.facts, *found)

    def _whole(self, body: Any, out: list[Delta]) -> None:
        if isinstance(body, str):
            text, raw = body, body.encode("utf-8", "replace")
        elif isinstance(body, (bytes, bytearray, memoryview)):
            raw = bytes(body)
            text = raw.decode("utf-8", "replace")
        else:
            return
        if text[:1] == "\ufeff":
            text = text[1:]
        if _looks_like_sse(text):
            dec = SSEDecoder()
            for ev in dec.feed(raw) + dec.close():
                self._event(ev, out)
            return
        obj = load_json(text)
        if type(obj) is not dict:
            note_malformed(self.facts, text, BODY_SAMPLE_CHARS)
            return
        self.facts.done = True
        self._body(obj, text, out)

    def _body_head(self, obj: dict, text: str, key: str) -> list | None:
        """Error / no-payload checks and ids common to every body: returns ``obj[key]``
        when it is a list (the API's payload), else None."""
        f = self.facts
        main = obj.get(key)
        if type(main) is not list:
            main = None
        err = error_of(obj, plain=main is None)
        if err is not None:
            set_error(f, *err)
        elif main is None:
            note_no_choices(f, text)
        note_ids(f, obj.get("model"), obj.get("id"))
        return main

    def _learn_shape(self, raw: str, key: str, text: str, kind: str, free: str | None = None,
                     free_value: str | None = None) -> None:
        """Keep the bytes around ``text`` in ``raw``, a chunk the caller read whole and knows had no
        effect but a ``kind`` delta of ``text`` (the value of ``key``), and no other it would have again
        (what else it set, it set only if unset): a later chunk that is those bytes around another
        plain text is that text's delta (``on_event``). ``free``: a key whose string value
        (``free_value``) no reader reads, which may differ from chunk to chunk (OpenAI's
        ``obfuscation``). Only a chunk with no escape anywhere, and each key once in it, has a shape."""
        self._shape_tries -= 1
        if "\\" in raw:  # (no escape: every key is written as it is)
            return
        at = _value_at(raw, key, text)
        if at is None:
            return
        if free is None:
            self._shape = (raw[:at], raw[at + len(text):], kind, None, True)
            return
        if free_value is None or (fat := _value_at(raw, free, free_value)) is None:
            return
        (a, alen), (b, blen) = sorted(((at, len(text)), (fat, len(free_value))))
        self._shape = (raw[:a], raw[b + blen:], kind, raw[a + alen:b], at < fat)

    # -- for subclasses ----------------------------------------------------------
    def _done_marker(self) -> None:
        """``data: [DONE]``: terminal for the OpenAI chat/completions streams only."""

    def _chunk(self, obj: dict, raw: str, event: str, out: list[Delta]) -> None:
        raise NotImplementedError

    def _body(self, obj: dict, raw: str, out: list[Delta]) -> None:
        raise NotImplementedError
