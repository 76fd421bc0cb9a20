"""How busy the proxy itself is: its event loop's lag and its CPU use, measured continuously.

A request that waits inside a busy proxy is invisible to the hooks; ``LoadWatch`` (one cheap
timer) and the kernel's TCP_INFO say how long it waited, for the ``proxy_*`` columns.
See docs/record.md ("The proxy's own load").
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import os
import socket
import struct
import time
from typing import Any

#: the monitor's period (s): a sleep this long that wakes late measures the loop's lag; it also
#: bounds the error of ``wait_before`` (~50 wake-ups a second: a fraction of a percent of a core)
INTERVAL = 0.02
#: samples kept (at INTERVAL, ~5 minutes): enough for any request still in flight to be looked up
KEEP = 15000
#: background threads step aside (``pause``) while the loop lags more than this (s) ...
BUSY_LAG = 0.01
#: ... for at most this long before each piece of work (s), so they still make progress
MAX_PAUSE = 0.005


def first_bytes(timestamp_start: float | None, hook: float, wall_now: float | None = None) -> float:
    """The perf_counter time of a wall-clock ``timestamp_start``, taken no later than ``hook``
    (the perf_counter time now): the wall<->perf offset is measured at the hook."""
    if not timestamp_start:
        return hook
    wall_now = time.time() if wall_now is None else wall_now
    behind = wall_now - timestamp_start
    if not 0.0 < behind < 600.0:  # clock stepped, or a stamp from the future: keep the hook time
        return hook
    return hook - behind


_TCP_INFO = getattr(socket, "TCP_INFO", None)  # Linux only
_LAST_DATA_RECV = 52  # offset of tcpi_last_data_recv (u32, ms) in struct tcp_info


def received_ago(sock: Any) -> float | None:
    """Seconds since the kernel last received data on this TCP socket, or None where it
    cannot say (not Linux, not a TCP socket, closed)."""
    if _TCP_INFO is None or sock is None:
        return None
    try:
        raw = sock.getsockopt(socket.IPPROTO_TCP, _TCP_INFO, 104)
    except (OSError, AttributeError, ValueError, TypeError):
        return None
    if len(raw) < _LAST_DATA_RECV + 4:
        return None
    return struct.unpack_from("=I", raw, _LAST_DATA_RECV)[0] / 1000.0


def client_socket(proxyserver: Any, client: Any) -> Any:
    """The client connection's socket, from mitmproxy's proxyserver addon (``connections``:
    client id -> handler, whose ``transports`` hold the asyncio writer); None if unavailable."""
    try:
        handler = proxyserver.connections.get(client.id)
        io = handler.transports.get(handler.client) if handler is not None else None
        return io.writer.get_extra_info("socket") if io is not None else None
    except Exception:
        return None


class LoadWatch:
    def __init__(self, interval: float = INTERVAL) -> None:
        self.interval = interval
        self._at: list[float] = []  # perf_counter time each sample woke
        self._due: list[float] = []  # ... and when its timer was due
        self._next_due: float | None = None  # the timer now pending
        self._lag: list[float] = []  # how late it woke (s)
        self._cpu: list[float] = []  # process CPU time then (s)
        self._task: asyncio.Task | None = None
        #: samples taken so far: the loop's own clock (a starved loop ticks slower than wall time)
        self.ticks = 0

    # -- lifecycle -------------------------------------------------------------------
    def start(self) -> None:
        """Start sampling on the running event loop (idempotent)."""
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run(), name="firsttoken-loadwatch")

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None

    async def _run(self) -> None:
        sleep, perf, cpu, interval = asyncio.sleep, time.perf_counter, time.process_time, self.interval
        with contextlib.suppress(asyncio.CancelledError):
            while True:
                self._next_due = due = perf() + interval
                await sleep(interval)
                self.sample(perf(), due, cpu())

    def sample(self, now: float, due: float, cpu: float) -> None:
        """One measurement: woke at ``now`` for a timer due at ``due``."""
        self.ticks += 1
        self._at.append(now)
        self._due.append(min(due, now))
        self._lag.append(max(0.0, now - due))
        self._cpu.append(cpu)
        if len(self._at) > 2 * KEEP:
            del self._at[:KEEP], self._due[:KEEP], self._lag[:KEEP], self._cpu[:KEEP]

    def pause(self) -> float:
        """How long (s) a background thread should sleep before its next piece of work: while
        the event loop lags, every GIL slice another thread takes delays chunks on their way
        to clients. Zero when the loop keeps up."""
        try:
            lag = self._lag[-1] if self._lag else 0.0
            if self._next_due is not None:
                lag = max(lag, time.perf_counter() - self._next_due)  # late right now
        except IndexError:
            return 0.0
        return min(lag, MAX_PAUSE) if lag > BUSY_LAG else 0.0

    # -- questions -------------------------------------------------------------------
    @staticmethod
    def machine_load() -> float | None:
        """The machine's 1-minute load average per core (above 1: more runnable processes than
        cores, so every process, the proxy included, waits its turn); None where unknown."""
        try:
            cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
            return os.getloadavg()[0] / max(1, cores)
        except (OSError, AttributeError):
            return None

    def wait_before(self, t: float, now: float | None = None) -> float:
        """About how long (s) something the loop handled at ``t`` had waited for it.

        Each sample says "what was ready at ``due`` was handled at ``at``"; between two
        samples that mapping is interpolated and inverted: handled at ``t`` means ready at
        about ``c``, so it waited ``t - c``. Off by at most about one ``INTERVAL``."""
        at, due = self._at, self._due
        i = bisect.bisect_left(at, t)
        if i < len(at):
            d1, a1 = due[i], at[i]
        else:  # no timer has fired since: the pending one, if it is late already
            d1 = self._next_due
            a1 = time.perf_counter() if now is None else now
            if d1 is None or a1 <= d1 or t <= d1:
                return 0.0
        if i == 0:
            d0 = a0 = d1 - self.interval
        else:
            d0, a0 = due[i - 1], at[i - 1]
        if a1 <= a0:
            return max(0.0, t - d1)
        c = d0 + (t - a0) * (d1 - d0) / (a1 - a0)
        return max(0.0, t - min(c, t))

    def lag_max(self, start: float, end: float) -> float:
        """The largest lag (s) among samples woken in [start, end + interval]."""
        i = bisect.bisect_left(self._at, start)
        j = bisect.bisect_right(self._at, end + self.interval)
        return max(self._lag[i:j], default=0.0)

    def cpu_between(self, start: float, end: float) -> float | None:
        """The process's CPU use from ``start`` to ``end`` (1.0 = one core), from the samples
        nearest to them; None without two samples apart."""
        at = self._at
        if len(at) < 2:
            return None
        i = max(0, min(bisect.bisect_left(at, start), len(at) - 2))
        j = max(i + 1, min(bisect.bisect_left(at, end), len(at) - 1))
        wall = at[j] - at[i]
        return (self._cpu[j] - self._cpu[i]) / wall if wall > 0 else None

    def snapshot(self, window: float = 5.0) -> dict[str, Any]:
        """For the live view: the latest lag, the worst over ``window`` s, and CPU use then."""
        try:  # called from the live view's thread while the loop appends: be defensive
            now = self._at[-1]
            return {
                "lag_ms": round(self._lag[-1] * 1000.0, 1),
                "lag_max_ms": round(self.lag_max(now - window, now) * 1000.0, 1),
                "cpu": self.cpu_between(now - window, now),
            }
        except (IndexError, ValueError):
            return {"lag_ms": None, "lag_max_ms": None, "cpu": None}
