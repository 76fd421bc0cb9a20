"""The tap as the proxy runs it (``defer=True``): decoded live until the first visible token,
then kept and decoded on the analysis thread (``drain``). Whatever the chunking, gzip or
garbage, the result must be exactly what decoding every chunk live gives, with the same times."""

from __future__ import annotations

import gzip
import json
import random
import threading
import zlib

import pytest
from test_real_streams import FIXTURES

from firsttoken.addon import tap as tapmod
from firsttoken.addon.record import Clock
from firsttoken.addon.tap import StreamTap

pytestmark = pytest.mark.slow  # large responses under load: the slow tier (`pytest -m slow`)


def _chunks(raw: bytes, rng: random.Random) -> list[bytes]:
    out, i = [], 0
    while i < len(raw):
        n = rng.choice([1, 3, 17, 64, 300, 5000])
        out.append(raw[i:i + n])
        i += n
    return out


def _state(t: StreamTap) -> dict:
    c = t.clock
    f = t.facts
    return {
        "clock": (c.first_byte, c.first_token, c.first_visible, c.last_byte, list(c.token_events), c.events_over_cap),
        "facts": {k: getattr(f, k) for k in vars(f)} if hasattr(f, "__dict__") else repr(f),
        "text": ("".join(t.text), "".join(t.reasoning_text)), "chars": (t.output_chars, t.reasoning_chars),
        "bytes": t.bytes, "comments": t.sse_comments, "oversize": t.oversize_events,
        "error": t.error, "decode_error": t.decode_error, "saved": bytes(t.saved),
    }


def _run(chunks: list[bytes], api: str, ctype: str, enc: str | None, defer: bool, drain_every: int = 0,
         keep_body: int = 0) -> StreamTap:
    """Feed ``chunks`` at fake, increasing times; drain now and then (as the live view would)."""
    now = [1000.0]
    real = tapmod.time.perf_counter
    tapmod.time.perf_counter = lambda: now[0]
    try:
        t = StreamTap(Clock(t0=999.0), api, ctype, enc, keep_body=keep_body, defer=defer)
        for i, ch in enumerate(chunks):
            now[0] += 0.01
            assert t(ch) is ch  # forwarded as is, whatever happens to the copy
            if drain_every and i % drain_every == 0:
                t.drain()
        now[0] += 0.01
        t(b"")
        t.finish()
    finally:
        tapmod.time.perf_counter = real
    t.drain()
    t.parse_body()
    return t


def _fixture(path):
    fx = json.loads(path.read_text())
    raw = b"".join(e["raw"].encode("utf-8") for e in fx["events"])
    return fx, raw


STREAMS = [p for p in FIXTURES if json.loads(p.read_text())["kind"] == "sse"]


@pytest.mark.parametrize("path", STREAMS, ids=[p.parent.name + "/" + p.name.split(".")[0] for p in STREAMS])
def test_deferred_decoding_equals_live_on_every_real_stream(path):
    fx, raw = _fixture(path)
    ctype = fx["response_headers"].get("Content-Type") or fx["response_headers"].get("content-type") or "text/event-stream"
    for seed in range(3):
        chunks = _chunks(raw, random.Random(seed)) if seed else [e["raw"].encode() for e in fx["events"]]
        live = _run(chunks, fx["expected"]["api"] or "openai.chat", ctype, None, defer=False)
        for drain_every in (0, 1, 7):
            deferred = _run(chunks, fx["expected"]["api"] or "openai.chat", ctype, None, defer=True,
                            drain_every=drain_every, keep_body=1000)
            live_saved = _run(chunks, fx["expected"]["api"] or "openai.chat", ctype, None, defer=False, keep_body=1000)
            assert _state(deferred) == _state(live_saved), (seed, drain_every)
        if fx["expected"].get("has_visible"):
            assert live.clock.first_visible is not None


def _openai_stream(n: int, junk_at: int | None = None) -> bytes:
    out = []
    for i in range(n):
        if i == junk_at:
            out.append(b"data: {not json\n\n: keep-alive\n\nevent: ping\r\ndata: {}\r\n\r\n")
        out.append(b"data: " + json.dumps({"choices": [{"index": 0, "delta": {"content": f"w{i} "}}]}).encode() + b"\n\n")
    out.append(b"data: [DONE]\n\n")
    return b"".join(out)


@pytest.mark.parametrize("junk", [None, 5])
def test_deferred_equals_live_with_gzip_and_garbage(junk):
    raw = _openai_stream(40, junk)
    for enc, body in ((None, raw), ("gzip", gzip.compress(raw))):
        for seed in range(4):
            if enc == "gzip":  # flushed per piece, as a server compressing a stream does
                co = zlib.compressobj(wbits=31)
                chunks = [co.compress(p) + co.flush(zlib.Z_SYNC_FLUSH) for p in _chunks(raw, random.Random(seed))]
                chunks.append(co.flush())
            else:
                chunks = _chunks(body, random.Random(seed))
            live = _run(chunks, "openai.chat", "text/event-stream", enc, defer=False)
            deferred = _run(chunks, "openai.chat", "text/event-stream", enc, defer=True, drain_every=seed)
            assert _state(deferred) == _state(live)
            assert deferred.output_chars == sum(len(f"w{i} ") for i in range(40))


