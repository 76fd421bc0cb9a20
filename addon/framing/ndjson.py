"""Newline-delimited JSON (``application/x-ndjson``: Ollama's ``/api/chat`` and ``/api/generate``
streams), decoded incrementally: one event per line, the SSE decoder's interface and event type.

Pure and never raising; any chunking of the same bytes yields the same events; bounded memory
(a line over MAX_LINE is cut). docs/architecture.md ("Framing and dialects").
"""

from __future__ import annotations

from firsttoken.addon.sse import FOREIGN_CHARS, MAX_LINE, SSEEvent

NDJSON_TYPES = ("application/x-ndjson", "application/ndjson", "application/jsonl", "application/x-jsonlines")

_BOM = b"\xef\xbb\xbf"


class NDJSONDecoder:
    """feed(bytes) -> list[SSEEvent]; close() -> list[SSEEvent]. Each JSON line is an ``SSEEvent("message",
    line)``, so an interpreter's ``on_event`` reads it as it reads an SSE event's data. Blank lines are
    skipped; a line that is no JSON value (an HTML page, a proxy's text) is counted in ``foreign``."""

    __slots__ = ("comments", "truncated", "foreign", "foreign_text", "lines", "_buf", "_cut", "_pending_cr",
                 "_head", "_closed")

    def __init__(self) -> None:
        self.comments = 0  # (NDJSON has none: the tap reads it from every decoder)
        self.truncated = 0  # lines cut at MAX_LINE
        self.foreign = 0  # non-blank lines that are no JSON object or array
        self.foreign_text = ""  # the first FOREIGN_CHARS of them, joined with \n
        self.lines = 0  # JSON lines dispatched
        self._buf = bytearray()  # the current unterminated line
        self._cut = False  # the buffered line lost bytes to MAX_LINE
        self._pending_cr = False  # the last byte seen was a \r (its \n may come next)
        self._head = True  # nothing seen yet (a BOM may open the stream)
        self._closed = False

    def feed_one(self, data: bytes) -> SSEEvent | None:
        """The one event in ``data`` when the decoder is between lines and ``data`` is exactly one
        JSON object line ending in ``\\n`` (how Ollama writes each object); None otherwise, and then
        nothing was consumed: call ``feed``."""
        if self._buf or self._pending_cr or self._closed or type(data) is not bytes:
            return None
        n = len(data)
        if n < 3 or n > MAX_LINE or data[0] != 123 or data.find(b"\n") != n - 1 or b"\r" in data:
            return None
        self._head = False
        self.lines += 1
        return SSEEvent("message", data[:-1].decode("utf-8", "replace"))

    def feed(self, data: bytes) -> list[SSEEvent]:
        out: list[SSEEvent] = []
        if self._closed or not data:
            return out
        if type(data) is not bytes:
            if not isinstance(data, (bytearray, memoryview)):
                return out
            data = bytes(data)
        if self._head:
            if len(self._buf) + len(data) < 3 and _BOM.startswith(bytes(self._buf) + data):
                self._buf += data  # could still be a BOM
                return out
            data = bytes(self._buf) + data
            self._buf = bytearray()
            self._head = False
            if data.startswith(_BOM):
                data = data[3:]
        if self._pending_cr:
            self._pending_cr = False
            if data[:1] == b"\n":
                data = data[1:]
        if b"\r" in data:
            self._pending_cr = data[-1:] == b"\r"
            data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        lines = data.split(b"\n")
        last = lines.pop()
        for i, line in enumerate(lines):
            if i == 0 and (self._buf or self._cut):
                self._add(line)
                line, self._buf = bytes(self._buf), bytearray()
            self._line(line, out)
        if last:
            self._add(last)
        return out

    def close(self) -> list[SSEEvent]:
        """End of stream: a last line without its ``\\n`` is dispatched. Idempotent."""
        out: list[SSEEvent] = []
        if self._closed:
            return out
        self._closed = True
        if self._buf or self._cut:
            line, self._buf = bytes(self._buf), bytearray()
            if self._head and line.startswith(_BOM):
                line = line[3:]
            self._line(line, out)
        return out

    # -- internals -----------------------------------------------------------------
    def _add(self, b: bytes) -> None:
        room = MAX_LINE - len(self._buf)
        if len(b) > room:
            if not self._cut:
                self.truncated += 1
            self._cut = True
            b = b[:max(0, room)]
        self._buf += b

    def _line(self, line: bytes, out: list[SSEEvent]) -> None:
        if self._cut:  # too long to analyse: an event the tap counts as oversize, without its bytes
            self._cut = False
            out.append(SSEEvent("message", "", truncated=True))
            return
        text = line.decode("utf-8", "replace").strip()
        if not text:
            return
        if text[0] in "{[":
            self.lines += 1
            out.append(SSEEvent("message", text))
            return
        self.foreign += 1
        if len(self.foreign_text) < FOREIGN_CHARS:
            self.foreign_text = (self.foreign_text + "\n" + text if self.foreign_text else text)[:FOREIGN_CHARS]
