"""What the tests of `firsttoken run` with real clients share: where the clients are installed (npm ones
under .ci/node, Gemini CLI under .ci/gemini, PyPI ones in venvs .ci/NAME; other installs: CLIENT_PREFIX,
GEMINI_PREFIX, CLIENT_VENVS), a clean environment, running a command with and without `firsttoken run`,
and the user's files as they were."""

from __future__ import annotations

import contextlib
import hashlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import pytest

FT = str(Path(sys.executable).parent / "firsttoken")
ROOT = Path(__file__).resolve().parent.parent
#: the npm clients: .ci/node (pinned by .ci/run), or another install (CLIENT_PREFIX=/tmp/newest) to try it
NODE_PREFIX = Path(os.environ.get("CLIENT_PREFIX") or ROOT / ".ci" / "node")
NODE_BIN = NODE_PREFIX / "node_modules" / ".bin"
#: Gemini CLI: .ci/gemini (a prefix of its own), or another (GEMINI_PREFIX=/tmp/newest-gemini)
GEMINI_BIN = Path(os.environ.get("GEMINI_PREFIX") or ROOT / ".ci" / "gemini") / "node_modules" / ".bin"
#: the PyPI clients' venvs, one per client: .ci/NAME (pinned by .ci/run), or CLIENT_VENVS/NAME (=/tmp/newest-py)
VENVS = Path(os.environ.get("CLIENT_VENVS") or ROOT / ".ci")
SIM_TEXT = "The quick brown fox"
KEY = "sk-test-123456789012345678901234"


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def base_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """A clean environment: own HOME (no user settings), no base URL or key of the developer's."""
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OPENAI_", "ANTHROPIC_", "CLAUDE_", "CODEX_", "CLINE_", "FIRSTTOKEN_"))
           or k == "FIRSTTOKEN_STATE_DIR"}
    env.update(HOME=str(home), NO_PROXY="127.0.0.1,localhost", PYTHONUNBUFFERED="1")
    env.update(extra)
    return env


def ft_run(db, argv, env, timeout=90, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([FT, "run", "--db", str(db), "--", *argv], env=env, capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL, cwd=cwd)


class Ran(NamedTuple):
    code: int | None  # its exit code; None when it had to be stopped
    out: str
    err: str
    cpu: float  # CPU seconds it and the children it waited for used (user + system)
    exited: float  # seconds from its start to its exit (or to its stop)


def run_for(argv: list[str], env: dict[str, str], cwd: Path, limit: float, grace: float = 20.0,
            until: Callable[[str, str], bool] | None = None) -> Ran:
    """Run a command (``firsttoken run -- …`` or the client itself) for at most ``limit`` seconds, or until
    ``until(stdout, stderr)`` holds (what it printed so far says the outcome is known), then SIGTERM it
    (`firsttoken run` forwards it and writes its records) and, ``grace`` seconds on, SIGKILL its process
    group. Its output is read while it runs; once it exited, what its leftover children still hold open is
    read for at most ``grace`` seconds."""
    t0 = time.monotonic()
    env = {**env, "PWD": str(cwd)}  # as a shell's cd sets it (opencode and Kilo take their directory from it)
    p = subprocess.Popen(argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, start_new_session=True)
    chunks: dict[int, list[bytes]] = {1: [], 2: []}
    readers = [threading.Thread(target=_drain, args=(pipe, chunks[fd]), daemon=True)
               for fd, pipe in ((1, p.stdout), (2, p.stderr))]
    for r in readers:
        r.start()

    def text(fd: int) -> str:
        return b"".join(chunks[fd]).decode(errors="replace")

    stopped, killed, status, usage = False, False, None, None
    while status is None:
        pid, st, ru = os.wait4(p.pid, os.WNOHANG)
        if pid:
            status, usage = st, ru
            break
        now = time.monotonic() - t0
        if not stopped and (now >= limit or (until is not None and until(text(1), text(2)))):
            p.send_signal(signal.SIGTERM)
            stopped, stop_at = True, now
        elif stopped and not killed and now >= stop_at + grace:
            os.killpg(p.pid, signal.SIGKILL)
            killed = True
        time.sleep(0.05)
    exited = time.monotonic() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    for r in readers:  # (a child it left behind may hold its output open)
        r.join(timeout=max(0.0, grace - (time.monotonic() - t0 - exited)))
    if any(r.is_alive() for r in readers):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(p.pid, signal.SIGKILL)
        for r in readers:
            r.join()
    return Ran(None if stopped else p.returncode, text(1), text(2), usage.ru_utime + usage.ru_stime, exited)


def _drain(pipe, into: list[bytes]) -> None:
    with pipe:
        while chunk := pipe.read1(65536):
            into.append(chunk)


def find_client(name: str, where: Path) -> str:
    """A client's program; missing: skip, or fail under CI (.ci/run installs it)."""
    path = where / name
    if path.exists():
        return str(path)
    msg = f"{name} is not installed in {where} (.ci/run installs it)"
    if in_ci():
        pytest.fail(msg)
    pytest.skip(msg)


def venv_bin(name: str) -> Path:
    """The bin folder of a PyPI client's venv (aider, llm, kimi): VENVS/NAME/bin."""
    return VENVS / name / "bin"


def snapshot(*paths: Path) -> dict[str, str]:
    """The user's files (hash by path): a run must leave them as they were."""
    out = {}
    for p in paths:
        for f in sorted(p.rglob("*")) if p.is_dir() else [p]:
            if f.is_file() and not f.is_symlink():
                out[str(f)] = hashlib.sha256(f.read_bytes()).hexdigest()
    return out
