"""Buffering, read from the stream's own shape: pure functions over a record's token-event times.

A hop that buffers lets held tokens go together: after a silence, many events within a fraction
of a millisecond. ``clumps`` groups the times, ``buffer_shape`` judges them; the thresholds below
are explained in docs/gateways.md ("Buffering").
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

# The thresholds live here, not in diagnose/thresholds.py (which re-exports them as BUFFERED_*), so
# that hops needs nothing of the diagnosis package.

#: consecutive token events closer than this (ms) may belong to one release (firsttoken stamps each
#: HTTP chunk of a read as it processes it: a few hundred us apart, the first visible token, decoded
#: live, 2 ms later on a busy machine); whether they do is RELEASE_GAP_MS's call ...
CLUMP_GAP_MS = 5.0
#: ... and a run of at least this many of them ...
CLUMP_MIN_EVENTS = 6
#: ... at most this far apart on average (ms; its single largest gap left out: one hiccup) is a release
#: of held events: 5,000 events a second, faster than any model streams (the fastest, ~3,000 tokens/s)
RELEASE_GAP_MS = 0.2
#: ... when it comes after a silence of at least this many ms (and twice the proxy's own delay) ...
HOLD_MIN_MS = 100.0
#: ... and such releases carry at least this share of the token events ...
HELD_SHARE = 0.7
#: ... of a stream of at least this many.
MIN_EVENTS = 8
#: a first release within this many ms of the headers came with them (mitmproxy parses the headers
#: before the body's first read is decoded: 5-8 ms apart through nginx + gzip on a busy machine)
WITH_HEADERS_MS = 50.0
#: not judged on a route whose unbuffered streams have a median ITL p50 below this (ms): they arrive clumped too
REF_ITL_MIN_MS = 1.0


def clumps(offsets: Sequence[float], gap_ms: float = CLUMP_GAP_MS) -> list[tuple[int, int]]:
    """(first index, count) of each run of events closer than ``gap_ms`` to the one before."""
    out: list[tuple[int, int]] = []
    start = 0
    for i in range(1, len(offsets)):
        if offsets[i] - offsets[i - 1] > gap_ms:
            out.append((start, i - start))
            start = i
    if offsets:
        out.append((start, len(offsets) - start))
    return out


def release_gap(offsets: Sequence[float], start: int, count: int) -> float:
    """The mean gap (ms) between the ``count`` events from ``start``, its single largest gap left out."""
    if count < 3:
        return 0.0
    gaps = [offsets[i] - offsets[i - 1] for i in range(start + 1, start + count)]
    return (sum(gaps) - max(gaps)) / (len(gaps) - 1)


def buffer_shape(offsets: Sequence[float], ttfb_ms: float | None, *, events: int | None = None,
                 ref_itl_ms: float | None = None, proxy_delay_ms: float | None = None) -> dict[str, Any] | None:
    """The facts of a buffered stream, or None.

    ``offsets``: token-event arrival times (ms from t0, ascending); ``ttfb_ms``: the headers;
    ``events``: how many token events there were (more than ``offsets`` when the record capped
    them: then the shape is not judged); ``ref_itl_ms``: the median ITL p50 of the same route's
    unbuffered streams, when known; ``proxy_delay_ms``: firsttoken's own delay on this request (a
    proxy that read late would clump a stream itself, so a hold must be well above it).

    Returns ``variant`` (``with_headers``: the first release came with the headers; ``tail``:
    the headers came early, then nothing, then nearly all at once; ``bursts``: several releases),
    ``events``, ``bursts`` (releases), ``held_events`` (events in them), ``largest`` (events in the
    largest), ``first_ms`` (when the first release came), ``held_ms`` (the longest silence before a
    release: for ``with_headers`` the client's whole wait from t0), ``wait_ms`` (from the headers
    to the first release), ``burst_ms`` (the first release's spread) and ``burst_events``.
    """
    n = len(offsets)
    if n < MIN_EVENTS or ttfb_ms is None or (events is not None and events > n):
        return None
    if ref_itl_ms is not None and ref_itl_ms < REF_ITL_MIN_MS:
        return None
    floor = max(HOLD_MIN_MS, 2.0 * (proxy_delay_ms or 0.0))
    releases = []  # (start index, count, silence before, with the headers)
    for start, count in clumps(offsets):
        if count < CLUMP_MIN_EVENTS or release_gap(offsets, start, count) > RELEASE_GAP_MS:
            continue
        at = offsets[start]
        # the proxy's own delay also separates the stamps of what arrived together
        with_headers = start == 0 and at - ttfb_ms <= WITH_HEADERS_MS + (proxy_delay_ms or 0.0)
        if start > 0:
            before = offsets[start - 1]
        else:
            before = 0.0 if with_headers else ttfb_ms
        silence = at - before
        if silence >= floor:
            releases.append((start, count, silence, with_headers))
    held = sum(r[1] for r in releases)
    if not releases or held < HELD_SHARE * n:
        return None
    first_start, first_count, _, first_with_headers = releases[0]
    first_at = offsets[first_start]
    if first_with_headers:
        variant = "with_headers"
    elif len(releases) == 1:
        variant = "tail"
    else:
        variant = "bursts"
    return {
        "variant": variant,
        "events": n,
        "bursts": len(releases),
        "held_events": held,
        "largest": max(r[1] for r in releases),
        "first_ms": round(first_at, 1),
        "held_ms": round(max(r[2] for r in releases), 1),
        "wait_ms": round(max(0.0, first_at - ttfb_ms), 1),
        "burst_ms": round(offsets[first_start + first_count - 1] - first_at, 1),
        "burst_events": first_count,
    }
