"""`firsttoken proxy` as a user runs it: a real process, plain output, clean shutdown."""

from __future__ import annotations

import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest
from conftest import start_proxy_process

from firsttoken.cli.proxy.state import read_states
from firsttoken.cli.simulate import SimConfig, SimServer

pytestmark = pytest.mark.slow  # `firsttoken proxy` as a process: signals, ports, drains (the slow tier)

FT = str(Path(sys.executable).parent / "firsttoken")
CHAT = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}


def test_sigterm_flushes_every_record_including_in_flight(sim, tmp_path):
    db = tmp_path / "cli.db"
    p, port = start_proxy_process(["--upstream", sim.url, "--db", str(db), "--drain-seconds", "0.3"])
    try:
        r = httpx.post(f"http://127.0.0.1:{port}/v1/chat/completions",
                       json={"model": "gpt-4o-mini", "stream": True, "messages": [{"role": "user", "content": "hi"}]}, timeout=10)
        assert r.status_code == 200
        slow_done = threading.Event()

        def slow():
            try:
                httpx.post(f"http://127.0.0.1:{port}/v1/chat/completions", headers={"x-sim-fault": "stall"},
                           json={"model": "gpt-4o-mini", "stream": True, "messages": [{"role": "user", "content": "hi"}]}, timeout=10)
            except httpx.HTTPError:
                pass
            slow_done.set()

        threading.Thread(target=slow, daemon=True).start()
        time.sleep(0.5)  # the second request is now stalled mid-stream
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 0, err
    assert f"listening on http://127.0.0.1:{port}" in out
    assert "firsttoken stopped" in out
    conn = sqlite3.connect(db)
    rows = conn.execute("SELECT state, status, error FROM requests ORDER BY started_at").fetchall()
    assert len(rows) == 2
    assert all(state == "done" for state, _, _ in rows)
    assert rows[0][1] == 200 and rows[0][2] is None
    assert rows[1][2]  # the stalled one says why it ended


def test_non_loopback_host_warns_and_bad_upstream_is_a_clear_error(tmp_path):
    bad = subprocess.run([FT, "proxy", "--no-live", "--upstream", "api.openai.com", "--db", str(tmp_path / "x.db")],
                         capture_output=True, text=True, timeout=30)
    assert bad.returncode == 2 and "no scheme" in bad.stderr and "https://" in bad.stderr
    p, port = start_proxy_process(["--upstream", "http://127.0.0.1:9", "--host", "0.0.0.0", "--db", str(tmp_path / "y.db")])
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=30)
    assert "reachable from the network" in err


def test_unwritable_database_is_a_clear_error_and_the_default_db_is_untouched(tmp_path):
    (tmp_path / "afile").write_text("")  # a database path under a regular file: unwritable, even for root
    env = {**os.environ, "XDG_DATA_HOME": str(tmp_path / "xdg"), "HOME": str(tmp_path)}
    r = subprocess.run([FT, "proxy", "--no-live", "--port", "0", "--upstream", "http://127.0.0.1:9",
                        "--db", str(tmp_path / "afile" / "x.db")], capture_output=True, text=True, timeout=60, env=env)
    assert r.returncode == 1
    assert "cannot write its database" in r.stderr and "--db" in r.stderr
    assert not (tmp_path / "xdg").exists()  # the default database was never created


