"""The analysing process's side of ``firsttoken proxy --workers N``: each worker's hand-overs, read on a thread of
its own, become the jobs a single proxy's Capture gives its analyzer, on a copy of each exchange (``Hub.flights``);
a worker that ends leaves its open exchanges recorded as cut. How: docs/architecture.md ("Worker processes")."""

from __future__ import annotations

import dataclasses
import itertools
import logging
import pickle
import threading
import time
from collections.abc import Callable
from typing import Any

from firsttoken.addon.flight import Flight
from firsttoken.addon.record import FIELDS, Clock, Record

log = logging.getLogger("firsttoken")

#: the error of a request whose worker process ended before it did
WORKER_GONE_ERROR = "the firsttoken worker process forwarding it ended"
_MISSING = object()


class Link:
    """One worker: its connection, the thread reading it, what it said of itself."""

    def __init__(self, index: int, conn: Any) -> None:
        self.index = index
        self.conn = conn
        self.pid: int | None = None
        self.ready = threading.Event()  # it said hello: it listens
        self.ended = threading.Event()  # its connection ended (it stopped, or died)
        self.lock = threading.Lock()  # sends from several threads (a drain, a flush)
        self.thread: threading.Thread | None = None

    def send(self, *msg: Any) -> bool:
        try:
            with self.lock:
                self.conn.send_bytes(pickle.dumps(msg, pickle.HIGHEST_PROTOCOL))
            return True
        except (OSError, ValueError):
            return False


