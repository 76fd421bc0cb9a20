"""`firsttoken proxy --workers N`: several processes accept on one port, one of them analyses and records for all
(addon/workers, cli/proxy/workers.py). Real processes, a real upstream on loopback, real clients' sockets."""

from __future__ import annotations

import concurrent.futures
import http.client
import json
import os
import signal
import subprocess
import sys
import time

import pytest
from conftest import FAST, rows, start_proxy_process

from firsttoken.addon.workers import WORKER_GONE_ERROR
from firsttoken.cli.proxy.server import ProxyServer
from firsttoken.cli.proxy.workers import default_workers, parse_workers, worker_pids
from firsttoken.cli.simulate import SimConfig, SimServer

KEY = "sk-test-workers-0123456789abcd"
#: what the analysis makes of a request, whichever process forwarded it
ANALYSIS = ("model", "stream", "status", "prompt_tokens_est", "output_tokens_est", "usage_prompt_tokens",
            "usage_completion_tokens", "stream_done", "events", "output_chars", "finish_reason", "request_kind",
            "key_fingerprint", "request_bytes", "response_bytes", "error", "state", "phase")


def ask(port: int, i: int, stream: bool, content: str | None = None, history: list | None = None) -> tuple[int, bytes]:
    """One request on a connection of its own (so the kernel hands each to whichever process accepts)."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        msgs = (history or []) + [{"role": "user", "content": content or f"question number {i} " + "word " * (i % 7)}]
        c.request("POST", "/v1/chat/completions", json.dumps({"model": "gpt-4o-mini", "stream": stream, "messages": msgs}),
                  {"content-type": "application/json", "authorization": f"Bearer {KEY}"})
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


#: findings judged from the moment's timing (the proxy's own load, a stream's pace on a busy machine): they differ
#: from one run to the next whatever forwards the request
TIMED = ("proxy.", "stream.buffered", "stream.stall", "latency.")


def findings_but_timed(row: dict) -> list[str]:
    """Finding codes, without those judged from the moment's timing (``TIMED``)."""
    return sorted(f["code"] for f in json.loads(row["findings"] or "[]") if not f["code"].startswith(TIMED))


def serve_batch(sim: SimServer, db: str, workers: int, n: int) -> list[dict]:
    p = ProxyServer([sim.url], db, port=0, workers=workers)
    p.start()
    try:
        assert p.workers_ready(60), "a worker process did not start"
        with concurrent.futures.ThreadPoolExecutor(8) as ex:
            answers = list(ex.map(lambda i: ask(p.bound_port, i, stream=i % 2 == 0), range(n)))
        assert {s for s, _ in answers} == {200}
        p.flush()
    finally:
        p.stop()
    return rows(db)


def test_every_process_hands_over_and_the_analysis_is_the_same_as_one_process(tmp_path):
    with SimServer(SimConfig(**FAST)) as sim:
        one = serve_batch(sim, str(tmp_path / "one.db"), 1, 90)
        three = serve_batch(sim, str(tmp_path / "three.db"), 3, 90)
    assert len(one) == len(three) == 90  # every row written
    assert {r["proxy_worker"] for r in one} == {None}
    served = {r["proxy_worker"] for r in three}
    assert len(served) >= 2 and served <= {0, 1, 2}, served  # the workers forwarded some of them
    assert {r["proxy_pid"] for r in three} == {os.getpid()}  # the analysing process owns every row
    def key(r):
        return tuple(r[c] for c in ANALYSIS) + (tuple(findings_but_timed(r)), r["conversation_id"] is not None)
    assert sorted(map(key, one), key=repr) == sorted(map(key, three), key=repr)
    for r in three:  # timed where it was forwarded: TTFB and TTFT of a stream, every row
        assert r["ttfb_ms"] is not None and r["total_ms"] is not None
        if r["stream"]:
            assert r["ttft_ms"] is not None and r["events"] > 1
    assert KEY not in (tmp_path / "three.db").read_bytes().decode("latin-1")


