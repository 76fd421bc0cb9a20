"""Counting the tokens of each request shape: messages, content parts, tool calls, tools.

:class:`ShapeCounter` walks one request body's pieces with one encoding (OpenAI chat and
Responses shapes, Anthropic shapes, tool definitions) and tallies the images it meets.
:mod:`.count` assembles them per API; the formulas: docs/record.md ("How the prompt is counted").
"""

from __future__ import annotations

import json
from typing import Any

from firsttoken.addon.tokens.encodings import token_len
from firsttoken.addon.tokens.images import anthropic_image_tokens, b64_image_dims, openai_image_tokens
from firsttoken.addon.tokens.prefix import strip_cache_hints as _strip_cache_hints

TOKENS_PER_MESSAGE, TOKENS_PER_NAME, REPLY_PRIMING = 3, 1, 3
PROP_INIT, PROP_KEY, ENUM_INIT, ENUM_ITEM, FUNC_END = 3, 3, -3, 3, 12
FUNC_INIT_CL100K, FUNC_INIT_O200K = 10, 7
#: Gemini counts an image of up to 384 px a side as 258 tokens (larger ones as 258 per 768 px tile)
GEMINI_IMAGE_TOKENS = 258

_PARAMS_RENDERED = ("type", "properties", "required", "additionalProperties", "strict")


def _str_or_json(v: Any) -> str:
    return v if isinstance(v, str) else ("" if v is None else _dumps(v))


def _dumps(v: Any) -> str:
    try:
        return json.dumps(v, ensure_ascii=False, separators=(",", ":"), default=str)
    except (TypeError, ValueError, RecursionError):
        return str(v)


_LEAF_SKIP = frozenset({"model", "id", "call_id", "tool_call_id", "type", "status", "stream",
                        "cache_control", "encrypted_content", "signature", "file_data", "b64_json",
                        "file_id", "media_type", "detail"})


#: how much text (characters) the count cache keeps: agents resend the same system prompt,
#: tools and history with every request (Claude Code: ~20k tokens, ~10 ms to count each time)
CACHE_MAX_CHARS = 32 * 2**20
_counts: dict[tuple[Any, str], int] = {}  # (encoding, text) -> tokens; oldest first
_cached_chars = 0


def count_cached(enc: Any, s: str) -> int:
    """``token_len(enc, s)``, remembered: a text seen before costs one dict lookup
    (its hash), not a tokenizer call (which also hands the GIL to the event loop and back).
    Thread-safe enough: dict operations are atomic; the size is approximate under races."""
    global _cached_chars
    key = (getattr(enc, "name", None) or id(enc), s)
    n = _counts.get(key)
    if n is None:
        n = token_len(enc, s)
        if len(s) <= CACHE_MAX_CHARS // 4:
            while _counts and _cached_chars + len(s) > CACHE_MAX_CHARS:
                try:
                    old = next(iter(_counts))
                    del _counts[old]
                    _cached_chars -= len(old[1])
                except (StopIteration, KeyError, RuntimeError):
                    break
            _counts[key] = n
            _cached_chars += len(s)
    return n


def clear_count_cache() -> None:
    """Forget every remembered count (benchmarks time the tokenizer, not the cache)."""
    global _cached_chars
    _counts.clear()
    _cached_chars = 0


