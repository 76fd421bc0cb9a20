"""README's walkthrough, run as written in a fresh folder: every command exits 0 and shows the
demo's own traffic (the block marked <!-- walkthrough -->)."""

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


def test_the_readme_walkthrough_works_as_written(tmp_path):
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", "COLUMNS": "120",
           "XDG_DATA_HOME": str(tmp_path / "data"), "XDG_STATE_HOME": str(tmp_path / "state")}
    env.pop("FIRSTTOKEN_DB", None)
    outputs = {}
    for line in walkthrough():
        for cmd in line.split("&&"):
            argv = shlex.split(cmd)
            assert argv[0] == "firsttoken", argv
            res = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180)
            assert res.returncode == 0, f"{cmd!r} exited {res.returncode}:\n{res.stdout[-2000:]}\n{res.stderr[-2000:]}"
            outputs[argv[1] + (" " + argv[2] if argv[1] == "baseline" else "")] = res.stdout + res.stderr
    assert "gpt-4o-mini" in outputs["logs"] and "→" in outputs["logs"]  # rows, with a fix under a finding
    assert "TTFB" in outputs["show"]
    assert "gpt-4o-mini" in outputs["stats"] and " 0 " not in outputs["stats"].split("gpt-4o-mini", 1)[1][:12]
    assert "within" in outputs["baseline check"]
    html = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert "gpt-4o-mini" in html and "<svg" in html
