"""Responses over WebSocket through the real proxy: a real client (websockets), a real upstream
(tests/ws_upstream.py) on loopback; each response.create frame is one record (issue 29)."""

from __future__ import annotations

import gc
import json
import time

import pytest
from mitmproxy.websocket import WebSocketData
from websockets.sync.client import connect

from firsttoken.cli.proxy.server import ProxyServer
from tests.conftest import FAST, rows
from tests.ws_upstream import SETUP_HEADERS, WsUpstream

KEY = "sk-test-websocket-000000000000000000001"
BETA = "responses_websockets=2026-02-06"


def ws_url(proxy: ProxyServer) -> str:
    return proxy.url.replace("http://", "ws://") + "/v1/responses"


def create(model: str = "gpt-test", text: str = "say hi", **extra) -> str:
    return json.dumps({"type": "response.create", "model": model, "instructions": "You are terse.",
                       "input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}],
                       "tools": [], "store": False, "stream": True, **extra})


def client(proxy: ProxyServer, **kw):
    return connect(ws_url(proxy), additional_headers={"Authorization": f"Bearer {KEY}", "OpenAI-Beta": BETA},
                   proxy=None, max_size=None, open_timeout=10, **kw)


def turn(ws, frame: str) -> dict:
    """Send one turn; read to its terminal event. What the client saw, with its own clock."""
    sent = time.perf_counter()
    ws.send(frame)
    first_delta = None
    events, raw = [], []
    while True:
        msg = ws.recv(timeout=20)
        now = time.perf_counter()
        raw.append(msg)
        ev = json.loads(msg)
        events.append(ev["type"])
        if ev["type"] == "response.output_text.delta" and first_delta is None:
            first_delta = now
        if ev["type"] in ("response.completed", "response.failed", "response.incomplete", "error"):
            return {"sent": sent, "first_delta": first_delta, "end": now, "events": events, "last": ev, "raw": raw}


@pytest.fixture
def ws_up():
    with WsUpstream(ttft_ms=300, deltas=5, itl_ms=10) as up:
        yield up


@pytest.fixture
def ws_proxy(ws_up, db_path):
    p = ProxyServer([ws_up.url], str(db_path), port=0)
    p.start()
    yield p
    p.stop()


def test_each_response_create_is_one_record_with_ttft_in_band(ws_up, ws_proxy, db_path):
    seen = []
    with client(ws_proxy) as ws:
        for i in range(2):
            seen.append(turn(ws, create(text=f"turn {i}", previous_response_id=f"resp_{i}" if i else None)))
    ws_proxy.flush()
    rs = rows(db_path)
    assert len(rs) == 2, [(r["method"], r["path"], r["status"]) for r in rs]  # no row for the upgrade
    for i, (r, c, up) in enumerate(zip(rs, seen, ws_up.turns)):
        assert r["transport"] == "websocket" and r["method"] == "WS" and r["api"] == "openai.responses"
        assert r["model"] == "gpt-test" and r["stream"] == 1 and r["status"] == 200
        assert r["ws_turn"] == i + 1 and r["ws_connection_id"] == rs[0]["ws_connection_id"]
        assert r["usage_prompt_tokens"] == 42 and r["usage_completion_tokens"] == 8 and r["usage_reasoning_tokens"] == 3
        assert r["stream_done"] == 1 and r["error"] is None and r["prompt_tokens_est"] and r["prompt_tokens_est"] > 5
        assert r["output_chars"] == len("".join(f"tok{k} " for k in range(5)))
        # the clock: upstream-seen <= recorded <= client-seen (2 ms for rounding and the hook's stamp)
        up_ttft = (up.first("response.output_text.delta") - up.read_at) * 1000
        client_ttft = (c["first_delta"] - c["sent"]) * 1000
        assert up_ttft - 2 <= r["ttft_ms"] <= client_ttft + 2, (up_ttft, r["ttft_ms"], client_ttft)
        assert r["ttft_ms"] >= 290
        # TTFB: the server's first answer (response.created), well before the first delta
        assert r["ttfb_ms"] is not None and r["ttfb_ms"] < r["ttft_ms"] - 200
        # reasoning came first: a first token, not TTFT
        assert r["first_token_ms"] < r["ttft_ms"] and r["reasoning_chars"] == len("thinking")
        conn = json.loads(r["ws_connection"])
        assert conn["status"] == 101 and conn["upgrade_ms"] is not None and conn["compressed"] is True
        assert conn["beta"] == BETA
        for k, v in SETUP_HEADERS.items():
            assert conn["headers"][k] == v
        assert r["key_fingerprint"] and KEY not in json.dumps(r)
        assert not [f for f in json.loads(r["findings"] or "[]") if f["severity"] == "error"]
    # a chained turn (previous_response_id, only the new input) continues the conversation, no edited history
    assert rs[1]["conversation_id"] == rs[0]["conversation_id"]
    codes = {f["code"] for f in json.loads(rs[1]["findings"] or "[]")}
    assert "cache.miss" not in codes and "cache.prefix_changed" not in codes, codes


