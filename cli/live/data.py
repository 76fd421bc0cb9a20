"""The plain data behind the live view: slim rows, the snapshot types and the statistics.

``LiveSnapshot`` is what ``live.render`` draws; ``slim`` copies the fields of a finished
record it needs. Per-model rolling P50/P95 (TTFB, TTFT, gap) cover the last ``window``
finished requests of each model; ``Tally`` counts the whole session (header totals, final
summary). ``live_state`` builds snapshots from a running proxy, ``live_db`` from its database.
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from firsttoken.addon.record import percentile
from firsttoken.addon.safe_text import printable, printable_data
from firsttoken.addon.store import queries
from firsttoken.cli.labels import label

#: finished requests per model that the rolling percentiles and the sparkline cover
DEFAULT_WINDOW = 50
#: finished requests kept for the "recent" section
RECENT_KEEP = 30

#: the fields of a finished record the view uses (a slim copy; never the bodies or offsets)
ROW_FIELDS = (
    "id", "started_at", "state", "route", "upstream", "model", "api", "path", "status", "error",
    "client_aborted", "stream", "usage_prompt_tokens", "prompt_tokens_est", "tokens_exact",
    "usage_completion_tokens", "output_tokens_est", "ttfb_ms", "ttft_ms", "gap_ms", "tpot_ms",
    "total_ms", "findings", "top_code", "top_severity",
)


def get_field(r: Any, k: str) -> Any:
    """A field of a Record or of a row dict."""
    if isinstance(r, dict):
        return r.get(k)
    return getattr(r, k, None)


def slim(r: Any) -> dict[str, Any]:
    """The fields the view needs, copied (findings as a new list of dicts)."""
    out = {k: get_field(r, k) for k in ROW_FIELDS}
    f = out.get("findings")
    out["findings"] = [dict(x) for x in f] if isinstance(f, list) else []
    return printable_data(out)  # upstream-controlled text never reaches the terminal raw


#: the store's one rule of what an error is (the same as `stats` and `logs --status error`)
is_error = queries.is_error
is_streamed = queries.is_streamed


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

    def __post_init__(self) -> None:
        self.route, self.model, self.path = printable(self.route), printable(self.model), printable(self.path)


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

    def __post_init__(self) -> None:
        self.model = printable(self.model)


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
    load: dict[str, Any] | None = None  # the proxy's own load (in-process only): LoadWatch.snapshot()
    conversation: dict[str, Any] | None = None  # the active conversation's progress (``conversation_line``)
    #: where an attached view reads: {"kind": "proxy", "url", "pid"} (its live feed) or {"kind": "db"}
    source: dict[str, Any] | None = None


def conversation_line(done: Any) -> dict[str, Any] | None:
    """The latest conversation's progress from finished records or rows (newest last): its id,
    turn, requests, side requests and cached share (None: not reported), worded by
    ``conversation_text`` in the view's language. Both sources use it: the proxy's own records
    (``state.from_capture``) and its database (``db.DbSource``)."""
    tail = list(done)[-200:]
    cid = next((get_field(r, "conversation_id") for r in reversed(tail) if get_field(r, "conversation_id")), None)
    if cid is None:
        return None
    mine = [r for r in tail if get_field(r, "conversation_id") == cid]
    turn = max((get_field(r, "turn") or 0) for r in mine)
    side = sum(1 for r in mine if get_field(r, "request_kind") in ("side", "count_tokens"))
    reported = [r for r in mine if get_field(r, "usage_cached_tokens") is not None and get_field(r, "usage_prompt_tokens")]
    share = None
    if reported:
        share = sum(get_field(r, "usage_cached_tokens") for r in reported) / sum(get_field(r, "usage_prompt_tokens") for r in reported)
    return {"id": cid, "turn": turn, "requests": len(mine), "side": side, "cached": share}


def conversation_text(c: dict[str, Any] | None, lang: str) -> str | None:
    """``latest conversation: turn 3 (the user's prompts so far), 12 requests (2 by the client itself: …), 41% of
    its prompt tokens from the cache; `firsttoken session 3f2a91c0` shows it turn by turn`` (or in Chinese)."""
    if not c:
        return None
    n = c["requests"]
    text = label(lang, "conv.line", turn=c["turn"],
                 requests=label(lang, "conv.requests.1" if n == 1 else "conv.requests", n=n))
    text += label(lang, "conv.side", n=c["side"]) if c["side"] else ""
    if c.get("cached") is not None:
        text += label(lang, "conv.cached", pct=f"{c['cached'] * 100:.0f}")
    text += label(lang, "conv.more", cid=str(c["id"])[:8])  # `session` takes an id's first characters
    return printable(text)  # a client-sent session id never reaches the terminal raw


# -- statistics ------------------------------------------------------------------------
def _pct(vals: list[float], q: float) -> float | None:
    return percentile(sorted(vals), q) if vals else None


def _stats(model: str, rows: list[Any], series: bool = True) -> ModelStats:
    """Counts over every request; the percentiles over the streamed ones (the store's one population rule)."""
    streamed = [r for r in rows if is_streamed(r)]
    cols = {k: [v for v in (get_field(r, k) for r in streamed) if v is not None] for k in ("ttfb_ms", "ttft_ms", "gap_ms")}
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
        by.setdefault(get_field(r, "model") or "–", collections.deque(maxlen=window)).append(r)
    return [_stats(m, list(d)) for m, d in sorted(by.items(), key=lambda kv: (-len(kv[1]), kv[0]))]


class Tally:
    """Session counters for the live header, fed one finished record at a time (from any thread):
    two integers, whatever the session's length. The summary on exit is the store's
    (``session_models``), by the one stats engine."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.requests = 0
        self.errors = 0

    def add(self, r: Any) -> None:
        err = is_error(r)
        with self._lock:
            self.requests += 1
            self.errors += err


@dataclass(frozen=True)
class Session:
    """A session's summary from the store: per model, then the totals (model calls, their errors, and
    the requests that are no model call: probes, model lists, which the figures leave out)."""
    models: list[ModelStats]
    requests: int
    errors: int
    other: int


def session_models(db_path: str, since: str) -> Session | None:
    """Per model since ``since`` (an ISO time: when the proxy started, or the view attached), as
    `firsttoken stats --since` gives it (``stats_queries.compute``: counts and errors over the model
    calls, the percentiles over each metric's population); None when the store cannot be read."""
    from firsttoken.addon.store import stats_queries as sq
    from firsttoken.addon.store.db import open_db

    try:
        db = open_db(db_path, write=False)
        try:
            res = sq.compute(db, queries.Filters(since=since), by="model", qs=(50, 95), fit=False,
                             metrics=tuple(m for m in sq.METRICS if m[0] in ("ttfb", "ttft", "gap")))
        finally:
            db.close()
    except Exception:  # noqa: BLE001 — a store that cannot be read: the caller says so and uses its counters
        return None
    models = []
    for g in res["groups"]:
        def p(k: str, q: str, g: dict = g) -> float | None:
            return (g.get(k) or {}).get(q)

        models.append(ModelStats(model=g["group"] if g["group"] is not None else "–", n=g["count"],
                                 errors=g["errors"], ttfb_p50=p("ttfb_ms", "p50"), ttfb_p95=p("ttfb_ms", "p95"),
                                 ttft_p50=p("ttft_ms", "p50"), ttft_p95=p("ttft_ms", "p95"),
                                 gap_p50=p("gap_ms", "p50"), gap_p95=p("gap_ms", "p95")))
    return Session(models, sum(m.n for m in models), sum(m.errors for m in models), res["not_model_calls"])
