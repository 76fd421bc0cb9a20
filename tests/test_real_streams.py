"""Real traffic as a regression suite: every stream recorded from a real provider, replayed
through the real proxy, must come out byte-identical and be recorded as what it was.

The recordings live outside the project, in ``../shared/real-streams`` beside the clone (its
README describes the format); they are read at test time, never copied here. Each one is served
by a loopback upstream with a known pacing, requested with the client's real path, query,
headers and body, and the record is compared with the fixture's ``expected`` values (null there
means "not judged" and is skipped).
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from rawserver import Replay, ReplayUpstream

from firsttoken.cli.proxy.server import ProxyServer

ROOT = Path(__file__).resolve().parent.parent

#: seconds between events in short streams (every event stands alone on the wire)
EVENT_GAP = 0.025
#: streams longer than this are paced at FAST_GAP, except around the events a check times
SHORT_STREAM = 60
FAST_GAP = 0.002
#: silence before an event whose arrival a check times, and (longer) after it, so that the
#: timed event and its neighbours are told apart by the clock alone
BEFORE_KEY = 0.04
AFTER_KEY = 0.09
#: how late the proxy may stamp an event it has been sent (event loop under load); below AFTER_KEY
LATE_MS = 60.0


def _shared_dir() -> Path | None:
    """``../shared/real-streams`` beside the clone (for a git worktree: beside its main checkout)."""
    env = os.environ.get("FIRSTTOKEN_REAL_STREAMS")
    if env:  # an explicit place: only there
        return Path(env) if Path(env).is_dir() else None
    candidates = [ROOT.parent / "shared" / "real-streams"]
    git = ROOT / ".git"
    if git.is_file():  # a worktree: ".git" says "gitdir: <main>/.git/worktrees/<name>"
        text = git.read_text(encoding="utf-8", errors="replace").strip()
        if text.startswith("gitdir:"):
            main = Path(text.split(":", 1)[1].strip()).resolve().parent.parent.parent
            candidates.append(main.parent / "shared" / "real-streams")
    return next((c for c in candidates if c.is_dir()), None)


SHARED = _shared_dir()
FIXTURES = sorted(SHARED.glob("*/*.fixture.json")) if SHARED else []


def _fixture_id(p: Path) -> str:
    return f"{p.parent.name}/{p.name.removesuffix('.fixture.json')}"


PARAMS = [pytest.param(p, id=_fixture_id(p)) for p in FIXTURES] or [pytest.param(None, id="real-streams-missing")]


# -- serving -----------------------------------------------------------------------------


def key_events(exp: dict[str, Any]) -> set[int]:
    """Indexes of the events whose arrival time a check compares with the record."""
    return {i for i in (exp.get("first_visible"), exp.get("first_reasoning"), exp.get("ttft_alt_first"))
            if isinstance(i, int)}


def replay_of(fx: dict[str, Any]) -> Replay:
    """The fixture as the upstream sends it: SSE as chunked events with known gaps, a JSON
    body with a Content-Length (as the providers send error bodies)."""
    headers = list(fx["response_headers"].items())
    if fx["kind"] != "sse":
        return Replay(fx["status"], headers, [fx["body"].encode("utf-8")], [BEFORE_KEY], framing="length")
    parts = [e["raw"].encode("utf-8") for e in fx["events"]]
    keys = key_events(fx["expected"])
    step = EVENT_GAP if len(parts) <= SHORT_STREAM else FAST_GAP
    gaps = []
    for i in range(len(parts)):
        gap = step
        if i == 0 or i in keys:
            gap = max(gap, BEFORE_KEY)
        if i - 1 in keys:
            gap = max(gap, AFTER_KEY)
        gaps.append(gap)
    return Replay(fx["status"], headers, parts, gaps, framing="chunked")


# -- shared servers ------------------------------------------------------------------------


class Bench:
    def __init__(self, proxy: ProxyServer, upstream: ReplayUpstream, db: Path, client: httpx.Client):
        self.proxy, self.upstream, self.db, self.client = proxy, upstream, db, client
        self.seen: set[str] = set()

    def new_rows(self) -> list[dict[str, Any]]:
        self.proxy.flush()
        conn = sqlite3.connect(str(self.db))
        conn.row_factory = sqlite3.Row
        try:
            rs = [dict(r) for r in conn.execute("SELECT * FROM requests ORDER BY started_at")]
        finally:
            conn.close()
        new = [r for r in rs if r["id"] not in self.seen]
        self.seen.update(r["id"] for r in new)
        return new


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    db = tmp_path_factory.mktemp("real-streams") / "ft.db"
    with ReplayUpstream() as up, ProxyServer([up.url], str(db), port=0) as p, \
            httpx.Client(timeout=30) as client:
        yield Bench(p, up, db, client)


# -- the tests -----------------------------------------------------------------------------


def _missing() -> None:
    msg = ("the recorded real streams are missing: expected them in ../shared/real-streams beside the "
           "clone (or set FIRSTTOKEN_REAL_STREAMS)")
    if os.environ.get("CI"):
        pytest.fail(msg)
    pytest.skip(msg)


def exchange(bench: Bench, fx: dict[str, Any], replay: Replay) -> tuple[dict[str, Any], float]:
    """Send the fixture's request through the proxy; check both directions byte for byte.
    Returns the new record and the moment the client sent the request."""
    bench.upstream.arm(replay)
    target = fx["path"] + (f"?{fx['query']}" if fx.get("query") else "")
    body = json.dumps(fx["request_body"]).encode("utf-8")
    got = bytearray()
    sent_at = time.perf_counter()
    with bench.client.stream("POST", bench.proxy.url + target, content=body, headers=fx["request_headers"]) as r:
        for part in r.iter_raw():
            got += part
    assert replay.done.wait(10), "the upstream never finished its answer"

    # The upstream saw the client's request, and the client got the upstream's bytes, unchanged.
    assert replay.request is not None
    method, upstream_target, upstream_headers, upstream_body = replay.request
    assert (method, upstream_target, upstream_body) == ("POST", target, body)
    have = {k.lower(): v for k, v in upstream_headers}
    for k, v in fx["request_headers"].items():
        assert have.get(k.lower()) == v, f"request header {k} reached the upstream as {have.get(k.lower())!r}"
    assert r.status_code == fx["status"]
    assert bytes(got) == bytes(replay.body), "the client did not receive the upstream's bytes unchanged"

    new = bench.new_rows()
    assert len(new) == 1, f"expected one record, got {len(new)}"
    return new[0], sent_at


def described(row: dict[str, Any]) -> str:
    return f"record: {json.dumps({k: row[k] for k in WATCHED}, default=str)}; findings: {row['findings']}"


def check_facts(row: dict[str, Any], fx: dict[str, Any], replay: Replay) -> None:
    """Everything but timing: the record against the fixture's ``expected`` (nulls skipped)."""
    exp = fx["expected"]
    findings = json.loads(row["findings"] or "[]")
    context = described(row)
    assert row["state"] == "done", context
    assert row["status"] == fx["status"], context
    assert row["method"] == "POST" and (row["path"] or "").split("?")[0] == fx["path"], context
    assert row["response_bytes"] == len(replay.body), context
    assert row["api"] == exp["api"], context
    assert row["model"] == exp["model"], context
    if exp.get("stream") is not None:
        assert bool(row["stream"]) == exp["stream"], context
    if exp.get("has_visible") is False:
        assert row["ttft_ms"] is None and row["output_chars"] == 0, context
    elif exp.get("has_visible") and fx["kind"] == "sse":
        assert row["ttft_ms"] is not None and row["output_chars"] > 0, context
    if exp.get("has_reasoning") is False:
        assert row["reasoning_chars"] == 0, context
        if exp.get("has_visible") is False:
            assert row["first_token_ms"] is None, context
    elif exp.get("has_reasoning"):
        assert row["reasoning_chars"] > 0 and row["first_token_ms"] is not None, context
    if exp.get("token_events") is not None:
        assert row["events"] == exp["token_events"], context
    if exp.get("malformed") is not None:
        assert row["malformed_events"] == exp["malformed"], context

    usage = exp.get("usage")
    if usage is not None:
        for key, column in (("prompt", "usage_prompt_tokens"), ("completion", "usage_completion_tokens"),
                            ("cached", "usage_cached_tokens")):
            if usage.get(key) is not None:
                assert row[column] == usage[key], f"{column}: {context}"
    if exp.get("finish_reason") is not None:
        assert row["finish_reason"] == exp["finish_reason"], context
    if exp.get("terminator") is not None:
        assert bool(row["stream_done"]) == exp["terminator"], context
        if exp["terminator"]:
            assert "stream.truncated" not in {f["code"] for f in findings}, context

    # Findings: an error only where the fixture has one (of an acceptable code), warnings only
    # where the fixture meets their documented condition.
    errors = {f["code"] for f in findings if f["severity"] == "error"}
    # (proxy.saturated is the proxy's note about its own machine, honest on a loaded one: not the stream's)
    warns = {f["code"] for f in findings if f["severity"] == "warn"} - {"proxy.saturated"}
    if exp.get("error") is False:
        assert not errors, context
    elif exp.get("error") is True:
        assert errors & set(exp["error_codes"]), context
    assert warns <= set(exp.get("allowed_warn") or []), context


