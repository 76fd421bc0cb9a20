"""`firsttoken proxy` as a user runs it: a real process, plain output, clean shutdown."""

from __future__ import annotations

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

from firsttoken.cli.loopback import free_port

FT = str(Path(sys.executable).parent / "firsttoken")


def start(args: list[str]) -> tuple[subprocess.Popen, int]:
    port = free_port()
    p = subprocess.Popen([FT, "proxy", "--no-live", "--port", str(port), *args],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 20
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return p, port
        except OSError:
            if p.poll() is not None:
                raise AssertionError(p.communicate()[1])
            time.sleep(0.05)
    p.kill()
    raise AssertionError("proxy did not listen")


def test_sigterm_flushes_every_record_including_in_flight(sim, tmp_path):
    db = tmp_path / "cli.db"
    p, port = start(["--upstream", sim.url, "--db", str(db)])
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
    p, port = start(["--upstream", "http://127.0.0.1:9", "--host", "0.0.0.0", "--db", str(tmp_path / "y.db")])
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
    p, port = start(["-u", sim.url, "--db", str(db)])
    try:
        res = subprocess.run([FT, "proxy", "-u", sim.url, "--no-live", "--port", str(port), "--db", str(db)],
                             capture_output=True, text=True, timeout=30)
        err = " ".join(res.stderr.split())
        assert res.returncode != 0 and f"by a firsttoken proxy (pid {p.pid}" in err
    finally:
        p.send_signal(signal.SIGINT)
        p.wait(30)
