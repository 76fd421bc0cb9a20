"""What the live view shows, as plain data: ``LiveSnapshot`` and the two ways to build one.

``from_capture`` (here) copies ``Capture.snapshot()`` inside ``firsttoken proxy``; ``DbSource``
(``db.py``) polls the SQLite file read-only for ``firsttoken live``. The snapshot types and rolling
statistics are in ``data.py``; this module re-exports them.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import Any

from firsttoken.addon.routing import client_bases
from firsttoken.addon.store.writer import describe_health
from firsttoken.cli.live.data import (
    DEFAULT_WINDOW,
    RECENT_KEEP,
    ROW_FIELDS,
    FlightView,
    LiveSnapshot,
    ModelStats,
    Session,
    Tally,
    conversation_line,
    get_field,
    is_error,
    model_stats,
    session_models,
    slim,
)
from firsttoken.cli.live.db import STALE_IN_FLIGHT_S, DbSource, connect_ro, iso, parse_iso


# -- the header ---------------------------------------------------------------------------
def route_lines(listen_url: str, routes: Iterable[Any], egress: Any = None) -> list[tuple[str, str]]:
    """(where clients point, where it goes), the upstream followed by its egress proxy when one applies."""
    out = []
    for r in routes:
        d = egress.decide(r.scheme, r.host, r.port) if egress is not None else None
        out.append((listen_url + (r.mount or ""), r.url + (f" via {d.proxy.url}" if d is not None and d.proxy else "")))
    return out


def base_url_hint(listen_url: str, routes: list[Any]) -> str | None:
    """What to paste into a client, per client family (the same lines as the plain banner:
    both ask ``routing.client_bases``), joined by two spaces."""
    if not routes:
        return None
    return "  ".join(cb.text + (f" (won't work: see `firsttoken env {cb.family}`)" if cb.warnings else "")
                     for cb in client_bases(listen_url, routes))


# -- in-process ---------------------------------------------------------------------------
def flight_view(d: Mapping[str, Any], now: float) -> FlightView:
    """A ``Flight.live_view()`` dict at perf_counter time ``now``."""
    t0 = d.get("t0") or now
    headers, first = d.get("headers_at"), d.get("first_token_at")
    events = d.get("events") or 0
    rate = None
    if first is not None and events and now - first >= 0.25:
        rate = events / (now - first)
    return FlightView(
        id=d.get("id") or "",
        elapsed_s=max(0.0, now - t0),
        phase=d.get("phase") or "connecting",
        route=d.get("route"), model=d.get("model"), api=d.get("api"), path=d.get("path"),
        status=d.get("status"), prompt_tokens_est=d.get("prompt_tokens_est"),
        ttfb_ms=None if headers is None else (headers - t0) * 1000.0,
        tokens=events if first is not None else None,
        tok_per_s=rate,
    )


def from_capture(
    capture: Any,
    *,
    listen_url: str,
    tally: Tally | None = None,
    window: int = DEFAULT_WINDOW,
    wall_now: float | None = None,
    cache: dict[str, Any] | None = None,
) -> LiveSnapshot:
    """Build from a ``Capture`` (or the dict its ``snapshot()`` returned).

    Pass the same ``cache`` dict on every call (the refresh loop does): the finished part
    (recent rows, per-model stats) is then recomputed only when a request has finished.
    """
    snap = capture if isinstance(capture, Mapping) else _snapshot(capture)
    now = snap["now"]
    flights = sorted((flight_view(d, now) for d in snap["in_flight"]), key=lambda f: -f.elapsed_s)
    done = snap["recent"]
    key = (len(done), get_field(done[-1], "id") if done else None, window)
    if cache is not None and cache.get("key") == key:
        recent, models = cache["recent"], cache["models"]
    else:
        done = list(done)
        recent, models = [slim(r) for r in done[-RECENT_KEEP:]], model_stats(done, window)
        if cache is not None:
            cache.update(key=key, recent=recent, models=models)
    routes = list(snap.get("routes") or [])
    return LiveSnapshot(
        routes=route_lines(listen_url, routes, None if isinstance(capture, Mapping) else getattr(capture, "egress", None)),
        base_url=base_url_hint(listen_url, routes),
        db_path=snap.get("db_path"),
        uptime_s=max(0.0, (wall_now or time.time()) - (snap.get("started") or time.time())),
        requests=tally.requests if tally else len(done),
        errors=tally.errors if tally else sum(1 for r in done if is_error(r)),
        in_flight=flights,
        recent=list(recent),
        models=list(models),
        window=window,
        note=describe_health(snap.get("store")),
        load=snap.get("load"),
        conversation=conversation_line(done),
    )


def _snapshot(capture: Any) -> dict[str, Any]:
    # The proxy's thread mutates these collections; the copies are single C-level calls, but
    # retry once rather than fail a frame if a resize ever races with one.
    for _ in range(3):
        try:
            return capture.snapshot()
        except RuntimeError:
            time.sleep(0.001)
    return capture.snapshot()


__all__ = [
    "DEFAULT_WINDOW", "RECENT_KEEP", "ROW_FIELDS", "STALE_IN_FLIGHT_S", "DbSource", "FlightView", "LiveSnapshot",
    "ModelStats", "Session", "Tally", "base_url_hint", "connect_ro", "conversation_line", "flight_view", "from_capture", "is_error", "iso",
    "model_stats", "parse_iso", "route_lines", "session_models", "slim",
]
