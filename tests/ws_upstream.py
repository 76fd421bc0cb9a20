"""A loopback upstream that serves OpenAI Responses over a WebSocket (``GET /v1/responses``, one
``response.create`` text frame per turn, the stream's events as JSON text frames), with a known
schedule, logging when it read each request frame and sent each event (``time.perf_counter``).

The request frame's ``model`` picks a fault (see ``FAULTS``); any other model is a healthy turn:
``response.created`` at once, reasoning, then the first text delta ``ttft_ms`` after the frame
was read, ``deltas`` deltas ``itl_ms`` apart, ``response.completed`` with usage.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from websockets.asyncio.server import serve
from websockets.datastructures import Headers
from websockets.http11 import Response

#: request-frame models that make the upstream misbehave, and how
FAULTS = {
    "fault-close-1011": "close with 1011 after the first delta",
    "fault-close-1001": "close with 1001 after the first delta",
    "fault-close-4001": "close with 4001 after the first delta",
    "fault-close-1000": "close with 1000 after the first delta",
    "fault-drop": "drop the TCP connection after the first delta (no close frame)",
    "fault-error": "answer with an error frame only",
    "fault-failed": "response.failed after response.created",
    "fault-limit": "error websocket_connection_limit_reached",
    "fault-binary": "every event as a binary frame",
    "fault-big": "a 9 MB text delta (over the analysis cap), then completed",
    "fault-hang": "response.created, then nothing (until the client or proxy goes)",
}

SETUP_HEADERS = {"openai-model": "gpt-test", "x-models-etag": "etag-123", "x-reasoning-included": "true",
                 "x-request-id": "req_upgrade_1"}


@dataclass
class Turn:
    read_at: float  # when the upstream read the request frame
    frame: dict[str, Any]
    sent: list[tuple[float, str]] = field(default_factory=list)  # (when, event type)
    data: list[str | bytes] = field(default_factory=list)  # each frame as sent (up to 64 KiB each)

    def first(self, typ: str) -> float | None:
        return next((t for t, k in self.sent if k == typ), None)


class WsUpstream:
    """``with WsUpstream() as up:`` serves on ``up.url`` (http://127.0.0.1:PORT) in its own thread."""

    def __init__(self, ttft_ms: float = 300.0, deltas: int = 5, itl_ms: float = 10.0, compression: str | None = "deflate",
                 refuse: int | None = None, model_header: str = "gpt-test") -> None:
        self.ttft_ms, self.deltas, self.itl_ms = ttft_ms, deltas, itl_ms
        self.compression = compression
        self.refuse = refuse  # answer every upgrade with this status instead of 101
        self.model_header = model_header  # the upgrade's openai-model (Codex shows a different one as rerouted)
        self.turns: list[Turn] = []
        self.upgrades: list[dict[str, str]] = []  # the request headers of each upgrade
        self.client_frames: list[tuple[float, str, Any]] = []  # (when, type or 'binary', parsed) of every client frame
        self.closed: list[tuple[int | None, str | None]] = []  # close code and reason the upstream saw
        self.responses = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ready = threading.Event()
        self._stop: asyncio.Future | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)

    # -- life -------------------------------------------------------------------------------
    def __enter__(self) -> WsUpstream:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("the WebSocket upstream did not start")
        return self

    def __exit__(self, *exc) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set_result, None)
        self._thread.join(10)

    def _run(self) -> None:
        asyncio.run(self._main())

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = self._loop.create_future()
        async with serve(self._handler, "127.0.0.1", 0, compression=self.compression, max_size=None,
                         process_request=self._process_request, process_response=self._process_response,
                         ping_interval=None) as server:
            self.port = server.sockets[0].getsockname()[1]
            self.url = f"http://127.0.0.1:{self.port}"
            self._ready.set()
            await self._stop

    def _process_request(self, connection, request):
        self.upgrades.append({k.lower(): v for k, v in request.headers.raw_items()})
        if self.refuse is not None:
            body = json.dumps({"error": {"message": "WebSockets are not served here", "type": "invalid_request_error"}}).encode()
            return Response(self.refuse, "Refused", Headers({"content-type": "application/json",
                                                              "content-length": str(len(body))}), body)
        if not request.path.split("?")[0].endswith(("/responses", "/realtime")):
            return connection.respond(404, "not here\n")
        return None

    def _process_response(self, connection, request, response):
        for k, v in SETUP_HEADERS.items():
            response.headers[k] = self.model_header if k == "openai-model" else v
        return response

    # -- turns ------------------------------------------------------------------------------
    async def _handler(self, ws) -> None:
        if ws.request.path.split("?")[0].endswith("/realtime"):
            return await self._realtime(ws)
        try:
            async for msg in ws:
                now = time.perf_counter()
                if isinstance(msg, bytes):
                    self.client_frames.append((now, "binary", msg))
                    continue
                frame = json.loads(msg)
                self.client_frames.append((now, frame.get("type"), frame))
                if frame.get("type") != "response.create":
                    continue
                turn = Turn(now, frame)
                if self.turns is not None:
                    self.turns.append(turn)
                await self._answer(ws, turn)
        except Exception:  # the client or the proxy went away: recorded by the close below
            pass
        finally:
            self.closed.append((ws.close_code, ws.close_reason))

    async def _send(self, ws, turn: Turn, event: dict[str, Any], binary: bool = False) -> None:
        data = json.dumps(event)
        if len(data) <= 65536:  # logged before it leaves: a client may read it before send() returns here
            turn.data.append(data.encode() if binary else data)
        # timed before it leaves too: send() returns when this thread runs again, which on a loaded
        # machine was after the proxy had the frame (a TTFT "seen here" longer than the proxy's)
        turn.sent.append((time.perf_counter(), event["type"]))
        await ws.send(data.encode() if binary else data)

    async def _answer(self, ws, turn: Turn) -> None:
        model = turn.frame.get("model") or "gpt-test"
        self.responses += 1
        rid = f"resp_{self.responses}"
        binary = model == "fault-binary"
        resp = {"id": rid, "object": "response", "model": model, "status": "in_progress", "output": []}
        if model in ("fault-error", "fault-limit"):
            code = "websocket_connection_limit_reached" if model == "fault-limit" else "invalid_request"
            await self._send(ws, turn, {"type": "error", "error": {"type": "invalid_request_error", "code": code,
                                                                   "message": f"{code}: test"}, "status": 400})
            return
        await self._send(ws, turn, {"type": "response.created", "response": resp, "sequence_number": 0}, binary)
        if model == "fault-failed":
            await self._send(ws, turn, {"type": "response.failed", "response": dict(
                resp, status="failed", error={"code": "server_error", "message": "the model failed"})})
            return
        if model == "fault-hang":
            return
        if turn.frame.get("generate") is False:  # Codex's prewarm: the request is set up, nothing generated
            await self._send(ws, turn, {"type": "response.completed", "response": dict(
                resp, status="completed", output=[], usage={"input_tokens": 40, "output_tokens": 0, "total_tokens": 40})})
            return
        await self._send(ws, turn, {"type": "response.in_progress", "response": resp}, binary)
        await self._send(ws, turn, {"type": "response.reasoning_summary_text.delta", "delta": "thinking",
                                    "item_id": "rs_1", "output_index": 0}, binary)
        await asyncio.sleep(max(0.0, turn.read_at + self.ttft_ms / 1000.0 - time.perf_counter()))
        n = self.deltas
        await self._send(ws, turn, {"type": "response.output_item.added", "output_index": 1, "item": {
            "type": "message", "id": "msg_1", "role": "assistant", "status": "in_progress", "content": []}}, binary)
        await self._send(ws, turn, {"type": "response.content_part.added", "item_id": "msg_1", "output_index": 1,
                                    "content_index": 0, "part": {"type": "output_text", "text": ""}}, binary)
        for i in range(n):
            text = "x" * (9 * 2**20) if model == "fault-big" and i == 0 else f"tok{i} "
            await self._send(ws, turn, {"type": "response.output_text.delta", "delta": text, "item_id": "msg_1",
                                        "output_index": 1, "content_index": 0}, binary)
            if i == 0 and model.startswith("fault-close-"):
                await ws.close(int(model.rsplit("-", 1)[1]), "test close")
                return
            if i == 0 and model == "fault-drop":
                ws.transport.abort()
                return
            await asyncio.sleep(self.itl_ms / 1000.0)
        text = "".join(f"tok{i} " for i in range(n))
        item = {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
                "content": [{"type": "output_text", "text": text, "annotations": []}]}
        await self._send(ws, turn, {"type": "response.output_item.done", "output_index": 1, "item": item}, binary)
        usage = {"input_tokens": 42, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": n + 3,
                 "output_tokens_details": {"reasoning_tokens": 3}, "total_tokens": 42 + n + 3}
        await self._send(ws, turn, {"type": "response.completed", "response": dict(
            resp, status="completed", usage=usage, output=[item])}, binary)

    # -- the Realtime API (/v1/realtime): response.create to response.done ---------------------
    async def _realtime(self, ws) -> None:
        model = ws.request.path.split("model=", 1)[1].split("&")[0] if "model=" in ws.request.path else "gpt-realtime"
        await ws.send(json.dumps({"type": "session.created", "event_id": "ev_0", "session": {
            "type": "realtime", "id": "sess_1", "object": "realtime.session", "model": model}}))
        try:
            async for msg in ws:
                now = time.perf_counter()
                frame = json.loads(msg)
                self.client_frames.append((now, frame.get("type"), frame))
                if frame.get("type") != "response.create":
                    continue
                turn = Turn(now, frame)
                self.turns.append(turn)
                self.responses += 1
                resp = {"id": f"resp_rt_{self.responses}", "object": "realtime.response", "status": "in_progress",
                        "output": []}
                await self._send(ws, turn, {"type": "response.created", "event_id": "ev_1", "response": resp})
                await asyncio.sleep(max(0.0, turn.read_at + self.ttft_ms / 1000.0 - time.perf_counter()))
                audio = "audio" in ((frame.get("response") or {}).get("output_modalities") or [])
                for i in range(self.deltas):
                    if audio:
                        await self._send(ws, turn, {"type": "response.output_audio.delta", "event_id": f"ev_a{i}",
                                                    "response_id": resp["id"], "item_id": "item_1", "output_index": 0,
                                                    "content_index": 0, "delta": "AAAAAAAA"})
                    await self._send(ws, turn, {
                        "type": "response.output_audio_transcript.delta" if audio else "response.output_text.delta",
                        "event_id": f"ev_t{i}", "response_id": resp["id"], "item_id": "item_1", "output_index": 0,
                        "content_index": 0, "delta": f"tok{i} "})
                    await asyncio.sleep(self.itl_ms / 1000.0)
                await self._send(ws, turn, {"type": "response.done", "event_id": "ev_9", "response": dict(
                    resp, status="completed", usage={"total_tokens": 60, "input_tokens": 50, "output_tokens": 10,
                                                     "input_token_details": {"cached_tokens": 32}})})
        except Exception:
            pass
        finally:
            self.closed.append((ws.close_code, ws.close_reason))
