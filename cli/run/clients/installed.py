"""Which version of a client a command runs, read without running it: the ``package.json`` of its npm
package, found from its program (``codex`` on PATH, ``…/node_modules/.bin/codex``, ``node …/codex.js``,
the native binary inside a platform package) or from an exact version a launcher names
(``npx @openai/codex@0.171.0``). None when it cannot be told: an adapter then keeps every destination."""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Mapping
from pathlib import Path

from firsttoken.cli.run.clients.base import Plan
from firsttoken.cli.run.clients.launchers import SCRIPT_RUNNERS, program

Version = tuple[int, ...]


def parse(text: str) -> Version | None:
    """``0.171.0`` (also ``0.171.0-linux-x64``, ``v1.2``) as (0, 171, 0); None when it is not one."""
    m = re.match(r"^v?(\d+)\.(\d+)(?:\.(\d+))?", text.strip())
    return tuple(int(x) for x in m.groups() if x is not None) if m else None


def npm_version(plan: Plan, env: Mapping[str, str], cwd: Path, packages: tuple[str, ...]) -> Version | None:
    """The installed version of the npm package (one of ``packages``) that ``plan.argv`` runs."""
    launcher = plan.argv[: plan.args_at]
    if not launcher:
        return None
    for word in launcher[1:]:  # npx -y @openai/codex@0.171.0 …: the version the launcher fetches
        for pkg in packages:
            if word.lower().startswith(pkg + "@"):
                return parse(word[len(pkg) + 1:]) if re.match(r"^\d+\.\d+\.\d+$", word[len(pkg) + 1:]) else None
    if len(launcher) == 1:
        target = launcher[0]
    elif program(launcher[0]) in SCRIPT_RUNNERS:
        target = launcher[-1]  # node …/@openai/codex/bin/codex.js
    else:
        return None  # a package runner resolving a name: whichever version it fetches is not ours to know
    path = _resolve(target, env, cwd)
    return _package_version(path, packages) if path else None


def _resolve(program: str, env: Mapping[str, str], cwd: Path) -> Path | None:
    if "/" in program.replace("\\", "/"):
        p = Path(program).expanduser()
        p = p if p.is_absolute() else cwd / p
    else:
        found = shutil.which(program, path=env.get("PATH", os.defpath))
        p = Path(found) if found else None
    try:
        return p.resolve(strict=True) if p else None
    except OSError:
        return None


def _package_version(path: Path, packages: tuple[str, ...]) -> Version | None:
    """The version in the nearest package.json above ``path`` that names one of ``packages`` (a platform
    package such as @openai/codex-linux-x64 is published as ``@openai/codex`` ``0.171.0-linux-x64``)."""
    for d in list(path.parents)[:8]:
        f = d / "package.json"
        if not f.is_file():
            continue
        try:
            doc = json.loads(f.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError):
            continue
        if isinstance(doc, dict) and doc.get("name") in packages and isinstance(doc.get("version"), str):
            return parse(doc["version"])
    return None
