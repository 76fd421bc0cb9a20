"""One upgraded WebSocket connection: its set-up (what the 101 said) and its turns in order.

Pure state, fed by the hooks in capture.py with the times they stamped: a client's
``response.create`` opens a turn, the server's frames belong to the oldest open turn, a terminal
event ends it. docs/record.md ("WebSocket turns").
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

#: the upgrade's response headers a turn shows as its connection's (never a credential; capped)
SETUP_HEADERS = ("openai-model", "x-models-etag", "x-reasoning-included", "x-request-id", "openai-request-id",
                 "openai-processing-ms", "openai-version", "sec-websocket-extensions", "server", "cf-ray")
HEADER_CHARS = 200


def setup_headers(headers: dict[str, str]) -> dict[str, str]:
    """The set-up headers of an upgrade's answer (lower-case names, values capped)."""
    return {k: headers[k][:HEADER_CHARS] for k in SETUP_HEADERS if k in headers}


@dataclass
class Connection:
    id: str  # the upgrade flow's id
    setup: dict[str, Any]  # what every turn shows as its connection (record.ws_connection)
    base: dict[str, Any]  # record fields every turn takes from the upgrade (route, key facts, ...)
    open: deque = field(default_factory=deque)  # turns waiting for their terminal event, oldest first
    turns: int = 0  # turns opened so far
    last_turn: str | None = None  # the id of the latest turn that ended (a later close is written on it)
    client_frames: int = 0  # client frames that started no turn (response.cancel, session updates...)
    stray_frames: int = 0  # server frames while no turn was open
    secrets: list[str] = field(default_factory=list)  # the upgrade's credentials, for redaction; never stored
    api: str = "openai.responses"  # what its turns speak: Responses, or the Realtime API (/v1/realtime)
    model: str | None = None  # Realtime: the model named in the upgrade's URL (its frames name none)

    def start(self, turn: Any) -> int:
        """A ``response.create`` opened ``turn``: its number on this connection."""
        self.turns += 1
        self.open.append(turn)
        return self.turns

    def current(self) -> Any | None:
        """The turn a server frame belongs to (responses on one connection come in order)."""
        return self.open[0] if self.open else None

    def end(self, turn: Any, turn_id: str) -> None:
        """``turn`` ended (its terminal event, or the connection closed)."""
        try:
            self.open.remove(turn)
        except ValueError:
            pass
        self.last_turn = turn_id
