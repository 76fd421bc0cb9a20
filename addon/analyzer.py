"""The analysis worker: everything that grows with the prompt or the body, off the event loop.

Jobs run in arrival order on one thread: ``parse`` (request JSON, prompt tokens) as soon as
the request has been forwarded, ``finish`` (timings, output tokens, diagnosis, the final
row) once the response has ended. A job that fails still writes the row it has.
"""

from __future__ import annotations

import collections
import functools
import json
import logging
import os
import queue
import re
import threading
import time
from collections.abc import Callable
from typing import Any

from firsttoken.addon import engines, hops, tokens
from firsttoken.addon.apis import dialect_of, gemini, ollama, url_facts
from firsttoken.addon.conversations import ConversationIndex, divergence, prompt_parts
from firsttoken.addon.diagnose import DiagnosisInput, diagnose, ttft_outlier
from firsttoken.addon.diagnose.connectivity import INTERRUPTED_ERROR
from firsttoken.addon.diagnose.lang import resolve as resolve_lang
from firsttoken.addon.flight import Flight
from firsttoken.addon.hops import RouteWindows, clean_hop_headers, headers_held, name_hop
from firsttoken.addon.record import FIELDS, Record, visible_output_tokens
from firsttoken.addon.routing import family_of_api
from firsttoken.addon.secrets import body_secrets, redact_text
from firsttoken.addon.store import conversations as store_conversations
from firsttoken.addon.store import queries
from firsttoken.addon.store.db import stale_in_flight
from firsttoken.addon.store.queries import decode_row
from firsttoken.addon.store.writer import Writer

log = logging.getLogger("firsttoken")

MAX_SAVED_BODY = 256 * 1024
#: larger request bodies are parsed only once their response has ended: parsing and
#: tokenizing a megabyte costs milliseconds of GIL and CPU the request itself must not pay
PARSE_EARLY_MAX = 128 * 1024
#: bodies larger than this are parsed and counted in a helper process (its own GIL)
SUBPROCESS_MIN = 1024 * 1024
_STOP = object()


class Settings:
    def __init__(self, save_bodies: bool = False, warn_prompt_tokens: int = 0, stall_ms: float = 1000.0, lang: str = "", proxy_url: str = ""):
        self.save_bodies = save_bodies
        self.warn_prompt_tokens = warn_prompt_tokens
        self.stall_ms = stall_ms
        self.lang = lang  # "" → FIRSTTOKEN_LANG, then the locale
        self.proxy_url = proxy_url  # the proxy's own base URL, for hints ("set OPENAI_BASE_URL=…/v1")


