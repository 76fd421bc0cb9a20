"""`firsttoken run` starts its command at once (issue 23, item 5).

The port listens before mitmproxy is imported; the proxy starts beside the child on that very
socket. A request sent before the proxy is ready waits in the listen queue (never refused), is
answered and recorded, and its record says how long it waited for the start-up. A proxy that
cannot start closes the socket, so the child is refused at once instead of hanging.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from conftest import rows

from firsttoken.cli.proxy.server import ProxyServer
from firsttoken.cli.run.startup import EarlyProxy

FT = str(Path(sys.executable).parent / "firsttoken")
BODY = json.dumps({"model": "sim-1", "stream": True, "messages": [{"role": "user", "content": "hi"}]})
HOLD_S = 0.6  # how long the test keeps the proxy from starting while a request waits


def _post(port: int, out: dict) -> None:
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        c.request("POST", "/v1/chat/completions", body=BODY, headers={
            "content-type": "application/json", "authorization": "Bearer sk-test-000000000000000000000000"})
        r = c.getresponse()
        out["status"], out["body"] = r.status, r.read()
    except OSError as e:
        out["error"] = e


def test_a_request_sent_before_the_proxy_starts_waits_and_is_recorded(sim, db_path):
    early = EarlyProxy()
    early.make = lambda sock: ProxyServer([sim.url], str(db_path), sock=sock)
    out: dict = {}
    t = threading.Thread(target=_post, args=(early.port, out))
    t.start()  # the client's request: accepted by the kernel, nobody reads it yet
    time.sleep(HOLD_S)
    early.start()
    server = early.wait()
    try:
        t.join(60)
        assert out.get("status") == 200, out
        assert b"data:" in out["body"]
        server.flush()
        (r,) = rows(db_path)
        assert r["status"] == 200 and r["upstream"] == sim.url
        # its bytes waited for the start-up: recorded before t0, said by the record and a finding
        assert r["proxy_start_wait_ms"] is not None and r["proxy_start_wait_ms"] >= HOLD_S * 1000 * 0.8, r
        assert r["proxy_lag_ms"] >= r["proxy_start_wait_ms"]
        found = [f for f in json.loads(r["findings"]) if f["code"] == "proxy.saturated"]
        assert found and found[0]["params"]["variant"] == "starting", r["findings"]
        assert "still starting" in found[0]["message"]
        # a request once the proxy is up did not wait for it
        out2: dict = {}
        _post(early.port, out2)
        server.flush()
        assert out2.get("status") == 200
        assert rows(db_path)[1]["proxy_start_wait_ms"] is None
    finally:
        server.stop()


def test_a_proxy_that_cannot_start_refuses_the_child_at_once(tmp_path, capfd):
    early = EarlyProxy()

    def broken(sock):
        raise RuntimeError("the database is read-only")

    early.make = broken
    early.start()
    with pytest.raises(RuntimeError):
        early.wait()
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", early.port), timeout=5).close()
    assert "the proxy could not start" in capfd.readouterr().err


def test_a_socket_nothing_reached_is_unused_and_one_a_connection_reached_is_not():
    """`run` does not wait for a proxy still starting when the command exited having sent it nothing (issue 36
    item 15: the run of a command that makes no request ends when the command does); a connection waiting
    in the listen queue, or a proxy already started, makes it wait as before."""
    early = EarlyProxy()
    hold = threading.Event()
    early.make = lambda sock: hold.wait(30) and None
    early.start()
    try:
        assert early.unused()
        c = socket.create_connection(("127.0.0.1", early.port), timeout=5)  # queued, never accepted
        deadline = time.monotonic() + 5
        while early.unused() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not early.unused()
        c.close()
    finally:
        hold.set()
    never = EarlyProxy()
    assert not never.unused()  # never started (the command could not run): nothing to skip
    never.close()


def test_run_starts_the_child_before_the_proxy_and_records_its_request(sim, tmp_path):
    """Through the real command: the child's request (sent at once) is answered and recorded."""
    db = tmp_path / "ft.db"
    client = ("import http.client, json, os, time\n"
              "print('started', time.time(), flush=True)\n"
              "u = os.environ['OPENAI_BASE_URL'].split('//')[1]\n"
              "hp, _, prefix = u.partition('/')\n"
              "c = http.client.HTTPConnection(hp.split(':')[0], int(hp.split(':')[1]), timeout=60)\n"
              f"c.request('POST', '/' + prefix + '/chat/completions', body={BODY!r}, headers={{'content-type': "
              "'application/json', 'authorization': 'Bearer sk-test-000000000000000000000000'})\n"
              "r = c.getresponse(); r.read(); print('status', r.status, flush=True)\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ANTHROPIC_", "FIRSTTOKEN_RUN"))}
    env.update(OPENAI_BASE_URL=sim.url + "/v1", HOME=str(tmp_path))
    r = subprocess.run([FT, "run", "--no-join", "--db", str(db), "--", sys.executable, "-c", client],
                       env=env, capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stderr
    assert "status 200" in r.stdout
    (rec,) = rows(db)
    assert rec["status"] == 200 and rec["upstream"] == sim.url + "/v1"
    # whichever came first here, the record says whether the request waited for the start-up
    if rec["proxy_start_wait_ms"] is not None:
        assert rec["proxy_lag_ms"] >= rec["proxy_start_wait_ms"] > 0
        assert "still starting" in r.stderr


def test_run_imports_nothing_heavy_before_its_child_starts():
    """What `firsttoken run` loads before it starts the command is what the child waits for: the
    proxy (mitmproxy, the tokenizer, SQLite), the summary's rich and the doctor come later."""
    code = ("import sys; from firsttoken.cli.main import cli; import firsttoken.cli.run.command; "
            "heavy = ('mitmproxy', 'tiktoken', 'sqlite_utils', 'rich', 'firsttoken.cli.doctor', "
            "'firsttoken.cli.proxy.server', 'tempfile', 'tomllib'); "
            "print(sorted({m.split('.')[0] if not m.startswith('firsttoken') else m for m in sys.modules "
            "if m.startswith(heavy)}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]", out.stdout