def test_a_large_request_frame_with_its_type_in_the_middle(ws_up, ws_proxy, db_path):
    """The type is looked for at either end; a large frame that has it elsewhere is still a turn."""
    ws_up.ttft_ms = 50
    body = json.loads(create(text="x " * 40_000))
    frame = json.dumps({"model": body.pop("model"), "input": body.pop("input"), "type": "response.create",
                        "instructions": "y " * 100, **body})
    with client(ws_proxy) as ws:
        assert turn(ws, frame)["last"]["type"] == "response.completed"
    r = one_turn_row(ws_proxy, db_path)
    assert r["ws_turn"] == 1 and r["request_bytes"] == len(frame) and r["prompt_tokens_est"] > 40_000


def test_frames_forwarded_untouched_and_memory_flat(ws_up, ws_proxy, db_path):
    """Many turns on one connection: every frame arrives as sent, and the proxy keeps no message list."""
    ws_up.ttft_ms, ws_up.itl_ms, ws_up.deltas = 0, 0, 2
    n = 200
    with client(ws_proxy) as ws:
        for i in range(n):
            c = turn(ws, create(text=f"turn {i}"))
            assert c["events"] == ["response.created", "response.in_progress", "response.reasoning_summary_text.delta",
                                   "response.output_item.added", "response.content_part.added",
                                   "response.output_text.delta", "response.output_text.delta",
                                   "response.output_item.done", "response.completed"]
            assert c["raw"] == ws_up.turns[i].data  # byte for byte, as the upstream sent them
        live = [o for o in gc.get_objects() if type(o) is WebSocketData]
        # bounded whatever the turns (200 × 10 frames here): at most the message each side has in flight
        # between mitmproxy's append (its thread) and the hook's trim, when this snapshot is taken
        assert live and all(len(d.messages) <= 2 for d in live), [len(d.messages) for d in live]
    ws_proxy.flush()
    rs = rows(db_path)
    assert len(rs) == n and sorted(r["ws_turn"] for r in rs) == list(range(1, n + 1))
    assert all(r["stream_done"] == 1 for r in rs)


# -- faults (issue 29 #3): each a finding on the turn it hit, every frame forwarded ----------------

def findings(r: dict) -> dict[str, dict]:
    return {f["code"]: f for f in json.loads(r["findings"] or "[]")}


def one_turn_row(proxy: ProxyServer, db_path) -> dict:
    proxy.flush()
    rs = rows(db_path)
    assert len(rs) == 1, [(r["method"], r["status"], r["error"]) for r in rs]
    return rs[0]


def until_closed(ws) -> list[str]:
    """What the client received until the connection closed."""
    from websockets.exceptions import ConnectionClosed

    got = []
    try:
        while True:
            got.append(json.loads(ws.recv(timeout=20))["type"])
    except ConnectionClosed:
        return got


@pytest.mark.parametrize("code,variant", [(1011, "server_error"), (1001, "going_away"), (4001, "application"),
                                          (1000, "normal")])
def test_server_close_mid_turn(ws_proxy, db_path, code, variant):
    with client(ws_proxy) as ws:
        ws.send(create(model=f"fault-close-{code}"))
        got = until_closed(ws)
        assert got[-1] == "response.output_text.delta"  # everything before the close arrived
        assert ws.close_code == code and ws.close_reason == "test close"
    r = one_turn_row(ws_proxy, db_path)
    assert r["ws_close_code"] == code and r["ws_closed_by"] == "server" and r["ws_close_reason"] == "test close"
    assert r["error"].startswith("the WebSocket closed mid-turn") and r["ttft_ms"] >= 290 and not r["client_aborted"]
    f = findings(r)["ws.closed"]
    assert f["severity"] == "error" and f["params"]["variant"] == variant and str(code) in f["message"]


