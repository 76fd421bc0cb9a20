"""Prompt and output token counting for one request body, per API.

Nothing here starts a download: encodings come from :func:`.encodings.load_encoding`. What is
counted per API, and the formulas: docs/record.md ("How the prompt is counted").
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from firsttoken.addon.tokens.encodings import DEFAULT_ENCODING, ByteEstimate, encoding_for_model, load_encoding, token_len
from firsttoken.addon.tokens.prefix import prefix_hash
from firsttoken.addon.tokens.shapes import REPLY_PRIMING, ShapeCounter, clear_count_cache

# --------------------------------------------------------------------------- counting

@dataclass
class TokenCount:
    """What :func:`count_request` found; field names match the record's columns.

    ``prompt_tokens_est`` is everything (messages + overheads + tools + images);
    ``system_tokens`` = system/developer messages, ``instructions`` or Anthropic ``system``;
    ``tools_tokens`` = tool + structured-output schema definitions; ``last_user_tokens`` =
    the last ``role: user`` message; ``messages`` = messages / input items (instructions and
    Anthropic system not included); ``images`` = image parts; ``tokenizer`` = label of the
    encoding used; ``exact`` = that encoding is the model's own; ``prefix_hash`` /
    ``prefix_tokens`` = the stable prefix (None / 0 when empty)."""

    prompt_tokens_est: int = 0
    system_tokens: int = 0
    tools_tokens: int = 0
    last_user_tokens: int = 0
    messages: int = 0
    images: int = 0
    tokenizer: str = DEFAULT_ENCODING
    exact: bool = False
    prefix_hash: str | None = None
    prefix_tokens: int = 0


def _last_index(roles: list[str | None], role: str = "user") -> int | None:
    for i in range(len(roles) - 1, -1, -1):
        if roles[i] == role:
            return i
    return None


def _conversation(tc: TokenCount, per: list[tuple[str | None, int]], items: list, *,
                  system: Any = None, system_tokens: int = 0, tools: Any = None,
                  tools_tokens: int = 0) -> None:
    """Fill the totals, breakdown and prefix from per-message ``(role, tokens)``."""
    roles = [r for r, _ in per]
    counts = [n for _, n in per]
    last = _last_index(roles)
    cut = len(per) if last is None else last
    tc.messages = len(per)
    tc.system_tokens = system_tokens + sum(n for r, n in per if r in ("system", "developer"))
    tc.tools_tokens = tools_tokens
    tc.last_user_tokens = counts[last] if last is not None else 0
    priming = REPLY_PRIMING if per else 0
    tc.prompt_tokens_est = system_tokens + tools_tokens + sum(counts) + priming
    tc.prefix_tokens = system_tokens + tools_tokens + sum(counts[:cut])
    tc.prefix_hash = prefix_hash({"system": system, "tools": tools, "messages": items[:cut]})
    if tc.prefix_hash is None:
        tc.prefix_tokens = 0


def _as_list(v: Any) -> list:
    return v if isinstance(v, list) else ([] if v is None else [v])


def _count_chat(c: ShapeCounter, body: dict, tc: TokenCount) -> None:
    msgs = _as_list(body.get("messages"))
    per = [c.oa_message(m) for m in msgs]
    schema = _schema(body.get("response_format"))
    tools_tokens = c.tools(body.get("tools"), body.get("functions"))
    tools_tokens += c.json(schema) if schema else 0
    parts = [body.get("tools"), body.get("functions"), schema]
    tools = parts if any(parts) else None
    _conversation(tc, per, msgs, tools=tools, tools_tokens=tools_tokens)


def _schema(fmt: Any) -> Any:
    """The JSON schema of a structured-output format (chat ``response_format`` or Responses
    ``text.format``), else None."""
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
        return fmt.get("json_schema", fmt.get("schema")) or None
    return None


def _count_responses(c: ShapeCounter, body: dict, tc: TokenCount) -> None:
    inp = body.get("input")
    items = [{"role": "user", "content": inp}] if isinstance(inp, str) else _as_list(inp)
    per = [c.responses_item(it) for it in items]
    instructions = body.get("instructions")
    sys_tokens = c.oa_message({"role": "system", "content": instructions})[1] if instructions else 0
    text_cfg = body.get("text")
    schema = _schema(text_cfg.get("format")) if isinstance(text_cfg, dict) else None
    tools_tokens = c.tools(body.get("tools")) + (c.json(schema) if schema else 0)
    tools = [body.get("tools"), schema] if (body.get("tools") or schema) else None
    _conversation(tc, per, items, system=instructions, system_tokens=sys_tokens, tools=tools,
                  tools_tokens=tools_tokens)


def _count_anthropic(c: ShapeCounter, body: dict, tc: TokenCount) -> None:
    msgs = _as_list(body.get("messages"))
    per = [c.an_message(m) for m in msgs]
    system = body.get("system")
    tools = body.get("tools") or None
    tools_tokens = sum(c.json(t) for t in _as_list(tools))
    _conversation(tc, per, msgs, system=system, system_tokens=c.an_content(system), tools=tools,
                  tools_tokens=tools_tokens)


def _count_gemini(c: ShapeCounter, body: dict, tc: TokenCount) -> None:
    contents = _as_list(body.get("contents"))
    per = [c.gm_content(m) for m in contents]
    system = body.get("systemInstruction", body.get("system_instruction"))
    sys_tokens = (c.gm_parts(system.get("parts")) if isinstance(system, dict)
                  else c.text(system) if isinstance(system, str) else 0)
    cfg = body.get("generationConfig", body.get("generation_config"))
    schema = None
    if isinstance(cfg, dict):
        schema = cfg.get("responseSchema", cfg.get("responseJsonSchema", cfg.get("response_schema")))
    tools_tokens = c.gm_tools(body.get("tools")) + (c.json(schema) if schema else 0)
    tools = [body.get("tools"), schema] if (body.get("tools") or schema) else None
    _conversation(tc, per, contents, system=system, system_tokens=sys_tokens, tools=tools, tools_tokens=tools_tokens)


def _count_completions(c: ShapeCounter, body: dict, tc: TokenCount) -> None:
    prompt = body.get("prompt")
    if isinstance(prompt, list) and prompt and all(type(x) is int for x in prompt):
        n = len(prompt)  # one prompt given as token ids
    else:
        n = 0
        for p in _as_list(prompt):
            if isinstance(p, list):  # a batch of token-id prompts
                n += len(p)
            else:
                n += c.text(p) if isinstance(p, str) else c.leaves(p)
    n += c.text(body.get("suffix")) if isinstance(body.get("suffix"), str) else 0
    tc.prompt_tokens_est = tc.last_user_tokens = n


def _ollama_images(c: ShapeCounter, items: list) -> None:
    """Ollama's ``images`` (base64 strings beside the text): tallied, never counted as text."""
    for m in items:
        if isinstance(m, dict) and isinstance(m.get("images"), list):
            c.images += len(m["images"])