class Analyzer:
    def __init__(self, writer: Writer, settings: Settings, on_done: Callable[[Flight], None] | None = None,
                 on_idle: Callable[[], None] | None = None):
        self.writer = writer
        self.settings = settings
        self.on_done = on_done
        self.on_idle = on_idle  # called when the queue runs empty after a finished record
        self._idle_due = False
        #: how often each prompt prefix was sent in this run (keyed by run id and prefix hash): never
        #: seeded from the database, whose earlier runs are not this one
        self.prefixes = tokens.PrefixTracker()
        #: routes whose upstream reported cached prompt tokens at least once (recorded history included)
        self.routes_cached: set[str] = set()
        self.conversations = ConversationIndex(history=self._recorded_turn)
        #: record id -> (conversation, prompt change) between a request's parse and its finish
        self._pending: collections.OrderedDict[str, tuple[Any, dict[str, Any]]] = collections.OrderedDict()
        self.calibration: dict[str, collections.deque] = {}
        self.recent: collections.deque = collections.deque(maxlen=500)  # finished records, newest last
        self.engine_window = engines.Window()  # what else was in flight to each engine (engine.queued, decode_paused)
        self.route_windows = RouteWindows()  # each route's recent timed streams (headers_held)
        self._lang: tuple[Any, str] = (object(), "")  # (the setting, the language it resolved to)
        self.q: queue.Queue[Any] = queue.Queue()
        self.pause: Callable[[], float] | None = None  # s to step aside before a job (the loop is busy)
        self._procs = None  # the helper process for very large bodies, started on first use
        self._live_catch_up = False  # a catch_up(live=True) job is queued
        self._busy_since: float | None = None  # since when the event loop has lagged (_step_aside)
        self._thread = threading.Thread(target=self._run, name="firsttoken-analyzer", daemon=True)
        self._thread.start()

    def parse(self, flight: Flight) -> None:
        self.q.put(("parse", flight))

    def finish(self, flight: Flight, before: Callable[[], None] | None = None) -> None:
        """``before``: called on this thread just before (the hub: what a worker learnt since the parse)."""
        self.q.put(("finish", flight) if before is None else ("finish", flight, before))

    def catch_up(self, flights: list[Flight], live: bool = False) -> None:
        """Decode what these flights' taps kept (``StreamTap.drain``): for the live view's
        numbers (``live``: at most one such job waits at a time) or a tap's backlog."""
        if live:
            if self._live_catch_up:
                return
            self._live_catch_up = True
        self.q.put(("catch_up", (flights, live)))

    def _in_helper_process(self, body: bytes, encoding: str | None, api: str,
                           path: str | None = None) -> dict[str, Any] | None:
        """Parse and count a very large body in a helper process, which has its own GIL: in
        this process, ``json.loads`` of megabytes would stall every other stream for
        milliseconds. None when the helper cannot be used (then the caller parses here)."""
        try:
            if self._procs is None:
                import concurrent.futures
                import multiprocessing

                self._procs = concurrent.futures.ProcessPoolExecutor(
                    1, mp_context=multiprocessing.get_context("spawn"), initializer=die_with, initargs=(os.getpid(),))
            return self._procs.submit(request_facts, body, encoding, api, path).result(timeout=300)
        except Exception as e:
            log.warning("firsttoken: helper process unavailable (%s); parsing in the proxy process", e)
            return None

    def close(self, timeout: float | None = 120.0) -> None:
        if self._thread.is_alive():
            self.q.put(_STOP)
            self._thread.join(timeout)
        if self._procs is not None:
            self._procs.shutdown(wait=False, cancel_futures=True)

    def flush(self, timeout: float = 10.0) -> None:
        done = threading.Event()
        self.q.put(done)
        done.wait(timeout)
        self.writer.flush(timeout)

    # -- thread ----------------------------------------------------------------------
    def _run(self) -> None:
        self._seed()
        self._recover()
        while True:
            if self._idle_due and self.q.empty():  # a burst of records ends: e.g. flush the output
                self._idle_due = False
                try:
                    self.on_idle()
                except Exception:
                    log.exception("firsttoken: on_idle callback failed")
            job = self.q.get()
            if job is _STOP:
                return
            if isinstance(job, threading.Event):
                job.set()
                continue
            kind, flight = job[0], job[1]
            if kind == "catch_up":
                try:
                    self._catch_up(*flight)
                except Exception:  # the finish job decodes the rest and reports the error
                    log.exception("firsttoken: decoding kept chunks failed")
                continue
            self._step_aside()
            try:
                if kind == "parse":
                    self._parse(flight)
                else:
                    if len(job) > 2:
                        job[2]()
                    self._finish(flight)
            except Exception as e:  # never lose the row
                log.exception("firsttoken: analysis of %s failed", flight.record.id)
                flight.record.request_error = flight.record.request_error or f"analysis failed: {e}"
                if kind == "finish":
                    _who_answered(flight.record)  # never the raw headers on disk
                    self._write(flight)
            if kind == "finish":
                self._idle_due = self.on_idle is not None

    def _step_aside(self) -> None:
        """Analysis can wait; chunks cannot. While the event loop lags (``pause`` > 0) the next
        job waits, for at most POSTPONE_S of continuous lag and while fewer than
        POSTPONE_JOBS wait: a burst of streams is analysed after it, when this thread no
        longer fights the event loop for the GIL (which also costs less CPU: every GIL
        hand-over wakes a thread and cools the caches). Under lag that lasts longer, analysis
        runs anyway, stepping aside only briefly before each job."""
        if self.pause is None:
            return
        while True:
            wait = self.pause()
            if wait <= 0.0:
                self._busy_since = None
                return
            now = time.monotonic()
            if self._busy_since is None:
                self._busy_since = now
            if now - self._busy_since >= POSTPONE_S or self.q.qsize() >= POSTPONE_JOBS:
                if self.q.qsize() < 1000:
                    time.sleep(wait)
                return
            time.sleep(POSTPONE_STEP_S)

    def _catch_up(self, flights: list[Flight], live: bool) -> None:
        if live:
            self._live_catch_up = False
        for flight in flights:
            if flight.tap is not None and not flight.finished:
                flight.tap.drain()

    def _parse(self, flight: Flight) -> None:
        rec = flight.record
        body = flight.body or b""
        facts = None
        if len(body) > SUBPROCESS_MIN:
            facts = self._in_helper_process(bytes(body), flight.body_encoding, rec.api, rec.path)
        if facts is None:
            facts = request_facts(body, flight.body_encoding, rec.api, rec.path)
        # credentials in the body (``"api_key": "…"``): redacted wherever they reappear
        flight.secrets += facts.pop("secrets", None) or []
        parts = facts.pop("conversation", None)
        for k, v in facts.items():
            setattr(rec, k, v)
        if rec.transport == "websocket":
            rec.stream = True  # a turn's answer always streams, as events in frames
        if rec.prefix_hash:
            # counted within this run: a `firsttoken run` (its id, also on a joined proxy), else since
            # this proxy started; earlier runs recorded in the same database do not count
            rec.prefix_seen_before = self.prefixes.seen(f"{rec.run_id or ''}\0{rec.prefix_hash}")
        self._place(flight, parts)
        if rec.api != "other":
            self.engine_window.started(rec.upstream, flight)
        if not flight.finished:
            self.writer.put({k: getattr(rec, k) for k in _PARSE_FIELDS})

    def _place(self, flight: Flight, parts: Any) -> None:
        """Conversation, turn and kind of one request (see conversations.py); keeps what the
        cache rules need until the request finishes."""
        rec = flight.record
        path = rec.path or ""
        family = "anthropic" if "/messages" in path else "gemini" if ":" in path and gemini.gemini_call(
            "POST", path) else family_of_api(rec.api)
        a = self.conversations.assign(route=rec.route, family=family, model=rec.model, path=rec.path,
                                      parts=parts, t0=flight.clock.t0, record_id=rec.id)
        if a is None:
            return
        for rid in a.now_side:  # placed as main, shown by this request to have been a side call
            pending = self._pending.get(rid)
            if pending is not None:
                pending[1].update(now_side=True, divergence=None)
            else:
                self.writer.put({"id": rid, "request_kind": "side"})
        rec.conversation_id, rec.turn, rec.request_kind = a.conversation_id, a.turn, a.request_kind
        change = {"id": rec.id, "previous": a.previous is not None, "since_previous_s": a.since_previous_s,
                  "divergence": divergence(a.previous, parts) if a.request_kind == "main" else None,
                  "cache_marker": parts.cache_marker, "cache_markers": parts.cache_markers}
        self._pending[rec.id] = (a.conversation, change)
        while len(self._pending) > 10_000:  # a finish that never came
            self._pending.popitem(last=False)

    def _finish(self, flight: Flight) -> None:
        rec, tap = flight.record, flight.tap
        visible_est = None
        # decided before firsttoken adds its own notes below: a response it could not parse
        # still ended with its last byte, not at its response hook
        abnormal_end = rec.client_aborted or rec.error is not None
        if tap is not None:
            tap = tap.report()  # what the stream held (a worker process sends it ready-made)
            f = tap.facts
            rec.model = rec.model or f.model
            for k in ("usage_prompt_tokens", "usage_completion_tokens", "usage_cached_tokens",
                      "usage_cache_creation_tokens", "usage_reasoning_tokens", "finish_reason"):
                setattr(rec, k, getattr(f, k))
            # upstream text is quoted back to the user: servers echo keys, so redact it first
            rec.upstream_error = _redact(f.error_message, flight.secrets)
            rec.upstream_error_type = f.error_type
            if rec.retry_after is None:  # Google says it in the body (RetryInfo), not in a header
                rec.retry_after = tap.retry_after
            rec.no_choices = _redact(f.no_choices, flight.secrets)
            rec.malformed_events = f.malformed
            rec.malformed_sample = _redact(f.malformed_sample, flight.secrets)
            if rec.malformed_sample is None and tap.other_text and (rec.status or 0) >= 400:
                rec.malformed_sample = _redact(tap.other_text, flight.secrets)  # quoted by its finding
            rec.oversize_events = tap.oversize_events
            rec.frame_error = tap.frame_error
            if f.reported:  # what the provider said of its own timings in the body (Bedrock's invocationMetrics)
                rec.hop_headers = {**(rec.hop_headers or {}), **f.reported}
            rec.stream_done = f.done if tap.interpreted or tap.decode_error else None
            if rec.client_aborted and rec.stream_done:
                # the client hung up after the stream's final event: the openai SDK closes on
                # `[DONE]` without waiting for the chunked terminator. A complete response.
                rec.client_aborted, rec.error = False, None
                abnormal_end = False
            rec.output_chars = tap.output_chars
            rec.reasoning_chars = tap.reasoning_chars
            rec.sse_comments = tap.sse_comments
            rec.sse_foreign_lines = tap.sse_foreign_lines
            rec.response_bytes = tap.bytes
            if tap.error:
                rec.error = rec.error or f"firsttoken could not parse this response ({tap.error}); it was forwarded unchanged"
            if tap.decode_error and not rec.error:
                rec.error = f"{tap.decode_error}; the response was forwarded unchanged but not analysed"
            if tap.text or tap.reasoning_text:
                visible_est = tokens.count_text("".join(tap.text), rec.model)[0] if tap.text else 0
                reasoning_est = tokens.count_text("".join(tap.reasoning_text), rec.model)[0] if tap.reasoning_text else 0
                rec.output_tokens_est = visible_est + reasoning_est
        _who_answered(rec)
        _engine_report(rec, tap.facts.engine if tap is not None else None)
        self._calibrate(rec)
        out_tokens = visible_output_tokens(rec.usage_completion_tokens, rec.usage_reasoning_tokens, visible_est)
        flight.clock.apply(rec, out_tokens, abnormal_end=abnormal_end)
        if self.settings.save_bodies:
            self._save_bodies(flight)
        rec.state, rec.phase = "done", "done"
        conv, change = self._pending.pop(rec.id, (None, None))
        route = rec.route or "default"
        route_cached = route in self.routes_cached  # before this request's own report
        if rec.usage_cached_tokens:
            self.routes_cached.add(route)
        if conv is not None:
            if change.get("now_side"):
                rec.request_kind = "side"
            rec.client_gap_ms = self.conversations.client_gap_ms(conv, flight.clock.t0)
            end = flight.clock.last_byte if flight.clock.last_byte is not None else flight.clock.end
            failed = abnormal_end or rec.status is None or rec.status >= 400
            self.conversations.ended(conv, end if end is not None else flight.clock.t0, failed=failed,
                                     response_id=tap.facts.response_id if tap is not None else None)
        rec.headers_held = headers_held(rec, self.route_windows)  # before diagnosing: the latency rules read it
        neighbours = self._engine_wait(flight)
        rec.findings = diagnose(rec, self.diagnosis_input(change, route_cached, neighbours))
        if rec.findings:
            rec.top_code = rec.findings[0]["code"]
            rec.top_severity = rec.findings[0]["severity"]
        rec.ttft_outlier = ttft_outlier(rec.findings)
        self._write(flight)

    def _engine_wait(self, flight: Flight) -> Callable[[], tuple[engines.Span, ...]]:
        """The wait before the engine began where the engine did not report it (docs/record.md "Engine"), and what
        else was in flight to this request's engine: a call that builds those spans when a rule reads them (most
        requests' rules never do; building them cost ~90 µs a request at 63 neighbours). Called on this thread, by
        this request's diagnosis, before the window changes again."""
        rec = flight.record
        window = self.engine_window
        window.finished(rec.upstream, flight)
        engines.infer_wait(rec)
        if rec.engine_queue_ms is None and engines.is_engine_side(rec):
            first = rec.first_token_ms if rec.first_token_ms is not None else rec.ttft_ms
            # the others the engine was busy with before our first token
            ahead = window.ahead(rec.upstream, flight, first) if first is not None else 0
            if ahead:
                engines.infer_wait_from_fit(rec, hops.fit_of_route(rec, self.recent), ahead)
        return functools.partial(window.around, rec.upstream, flight)

    def diagnosis_input(self, prompt_change: dict[str, Any] | None = None,
                        route_cached: bool = False, neighbours: Any = ()) -> DiagnosisInput:
        """What the rules read besides the record, fixed now: the settings as they are, this
        thread's recent records, the request's prompt change (docs/architecture.md)."""
        s = self.settings
        if self._lang[0] != s.lang:  # the environment and locale are read once per setting, not per request
            self._lang = (s.lang, resolve_lang(s.lang))
        return DiagnosisInput(stall_ms=s.stall_ms, warn_prompt_tokens=s.warn_prompt_tokens, proxy_url=s.proxy_url,
                              lang=self._lang[1], recent=self.recent, prompt_change=prompt_change,
                              route_cached=route_cached, neighbours=neighbours)

    def _calibrate(self, rec) -> None:
        """Reconcile our estimate with the server's count, and learn a per-model factor."""
        if not rec.prompt_tokens_est or not rec.model:
            return
        pairs = self.calibration.setdefault(rec.model, collections.deque(maxlen=200))
        if rec.usage_prompt_tokens:
            rec.usage_ratio = round(rec.usage_prompt_tokens / rec.prompt_tokens_est, 4)
            pairs.append((rec.prompt_tokens_est, rec.usage_prompt_tokens))
        factor = tokens.calibration_factor(pairs)
        if factor is not None:
            rec.calibration_factor = round(factor, 4)
            if rec.usage_prompt_tokens is None:
                rec.prompt_tokens_calibrated = tokens.corrected(rec.prompt_tokens_est, factor)

    def _seed(self) -> None:
        """Start from the recorded history: routes that cached and calibration pairs. Also load the
        bundled tokenizer now, not in the middle of the first request's stream."""
        try:
            tokens.load_encoding("cl100k_base")
        except Exception as e:
            log.warning("firsttoken: could not load the bundled tokenizer: %s", e)
        try:
            cached, calib = self.writer.read(lambda db: (queries.routes_cached(db), queries.calibration_pairs(db)))
            self.routes_cached.update(cached)
            for model, est, server in calib:
                pairs = self.calibration.setdefault(model, collections.deque(maxlen=200))
                if len(pairs) < pairs.maxlen:
                    pairs.appendleft((est, server))
        except Exception as e:  # history is a bonus; never block the proxy on it
            log.warning("firsttoken: could not read history for calibration: %s", e)

    def _recorded_turn(self, conversation_id: str) -> tuple[int, str | None] | None:
        """A client session's last recorded turn (the conversation index asks once per session it
        has not met in this process): read on the writer thread, briefly; history is a bonus."""
        try:
            return self.writer.read(lambda db: store_conversations.last_turn(db, conversation_id), timeout=2.0)
        except Exception as e:
            log.debug("firsttoken: could not read the recorded turns of %s: %s", conversation_id, e)
            return None

    def _recover(self) -> None:
        """Close the rows a dead proxy left in flight on this database (kill -9, a crash):
        done, with the finding ``proxy.interrupted``; otherwise they would stay in flight forever."""
        try:
            stale = self.writer.read(lambda db: stale_in_flight(db, os.getpid()))
        except Exception as e:
            log.warning("firsttoken: could not look for requests a stopped proxy left in flight: %s", e)
            return
        for row in stale:
            try:
                values = decode_row(row)
                rec = Record(**{k: values[k] for k in FIELDS if k in values and values[k] is not None})
                rec.error = rec.error or f"{INTERRUPTED_ERROR} (pid {rec.proxy_pid or 'unknown'})"
                rec.findings = diagnose(rec, self.diagnosis_input())
                rec.top_code = rec.findings[0]["code"] if rec.findings else None
                rec.top_severity = rec.findings[0]["severity"] if rec.findings else None
                self.writer.put({"id": rec.id, "state": "done", "phase": "done", "error": rec.error,
                                 "findings": rec.findings, "top_code": rec.top_code, "top_severity": rec.top_severity})
            except Exception:
                log.exception("firsttoken: could not close the interrupted request %s", row.get("id"))
        if stale:
            log.warning("firsttoken: %d request(s) left in flight by a proxy that is no longer running were "
                        "marked interrupted (proxy.interrupted)", len(stale))

    def _write(self, flight: Flight) -> None:
        rec = flight.record
        rec.state, rec.phase = "done", "done"
        self.writer.put(rec.row())
        self.recent.append(rec)
        self.route_windows.add(rec)
        flight.body = None
        if self.on_done is not None:
            try:
                self.on_done(flight)
            except Exception:
                log.exception("firsttoken: on_done callback failed")

    def _save_bodies(self, flight: Flight) -> None:
        rec = flight.record
        if flight.body:
            rec.request_body = redact_text(
                bytes(flight.body[:MAX_SAVED_BODY]).decode("utf-8", "replace"), flight.secrets
            )
        if flight.tap is not None and flight.tap.saved:
            rec.response_body = redact_text(
                bytes(flight.tap.saved).decode("utf-8", "replace"), flight.secrets
            )