def test_a_conversation_is_one_whichever_process_forwards_each_turn(tmp_path):
    db = str(tmp_path / "conv.db")
    with SimServer(SimConfig(**FAST)) as sim:
        p = ProxyServer([sim.url], db, port=0, workers=2)
        p.start()
        try:
            assert p.workers_ready(60)
            history: list = [{"role": "system", "content": "You are terse. " * 20}]
            for turn in range(10):
                q = f"turn {turn}: tell me more about topic {turn}"
                status, body = ask(p.bound_port, turn, stream=False, content=q, history=history)
                assert status == 200
                answer = json.loads(body)["choices"][0]["message"]["content"]
                history += [{"role": "user", "content": q}, {"role": "assistant", "content": answer}]
            p.flush()
        finally:
            p.stop()
    rs = rows(db)
    assert len(rs) == 10
    assert len({r["conversation_id"] for r in rs}) == 1, [(r["proxy_worker"], r["conversation_id"]) for r in rs]
    assert [r["turn"] for r in rs] == list(range(1, 11))
    if len({r["proxy_worker"] for r in rs}) == 1:
        pytest.skip("every turn happened to reach one process: nothing crossed")


def slow_sim() -> SimServer:
    return SimServer(SimConfig(ttfb_ms=20, prefill_base_ms=10, prefill_ms_per_1k_tokens=0, tpot_ms=100,
                               output_tokens=40, reasoning_tokens=0))


def streams_in_flight(port: int, n: int) -> list[concurrent.futures.Future]:
    ex = concurrent.futures.ThreadPoolExecutor(n)
    futs = [ex.submit(_read_stream, port, i) for i in range(n)]
    ex.shutdown(wait=False)
    return futs


def _read_stream(port: int, i: int) -> str:
    try:
        status, body = ask(port, i, stream=True)
        return "whole" if b"[DONE]" in body else "cut"
    except Exception as e:  # noqa: BLE001 - a stream cut by a killed worker
        return f"cut: {type(e).__name__}"


def wait_for(cond, timeout: float = 20.0) -> None:
    end = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.02)


def test_a_killed_worker_leaves_its_requests_recorded_as_cut_and_is_started_again(tmp_path, monkeypatch):
    monkeypatch.setattr("firsttoken.cli.proxy.workers.RESPAWN_MIN_S", 0.0)  # (it ran for less than the 10 s)
    db = str(tmp_path / "kill.db")
    with slow_sim() as sim:
        p = ProxyServer([sim.url], db, port=0, workers=2)
        p.start()
        try:
            assert p.workers_ready(60)
            link = p.capture.hub.links[1]
            futs = streams_in_flight(p.bound_port, 12)
            wait_for(lambda: any(f.record.phase == "streaming" for f in list(p.capture.hub.flights.values())))
            theirs = len(p.capture.hub.flights)
            assert p.capture.snapshot()["in_flight"], "the live view lists the workers' requests too"
            os.kill(link.pid, signal.SIGKILL)
            results = [f.result(60) for f in futs]
            assert link.ended.wait(10)
            assert ask(p.bound_port, 99, stream=True)[0] == 200  # the analysing process still serves the port
            wait_for(lambda: p.capture.hub.links[1] is not link, 10)
            assert p.capture.hub.links[1].ready.wait(60), "no new worker in its place"
            assert p.worker_procs[0].pid == p.capture.hub.links[1].pid != link.pid
            p.flush()
        finally:
            p.stop()
    rs = rows(db)
    assert len(rs) == 13 and {r["state"] for r in rs} == {"done"}  # no row left in flight
    cut = [r for r in rs if r["error"]]
    assert theirs >= 1 and len(cut) >= 1
    assert all(r["proxy_worker"] == 1 and r["error"].startswith(WORKER_GONE_ERROR) for r in cut)
    assert sum(1 for x in results if x != "whole") == len(cut)  # each stream the kill cut, recorded as cut