def _near(stamp_lo: float, stamp_hi: float, sent: list[float], i: int, what: str) -> None:
    """The proxy stamped event ``i``: not before it was sent, and at most LATE_MS after (the
    next event follows AFTER_KEY later, so a stamp taken from a neighbour fails one side)."""
    assert stamp_hi >= sent[i], f"{what} is {1000 * (sent[i] - stamp_hi):.1f} ms before event {i} was sent"
    assert stamp_lo <= sent[i] + LATE_MS / 1000, \
        f"{what} is {1000 * (stamp_lo - sent[i]):.1f} ms after event {i} was sent (a later event?)"


def check_timing(row: dict[str, Any], fx: dict[str, Any], replay: Replay, client_sent: float) -> None:
    """TTFT stops at the first visible event, first_token at the first token of any kind.
    The proxy's t0 lies between the client's send and the upstream's receipt of the request."""
    exp = fx["expected"]
    t0_lo, t0_hi = client_sent, replay.received_at
    assert t0_hi is not None
    sent = replay.sent_at
    if exp.get("first_visible") is not None:
        assert row["ttft_ms"] is not None, described(row)
        lo, hi = t0_lo + row["ttft_ms"] / 1000, t0_hi + row["ttft_ms"] / 1000
        try:
            _near(lo, hi, sent, exp["first_visible"], "TTFT")
        except AssertionError:
            if exp.get("ttft_alt_first") is None:
                raise
            _near(lo, hi, sent, exp["ttft_alt_first"], "TTFT (the fixture's alternative reading)")
    firsts = [i for i in (exp.get("first_visible"), exp.get("first_reasoning")) if isinstance(i, int)]
    if firsts:
        assert row["first_token_ms"] is not None, described(row)
        ms = row["first_token_ms"] / 1000
        _near(t0_lo + ms, t0_hi + ms, sent, min(firsts), "the first token")


