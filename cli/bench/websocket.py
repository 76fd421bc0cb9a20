"""`firsttoken bench --websocket --concurrency 10,50`: Responses turns over WebSocket connections,
as Codex sends them, directly, through bare mitmproxy and through firsttoken.

This process is only the client (asyncio and wsproto); the simulated upstream and the proxies run
in their own processes. How it measures and what it reports: docs/performance.md.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import socket
import sqlite3
import struct
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from rich.console import Console
from wsproto import ConnectionType, WSConnection
from wsproto.events import AcceptConnection, CloseConnection, Message, Ping, RejectConnection, Request, TextMessage

from firsttoken.cli.bench.load import PATHS, TAG_HEADER, cpu_seconds, level_table, pct, rss_mb, three_paths, together

FIRST_DELTA = "response.output_text.delta"
TERMINAL = ("response.completed", "response.failed", "response.incomplete", "error")


#: Linux's SO_TIMESTAMPNS (SCM_TIMESTAMPNS): each read carries the kernel's receive time, so a turn's
#: TTFT is when its first delta reached the client's socket, not when this busy client got to it
_SO_TIMESTAMPNS = 35 if sys.platform == "linux" else None


def _wake(fut: asyncio.Future) -> None:
    if not fut.done():
        fut.set_result(None)


class _Client:
    """One WebSocket connection to ``/v1/responses``: wsproto over a non-blocking socket read through
    the loop, every read stamped with the kernel's receive time (wall clock, as ``time.time()``)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        sock.setblocking(False)
        self.stamped = False
        if _SO_TIMESTAMPNS is not None:
            try:
                sock.setsockopt(socket.SOL_SOCKET, _SO_TIMESTAMPNS, 1)
                self.stamped = True
            except OSError:
                pass
        self.ws = WSConnection(ConnectionType.CLIENT)
        self.frames_in = 0
        self._pending: list[tuple[Any, float]] = []
        self._text = ""

    async def _send(self, data: bytes) -> None:
        await asyncio.get_running_loop().sock_sendall(self.sock, data)

    async def _read(self) -> tuple[bytes, float]:
        loop = asyncio.get_running_loop()
        while True:
            try:
                data, anc, _, _ = self.sock.recvmsg(65536, socket.CMSG_SPACE(16))
            except BlockingIOError:
                ready = loop.create_future()
                loop.add_reader(self.sock.fileno(), _wake, ready)
                try:
                    await ready
                finally:
                    loop.remove_reader(self.sock.fileno())
                continue
            at = time.time()
            for level, typ, raw in anc:
                if level == socket.SOL_SOCKET and typ == _SO_TIMESTAMPNS and len(raw) >= 16:
                    sec, nsec = struct.unpack_from("qq", raw)
                    at = sec + nsec / 1e9
            return data, at

    async def open(self, port: int, tag: str) -> None:
        await self._send(self.ws.send(Request(host=f"127.0.0.1:{port}", target="/v1/responses", extra_headers=[
            (b"authorization", b"Bearer sk-bench-ws-0000000000000000000000"), (TAG_HEADER.encode(), tag.encode()),
            (b"openai-beta", b"responses_websockets=2026-02-06")])))
        while True:
            ev, _ = await self._next()
            if isinstance(ev, AcceptConnection):
                return
            if isinstance(ev, RejectConnection):
                raise RuntimeError(f"the upgrade was refused with {ev.status_code}")

    async def _next(self) -> tuple[Any, float]:
        while not self._pending:
            data, at = await self._read()
            if not data:
                raise ConnectionError("the connection closed")
            self.ws.receive_data(data)
            self._pending.extend((ev, at) for ev in self.ws.events())
        return self._pending.pop(0)

    async def text(self) -> tuple[str, float]:
        """The next whole text message and when its last bytes reached the socket (pings answered)."""
        while True:
            ev, at = await self._next()
            if isinstance(ev, Ping):
                await self._send(self.ws.send(ev.response()))
            elif isinstance(ev, CloseConnection):
                raise ConnectionError(f"closed by the other side: {ev.code} {ev.reason}")
            elif isinstance(ev, Message):
                self._text += ev.data if isinstance(ev, TextMessage) else bytes(ev.data).decode()
                if ev.message_finished:
                    self.frames_in += 1
                    text, self._text = self._text, ""
                    return text, at

    async def send(self, text: str) -> float:
        """Send a text message; returns when it went to the socket (wall clock)."""
        data = self.ws.send(TextMessage(data=text))
        at = time.time()
        await self._send(data)
        return at

    def close(self) -> None:
        try:
            self.sock.send(self.ws.send(CloseConnection(code=1000)))
        except Exception:  # noqa: BLE001 - closing a connection that already broke
            pass
        self.sock.close()