def test_stopping_drains_the_workers_streams_to_their_end(tmp_path):
    db = str(tmp_path / "drain.db")
    with slow_sim() as sim:
        p = ProxyServer([sim.url], db, port=0, workers=2, drain_seconds=20)
        p.start()
        try:
            assert p.workers_ready(60)
            futs = streams_in_flight(p.bound_port, 8)
            wait_for(lambda: p.capture.hub.flights and p.in_flight() == 8)
            p.drain()
            results = [f.result(60) for f in futs]
            p._thread.join(60)
        finally:
            p.stop()
        assert all(pr.poll() is not None for pr in p.worker_procs)
    assert results == ["whole"] * 8
    rs = rows(db)
    assert len(rs) == 8 and all(r["state"] == "done" and r["error"] is None and r["stream_done"] for r in rs)
    assert {r["proxy_worker"] for r in rs} >= {1}


def test_workers_listen_on_a_host_given_by_name(tmp_path):
    """`--host localhost --workers 2`: the shared socket is found by the address it is bound to, in every process."""
    db = str(tmp_path / "localhost.db")
    with SimServer(SimConfig(**FAST)) as sim:
        p = ProxyServer([sim.url], db, host="localhost", port=0, workers=2)
        p.start()
        try:
            assert p.workers_ready(60)
            with concurrent.futures.ThreadPoolExecutor(4) as ex:
                assert {s for s, _ in ex.map(lambda i: ask(p.bound_port, i, stream=True), range(12))} == {200}
            p.flush()
        finally:
            p.stop()
    assert len(rows(db)) == 12


def test_the_workers_option_says_what_to_pass():
    assert default_workers(1) == default_workers(2) == 1
    assert default_workers(4) == 2 and default_workers(64) == 8
    assert parse_workers("3") == 3 and parse_workers("auto") == default_workers()
    for bad in ("0", "many", "65"):
        with pytest.raises(ValueError, match="--workers"):
            parse_workers(bad)


def test_firsttoken_proxy_workers_serves_records_and_stops_with_its_workers(tmp_path):
    """The command as a person runs it: the banner, every row, SIGTERM ends every process."""
    db = tmp_path / "cli.db"
    with SimServer(SimConfig(**FAST)) as sim:
        proc, port = start_proxy_process(["--workers", "2", "-u", sim.url, "--db", str(db)])
        try:
            wait_for(lambda: worker_pids(proc.pid), 30)
            kids = worker_pids(proc.pid)
            time.sleep(1.0)  # the worker's start-up (it accepts once it listens)
            with concurrent.futures.ThreadPoolExecutor(6) as ex:
                assert {s for s, _ in ex.map(lambda i: ask(port, i, stream=True), range(30))} == {200}
        finally:
            proc.send_signal(signal.SIGTERM)
            out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, out
    assert "2 processes accept on this port" in out
    assert "all 2 processes accept connections" in out  # once the worker said it listens
    assert "30 requests" in out
    rs = rows(db)
    assert len(rs) == 30 and all(r["state"] == "done" for r in rs)
    for pid in kids:  # no worker stays behind
        assert not os.path.exists(f"/proc/{pid}") or "Z" in open(f"/proc/{pid}/stat").read().split()[2]


def test_the_worker_entry_point_refuses_a_link_that_closes(tmp_path):
    """A worker whose hub goes before it says what to serve ends at once, with an exit code."""
    import socket

    ours, theirs = socket.socketpair()
    lsock = socket.socket()
    lsock.bind(("127.0.0.1", 0))
    lsock.listen()
    p = subprocess.Popen([sys.executable, "-m", "firsttoken.cli.proxy.worker", str(theirs.fileno()),
                          str(lsock.fileno()), "1", str(os.getpid())], pass_fds=(theirs.fileno(), lsock.fileno()))
    theirs.close()
    ours.close()
    assert p.wait(30) == 1
    lsock.close()