def die_with(parent: int) -> None:
    """The helper process's first act: end when the proxy ends, even by ``kill -9`` (Linux:
    PR_SET_PDEATHSIG), instead of staying behind with ~90 MB and multiprocessing's resource
    tracker. Elsewhere, or if the proxy is already gone, it ends on its own next read."""
    import signal

    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGTERM), 0, 0, 0)  # PR_SET_PDEATHSIG = 1
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:  # it died before the line above took effect
        os._exit(0)


def _redact(text: str | None, secrets: list[str]) -> str | None:
    return None if text is None else redact_text(text, secrets)


#: analysis waits for a lagging event loop for at most this long (s) of continuous lag ...
POSTPONE_S = 2.0
#: ... and while fewer jobs than this wait; it checks the lag again every POSTPONE_STEP_S
POSTPONE_JOBS = 5000
POSTPONE_STEP_S = 0.02

_PARSE_FIELDS = (
    "id", "model", "stream", "max_tokens", "request_error", "tokenizer", "tokens_exact",
    "prompt_tokens_est", "system_tokens", "tools_tokens", "last_user_tokens", "messages",
    "images", "prefix_hash", "prefix_tokens", "prefix_seen_before", "conversation_id", "turn", "request_kind",
    "num_ctx",
)


# ---- What a request body says: model, stream, max_tokens and the prompt's token counts.

