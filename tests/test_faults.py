"""The fault matrix: hostile clients, hostile upstreams, a killed proxy, a full disk.

Every case runs through the real proxy on loopback (raw sockets, httpx, the simulator, a
raw upstream) and prints what it measured; docs/faults.md quotes these figures.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner
from conftest import rows, start_proxy_process
from rawserver import SocketUpstream, answer_each

from firsttoken.addon.safe_text import printable
from firsttoken.addon.store import writer as writer_mod
from firsttoken.cli import output
from firsttoken.cli.loopback import free_port
from firsttoken.cli.main import cli
from firsttoken.cli.proxy.server import ProxyServer
from firsttoken.cli.proxy.state import write_state

pytestmark = pytest.mark.slow  # kill -9, full disks and hostile upstreams: the slow tier (`pytest -m slow`)

FT = str(Path(sys.executable).parent / "firsttoken")
CHAT = {"model": "gpt-4o-mini", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
ESC_TEXT = "\x1b]0;PWNED\x1b\\\x1b[2J"


# -- helpers -------------------------------------------------------------------------------------
def http_response(status: int, body: bytes, ctype: str = "application/json", extra: str = "") -> bytes:
    return (f"HTTP/1.1 {status} X\r\ncontent-type: {ctype}\r\ncontent-length: {len(body)}\r\n{extra}"
            f"connection: close\r\n\r\n").encode() + body


@contextlib.contextmanager
def small_disk(tmp_path: Path, size_kib: int = 4096):
    """A real, small filesystem (tmpfs; needs root), else None: callers fall back."""
    mnt = tmp_path / "disk"
    mnt.mkdir()
    ok = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_kib}k,mode=0755", "tmpfs", str(mnt)],
                        capture_output=True).returncode == 0
    try:
        yield mnt if ok else None
    finally:
        if ok:
            subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def fill(directory: Path) -> Path:
    """Fill the filesystem of ``directory`` until writes fail (ENOSPC)."""
    f = directory / "filler"
    fd = os.open(f, os.O_WRONLY | os.O_CREAT, 0o600)  # unbuffered: no flush left to fail at close
    try:
        block = b"\0" * 65536
        while True:
            try:
                os.write(fd, block)
            except OSError:
                if len(block) == 1:
                    break
                block = block[: len(block) // 2]  # fill the last pages too
    finally:
        os.close(fd)
    return f


def wait_for(cond, timeout: float = 10.0, step: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(step)
    return cond()


# -- 1. a database that cannot be written -----------------------------------------------------
def test_full_disk_keeps_rows_says_so_and_writes_them_later(sim, tmp_path):
    """A full disk (a 4 MiB tmpfs, filled; without root: SQLite's own page limit, which raises
    the same SQLITE_FULL) must not lose rows: they wait in memory and are written once there is room."""
    with small_disk(tmp_path) as disk:
        db = (disk or tmp_path) / "ft.db"
        p = ProxyServer([sim.url], str(db), port=0)
        p.start()
        told: list[dict] = []
        try:
            p.capture.store_listeners.append(told.append)
            for _ in range(3):
                assert httpx.post(p.url + "/v1/chat/completions", json=CHAT, timeout=10).status_code == 200
            p.flush()
            if disk is not None:
                filler = fill(disk)
            else:
                p.capture.writer.db.execute("PRAGMA max_page_count = 1")  # every page is used: SQLITE_FULL
            n = 30
            for _ in range(n):
                assert httpx.post(p.url + "/v1/chat/completions", json=CHAT, timeout=10).status_code == 200
            assert wait_for(lambda: not p.capture.writer.health()["ok"])
            p.flush()
            h = p.capture.writer.health()
            snap = p.capture.snapshot()
            print(f"\nfull disk ({'tmpfs' if disk else 'max_page_count'}): health {h}")
            assert not h["ok"] and h["pending"] >= 1 and h["since"] and h["error"]
            assert snap["store"]["ok"] is False
            assert told and told[0]["ok"] is False  # the plain output / live view were told at once
            assert "NOT RECORDING" in writer_mod.describe_health(h)
            # doctor: the running proxy's state file carries the health (when it can be written at all:
            # on a full disk it cannot, and doctor flags the disk itself)
            write_state(p)
            from firsttoken.cli.doctor.checks import Context, check_db_safety

            checks = {c.id: c for c in check_db_safety(Context(env={}, home=tmp_path, cwd=tmp_path, db_path=str(db)))}
            if disk is not None:
                assert checks["db.disk"].status == "fail"
                filler.unlink()
                write_state(p)
                checks = {c.id: c for c in check_db_safety(Context(env={}, home=tmp_path, cwd=tmp_path, db_path=str(db)))}
            assert checks["db.writes"].status == "fail" or p.capture.writer.health()["ok"]
            if disk is not None:
                pass
            else:
                p.capture.writer.db.execute("PRAGMA max_page_count = 1073741823")
            assert wait_for(lambda: p.capture.writer.health()["ok"], timeout=writer_mod.RETRY_S * 5)
            p.flush()
            got = rows(db)
            print(f"full disk: {len(got)} rows after recovery of {n + 3} requests; told {[t['ok'] for t in told]}")
            assert len(got) == n + 3
            assert all(r["state"] == "done" for r in got)
            assert told[-1]["ok"] is True
        finally:
            p.stop()


def test_full_disk_plain_output_tells_the_user(sim, tmp_path):
    with small_disk(tmp_path, 4096) as disk:
        if disk is None:
            pytest.skip("needs a small filesystem (tmpfs mount as root); the in-process test covers the logic")
        db = disk / "ft.db"
        p, port = start_proxy_process(["--upstream", sim.url, "--db", str(db)])
        try:
            httpx.post(f"http://127.0.0.1:{port}/v1/chat/completions", json=CHAT, timeout=10)
            time.sleep(0.3)
            filler = fill(disk)
            for _ in range(10):
                httpx.post(f"http://127.0.0.1:{port}/v1/chat/completions", json=CHAT, timeout=10)
            time.sleep(0.5)
            filler.unlink()
            time.sleep(writer_mod.RETRY_S * 3)
            p.send_signal(signal.SIGTERM)
            out, err = p.communicate(timeout=30)
        finally:
            if p.poll() is None:
                p.kill()
        lines = out.splitlines()
        bad = [i for i, ln in enumerate(lines) if "NOT RECORDING" in ln]
        good = [i for i, ln in enumerate(lines) if "recording again" in ln]
        print(f"\nplain output: failing line at {bad}, recovery line at {good}")
        assert len(bad) == 1 and len(good) == 1 and bad[0] < good[0]
        assert len(rows(db)) == 11


# -- 2. kill -9 -----------------------------------------------------------------------------------
def _children(pid: int) -> set[int]:
    """Every descendant of a process (Linux /proc)."""
    out, todo = set(), [pid]
    while todo:
        cur = todo.pop()
        for task in Path(f"/proc/{cur}/task").glob("*"):
            try:
                kids = {int(x) for x in (task / "children").read_text().split()}
            except OSError:
                continue
            todo += list(kids - out)
            out |= kids
    return out


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="Linux /proc only")
def test_kill_9_leaves_no_helper_process_behind(sim, tmp_path):
    """A body over 1 MiB is parsed in a helper process (and multiprocessing starts a resource
    tracker): a kill -9 of the proxy must not leave them running, ~90 MB each."""
    p, port = start_proxy_process(["--upstream", sim.url, "--db", str(tmp_path / "h.db")])
    try:
        big = {**CHAT, "messages": [{"role": "user", "content": "word " * 300_000}]}
        r = httpx.post(f"http://127.0.0.1:{port}/v1/chat/completions", json=big, timeout=30)
        assert r.status_code == 200
        deadline = time.monotonic() + 10
        while not (kids := _children(p.pid)) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert kids, "the helper process was not started"
    finally:
        p.send_signal(signal.SIGKILL)
        p.wait(10)
    deadline = time.monotonic() + 10
    alive = kids
    while alive and time.monotonic() < deadline:
        time.sleep(0.1)
        alive = {k for k in alive if Path(f"/proc/{k}").exists()
                 and "zombie" not in (Path(f"/proc/{k}/status").read_text(errors="replace") if Path(f"/proc/{k}").exists() else "zombie")}
    assert not alive, f"left running after kill -9: {sorted(alive)}"


def test_kill_9_loses_little_and_a_restart_closes_rows_left_in_flight(sim, tmp_path):
    db = tmp_path / "k.db"
    p, port = start_proxy_process(["--upstream", sim.url, "--db", str(db)])
    done, stop = [], threading.Event()

    def client(slow: bool):
        with httpx.Client(timeout=10) as c:
            while not stop.is_set():
                try:
                    r = c.post(f"http://127.0.0.1:{port}/v1/chat/completions", json=CHAT,
                               headers={"x-sim-fault": "stall"} if slow else {})
                    if r.status_code == 200:
                        done.append(time.monotonic())
                except httpx.HTTPError:
                    return

    threads = [threading.Thread(target=client, args=(i == 0,), daemon=True) for i in range(6)]
    for t in threads:
        t.start()
    time.sleep(3.0)
    killed_at = time.monotonic()
    p.send_signal(signal.SIGKILL)
    p.wait(10)
    stop.set()
    for t in threads:
        t.join(10)
    completed = [t for t in done if t < killed_at]
    got = rows(db)
    finished = [r for r in got if r["state"] == "done"]
    left = [r for r in got if r["state"] == "in_flight"]
    lost = max(0, len(completed) - len(finished))
    print(f"\nkill -9 after {len(completed)} completed requests: {len(finished)} finished rows, "
          f"{len(left)} left in flight, {lost} completed requests without a finished row")
    assert left, "a stalled stream was in flight when the proxy was killed"
    # bounded loss: only what completed in the last moments (commit every <= 100 ms) may be missing
    recent = [t for t in completed if t > killed_at - 0.25]
    assert lost <= len(recent) + 2
    # a new proxy on the same database closes what the dead one left in flight
    q = ProxyServer([sim.url], str(db), port=0)
    q.start()
    try:
        assert wait_for(lambda: not rows(db, "WHERE state = 'in_flight'"), timeout=10)
        q.flush()
    finally:
        q.stop()
    closed = {r["id"]: r for r in rows(db)}
    for r in left:
        c = closed[r["id"]]
        assert c["state"] == "done" and c["top_code"] == "proxy.interrupted", c
        assert str(p.pid) in json.loads(c["findings"])[0]["message"]


def _hanging_upstream() -> tuple[SocketUpstream, threading.Event]:
    """An upstream that sends the head and one event, then holds the stream open until released."""
    release = threading.Event()

    def answer(req):
        yield (b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n"
               b'data: {"choices":[{"delta":{"role":"assistant"}}]}\n\n')
        release.wait(60)

    return SocketUpstream(answer_each(answer)), release


def _stall_one(port: int) -> threading.Thread:
    def go():
        with contextlib.suppress(httpx.HTTPError):
            httpx.post(f"http://127.0.0.1:{port}/v1/chat/completions", json=CHAT, timeout=60)

    t = threading.Thread(target=go, daemon=True)
    t.start()
    return t


def _in_flight(db) -> list[dict]:
    try:
        return rows(db, "WHERE state = 'in_flight'")
    except Exception:  # noqa: BLE001 - not created yet
        return []


def _proc_state(pid: int) -> str:
    with open(f"/proc/{pid}/stat", "rb") as f:
        return f.read().rsplit(b")", 1)[1].split()[0].decode()


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="/proc (Linux) tells a zombie")
def test_a_restart_right_after_kill_9_closes_what_the_unreaped_proxy_left(tmp_path):
    """Restarted at once, the killed proxy is still a zombie (its parent has not reaped it):
    kill(pid, 0) says it is alive, but it runs no more, so its rows are closed."""
    up, release = _hanging_upstream()
    db = tmp_path / "z.db"
    p, port = start_proxy_process(["--upstream", up.url, "--db", str(db)])
    try:
        _stall_one(port)
        assert wait_for(lambda: _in_flight(db), timeout=10)
        p.send_signal(signal.SIGKILL)
        assert wait_for(lambda: _proc_state(p.pid) == "Z", timeout=5)  # not reaped: no p.wait() yet
        os.kill(p.pid, 0)  # the old check: "alive"
        q = ProxyServer([up.url], str(db), port=0)
        q.start()
        try:
            assert wait_for(lambda: not _in_flight(db), timeout=10), _in_flight(db)
        finally:
            q.stop()
        from firsttoken.addon.store.db import pid_alive

        assert _proc_state(p.pid) == "Z" and not pid_alive(p.pid)  # the registry of running proxies asks it too
    finally:
        if p.poll() is None:
            p.kill()
        p.wait(10)
        release.set()
        up.close()
    (r,) = rows(db)
    assert r["state"] == "done" and r["top_code"] == "proxy.interrupted" and r["proxy_pid"] == p.pid
    # this process, asked the same: its own rows are live; a row from before it started that
    # carries its pid (a container's PID 1 after a restart) is not
    from firsttoken.addon.store.db import owner_alive, proc_stat

    me = os.getpid()
    now = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime())
    assert owner_alive(me, now, me, proc_stat(me))
    assert not owner_alive(me, "2000-01-01T00:00:00.000+00:00", me, proc_stat(me))
    print("\nrestart right after kill -9 (zombie owner): its row closed as proxy.interrupted")


def _unshare_ok() -> bool:
    try:
        return subprocess.run(["unshare", "-p", "-f", "--mount-proc", "true"], capture_output=True,
                              timeout=10).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def _ns_proxy(args: list[str]) -> tuple[subprocess.Popen, int, int]:
    """`firsttoken proxy` as PID 1 of its own PID namespace (a container): the unshare process,
    the port, and the proxy's pid as seen from here."""
    from firsttoken.cli.loopback import wait_port

    port = free_port()
    u = subprocess.Popen(["unshare", "-p", "-f", "--mount-proc", FT, "proxy", "--no-live", "--port", str(port), *args],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wait_port(port, u, timeout=30)
    kids = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            with contextlib.suppress(OSError, IndexError):
                if int((d / "stat").read_bytes().rsplit(b")", 1)[1].split()[1]) == u.pid:
                    kids.append(int(d.name))
    assert len(kids) == 1, kids
    return u, port, kids[0]


@pytest.mark.skipif(not _unshare_ok(), reason="needs `unshare -p` (root or user namespaces)")
def test_a_proxy_that_is_pid_1_again_after_kill_9_closes_the_rows_of_its_predecessor(tmp_path):
    """In a container the proxy is PID 1 every time: the restarted proxy's own pid is the dead
    one's, so 'my own rows are live' kept the killed proxy's rows in flight forever."""
    up, release = _hanging_upstream()
    db = tmp_path / "ns.db"
    started: list[subprocess.Popen] = []
    try:
        u, port, pid = _ns_proxy(["--upstream", up.url, "--db", str(db)])
        started.append(u)
        _stall_one(port)
        assert wait_for(lambda: _in_flight(db), timeout=10)
        assert [r["proxy_pid"] for r in _in_flight(db)] == [1]
        os.kill(pid, signal.SIGKILL)
        u.wait(10)
        u2, _, pid2 = _ns_proxy(["--upstream", up.url, "--db", str(db)])
        started.append(u2)
        assert wait_for(lambda: not _in_flight(db), timeout=10), _in_flight(db)
        os.kill(pid2, signal.SIGINT)
        u2.wait(30)
    finally:
        for u in started:
            if u.poll() is None:
                u.kill()
                u.wait(10)
        release.set()
        up.close()
    (r,) = rows(db)
    assert r["state"] == "done" and r["top_code"] == "proxy.interrupted" and r["proxy_pid"] == 1
    print("\nproxy as PID 1, killed and restarted as PID 1: its predecessor's row closed")


# -- 3. file modes ---------------------------------------------------------------------------------
def test_data_dir_and_files_are_owner_only_whatever_the_umask(sim, tmp_path):
    old = os.umask(0o022)
    try:
        db = tmp_path / "data" / "sub" / "ft.db"
        p = ProxyServer([sim.url], str(db), port=0, save_bodies=True)
        p.start()
        try:
            httpx.post(p.url + "/v1/chat/completions", json=CHAT, timeout=10)
            p.flush()
            entry = write_state(p)  # the registry of running proxies
            modes = {f.name: oct(stat.S_IMODE(f.stat().st_mode)) for f in db.parent.iterdir()}
            modes["<dir>"] = oct(stat.S_IMODE(db.parent.stat().st_mode))
            modes["<registry>"] = oct(stat.S_IMODE(entry.parent.stat().st_mode))
            modes["<entry>"] = oct(stat.S_IMODE(entry.stat().st_mode))
            print(f"\nmodes under umask 022: {modes}")
            assert modes["<dir>"] == "0o700" and modes["<registry>"] == "0o700"
            for name in ("ft.db", "ft.db-wal", "ft.db-shm", "<entry>"):
                assert modes[name] == "0o600", (name, modes)
        finally:
            p.stop()
    finally:
        os.umask(old)
    # doctor flags a database others can read
    from firsttoken.cli.doctor.checks import Context, check_db_safety

    ctx = Context(env={}, home=tmp_path, cwd=tmp_path, db_path=str(db))
    assert {c.id: c.status for c in check_db_safety(ctx)}["db.modes"] == "pass"
    os.chmod(db, 0o644)
    c = {c.id: c for c in check_db_safety(ctx)}["db.modes"]
    assert c.status == "warn" and "ft.db is 644" in c.detail


# -- 4. terminal escapes ------------------------------------------------------------------------------
def test_escape_sequences_from_the_upstream_never_reach_the_terminal(tmp_path):
    def answer(req):
        err = {"error": {"message": f"boom {ESC_TEXT} boom", "type": f"t{ESC_TEXT}"}, "model": f"m{ESC_TEXT}"}
        return http_response(400, json.dumps(err).encode())

    up = SocketUpstream(answer_each(answer))
    db = tmp_path / "esc.db"
    p = ProxyServer([up.url], str(db), port=0)
    p.start()
    lines: list[str] = []
    p.capture.listeners.append(lambda rec: lines.append(output.line(rec.row())))
    try:
        body = {"model": f"gpt{ESC_TEXT}", "messages": [{"role": "user", "content": "x"}]}
        assert httpx.post(p.url + "/v1/chat/completions", json=body, timeout=10).status_code == 400
        p.flush()
    finally:
        p.stop()
        up.close()
    r = rows(db)[0]
    assert "\x1b" in (r["upstream_error"] or "") + (r["model"] or "")  # stored as sent: the data is the data
    runner = CliRunner()
    outs = {
        "plain": "\n".join(lines),
        "logs": runner.invoke(cli, ["logs", "--db", str(db)], env={"COLUMNS": "200"}).output,
        "logs-narrow": runner.invoke(cli, ["logs", "--db", str(db)], env={"COLUMNS": "80"}).output,
        "show": runner.invoke(cli, ["show", r["id"][:8], "--db", str(db)]).output,
    }
    for name, text in outs.items():
        assert text.strip(), name
        assert "\x1b" not in text and "\x9b" not in text, (name, text)
        assert "PWNED" in text or name.startswith("logs"), name  # shown, neutralised
    print(f"\nescape injection: no ESC byte in {sorted(outs)}")
    assert printable("a\x1b[2Jb\u202ec\rd\n") == "a\\x1b[2Jb\\u202ec\\x0dd\\n"
    assert printable("a\nb", keep_newlines=True) == "a\nb"
    # the live view's copies of rows and flights
    from firsttoken.cli.live.data import FlightView, slim

    assert "\x1b" not in json.dumps(slim(r), ensure_ascii=False)
    assert "\x1b" not in FlightView(id="x", elapsed_s=0, phase="prefill", model=f"m{ESC_TEXT}").model
    from firsttoken.cli.report.html import esc

    assert "\x1b" not in esc(ESC_TEXT) and "&lt;" in esc("<script>")


# -- 5. keys that do not look like keys -----------------------------------------------------------------
def test_a_body_key_is_redacted_everywhere_even_when_the_upstream_quotes_it(tmp_path):
    secret = "0123456789abcdef0123456789abcdef"  # Azure style: 32 hex, no sk- prefix
    password = "correct-horse-battery"

    def answer(req):
        # the upstream quotes the body back in its error (many gateways do)
        msg = f"Invalid request: {req.body.decode()} (key {secret}, pw {password})"
        return http_response(400, json.dumps({"error": {"message": msg, "type": "invalid_request_error"}}).encode())

    up = SocketUpstream(answer_each(answer))
    db = tmp_path / "keys.db"
    p = ProxyServer([up.url], str(db), port=0, save_bodies=True)
    p.start()
    lines: list[str] = []
    p.capture.listeners.append(lambda rec: lines.append(output.line(rec.row())))
    try:
        body = {"model": "gpt-4o", "api_key": secret, "auth": {"Password": password},
                "messages": [{"role": "user", "content": "hi"}]}
        assert httpx.post(p.url + "/v1/chat/completions", json=body, timeout=10).status_code == 400
        p.flush()
    finally:
        p.stop()
        up.close()
    r = rows(db)[0]
    assert r["request_body"] and r["response_body"] and r["upstream_error"]
    stored = json.dumps(rows(db)) + Path(db).read_bytes().decode("latin-1")
    wal = Path(str(db) + "-wal")
    if wal.exists():
        stored += wal.read_bytes().decode("latin-1")
    printed = "\n".join(lines)
    for s in (secret, password):
        assert s not in stored and s not in printed
    assert '"api_key":"[REDACTED]"' in r["request_body"]
    print("\nbody keys: redacted in request_body, response_body, upstream_error, findings and the plain line")


def test_a_key_in_a_gateways_own_header_is_fingerprinted_and_never_written(tmp_path, proxy_registry):
    """A credential in a header firsttoken has no name for (``x-portkey-api-key``) is a secret
    by its name: the upstream's 401 echoes it, and it is in no file the proxy wrote nor its output."""
    gateway_key = "pk-live-GATEWAYKEY0123456789abcdefgh"
    other_key = "hx0123456789abcdefGATEWAY2"  # a second gateway's header, no key-like shape
    cookie = "COOKIEVALUE0123456789abcdef"

    def answer(req):
        sent = {n.strip().lower(): v.strip() for n, _, v in
                (ln.decode("latin-1").partition(":") for ln in req.head.split(b"\r\n")[1:])}
        msg = (f"invalid portkey key {sent.get('x-portkey-api-key')} (helicone {sent.get('helicone-auth')}, "
               f"cookie {sent.get('cookie')}, key id {sent.get('x-api-key-id')})")
        return http_response(401, json.dumps({"error": {"message": msg, "type": "invalid_request_error"}}).encode())

    up = SocketUpstream(answer_each(answer))
    db = tmp_path / "gw.db"
    p, port = start_proxy_process(["--upstream", up.url, "--db", str(db), "--save-bodies"])
    try:
        url = f"http://127.0.0.1:{port}/v1/chat/completions"
        body = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}
        r = httpx.post(url, json=body, timeout=10, headers={
            "authorization": "Bearer sk-proj-PROVIDER0123456789abcdefXYZ", "x-portkey-api-key": gateway_key,
            "helicone-auth": f"Bearer {other_key}", "cookie": f"session={cookie}",
            "x-stainless-lang": "python", "x-api-key-id": "key-id-0123456789abc"})
        assert r.status_code == 401 and gateway_key in r.text  # forwarded unchanged, both ways
        httpx.post(url, json=body, timeout=10, headers={"x-portkey-api-key": gateway_key})
        assert wait_for(lambda: len(rows(db, "WHERE state = 'done'")) == 2, timeout=10)
        running = {f: f.read_bytes() for f in [*tmp_path.iterdir(), *proxy_registry.iterdir()] if f.is_file()}
        assert any(f.parent == proxy_registry for f in running)  # the registry entry was searched too
    finally:
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=30)
        up.close()
    written = {f: f.read_bytes() for f in tmp_path.iterdir() if f.is_file()}
    for s in (gateway_key, other_key, cookie):
        for f, data in [*running.items(), *written.items()]:
            assert s.encode() not in data, f"{s} in {f}"
        assert s not in out and s not in err, s
    assert "REDACTED" in out, out  # the printed line quotes the 401, redacted
    both, gateway_only = rows(db)
    assert "[REDACTED]" in both["upstream_error"] and "[REDACTED]" in both["response_body"]
    assert "key id key-id-0123456789abc" in both["upstream_error"]  # which key it was is no secret
    assert both["key_header"] == "authorization" and both["key_fingerprint"] == "sk-proj-…fXYZ"
    assert gateway_only["key_header"] == "x-portkey-api-key" and gateway_only["key_fingerprint"] == "pk-…efgh"
    print(f"\ngateway header key: fingerprinted ({gateway_only['key_fingerprint']}), in none of "
          f"{sorted({f.name for f in [*running, *written]})} nor the output")


