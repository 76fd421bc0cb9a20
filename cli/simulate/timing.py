"""The timing model: every deadline of one answer, computed from the moment its request line arrived."""

from __future__ import annotations

import random
import threading
import time

from firsttoken.cli.simulate.config import SimConfig

SLOW_TTFB_EXTRA_MS = 1000.0
KEEPALIVE_INTERVAL_S = 0.1


class Jitter:
    """Multiplicative jitter factors in [1 - j, 1 + j], thread-safe, reproducible with a seed."""

    def __init__(self, fraction: float, seed: int | None) -> None:
        self.fraction = fraction
        self._rng = random.Random(seed)
        self._lock = threading.Lock()

    def factor(self) -> float:
        if not self.fraction:
            return 1.0
        with self._lock:
            return 1.0 + self._rng.uniform(-self.fraction, self.fraction)


class Schedule:
    """Absolute (time.monotonic) deadlines for one answer.

    headers_at = arrival + ttfb (+1 s with slow_ttfb)
    first_at   = headers_at + prefill_base + prefill_per_1k * uncached_prompt_tokens / 1000
    token k    = first_at + k * tpot (+ stall_ms for the second half with the stall fault)
    """

    def __init__(self, cfg: SimConfig, arrival: float, jitter: Jitter, *, slow_ttfb: bool = False) -> None:
        self.cfg = cfg
        self.arrival = arrival
        self._jitter = jitter
        ttfb = cfg.ttfb_ms * jitter.factor() + (SLOW_TTFB_EXTRA_MS if slow_ttfb else 0.0)
        self.headers_at = arrival + max(0.0, ttfb) / 1000.0
        self.first_at = self.headers_at
        self.token_times: list[float] = []

    def plan(self, prompt_tokens: int, n_tokens: int, *, stall: bool = False) -> None:
        cfg = self.cfg
        prefill_ms = (cfg.prefill_base_ms + cfg.prefill_ms_per_1k_tokens * prompt_tokens / 1000.0) * self._jitter.factor()
        self.first_at = self.headers_at + max(0.0, prefill_ms) / 1000.0
        times: list[float] = []
        t = self.first_at
        for k in range(n_tokens):
            if stall and k == n_tokens // 2 and k > 0:
                t += cfg.stall_ms / 1000.0
            times.append(t)
            t += max(0.0, cfg.tpot_ms * self._jitter.factor()) / 1000.0
        self.token_times = times

    def at(self, slot: int | None) -> float | None:
        """Deadline of an event attached to token `slot` (None: no deadline, send right away)."""
        if slot is None:
            return None
        if not self.token_times:
            return self.first_at
        return self.token_times[min(slot, len(self.token_times) - 1)]

    @property
    def end_at(self) -> float:
        return self.token_times[-1] if self.token_times else self.first_at


def sleep_until(deadline: float | None, stop: threading.Event) -> bool:
    """Sleep until the monotonic deadline; False if the server is stopping."""
    if deadline is not None:
        remaining = deadline - time.monotonic()
        if remaining > 0:
            stop.wait(remaining)
    return not stop.is_set()
