"""Text a client or an upstream controls reaches the terminal shown, never obeyed.

A real proxy records requests whose model name and experiment tag carry ESC, OSC (retitle),
CSI (clear screen), the C1 CSI 0x9b, CR, BS and rich markup; then the real CLI runs on a
pseudo-terminal and every byte it wrote is checked: only the CLI's own colour codes are escape
sequences, the hostile text is on the screen as visible escapes (``\\x1b``). Data written to a
file or a pipe stays exact.
"""

from __future__ import annotations

import json
import re
import socket
import sys
import time

import httpx
import pytest

from firsttoken.cli.proxy.server import ProxyServer
from firsttoken.cli.simulate import SimConfig, SimServer
from firsttoken.cli.terminal import ANSI, PseudoTerminal

CLI = [sys.executable, "-c", "from firsttoken.cli.main import cli; cli()"]
MODEL = "gpt-4o\x1b[31mRED\x1b]0;PWNED\x07\x1b[2J\x9b31m\r\x08\x08[bold]md[/bold]"
EXPERIMENT = b"exp\x1b]0;EXP-TITLE\x07\x1b[2J"
SGR = re.compile(r"\x1b\[[0-9;]*m")


def _raw_request(port: int, experiment: bytes) -> None:
    """A request whose x-firsttoken-experiment header carries raw control bytes (httpx refuses to send them)."""
    body = json.dumps({"model": "sim-1", "stream": True, "messages": [{"role": "user", "content": "hi"}]}).encode()
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
                  b"x-firsttoken-experiment: " + experiment + b"\r\n"
                  b"content-length: %d\r\nconnection: close\r\n\r\n" % len(body) + body)
        while s.recv(65536):
            pass


@pytest.fixture(scope="module")
def hostile_db(tmp_path_factory):
    path = tmp_path_factory.mktemp("hostile") / "hostile.db"
    cfg = SimConfig(ttfb_ms=5, prefill_base_ms=5, prefill_ms_per_1k_tokens=0, tpot_ms=1, output_tokens=4)
    with SimServer(cfg) as sim, ProxyServer([sim.url], str(path), port=0) as p:
        for _ in range(2):
            r = httpx.post(p.url + "/v1/chat/completions", timeout=30,
                           json={"model": MODEL, "stream": True, "messages": [{"role": "user", "content": "hi"}]})
            assert r.status_code == 200
        _raw_request(p.bound_port, EXPERIMENT)
        p.flush()
    return path


def on_terminal(argv: list[str], cols: int = 200) -> tuple[bytes, str]:
    """Every byte the command wrote to a cols-wide terminal, and the screen text."""
    t = PseudoTerminal(cols, 400)
    try:
        t.spawn(CLI + argv)
        assert t.proc.wait(90) == 0, t.text()
        n = -1
        while n != t.bytes:
            n = t.bytes
            time.sleep(0.05)
        raw = bytes(t.buf)  # the reader has stopped receiving
        return raw, ANSI.sub("", raw.decode("utf-8", "replace")).replace("\r", "")
    finally:
        t.close()


def obeyed(raw: bytes) -> set[str]:
    """Control characters in the output other than the CLI's own colours and the newlines."""
    text = SGR.sub("", raw.decode("utf-8", "replace"))
    return {hex(ord(c)) for c in text
            if (ord(c) < 0x20 and c not in "\r\n") or 0x7f <= ord(c) <= 0x9f or 0x202a <= ord(c) <= 0x202e}


def flat(s: str) -> str:
    return re.sub(r"\s+", "", s)


SHOWN_MODEL = r"gpt-4o\x1b[31mRED\x1b]0;PWNED\x07\x1b[2J\x9b31m\x0d\x08\x08[bold]md[/bold]"
SHOWN_EXPERIMENT = r"exp\x1b]0;EXP-TITLE\x07\x1b[2J"


