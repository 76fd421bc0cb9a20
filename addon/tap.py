"""The stream tap: mitmproxy's ``flow.response.stream`` callable for one response.

Returns every chunk unchanged and never raises; it stamps the clock and decodes a copy live until
the first visible token, then only keeps ``(time, chunk)`` for the analysis thread (``drain``).
Why, and the bounds that keep a fast stream off the event loop: docs/architecture.md.
"""

from __future__ import annotations

import threading
import time
import zlib
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from firsttoken.addon.apis import BedrockInvoke, make_interpreter
from firsttoken.addon.apis.base import VISIBLE, ApiFacts, Delta, error_of, load_json, set_error
from firsttoken.addon.engines import read_object as read_engine
from firsttoken.addon.framing import decoder_for, framing_of
from firsttoken.addon.record import Clock

#: of a non-JSON body on a path no API knows, what an error finding may quote
OTHER_TEXT_CHARS = 200
#: how much of a body no API interprets is kept, to quote the error object it may hold
OTHER_BODY_COPY = 8 * 1024

#: a non-streaming body is parsed when complete; larger bodies are passed through unparsed
MAX_BODY_COPY = 16 * 1024 * 1024
#: a single network chunk may not decompress to more than this (the copy, not what is forwarded):
#: real compressed text inflates ~10x; beyond this it is a bomb, and inflating it would hold the
#: event loop (every other stream) for as long as it takes
MAX_DECODED_CHUNK = 4 * 2**20
#: total decoded (decompressed) bytes analysed per response: a gzip/brotli/zstd bomb costs at
#: most this much CPU (checked per chunk; gzip also per chunk via MAX_DECODED_CHUNK)
MAX_DECODED_TOTAL = 64 * 2**20
#: token-bearing event times kept per response (a count goes on beyond it)
MAX_TOKEN_EVENTS = 200_000
#: generated text kept for the output token estimate
MAX_TEXT_KEEP = 4 * 1024 * 1024
#: kept (deferred) bytes beyond which the tap asks the analysis thread to decode them now
DEFER_MAX_BYTES = 1024 * 1024
#: ... and beyond which the event loop decodes them itself: when the analysis thread falls
#: behind a fast stream (it gets the GIL only between the loop's turns), memory stays bounded
DEFER_HARD_MAX_BYTES = 8 * 1024 * 1024
#: ... a slice at a time: each chunk then decodes at most twice its size plus this much
DEFER_SLICE_BYTES = 64 * 1024


def _decompressor(encoding: str | None) -> Callable[[bytes], bytes] | None:
    enc = (encoding or "").strip().lower()
    if enc in ("", "identity"):
        return None
    if enc in ("gzip", "x-gzip", "deflate"):
        d = zlib.decompressobj(zlib.MAX_WBITS | 32)

        def gunzip(chunk: bytes) -> bytes:
            out = d.decompress(chunk, MAX_DECODED_CHUNK)
            if d.unconsumed_tail:  # a decompression bomb: stop analysing, keep forwarding
                raise ValueError(f"one chunk decompresses to more than {MAX_DECODED_CHUNK // 2**20} MiB")
            return out

        return gunzip
    if enc == "br":
        import brotli

        return brotli.Decompressor().process
    if enc == "zstd":
        import zstandard

        return zstandard.ZstdDecompressor().decompressobj().decompress
    raise ValueError(f"unsupported content-encoding {encoding!r}")


def frame_trouble(decoder) -> str | None:
    """What went wrong with a binary framing (an event stream's corrupt frame or unfinished last
    frame), else None; the SSE decoder has no such trouble (its bounds are counted elsewhere)."""
    corrupt = getattr(decoder, "corrupt", None)
    if corrupt and not decoder.foreign:
        return corrupt
    tail = getattr(decoder, "tail", 0)
    if tail and not corrupt:
        return f"the stream ended inside frame {decoder.frames + 1} ({tail} bytes of it arrived)"
    return None


@dataclass
class TapReport:
    """What the analysis reads of a finished tap (``StreamTap.report``): plain values only, no decoder, so a
    worker process hands it to the process that analyses (addon/workers)."""

    facts: ApiFacts
    interpreted: bool = False  # an interpreter read it to the end (else the stream's end is unknown)
    retry_after: float | None = None  # Google's RetryInfo, in the body
    other_text: str | None = None
    oversize_events: int = 0
    frame_error: str | None = None
    decode_error: str | None = None
    error: str | None = None
    output_chars: int = 0
    reasoning_chars: int = 0
    sse_comments: int = 0
    sse_foreign_lines: int = 0
    bytes: int = 0
    text: list[str] = field(default_factory=list)
    reasoning_text: list[str] = field(default_factory=list)
    saved: bytes = b""

    def report(self) -> TapReport:
        return self


