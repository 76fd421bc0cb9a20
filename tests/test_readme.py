"""README's walkthrough, run as written in a fresh folder and a fresh shell that has only activated
the venv (as README's first command leaves it): every command exits 0 and shows the demo's own
traffic (the block marked <!-- walkthrough -->)."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


def walkthrough() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    m = re.search(r"<!-- walkthrough -->\s*```sh\n(.*?)```", text, re.S)
    assert m, "README has no <!-- walkthrough --> block"
    return [ln.split("  #", 1)[0].strip() for ln in m.group(1).splitlines() if ln.strip()]


def test_the_readme_setup_line_activates_the_venv_it_installs_into():
    """The first command leaves `firsttoken` on the PATH of the shell that ran it (no bare
    `.venv/bin/firsttoken` that the walkthrough's plain `firsttoken` would then miss)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    first = re.search(r"```sh\n(.*?)\n```", text, re.S).group(1)
    assert ". .venv/bin/activate" in first and first.endswith("firsttoken demo"), first


def test_the_readme_walkthrough_works_as_written(tmp_path):
    activate = BIN / "activate"
    assert activate.exists(), "the tests run from a venv, as README's test command makes one"
    # a fresh shell: the user's PATH without this venv, then `. .venv/bin/activate`
    path = os.pathsep.join(p for p in os.environ.get("PATH", "").split(os.pathsep) if Path(p) != BIN)
    env = {**os.environ, "PATH": path, "COLUMNS": "120",
           "XDG_DATA_HOME": str(tmp_path / "data"), "XDG_STATE_HOME": str(tmp_path / "state")}
    for var in ("FIRSTTOKEN_DB", "VIRTUAL_ENV"):
        env.pop(var, None)
    outputs = {}
    for line in walkthrough():
        for cmd in line.split("&&"):
            argv = shlex.split(cmd)
            assert argv[0] == "firsttoken", argv
            script = f". {shlex.quote(str(activate))} && {cmd.strip()}"
            res = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True,
                                 timeout=180)
            assert res.returncode == 0, f"{cmd!r} exited {res.returncode}:\n{res.stdout[-2000:]}\n{res.stderr[-2000:]}"
            outputs[argv[1] + (" " + argv[2] if argv[1] == "baseline" else "")] = res.stdout + res.stderr
    assert "gpt-4o-mini" in outputs["logs"] and "→" in outputs["logs"]  # rows, with a fix under a finding
    assert "TTFB" in outputs["show"]
    assert "gpt-4o-mini" in outputs["stats"] and " 0 " not in outputs["stats"].split("gpt-4o-mini", 1)[1][:12]
    assert "within" in outputs["baseline check"]
    html = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert "gpt-4o-mini" in html and "<svg" in html