def test_port_in_use_fails_at_once_in_firsttokens_words(sim, tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        t0 = time.monotonic()
        res = subprocess.run([FT, "proxy", "-u", sim.url, "--no-live", "--port", str(port), "--db", str(tmp_path / "p.db")],
                             capture_output=True, text=True, timeout=30)
        took = time.monotonic() - t0
    assert res.returncode != 0
    err = " ".join(res.stderr.split())
    assert f"port {port} on 127.0.0.1 is already in use" in err and "--port" in err
    assert "--mode" not in err and "Traceback" not in err
    assert took < 5, f"took {took:.1f} s to say the port is taken"  # was 11 s; the import alone is ~1 s


def test_port_held_by_another_firsttoken_names_it(sim, tmp_path):
    db = tmp_path / "first.db"
    p, port = start_proxy_process(["-u", sim.url, "--db", str(db)])
    try:
        res = subprocess.run([FT, "proxy", "-u", sim.url, "--no-live", "--port", str(port), "--db", str(db)],
                             capture_output=True, text=True, timeout=30)
        err = " ".join(res.stderr.split())
        assert res.returncode != 0 and f"by a firsttoken proxy (pid {p.pid}" in err
    finally:
        p.send_signal(signal.SIGINT)
        p.wait(30)


# -- stopping drains: requests in flight finish, new connections are refused, no traceback ----------
SLOW = dict(ttfb_ms=10, prefill_base_ms=10, prefill_ms_per_1k_tokens=0, tpot_ms=100, output_tokens=30)  # ~3 s


@pytest.fixture(scope="module")
def slow_sim():
    with SimServer(SimConfig(**SLOW)) as s:
        yield s


def _stream_in_background(port: int) -> tuple[threading.Thread, dict]:
    res: dict = {}

    def go() -> None:
        t0 = time.monotonic()
        try:
            with httpx.stream("POST", f"http://127.0.0.1:{port}/v1/chat/completions", timeout=30,
                              json={"model": "gpt-4o-mini", "stream": True,
                                    "messages": [{"role": "user", "content": "hi"}]}) as r:
                res["status"] = r.status_code
                res["body"] = b"".join(r.iter_bytes())
        except httpx.HTTPError as e:
            res["error"] = repr(e)
        res["ended"] = time.monotonic()
        res["took"] = res["ended"] - t0

    th = threading.Thread(target=go, daemon=True)
    th.start()
    return th, res


def _stop(p: subprocess.Popen, port: int, signals: list[int], gap: float = 0.3) -> dict:
    """Send the signals, try a new connection meanwhile, wait for the exit; times from the first signal."""
    t0 = time.monotonic()
    for i, sig in enumerate(signals):
        if i:
            time.sleep(gap)
        p.send_signal(sig)
    refused = False  # new connections refused while the proxy was still running?
    deadline = time.monotonic() + 2.0
    while not refused and time.monotonic() < deadline and p.poll() is None:
        try:
            socket.create_connection(("127.0.0.1", port), 0.5).close()
            time.sleep(0.05)
        except OSError:
            refused = p.poll() is None
    out, err = p.communicate(timeout=60)
    return {"t0": t0, "exit_s": time.monotonic() - t0, "refused": refused, "out": out, "err": err,
            "rc": p.returncode}


def _only_row(db) -> dict:
    conn = sqlite3.connect(db)
    conn.row_factory = sqlite3.Row
    try:
        rs = [dict(r) for r in conn.execute("SELECT * FROM requests")]
    finally:
        conn.close()
    assert len(rs) == 1
    rs[0]["codes"] = [f["code"] for f in json.loads(rs[0]["findings"] or "[]")]
    return rs[0]


def _no_traceback(err: str) -> None:
    assert "Traceback" not in err and "CancelledError" not in err, err


def test_ctrl_c_lets_a_running_stream_finish_and_refuses_new_connections(slow_sim, tmp_path):
    db = tmp_path / "drain.db"
    p, port = start_proxy_process(["--upstream", slow_sim.url, "--db", str(db)])
    th, res = _stream_in_background(port)
    time.sleep(0.8)  # ~8 of 30 tokens sent
    r = _stop(p, port, [signal.SIGINT])
    th.join(10)
    _no_traceback(r["err"])
    assert r["rc"] == 0
    assert r["refused"], "a new connection was accepted while draining"
    assert res.get("status") == 200 and "error" not in res, res
    assert res["body"].rstrip().endswith(b"data: [DONE]")
    assert "Waiting up to 5 s for 1 request still running" in r["out"]
    row = _only_row(db)
    assert row["status"] == 200 and row["error"] is None and "proxy.shutdown" not in row["codes"]
    assert row["output_tokens_est"] == 30
    drained = res["ended"] - r["t0"]
    print(f"\ndrain: the stream ended {drained:.2f} s after Ctrl-C; the proxy exited after {r['exit_s']:.2f} s")
    assert 1.0 < drained < 4.0 and r["exit_s"] < drained + 2.0


def test_second_ctrl_c_cuts_at_once_with_proxy_shutdown(slow_sim, tmp_path):
    db = tmp_path / "cut.db"
    p, port = start_proxy_process(["--upstream", slow_sim.url, "--db", str(db)])
    th, res = _stream_in_background(port)
    time.sleep(0.6)
    r = _stop(p, port, [signal.SIGINT, signal.SIGINT])
    th.join(10)
    _no_traceback(r["err"])
    assert r["rc"] == 0 and "error" in res  # the client saw the cut
    print(f"\nsecond Ctrl-C: exited {r['exit_s']:.2f} s after the first")
    assert r["exit_s"] < 2.0
    row = _only_row(db)
    assert row["state"] == "done" and "proxy.shutdown" in row["codes"]
    assert row["error"] and "shut down" in row["error"]


def test_sigterm_cuts_what_outlasts_drain_seconds(slow_sim, tmp_path):
    db = tmp_path / "term.db"
    p, port = start_proxy_process(["--upstream", slow_sim.url, "--db", str(db), "--drain-seconds", "1"])
    th, res = _stream_in_background(port)
    time.sleep(0.5)
    r = _stop(p, port, [signal.SIGTERM])
    th.join(10)
    _no_traceback(r["err"])
    assert r["rc"] == 0 and r["refused"] and "error" in res
    cut = res["ended"] - r["t0"]
    print(f"\nSIGTERM --drain-seconds 1: stream cut {cut:.2f} s after the signal, exit after {r['exit_s']:.2f} s")
    assert 0.9 < cut < 2.5
    row = _only_row(db)
    assert "proxy.shutdown" in row["codes"] and row["error"]


# -- discovery: running proxies are found wherever their database is -------------------------------
def _ft(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([FT, *args], capture_output=True, text=True, timeout=60, env=env)


def test_two_proxies_on_two_databases_are_found_by_env_doctor_and_live(sim, tmp_path):
    from firsttoken.cli.doctor.command import build_context
    from firsttoken.cli.live.db import STOPPED_NOTE, DbSource
    from firsttoken.cli.live.runner import pick_db

    env = {**os.environ, "XDG_DATA_HOME": str(tmp_path / "xdg")}  # the default database is a third one
    a_db, b_db = tmp_path / "sweep.db", tmp_path / "b" / "other.db"
    a, a_port = start_proxy_process(["--upstream", sim.url, "--db", str(a_db)])
    b = None
    try:
        deadline = time.time() + 10
        while time.time() < deadline and len(read_states()) < 1:
            time.sleep(0.05)
        # one proxy, with --db sweep.db: `env` without --db finds it (it said "no running proxy found")
        r = _ft("env", "openai", "--shell", env=env)
        assert f"OPENAI_BASE_URL=http://127.0.0.1:{a_port}/v1" in r.stdout, r.stdout + r.stderr
        assert "no running proxy found" not in r.stderr
        assert pick_db(None, None) == os.path.realpath(a_db)  # `live` picks the only one
        b, b_port = start_proxy_process(["--upstream", sim.url, "--db", str(b_db)])
        while time.time() < deadline + 10 and len(read_states()) < 2:
            time.sleep(0.05)
        assert {s["port"] for s in read_states()} == {a_port, b_port}
        # two: --db picks that database's proxy; --port picks by port
        for db, port in ((a_db, a_port), (b_db, b_port)):
            r = _ft("env", "openai", "--shell", "--db", str(db), env=env)
            assert f"OPENAI_BASE_URL=http://127.0.0.1:{port}/v1" in r.stdout, (db, r.stdout)
            assert pick_db(None, port) == os.path.realpath(db)
            ctx = build_context(proxy_url=None, env_keys=(), db_path=str(db), upstreams=(), offline=True, timeout=1)
            assert ctx.proxy_url == f"http://127.0.0.1:{port}"  # doctor probes the proxy, not api.openai.com
        # `live` on A's database while A runs, then after A stopped: shown as stopped, no routes
        httpx.post(f"http://127.0.0.1:{a_port}/v1/chat/completions", json=CHAT, timeout=10)
        src = DbSource(a_db)
        src.poll()
        assert src.proxy is not None and src.note is None
        a.send_signal(signal.SIGINT)
        a.communicate(timeout=30)
        src._proxy_checked = 0.0  # do not wait 2 s for the next look at the registry
        src.poll()
        assert src.proxy is None and src.note == STOPPED_NOTE and src.snapshot().routes == []
        src.close()
        assert [s["port"] for s in read_states()] == [b_port]
    finally:
        for p in (a, b):
            if p is not None and p.poll() is None:
                p.send_signal(signal.SIGINT)
                p.communicate(timeout=30)
    assert read_states() == []  # each removed its entry on exit


@pytest.mark.parametrize("port", [70000, -1])
def test_proxy_server_refuses_a_port_out_of_range_in_words(sim, tmp_path, port):
    from firsttoken.cli.proxy.server import ProxyServer, ProxyStartError

    with pytest.raises(ProxyStartError, match=f"--port {port} is not a TCP port: give a number from 0 to 65535"):
        ProxyServer([sim.url], str(tmp_path / "p.db"), port=port).start()


_FIRST_CLIENT = """
import sys, time
from firsttoken.addon import tokens
from firsttoken.cli.proxy.server import ProxyServer

took = []
def at_listen(server):  # what a client connecting the moment the port opens would wait for
    t = time.perf_counter()
    tokens.load_encoding("cl100k_base")
    took.append(time.perf_counter() - t)
srv = ProxyServer([sys.argv[1]], sys.argv[2], port=0)
srv.on_listen.append(at_listen)
with srv:
    pass
print(took[0] * 1000.0)
"""


def test_the_tokenizer_is_ready_before_the_port_opens(sim, tmp_path):
    # `firsttoken run` starts its client the moment the proxy listens. The tokenizer used to
    # be built on the analysis thread only once mitmproxy ran, i.e. after it listened: ~100 ms
    # of GIL held just as the first clients connected, on their records as the proxy's own
    # delay ("starved"). In a fresh process, a lookup when the port opens must find it built.
    out = subprocess.run([sys.executable, "-c", _FIRST_CLIENT, sim.url, str(tmp_path / "t.db")],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert float(out.stdout.split()[-1]) < 5.0, out.stdout
