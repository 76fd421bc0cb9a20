"""The proxy's per-request memory keeps a window, not history: each structure driven far past its bound
stays at it (issue 37: a proxy left running for days keeps its memory flat)."""

from __future__ import annotations

from types import SimpleNamespace

from firsttoken.addon.engines.window import PER_UPSTREAM, UPSTREAMS, Window


def _flight(i: int, t0: float = 100.0) -> SimpleNamespace:
    clock = SimpleNamespace(t0=t0, headers=t0 + 0.01, first_token=t0 + 0.02, first_visible=None, last_byte=t0 + 1.0,
                            end=t0 + 1.0)
    rec = SimpleNamespace(id=f"r{i}", engine_prompt_tokens=None, usage_prompt_tokens=None, prompt_tokens_est=10)
    return SimpleNamespace(record=rec, clock=clock)


def test_the_engine_window_keeps_the_last_exchanges_of_each_upstream_and_the_last_upstreams():
    w = Window()
    for i in range(20 * PER_UPSTREAM):  # all overlapping one another: only the window is kept
        f = _flight(i)
        w.started("http://engine", f)
        w.finished("http://engine", f)
    judged = _flight(-1)
    spans = w.around("http://engine", judged)
    assert len(spans) == PER_UPSTREAM
    assert {s.id for s in spans} == {f"r{i}" for i in range(19 * PER_UPSTREAM, 20 * PER_UPSTREAM)}  # the newest
    for u in range(3 * UPSTREAMS):
        f = _flight(10_000 + u)
        w.started(f"http://engine-{u}", f)
    assert w.around("http://engine", judged) == ()  # the least recently used upstreams are let go
    assert len(w.around(f"http://engine-{3 * UPSTREAMS - 1}", judged)) == 1



def test_the_engine_window_counts_those_ahead_as_its_spans_do():
    """``Window.ahead`` (the count the analysis thread takes of every engine request) agrees with the spans
    ``around`` builds for the rules, whatever overlaps: live and finished exchanges, before, during and after."""
    import random

    rnd = random.Random(7)
    w = Window()
    for i in range(PER_UPSTREAM):
        t0 = 100.0 + rnd.uniform(-2.0, 2.0)
        f = _flight(i, t0)
        f.clock.last_byte = f.clock.end = t0 + rnd.uniform(0.001, 3.0)
        w.started("http://engine", f)
        if rnd.random() < 0.6:
            w.finished("http://engine", f)
        else:
            f.clock.last_byte = f.clock.end = None  # still in flight
    judged = _flight(-1)
    w.started("http://engine", judged)
    spans = w.around("http://engine", judged)
    assert 0 < len(spans) < PER_UPSTREAM
    for until in (-500.0, 0.0, 5.0, 20.0, 400.0, 1500.0, 5000.0):
        want = sum(1 for n in spans if n.start_ms < until and (n.end_ms is None or n.end_ms > 0))
        assert w.ahead("http://engine", judged, until) == want, until


def test_a_diagnosis_builds_the_engine_spans_only_when_a_rule_reads_them():
    from firsttoken.addon.diagnose import DiagnosisInput, diagnose
    from firsttoken.addon.record import Record

    calls = []

    def spans():
        calls.append(1)
        return ()

    rec = Record(id="x", started_at="2026-12-08T00:00:00Z", method="POST", path="/v1/chat/completions", upstream="http://127.0.0.1:8080", status=200,
                 ttft_ms=30.0, ttfb_ms=5.0, total_ms=300.0, itl_max_ms=20.0, api="openai.chat", stream=True)
    diagnose(rec, DiagnosisInput(neighbours=spans))
    assert calls == []  # no stall, no queue: no rule asked
    rec.itl_max_ms, rec.event_offsets = 3000.0, [30.0, 60.0, 3060.0]  # a silence past --stall-ms at an engine
    diagnose(rec, DiagnosisInput(neighbours=spans))
    assert calls == [1]
