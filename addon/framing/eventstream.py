"""AWS's binary event stream (``application/vnd.amazon.eventstream``, Bedrock's streams), decoded
incrementally: length-prefixed frames, CRC32-checked prelude and message, typed headers.

Pure and never raising: a corrupt frame stops the analysis (``corrupt`` says why), never the bytes.
The frame layout and the limits: docs/architecture.md ("Framing and dialects").
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, field
from typing import Any

EVENTSTREAM_TYPE = "application/vnd.amazon.eventstream"
#: prelude (total length, headers length, prelude CRC) and the message CRC
PRELUDE = 12
MIN_FRAME = 16
#: AWS's own limits: a frame of at most 16 MiB, headers of at most 128 KiB
MAX_FRAME = 16 * 2**20 + 128 * 2**10 + MIN_FRAME
MAX_HEADERS = 128 * 2**10
#: text kept of a body that is no event stream at all (a JSON error sent with this Content-Type)
FOREIGN_CHARS = 4096

_PRELUDE = struct.Struct(">III")
_crc32 = zlib.crc32
_from_bytes = int.from_bytes
_U16 = struct.Struct(">H")
#: fixed-size header value types: type byte -> (size, struct format or None)
_FIXED = {2: (1, ">b"), 3: (2, ">h"), 4: (4, ">i"), 5: (8, ">q"), 8: (8, ">q"), 9: (16, None)}


@dataclass(slots=True)
class Message:
    """One frame: its headers (``:event-type``, ``:message-type``, ``:exception-type`` ...) and payload."""

    headers: dict[str, Any] = field(default_factory=dict)
    payload: bytes = b""
    truncated: bool = False  # (never: a frame is whole or not at all; the tap reads it like SSEEvent's)

    @property
    def message_type(self) -> str:
        v = self.headers.get(":message-type")
        return v if type(v) is str else "event"

    @property
    def event_type(self) -> str | None:
        v = self.headers.get(":event-type")
        return v if type(v) is str else None


#: header blocks seen, and what they parse to: a stream repeats the same few (every Bedrock ``chunk``
#: frame's is byte for byte the same), so each is parsed once; bounded, shared read-only
_SEEN: dict[bytes, dict[str, Any] | None] = {}
SEEN_MAX = 256


def headers_of(raw: bytes) -> dict[str, Any] | None:
    """``parse_headers`` of a header block, from the blocks already seen when it is one (do not modify it)."""
    try:
        return _SEEN[raw]
    except KeyError:
        pass
    out = parse_headers(raw)
    if len(_SEEN) >= SEEN_MAX:
        _SEEN.clear()
    _SEEN[raw] = out
    return out


def parse_headers(raw: bytes | memoryview) -> dict[str, Any] | None:
    """The typed headers of one frame, or None when they are malformed."""
    out: dict[str, Any] = {}
    i, n = 0, len(raw)
    try:
        while i < n:
            ln = raw[i]
            name = bytes(raw[i + 1:i + 1 + ln]).decode("utf-8")
            i += 1 + ln
            t = raw[i]
            i += 1
            if t == 0 or t == 1:
                value: Any = t == 0
            elif t == 6 or t == 7:
                size = _U16.unpack_from(raw, i)[0]
                i += 2
                b = bytes(raw[i:i + size])
                if len(b) != size:
                    return None
                value = b.decode("utf-8", "replace") if t == 7 else b
                i += size
            elif t in _FIXED:
                size, fmt = _FIXED[t]
                b = bytes(raw[i:i + size])
                if len(b) != size:
                    return None
                value = struct.unpack(fmt, b)[0] if fmt else b.hex()
                i += size
            else:
                return None
            if i > n or not ln:
                return None
            out[name] = value
    except (IndexError, struct.error, UnicodeDecodeError):
        return None
    return out


class EventStreamDecoder:
    """feed(bytes) -> list[Message]; feed_one(bytes) -> Message | None; close() -> list[Message].

    The same interface as ``SSEDecoder`` where the tap reads it (``comments``, ``foreign``,
    ``foreign_text``); ``corrupt`` is set, and decoding stops for good, at the first bad frame."""

    __slots__ = ("_buf", "_closed", "offset", "frames", "corrupt", "comments", "foreign", "foreign_text", "tail")

    def __init__(self) -> None:
        self._buf = bytearray()
        self._closed = False
        self.offset = 0  # stream bytes consumed by whole frames
        self.frames = 0
        self.corrupt: str | None = None  # why decoding stopped (a bad CRC, an absurd length, bad headers)
        self.comments = 0  # (no such thing in this framing)
        self.foreign = 0  # 1 when the body is no event stream at all (its first bytes are text)
        self.foreign_text = ""
        self.tail = 0  # bytes of an unfinished frame left when the stream ended

    # -- public ------------------------------------------------------------------
    def feed_one(self, data: bytes) -> Message | None:
        """The one frame ``data`` holds exactly, when nothing is buffered (how Bedrock sends
        them: a frame a chunk); None otherwise, and then nothing was consumed: call ``feed``
        (which also says what is wrong with a frame this short path refused)."""
        if self._buf or self.corrupt is not None or self._closed or type(data) is not bytes:
            return None
        n = len(data)
        if n < MIN_FRAME:
            return None
        total, hlen, pcrc = _PRELUDE.unpack_from(data)
        if total != n or hlen > n - MIN_FRAME or hlen > MAX_HEADERS or n > MAX_FRAME:
            return None
        if _crc32(data[:8]) != pcrc or _crc32(data[8:n - 4], pcrc) != _from_bytes(data[n - 4:], "big"):
            return None
        end = PRELUDE + hlen
        headers = _SEEN.get(data[PRELUDE:end]) if hlen else {}
        if headers is None:
            headers = headers_of(data[PRELUDE:end])
            if headers is None:
                return None
        self.frames += 1
        self.offset += n
        return Message(headers, data[end:n - 4])

    def feed(self, data: bytes) -> list[Message]:
        out: list[Message] = []
        if self._closed or not data:
            return out
        if self.corrupt is not None:
            self._keep_foreign(data)
            return out
        buf = self._buf
        buf += data
        pos = 0
        n = len(buf)
        with memoryview(buf) as mv:  # (released before the buffer is cut below)
            while n - pos >= PRELUDE:
                total, hlen, pcrc = _PRELUDE.unpack_from(mv, pos)
                if not self._sane_prelude(mv, pos, total, hlen, pcrc):
                    break
                if n - pos < total:
                    break
                msg = self._frame(mv[pos:pos + total], total, hlen, pcrc)
                if msg is None:
                    break
                out.append(msg)
                pos += total
        if self.corrupt is not None:
            del buf[:]
        elif pos:
            del buf[:pos]
        return out

    def close(self) -> list[Message]:
        """End of stream: nothing is pending but an unfinished frame, counted in ``tail``. Idempotent."""
        if not self._closed:
            self._closed = True
            self.tail = len(self._buf)
            self._buf = bytearray()
        return []

    # -- internals ---------------------------------------------------------------
    def _sane_prelude(self, mv: memoryview, pos: int, total: int, hlen: int, pcrc: int) -> bool:
        if total < MIN_FRAME or total > MAX_FRAME or hlen > MAX_HEADERS or hlen > total - MIN_FRAME:
            self._stop(f"frame {self.frames + 1} at byte {self.offset} declares an impossible length "
                       f"(total {total}, headers {hlen})", mv[pos:])
            return False
        if _crc32(mv[pos:pos + 8]) != pcrc:
            self._stop(f"frame {self.frames + 1} at byte {self.offset}: its prelude fails the CRC32 check", mv[pos:])
            return False
        return True

    def _frame(self, view: memoryview, total: int, hlen: int, pcrc: int) -> Message | None:
        """One whole frame whose prelude checked out: its message CRC, headers and payload."""
        mcrc = int.from_bytes(view[total - 4:total], "big")
        if _crc32(view[8:total - 4], pcrc) != mcrc:
            self._stop(f"frame {self.frames + 1} at byte {self.offset}: the message fails the CRC32 check", b"")
            return None
        headers = headers_of(bytes(view[PRELUDE:PRELUDE + hlen])) if hlen else {}
        if headers is None:
            self._stop(f"frame {self.frames + 1} at byte {self.offset}: its headers are malformed", b"")
            return None
        self.frames += 1
        self.offset += total
        return Message(headers, bytes(view[PRELUDE + hlen:total - 4]))

    def _stop(self, why: str, rest: Any) -> None:
        self.corrupt = why
        if self.offset == 0:
            self._keep_foreign(bytes(rest[:FOREIGN_CHARS]))

    def _keep_foreign(self, data: bytes) -> None:
        """A body whose very first frame is bad and whose bytes read as text is no event stream:
        keep what it said (``on_not_sse`` reads it, as for an SSE body that held no event)."""
        if self.offset or len(self.foreign_text) >= FOREIGN_CHARS:
            return
        head = bytes(data[:FOREIGN_CHARS])
        text = head.decode("utf-8", "replace")
        if not self.foreign_text and (not text.strip() or "\ufffd" in text[:64] or not text.lstrip()[:1].isprintable()):
            return
        self.foreign = 1
        self.foreign_text = (self.foreign_text + text)[:FOREIGN_CHARS]


def encode_frame(headers: dict[str, str], payload: bytes) -> bytes:
    """One frame with string headers (type 7), as Bedrock writes them: for `bench` and the tests'
    upstreams (the proxy itself never writes frames)."""
    hb = bytearray()
    for name, value in headers.items():
        n, v = name.encode(), value.encode()
        hb += bytes([len(n)]) + n + b"\x07" + _U16.pack(len(v)) + v
    total = PRELUDE + len(hb) + len(payload) + 4
    prelude = struct.pack(">II", total, len(hb))
    prelude += zlib.crc32(prelude).to_bytes(4, "big")
    body = prelude + bytes(hb) + payload
    return body + zlib.crc32(body).to_bytes(4, "big")