def test_a_header_is_a_credential_by_its_name_not_by_a_list():
    from firsttoken.addon.secrets import fingerprint_headers, is_secret_header, secret_values

    secret = ["authorization", "X-Api-Key", "x-portkey-api-key", "x-portkey-virtual-key", "helicone-auth",
              "cf-aig-authorization", "x-amz-security-token", "x-litellm-api-key", "ocp-apim-subscription-key",
              "x-auth-token", "x-apikey", "x-session", "cookie", "proxy-authorization", "X-XSRFToken", "x-client-secret",
              "x-db-password"]
    # names that name a key or a session (an id), say what kind of key it is, or only mention tokens
    not_secret = ["x-api-key-id", "session_id", "x-claude-code-session-id", "mcp-session-id", "idempotency-key",
                  "sec-websocket-key", "x-stainless-lang", "x-stainless-retry-count", "x-stainless-package-version",
                  "anthropic-version", "anthropic-beta", "content-length", "x-firsttoken-experiment", "x-max-tokens",
                  "x-token-count", "helicone-session-name", "x-auth-user", "openai-organization", "keep-alive",
                  "user-agent", "x-request-id", "chatgpt-account-id"]
    assert [n for n in secret if not is_secret_header(n)] == []
    assert [n for n in not_secret if is_secret_header(n)] == []
    # the API key headers come first; a gateway's own header is the key only without them
    fp = fingerprint_headers([("x-portkey-api-key", "pk-live-0123456789abcdefgh"), ("x-api-key", "sk-ant-0123456789abcdWXYZ")])
    assert (fp.header, fp.fingerprint, fp.facts) == ("x-api-key", "sk-ant-…WXYZ", [])
    fp = fingerprint_headers([("helicone-auth", "Bearer sk-helicone-0123456789abcd "), ("idempotency-key", "stainless-0123456789")])
    assert (fp.header, fp.scheme, fp.fingerprint, fp.facts) == ("helicone-auth", "Bearer", "sk-…abcd", ["trailing_whitespace"])
    assert fingerprint_headers([("idempotency-key", "stainless-0123456789"), ("x-api-key-id", "k1")]).facts == ["missing"]
    assert set(secret_values([("Cookie", "a=1; sid=COOKIE0123456789"), ("x-stainless-os", "Linux")])) >= {"COOKIE0123456789"}
    assert "Linux" not in secret_values([("x-stainless-os", "Linux")])