async def ws_session(port: int, tag: str, turns: int, go: asyncio.Event) -> dict[str, Any]:
    """One connection: ``turns`` turns in a row; per turn the client's TTFT (first text delta after
    it sent the frame) and the gaps between the frames after it."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setblocking(False)
    await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port))
    c = _Client(sock)
    try:
        await c.open(port, tag)
        await go.wait()
        out = []
        for i in range(turns):
            frame = {"type": "response.create", "model": "gpt-4o-mini", "stream": True,
                     "input": [{"role": "user", "content": [{"type": "input_text", "text": f"Say hi ({i})."}]}]}
            t0 = await c.send(json.dumps(frame))
            ttft, last, gaps = None, None, []
            while True:
                text, now = await c.text()
                typ = json.loads(text).get("type")
                if ttft is None and typ == FIRST_DELTA:
                    ttft = now
                elif ttft is not None:
                    gaps.append((now - last) * 1000.0)
                if ttft is not None:
                    last = now
                if typ in TERMINAL:
                    break
            if ttft is None:
                raise RuntimeError(f"turn {i + 1} ended ({typ}) without a text delta")
            out.append({"tag": tag, "turn": i + 1, "ttft": (ttft - t0) * 1000.0, "gaps": gaps})
        return {"turns": out, "frames_in": c.frames_in, "frames_out": turns, "kernel_stamped": c.stamped}
    finally:
        c.close()


async def burst(port: int, n: int, turns: int, tags: list[str]) -> list[dict[str, Any]]:
    """N connections upgraded at once, then their turns (every upgrade in before the first turn)."""
    clients = [functools.partial(ws_session, port, tags[i], turns) for i in range(n)]
    return await together(clients, 0.2 + n * 0.01, f"WebSocket sessions to port {port}")


def recorded_turns(db: Path, tags: set[str], expected: int, timeout: float = 30.0) -> dict[tuple[str, int], dict]:
    """firsttoken's finished WebSocket turns for these tags, by (tag, turn), once all are written."""
    deadline = time.monotonic() + timeout
    rows: dict[tuple[str, int], dict] = {}
    while time.monotonic() < deadline:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)
        con.row_factory = sqlite3.Row
        try:
            q = ("SELECT experiment, ws_turn, started_at, ttft_ms, proxy_lag_ms AS lag, proxy_delay_ms AS delay, findings "
                 "FROM requests WHERE state = 'done' AND transport = 'websocket' AND experiment IN (%s)"
                 % ",".join("?" * len(tags)))
            rows = {(r["experiment"], r["ws_turn"]): dict(r) for r in con.execute(q, sorted(tags))}
        except sqlite3.OperationalError:
            rows = {}
        finally:
            con.close()
        if len(rows) >= expected:
            break
        time.sleep(0.2)
    return rows


def run(levels: list[int], turns: int = 5, output_tokens: int = 50, tpot_ms: float = 20.0, prefill_ms: float = 20.0,
        bursts: int = 2, progress: Any = None) -> dict[str, Any]:
    say = progress or (lambda msg: None)
    out: dict[str, Any] = {"config": {"levels": levels, "turns": turns, "bursts": bursts, "output_tokens": output_tokens,
                                      "tpot_ms": tpot_ms, "prefill_ms": prefill_ms, "cores": os.cpu_count(),
                                      "python": sys.version.split()[0]}, "levels": []}
    with three_paths(output_tokens, tpot_ms, prefill_ms) as (ports, pids, db):
        loop = asyncio.new_event_loop()
        try:
            for port in ports.values():  # warm up: imports, tokenizers
                loop.run_until_complete(burst(port, 2, 2, [f"warm-{uuid.uuid4().hex}" for _ in range(2)]))
            for n in levels:
                sessions: dict[str, list[dict[str, Any]]] = {p: [] for p in PATHS}
                cpu = {p: 0.0 for p in pids}
                recorded: dict[tuple[str, int], dict] = {}
                for b in range(bursts):
                    for path in (PATHS if b % 2 == 0 else PATHS[::-1]):
                        tags = [f"ws-{n}-{uuid.uuid4().hex[:12]}" for _ in range(n)]
                        c0 = cpu_seconds(pids[path]) if path in pids else None
                        sessions[path] += loop.run_until_complete(burst(ports[path], n, turns, tags))
                        if path == "firsttoken":  # its analysis and writes count too: wait for them
                            recorded.update(recorded_turns(db, set(tags), n * turns))
                        if c0 is not None:
                            time.sleep(0.1)
                            cpu[path] += (cpu_seconds(pids[path]) or 0.0) - c0
                out["levels"].append(_summarise(n, sessions, cpu, recorded,
                                                {p: rss_mb(pid) for p, pid in pids.items()}))
                say(f"{n} connections × {turns} turns: done ({bursts} bursts per path)")
        finally:
            loop.close()
    return out


