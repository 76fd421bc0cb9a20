"""Responses over a WebSocket, as OpenAI serves it to Codex: ``GET /v1/responses`` upgraded, one
``response.create`` text frame per turn, each of the stream's events a JSON text frame.

A turn is answered by the same engine and schedule as an HTTP request (its clock starts when the
frame was read; ``response.created`` goes out at the TTFB the settings give). The framing is
wsproto's (the sans-IO WebSocket library mitmproxy itself uses), so nothing here parses frames.
"""

from __future__ import annotations

import json
import time
from typing import Any

from wsproto import ConnectionType, WSConnection
from wsproto.events import (
    AcceptConnection,
    CloseConnection,
    Message,
    Ping,
    RejectConnection,
    RejectData,
    Request,
    TextMessage,
)

from firsttoken.addon.websocket import CREATE
from firsttoken.cli.simulate import faults as errors
from firsttoken.cli.simulate.config import UnknownFault, parse_faults
from firsttoken.cli.simulate.engine import Upstream, answer
from firsttoken.cli.simulate.timing import Schedule
from firsttoken.cli.simulate.wire import hexid

#: the upgrade's answer headers, as OpenAI's: the model family and a request id
SETUP_HEADERS = (("openai-model", "sim-1"), ("x-reasoning-included", "true"))


class _Frames:
    """A stream writer for the engine whose writes are SSE events: each event's data goes out as one
    text frame (what the Responses WebSocket sends in place of SSE)."""

    def __init__(self, turn: Turn, log: list[tuple[float | None, float, bytes]]) -> None:
        self._turn = turn
        self._log = log

    def write(self, data: bytes, due: float | None = None) -> None:
        for line in data.split(b"\n"):
            if line.startswith(b"data:"):
                payload = line[5:].lstrip()
                self._log.append((due, time.monotonic(), payload))  # logged as it goes out
                self._turn.send_text(payload.decode())

    def finish(self, *, terminate: bool = True) -> None:
        pass


class Turn:
    """One ``response.create`` answered: what the engine needs of a connection (engine.SimHandler)."""

    def __init__(self, session: WsSession) -> None:
        self._s = session
        self.note = ""

    @property
    def sim(self) -> Upstream:
        return self._s.sim

    def given_api_key(self, proto: str) -> str | None:
        return self._s.api_key

    def send_text(self, text: str) -> None:
        self._s.send(TextMessage(data=text))

    def send_error_reply(self, reply: errors.ErrorReply, proto: str) -> None:
        err = reply.body.get("error") if isinstance(reply.body.get("error"), dict) else reply.body
        self.send_text(json.dumps({"type": "error", "status": reply.status, "error": err}, separators=(",", ":")))
        self.note += f" {err.get('type') or err.get('code')}"

    def send_json(self, status: int, body: Any, headers: dict[str, str] | None = None, **_: Any) -> None:
        """A turn asked not to stream still gets its answer as the stream's last event."""
        self.send_text(json.dumps({"type": "response.completed", "response": body}, separators=(",", ":")))

    def start_stream(self, status: int, headers: dict[str, str], *, gzip: bool, buffered: bool,
                     block: int = 0) -> _Frames:
        sent = self._s.log_turn()
        return _Frames(self, sent.writes)

    def drop(self) -> None:
        self._s.drop()


class WsSession:
    """One upgraded connection, served on the handler's thread until either side closes it."""

    def __init__(self, handler: Any) -> None:
        self.h = handler
        self.sim = handler.sim
        self.ws = WSConnection(ConnectionType.SERVER)
        self.api_key: str | None = None
        self.turns = 0
        self._text = ""  # a message's fragments so far

    def send(self, event: Any) -> None:
        self.h.wfile.write(self.ws.send(event))

    def log_turn(self) -> Any:
        return self.h.log_answer()  # the handler's send log, shared with HTTP answers

    def drop(self) -> None:
        self.h.drop()

    def serve(self, head: bytes) -> None:
        """``head``: the upgrade request as it came (its line and headers), already read by the server."""
        self.ws.receive_data(head)
        closed = False
        while not closed:
            for event in self.ws.events():
                if isinstance(event, Request):
                    if not self._accept(event):
                        self.h.close_connection = True
                        return
                elif isinstance(event, Message):
                    if isinstance(event, TextMessage):
                        self._text += event.data
                    else:
                        self._text += bytes(event.data).decode("utf-8", "replace")
                    if event.message_finished:
                        text, self._text = self._text, ""
                        self._turn(text)
                elif isinstance(event, Ping):
                    self.send(event.response())
                elif isinstance(event, CloseConnection):
                    try:
                        self.send(event.response())
                    except Exception:  # noqa: BLE001 - the peer may already be gone
                        pass
                    closed = True
            if closed or self.sim.stop_event.is_set():
                break
            try:
                data = self.h.rfile.read1(65536)
            except (OSError, ValueError):
                data = b""
            if not data:
                break
            self.ws.receive_data(data)
        self.h.close_connection = True

    def _accept(self, event: Request) -> bool:
        cfg = self.sim.config
        self.api_key = self.h.given_api_key("openai")
        if cfg.api_key is not None and self.api_key != cfg.api_key:
            reply = errors.unauthorized("openai", self.api_key)
            body = json.dumps(reply.body).encode()
            self.h.wfile.write(self.ws.send(RejectConnection(
                status_code=401, headers=[(b"content-type", b"application/json"),
                                          (b"content-length", str(len(body)).encode())], has_body=True)))
            self.h.wfile.write(self.ws.send(RejectData(data=body)))
            self.h.status = 401
            return False
        extra = [(k.encode(), v.encode()) for k, v in SETUP_HEADERS] + [(b"x-request-id", f"req_{hexid(32)}".encode())]
        self.send(AcceptConnection(extra_headers=extra))
        self.h.status = 101
        self.sim.upgrades += 1
        return True

    def _turn(self, text: str) -> None:
        arrival = time.monotonic()
        turn = Turn(self)
        try:
            frame = json.loads(text)
        except ValueError as exc:
            turn.send_error_reply(errors.malformed("openai", exc), "openai")
            return
        if not isinstance(frame, dict) or frame.get("type") != CREATE:
            return  # other client events (response.cancel, ...) need no answer here
        self.turns += 1
        self.sim.arrived_turn(self.h.headers.get("Host") or "", self.h.server.server_address[1], self.h.path)
        body = {k: v for k, v in frame.items() if k != "type"}
        body["stream"] = True  # every turn on the socket streams
        cfg = self.sim.config
        sched = Schedule(cfg, arrival, self.sim.jitter)
        invalid = errors.validate("responses", body)
        if invalid is not None:
            return turn.send_error_reply(invalid, "openai")
        try:
            fault_set = parse_faults(None, body.get("model"))
        except UnknownFault as exc:
            return turn.send_error_reply(errors.unknown_fault("openai", str(exc)), "openai")
        if "slow_ttfb" in fault_set:
            sched = Schedule(cfg, arrival, self.sim.jitter, slow_ttfb=True)
        answer(turn, "responses", body, fault_set, sched)
        self.h.note += f" turn {self.turns}:{turn.note}"


def upgrade_head(handler: Any) -> bytes:
    """The upgrade request as the client sent it (the server has parsed it already)."""
    lines = [handler.requestline] + [f"{k}: {v}" for k, v in handler.headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def serve(handler: Any) -> None:
    """Serve the handler's upgraded connection (its socket has TCP_NODELAY from the server's setup)."""
    WsSession(handler).serve(upgrade_head(handler))
