"""Reading clients' config files for `firsttoken run`: YAML, dotenv, JSON with comments. Every reader
returns None for a missing file and raises :class:`ConfigError` (with the file in words) for one the
client itself could not read."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any


class ConfigError(ValueError):
    pass


def read_yaml(path: Path, label: str) -> Any:
    """A YAML file's data (ruamel.yaml, which mitmproxy already brings; safe loader)."""
    if not path.is_file():
        return None
    from ruamel.yaml import YAML
    from ruamel.yaml.error import YAMLError

    try:
        return YAML(typ="safe", pure=True).load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, YAMLError) as e:
        raise ConfigError(f"{label} is not valid YAML ({str(e).splitlines()[0] if str(e) else e})") from None


def read_json(path: Path, label: str, comments: bool = False) -> Any:
    """A JSON file's data; ``comments``: JSONC (// and /* */ comments, trailing commas)."""
    if not path.is_file():
        return None
    try:
        text = path.read_text(encoding="utf-8")
        return json.loads(strip_jsonc(text) if comments else text) if text.strip() else {}
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise ConfigError(f"{label} is not valid JSON ({e})") from None


def strip_jsonc(text: str) -> str:
    """JSON with comments and trailing commas as plain JSON (strings are left alone)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(text[i:j + 1])
            i = j + 1
        elif text.startswith("//", i):
            while i < n and text[i] != "\n":
                i += 1
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            i = n if end < 0 else end + 2
        else:
            out.append(c)
            i += 1
    return re.sub(r",(\s*[}\]])", r"\1", "".join(out))


_DOTENV = re.compile(r"^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_.]*)\s*=\s*(.*?)\s*$")


def read_dotenv(path: Path) -> dict[str, str]:
    """The variables of a .env file (python-dotenv's common subset: KEY=VALUE, export, quotes, # comments)."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines() if path.is_file() else []
    except (OSError, UnicodeDecodeError):
        return {}
    out = {}
    for line in lines:
        m = _DOTENV.match(line)
        if not m or line.lstrip().startswith("#"):
            continue
        v = m.group(2)
        if len(v) >= 2 and v[0] == v[-1] and v[0] in "'\"":
            v = v[1:-1]
        else:
            v = re.sub(r"\s+#.*$", "", v)
        out[m.group(1)] = v
    return out


def git_root(cwd: Path) -> Path | None:
    for d in (cwd, *cwd.parents):
        if (d / ".git").exists():
            return d
    return None