def test_dropped_connection_is_1006(ws_proxy, db_path):
    with client(ws_proxy) as ws:
        ws.send(create(model="fault-drop"))
        until_closed(ws)
    r = one_turn_row(ws_proxy, db_path)
    assert r["ws_close_code"] == 1006 and r["ws_closed_by"] == "server"
    assert findings(r)["ws.closed"]["params"]["variant"] == "abnormal"


@pytest.mark.parametrize("model,code,text", [
    ("fault-error", "stream.error_event", "invalid_request"),
    ("fault-failed", "stream.error_event", "the model failed"),
    ("fault-limit", "ws.connection_limit", "websocket_connection_limit_reached"),
])
def test_error_frames(ws_proxy, db_path, model, code, text):
    with client(ws_proxy) as ws:
        c = turn(ws, create(model=model))
        assert c["last"]["type"] in ("error", "response.failed")
        c2 = turn(ws, create(model="gpt-test"))  # the connection goes on: the next turn is its own
        assert c2["last"]["type"] == "response.completed"
    ws_proxy.flush()
    bad, good = rows(db_path)
    assert bad["ws_turn"] == 1 and good["ws_turn"] == 2 and good["error"] is None and good["stream_done"] == 1
    assert text in (bad["upstream_error"] or "") or text in (bad["upstream_error_type"] or "")
    assert code in findings(bad), findings(bad)
    if model == "fault-limit":
        assert "stream.error_event" in findings(bad)
    assert "ws.closed" not in findings(bad)


def test_binary_and_uncompressed_frames(db_path):
    with WsUpstream(ttft_ms=100, compression=None) as up, ProxyServer([up.url], str(db_path), port=0) as p:
        with connect(ws_url(p), proxy=None, compression=None) as ws:
            ws.send(create(model="fault-binary"))
            got = []
            while True:
                m = ws.recv(timeout=20)
                assert isinstance(m, bytes)  # forwarded as binary, as sent
                got.append(json.loads(m)["type"])
                if got[-1] == "response.completed":
                    break
        r = one_turn_row(p, db_path)
    assert r["ws_binary_frames"] == len(got) and r["ttft_ms"] >= 90 and r["usage_completion_tokens"] == 8
    assert json.loads(r["ws_connection"])["compressed"] is False
    assert findings(r)["ws.binary_frames"]["severity"] == "info"


def test_frame_over_the_analysis_cap(ws_proxy, db_path):
    with client(ws_proxy) as ws:
        ws.send(create(model="fault-big"))
        sizes = []
        while True:
            m = ws.recv(timeout=30)
            sizes.append(len(m))
            if json.loads(m)["type"] == "response.completed":
                break
    assert max(sizes) > 9 * 2**20  # forwarded whole
    r = one_turn_row(ws_proxy, db_path)
    assert r["oversize_events"] == 1 and r["stream_done"] == 1 and r["usage_prompt_tokens"] == 42
    assert "response.event_too_large" in findings(r)


def test_ping_mid_turn(ws_proxy, db_path):
    with client(ws_proxy) as ws:
        ws.send(create())
        assert ws.ping().wait(10)  # mitmproxy relays the ping; the upstream's pong comes back
        while json.loads(ws.recv(timeout=20))["type"] != "response.completed":
            pass
    r = one_turn_row(ws_proxy, db_path)
    assert r["stream_done"] == 1 and r["error"] is None and r["ttft_ms"] >= 290


def test_client_hangs_up_mid_turn(ws_proxy, db_path):
    with client(ws_proxy) as ws:
        ws.send(create(model="fault-hang"))
        assert json.loads(ws.recv(timeout=20))["type"] == "response.created"
        ws.close(1001, "user left")
    r = one_turn_row(ws_proxy, db_path)
    assert r["client_aborted"] == 1 and r["ws_closed_by"] == "client" and r["ws_close_code"] == 1001
    fs = findings(r)
    assert fs["ws.closed"]["params"]["variant"] == "client" and fs["ws.closed"]["severity"] == "warn"
    assert "client.aborted" in fs