#: how much of each end of a request body peek_request_facts reads
PEEK_BYTES = 16 * 1024
_PEEK_MODEL = re.compile(rb'"model"\s*:\s*"((?:[^"\\]|\\.){1,200})"')
_PEEK_STREAM = re.compile(rb'"stream"\s*:\s*(true|false)\b')


def _who_answered(rec: Record) -> None:
    """Clean the Server / Via / gateway headers capture picked on the event loop (credential headers
    out, key-like values masked, caps) and name the hop they identify. Idempotent."""
    if rec.server or rec.via or rec.hop_headers:
        rec.server, rec.via, rec.hop_headers = clean_hop_headers(rec.server, rec.via, rec.hop_headers)
        hop = name_hop(rec.server, rec.via, rec.hop_headers)
        rec.hop = hop.name if hop else None


def peek_request_facts(body: bytes | bytearray, content_encoding: str | None = None) -> dict[str, Any]:
    """``model`` and ``stream`` from a bounded look at both ends of a JSON body: cheap enough for
    the event loop at any body size, so the live view and a failed request's record name the
    request at once, while the full parse (and token count) follows on the analysis thread.

    SDKs put ``model`` first (curl, Claude Code) or after ``messages`` (the openai SDK), so both
    the first and the last PEEK_BYTES are read. Inside a JSON string a quote is always escaped,
    so ``"model": "…"`` matches only a key; the full parse has the last word."""
    if content_encoding or not body:
        return {}
    parts = [bytes(body[:PEEK_BYTES])]
    if len(body) > PEEK_BYTES:
        parts.append(bytes(body[-PEEK_BYTES:]))
    out: dict[str, Any] = {}
    for part in parts:
        if "model" not in out and (m := _PEEK_MODEL.search(part)):
            try:
                out["model"] = json.loads(b'"' + m.group(1) + b'"')
            except ValueError:
                pass
        if "stream" not in out and (m := _PEEK_STREAM.search(part)):
            out["stream"] = m.group(1) == b"true"
    return out