@pytest.mark.parametrize("argv", [["stats"], ["stats", "--plot"], ["stats", "--by", "experiment"]])
def test_stats_shows_model_and_experiment_escaped(hostile_db, argv):
    raw, screen = on_terminal([*argv, "--db", str(hostile_db)])
    assert not obeyed(raw), f"raw control characters reached the terminal: {obeyed(raw)}\n{screen}"
    want = SHOWN_EXPERIMENT if "experiment" in argv else SHOWN_MODEL
    assert flat(want) in flat(screen), screen  # shown, escaped; brackets are not rich markup


@pytest.mark.parametrize("argv", [["logs", "--csv"], ["logs", "--json"], ["export", "--csv"], ["export", "--json"],
                                  ["export"], ["stats", "--json"], ["stats", "--json", "--by", "experiment"]])
def test_data_on_a_terminal_is_shown_not_obeyed(hostile_db, argv):
    raw, screen = on_terminal([*argv, "--db", str(hostile_db)])
    assert not obeyed(raw), f"raw control characters reached the terminal: {obeyed(raw)}\n{screen}"
    if argv[0] == "stats":  # one JSON document, its control characters as JSON escapes: the exact values
        groups = {g["group"] for g in json.loads(screen)["groups"]}
        assert (EXPERIMENT.decode() if "experiment" in argv else MODEL) in groups
    elif "--json" in argv:  # JSON Lines, the same
        assert MODEL in {json.loads(ln)["model"] for ln in screen.splitlines() if ln.startswith("{")}
    else:  # CSV has no escapes of its own: on a terminal the values show them as text
        assert SHOWN_MODEL in screen and SHOWN_EXPERIMENT in screen


def test_data_in_a_file_or_a_pipe_is_exact(hostile_db, tmp_path):
    import csv
    import io
    import subprocess

    def piped(argv):  # stdout a pipe, read without newline translation
        p = subprocess.run(CLI + [*argv, "--db", str(hostile_db)], capture_output=True, timeout=60, check=True)
        return p.stdout.decode("utf-8")

    for argv in (["logs", "--csv"], ["export", "--csv"]):
        rows = list(csv.DictReader(io.StringIO(piped(argv), newline="")))
        assert MODEL in {r["model"] for r in rows}, argv
        assert EXPERIMENT.decode() in {r["experiment"] for r in rows}, argv
    for argv in (["logs", "--json"], ["export", "--json"]):
        text = piped(argv)
        assert not obeyed(text.encode()), argv  # JSON escapes even what json.dumps leaves raw (0x9b)...
        rows = [json.loads(x) for x in text.split("\n") if x]
        assert MODEL in {r["model"] for r in rows}, argv  # ...and the values stay exact
    assert MODEL in {g["group"] for g in json.loads(piped(["stats", "--json"]))["groups"]}
    out = tmp_path / "rows.csv"
    subprocess.run(CLI + ["export", "--db", str(hostile_db), "-o", str(out)], capture_output=True, timeout=60, check=True)
    with open(out, newline="", encoding="utf-8") as fh:
        assert MODEL in {r["model"] for r in csv.DictReader(fh)}


def test_show_sessions_and_session_json_escape_every_control_character(hostile_db):
    """``show/sessions/session --json`` keep the contract of ``logs --json``: valid JSON, exact values,
    and not even the 0x9b (a C1 CSI) json.dumps leaves raw."""
    import subprocess

    def piped(argv):
        p = subprocess.run(CLI + [*argv, "--db", str(hostile_db)], capture_output=True, timeout=60, check=True)
        text = p.stdout.decode("utf-8")
        assert not obeyed(text.encode()), (argv, text)
        return text

    rid = next(r["id"] for r in map(json.loads, piped(["logs", "--json"]).splitlines()) if r["model"] == MODEL)
    assert json.loads(piped(["show", rid, "--json"]))["model"] == MODEL
    listed = [json.loads(ln) for ln in piped(["sessions", "--all", "--json"]).splitlines()]
    sid = next(s["id"] for s in listed if MODEL in s["models"])
    assert MODEL in json.loads(piped(["session", sid, "--json"]))["models"]