def test_proxy_stops_mid_turn(ws_up, db_path):
    p = ProxyServer([ws_up.url], str(db_path), port=0, drain_seconds=0.2)
    p.start()
    with client(p) as ws:
        ws.send(create(model="fault-hang"))
        assert json.loads(ws.recv(timeout=20))["type"] == "response.created"
        live = p.capture.snapshot()["in_flight"]  # what the live view shows: the turn, waiting for its first token
        assert [(f["api"], f["phase"], f["model"]) for f in live] == [("openai.responses", "prefill", "fault-hang")]
        p.stop()
    rs = rows(db_path)
    assert len(rs) == 1
    r = rs[0]
    assert r["state"] == "done" and r["ws_turn"] == 1 and r["ttfb_ms"] is not None
    assert r["ws_closed_by"] == "proxy" and "proxy.shutdown" in findings(r), findings(r)


# -- a refused upgrade (issue 29 #2): a finding with its cost and fix, not path.not_found ------------

def refused_upgrades(proxy: ProxyServer, n: int) -> list[int]:
    from websockets.exceptions import InvalidStatus

    statuses = []
    for _ in range(n):
        with pytest.raises(InvalidStatus) as e:
            client(proxy).close()
        statuses.append(e.value.response.status_code)
    return statuses


@pytest.mark.parametrize("status", [405, 426])
def test_refused_upgrade_is_a_finding_not_a_bad_base_url(db_path, status):
    with WsUpstream(refuse=status) as up, ProxyServer([up.url], str(db_path), port=0) as p:
        assert refused_upgrades(p, 3) == [status] * 3
        p.flush()
        rs = rows(db_path)
    assert len(rs) == 3 and all(r["transport"] == "websocket" and r["ws_turn"] is None for r in rs)
    assert [findings(r)["ws.upgrade_refused"]["params"]["tries"] for r in rs] == [1, 2, 3]
    fs = findings(rs[-1])
    assert "path.not_found" not in fs and fs["ws.upgrade_refused"]["severity"] == "error"
    assert "supports_websockets = false" in fs["ws.upgrade_refused"]["hint"]


def test_refused_upgrades_then_http_fallback(db_path):
    """Codex's pattern against a route that answers the upgrade 404 and serves HTTP + SSE: it
    tries the WebSocket, then falls back; the HTTP request adds the tries up and names the fix."""
    import httpx

    from firsttoken.cli.simulate import SimConfig, SimServer

    with SimServer(SimConfig(**FAST, websocket=False)) as sim, ProxyServer([sim.url], str(db_path), port=0) as p:
        # the upgrade as a WebSocket client sends it (the simulator answers and keeps the connection,
        # which the websockets client would wait out for seconds)
        ws_headers = {"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13",
                      "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==", "Authorization": f"Bearer {KEY}",
                      "OpenAI-Beta": BETA}
        with httpx.Client(timeout=10) as h:
            assert [h.get(f"{p.url}/v1/responses", headers=ws_headers).status_code for _ in range(4)] == [404] * 4
            # then the same request over HTTP + SSE (httpx: the openai SDK's first call costs seconds of imports)
            with h.stream("POST", f"{p.url}/v1/responses", headers={"Authorization": f"Bearer {KEY}"},
                          json={"model": "sim-1", "input": "hi", "stream": True}) as r:
                assert r.status_code == 200 and b"response.completed" in b"".join(r.iter_bytes())
        p.flush()
        rs = rows(db_path)
    refused, http = rs[:4], rs[4]
    assert all("path.not_found" not in findings(r) and "ws.upgrade_refused" in findings(r) for r in refused)
    assert http["transport"] == "http" and http["status"] == 200
    f = findings(http)["ws.fallback"]
    assert f["params"]["tries"] == 4 and f["params"]["refused_status"] == 404 and f["severity"] == "warn"
    assert "supports_websockets = false" in f["hint"]


