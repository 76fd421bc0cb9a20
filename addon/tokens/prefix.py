"""Prompt-prefix fingerprints ("prompt bloat") and estimate calibration.

Pure helpers used by :mod:`tokens`; no I/O, no tiktoken. The stable prefix of a request
is system + tools + every message before the last user turn (see ``tokens.count_request``);
:func:`prefix_hash` fingerprints it and :class:`PrefixTracker` remembers how often each
fingerprint was sent, in bounded memory.
"""

from __future__ import annotations

import hashlib
import json
import math
import statistics
import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from typing import Any

#: keys that mark caching hints rather than prompt content; moving a cache breakpoint must
#: not change the fingerprint of an otherwise identical prefix.
_IGNORED_KEYS = frozenset({"cache_control"})


def strip_cache_hints(value: Any) -> Any:
    """A copy of ``value`` without cache-hint keys (iterative: deep garbage cannot recurse)."""
    if not isinstance(value, (dict, list)):
        return value
    root: list[Any] = [None]
    stack: list[tuple[Any, Any, Any]] = [(value, root, 0)]
    while stack:
        src, parent, key = stack.pop()
        if isinstance(src, dict):
            dst: Any = {}
            parent[key] = dst
            for k, v in src.items():
                if k in _IGNORED_KEYS:
                    continue
                if isinstance(v, (dict, list)):
                    dst[k] = None
                    stack.append((v, dst, k))
                else:
                    dst[k] = v
        elif isinstance(src, list):
            dst = [None] * len(src)
            parent[key] = dst
            for i, v in enumerate(src):
                if isinstance(v, (dict, list)):
                    stack.append((v, dst, i))
                else:
                    dst[i] = v
        else:
            parent[key] = src
    return root[0]


def canonical_json(value: Any) -> str:
    """Compact, key-sorted JSON of ``value`` with ``cache_control`` keys removed."""
    return json.dumps(
        strip_cache_hints(value), sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str
    )


def prefix_hash(parts: Mapping[str, Any]) -> str | None:
    """16-hex blake2b fingerprint of the prefix ``parts`` ({"system": ..., "tools": ...,
    "messages": [...]}), or None when every part is empty or the value cannot be serialised."""
    try:
        if not any(v not in (None, "", [], {}) for v in parts.values()):
            return None
        data = canonical_json({k: v for k, v in parts.items() if v not in (None, "", [], {})})
    except (TypeError, ValueError, RecursionError):
        return None
    return hashlib.blake2b(data.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()


class PrefixTracker:
    """How many times each prefix hash was seen before; thread-safe LRU of ``maxsize`` hashes."""

    def __init__(self, maxsize: int = 10_000) -> None:
        self.maxsize = max(1, int(maxsize))
        self._counts: OrderedDict[str, int] = OrderedDict()
        self._lock = threading.Lock()

    def seen(self, prefix_hash: str | None) -> int:
        """Return how many times ``prefix_hash`` was seen before, and record this sighting.
        None (no prefix) is not recorded and returns 0."""
        if not prefix_hash:
            return 0
        with self._lock:
            before = self._counts.pop(prefix_hash, 0)
            self._counts[prefix_hash] = before + 1
            while len(self._counts) > self.maxsize:
                self._counts.popitem(last=False)
            return before

    def get(self, prefix_hash: str | None) -> int:
        """Times seen so far, without recording a sighting."""
        if not prefix_hash:
            return 0
        with self._lock:
            return self._counts.get(prefix_hash, 0)

    def seed(self, counts: Mapping[str, int]) -> None:
        """Preload sightings from history (``{hash: times_seen}``). Idempotent: a hash keeps the
        larger of its current and seeded count. Pass oldest first: when more than ``maxsize``
        hashes are seeded, the last ones are kept."""
        with self._lock:
            for h, n in counts.items():
                try:
                    n = int(n)
                except (TypeError, ValueError):
                    continue
                if not h or not isinstance(h, str) or n <= 0:
                    continue
                cur = self._counts.pop(h, 0)
                self._counts[h] = max(cur, n)
            while len(self._counts) > self.maxsize:
                self._counts.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._counts.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self._counts)


def _positive(x: Any) -> float | None:
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return None
    x = float(x)
    return x if math.isfinite(x) and x > 0 else None


def calibration_factor(pairs: Iterable[tuple[int, int]]) -> float | None:
    """Median of ``server / estimate`` over ``(estimate, server)`` pairs where both are > 0.

    ``estimate`` is our ``prompt_tokens_est``, ``server`` the upstream's usage prompt tokens.
    None when fewer than 3 usable pairs."""
    ratios = []
    for pair in pairs:
        try:
            est, server = pair
        except (TypeError, ValueError):
            continue
        est, server = _positive(est), _positive(server)
        if est is not None and server is not None:
            ratios.append(server / est)
    if len(ratios) < 3:
        return None
    return float(statistics.median(ratios))


def corrected(estimate: int | None, factor: float | None) -> int | None:
    """``estimate`` scaled by a calibration ``factor`` (unchanged when either is None)."""
    if estimate is None or factor is None:
        return estimate
    try:
        return int(round(estimate * factor))
    except (TypeError, ValueError, OverflowError):
        return estimate
