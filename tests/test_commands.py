"""Every command answers through the installed `firsttoken` entry point (a lazy table that
names a moved module would only fail here), and the docs travel with the code."""

from __future__ import annotations

import shutil
import subprocess
import sys

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


def test_diagnoses_prints_one_code_and_rejects_unknown_ones():
    res = run("diagnoses", "auth.missing")
    assert res.stdout.startswith("auth.missing")
    assert "hint:" in res.stdout and "when:" in res.stdout
    bad = run("diagnoses", "auth.misssing", ok=False)
    assert bad.returncode == 2 and "Did you mean auth.missing" in bad.stderr
