"""Analysis steps aside while the event loop lags: a burst is analysed after it, but never
later than POSTPONE_S of continuous lag, and at once when the loop keeps up."""

from __future__ import annotations

import threading
import time

from firsttoken.addon import analyzer as A
from firsttoken.addon.flight import Flight
from firsttoken.addon.record import Clock, Record
from firsttoken.addon.store.writer import Writer


def _flight(i: int) -> Flight:
    t = time.perf_counter()
    rec = Record(id=f"postpone-{i}", started_at="2026-12-01T00:00:00.000+00:00", api="openai.chat", path="/v1/chat/completions")
    f = Flight(record=rec, clock=Clock(t0=t, end=t + 0.01))
    f.body_done = True
    return f


def _run(tmp_path, lag_until: float | None, monkeypatch, postpone_s: float = 0.6) -> list[float]:
    """Seconds from queueing to each record being done, with the loop lagging until ``lag_until``."""
    monkeypatch.setattr(A, "POSTPONE_S", postpone_s)
    A.tokens.load_encoding("cl100k_base")  # loaded once per process: not inside the timings
    done: dict[str, float] = {}
    ev = threading.Event()
    w = Writer(str(tmp_path / "p.db"))
    an = A.Analyzer(w, A.Settings(), on_done=lambda f: (done.__setitem__(f.record.id, time.monotonic()),
                                                        len(done) == 5 and ev.set()))
    start = time.monotonic()
    an.pause = lambda: 0.005 if lag_until is not None and time.monotonic() < start + lag_until else 0.0
    try:
        for i in range(5):
            an.finish(_flight(i))
        assert ev.wait(10), "records were never finished"
    finally:
        an.close()
        w.close()
    return sorted(t - start for t in done.values())


def test_no_lag_no_wait(tmp_path, monkeypatch):
    assert _run(tmp_path, None, monkeypatch)[-1] < 0.3


def test_a_short_lag_is_waited_out(tmp_path, monkeypatch):
    times = _run(tmp_path, 0.3, monkeypatch)
    assert times[0] >= 0.28 and times[-1] < 0.6  # after the lag, not during it


def test_a_long_lag_postpones_at_most_postpone_s(tmp_path, monkeypatch):
    times = _run(tmp_path, 5.0, monkeypatch, postpone_s=0.4)
    assert 0.38 <= times[0] and times[-1] < 1.5  # analysed during the lag, once POSTPONE_S ran out
