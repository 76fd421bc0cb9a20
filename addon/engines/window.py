"""What else was in flight to the same engine: each upstream's recent exchanges, as spans, so a rule
can tell a queue or a decode paused by another request's prefill from the network or the client.
Kept by the analysis thread only; bounded per upstream and in upstreams."""

from __future__ import annotations

import collections
from collections.abc import Iterator
from typing import Any, NamedTuple

PER_UPSTREAM = 64
UPSTREAMS = 32
KEEP_S = 600.0  # a finished span older than this (since it ended) is not kept


class Span(NamedTuple):
    """One other exchange, in ms from the judged request's t0 (None: not reached yet). Immutable; a tuple because
    up to PER_UPSTREAM of them are built per request (a frozen dataclass took twice as long to build)."""

    id: str
    start_ms: float
    headers_ms: float | None
    first_token_ms: float | None
    end_ms: float | None
    prompt_tokens: int | None


def _stamps(flight: Any) -> tuple[float, float | None, float | None, float | None]:
    c = flight.clock
    first = c.first_token if c.first_token is not None else c.first_visible
    end = c.last_byte if c.last_byte is not None else c.end
    return c.t0, c.headers, first, end


class Window:
    def __init__(self) -> None:
        # upstream -> record id -> the live Flight, or its frozen stamps once it finished
        self._by: collections.OrderedDict[str, collections.OrderedDict[str, Any]] = collections.OrderedDict()

    def started(self, key: str | None, flight: Any) -> None:
        if not key:
            return
        d = self._by.get(key)
        if d is None:
            d = self._by[key] = collections.OrderedDict()
            while len(self._by) > UPSTREAMS:
                self._by.popitem(last=False)
        self._by.move_to_end(key)
        d[flight.record.id] = flight
        while len(d) > PER_UPSTREAM:
            d.popitem(last=False)

    def finished(self, key: str | None, flight: Any) -> None:
        """Keep only the stamps of a finished exchange (never the flight, its body or its tap)."""
        d = self._by.get(key or "")
        rid = flight.record.id
        if d is not None and rid in d:
            rec = flight.record
            d[rid] = (*_stamps(flight), rec.engine_prompt_tokens or rec.usage_prompt_tokens or rec.prompt_tokens_est)

    def _overlapping(self, key: str | None, flight: Any) -> Iterator[tuple[str, float, float | None, float | None,
                                                                     float | None, int | None]]:
        """``(id, start, headers, first token, end, prompt tokens)`` of each other exchange to ``key`` that
        overlapped ``flight`` (``perf_counter`` stamps); the finished ones that ended KEEP_S before it are let go
        once the walk ends. The one walk :meth:`around` and :meth:`ahead` share: plain arithmetic, no per-entry
        closure (it runs once per request over up to PER_UPSTREAM entries on the analysis thread)."""
        d = self._by.get(key or "")
        if not d:
            return
        t0, _, _, end = _stamps(flight)
        me = flight.record.id
        stale = None if end is None else end - KEEP_S
        gone = []
        for rid, v in d.items():
            if rid == me:
                continue
            if type(v) is tuple:
                s, h, f, e, n = v
                if e is not None and stale is not None and e < stale:
                    gone.append(rid)
                    continue
            else:
                s, h, f, e = _stamps(v)
                r = v.record
                n = r.engine_prompt_tokens or r.usage_prompt_tokens or r.prompt_tokens_est
            if (end is not None and s >= end) or (e is not None and e <= t0):
                continue
            yield rid, s, h, f, e, n
        for rid in gone:
            del d[rid]

    def around(self, key: str | None, flight: Any) -> tuple[Span, ...]:
        """The other exchanges to ``key`` that overlapped ``flight``, in ms from its t0."""
        t0 = flight.clock.t0
        return tuple(Span(rid, round((s - t0) * 1000.0, 1),
                          None if h is None else round((h - t0) * 1000.0, 1),
                          None if f is None else round((f - t0) * 1000.0, 1),
                          None if e is None else round((e - t0) * 1000.0, 1), n)
                     for rid, s, h, f, e, n in self._overlapping(key, flight))

    def ahead(self, key: str | None, flight: Any, until_ms: float) -> int:
        """How many of :meth:`around`'s exchanges had started before ``until_ms`` from ``flight``'s t0 and not ended
        by its t0: a count, no spans built (the analysis thread asks it of every request to an engine that did not
        report its queue; the spans only when a rule reads them)."""
        t0 = flight.clock.t0
        return sum(1 for _, s, _, _, e, _ in self._overlapping(key, flight)
                   if round((s - t0) * 1000.0, 1) < until_ms and (e is None or round((e - t0) * 1000.0, 1) > 0))
