"""`firsttoken run -- cline …`: where the Cline CLI would send its requests (its providers.json, read in
Cline's precedence), and the private copy of that file that sends them through the proxy instead.
What Cline reads, and why a copy: docs/run.md (Client by client: Cline CLI); by hand: docs/clients.md (Cline)."""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from firsttoken.addon import routing

#: the base URL of a provider whose settings name none (Cline's defaults); every Cline base URL holds the
#: API version, the Anthropic one too: Cline appends /chat/completions, /responses or /messages
DEFAULT_BASE_URLS = {"openai-compatible": "https://api.openai.com/v1", "openai-native": "https://api.openai.com/v1",
                     "anthropic": "https://api.anthropic.com/v1", "ollama": "http://localhost:11434"}
#: Cline's Ollama provider speaks Ollama's native API: its base URL is the server's root (Cline drops a ``/v1`` or
#: ``/api`` at its end and appends ``/api/chat``), the only one without the API version
#: ``cline auth -p openai`` and ``cline -P openai`` mean the OpenAI-compatible provider
PROVIDER_ALIASES = {"openai": "openai-compatible"}
#: the commands of the cline CLI (anything else is a prompt): none of them is a task to redirect
COMMANDS = frozenset({"auth", "config", "plugin", "skill", "connect", "mcp", "doctor", "history", "h", "hook",
                      "schedule", "hub", "dashboard", "update", "version", "kanban"})
#: options that take a value (``--opt VALUE`` or ``--opt=VALUE``), and those whose value is optional
VALUE_OPTIONS = frozenset({"-c", "--cwd", "--compaction", "--id", "-P", "--provider", "-k", "--key", "-m", "--model",
                           "-s", "--system", "-t", "--timeout", "--config", "--data-dir", "--hooks-dir"})
OPTIONAL_VALUE_OPTIONS = frozenset({"--thinking", "--reasoning-effort", "--retries", "--auto-approve"})


class ClineConfigError(ValueError):
    """Cline's provider settings cannot be read (Cline would not use them either)."""


@dataclass
class ClineArgs:
    """What in a cline command line decides where its requests go."""

    provider: str | None = None  # -P / --provider
    config_dir: str | None = None  # --config
    data_dir: str | None = None  # --data-dir (a sandbox)
    zen: bool = False  # -z / --zen: the task runs in the background hub
    command: str | None = None  # a cline command (auth, history, …), not a task


@dataclass
class ClineConfig:
    """The provider settings a cline run uses, and where its requests would go."""

    path: Path  # the providers.json Cline reads
    label: str  # the same, for messages (~ for the home directory)
    doc: dict[str, Any] = field(default_factory=dict)  # its contents ({} when the file does not exist)
    models_json: str | None = None  # models.json beside it (custom model info), copied with it
    provider: str = "cline"
    family: str | None = None  # anthropic | openai | ollama; None: firsttoken does not know its base URL
    base_url: str | None = None  # the base URL Cline would use
    source: str = ""  # where base_url came from, in words
    sandbox: str | None = None  # set: the settings file cannot be relocated (why, in words)

    def upstream(self) -> str | None:
        """The upstream firsttoken forwards to: the base URL, less the ``/v1`` an Anthropic client adds."""
        if self.base_url is None:
            return None
        url = self.base_url.strip().rstrip("/")
        if self.family == "anthropic" and routing.ends_in_v1(url):
            url = url[: -len("/v1")]
        if self.family == "ollama":
            url = re.sub(r"/(v1|api)$", "", url)  # as Cline's normalizeOllamaBaseUrl reads it
        return url


def parse_args(args: list[str]) -> ClineArgs:
    """The options of a cline command line (its arguments after the program) that matter here."""
    out, i, prompt = ClineArgs(), 0, False
    while i < len(args):
        a = args[i]
        if a == "--":
            break
        name, eq, value = a.partition("=") if a.startswith("--") else (a, "", "")
        if name in VALUE_OPTIONS:
            if not eq:
                value, i = (args[i + 1] if i + 1 < len(args) else ""), i + 1
        elif name in OPTIONAL_VALUE_OPTIONS:
            if not eq and i + 1 < len(args) and not args[i + 1].startswith("-"):
                i += 1
        elif name in ("-z", "--zen"):
            out.zen = True
        elif not a.startswith("-") and not prompt:
            if a in COMMANDS:  # a command: the rest of the line is its own (its -p is --provider)
                out.command = a
                break
            prompt = True  # the prompt; options may still follow it
        if name in ("-P", "--provider"):
            out.provider = value.strip() or None
        elif name == "--config":
            out.config_dir = value.strip() or None
        elif name == "--data-dir":
            out.data_dir = value.strip() or None
        i += 1
    return out


