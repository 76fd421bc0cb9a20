"""A long-running proxy keeps its memory flat: a short `bench --soak` through the real proxy (issue 37).

Streams, JSON answers, 401s and WebSocket turns, a new connection each, the live feed read; every
row written, and past a warm-up the proxy's RSS grows far less than the 1.5 KB per request it did.
"""

from __future__ import annotations

import pytest

from firsttoken.cli.bench import soak

pytestmark = pytest.mark.slow  # thousands of requests through a proxy process

REQUESTS = 10_000
#: requests before growth is counted, as the issue counts them: the bounded structures (the 500
#: recent records, the 256 conversations, caches) fill, and the allocator's arenas settle, in the
#: first few thousand (a run that counted from 3,600 saw 1.5 MB of that settling as growth)
WARM_UP = 5000
#: KB per request past the warm-up the proxy may keep: unbounded, it kept 1.5-1.7; bounded, a
#: 100,000-request soak keeps well under 0.25 (RSS moves in arena-sized steps: a short run gets room)
MAX_KB_PER_REQUEST = 0.6


def test_a_long_running_proxy_writes_every_row_and_keeps_its_memory_flat():
    res = soak.run(REQUESTS, points=6)
    pts = res["points"]
    assert res["client_errors"] == 0, pts
    assert res["rows_expected"] >= REQUESTS
    assert res["rows_written"] == res["rows_expected"], pts
    assert res["feed_reads"] > 0  # the live feed was followed all along
    first = next(p for p in pts if p["requests"] >= WARM_UP)
    last = pts[-1]
    assert last["requests"] - first["requests"] >= 4000, pts
    kb = (last["rss_mb"] - first["rss_mb"]) * 1024.0 / (last["requests"] - first["requests"])
    assert kb <= MAX_KB_PER_REQUEST, (
        f"the proxy's RSS grew {kb:.3f} KB per request past the first {first['requests']:,} "
        f"(at most {MAX_KB_PER_REQUEST}): {pts}")