def test_deferring_starts_at_the_first_visible_token_and_asks_for_a_drain_when_too_much_waits(monkeypatch):
    monkeypatch.setattr(tapmod, "DEFER_MAX_BYTES", 2000)
    asked = []
    t = StreamTap(Clock(t0=0.0), "openai.chat", "text/event-stream", None, defer=True, on_backlog=lambda: asked.append(1))
    role = b'data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}\n\n'
    t(role)
    assert not t.deferring and t.clock.first_visible is None  # nothing visible yet: decoded live
    events = _openai_stream(200).split(b"\n\n")
    t(events[0] + b"\n\n")
    assert t.deferring and t.clock.first_visible is not None and len(t.clock.token_events) == 1
    for ev in events[1:50]:
        t(ev + b"\n\n")
    assert len(t.clock.token_events) == 1 and t.kept  # kept, not decoded on the event loop
    assert asked == [1]  # once, until drained
    t.drain()
    assert not t.kept and len(t.clock.token_events) == 50 and not t.backlog_asked


def _same_as_live(t: StreamTap, chunks: list[bytes]) -> None:
    """Finish the deferring tap ``t`` and check it ends with the figures a live tap fed the same
    chunks of ``_openai_stream(3000)`` has."""
    t.finish()
    t.drain()
    live = StreamTap(Clock(t0=0.0), "openai.chat", "text/event-stream", None)
    for ch in chunks:
        live(ch)
    live.finish()
    assert t.output_chars == live.output_chars == sum(len(f"w{i} ") for i in range(3000))
    assert len(t.clock.token_events) == len(live.clock.token_events) == 3000 and t.facts.done


def test_a_backlog_the_analysis_thread_never_drains_stays_bounded(monkeypatch):
    """A fast stream can outrun the analysis thread (it gets the GIL only between the event
    loop's turns): beyond DEFER_HARD_MAX_BYTES the event loop decodes the backlog itself, so
    memory stays bounded and the figures are still those of live decoding."""
    monkeypatch.setattr(tapmod, "DEFER_MAX_BYTES", 2000)
    monkeypatch.setattr(tapmod, "DEFER_HARD_MAX_BYTES", 10_000)
    raw = _openai_stream(3000)
    chunks = _chunks(raw, random.Random(7))
    asked, peak = [], 0
    t = StreamTap(Clock(t0=0.0), "openai.chat", "text/event-stream", None, defer=True, on_backlog=lambda: asked.append(1))
    for ch in chunks:  # nobody answers on_backlog
        t(ch)
        peak = max(peak, t.kept_bytes - t.drained_bytes)
    assert t.deferring and asked and len(raw) > 10 * 10_000
    assert peak <= 10_000 + max(map(len, chunks))
    _same_as_live(t, chunks)


def test_the_event_loop_decodes_a_backlog_in_slices_never_all_at_once(monkeypatch):
    """When the event loop has to decode (the analysis thread fell behind), each chunk costs at
    most a slice about twice its own size: a fast 20 MB response must not hold every other
    stream while its whole backlog is decoded."""
    monkeypatch.setattr(tapmod, "DEFER_MAX_BYTES", 2000)
    monkeypatch.setattr(tapmod, "DEFER_HARD_MAX_BYTES", 10_000)
    monkeypatch.setattr(tapmod, "DEFER_SLICE_BYTES", 0, raising=False)
    raw = _openai_stream(3000)
    chunks = [raw[i:i + 256] for i in range(0, len(raw), 256)]
    t = StreamTap(Clock(t0=0.0), "openai.chat", "text/event-stream", None, defer=True, on_backlog=lambda: None)
    slices = []
    for ch in chunks:
        before = t.drained_bytes
        t(ch)
        slices.append(t.drained_bytes - before)
    assert any(slices)  # the loop did decode ...
    assert max(slices) <= 3 * 256  # ... a bounded slice per chunk (twice its size, plus the chunk it stops in)
    _same_as_live(t, chunks)


def test_the_event_loop_never_waits_for_the_analysis_threads_drain(monkeypatch):
    monkeypatch.setattr(tapmod, "DEFER_MAX_BYTES", 2000)
    monkeypatch.setattr(tapmod, "DEFER_HARD_MAX_BYTES", 10_000)
    raw = _openai_stream(3000)
    chunks = [raw[i:i + 256] for i in range(0, len(raw), 256)]
    t = StreamTap(Clock(t0=0.0), "openai.chat", "text/event-stream", None, defer=True, on_backlog=lambda: None)
    t(chunks[0])
    assert t.deferring
    with t._draining:  # the analysis thread is in the middle of a drain
        worker = threading.Thread(target=lambda: [t(ch) for ch in chunks[1:200]], daemon=True)
        worker.start()
        worker.join(5.0)
        assert not worker.is_alive(), "the event loop blocked on the analysis thread's drain"
        assert t.kept_bytes - t.drained_bytes > 10_000  # nothing decoded meanwhile
    t.finish()
    t.drain()
    assert not t.kept and t.drained_bytes == t.kept_bytes  # the analysis thread's drain did it all
