"""Every command answers through the installed `firsttoken` entry point (a lazy table that
names a moved module would only fail here), and the docs travel with the code."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from firsttoken.cli.docs import TOPICS
from firsttoken.cli.main import LAZY_COMMANDS, cli

FIRSTTOKEN = shutil.which("firsttoken") or str(__import__("pathlib").Path(sys.executable).with_name("firsttoken"))


def run(*args: str, ok: bool = True) -> subprocess.CompletedProcess:
    res = subprocess.run([FIRSTTOKEN, *args], capture_output=True, text=True, timeout=60)
    if ok:
        assert res.returncode == 0, res.stderr[-2000:]
    return res


@pytest.mark.parametrize("name", sorted(set(LAZY_COMMANDS) | set(cli.commands)))
def test_every_command_has_help(name):
    res = run(name, "--help")
    assert "Usage: firsttoken " + name in res.stdout


@pytest.mark.parametrize("topic", sorted(TOPICS))
def test_docs_print_every_topic(topic):
    res = run("docs", topic, "--raw")
    assert res.stdout.startswith("#") or res.stdout.startswith("<!--")
    assert len(res.stdout) > 500


def test_every_user_doc_is_a_docs_topic():
    """A page in docs/ that `firsttoken docs` cannot print is a page a wheel's user never sees."""
    pages = {p.name for p in (Path(__file__).resolve().parent.parent / "docs").glob("*.md")}
    assert pages == {f for f, _ in TOPICS.values()}


def test_readme_is_short_and_for_users():
    """README is the pitch, a sample, the ways in and links: measurements live in docs/performance.md."""
    text = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 160
    for diary in ("this round", "rounds ago", "µs per chunk", "bare mitmproxy"):
        assert diary not in text, diary


def test_diagnoses_prints_one_code_and_rejects_unknown_ones():
    res = run("diagnoses", "auth.missing")
    assert res.stdout.startswith("auth.missing")
    assert "hint:" in res.stdout and "when:" in res.stdout
    bad = run("diagnoses", "auth.misssing", ok=False)
    assert bad.returncode == 2 and "Did you mean auth.missing" in bad.stderr


# -- what a command says when it cannot do what it was asked (no traceback) ----------------------------
def no_traceback(res: subprocess.CompletedProcess) -> str:
    out = res.stdout + res.stderr
    assert "Traceback" not in out and not re.search(r"\wError:", out), out  # no OverflowError: ...
    return " ".join(out.split())


@pytest.mark.parametrize("args", [["proxy", "-u", "http://127.0.0.1:9", "--port", "99999"],
                                  ["proxy", "-u", "http://127.0.0.1:9", "--port", "-1"],
                                  ["proxy", "-u", "http://127.0.0.1:9", "--port", "0", "--metrics-port", "70000"],
                                  ["simulate", "--port", "99999"],
                                  ["simulate", "--port", "nine"]])
def test_a_port_out_of_range_is_refused_when_the_command_line_is_read(args, tmp_path):
    res = subprocess.run([FIRSTTOKEN, *args, "--db" if args[0] == "proxy" else "--quiet",
                          *([str(tmp_path / "p.db")] if args[0] == "proxy" else [])],
                         capture_output=True, text=True, timeout=30)
    said = no_traceback(res)
    assert res.returncode == 2, said
    assert "give a number from 0 to 65535" in said, said  # what happened and what to give instead
    assert not (tmp_path / "p.db").exists()  # refused before anything was opened


@pytest.mark.parametrize("args", [["compare", "--port", "99999"], ["compare", "--port", "0"],
                                  ["env", "openai", "--port", "0"], ["env", "openai", "-p", "nine"],
                                  ["live", "--port", "70000"], ["live", "-p", "-1"]])
def test_the_port_of_a_running_proxy_is_checked_when_the_command_line_is_read(args):
    """compare, env and live connect to a proxy: 0 is no port there, and 70000 is no port anywhere."""
    res = subprocess.run([FIRSTTOKEN, *args], capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    said = no_traceback(res)
    assert res.returncode == 2 and "give a number from 1 to 65535" in said, said


def test_a_file_that_cannot_be_written_is_a_clear_error(proxy, db_path, tmp_path):
    import httpx

    httpx.post(proxy.url + "/v1/chat/completions", timeout=30,
               json={"model": "sim-1", "stream": True, "messages": [{"role": "user", "content": "hi"}]})
    proxy.flush()
    (tmp_path / "a-file").write_text("")
    for where, why in ((tmp_path / "missing" / "out", "No such file or directory; choose an existing folder"),
                       (tmp_path / "a-file" / "out", "Not a directory; part of the path is a file")):
        for args in (["export", "-o", f"{where}.csv"], ["export", "--json", "-o", f"{where}.jsonl"],
                     ["report", "--html", f"{where}.html"]):
            res = run(*args, "--db", str(db_path), ok=False)
            said = no_traceback(res)
            assert res.returncode == 1 and f"error: cannot write {args[-1]}: {why}" in said, said


def test_demo_on_a_file_that_is_not_a_database_says_so(tmp_path):
    bad = tmp_path / "notes.db"
    bad.write_text("not a database\n")
    res = run("demo", "--db", str(bad), ok=False)
    said = no_traceback(res)
    assert res.returncode == 1 and "is not a SQLite database" in said and "--db" in said, said
    assert bad.read_text() == "not a database\n"


def test_simulate_on_a_busy_port_says_what_to_do():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        res = run("simulate", "--port", str(port), "--quiet", ok=False)
    said = no_traceback(res)
    assert res.returncode == 1, said
    assert f"cannot listen on 127.0.0.1:{port}: Address already in use. Pick another --port" in said, said