# -- 7. a gzip bomb must not stall other streams -------------------------------------------------------
def test_gzip_bomb_is_capped_and_does_not_stall_a_concurrent_stream(tmp_path):
    import zlib

    inflated = 256 * 2**20
    comp = zlib.compressobj(9, zlib.DEFLATED, 31)
    block = b"\0" * 2**20
    bomb = b"".join(comp.compress(block) for _ in range(inflated // len(block))) + comp.flush()
    sse_events = [b'data: {"choices":[{"delta":{"content":"x"}}]}\n\n'] * 60

    def answer(req):
        if b"bomb" in req.body:
            head = (f"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-encoding: gzip\r\n"
                    f"content-length: {len(bomb)}\r\nconnection: close\r\n\r\n").encode()
            return [head] + [bomb[i:i + 16384] for i in range(0, len(bomb), 16384)]

        def paced():
            yield b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n"
            for ev in sse_events:
                time.sleep(0.02)
                yield b"%x\r\n%s\r\n" % (len(ev), ev)
            yield b"0\r\n\r\n"
        return paced()

    up = SocketUpstream(answer_each(answer))
    db = tmp_path / "bomb.db"
    p = ProxyServer([up.url], str(db), port=0)
    p.start()
    gaps: list[float] = []
    got_bomb: list[int] = []
    try:
        def normal():
            with httpx.stream("POST", p.url + "/v1/chat/completions", json=CHAT, timeout=30) as r:
                last = time.perf_counter()
                for _ in r.iter_raw():
                    now = time.perf_counter()
                    gaps.append(now - last)
                    last = now

        def bomber():
            with httpx.stream("POST", p.url + "/v1/chat/completions", json={"model": "bomb"}, timeout=60) as r:
                got_bomb.append(sum(len(c) for c in r.iter_raw()))

        t1 = threading.Thread(target=normal)
        t2 = threading.Thread(target=bomber)
        t1.start()
        time.sleep(0.1)
        t2.start()
        t1.join(60)
        t2.join(60)
        p.flush()
    finally:
        p.stop()
        up.close()
    worst = max(gaps[1:]) * 1000
    print(f"\ngzip bomb: {len(bomb) // 1024} KiB -> {inflated // 2**20} MiB; forwarded {got_bomb[0]} bytes; "
          f"concurrent stream's longest inter-chunk gap {worst:.0f} ms (paced at 20 ms)")
    assert got_bomb == [len(bomb)]  # forwarded untouched
    assert worst < 250, gaps  # inflating 256 MiB on the event loop takes well over a second here
    bomb_row = next(r for r in rows(db) if r["model"] == "bomb")
    assert bomb_row["response_bytes"] == len(bomb)


# -- 8. an event larger than the proxy's analysis cap ------------------------------------------------------
def test_a_20_mb_sse_event_is_too_large_to_analyse_not_malformed(tmp_path):
    big = b'data: {"choices":[{"delta":{"content":"' + b"a" * (20 * 2**20) + b'"}}]}\n\n'
    tail = b'data: {"choices":[{"delta":{"content":"ok"},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'

    def answer(req):
        head = (f"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {len(big) + len(tail)}\r\n"
                f"connection: close\r\n\r\n").encode()
        return [head] + [big[i:i + 65536] for i in range(0, len(big), 65536)] + [tail]

    up = SocketUpstream(answer_each(answer))
    db = tmp_path / "big.db"
    p = ProxyServer([up.url], str(db), port=0)
    p.start()
    try:
        r = httpx.post(p.url + "/v1/chat/completions", json=CHAT, timeout=60)
        assert len(r.content) == len(big) + len(tail)
        p.flush()
    finally:
        p.stop()
        up.close()
    row = rows(db)[0]
    codes = {f["code"]: f for f in json.loads(row["findings"])}
    print(f"\n20 MB SSE event: findings {sorted(codes)}; oversize_events {row['oversize_events']}")
    assert "response.malformed" not in codes
    assert row["oversize_events"] == 1 and codes["response.event_too_large"]["severity"] == "warn"
    assert row["stream_done"] == 1 and row["events"] >= 1


def test_redaction_is_linear_on_backslash_runs_and_keeps_its_reach():
    """A regex for quoted values backtracked exponentially on a run of backslashes (real Claude
    Code bodies quote escaped JSON): --save-bodies hung the analysis thread. The scan is linear."""
    import time

    from firsttoken.addon.secrets import redact_text

    hostile = '{"k": "' + "\\" * 4000 + "x " + '{"note": "' + "\\\\" * 3000
    t0 = time.perf_counter()
    redact_text(hostile * 20)
    assert time.perf_counter() - t0 < 1.0
    # what it must still find: a plain field, an escaped quote inside the value, escaped JSON
    # inside a string (an error message echoing the body), and a Python repr
    assert redact_text('{"api_key": "ab\\"cd-1234"}') == '{"api_key": "[REDACTED]"}'
    echoed = '{"error": "bad body: {\\"apiKey\\": \\"0123456789abcdef\\", \\"model\\": \\"m\\"}"}'
    out = redact_text(echoed)
    assert "0123456789abcdef" not in out and '\\"model\\": \\"m\\"' in out
    assert "hunter22" not in redact_text("got {'password': 'hunter22', 'user': 'x'}")


# -- a database another process holds locked ---------------------------------------------------------------
def test_a_locked_database_delays_rows_but_loses_none(sim, tmp_path):
    """Another process holds the write lock (a long VACUUM, a bulk import): requests are
    forwarded as usual, rows wait, and every one is written once the lock is released."""
    import sqlite3

    db = tmp_path / "locked.db"
    p = ProxyServer([sim.url], str(db), port=0)
    p.start()
    try:
        httpx.post(p.url + "/v1/chat/completions", json=CHAT, timeout=10)
        p.flush()
        holder = sqlite3.connect(db, timeout=1, isolation_level=None)
        holder.execute("BEGIN EXCLUSIVE")
        t0 = time.monotonic()
        n = 20
        for _ in range(n):
            assert httpx.post(p.url + "/v1/chat/completions", json=CHAT, timeout=10).status_code == 200
        forwarded_s = time.monotonic() - t0
        time.sleep(1.5)  # the writer meets the lock meanwhile
        holder.execute("COMMIT")
        holder.close()
        assert wait_for(lambda: len([r for r in rows(db) if r["state"] == "done"]) == n + 1, timeout=20)
    finally:
        p.stop()
    print(f"\nlocked database: {n} requests forwarded in {forwarded_s:.2f} s while locked; {n + 1}/{n + 1} rows written")
    assert forwarded_s < 10  # the lock never held traffic back


# -- memory over a long stream ------------------------------------------------------------------------------
def test_memory_stays_flat_over_a_long_stream(tmp_path):
    """A 256 MiB SSE stream (the tap keeps bounded copies, never the body) must not grow the
    proxy's memory with the stream: the proxy runs in its own process and its RSS is read."""
    n_events = 256 * 2**20 // 4096
    event = b'data: {"choices":[{"delta":{"content":"' + b"x" * 4040 + b'"}}]}\n\n'

    def answer(req):
        n = 16 if b"warm" in req.body else n_events

        def gen():
            yield b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n"
            batch = event * 16
            for _ in range(n // 16):
                yield b"%x\r\n%s\r\n" % (len(batch), batch)
            yield b"0\r\n\r\n"
        return gen()

    up = SocketUpstream(answer_each(answer))
    port = free_port()
    proc = subprocess.Popen([FT, "proxy", "--no-live", "--port", str(port), "-u", up.url, "--db", str(tmp_path / "m.db")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        from firsttoken.cli.loopback import wait_port

        wait_port(port, proc)

        def rss_mb() -> float:
            with open(f"/proc/{proc.pid}/status") as f:
                return next(int(ln.split()[1]) for ln in f if ln.startswith("VmRSS")) / 1024

        warm = {**CHAT, "messages": [{"role": "user", "content": "warm"}]}
        httpx.post(f"http://127.0.0.1:{port}/v1/chat/completions", json=warm, timeout=30)  # imports, tokenizer
        before, peak, got = rss_mb(), 0.0, 0
        with httpx.stream("POST", f"http://127.0.0.1:{port}/v1/chat/completions", json=CHAT, timeout=120) as r:
            for i, chunk in enumerate(r.iter_raw()):
                got += len(chunk)
                if i % 200 == 0:
                    peak = max(peak, rss_mb())
        peak = max(peak, rss_mb())
        time.sleep(3)  # the analysis of the finished stream (output tokens counted) runs now
        after = rss_mb()
        peak = max(peak, after)
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(30)
        up.close()
    print(f"\nlong stream: {got / 2**20:.0f} MiB streamed; proxy RSS {before:.0f} MB before, peak {peak:.0f} MB, "
          f"{after:.0f} MB after its analysis")
    assert got >= n_events * len(event)
    assert peak - before < 120, (before, peak)  # bounded copies, not the 256 MiB body


def test_a_raw_byte_that_is_not_utf8_in_a_header_or_the_path_loses_no_row(sim, tmp_path):
    """mitmproxy hands such bytes on as lone surrogates, which SQLite cannot encode: the request is
    forwarded as sent and its row is stored (with U+FFFD for the byte), never dropped."""
    db = tmp_path / "u.db"
    p = ProxyServer([sim.url], str(db), port=0)
    p.start()
    try:
        body = json.dumps(CHAT).encode()
        for head in (b"x-firsttoken-experiment: a\x9bb", b"user-agent: \xff\xfe"):
            with socket.create_connection(("127.0.0.1", p.bound_port)) as s:
                s.sendall(b"POST /v1/chat/completions?q=\xe9 HTTP/1.1\r\nHost: x\r\n" + head +
                          b"\r\ncontent-type: application/json\r\ncontent-length: %d\r\nconnection: close\r\n\r\n"
                          % len(body) + body)
                s.settimeout(10)
                resp = b""
                while chunk := s.recv(65536):
                    resp += chunk
            assert resp.startswith(b"HTTP/1.1 200")
        p.flush()
    finally:
        p.stop()
    rs = rows(db)
    assert len(rs) == 2 and all(r["state"] == "done" and r["status"] == 200 for r in rs)
    assert rs[0]["experiment"] == "a\ufffdb" and "\ufffd" in rs[0]["path"]
