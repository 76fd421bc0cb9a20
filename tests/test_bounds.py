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

