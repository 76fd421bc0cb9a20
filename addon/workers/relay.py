"""A worker process's side of ``firsttoken proxy --workers N``: :class:`Relay` stands where the analyzer and the
writer stand in a proxy of one process; what Capture asks of them goes, in batches, to the hub (addon/workers/hub.py),
each finished tap decoded first (``StreamTap.report``). How: docs/architecture.md ("Worker processes")."""

from __future__ import annotations

import dataclasses
import logging
import pickle
import queue
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

log = logging.getLogger("firsttoken")

#: messages sent in one batch at most (one pickle, one write)
BATCH = 256
_STOP = object()


def record_state(rec: Any) -> dict[str, Any]:
    """A record's fields as they are now (a shallow copy: pickled at once, on the relay thread)."""
    return dict(vars(rec))


def stamps(flight: Any) -> tuple[float, float | None, float | None, float | None]:
    """The clock stamps the hub's copy of an exchange in flight needs (the engine window, the live view)."""
    c = flight.clock
    return c.t0, c.headers, c.first_token, c.first_visible


class Relay:
    """The analyzer and the writer of a worker process: what they are asked goes to the hub."""

    def __init__(self, conn: Any, flights: dict[str, Any], on_stop: Callable[[float], None] | None = None) -> None:
        """``conn``: a ``multiprocessing.connection.Connection`` to the hub; ``flights``: the worker's requests in
        flight by id (``Capture.flights``), for the stamps a row carries; ``on_stop(seconds)``: the hub asks this
        worker to stop (``ProxyServer.drain``), or the hub is gone."""
        self.conn = conn
        self.flights = flights
        self.on_stop = on_stop
        self.q: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self.recent: deque = deque(maxlen=0)  # (the live view is the hub's)
        self.on_health: list[Callable[[dict[str, Any]], None]] = []  # (the database is the hub's)
        self.pause: Callable[[], float] | None = None
        self.lost = False  # the hub stopped reading: nothing more is sent
        self._send_lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="firsttoken-relay", daemon=True)
        self._reader = threading.Thread(target=self._read, name="firsttoken-relay-reader", daemon=True)
        self._thread.start()
        self._reader.start()

    # -- what Capture calls (the event loop) ------------------------------------------
    def parse(self, flight: Any) -> None:
        self.q.put(("parse", flight))

    def finish(self, flight: Any) -> None:
        self.q.put(("finish", flight))

    def put(self, row: dict[str, Any]) -> None:
        self.q.put(("put", row))

    def catch_up(self, flights: list[Any], live: bool = False) -> None:
        if not live:  # a tap's backlog: decoded here, off the event loop (the live view's numbers are not this worker's)
            self.q.put(("drain", flights))

    def health(self) -> dict[str, Any] | None:
        return None

    def read(self, fn: Callable[[Any], Any], timeout: float | None = None) -> Any:
        raise RuntimeError("a firsttoken worker process has no database: the hub reads it")

    def send(self, *message: Any) -> None:
        """A message of the worker's own (its hello, a log line), in order with the rest."""
        self.q.put(("send", message))

    def flush(self, timeout: float = 10.0) -> None:
        done = threading.Event()
        self.q.put(("event", done))
        done.wait(timeout)

    def close(self, timeout: float | None = 120.0) -> None:
        """Send what is queued, then end the connection (the hub sees its end: every exchange of this worker is in)."""
        if self._thread.is_alive():
            self.q.put(_STOP)
            self._thread.join(timeout)
        try:
            self.conn.close()
        except OSError:
            pass

    # -- the relay thread ------------------------------------------------------------
    def _run(self) -> None:
        while True:
            jobs = [self.q.get()]
            while len(jobs) < BATCH:
                try:
                    jobs.append(self.q.get_nowait())
                except queue.Empty:
                    break
            out: list[tuple] = []
            stop = False
            for job in jobs:
                if job is _STOP:
                    stop = True
                    break
                try:
                    self._message(job, out)
                except Exception:  # noqa: BLE001 - one exchange's trouble never stops the others
                    log.exception("firsttoken: a worker could not hand over %s", job[0])
            self._send(out)
            for job in jobs:
                if job is not _STOP and job[0] == "event":
                    job[1].set()
            if stop:
                return

    def _message(self, job: tuple, out: list[tuple]) -> None:
        kind, x = job
        if kind == "put":
            flight = self.flights.get(x.get("id"))
            out.append(("put", x, stamps(flight) if flight is not None else None))
        elif kind == "parse":
            body = x.body
            clock = dataclasses.replace(x.clock, token_events=list(x.clock.token_events))  # the loop stamps on
            out.append(("parse", record_state(x.record), clock, None if body is None else bytes(body),
                        x.body_encoding, list(x.secrets)))
        elif kind == "finish":
            try:
                report = x.tap.report() if x.tap is not None else None  # decoded here: off the loop, in this process
            except Exception:  # noqa: BLE001 - the row still goes, without what the stream held
                log.exception("firsttoken worker: could not read a finished stream; its row goes without it")
                report = None
            out.append(("finish", record_state(x.record), x.clock, report))
            x.body = None
        elif kind == "drain":
            for flight in x:
                if flight.tap is not None and not flight.finished:
                    flight.tap.drain()
        elif kind == "send":
            out.append(x)

    def _send(self, out: list[tuple]) -> None:
        if not out or self.lost:
            return
        try:
            data = pickle.dumps(out, pickle.HIGHEST_PROTOCOL)
        except Exception:  # noqa: BLE001 - a value that does not pickle: send the others, one by one
            data = pickle.dumps([m for m in out if _pickles(m)], pickle.HIGHEST_PROTOCOL)
        try:
            with self._send_lock:
                self.conn.send_bytes(data)
        except (OSError, EOFError, ValueError) as e:
            self._lose(f"the analysing process stopped reading ({e})")

    def _lose(self, why: str) -> None:
        if self.lost:
            return
        self.lost = True
        log.error("firsttoken worker: %s; this worker stops", why)
        if self.on_stop is not None:
            self.on_stop(0.0)

    # -- what the hub asks (its own thread) ------------------------------------------------
    def _read(self) -> None:
        while True:
            try:
                msg = pickle.loads(self.conn.recv_bytes())
            except (OSError, EOFError, ValueError):
                if not self.lost and self._thread.is_alive():
                    self._lose("the analysing process is gone")
                return
            if msg[0] == "sync":  # answer once this worker's requests so far have ended and been sent
                _, token, settle = msg
                end = time.monotonic() + settle
                while self.flights and time.monotonic() < end:
                    time.sleep(0.005)
                self.q.put(("send", ("synced", token)))
            elif msg[0] == "stop" and self.on_stop is not None:
                self.on_stop(float(msg[1]))


class RelayLog(logging.Handler):
    """A worker's warnings and errors, sent to the hub, which logs them as the proxy's own."""

    def __init__(self, relay: Relay) -> None:
        super().__init__(logging.WARNING)
        self.relay = relay

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.relay.send("log", record.levelno, record.getMessage())
        except Exception:  # noqa: BLE001 - logging never breaks the proxy
            pass


def _pickles(msg: tuple) -> bool:
    """Whether ``msg`` pickles; logged when not (that one message is lost, not the batch or the relay)."""
    try:
        pickle.dumps(msg, pickle.HIGHEST_PROTOCOL)
        return True
    except Exception:  # noqa: BLE001
        log.exception("firsttoken worker: could not hand a %s over to the analysing process", msg[0] if msg else "message")
        return False