class ShapeCounter:
    def __init__(self, enc: Any, o200k: bool) -> None:
        self.enc = enc
        self.func_init = FUNC_INIT_O200K if o200k else FUNC_INIT_CL100K
        self.images = 0

    def text(self, s: Any) -> int:
        if s is None or s == "":
            return 0
        if not isinstance(s, str):
            s = _dumps(s)
        return count_cached(self.enc, s)

    def json(self, v: Any) -> int:
        return self.text(_dumps(_strip_cache_hints(v)))

    def leaves(self, value: Any) -> int:
        """Tokens of every string leaf (ids, types, base64 and data: URLs skipped)."""
        n, stack = 0, [value]
        while stack:
            v = stack.pop()
            if isinstance(v, str):
                if not (v.startswith("data:") and ";base64," in v[:200]):
                    n += self.text(v)
            elif isinstance(v, dict):
                stack.extend(x for k, x in v.items() if k not in _LEAF_SKIP)
            elif isinstance(v, list):
                stack.extend(v)
        return n

    # ---- OpenAI shapes
    def oa_image(self, part: dict) -> int:
        self.images += 1
        src = part.get("image_url")
        detail = part.get("detail")
        if isinstance(src, dict):
            detail = src.get("detail", detail)
            src = src.get("url")
        data_url = isinstance(src, str) and src.startswith("data:")
        return openai_image_tokens(b64_image_dims(src) if data_url else None, detail)

    def oa_content(self, v: Any) -> int:
        if v is None or isinstance(v, str):
            return self.text(v)
        parts = v if isinstance(v, list) else [v]
        n = 0
        for p in parts:
            if not isinstance(p, dict):
                n += self.text(p) if isinstance(p, str) else self.leaves(p)
                continue
            t = p.get("type")
            if t in ("image_url", "input_image", "computer_screenshot"):
                n += self.oa_image(p)
            elif isinstance(p.get("text"), str):
                n += self.text(p["text"])
            elif isinstance(p.get("refusal"), str):
                n += self.text(p["refusal"])
            elif t in ("input_audio", "audio", "file", "input_file"):
                continue
            else:
                n += self.leaves(p)
        return n

    def oa_call(self, call: Any) -> int:
        if not isinstance(call, dict):
            return self.leaves(call)
        fn = call.get("function") if isinstance(call.get("function"), dict) else call
        return self.text(fn.get("name")) + self.text(fn.get("arguments", fn.get("input")))

    def oa_message(self, m: Any) -> tuple[str | None, int]:
        if not isinstance(m, dict):
            if isinstance(m, str):  # a bare string: take it as a user message
                return "user", TOKENS_PER_MESSAGE + self.text(m)
            return None, TOKENS_PER_MESSAGE + self.leaves(m)
        n = TOKENS_PER_MESSAGE
        for k, v in m.items():
            if k in ("role", "name"):
                n += self.text(v) if isinstance(v, str) else 0
                n += TOKENS_PER_NAME if k == "name" else 0
            elif k == "content":
                n += self.oa_content(v)
            elif k == "tool_calls" and isinstance(v, list):
                n += sum(self.oa_call(c) for c in v)
            elif k == "function_call":
                n += self.oa_call(v)
            elif k == "refusal" and isinstance(v, str):
                n += self.text(v)
        role = m.get("role")
        return (role if isinstance(role, str) else None), n

    def responses_item(self, it: Any) -> tuple[str | None, int]:
        if not isinstance(it, dict) or ("role" in it and it.get("type") in (None, "message")):
            return self.oa_message(it)
        t = it.get("type")
        if t == "item_reference":
            return None, 0
        n = TOKENS_PER_MESSAGE
        if t in ("function_call", "custom_tool_call"):
            n += self.oa_call(it)
        elif t in ("function_call_output", "custom_tool_call_output", "computer_call_output"):
            n += self.oa_content(it.get("output"))
        elif t == "reasoning":
            summary = it.get("summary") or []
            n += sum(self.text(s.get("text")) for s in summary if isinstance(s, dict))
        else:
            n += self.leaves(it)
        return None, n

    def function_def(self, fn: dict) -> int:
        """openai-cookbook's function-tool formula, plus JSON of schema parts it ignores."""
        n = self.func_init
        name = fn.get("name") if isinstance(fn.get("name"), str) else ""
        desc = _str_or_json(fn.get("description"))
        n += self.text(name + ":" + (desc[:-1] if desc.endswith(".") else desc))
        params = fn.get("parameters")
        if not isinstance(params, dict):
            return n + (self.json(params) if params is not None else 0)
        props = params.get("properties")
        if isinstance(props, dict) and props:
            n += PROP_INIT
            for key, p in props.items():
                n += PROP_KEY
                if not isinstance(p, dict):
                    n += self.text(f"{key}:{_dumps(p)}")
                    continue
                ptype = _str_or_json(p.get("type"))
                if "enum" in p:
                    n += ENUM_INIT
                    for item in p["enum"] if isinstance(p["enum"], list) else []:
                        n += ENUM_ITEM + self.text(item if isinstance(item, str) else _dumps(item))
                pdesc = _str_or_json(p.get("description"))
                n += self.text(f"{key}:{ptype}:{pdesc[:-1] if pdesc.endswith('.') else pdesc}")
                extra = {k: v for k, v in p.items() if k not in ("type", "description", "enum")}
                n += self.json(extra) if extra else 0
        elif props is not None and not isinstance(props, dict):
            n += self.json(props)
        extra = {k: v for k, v in params.items() if k not in _PARAMS_RENDERED}
        return n + (self.json(extra) if extra else 0)

    def tools(self, tools: Any, legacy_functions: Any = None) -> int:
        items = [t for src in (tools, legacy_functions) if src
                 for t in (src if isinstance(src, list) else [src])]
        n, any_fn = 0, False
        for t in items:
            fn = None
            if isinstance(t, dict):
                if isinstance(t.get("function"), dict):
                    fn = t["function"]
                elif "name" in t and t.get("type") == "function":  # Responses: flat
                    fn = t
                elif "name" in t and "type" not in t and "parameters" in t:  # legacy functions
                    fn = t
            if fn is not None:
                n += self.function_def(fn)
                any_fn = True
            else:
                n += self.json(t)
        return n + (FUNC_END if any_fn else 0)

    # ---- Anthropic shapes
    def an_content(self, v: Any, depth: int = 0) -> int:
        if v is None or isinstance(v, str):
            return self.text(v)
        if depth > 6:
            return self.leaves(v)
        n = 0
        for b in v if isinstance(v, list) else [v]:
            if not isinstance(b, dict):
                n += self.text(b) if isinstance(b, str) else self.leaves(b)
                continue
            t = b.get("type")
            if t == "text" or (t is None and isinstance(b.get("text"), str)):
                n += self.text(b.get("text"))
            elif t == "image":
                self.images += 1
                src = b.get("source")
                b64 = isinstance(src, dict) and src.get("type") == "base64"
                dims = b64_image_dims(src.get("data")) if b64 else None
                n += anthropic_image_tokens(dims)
            elif t in ("tool_use", "server_tool_use", "mcp_tool_use"):
                n += self.text(b.get("name")) + self.json(b.get("input"))
            elif t == "tool_result":
                n += self.an_content(b.get("content"), depth + 1)
            elif t == "thinking":
                n += self.text(b.get("thinking"))
            elif t == "redacted_thinking":
                continue
            elif t == "document":
                src = b.get("source")
                n += self.text(b.get("title")) + self.text(b.get("context"))
                if isinstance(src, dict) and src.get("type") == "text":
                    n += self.text(src.get("data"))
                elif isinstance(src, dict) and src.get("type") == "content":
                    n += self.an_content(src.get("content"), depth + 1)
            elif t == "search_result":
                n += self.text(b.get("title")) + self.an_content(b.get("content"), depth + 1)
            else:
                n += self.leaves(b)
        return n

    def an_message(self, m: Any) -> tuple[str | None, int]:
        if not isinstance(m, dict):
            return None, TOKENS_PER_MESSAGE + (
                self.text(m) if isinstance(m, str) else self.leaves(m))
        role = m.get("role")
        role = role if isinstance(role, str) else None
        return role, TOKENS_PER_MESSAGE + self.text(role) + self.an_content(m.get("content"))

    # ---- Gemini shapes (``contents[].parts[]``): counted with the same encoding, an estimate
    def gm_content(self, content: Any) -> tuple[str | None, int]:
        """``(role, tokens)`` of one Gemini ``Content`` (``{"role", "parts": [...]}``)."""
        if not isinstance(content, dict):
            return None, TOKENS_PER_MESSAGE + (self.text(content) if isinstance(content, str) else self.leaves(content))
        role = content.get("role")
        role = role if isinstance(role, str) else None
        return role, TOKENS_PER_MESSAGE + self.text(role) + self.gm_parts(content.get("parts"))

    def gm_parts(self, parts: Any) -> int:
        n = 0
        for p in parts if isinstance(parts, list) else [parts]:
            if isinstance(p, str):
                n += self.text(p)
            elif not isinstance(p, dict):
                n += self.leaves(p)
            elif isinstance(p.get("text"), str):
                n += self.text(p["text"])
            elif isinstance(p.get("inlineData", p.get("inline_data")), dict) or "fileData" in p or "file_data" in p:
                data = p.get("inlineData", p.get("inline_data")) or p.get("fileData", p.get("file_data")) or {}
                mime = data.get("mimeType", data.get("mime_type")) if isinstance(data, dict) else None
                if isinstance(mime, str) and mime.startswith("image/"):
                    self.images += 1
                    n += GEMINI_IMAGE_TOKENS
            elif isinstance(p.get("functionCall", p.get("function_call")), dict):
                call = p.get("functionCall", p.get("function_call"))
                n += self.text(call.get("name")) + self.json(call.get("args"))
            elif isinstance(p.get("functionResponse", p.get("function_response")), dict):
                resp = p.get("functionResponse", p.get("function_response"))
                n += self.text(resp.get("name")) + self.json(resp.get("response"))
            else:
                n += self.leaves({k: v for k, v in p.items() if k not in ("thoughtSignature", "thought_signature")})
        return n

    def gm_tools(self, tools: Any) -> int:
        """Gemini ``tools``: each ``functionDeclarations`` entry by the function formula, the rest as JSON."""
        n, any_fn = 0, False
        for t in tools if isinstance(tools, list) else ([tools] if tools else []):
            decls = t.get("functionDeclarations", t.get("function_declarations")) if isinstance(t, dict) else None
            if isinstance(decls, list):
                for d in decls:
                    if isinstance(d, dict):
                        fn = dict(d)
                        if "parameters" not in fn and "parametersJsonSchema" in fn:
                            fn["parameters"] = fn.pop("parametersJsonSchema")
                        n += self.function_def(fn)
                        any_fn = True
            else:
                n += self.json(t)
        return n + (FUNC_END if any_fn else 0)
