"""README's walkthrough, run as written in a fresh folder and a fresh shell that has only activated
the venv (as README's first command leaves it): every command exits as its comment says (0 unless
"exits N"), shows the demo's own traffic (the block marked <!-- walkthrough -->), and the output
README shows for it (<!-- walkthrough-output -->) is what the commands print."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


def walkthrough() -> list[tuple[str, int]]:
    """(command line, the exit code its comment promises: "exits N", else 0)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    m = re.search(r"<!-- walkthrough -->\s*```sh\n(.*?)```", text, re.S)
    assert m, "README has no <!-- walkthrough --> block"
    out = []
    for ln in m.group(1).splitlines():
        if ln.strip():
            cmd, _, comment = ln.partition("  #")
            code = re.search(r"\bexits (\d+)", comment)
            out.append((cmd.strip(), int(code.group(1)) if code else 0))
    return out


def shown_output() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    m = re.search(r"<!-- walkthrough-output -->\s*```\n(.*?)```", text, re.S)
    assert m, "README has no <!-- walkthrough-output --> block"
    return m.group(1)


def logs_sample() -> list[str]:
    """README's sample of `firsttoken logs` (the block after "(`firsttoken logs` at N columns, …)") and N."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    m = re.search(r"\(`firsttoken logs` at (\d+) columns[^)]*\):\s*```\n(.*?)```", text, re.S)
    assert m, "README has no logs sample that says its width"
    return int(m.group(1)), m.group(2).splitlines()


def shape(line: str) -> str:
    """A line without what differs run to run (times, ids, ports, figures, and the spaces a wider figure takes):
    its words in order, and whether it is indented."""
    line = re.sub(r"\b\d\d:\d\d:\d\d\b", "T", line)
    line = re.sub(r"\b[0-9a-f]{8}\b", "ID", line)
    line = re.sub(r"127\.0\.0\.1:\d+", "HOST", line)
    line = re.sub(r"~?\d[\d.,]*(ms|s)?", "N", line)
    return (" " if line.startswith(" ") else "") + " ".join(line.split())


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
    for line, expected in walkthrough():
        cmds = line.split("&&")
        for i, cmd in enumerate(cmds):
            argv = shlex.split(cmd)
            assert argv[0] == "firsttoken", argv
            script = f". {shlex.quote(str(activate))} && {cmd.strip()}"
            res = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True,
                                 timeout=180)
            want = expected if i == len(cmds) - 1 else 0
            assert res.returncode == want, f"{cmd!r} exited {res.returncode}, not {want}:\n{res.stdout[-2000:]}\n{res.stderr[-2000:]}"
            outputs[argv[1] + (" " + argv[2] if argv[1] == "baseline" else "")] = res.stdout + res.stderr
    assert "gpt-4o-mini" in outputs["logs"] and "→" in outputs["logs"]  # rows, with a fix under a finding
    # README's logs sample is what `logs` prints at the width it names: its header, and each of its rows with
    # the finding's lines as they wrap there (figures aside), every line as long as the table is wide
    width, sample = logs_sample()
    res = subprocess.run(["bash", "-c", f". {shlex.quote(str(activate))} && firsttoken logs --db demo.db"], cwd=tmp_path,
                         env={**env, "COLUMNS": str(width)}, capture_output=True, text=True, timeout=60)
    real = res.stdout.splitlines()
    # the same columns (a column is as wide as its widest figure: a slow machine's 4-digit TTFB widens it by one)
    assert sample[0].split() == real[0].split() and len(real[0]) <= width, (sample[0], real[0])
    shapes = [shape(x) for x in real]
    for ln in sample[1:]:
        assert len(ln) <= width and shape(ln) in shapes, (ln, "\n".join(real))
        if not ln.startswith(" "):  # a row: the columns where the sample's header puts them
            assert len(ln) == len(sample[0]), (ln, sample[0])
    assert "TTFB" in outputs["show"]
    stats = outputs["stats"].split("gpt-4o-mini", 1)[1]
    assert " 0 " not in stats[:12]
    # the demo's own fit shows the simulator's prefill (30 ms per 1k prompt tokens), its buffered stream left out;
    # on a machine so busy that the proxy itself delayed most requests, it says that instead of fitting them
    assert "left out of the fit" in stats and "stream.buffered" in stats
    fit = re.search(r"\d+ ms \+ (\d+) ms per 1k tokens", stats)
    assert (fit and 10 <= int(fit.group(1)) <= 60) or (not fit and "(proxy.saturated)" in stats), stats
    html = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert "gpt-4o-mini" in html and "<svg" in html
    # the check caught the slower round (exit 1 above), and says so as README shows it
    check, shown = outputs["baseline check"], shown_output()
    for metric in re.findall(r"((?:TTFB|TTFT|gap) P50) .*REGRESSED", shown):
        assert re.search(rf"{metric} .*REGRESSED", check), (metric, check)
    assert re.findall(r"((?:TTFB|TTFT|gap) P50) .*REGRESSED", shown) and "gpt-4o-mini: gap drifted (P50" in check
    assert "the model side got slower" in check and "within" not in check
