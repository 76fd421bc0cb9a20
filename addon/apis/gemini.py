"""Google's Gemini API (``…/models/{model}:streamGenerateContent|generateContent``, also on Vertex AI):
its path (model, method), its SSE chunks and bodies as token deltas, usage and Google's error shape.

What counts as what, the usage mapping and the error reasons: docs/record.md ("Gemini").
"""

from __future__ import annotations

import re
from typing import Any

from firsttoken.addon.apis import base
from firsttoken.addon.apis.base import (
    BODY_SAMPLE_CHARS,
    NO_CHOICES_CHARS,
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
    note_malformed,
    note_no_choices,
    set_error,
)

API = "gemini.generate"
#: ``/v1beta/models/M:method``, ``/v1/projects/P/locations/L/publishers/google/models/M:method``
#: (Vertex AI; express mode without the project), ``/v1beta/tunedModels/M:method``
_PATH = re.compile(r"/(?:publishers/google/)?(?:tuned)?models/(?P<model>[^/:?#]+):(?P<method>[A-Za-z]+)(?=$|[?#])")
#: ``finish_reason`` of a prompt Gemini refused (``promptFeedback.blockReason``): ``blocked:SAFETY``
BLOCKED = "blocked:"
#: candidate finish reasons that mean a content filter stopped the answer
FILTERED = frozenset({"SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "IMAGE_SAFETY",
                      "IMAGE_PROHIBITED_CONTENT", "LANGUAGE"})
#: the methods that make the model generate (the others are recorded, never timed as generations)
GENERATE = frozenset({"generatecontent", "streamgeneratecontent"})
#: Vertex AI's hosts and paths (``gen_ai.provider.name``: ``gcp.vertex_ai``, else ``gcp.gemini``)
_VERTEX = re.compile(r"/publishers/google/|aiplatform\.googleapis\.com")


def gemini_call(method: str, path: str) -> tuple[str, str] | None:
    """``(model, method)`` of a Gemini API call (``method`` lower case: ``streamgeneratecontent``,
    ``generatecontent``, ``counttokens``, ``embedcontent`` ...), or None when ``path`` is none."""
    if type(method) is not str or method.upper() != "POST" or type(path) is not str:
        return None
    bare = base.path_only(path)
    m = _PATH.search(bare)
    if m is None or ("/publishers/" in bare.lower() and "/publishers/google/" not in bare.lower()):
        return None  # another publisher's model on Vertex AI (Anthropic's :streamRawPredict): not Gemini
    return m.group("model"), m.group("method").lower()


def detect(method: str, path: str) -> str | None:
    """``gemini.generate`` for a request that makes a Gemini model generate, else None."""
    call = gemini_call(method, path)
    return API if call is not None and call[1] in GENERATE else None


def path_facts(method: str, path: str | None) -> dict[str, Any]:
    """What a Gemini path says about its request: the model, and whether it streams (the method;
    ``alt=sse`` only picks the framing). Empty for other paths."""
    call = gemini_call(method, path or "")
    if call is None:
        return {}
    out: dict[str, Any] = {"model": call[0]}
    if call[1] in GENERATE:
        out["stream"] = call[1] == "streamgeneratecontent"
    return out


def is_vertex(path: str | None, upstream: str | None = None) -> bool:
    """Whether a Gemini request went to Vertex AI (its project path or host) rather than the Gemini API."""
    return bool(_VERTEX.search(path or "") or _VERTEX.search(upstream or ""))


def max_output_tokens(body: dict) -> int | None:
    """``generationConfig.maxOutputTokens`` of a request body."""
    cfg = body.get("generationConfig")
    if type(cfg) is not dict:
        cfg = body.get("generation_config")
    if type(cfg) is not dict:
        return None
    return as_int(cfg.get("maxOutputTokens", cfg.get("max_output_tokens")))


def google_error(err: dict) -> tuple[str, str | None, float | None]:
    """(message, type, retry delay in s) of Google's ``{"error": {"code", "message", "status",
    "details"}}``: the type is the most specific label, a ``details[].reason`` (``API_KEY_INVALID``)
    else the ``status`` (``RESOURCE_EXHAUSTED``); the delay is a ``RetryInfo``'s ``retryDelay``."""
    msg = err.get("message")
    msg = msg if type(msg) is str and msg else as_text(err)
    reason, delay = None, None
    details = err.get("details")
    for d in details if type(details) is list else ():
        if type(d) is not dict:
            continue
        if reason is None:
            reason = as_str(d.get("reason"))
        if delay is None and type(d.get("retryDelay")) is str:
            m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)s\s*", d["retryDelay"])
            delay = float(m.group(1)) if m else None
    typ = reason or as_str(err.get("status"))
    if typ is None and as_int(err.get("code")) is not None:
        typ = str(err["code"])
    return msg, typ, delay


