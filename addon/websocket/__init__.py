"""WebSocket wires: Responses turns on an upgraded connection (docs/record.md "WebSocket turns")."""

from firsttoken.addon.websocket.connection import SETUP_HEADERS, Connection, setup_headers
from firsttoken.addon.websocket.frames import (
    CREATE,
    REALTIME_API,
    REALTIME_PATH,
    TERMINAL,
    FrameDecoder,
    frame_type,
    is_upgrade,
)

__all__ = ["CREATE", "REALTIME_API", "REALTIME_PATH", "SETUP_HEADERS", "TERMINAL", "Connection", "FrameDecoder", "frame_type", "is_upgrade",
           "setup_headers"]
