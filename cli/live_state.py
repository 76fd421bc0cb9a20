"""What the live view shows, as plain data: ``LiveSnapshot`` and the two ways to build one.

* ``from_capture``: inside ``firsttoken proxy``, from ``Capture.snapshot()`` (cheap copies,
  taken on the view thread; nothing here touches the proxy's event loop).
* ``DbSource``: for ``firsttoken live``, by polling the SQLite file read-only. In-flight rows
  are those with ``state='in_flight'``; their elapsed time comes from ``started_at``.

Per-model rolling P50/P95 (TTFB, TTFT, gap) cover the last ``window`` finished requests of
each model; ``Tally`` counts the whole session (header totals, final summary).
"""

from __future__ import annotations

import collections
import datetime as _dt
import sqlite3
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from firsttoken.addon.record import percentile

#: finished requests per model that the rolling percentiles and the sparkline cover
DEFAULT_WINDOW = 50
#: finished requests kept for the "recent" section
RECENT_KEEP = 30
#: in-flight DB rows older than this are leftovers of a proxy that was killed, not live requests
STALE_IN_FLIGHT_S = 15 * 60

#: the fields of a finished record the view uses (a slim copy; never the bodies or offsets)
ROW_FIELDS = (
    "id", "started_at", "state", "route", "upstream", "model", "api", "path", "status", "error",
    "client_aborted", "usage_prompt_tokens", "prompt_tokens_est", "tokens_exact",
    "usage_completion_tokens", "output_tokens_est", "ttfb_ms", "ttft_ms", "gap_ms", "tpot_ms",
    "total_ms", "findings", "top_code", "top_severity",
)


def _g(r: Any, k: str) -> Any:
    """A field of a Record or of a row dict."""
    if isinstance(r, dict):
        return r.get(k)
    return getattr(r, k, None)


def slim(r: Any) -> dict[str, Any]:
    """The fields the view needs, copied (findings as a new list of dicts)."""
    out = {k: _g(r, k) for k in ROW_FIELDS}
    f = out.get("findings")
    out["findings"] = [dict(x) for x in f] if isinstance(f, list) else []
    return out


def is_error(r: Any) -> bool:
    status = _g(r, "status")
    return bool(
        _g(r, "error")
        or _g(r, "client_aborted")
        or status is None
        or status >= 400
        or _g(r, "top_severity") == "error"
    )


# -- the snapshot -----------------------------------------------------------------------
@dataclass
class FlightView:
    """One request still in flight."""

    id: str
    elapsed_s: float
    phase: str  # connecting | waiting_headers | prefill | waiting_body | streaming
    route: str | None = None
    model: str | None = None
    api: str | None = None
    path: str | None = None
    status: int | None = None
    prompt_tokens_est: int | None = None
    ttfb_ms: float | None = None
    tokens: int | None = None  # token-bearing events so far (None: unknown, e.g. from the DB)
    tok_per_s: float | None = None


@dataclass
class ModelStats:
    model: str
    n: int
    errors: int
    ttfb_p50: float | None = None
    ttfb_p95: float | None = None
    ttft_p50: float | None = None
    ttft_p95: float | None = None
    gap_p50: float | None = None
    gap_p95: float | None = None
    ttft_series: list[float] = field(default_factory=list)  # oldest first, for the sparkline


@dataclass
class LiveSnapshot:
    routes: list[tuple[str, str]]  # (where clients reach the route, the upstream it forwards to)
    base_url: str | None  # the line to paste into a client, or None (attached to a DB)
    db_path: str | None
    uptime_s: float
    requests: int  # finished so far (this session / since attaching)
    errors: int
    in_flight: list[FlightView]  # oldest first
    recent: list[dict[str, Any]]  # finished rows (see ROW_FIELDS), newest last
    models: list[ModelStats]
    window: int = DEFAULT_WINDOW
    attached: bool = False  # True: read from the database of a proxy running elsewhere
    note: str | None = None  # e.g. "database not created yet"


# -- statistics ------------------------------------------------------------------------
def _pct(vals: list[float], q: float) -> float | None:
    return percentile(sorted(vals), q) if vals else None


def _stats(model: str, rows: list[Any], series: bool = True) -> ModelStats:
    cols = {k: [v for v in (_g(r, k) for r in rows) if v is not None] for k in ("ttfb_ms", "ttft_ms", "gap_ms")}
    return ModelStats(
        model=model,
        n=len(rows),
        errors=sum(1 for r in rows if is_error(r)),
        ttfb_p50=_pct(cols["ttfb_ms"], 50), ttfb_p95=_pct(cols["ttfb_ms"], 95),
        ttft_p50=_pct(cols["ttft_ms"], 50), ttft_p95=_pct(cols["ttft_ms"], 95),
        gap_p50=_pct(cols["gap_ms"], 50), gap_p95=_pct(cols["gap_ms"], 95),
        ttft_series=list(cols["ttft_ms"]) if series else [],
    )