def _count_ollama_chat(c: ShapeCounter, body: dict, tc: TokenCount) -> None:
    """Ollama's ``/api/chat``: OpenAI's message shape (``content`` a string, ``tool_calls`` arguments
    an object, ``images`` beside it); ``format`` is a grammar, not prompt text."""
    _count_chat(c, {"messages": body.get("messages"), "tools": body.get("tools")}, tc)
    _ollama_images(c, _as_list(body.get("messages")))


def _count_ollama_generate(c: ShapeCounter, body: dict, tc: TokenCount) -> None:
    """Ollama's ``/api/generate``: a ``system`` prompt and one ``prompt`` (the template's own
    tokens are the server's, not counted)."""
    items = [{"role": "user", "content": body.get("prompt")}]
    per = [c.oa_message(items[0])]
    system = body.get("system")
    sys_tokens = c.oa_message({"role": "system", "content": system})[1] if isinstance(system, str) and system else 0
    _conversation(tc, per, items, system=system or None, system_tokens=sys_tokens)
    _ollama_images(c, [body])


def count_request(api: str, body: object, model: str | None = None) -> TokenCount:
    """Estimate what the model is sent for one request body (any JSON value; never raises).

    ``api``: ``openai.chat`` | ``openai.completions`` | ``openai.responses`` |
    ``anthropic.messages`` | ``gemini.generate`` | ``ollama.chat`` | ``ollama.generate`` | ``other`` (every
    string leaf of the body is counted).
    ``model`` defaults to the body's ``model``. See the module docstring for what is counted.
    The stable prefix is system + tools + every message before the last ``role: user`` message
    (all messages when there is none); the last user message's tokens are ``last_user_tokens``;
    ``prefix_tokens`` + ``last_user_tokens`` + later messages + reply priming = total."""
    if isinstance(body, (bytes, bytearray)):
        body = bytes(body).decode("utf-8", "replace")
    if isinstance(body, str):
        try:
            body = json.loads(body)
        except ValueError:
            pass
    if model is None and isinstance(body, dict) and isinstance(body.get("model"), str):
        model = body["model"]
    enc_name, exact = encoding_for_model(model)
    try:
        enc, label = load_encoding(enc_name)
    except Exception:  # pragma: no cover - load_encoding already degrades
        enc, label = ByteEstimate(), "bytes/4 (no tokenizer available)"
    tc = TokenCount(tokenizer=label, exact=exact and label == enc_name)
    c = ShapeCounter(enc, enc_name.startswith("o200k"))
    try:
        if isinstance(body, dict) and api == "openai.chat":
            _count_chat(c, body, tc)
        elif isinstance(body, dict) and api == "openai.responses":
            _count_responses(c, body, tc)
        elif isinstance(body, dict) and api == "anthropic.messages":
            _count_anthropic(c, body, tc)
        elif isinstance(body, dict) and api == "openai.completions":
            _count_completions(c, body, tc)
        elif isinstance(body, dict) and api == "gemini.generate":
            _count_gemini(c, body, tc)
        elif isinstance(body, dict) and api == "ollama.chat":
            _count_ollama_chat(c, body, tc)
        elif isinstance(body, dict) and api == "ollama.generate":
            _count_ollama_generate(c, body, tc)
        else:
            tc.prompt_tokens_est = tc.last_user_tokens = c.leaves(body)
            if isinstance(body, dict) and isinstance(body.get("messages"), list):
                tc.messages = len(body["messages"])
    except Exception:  # garbage in: keep whatever was filled in
        pass
    tc.images = c.images
    return tc


def count_text(text: str, model: str | None = None) -> tuple[int, str, bool]:
    """``(tokens, tokenizer label, exact)`` for generated text."""
    enc_name, exact = encoding_for_model(model)
    enc, label = load_encoding(enc_name)
    if not isinstance(text, str):
        text = "" if text is None else str(text)
    return token_len(enc, text), label, exact and label == enc_name


def benchmark(tokens: int = 200_000, model: str | None = "gpt-4") -> dict[str, Any]:
    """Time counting a synthetic chat body of about ``tokens`` tokens."""
    para = "The quick brown fox jumps over the lazy dog; latency grows with input tokens. "
    turns = [{"role": "user" if i % 2 else "assistant", "content": f"Turn {i}. " + para * 50}
             for i in range(max(1, tokens // 850))]  # each text new: nothing comes from the count cache
    body = {"messages": [{"role": "system", "content": "You are terse."}] + turns}
    clear_count_cache()  # the tokenizer's speed, not the cache's
    t0 = time.perf_counter()
    tc = count_request("openai.chat", body, model)
    elapsed = round(time.perf_counter() - t0, 4)
    return {"prompt_tokens_est": tc.prompt_tokens_est, "seconds": elapsed,
            "tokenizer": tc.tokenizer}
