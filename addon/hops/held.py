"""Headers held until the first token, and what stays true through a hop that holds them.

Such a hop (LiteLLM's proxy) moves the prefill into TTFB; the route's TTFT-vs-input fit still
splits it. Pure functions of recorded timings: the analysis thread and `compare` both ask them.
See docs/gateways.md ("Headers held until the first token").
"""

from __future__ import annotations

import collections
import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from firsttoken.addon.engines import QUEUE_MS as ENGINE_QUEUE_MS

# The numbers of the rule (diagnose/thresholds.py lists them with the others, for the catalog)
#: latency.prefill: a prompt of at least this many tokens cannot take no time to prefill
PREFILL_MIN_TOKENS = 2000
#: latency.headers_held: the first visible token came at most this many ms after the headers ...
HELD_GAP_MS = 15.0
#: ... or this share of TTFT (a gateway's own work on the first chunks: ~10-30 ms for LiteLLM) ...
HELD_GAP_SHARE = 0.15
#: ... but never more than this many ms (the prefill of PREFILL_MIN_TOKENS takes longer) ...
HELD_GAP_MAX_MS = 50.0
#: ... of a TTFT of at least this many ms (below it a gap of ~0 tells nothing) ...
HELD_MIN_TTFT_MS = 50.0
#: ... and either the prompt had PREFILL_MIN_TOKENS (its prefill cannot take no time), or at least
#: this many earlier timed streams of the same route ...
HELD_ROUTE_SAMPLES = 3
#: ... of which at least this share looked the same, one of them with PREFILL_MIN_TOKENS.
HELD_ROUTE_SHARE = 0.8
#: the route's TTFT-vs-input fit (through such a hop): at least this many earlier streams ...
FIT_MIN_SAMPLES = 6
#: ... whose prompts span at least this factor (largest / smallest)
FIT_MIN_SPAN = 2.0

#: earlier records of a route looked at, newest first (the analysis thread keeps 500)
ROUTE_LOOKBACK = 50


def _num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and v == v


def looks_held(ttfb_ms: Any, ttft_ms: Any) -> bool | None:
    """One stream's own evidence: True when its first visible token came with the headers (a gap
    of at most HELD_GAP_MS, or HELD_GAP_SHARE of TTFT but never over HELD_GAP_MAX_MS: a
    gateway's own work on the first chunks), of a TTFT of at least HELD_MIN_TTFT_MS; False when
    a gap after the headers shows they came early; None when it cannot tell."""
    if not _num(ttfb_ms) or not _num(ttft_ms) or ttft_ms < HELD_MIN_TTFT_MS:
        return None
    return (ttft_ms - ttfb_ms) <= min(HELD_GAP_MAX_MS, max(HELD_GAP_MS, HELD_GAP_SHARE * ttft_ms))


def route_holds(points: Iterable[tuple[Any, Any, Any]]) -> bool | None:
    """Whether a route holds its headers, from its streams' (prompt tokens, ttfb_ms, ttft_ms):
    True when at least HELD_ROUTE_SAMPLES of them can tell, HELD_ROUTE_SHARE of those look held
    and one of those had PREFILL_MIN_TOKENS (so its TTFB is seen to hold a real prefill: a short
    prompt behind a slow network looks the same otherwise); False when enough can tell and too
    few look held; None when it cannot tell."""
    return _route_verdict(_looks(t, b, f) for t, b, f in points)


def _looks(tokens: Any, ttfb: Any, ttft: Any) -> tuple[bool | None, bool]:
    """One stream's part in its route's verdict: (looks held, looks held with PREFILL_MIN_TOKENS)."""
    v = looks_held(ttfb, ttft)
    return v, bool(v and _num(tokens) and tokens >= PREFILL_MIN_TOKENS)


def _route_verdict(looks: Iterable[tuple[bool | None, bool]]) -> bool | None:
    seen = held = 0
    big = False
    for v, v_big in looks:
        if v is None:
            continue
        seen += 1
        held += v
        big = big or v_big
    if seen < HELD_ROUTE_SAMPLES:
        return None
    if held < HELD_ROUTE_SHARE * seen:
        return False
    return True if big else None


def prefill_tokens(r: Any) -> Any:
    """The prompt tokens a stream had to prefill: its count less what the server read from its prompt
    cache (a cache hit prefills in no time, so its first token rightly comes with the headers)."""
    tokens, cached = getattr(r, "prompt_tokens_est", None), getattr(r, "usage_cached_tokens", None)
    return max(0, tokens - cached) if _num(tokens) and _num(cached) else tokens


def _timed(r: Any) -> bool:
    return getattr(r, "status", None) == 200 and _num(getattr(r, "ttft_ms", None)) and _num(getattr(r, "ttfb_ms", None))


