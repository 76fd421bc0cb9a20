"""Wire helpers: SSE event formatting, ids, and the chunked (optionally gzip / buffered) body writer."""

from __future__ import annotations

import base64
import json
import os
import secrets
import string
import time
import zlib
from dataclasses import dataclass
from typing import Any, BinaryIO

_ALNUM = string.ascii_letters + string.digits

# Event kinds: "head" (before the first token), "token" (carries a token), "tail" (after the tokens),
# "final" (the terminator: [DONE] / message_stop / response.completed — omitted by the `truncated` fault).
HEAD, TOKEN, TAIL, FINAL = "head", "token", "tail", "final"


@dataclass(slots=True)
class Ev:
    slot: int | None  # index of the output token whose deadline this event waits for; None = right away
    data: bytes
    kind: str = TOKEN


def dumps(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def sse(obj: Any, event: str | None = None) -> bytes:
    payload = obj if isinstance(obj, str) else dumps(obj)
    if event:
        return f"event: {event}\ndata: {payload}\n\n".encode()
    return f"data: {payload}\n\n".encode()


def truncate_data_line(event_bytes: bytes) -> bytes:
    """The same SSE event with its JSON data cut in the middle (malformed_stream)."""
    lines = event_bytes.rstrip(b"\n").split(b"\n")
    for i in range(len(lines) - 1, -1, -1):
        if lines[i].startswith(b"data: "):
            payload = lines[i][6:]
            lines[i] = b"data: " + payload[: max(1, len(payload) // 2)]
            break
    return b"\n".join(lines) + b"\n\n"


def alnum(n: int) -> str:
    return "".join(secrets.choice(_ALNUM) for _ in range(n))


def hexid(n: int) -> str:
    return secrets.token_hex((n + 1) // 2)[:n]


def signature() -> str:
    return base64.b64encode(b"\x12\x02\x18\x02" + os.urandom(140)).decode()


class BlockWriter:
    """A file that holds what is written to it and sends it on in blocks of ``block`` bytes, as a
    buffering proxy does (nginx's default ``proxy_buffering``: response headers included);
    ``release`` (or ``flush``, which the HTTP server calls when the response is done) sends the rest."""

    def __init__(self, raw: BinaryIO, block: int = 4096) -> None:
        self._raw = raw
        self._block = block
        self._held = bytearray()
        self.closed = False

    def write(self, data: bytes) -> int:
        self._held += data
        if len(self._held) >= self._block:
            n = len(self._held) - len(self._held) % self._block
            self._raw.write(bytes(self._held[:n]))
            del self._held[:n]
        return len(data)

    def release(self) -> None:
        if self._held:
            self._raw.write(bytes(self._held))
            self._held.clear()

    def flush(self) -> None:
        self.release()
        self._raw.flush()

    def close(self) -> None:
        self.release()
        self._raw.close()
        self.closed = True


class BodyWriter:
    """Writes a chunked body: one flushed HTTP chunk per write(); gzip-compressed per write with `gzip`;
    everything held back and sent in a single chunk by finish() with `buffered`."""

    def __init__(self, wfile: BinaryIO, *, gzip: bool = False, buffered: bool = False, chunked: bool = True,
                 log: list[tuple[float | None, float, bytes]] | None = None) -> None:
        self._wfile = wfile
        #: per write that went out: (its deadline, time.monotonic() once written, its bytes before any gzip)
        self._log = log
        self._chunked = chunked
        self._z = zlib.compressobj(6, zlib.DEFLATED, 31) if gzip else None
        self._buffered = buffered
        self._held: list[bytes] = []
        self.bytes_out = 0

    def _chunk(self, data: bytes) -> None:
        if data:
            self._wfile.write(b"%x\r\n%s\r\n" % (len(data), data) if self._chunked else data)
            self.bytes_out += len(data)

    def write(self, data: bytes, due: float | None = None) -> None:
        """Send ``data`` (``due``: the schedule's deadline it was sent for, for the send log)."""
        if self._buffered:
            self._held.append(data)
            return
        plain = data
        if self._z is not None:
            data = self._z.compress(data) + self._z.flush(zlib.Z_SYNC_FLUSH)
        if self._log is not None:  # logged as it goes out: a client may read the log as soon as it has the bytes
            self._log.append((due, time.monotonic(), plain))
        self._chunk(data)

    def finish(self, *, terminate: bool = True) -> None:
        """Send what is held back (buffered); then, with terminate, close the gzip stream and send the 0-chunk.
        Without terminate (the connection is about to be dropped) the body is left unfinished."""
        if self._buffered:
            self._buffered = False
            data, self._held = b"".join(self._held), []
            if data:
                self.write(data)
        if not terminate:
            return
        if self._z is not None:
            self._chunk(self._z.flush())
            self._z = None
        if self._chunked:
            self._wfile.write(b"0\r\n\r\n")
        if isinstance(self._wfile, BlockWriter):
            self._wfile.release()


def gzip_bytes(data: bytes) -> bytes:
    z = zlib.compressobj(6, zlib.DEFLATED, 31)
    return z.compress(data) + z.flush()