@pytest.mark.parametrize("path", PARAMS)
def test_real_stream_paced_through_the_proxy(request: pytest.FixtureRequest, path: Path | None) -> None:
    """As the provider sent it: SSE events as chunks with known gaps, JSON with a Content-Length."""
    if path is None:
        _missing()
    bench = request.getfixturevalue("bench")  # not started when there is nothing to replay
    fx = json.loads(path.read_text(encoding="utf-8"))
    replay = replay_of(fx)
    row, client_sent = exchange(bench, fx, replay)
    check_facts(row, fx, replay)
    check_timing(row, fx, replay, client_sent)


@pytest.mark.parametrize("path", PARAMS)
def test_real_stream_cut_anywhere_through_the_proxy(request: pytest.FixtureRequest, path: Path | None) -> None:
    """The same bytes cut at arbitrary places (mid-line, mid-character) and ended by closing the
    connection (JSON bodies: chunked): the record must not depend on where the network cuts."""
    if path is None:
        _missing()
    bench = request.getfixturevalue("bench")  # not started when there is nothing to replay
    fx = json.loads(path.read_text(encoding="utf-8"))
    paced = replay_of(fx)
    raw = b"".join(paced.parts)
    parts = [raw[i:i + CUT] for i in range(0, len(raw), CUT)]
    replay = Replay(fx["status"], paced.headers, parts, [0.001] * len(parts),
                    framing="close" if fx["kind"] == "sse" else "chunked")
    row, _ = exchange(bench, fx, replay)
    check_facts(row, fx, replay)


#: bytes per write in the cut-anywhere replay (odd, so cuts land mid-line and mid-character)
CUT = 509

WATCHED = ("api", "model", "status", "stream", "ttfb_ms", "first_token_ms", "ttft_ms", "events", "output_chars",
           "reasoning_chars", "usage_prompt_tokens", "usage_completion_tokens", "usage_cached_tokens",
           "finish_reason", "stream_done", "upstream_error", "upstream_error_type", "no_choices",
           "malformed_events", "malformed_sample")