def model_stats(rows: Iterable[Any], window: int = DEFAULT_WINDOW) -> list[ModelStats]:
    """Rolling stats over the last ``window`` finished requests of each model (rows oldest first)."""
    by: dict[str, collections.deque] = {}
    for r in rows:
        by.setdefault(_g(r, "model") or "–", collections.deque(maxlen=window)).append(r)
    return [_stats(m, list(d)) for m, d in sorted(by.items(), key=lambda kv: (-len(kv[1]), kv[0]))]


class Tally:
    """Session totals, fed one finished record at a time (from any thread)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.requests = 0
        self.errors = 0
        self._by_model: dict[str, list[tuple[float | None, float | None, float | None, bool]]] = {}

    def add(self, r: Any) -> None:
        err = is_error(r)
        item = (_g(r, "ttfb_ms"), _g(r, "ttft_ms"), _g(r, "gap_ms"), err)
        with self._lock:
            self.requests += 1
            self.errors += err
            self._by_model.setdefault(_g(r, "model") or "–", []).append(item)

    def summary(self) -> list[ModelStats]:
        """Per model over the whole session: count, errors, P50/P95 of TTFB/TTFT/gap."""
        with self._lock:
            items = {m: list(v) for m, v in self._by_model.items()}
        out = []
        for m, vals in sorted(items.items(), key=lambda kv: (-len(kv[1]), kv[0])):
            rows = [{"ttfb_ms": a, "ttft_ms": b, "gap_ms": c, "status": 500 if e else 200} for a, b, c, e in vals]
            out.append(_stats(m, rows, series=False))
        return out


# -- the header ---------------------------------------------------------------------------
def route_lines(listen_url: str, routes: Iterable[Any]) -> list[tuple[str, str]]:
    return [(listen_url + (r.mount or ""), r.url) for r in routes]


def base_url_hint(listen_url: str, routes: list[Any]) -> str | None:
    """What to paste into a client (the same advice as the plain banner)."""
    if not routes:
        return None
    r = routes[0]
    base = listen_url + (r.mount or "")
    v1 = "" if base.endswith("/v1") or (r.prefix or "").endswith("/v1") else "/v1"
    return f"OPENAI_BASE_URL={base}{v1}  ANTHROPIC_BASE_URL={base}"


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
    key = (len(done), _g(done[-1], "id") if done else None, window)
    if cache is not None and cache.get("key") == key:
        recent, models = cache["recent"], cache["models"]
    else:
        done = list(done)
        recent, models = [slim(r) for r in done[-RECENT_KEEP:]], model_stats(done, window)
        if cache is not None:
            cache.update(key=key, recent=recent, models=models)
    routes = list(snap.get("routes") or [])
    return LiveSnapshot(
        routes=route_lines(listen_url, routes),
        base_url=base_url_hint(listen_url, routes),
        db_path=snap.get("db_path"),
        uptime_s=max(0.0, (wall_now or time.time()) - (snap.get("started") or time.time())),
        requests=tally.requests if tally else len(done),
        errors=tally.errors if tally else sum(1 for r in done if is_error(r)),
        in_flight=flights,
        recent=list(recent),
        models=list(models),
        window=window,
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


# -- from the database (firsttoken live) -----------------------------------------------------
def parse_iso(s: str | None) -> float | None:
    if not s:
        return None
    try:
        t = _dt.datetime.fromisoformat(s)
    except ValueError:
        return None
    if t.tzinfo is None:
        t = t.replace(tzinfo=_dt.timezone.utc)
    return t.timestamp()


def iso(ts: float) -> str:
    return _dt.datetime.fromtimestamp(ts, _dt.timezone.utc).isoformat(timespec="milliseconds")


def connect_ro(path: str | Path) -> sqlite3.Connection:
    """A read-only connection: never creates, migrates or writes the file."""
    p = Path(path).expanduser().resolve()
    if not p.exists():
        raise FileNotFoundError(
            f"no firsttoken database at {p}: start `firsttoken proxy` (with the same --db) first, "
            "or point --db / FIRSTTOKEN_DB at the right file"
        )
    conn = sqlite3.connect(f"{p.as_uri()}?mode=ro", uri=True, check_same_thread=False, timeout=5)
    conn.row_factory = sqlite3.Row
    conn.execute("PRAGMA busy_timeout = 5000")
    return conn


class DbSource:
    """Polls a proxy's database read-only and keeps what the view needs between polls.

    ``poll()`` returns the requests that finished since the previous poll (oldest first) and
    refreshes the in-flight rows; ``snapshot()`` builds a ``LiveSnapshot`` (elapsed timers
    advance between polls).
    """

    def __init__(self, path: str | Path, window: int = DEFAULT_WINDOW, history: int = 500) -> None:
        self.path = str(path)
        self.window = window
        self.history = history
        self.conn = connect_ro(path)
        self.attached = time.time()
        self.tally = Tally()
        self.in_flight: list[dict[str, Any]] = []
        self.recent: list[dict[str, Any]] = []  # finished rows, newest last (window for stats)
        self.routes: list[tuple[str, str]] = []
        self.note: str | None = None
        self._seen: dict[str, str] = {}  # id -> started_at of finished rows already reported
        self._cutoff = self.attached  # finished rows that started before this were reported (or predate us)
        self._first = True
        self._derived: tuple[list[dict[str, Any]], list[ModelStats]] | None = None  # recent + stats, until new rows

    def close(self) -> None:
        self.conn.close()

    def _query(self, sql: str, params: Iterable[Any] = ()) -> list[dict[str, Any]]:
        from firsttoken.addon.store.queries import decode_row

        return [decode_row(dict(r)) for r in self.conn.execute(sql, list(params)).fetchall()]

    def poll(self) -> list[dict[str, Any]]:
        try:
            return self._poll()
        except sqlite3.OperationalError as e:
            msg = str(e)
            self.note = ("waiting for the proxy to create its tables" if "no such table" in msg
                         else f"database busy or unreadable ({msg}); retrying")
            return []

    def _poll(self) -> list[dict[str, Any]]:
        now = time.time()
        cols = ", ".join(ROW_FIELDS)
        self.in_flight = self._query(
            f"SELECT {cols}, phase FROM requests WHERE state = 'in_flight' AND started_at >= ? ORDER BY started_at",
            [iso(now - STALE_IN_FLIGHT_S)],
        )
        if self._first:
            # What finished before we attached is history: it fills the table and the
            # percentiles but is not reported as new, nor counted in this session's totals.
            hist = self._query(
                f"SELECT {cols} FROM requests WHERE state = 'done' ORDER BY started_at DESC LIMIT ?", [self.history]
            )
            hist.reverse()
            self.recent = hist
            self._derived = None
            for r in hist:
                self._seen[r["id"]] = r["started_at"] or ""
            self.routes = [
                (r["route"] or "default", r["upstream"] or "–")
                for r in self._query(
                    "SELECT route, upstream, MAX(started_at) AS last FROM requests "
                    "WHERE upstream IS NOT NULL GROUP BY route, upstream ORDER BY last DESC LIMIT 8"
                )
            ]
            self._cutoff = min([self.attached] + [parse_iso(r["started_at"]) or now for r in self.in_flight])
            self._first = False
            self.note = None
            return []
        # A request that finishes now started at most a few seconds before the oldest one we
        # saw in flight (or before our previous poll, allowing for the writer's batching).
        since = min([self._cutoff] + [parse_iso(r["started_at"]) or self._cutoff for r in self.in_flight])
        rows = self._query(
            f"SELECT {cols} FROM requests WHERE state = 'done' AND started_at >= ? ORDER BY started_at",
            [iso(since - 5.0)],
        )
        new = [r for r in rows if r["id"] not in self._seen]
        for r in new:
            self._seen[r["id"]] = r["started_at"] or ""
            self.tally.add(r)
            if r.get("upstream") and (r.get("route") or "default", r["upstream"]) not in self.routes:
                self.routes.append((r.get("route") or "default", r["upstream"]))
        if new:
            self.recent = (self.recent + new)[-self.history:]
            self._derived = None
        self._cutoff = min([now] + [parse_iso(r["started_at"]) or now for r in self.in_flight])
        horizon = iso(self._cutoff - 60.0)
        self._seen = {k: v for k, v in self._seen.items() if v >= horizon}
        self.note = None
        return new

    def snapshot(self, wall_now: float | None = None) -> LiveSnapshot:
        now = wall_now or time.time()
        if self._derived is None:
            self._derived = ([slim(r) for r in self.recent[-RECENT_KEEP:]], model_stats(self.recent, self.window))
        recent, models = self._derived
        flights = []
        for r in self.in_flight:
            started = parse_iso(r.get("started_at")) or now
            flights.append(FlightView(
                id=r["id"], elapsed_s=max(0.0, now - started), phase=r.get("phase") or "connecting",
                route=r.get("route"), model=r.get("model"), api=r.get("api"), path=r.get("path"),
                status=r.get("status"), prompt_tokens_est=r.get("prompt_tokens_est"),
            ))
        return LiveSnapshot(
            routes=list(self.routes),
            base_url=None,
            db_path=self.path,
            uptime_s=now - self.attached,
            requests=self.tally.requests,
            errors=self.tally.errors,
            in_flight=flights,
            recent=list(recent),
            models=list(models),
            window=self.window,
            attached=True,
            note=self.note,
        )
