"""The simulator's prompt cache (``SimConfig.prompt_cache``): cached tokens only for a prefix an
earlier request sent, like the providers' content-addressed caches. A prompt is cut into units in
cache order (system / instructions, tools, then each message); the longest run of leading units
some earlier request also sent is "cached", as that share of the prompt's tokens. Anthropic caches
only up to the last block carrying ``cache_control``; OpenAI shapes cache any prefix.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from typing import Any

MAX_PREFIXES = 10_000


def _units(api: str, body: dict[str, Any]) -> tuple[list[str], int]:
    """(canonical JSON of each unit, how many leading units may be cached)."""
    if api == "responses":
        inp = body.get("input")
        msgs = [{"role": "user", "content": inp}] if isinstance(inp, str) else inp if isinstance(inp, list) else []
        head = [body.get("instructions"), body.get("tools")]
    elif api == "anthropic":
        msgs = body.get("messages") if isinstance(body.get("messages"), list) else []
        head = [body.get("system"), body.get("tools")]
    else:
        msgs = body.get("messages") if isinstance(body.get("messages"), list) else []
        head = [None, body.get("tools")]
    raw = [json.dumps(u, sort_keys=True, default=str) for u in [*head, *msgs] if u not in (None, "", [])]
    units = [_strip(r) for r in raw]
    if api != "anthropic":
        return units, len(units)
    marked = [i for i, r in enumerate(raw) if '"cache_control"' in r]
    return units, (marked[-1] + 1 if marked else 0)


def _strip(text: str) -> str:
    """A unit without its cache_control markers (moving a marker does not change the content)."""
    try:
        return json.dumps(_drop(json.loads(text)), sort_keys=True)
    except ValueError:
        return text


def _drop(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: _drop(x) for k, x in v.items() if k != "cache_control"}
    if isinstance(v, list):
        return [_drop(x) for x in v]
    return v


class PromptCache:
    """Prefix hashes of recent prompts (bounded, thread-safe)."""

    def __init__(self) -> None:
        self._seen: OrderedDict[str, None] = OrderedDict()
        self._lock = threading.Lock()

    def cached_tokens(self, api: str, body: dict[str, Any], prompt_tokens: int) -> int:
        """Tokens of ``body``'s prompt an earlier request already sent (and remember this one)."""
        units, cacheable = _units(api, body)
        h = hashlib.blake2b(api.encode(), digest_size=16)
        chains = []
        for u in units:
            h.update(hashlib.blake2b(u.encode("utf-8", "surrogatepass"), digest_size=16).digest())
            chains.append(h.copy().hexdigest())
        total = sum(len(u) for u in units) or 1
        with self._lock:
            hit = 0
            for i in range(cacheable):
                if chains[i] in self._seen:
                    hit = i + 1
                else:
                    break
            for c in chains[:cacheable]:
                self._seen[c] = None
                self._seen.move_to_end(c)
            while len(self._seen) > MAX_PREFIXES:
                self._seen.popitem(last=False)
        share = sum(len(u) for u in units[:hit]) / total
        return min(prompt_tokens, round(prompt_tokens * share))
