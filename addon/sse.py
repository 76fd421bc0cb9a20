"""Incremental Server-Sent Events decoder (to be written: see tests/test_sse.py)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class SSEEvent:
    event: str  # the event: field, "message" when absent; "error" for a bare `error: ...` line
    data: str  # data lines joined with "\n"
    id: str | None = None


class SSEDecoder:
    """feed(bytes) -> list[SSEEvent]; close() -> list[SSEEvent]. Counts comments in ``comments``."""

    def __init__(self) -> None:
        self.comments = 0

    def feed(self, data: bytes) -> list[SSEEvent]:
        raise NotImplementedError

    def close(self) -> list[SSEEvent]:
        raise NotImplementedError
