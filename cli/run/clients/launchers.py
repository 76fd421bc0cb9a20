"""The launchers a client's command can start with: package runners (``npx``, ``uvx``, ``pipx run``) and
script runners (``node …/cli.js``), the options of each that take a value, and the program a word names."""

from __future__ import annotations

import re
from pathlib import Path

#: package runners: the program that runs a package's bin, with the words before the package
PACKAGE_RUNNERS = {("npx",), ("bunx",), ("pnpx",), ("pnpm", "dlx"), ("yarn", "dlx"), ("bun", "x"), ("uvx",),
                   ("uv", "tool", "run"), ("pipx", "run")}
PACKAGE_RUNNER_VALUE_OPTIONS = ("-p", "--package", "--registry", "--cache", "--prefix", "--userconfig",
                                "--from", "--spec", "--python", "--with", "--index-url", "--pip-args")
#: the options of a runner that name the package whose bin runs next (npx -p PKG BIN, uvx --from PKG BIN)
PACKAGE_OPTIONS = ("-p", "--package", "--from", "--spec")
#: script runners: the program that runs a script file (node …/cli.js), and their options that take a value
SCRIPT_RUNNERS = ("node", "nodejs", "bun")
SCRIPT_RUNNER_VALUE_OPTIONS = ("-r", "--require", "--import", "--loader", "--experimental-loader", "-C",
                               "--conditions", "--env-file", "--title", "--stack-size", "--max-old-space-size")


def program(word: str) -> str:
    """The program a command word names: ``…/bin/Codex.exe`` and ``cli.js`` are ``codex`` and ``cli``."""
    return re.sub(r"\.(exe|cmd|js|mjs|cjs)$", "", Path(word).name.lower())