@pytest.mark.slow
@pytest.mark.timeout(600)  # 2,000 turns under tracemalloc: about two minutes
def test_memory_flat_over_1000_turns_on_one_connection(db_path):
    """1,000 turns on one connection must not grow the proxy: mitmproxy would keep every message
    of the connection; firsttoken's own state per turn is let go when the turn ends. Measured as
    the Python memory allocated by the proxy's code (firsttoken, mitmproxy, wsproto) and still held,
    between turn 1,000 (the analysis's windows of recent records are full by then) and turn 2,000."""
    import tracemalloc

    from firsttoken.addon.flight import Flight
    from firsttoken.addon.record import Record

    mine = [tracemalloc.Filter(True, f"*{part}*") for part in ("/addon/", "/mitmproxy/", "/wsproto/")]
    with WsUpstream(ttft_ms=0, deltas=5, itl_ms=0) as up, ProxyServer([up.url], str(db_path), port=0) as p:
        up.turns = None  # the test upstream's own log would grow
        with client(p) as ws:
            tracemalloc.start(1)
            try:
                for i in range(1, 2001):
                    assert turn(ws, create(text=f"turn {i} " + "padding " * 100))["last"]["type"] == "response.completed"
                    if i == 1000:
                        p.flush()
                        gc.collect()
                        before = tracemalloc.take_snapshot().filter_traces(mine)
                p.flush()
                gc.collect()
                after = tracemalloc.take_snapshot().filter_traces(mine)
            finally:
                tracemalloc.stop()
            grown = sum(d.size_diff for d in after.compare_to(before, "filename"))
            # bounded windows still filling make up what grows (load samples, the 2,048 response ids of
            # previous_response_id chains): well under a KiB a turn, where keeping the connection's
            # messages would be ~5 KiB a turn (12 frames each)
            assert grown < 1024 * 1024, "\n".join(map(str, after.compare_to(before, "lineno")[:10]))
            live = [o for o in gc.get_objects() if type(o) is WebSocketData]
            assert live and all(len(d.messages) <= 1 for d in live)
            assert sum(type(o) is Flight for o in gc.get_objects()) <= 2
            assert sum(type(o) is Record for o in gc.get_objects()) <= 510  # the analysis's recent 500
        assert not p.capture.flights and not p.capture.ws_conns
        assert len(rows(db_path)) == 2000


# -- every view counts WebSocket turns as streamed exchanges (issue 29 #5) -------------------------

def test_views_count_websocket_turns(ws_up, db_path, tmp_path):
    from click.testing import CliRunner

    from firsttoken.cli.export import export
    from firsttoken.cli.logs import logs
    from firsttoken.cli.loopback import free_port
    from firsttoken.cli.sessions import sessions
    from firsttoken.cli.show import show
    from firsttoken.cli.stats import stats

    ws_up.ttft_ms = 100
    port = free_port()
    with ProxyServer([ws_up.url], str(db_path), port=0, metrics_port=port) as p:
        with client(p) as ws:
            for i in range(3):
                turn(ws, create(text=f"turn {i}", prompt_cache_key="session-1"))
        p.flush()
        import httpx

        metrics = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
    rs = rows(db_path)
    assert len(rs) == 3
    # Prometheus: three streamed requests of the model, each with a TTFT
    ttft_count = [line for line in metrics.splitlines() if "time_to_first_token" in line and "_count" in line
                  and 'gpt-test' in line]
    assert ttft_count and float(ttft_count[0].split()[-1]) == 3, ttft_count
    run = CliRunner()
    db = ["--db", str(db_path)]
    # stats: the turns are the streamed population (TTFT over all three)
    g = json.loads(run.invoke(stats, [*db, "--json"]).output)["groups"][0]
    assert g["ttft_ms"]["n"] == 3 and g["ttfb_ms"]["n"] == 3
    # logs: the transport and the turn are in the rows; the table lists each turn
    js = [json.loads(line) for line in run.invoke(logs, [*db, "--json"]).output.splitlines() if line.strip()]
    assert {r["transport"] for r in js} == {"websocket"} and sorted(r["ws_turn"] for r in js) == [1, 2, 3]
    table = run.invoke(logs, db, terminal_width=200).output
    assert table.count("gpt-test") == 3
    # show: the turn's waterfall and its connection
    out = run.invoke(show, [*db, rs[1]["id"]], terminal_width=160).output
    assert "WebSocket, turn 2 of connection" in out and "x-models-etag" in out and "TTFB (first event)" in out
    out_zh = run.invoke(show, [*db, rs[1]["id"], "--lang", "zh"], terminal_width=160).output
    assert "第 2 轮" in out_zh
    # export: the new columns
    csv_out = run.invoke(export, [*db, "--csv"]).output
    assert "transport" in csv_out.splitlines()[0] and "websocket" in csv_out
    # sessions: one conversation (the client's prompt_cache_key), three requests
    ss = [json.loads(line) for line in run.invoke(sessions, [*db, "--json", "--all"]).output.splitlines() if line.strip()]
    assert len(ss) == 1 and ss[0]["requests"] == 3, ss


