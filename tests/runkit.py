"""What the tests of `firsttoken run` with real clients share: where the clients are installed (npm ones
under .ci/node, Gemini CLI under .ci/gemini, PyPI ones in venvs .ci/NAME; other installs: CLIENT_PREFIX,
GEMINI_PREFIX, CLIENT_VENVS), a clean environment, running a command with and without `firsttoken run`,
and the user's files as they were."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
from pathlib import Path

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


def run_for(argv: list[str], env: dict[str, str], cwd: Path, limit: float, grace: float = 20.0
            ) -> tuple[int | None, str, str]:
    """Run a command (``firsttoken run -- …`` or the client itself) for at most ``limit`` seconds, then
    SIGTERM it (`firsttoken run` forwards it and writes its records) and, ``grace`` seconds on, SIGKILL
    its process group. (exit code, None when it had to be stopped; stdout; stderr)."""
    p = subprocess.Popen(argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = p.communicate(timeout=limit)
        return p.returncode, out, err
    except subprocess.TimeoutExpired:
        p.send_signal(signal.SIGTERM)
    try:
        out, err = p.communicate(timeout=grace)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
    return None, out, err


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
