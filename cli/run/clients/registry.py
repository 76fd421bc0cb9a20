"""Which adapter a command line runs: by its program's name, also through a launcher."""

from __future__ import annotations

import re

from firsttoken.cli.run.clients.aider import Aider
from firsttoken.cli.run.clients.base import Client
from firsttoken.cli.run.clients.claude import ClaudeCode
from firsttoken.cli.run.clients.cline import Cline
from firsttoken.cli.run.clients.cn import ContinueCli
from firsttoken.cli.run.clients.codex import Codex
from firsttoken.cli.run.clients.copilot import CopilotCli
from firsttoken.cli.run.clients.gemini import GeminiCli
from firsttoken.cli.run.clients.kilo import Kilo
from firsttoken.cli.run.clients.kimi import KimiCli
from firsttoken.cli.run.clients.launchers import (
    PACKAGE_OPTIONS,
    PACKAGE_RUNNER_VALUE_OPTIONS,
    PACKAGE_RUNNERS,
    SCRIPT_RUNNER_VALUE_OPTIONS,
    SCRIPT_RUNNERS,
    program,
)
from firsttoken.cli.run.clients.llm import Llm
from firsttoken.cli.run.clients.ollama import Ollama
from firsttoken.cli.run.clients.opencode import Opencode
from firsttoken.cli.run.clients.qwen import QwenCode
from firsttoken.cli.run.clients.sdk import Sdk

#: every known client, then the SDK environment fallback for any other command
ADAPTERS: tuple[Client, ...] = (ClaudeCode(), Codex(), Cline(), Opencode(), QwenCode(), Aider(), Llm(), ContinueCli(),
                                Kilo(), KimiCli(),
                                GeminiCli(), CopilotCli(), Ollama())
FALLBACK: Client = Sdk()

#: clients `env` prints settings for that `run` wraps as any other command: the SDKs and curl
OTHER_CLIENTS = ("openai", "anthropic", "google-genai", "curl")


def by_name(name: str) -> Client:
    return next((a for a in ADAPTERS if a.name == name), FALLBACK)


def client_names() -> tuple[str, ...]:
    """Every client's one name, as `env`, `run`'s plans and the docs write it."""
    return (*(a.name for a in ADAPTERS), *OTHER_CLIENTS)


def client_name(word: str) -> str | None:
    """THE client-name rule: the one name of the client ``word`` names, by that name or by its
    program or package (``claude`` and ``@anthropic-ai/claude-code`` are ``claude-code``, ``qwen``
    is ``qwen-code``); None for a word that names no client firsttoken knows."""
    w = (word or "").strip().lower()
    if w in client_names():
        return w
    found = _by_program(w) or _by_package(w)
    return found.name if found else None


def unknown_client(word: str) -> str:
    """What to say about a word that names no known client, and what to do instead."""
    names = ", ".join(a.name + (f" ({'/'.join(p for p in a.programs if p != a.name)})"
                                if any(p != a.name for p in a.programs) else "") for a in ADAPTERS)
    return (f"{word!r} is not a client firsttoken knows: give one of {names}, {', '.join(OTHER_CLIENTS)} "
            "(the program's name works too); any other program: `firsttoken run -- PROGRAM …`")


def _package(word: str) -> str:  # @scope/name@1.2 -> @scope/name, name@latest -> name, name==1.2 -> name
    at = word.find("@", 1)
    word = word[:at] if at > 0 else word
    return re.split(r"[=<>!~\[]", word, maxsplit=1)[0].lower()


def _by_program(word: str) -> Client | None:
    return next((a for a in ADAPTERS if program(word) in a.programs), None)


def _by_package(word: str) -> Client | None:
    return next((a for a in ADAPTERS if _package(word) in a.packages), None) or _by_program(_package(word))


def client_of(argv: list[str]) -> tuple[Client, int]:
    """Which client a command runs (its adapter; :data:`FALLBACK` for any other), and where the
    client's own arguments start in ``argv`` (the place to add a command-line setting).

    By the program's name (``claude``, ``…/codex``, ``cline.exe``), also through a launcher: a package
    runner (``npx claude``, ``npx -y @anthropic-ai/claude-code@2 …``, ``bunx``, ``pnpm dlx``, ``yarn dlx``,
    ``npx -p @openai/codex codex``, ``uvx --from aider-chat aider``, ``pipx run llm``) or a script runner
    with the client's script (``node …/@anthropic-ai/claude-code/cli.js``, ``bun …/cline``). A command the
    launcher runs from a string (``npx -c '…'``, ``node -e``) is other.
    """
    if not argv:
        return FALLBACK, 1
    found = _by_program(argv[0])
    if found:
        return found, 1
    name = program(argv[0])
    runner = next((r for r in PACKAGE_RUNNERS if [name, *argv[1:len(r)]] == list(r)), None)
    if runner is not None:
        i, pkgs = len(runner), []
        while i < len(argv) and argv[i].startswith("-") and argv[i] != "--":
            if argv[i] in ("-c", "--call"):
                return FALLBACK, 1
            if argv[i] in PACKAGE_RUNNER_VALUE_OPTIONS:
                pkgs += [argv[i + 1]] if argv[i] in PACKAGE_OPTIONS and i + 1 < len(argv) else []
                i += 1
            elif argv[i].split("=", 1)[0] in PACKAGE_OPTIONS and "=" in argv[i]:
                pkgs.append(argv[i].split("=", 1)[1])
            i += 1
        i += 1 if i < len(argv) and argv[i] == "--" else 0
        if i >= len(argv):
            return FALLBACK, 1
        for word in [argv[i], *pkgs]:
            client = _by_package(word)
            if client:
                return client, i + 1
        return FALLBACK, 1
    if name in SCRIPT_RUNNERS:
        i = 1
        while i < len(argv) and argv[i].startswith("-"):
            if argv[i] in ("-e", "--eval", "-p", "--print", "-"):
                return FALLBACK, 1
            i += 2 if argv[i] in SCRIPT_RUNNER_VALUE_OPTIONS else 1
        if i < len(argv) and name == "bun" and argv[i] == "run":
            i += 1
        if i >= len(argv):
            return FALLBACK, 1
        script = argv[i].replace("\\", "/").lower()
        for a in ADAPTERS:
            if any(f"node_modules/{pkg}/" in script for pkg in a.packages):
                return a, i + 1
        found = _by_program(script)
        return (found, i + 1) if found else (FALLBACK, 1)
    return FALLBACK, 1