def request_facts(raw: bytes | bytearray, content_encoding: str | None, api: str, path: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if content_encoding:
        try:
            from mitmproxy.net.encoding import decode

            raw = decode(bytes(raw), content_encoding)
        except Exception as e:
            out["request_error"] = f"request body has Content-Encoding {content_encoding!r} that could not be decoded: {e}"
            return out
    if not raw.strip():
        return out
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as e:
        if api != "other":
            out["request_error"] = f"request body is not valid JSON ({e})"
        return out
    if not isinstance(body, dict):
        if api != "other":
            out["request_error"] = f"request body is JSON but not an object (got {type(body).__name__})"
        return out
    found = body_secrets(body)
    if found:
        out["secrets"] = found  # for redaction; never stored
    model = body.get("model")
    if isinstance(model, str):
        out["model"] = model
    if isinstance(body.get("stream"), bool):
        out["stream"] = body["stream"]
    elif api != "other" and "stream" not in out:
        out["stream"] = False
    for k in ("max_tokens", "max_completion_tokens", "max_output_tokens"):
        v = body.get(k)
        if isinstance(v, int) and not isinstance(v, bool):
            out["max_tokens"] = v
            break
    else:
        if (v := gemini.max_output_tokens(body)) is not None:
            out["max_tokens"] = v
    if api in ollama.PATHS.values():  # Ollama: stream defaults to true, limits in ``options``
        out.update(ollama.request_options(body))
    # what grouping into conversations and the cache rules need (count_tokens has the Messages shape)
    # Gemini, Anthropic on Vertex and Bedrock: the model and the stream flag are in the URL
    for k, v in url_facts("POST", api, path).items():
        if k == "stream" or k not in out:
            out[k] = v
    shape = "anthropic.messages" if api == "other" and "/messages/count_tokens" in (path or "") else dialect_of(api)
    if api == "other" and (call := gemini.gemini_call("POST", path or "")) and call[1] == "counttokens":
        shape = gemini.API  # Gemini's countTokens has generateContent's shape
    out["conversation"] = prompt_parts(shape, body)
    if api == "other":
        return out
    tc = tokens.count_request(shape, body, out.get("model"))
    out.update(
        tokenizer=tc.tokenizer, tokens_exact=tc.exact, prompt_tokens_est=tc.prompt_tokens_est,
        system_tokens=tc.system_tokens, tools_tokens=tc.tools_tokens, last_user_tokens=tc.last_user_tokens,
        messages=tc.messages, images=tc.images, prefix_hash=tc.prefix_hash, prefix_tokens=tc.prefix_tokens,
    )
    return out


def _engine_report(rec: Record, report: engines.EngineReport | None) -> None:
    """The engine's own report joins the record (docs/record.md "Engine"): what the body said, what
    its headers say (TGI), and which engine answered where its Server header names it."""
    report = report if report is not None else engines.EngineReport()
    engines.read_headers(rec.hop_headers, report)
    if report.engine is None:
        report.engine = engines.engine_of_server(rec.server) or engines.engine_of_error(rec.upstream_error_type)
    if report.engine is not None or report:
        for k, v in report.columns().items():
            setattr(rec, k, v)