class Gemini(JsonInterpreter):
    api = API

    def __init__(self) -> None:
        super().__init__()
        self.retry_after: float | None = None  # a RetryInfo's delay (s), read by the analyzer

    # -- stream: every SSE event is a whole GenerateContentResponse -------------
    def _chunk(self, obj: dict, raw: str, event: str, out: list[Delta]) -> None:
        self._response(obj, raw, out)

    def _body(self, obj: dict, raw: str, out: list[Delta]) -> None:
        self._response(obj, raw, out)

    def on_body(self, body: bytes) -> list[Delta]:
        """A whole body; ``streamGenerateContent`` without ``alt=sse`` answers a JSON array of
        responses (its errors too: ``[{"error": …}]``), each taken as one stream event."""
        head = bytes(body[:64]).lstrip() if isinstance(body, (bytes, bytearray, memoryview)) else b""
        if head[:1] != b"[":
            return super().on_body(body)
        out: list[Delta] = []
        try:
            items = load_json(bytes(body))
            if type(items) is not list:
                sample = bytes(body[:BODY_SAMPLE_CHARS]).decode("utf-8", "replace")
                note_malformed(self.facts, sample, BODY_SAMPLE_CHARS)
                return out
            for item in items:
                if type(item) is dict:
                    self._response(item, as_text(item, NO_CHOICES_CHARS), out)
            self.facts.done = self.facts.done or bool(items)
        except Exception as e:  # an input shape we did not foresee: counted, never raised
            if base.STRICT:
                raise
            note_malformed(self.facts, f"internal error: {type(e).__name__}")
        return out

    def on_not_sse(self, text: str) -> None:
        """An error body sent as ``text/event-stream``: Google's shape first."""
        obj = load_json(text.strip())
        if type(obj) is list and obj and type(obj[0]) is dict:
            obj = obj[0]
        if type(obj) is dict and type(obj.get("error")) is dict:
            try:
                self._response(obj, text, [])
            except Exception as e:
                if base.STRICT:
                    raise
                note_malformed(self.facts, f"internal error: {type(e).__name__}")
        else:
            super().on_not_sse(text)

    def _response(self, obj: dict, raw: str, out: list[Delta]) -> None:
        f = self.facts
        err = obj.get("error")
        if type(err) is dict and err:
            msg, typ, delay = google_error(err)
            set_error(f, msg, typ)
            if delay is not None and self.retry_after is None:
                self.retry_after = delay
            return
        cands = obj.get("candidates")
        feedback = obj.get("promptFeedback")
        usage = obj.get("usageMetadata")
        if type(cands) is not list and type(feedback) is not dict and type(usage) is not dict:
            found = error_of(obj, plain=True)
            if found is not None:
                set_error(f, *found)
            else:
                note_no_choices(f, raw)
            return
        note_ids(f, obj.get("modelVersion"), obj.get("responseId"))
        if type(feedback) is dict:
            reason = as_str(feedback.get("blockReason"))
            if reason is not None and reason != "BLOCK_REASON_UNSPECIFIED":
                f.finish_reason = BLOCKED + reason  # no candidate comes: the prompt itself was refused
                f.done = True
        for cand in cands if type(cands) is list else ():
            if type(cand) is not dict:
                continue
            content = cand.get("content")
            parts = content.get("parts") if type(content) is dict else None
            for part in parts if type(parts) is list else ():
                if type(part) is dict:
                    _part(part, out)
            reason = as_str(cand.get("finishReason"))
            if reason is not None and reason != "FINISH_REASON_UNSPECIFIED":
                f.finish_reason = reason
                f.done = True
        if type(usage) is dict:
            self._usage(usage)

    def _usage(self, u: dict) -> None:
        # totals, repeated on every chunk (the last one final): present values overwrite.
        # candidatesTokenCount leaves the thoughts out; the record's completion count holds them
        # (as OpenAI's and Anthropic's do), and usage_reasoning_tokens says how many were thoughts
        f = self.facts
        prompt = as_int(u.get("promptTokenCount"))
        if prompt is not None:
            f.usage_prompt_tokens = prompt
        cached = as_int(u.get("cachedContentTokenCount"))
        if cached is not None:
            f.usage_cached_tokens = cached
        cands, thoughts = as_int(u.get("candidatesTokenCount")), as_int(u.get("thoughtsTokenCount"))
        if thoughts is not None:
            f.usage_reasoning_tokens = thoughts
        if cands is not None or thoughts is not None:
            f.usage_completion_tokens = (cands or 0) + (thoughts or 0)


def _part(part: dict, out: list[Delta]) -> None:
    """Deltas of one content part: text (``thought: true`` is reasoning), a function call
    (visible: a tool call), code the model wrote or ran."""
    text = part.get("text")
    if type(text) is str:
        add(out, REASONING if part.get("thought") is True else TEXT, text)
        return
    call = part.get("functionCall")
    if type(call) is dict:
        add(out, TOOL, call.get("name"))
        args = call.get("args")
        if args is not None:
            add(out, TOOL, as_text(args, 1 << 30))
        return
    code = part.get("executableCode")
    if type(code) is dict:
        add(out, TOOL, code.get("code"))
        return
    result = part.get("codeExecutionResult")
    if type(result) is dict:
        add(out, TEXT, result.get("output"))
        return
    if type(part.get("inlineData")) is dict:  # an image or audio the model made: visible output
        add(out, TEXT, "\ufffc")