class Hub:
    def __init__(self, capture: Any) -> None:
        """``capture``: this process's ``Capture`` (its analyzer and writer, read when a message arrives)."""
        self.capture = capture
        #: the workers' exchanges in flight, by id (the live view lists them with this process's own)
        self.flights: dict[str, Flight] = {}
        self._base: dict[str, dict[str, Any]] = {}  # each copy's record as the worker sent it to be parsed
        self._owner: dict[str, int] = {}  # record id -> the worker forwarding it
        self.links: dict[int, Link] = {}
        self._tokens = itertools.count(1)
        self._synced: dict[int, threading.Event] = {}
        self._finishing = threading.Lock()
        #: called (a hub thread) when a worker's connection ends: (worker index, requests it left in flight)
        self.on_worker_end: list[Callable[[int, int], None]] = []

    def attach(self, index: int, conn: Any) -> Link:
        link = self.links[index] = Link(index, conn)
        link.thread = threading.Thread(target=self._read, args=(link,), name=f"firsttoken-hub-{index}", daemon=True)
        link.thread.start()
        return link

    # -- asking the workers (any thread) --------------------------------------------------
    def stop(self, seconds: float) -> None:
        """Ask every worker to stop: refuse new connections, give requests in flight ``seconds``, then cut them."""
        for link in list(self.links.values()):
            link.send("stop", seconds)

    def sync(self, timeout: float = 10.0, settle: float = 2.0) -> bool:
        """Wait until every worker has handed over its requests so far (those in flight get ``settle`` s to end)."""
        waits = []
        for link in list(self.links.values()):
            if link.ended.is_set():
                continue
            token = next(self._tokens)
            ev = self._synced[token] = threading.Event()
            if link.send("sync", token, settle):
                waits.append((token, ev, link))
        end = time.monotonic() + timeout
        ok = True
        for token, ev, link in waits:
            while not ev.wait(0.05):
                if link.ended.is_set() or time.monotonic() > end:
                    ok = False
                    break
            self._synced.pop(token, None)
        return ok

    def ready(self, timeout: float) -> bool:
        end = time.monotonic() + timeout
        return all(link.ready.wait(max(0.0, end - time.monotonic())) for link in list(self.links.values()))

    def close(self, timeout: float = 30.0) -> None:
        """Wait for every worker's connection to end (they were asked to stop), then record what is still open."""
        end = time.monotonic() + timeout
        for link in list(self.links.values()):
            if link.thread is not None:
                link.thread.join(max(0.0, end - time.monotonic()))
        for link in list(self.links.values()):
            self._ended(link, "it did not stop in time")
            try:
                link.conn.close()
            except OSError:
                pass

    # -- a worker's messages (its thread) -------------------------------------------------
    def _read(self, link: Link) -> None:
        why = "its connection ended"
        while True:
            try:
                batch = pickle.loads(link.conn.recv_bytes())
            except EOFError:
                break
            except Exception as e:  # noqa: BLE001 - a broken link ends that worker's part, never the proxy
                why = f"its connection broke ({type(e).__name__}: {e})"
                break
            for msg in batch:
                try:
                    self._handle(link, msg)
                except Exception:  # noqa: BLE001 - one message's trouble never loses the rest
                    log.exception("firsttoken: could not take over a worker's %s", msg[0] if msg else "message")
        self._ended(link, why)
        try:
            link.conn.close()  # (a respawned worker gets a new link: this one's descriptor goes)
        except OSError:
            pass

    def _handle(self, link: Link, msg: tuple) -> None:
        kind = msg[0]
        if kind == "put":
            _, row, st = msg
            flight = self._copy(link, row.get("id"), row, st)
            if flight is not None:
                rec = flight.record
                for k, v in row.items():
                    if k in FIELDS:
                        setattr(rec, k, v)
            w = self.capture.writer
            if w is not None:
                w.put(row)
        elif kind == "parse":
            _, state, clock, body, encoding, secrets = msg
            rid = state["id"]
            flight = self._copy(link, rid, state, None)
            flight.record = _record(state)
            flight.clock = clock
            flight.body, flight.body_encoding, flight.secrets = body, encoding, list(secrets)
            flight.body_done = flight.parsed = True
            self._base[rid] = state
            a = self.capture.analyzer
            if a is not None:
                a.parse(flight)
        elif kind == "finish":
            _, state, clock, report = msg
            rid = state["id"]
            flight = self.flights.get(rid)
            if flight is None:  # never parsed (its analysis was off): parsed now, from what it ended with
                flight = self._copy(link, rid, state, None)
                flight.record, flight.clock = _record(state), clock
                flight.body_done = flight.parsed = True
                base: dict[str, Any] = dict(vars(flight.record))
                if self.capture.analyzer is not None:
                    self.capture.analyzer.parse(flight)
            else:
                base = self._base.pop(rid, {})
            self._finish(flight, state, base, clock, report)
        elif kind == "hello":
            link.pid = msg[1]
            link.ready.set()
        elif kind == "synced":
            ev = self._synced.get(msg[1])
            if ev is not None:
                ev.set()
        elif kind == "log":
            log.log(msg[1], "firsttoken worker %d: %s", link.index, msg[2])

    def _copy(self, link: Link, rid: str | None, fields: dict[str, Any], st: tuple | None) -> Flight | None:
        """This process's copy of a worker's exchange, made on its first message; ``st``: its clock's stamps now."""
        if not rid:
            return None
        flight = self.flights.get(rid)
        if flight is None:
            if st is None and "started_at" not in fields:
                return None  # a row of an exchange already finished (a late phase): the writer has it
            flight = self.flights[rid] = Flight(record=_record(fields), clock=Clock(t0=st[0] if st else time.perf_counter()))
            self._owner[rid] = link.index
        if st is not None:
            c = flight.clock
            c.t0, c.headers, c.first_token, c.first_visible = st
        return flight

    def _finish(self, flight: Flight, state: dict[str, Any], base: dict[str, Any], clock: Clock, report: Any) -> None:
        def settle(rec: Record = flight.record) -> None:
            # on the analyzer's thread, after the parse: what the worker learnt since it sent the request to be
            # parsed goes over this copy (the analyzer's own fields, the prompt's tokens and place, stay)
            for k, v in state.items():
                if base.get(k, _MISSING) != v:
                    setattr(rec, k, v)
            flight.clock, flight.tap = clock, report

        with self._finishing:  # once: a worker's own finish and close()'s cut of a link that did not end in time
            if flight.finished:
                return
            flight.finished = True
        a = self.capture.analyzer
        try:
            if a is not None:
                a.finish(flight, before=settle)
        finally:
            self.flights.pop(flight.record.id, None)
            self._owner.pop(flight.record.id, None)

    def _ended(self, link: Link, why: str) -> None:
        """A worker's connection ended: its exchanges still open are recorded, cut (a crash, a kill)."""
        link.ended.set()
        left = [f for rid, f in list(self.flights.items()) if self._owner.get(rid) == link.index]
        for flight in left:
            rec = flight.record
            state = dict(vars(rec))
            state["error"] = rec.error or f"{WORKER_GONE_ERROR} ({why})"
            clock = dataclasses.replace(flight.clock, end=time.perf_counter())
            self._finish(flight, state, self._base.pop(rec.id, {}), clock, None)
        if left:
            log.error("firsttoken: worker %d ended (%s) with %d request(s) in flight; they are recorded as cut",
                      link.index, why, len(left))
        for fn in list(self.on_worker_end):
            try:
                fn(link.index, len(left))
            except Exception:  # noqa: BLE001
                log.exception("firsttoken: on_worker_end failed")


def _record(fields: dict[str, Any]) -> Record:
    return Record(**{k: v for k, v in fields.items() if k in FIELDS})
