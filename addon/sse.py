"""Incremental Server-Sent Events decoder (WHATWG EventSource parsing rules), pure and never raising.

Feed it the body in whatever chunks the network delivered; any chunking of the same bytes yields
the same events. Its rules, deviations and memory bounds: docs/architecture.md ("Server-Sent Events").
"""

from __future__ import annotations

from dataclasses import dataclass

#: longest partial line buffered while waiting for its line end (bytes)
MAX_LINE = 8 * 1024 * 1024
#: most data characters accumulated for one event
MAX_EVENT_DATA = 8 * 1024 * 1024

#: text kept of lines that are no SSE field (an error page or a JSON body sent as an event stream)
FOREIGN_CHARS = 4096

_BOM = b"\xef\xbb\xbf"


@dataclass(slots=True)
class SSEEvent:
    event: str  # the event: field, "message" when absent; "error" for a bare `error: ...` line
    data: str  # data lines joined with "\n"
    id: str | None = None
    truncated: bool = False  # a line or the data was cut at MAX_LINE / MAX_EVENT_DATA: not the whole event


class SSEDecoder:
    """feed(bytes) -> list[SSEEvent]; close() -> list[SSEEvent]. Counts comments in ``comments``."""

    __slots__ = (
        "comments",
        "retry",
        "truncated",
        "_head",
        "_pending_cr",
        "_buf",
        "_event",
        "_data",
        "_data_len",
        "_last_id",
        "_closed",
        "_cut",
        "_line_cut",
        "foreign",
        "foreign_text",
    )

    def __init__(self) -> None:
        self.comments = 0  # comment lines seen (keep-alives)
        self.retry: int | None = None  # last valid `retry:` value (ms)
        self.truncated = 0  # lines/data cut to keep memory bounded
        self._head: bytes | None = b""  # first bytes, held until we know if they are a BOM; None after
        self._pending_cr = False  # the last byte seen was a \r line end
        self._buf = bytearray()  # the current unterminated line (raw bytes)
        self._event = ""  # event type buffer
        self._data: list[str] = []  # data lines of the pending event
        self._data_len = 0
        self._last_id: str | None = None
        self._closed = False
        self._cut = False  # the pending event lost data to the caps
        self._line_cut = False  # the buffered line lost bytes to MAX_LINE
        self.foreign = 0  # lines that are no SSE field the spec knows (ignored: but a sign the body is not SSE)
        self.foreign_text = ""  # the first FOREIGN_CHARS of them, joined with \n: what the body said instead

    # -- public ------------------------------------------------------------------
    def feed(self, data: bytes) -> list[SSEEvent]:
        out: list[SSEEvent] = []
        if self._closed or not data:
            return out
        if not isinstance(data, bytes):
            if not isinstance(data, (bytearray, memoryview)):
                return out
            data = bytes(data)
        if self._head is not None:
            data = self._head + data
            if len(data) < 3 and _BOM.startswith(data):
                self._head = data  # could still be a BOM
                return out
            self._head = None
            if data.startswith(_BOM):
                data = data[3:]
        self._bytes(data, out)
        return out

    def feed_one(self, data: bytes) -> SSEEvent | None:
        """The one event in ``data`` when the decoder is between events and ``data`` is exactly
        ``data: <text>\n\n`` or ``event: <name>\ndata: <text>\n\n`` (how most servers send
        each event: OpenAI the first, Anthropic the second): the same event ``feed`` would
        return, without the line machinery. None otherwise, and then nothing was consumed:
        call ``feed``."""
        if (self._buf or self._data or self._pending_cr or self._event or self._closed or self._line_cut
                or type(data) is not bytes or (self._head is not None and self._head != b"")):
            return None
        n = len(data)
        if n < 8 or n > MAX_EVENT_DATA or not data.endswith(b"\n\n") or b"\r" in data:
            return None
        if data.startswith(b"data: "):
            if data.find(b"\n", 6) != n - 2:
                return None
            self._head = None  # the stream's first bytes, and not a BOM
            return SSEEvent("message", data[6:-2].decode("utf-8", "replace"), self._last_id)
        if not data.startswith(b"event:"):
            return None
        nl = data.find(b"\n", 6)
        if data.find(b"data: ", nl + 1, nl + 7) != nl + 1 or data.find(b"\n", nl + 7) != n - 2:
            return None
        name = data[7:nl] if data[6:7] == b" " else data[6:nl]
        self._head = None
        return SSEEvent(name.decode("utf-8", "replace") or "message", data[nl + 7:-2].decode("utf-8", "replace"),
                        self._last_id)

    def close(self) -> list[SSEEvent]:
        """End of stream: flush a partial line and a pending event. Idempotent."""
        out: list[SSEEvent] = []
        if self._closed:
            return out
        self._closed = True
        if self._head:  # a stream of 1-2 bytes that looked like the start of a BOM
            self._bytes(self._head, out)
        self._head = None
        if self._buf:
            line = self._buf.decode("utf-8", "replace")
            self._buf = bytearray()
            self._line(line, out)
        self._dispatch(out)
        return out

    # -- internals ---------------------------------------------------------------
    def _bytes(self, data: bytes, out: list[SSEEvent]) -> None:
        # \r and \n never occur inside a multi-byte UTF-8 sequence, so lines are split as
        # bytes and each complete line decoded on its own (same result as decoding the
        # whole stream); the partial line is kept as bytes: compact, amortised O(1) appends.
        if not data:
            return
        if self._pending_cr:
            self._pending_cr = False
            if data[0] == 10:  # the \n of a \r\n split across feeds
                data = data[1:]
                if not data:
                    return
        if b"\r" in data:
            self._pending_cr = data[-1] == 13
            data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        lines = data.split(b"\n")
        last = lines.pop()  # the unterminated rest (b"" when data ended with a line end)
        if lines:
            first = lines[0]
            if self._buf:
                self._add(first)
                first = self._buf
                self._buf = bytearray()
            self._line(first.decode("utf-8", "replace"), out)
            for i in range(1, len(lines)):
                self._line(lines[i].decode("utf-8", "replace"), out)
        if last:
            self._add(last)

    def _add(self, b: bytes) -> None:
        room = MAX_LINE - len(self._buf)
        if len(b) > room:
            if not self._line_cut:
                self.truncated += 1
            self._line_cut = True
            if room <= 0:
                return
            b = b[:room]
        self._buf += b

    def _line(self, line: str, out: list[SSEEvent]) -> None:
        if self._line_cut:
            self._line_cut = False
            self._cut = True
        if not line:
            self._dispatch(out)
            return
        if line[0] == ":":
            self.comments += 1
            return
        name, colon, value = line.partition(":")
        if colon and value[:1] == " ":
            value = value[1:]
        if name == "data":
            n = len(value) + 1
            if self._data_len + n > MAX_EVENT_DATA:
                self.truncated += 1
                self._cut = True
                room = MAX_EVENT_DATA - self._data_len - 1
                if room <= 0:
                    return
                value = value[:room]
                n = room + 1
            self._data.append(value)
            self._data_len += n
        elif name == "event":
            self._event = value
        elif name == "id":
            if "\x00" not in value:
                self._last_id = value
        elif name == "retry":
            if value.isascii() and value.isdigit():
                self.retry = int(value)
        elif name == "error":
            out.append(SSEEvent("error", value, self._last_id))
        else:
            self.foreign += 1
            if len(self.foreign_text) < FOREIGN_CHARS:
                self.foreign_text = (self.foreign_text + "\n" + line if self.foreign_text else line)[:FOREIGN_CHARS]

    def _dispatch(self, out: list[SSEEvent]) -> None:
        data = self._data
        if data:
            out.append(SSEEvent(self._event or "message", "\n".join(data), self._last_id, self._cut))
            self._data = []
            self._data_len = 0
        self._event = ""
        self._cut = False