def settings_path(args: ClineArgs, env: Mapping[str, str], home: Path, cwd: Path) -> tuple[Path, str | None]:
    """The providers.json a cline run reads, and why it cannot be relocated (a sandbox) or None."""
    def val(name: str) -> str:
        return (env.get(name) or "").strip()

    if args.data_dir or val("CLINE_SANDBOX") == "1":  # a sandbox reads its own file, whatever the variables say
        d = args.data_dir or val("CLINE_SANDBOX_DATA_DIR")
        why = f"cline --data-dir {args.data_dir}" if args.data_dir else "CLINE_SANDBOX=1"
        d = d or str(Path(val("TMPDIR") or "/tmp") / "cline-sandbox")  # Cline's default: in os.tmpdir()
        return cwd / d / "settings" / "providers.json", why
    if val("CLINE_PROVIDER_SETTINGS_PATH"):
        return cwd / val("CLINE_PROVIDER_SETTINGS_PATH"), None
    if val("CLINE_DATA_DIR"):
        return cwd / val("CLINE_DATA_DIR") / "settings" / "providers.json", None
    base = cwd / args.config_dir if args.config_dir else (cwd / val("CLINE_DIR") if val("CLINE_DIR") else home / ".cline")
    return base / "data" / "settings" / "providers.json", None


def read_config(args: ClineArgs, env: Mapping[str, str], home: Path, cwd: Path) -> ClineConfig:
    """Cline's provider settings for this run: which provider, and the base URL it would use."""
    path, sandbox = settings_path(args, env, home, cwd)
    try:
        label = "~/" + str(path.relative_to(home))
    except ValueError:
        label = str(path)
    cfg = ClineConfig(path, label, sandbox=sandbox)
    try:
        text = path.read_text(encoding="utf-8") if path.is_file() else ""
        cfg.doc = json.loads(text) if text.strip() else {}
        models = path.parent / "models.json"
        cfg.models_json = models.read_text(encoding="utf-8") if models.is_file() else None
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise ClineConfigError(f"{label} is not valid JSON ({e}): Cline would discard it and start over with its "
                               "own provider; fix it, or set the provider again with `cline auth`") from None
    if not isinstance(cfg.doc, dict) or not isinstance(cfg.doc.get("providers", {}), dict):
        raise ClineConfigError(f"{label} is not a Cline provider settings file (no \"providers\" object): "
                               "Cline would discard it; set the provider again with `cline auth`")
    last = cfg.doc.get("lastUsedProvider")
    cfg.provider = args.provider or (last.strip() if isinstance(last, str) and last.strip() else "cline")
    cfg.provider = PROVIDER_ALIASES.get(cfg.provider, cfg.provider)
    entry = cfg.doc.get("providers", {}).get(cfg.provider)
    settings = entry.get("settings") if isinstance(entry, dict) else None
    v = settings.get("baseUrl") if isinstance(settings, dict) else None
    if isinstance(v, str) and v.strip():
        cfg.base_url, cfg.source = v.strip(), f"{label} providers.{cfg.provider}.settings.baseUrl"
    elif cfg.provider in DEFAULT_BASE_URLS:
        cfg.base_url, cfg.source = DEFAULT_BASE_URLS[cfg.provider], f"Cline's default for {cfg.provider}"
    if cfg.base_url is not None:
        cfg.family = cfg.provider if cfg.provider in ("anthropic", "ollama") else "openai"
    return cfg


def settings_copy(cfg: ClineConfig, base_url: str) -> str:
    """The text of the providers.json the child reads: the user's, its provider's baseUrl = ``base_url``
    (Cline rewrites the file it reads, ``updatedAt``, ``lastUsedProvider``: the copy, never the user's)."""
    doc = copy.deepcopy(cfg.doc) if cfg.doc else {"version": 1, "modes": {}, "providers": {}}
    providers = doc.setdefault("providers", {})
    entry = providers.get(cfg.provider)
    if not isinstance(entry, dict) or not isinstance(entry.get("settings"), dict):
        now = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        entry = providers[cfg.provider] = {"settings": {"provider": cfg.provider}, "updatedAt": now,
                                           "tokenSource": "manual"}
    entry["settings"]["baseUrl"] = base_url
    return json.dumps(doc, indent=2) + "\n"
