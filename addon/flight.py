"""One request in flight: its record, its clock, its tap and the request body (in memory only)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from firsttoken.addon.record import Clock, Record
from firsttoken.addon.tap import StreamTap


@dataclass
class Flight:
    record: Record
    clock: Clock
    flow: Any = None  # the mitmproxy flow (for comments/marks once diagnosed)
    tap: StreamTap | None = None
    body: bytes | bytearray | None = None  # request body, raw as received
    body_encoding: str | None = None  # the request's Content-Encoding, if any
    secrets: list[str] = field(default_factory=list)  # for redaction; never stored
    body_copy: BodyCopy | None = None  # while the request body streams through
    body_done: bool = False  # the whole request body has been seen
    parsed: bool = False  # the request body was handed to the analyzer
    finished: bool = False
    ws_upgrade: bool = False  # a request to become a WebSocket: its connection's set-up, a row only if refused
    ws_setup: dict[str, str] | None = None  # the upgrade's set-up headers (addon/websocket)

    def live_view(self) -> dict[str, Any]:
        """A small dict for the live view: what is known so far."""
        tap = self.tap
        return {
            "id": self.record.id,
            "t0": self.clock.t0,
            "phase": self.record.phase,
            "route": self.record.route,
            "model": self.record.model,
            "api": self.record.api,
            "path": self.record.path,
            "status": self.record.status,
            "prompt_tokens_est": self.record.prompt_tokens_est,
            "headers_at": self.clock.headers,
            "first_token_at": self.clock.first_token,
            "first_visible_at": self.clock.first_visible,
            "events": len(self.clock.token_events),
            "output_chars": tap.output_chars if tap else 0,
        }


class BodyCopy:
    """The request's stream callable: forwards each chunk as is, keeps a capped copy."""

    def __init__(self, cap: int = 64 * 2**20) -> None:
        self.buf = bytearray()
        self.cap = cap
        self.size = 0
        self.truncated = False

    def __call__(self, chunk: bytes) -> bytes:
        self.size += len(chunk)
        if not self.truncated:
            if len(self.buf) + len(chunk) <= self.cap:
                self.buf += chunk
            else:
                self.truncated = True
                self.buf = bytearray()
        return chunk