class StreamTap:
    def __init__(
        self,
        clock: Clock,
        api: str,
        content_type: str | None,
        content_encoding: str | None,
        keep_body: int = 0,
        on_phase: Callable[[str], None] | None = None,
        defer: bool = False,
        on_backlog: Callable[[], None] | None = None,
        decoder: Any = None,
    ) -> None:
        """``decoder``: another framing with the SSE decoder's interface (``feed_one``, ``feed``,
        ``close``): a WebSocket turn's frames are its events (addon/websocket/frames.py)."""
        self.clock = clock
        #: "sse", "eventstream", "ndjson" (addon/framing), "websocket" (a turn's frames: ``decoder``) or None: a plain body
        self.framing = "websocket" if decoder is not None else framing_of(content_type)
        self.sse = self.framing is not None  # an event stream, whatever frames its events
        self.interp = make_interpreter(api) if api != "other" or self.sse else None
        if self.interp is None and self.sse:  # an unknown API's stream: the likeliest dialect of its framing
            self.interp = BedrockInvoke() if self.framing == "eventstream" else make_interpreter(
                "ollama.chat" if self.framing == "ndjson" else "openai.chat")
        self.facts: ApiFacts = self.interp.facts if self.interp else ApiFacts()
        self.decoder = decoder if decoder is not None else decoder_for(content_type) if self.sse else None
        self.decode_error: str | None = None
        self.frame_error: str | None = None  # why the framing decoder stopped (a corrupt frame): a finding
        try:
            self._decompress = _decompressor(content_encoding)
        except Exception as e:  # unknown encoding: forward, don't parse
            self._decompress = None
            self.decode_error = str(e)
            self.interp = None
            self.decoder = None
        self.body = bytearray()  # decoded copy of a non-SSE body (for parsing), capped
        self.other_text: str | None = None  # a path no API knows: the start of its non-JSON body
        self.body_truncated = False
        self.keep_body = keep_body  # bytes of decoded body to keep for --save-bodies
        self.saved = bytearray()
        self.bytes = 0
        self.oversize_events = 0  # SSE events too large to analyse (forwarded whole, skipped)
        self.decoded = 0  # decompressed bytes analysed so far (capped by MAX_DECODED_TOTAL)
        self.output_chars = 0
        self.reasoning_chars = 0
        self.text: list[str] = []  # visible output, for counting (capped with reasoning_text)
        self.reasoning_text: list[str] = []
        self._text_len = 0
        self.closed = False
        self.error: str | None = None  # an exception inside the tap (reported, never raised)
        self._on_phase = on_phase
        self._may_defer = defer
        self.deferring = False  # chunks are kept for the analysis thread, not decoded here
        self.kept: deque[tuple[float, bytes]] = deque()
        self.kept_bytes = 0  # bytes kept so far (event loop) ...
        self.drained_bytes = 0  # ... and decoded by drain() (analysis thread)
        self._on_backlog = on_backlog
        self.backlog_asked = False  # on_backlog was called and drain() has not run since
        self._closed_at: float | None = None  # finish() while deferring: drain() closes the decoder
        self._draining = threading.Lock()  # one drain() at a time: chunks are decoded in order
        # the common case, decoded by the short path in _safe_decode: an event stream with its
        # interpreter, not compressed, no saved copy (False for good once anything fails)
        self._plain = (self.decoder is not None and self.interp is not None and self._decompress is None
                       and not keep_body)

    def __call__(self, chunk: bytes) -> bytes:
        if self.deferring:
            if chunk and not self.closed:
                now = time.perf_counter()
                self.clock.last_byte = now
                self.bytes += len(chunk)
                self.kept.append((now, chunk))
                self.kept_bytes += len(chunk)
                backlog = self.kept_bytes - self.drained_bytes
                if backlog > DEFER_MAX_BYTES:
                    if not self.backlog_asked and self._on_backlog is not None:
                        self.backlog_asked = True
                        self._on_backlog()
                    elif backlog > DEFER_HARD_MAX_BYTES:
                        # the analysis thread fell behind: the loop decodes, but a bounded slice per
                        # chunk (twice what arrived), so the backlog shrinks while no chunk costs the
                        # other streams more than its own size; never waits for a drain under way
                        self.drain(limit=2 * len(chunk) + DEFER_SLICE_BYTES, wait=False)
            return chunk
        if chunk:
            # mitmproxy calls with b"" at the end of the body, but an HTTP/2 upstream may also
            # send empty DATA frames mid-stream: the end is signalled by the hooks (finish()).
            now = time.perf_counter()
            c = self.clock
            if c.first_byte is None:
                c.first_byte = now
            c.last_byte = now
            self.bytes += len(chunk)
            self._safe_decode(chunk, now)
        if self._may_defer and self.clock.first_visible is not None and self.interp is not None:
            self.deferring = True
        return chunk

    def _safe_decode(self, chunk: bytes, now: float) -> None:
        try:
            if self._plain:  # the short path: nothing to decompress or keep
                self._sse(chunk, now)
            else:
                self._decode(chunk, now)
        except Exception as e:  # never let analysis break forwarding
            if self.error is None:
                self.error = f"{type(e).__name__}: {e}"
            self.interp = None
            self.decoder = None
            self._plain = False

    def drain(self, limit: int | None = None, wait: bool = True) -> None:
        """Decode the kept chunks, with the times they arrived (the analysis thread; a no-op
        unless deferring). After ``finish`` it also ends the decoding, as ``finish`` would have.

        ``limit``: stop once about this many bytes were decoded (the event loop's bounded slice);
        ``wait=False``: return at once if another drain is under way."""
        if not self.deferring:
            return
        if not self._draining.acquire(blocking=wait):
            return
        try:
            if limit is None:
                self.backlog_asked = False  # (a slice leaves the analysis thread's job asked for)
            kept = self.kept
            done = 0
            while kept and (limit is None or done < limit):
                now, chunk = kept.popleft()  # stamped and counted when it arrived
                self.drained_bytes += len(chunk)
                done += len(chunk)
                self._safe_decode(chunk, now)
            if self._closed_at is not None and not kept:
                self._close_decoder(self._closed_at)  # (SSEDecoder.close is idempotent)
        finally:
            self._draining.release()

    # -- internals -----------------------------------------------------------------
    def _decode(self, chunk: bytes, now: float) -> None:
        """Decode a copy of one chunk that arrived at ``now`` (not the short path: ``_safe_decode``)."""
        data = chunk
        if not self._wants_data():
            return  # nothing reads the decoded bytes: no decompression, no copy
        if self._decompress is not None:
            try:
                data = self._decompress(chunk)
            except Exception as e:
                self.decode_error = f"could not decompress the body: {e}"
                self._decompress = None
                self.interp = self.decoder = None
                return
            self.decoded += len(data)
            if self.decoded > MAX_DECODED_TOTAL:
                # a decompression bomb (or a huge compressed body): stop analysing, keep forwarding
                self.decode_error = (f"the body decompresses to more than {MAX_DECODED_TOTAL // 2**20} MiB; "
                                     "firsttoken stopped analysing it (a limit of firsttoken, not an upstream error)")
                self._decompress = None
                self.interp = self.decoder = None
                return
        if self.keep_body and len(self.saved) < self.keep_body:
            self.saved += data[: self.keep_body - len(self.saved)]
        if self.decoder is not None and self.interp is not None:
            self._sse(data, now)
        elif self.interp is not None:
            if len(self.body) + len(data) <= MAX_BODY_COPY:
                self.body += data
            else:
                self.body_truncated = True
        elif len(self.body) < OTHER_BODY_COPY:  # a path no API knows: enough to quote its error object
            self.body += data[: OTHER_BODY_COPY - len(self.body)]

    def _sse(self, data: bytes, now: float) -> None:
        ev = self.decoder.feed_one(data)  # the common case: one whole event per chunk
        if ev is not None:
            deltas = self.interp.on_event(ev)  # (never truncated: it is the whole chunk)
            if deltas:
                self._deltas(deltas, now)
        else:
            for ev in self.decoder.feed(data):
                self._event(ev, now)

    def _wants_data(self) -> bool:
        """Whether anything still reads the decoded body (analysis, or the --save-bodies copy)."""
        if self.keep_body and len(self.saved) < self.keep_body:
            return True
        if self.interp is None:  # a path no API knows: only the start, for its error object
            return self.decoder is None and len(self.body) < OTHER_BODY_COPY
        return self.decoder is not None or not self.body_truncated

    def finish(self) -> None:
        """End of the stream (the response or error hook). Idempotent; cheap: a pending SSE
        event at most (while deferring, not even that: ``drain`` does it). A whole
        non-streamed body is parsed later, by ``parse_body``."""
        if self.closed:
            return
        self.closed = True
        now = time.perf_counter()
        if self.deferring:
            self._closed_at = now
            return
        self._close_decoder(now)

    def _close_decoder(self, now: float) -> None:
        try:
            if self.decoder is not None and self.interp is not None:
                for ev in self.decoder.close():
                    self._event(ev, now)
                self.frame_error = self.frame_error or frame_trouble(self.decoder)
                if self.decoder.foreign and not self.clock.token_events and not self.facts.done:
                    # no event, only lines that are no SSE field: the body is something else (an
                    # error page, a JSON error sent as a stream); say what it said
                    self.interp.on_not_sse(self.decoder.foreign_text)
        except Exception as e:
            self.error = self.error or f"{type(e).__name__}: {e}"

    def report(self) -> TapReport:
        """Decode what is left (``drain``, ``parse_body``: the analysis thread) and say what the stream held."""
        self.drain()
        self.parse_body()
        return TapReport(
            facts=self.facts, interpreted=self.interp is not None, retry_after=getattr(self.interp, "retry_after", None),
            other_text=self.other_text, oversize_events=self.oversize_events, frame_error=self.frame_error,
            decode_error=self.decode_error, error=self.error, output_chars=self.output_chars,
            reasoning_chars=self.reasoning_chars, sse_comments=self.sse_comments,
            sse_foreign_lines=self.sse_foreign_lines, bytes=self.bytes, text=self.text,
            reasoning_text=self.reasoning_text, saved=bytes(self.saved))

    def parse_body(self) -> None:
        """Parse a complete non-streamed body (on the analysis thread: it grows with the body)."""
        try:
            if self.decoder is None and self.interp is not None and self.body and not self.body_truncated:
                self._deltas(self.interp.on_body(bytes(self.body)), None)
                self.body = bytearray()
            elif self.decoder is None and self.interp is None and self.body:
                self._other_body()
        except Exception as e:
            self.error = self.error or f"{type(e).__name__}: {e}"

    def _other_body(self) -> None:
        """A path no API knows (``GET /``, a typo, an engine's own API such as SGLang's ``/generate``): the
        error object its JSON body holds, so a finding quotes what the upstream said (``Invalid URL (GET /)``),
        not a placeholder, and the engine's report it carries (SGLang's ``meta_info``)."""
        text = bytes(self.body).decode("utf-8", "replace").strip()
        try:
            obj = load_json(text)
        except ValueError:
            obj = None
        self.body = bytearray()
        if not isinstance(obj, dict):
            # a text or HTML answer ("404 page not found"): its start, which the record keeps only for an
            # error status (the analyzer decides: the tap does not know the status), to be quoted
            self.other_text = text[:OTHER_TEXT_CHARS] or None
            return
        said = error_of(obj, plain=True)
        if said:
            set_error(self.facts, *said)
        read_engine(obj, self.facts.engine)

    def _event(self, ev, now: float) -> None:
        if ev.truncated:
            # larger than the decoder's caps: a limit of ours, not malformed upstream JSON
            self.oversize_events += 1
            return
        self._deltas(self.interp.on_event(ev), now)

    def _deltas(self, deltas: list[Delta], now: float | None) -> None:
        if not deltas:
            return
        c = self.clock
        visible = False
        for d in deltas:
            text = d.text
            n = len(text)
            if d.kind in VISIBLE:
                visible = True
                self.output_chars += n
                if n and self._text_len < MAX_TEXT_KEEP:
                    self.text.append(text)
                    self._text_len += n
            else:
                self.reasoning_chars += n
                if n and self._text_len < MAX_TEXT_KEEP:
                    self.reasoning_text.append(text)
                    self._text_len += n
        if now is None:  # a non-streamed body: output, but no token timing
            return
        if len(c.token_events) < MAX_TOKEN_EVENTS:
            c.token_events.append(now)
        else:
            c.events_over_cap += 1
        if c.first_token is None:
            c.first_token = now
            if self._on_phase:
                self._on_phase("streaming")
        if visible and c.first_visible is None:
            c.first_visible = now

    @property
    def sse_comments(self) -> int:
        return self.decoder.comments if self.decoder is not None else 0

    @property
    def sse_foreign_lines(self) -> int:
        return self.decoder.foreign if self.decoder is not None else 0