def _same_route(r: Any, rec: Any) -> bool:
    return getattr(r, "route", None) == rec.route and getattr(r, "upstream", None) == rec.upstream \
        and getattr(r, "id", None) != rec.id


class RouteWindows:
    """Each route's last ROUTE_LOOKBACK timed streams, kept as records finish: what
    :func:`headers_held` reads on the analysis thread without scanning its 500 recent records."""

    MAX_ROUTES = 256  # (forward mode sees one upstream per host: the oldest are let go)

    def __init__(self) -> None:
        self._by: dict[tuple[Any, Any], collections.deque] = {}

    def add(self, rec: Any) -> None:
        if not _timed(rec):
            return
        key = (rec.route, rec.upstream)
        d = self._by.get(key)
        if d is None:
            if len(self._by) >= self.MAX_ROUTES:
                del self._by[next(iter(self._by))]
            d = self._by[key] = collections.deque(maxlen=ROUTE_LOOKBACK + 1)  # (+1: a record seen again)
        d.append((rec.id, _looks(prefill_tokens(rec), rec.ttfb_ms, rec.ttft_ms)))

    def holds(self, rec: Any) -> bool | None:
        """``route_holds`` over the record's route's recent streams (itself excluded), each one's
        part decided once, when it was added."""
        d = self._by.get((rec.route, rec.upstream), ())
        return _route_verdict([looks for rid, looks in reversed(d) if rid != rec.id][:ROUTE_LOOKBACK])


def headers_held(rec: Any, earlier: Iterable[Any] | RouteWindows = ()) -> bool | None:
    """The record's ``headers_held``: True when this stream's first token came with its headers
    and either its prompt was large enough that the prefill cannot have taken no time
    (PREFILL_MIN_TOKENS), or its route did the same repeatedly (``route_holds`` over the
    route's recent streams: ``earlier``, records oldest first, or a :class:`RouteWindows`);
    False when the headers came early; None when it cannot tell."""
    if not _timed(rec):
        return None
    own = looks_held(rec.ttfb_ms, rec.ttft_ms)
    if own is not True:
        return own
    if (prefill_tokens(rec) or 0) >= PREFILL_MIN_TOKENS:
        return True
    if not isinstance(earlier, RouteWindows):  # a list of records: the same windows, built at once
        windows = RouteWindows()
        for r in earlier:
            windows.add(r)
        earlier = windows
    return earlier.holds(rec) or None


@dataclass(frozen=True)
class Fit:
    """TTFT = intercept + slope x input tokens over a route's streams."""
    intercept_ms: float
    slope_ms_per_1k: float
    n: int
    r2: float | None

    def prefill_ms(self, tokens: int) -> float:
        return max(0.0, self.slope_ms_per_1k * tokens / 1000.0)


def route_fit(points: Iterable[tuple[Any, Any]]) -> Fit | None:
    """Least squares of TTFT (ms) against prompt tokens over (tokens, ttft_ms) points; None with
    fewer than FIT_MIN_SAMPLES points, prompts spanning less than FIT_MIN_SPAN, or a negative
    slope (noise, not prefill)."""
    pts = [(float(x), float(y)) for x, y in points if _num(x) and _num(y) and x > 0]
    n = len(pts)
    if n < FIT_MIN_SAMPLES:
        return None
    xs = [x for x, _ in pts]
    if max(xs) < FIT_MIN_SPAN * min(xs):
        return None
    mx = sum(xs) / n
    my = sum(y for _, y in pts) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    if sxx <= 0:
        return None
    sxy = sum((x - mx) * (y - my) for x, y in pts)
    slope = sxy / sxx
    if slope < 0 or not math.isfinite(slope):
        return None
    intercept = my - slope * mx
    syy = sum((y - my) ** 2 for _, y in pts)
    r2 = (sxy * sxy) / (sxx * syy) if syy > 0 else None
    return Fit(round(intercept, 3), round(slope * 1000.0, 3), n, None if r2 is None else round(r2, 4))


def fit_of_route(rec: Any, earlier: Iterable[Any] = ()) -> Fit | None:
    """The fit over the route's (and model's) recent timed streams, this one excluded. A stream on a new
    connection counts with its TTFT less the connect (a client that opens one per request, as SDKs behind a
    proxy do, has no other kind); what uses the fit takes a new connection's connect off the same way."""
    pts = []
    for r in reversed(list(earlier)):
        if _timed(r) and _same_route(r, rec) and getattr(r, "model", None) == rec.model \
                and (getattr(r, "engine_queue_ms", None) or 0.0) < ENGINE_QUEUE_MS:  # a queued TTFT is no prefill
            connect = (getattr(r, "connect_ms", None) or 0.0) if getattr(r, "conn_reused", None) is False else 0.0
            pts.append((getattr(r, "prompt_tokens_est", None), r.ttft_ms - connect))
            if len(pts) >= ROUTE_LOOKBACK:
                break
    return route_fit(pts)
