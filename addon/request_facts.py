"""What a request body says: model, stream, max_tokens and the prompt's token counts.

A pure function of the body bytes, so it can run on the analysis thread for ordinary
requests, or in a helper process for very large ones: ``json.loads`` of a megabyte holds
the GIL for milliseconds, which would otherwise stall the proxy's event loop.
"""

from __future__ import annotations

import json
from typing import Any

from . import tokens


def request_facts(raw: bytes | bytearray, content_encoding: str | None, api: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if content_encoding:
        try:
            from mitmproxy.net.encoding import decode

            raw = decode(bytes(raw), content_encoding)
        except Exception as e:
            out["request_error"] = f"request body has Content-Encoding {content_encoding!r} that could not be decoded: {e}"
            return out
    if not raw.strip():
        return out
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as e:
        if api != "other":
            out["request_error"] = f"request body is not valid JSON ({e})"
        return out
    if not isinstance(body, dict):
        if api != "other":
            out["request_error"] = f"request body is JSON but not an object (got {type(body).__name__})"
        return out
    model = body.get("model")
    if isinstance(model, str):
        out["model"] = model
    if isinstance(body.get("stream"), bool):
        out["stream"] = body["stream"]
    elif api != "other":
        out["stream"] = False
    for k in ("max_tokens", "max_completion_tokens", "max_output_tokens"):
        v = body.get(k)
        if isinstance(v, int) and not isinstance(v, bool):
            out["max_tokens"] = v
            break
    if api == "other":
        return out
    tc = tokens.count_request(api, body, out.get("model"))
    out.update(
        tokenizer=tc.tokenizer, tokens_exact=tc.exact, prompt_tokens_est=tc.prompt_tokens_est,
        system_tokens=tc.system_tokens, tools_tokens=tc.tools_tokens, last_user_tokens=tc.last_user_tokens,
        messages=tc.messages, images=tc.images, prefix_hash=tc.prefix_hash, prefix_tokens=tc.prefix_tokens,
    )
    return out