def test_client_drops_the_connection_mid_turn(ws_proxy, db_path):
    """No close frame from the client: the connection just ends (a killed process)."""
    import socket

    with client(ws_proxy) as ws:
        ws.send(create(model="fault-hang"))
        assert json.loads(ws.recv(timeout=20))["type"] == "response.created"
        ws.socket.shutdown(socket.SHUT_RDWR)
        ws.socket.close()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        ws_proxy.flush()
        rs = rows(db_path)
        if rs and rs[0]["state"] == "done":
            break
        time.sleep(0.1)
    r = rs[0]
    assert r["ws_close_code"] == 1006 and r["ws_closed_by"] == "client" and r["client_aborted"] == 1
    assert findings(r)["ws.closed"]["params"]["variant"] == "client"


# -- the Realtime API (issue 29 #4): response.create to the first response.*.delta ------------------

@pytest.mark.parametrize("modality", ["text", "audio"])
def test_realtime_turns_with_the_openai_sdk(db_path, modality):
    import openai

    with WsUpstream(ttft_ms=200, deltas=4) as up, ProxyServer([up.url], str(db_path), port=0) as p:
        oa = openai.OpenAI(base_url=f"{p.url}/v1", api_key=KEY, max_retries=0)
        seen = []
        with oa.realtime.connect(model="gpt-realtime") as conn:
            assert conn.recv().type == "session.created"
            for i in range(2):
                conn.conversation.item.create(item={"type": "message", "role": "user",
                                                    "content": [{"type": "input_text", "text": f"hi {i}"}]})
                sent = time.perf_counter()
                conn.response.create(response={"output_modalities": [modality]})
                first = None
                for ev in conn:
                    if ev.type.endswith(".delta") and first is None:
                        first = time.perf_counter()
                    if ev.type == "response.done":
                        break
                seen.append((sent, first))
        p.flush()
        rs = rows(db_path)
    assert len(rs) == 2, [(r["method"], r["status"]) for r in rs]
    for r, (sent, first), t in zip(rs, seen, up.turns):
        assert r["api"] == "openai.realtime" and r["transport"] == "websocket" and r["model"] == "gpt-realtime"
        up_ttft = (t.sent[1][0] - t.read_at) * 1000  # its first delta (after response.created)
        assert up_ttft - 2 <= r["ttft_ms"] <= (first - sent) * 1000 + 2
        assert r["usage_prompt_tokens"] == 50 and r["usage_completion_tokens"] == 10 and r["usage_cached_tokens"] == 32
        assert r["stream_done"] == 1 and r["finish_reason"] == "completed" and r["prompt_tokens_est"] is None
        assert r["output_chars"] == len("".join(f"tok{k} " for k in range(4)))  # audio is timed, not counted
        assert not [f for f in json.loads(r["findings"] or "[]") if f["severity"] == "error"]


def test_hooks_run_eagerly_follows_the_loops_task_factory():
    """mitmproxy 12 on Python 3.12+ starts hook tasks eagerly; there a server frame's times are read
    a loop iteration after its hook, when mitmproxy has passed it on (capture.websocket_message)."""
    import asyncio
    import sys

    from firsttoken.addon.capture import hooks_run_eagerly

    loop = asyncio.new_event_loop()
    try:
        assert not hooks_run_eagerly(loop)
        if sys.version_info >= (3, 12):
            loop.set_task_factory(asyncio.eager_task_factory)
            assert hooks_run_eagerly(loop)
    finally:
        loop.close()
