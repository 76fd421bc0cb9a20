"""Shell completion as docs/cli.md documents it: click's `_FIRSTTOKEN_COMPLETE=…_source`."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

FT = str(Path(sys.executable).parent / "firsttoken")


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_script_is_produced(shell):
    r = subprocess.run([FT], env={**os.environ, "_FIRSTTOKEN_COMPLETE": f"{shell}_source"}, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "_FIRSTTOKEN_COMPLETE" in r.stdout and "firsttoken" in r.stdout
    reference = (Path(__file__).parent.parent / "docs" / "cli.md").read_text()
    assert f"_FIRSTTOKEN_COMPLETE={shell}_source firsttoken" in reference


def test_completion_completes_commands_and_options():
    env = {**os.environ, "_FIRSTTOKEN_COMPLETE": "bash_complete", "COMP_WORDS": "firsttoken pr", "COMP_CWORD": "1"}
    r = subprocess.run([FT], env=env, capture_output=True, text=True, timeout=60)
    assert "plain,prune" in r.stdout.split() and "plain,proxy" in r.stdout.split()
    env.update(COMP_WORDS="firsttoken prune --", COMP_CWORD="2")
    r = subprocess.run([FT], env=env, capture_output=True, text=True, timeout=60)
    assert {"plain,--before", "plain,--dry-run", "plain,--vacuum"} <= set(r.stdout.split())


@pytest.mark.skipif(not shutil.which("bash"), reason="no bash")
def test_the_bash_script_loads_in_bash():
    script = subprocess.run([FT], env={**os.environ, "_FIRSTTOKEN_COMPLETE": "bash_source"}, capture_output=True,
                            text=True, timeout=60).stdout
    r = subprocess.run(["bash", "-c", script + "\ncomplete -p firsttoken"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "firsttoken" in r.stdout, r.stderr