def _summarise(n: int, sessions: dict[str, list[dict[str, Any]]], cpu: dict[str, float],
               recorded: dict[tuple[str, int], dict], rss: dict[str, float | None]) -> dict[str, Any]:
    paths: dict[str, Any] = {}
    for path, ss in sessions.items():
        turns = [t for s in ss for t in s["turns"]]
        frames = sum(s["frames_in"] + s["frames_out"] for s in ss)
        st: dict[str, Any] = {"connections": len(ss), "turns": len(turns), "frames": frames,
                              "ttft_p50": pct([t["ttft"] for t in turns], 50), "ttft_p99": pct([t["ttft"] for t in turns], 99),
                              "gap_p99": pct([g for t in turns for g in t["gaps"]], 99)}
        if path in cpu:
            st["cpu_s"] = cpu[path]
            st["cpu_us_per_frame"] = cpu[path] / frames * 1e6 if frames else None
            st["rss_mb"] = rss.get(path)
        paths[path] = st
    err, rel, rel_plain, lags = [], [], [], []
    for s in sessions["firsttoken"]:
        for t in s["turns"]:
            r = recorded.get((t["tag"], t["turn"]))
            if r is None or r["ttft_ms"] is None:
                continue
            lag = r["lag"] or 0.0
            err.append(r["ttft_ms"] + lag - t["ttft"])
            rel.append(abs(r["ttft_ms"] + lag - t["ttft"]) / t["ttft"] * 100.0)
            rel_plain.append(abs(r["ttft_ms"] - t["ttft"]) / t["ttft"] * 100.0)
            lags.append(lag)
    paths["firsttoken"].update({
        "recorded": len(err), "ttft_error_p50": pct(err, 50), "ttft_error_abs_p99": pct([abs(e) for e in err], 99),
        "ttft_error_rel_p50": pct(rel, 50), "ttft_error_rel_p99": pct(rel, 99), "ttft_error_without_lag_rel_p50": pct(rel_plain, 50),
        "proxy_lag_p50": pct(lags, 50),
    })
    bare, fts = paths["bare mitmproxy"], paths["firsttoken"]
    ratio = (fts["cpu_us_per_frame"] / bare["cpu_us_per_frame"]
             if fts.get("cpu_us_per_frame") and bare.get("cpu_us_per_frame") else None)
    return {"connections": n, "paths": paths, "cpu_ratio_vs_bare": ratio}


def _ms(v: float | None) -> str:
    return "—" if v is None else f"{v:.1f}"


def report(res: dict[str, Any], out: Console) -> None:
    c = res["config"]
    out.print(level_table(
        res["levels"], f"Responses over WebSocket: loopback, {c['cores']} cores, Python {c['python']}; N connections × "
                       f"{c['turns']} turns each, simulated upstream: first token +{c['prefill_ms']:g} ms, "
                       f"{c['output_tokens']} tokens × {c['tpot_ms']:g} ms. Times in ms",
        "bare = mitmproxy relaying the frames, nothing else; CPU µs = the proxy process's CPU per frame (both "
        "directions); rec. err = firsttoken's recorded turn TTFT + proxy_lag_ms minus the client's (p50 / |p99|)",
        "connections", "cpu_us_per_frame"))
    for lv in res["levels"]:
        ft = lv["paths"]["firsttoken"]
        ratio = f"{lv['cpu_ratio_vs_bare']:.2f}×" if lv["cpu_ratio_vs_bare"] is not None else "—"
        out.print(f"{lv['connections']} connections: CPU per frame {ratio} bare mitmproxy's; {ft.get('recorded', 0)} of "
                  f"{ft['turns']} turns recorded; recorded TTFT vs the client's: {_ms(ft.get('ttft_error_rel_p50'))}% "
                  f"median, {_ms(ft.get('ttft_error_rel_p99'))}% p99 ({_ms(ft.get('ttft_error_without_lag_rel_p50'))}% "
                  f"median without the proxy's measured wait before reading the frame)")
