"""The differential destination test (issue 29 item 7; docs/run.md): for every client `run` knows and every
set-up style of it (:data:`CASES`), the real client runs alone and through `firsttoken run`, each in a fresh
world with the real upstream where the set-up puts it and decoys at every other place it might read. The
places contacted must be the row's and the same both ways, and every request through `run` recorded. Offline;
CLIENT_PREFIX tries another npm install, DESTINATION_JOBS sets the runs at a time (8)."""

from __future__ import annotations

import collections
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from conftest import FAST, rows
from ollama_upstream import REPLY, OllamaUpstream
from runkit import FT, KEY, NODE_BIN, ROOT, SIM_TEXT, base_env, in_ci, run_for
from test_run_ollama import LocalServer

from firsttoken.cli.simulate.config import SimConfig
from firsttoken.cli.simulate.server import SimServer

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1500)]  # (the first row waits for them all: ~3 min here)

ANT_KEY = "sk-ant-test-1234567890123456789012"
PROMPT = "Say hi"
#: npm's registry for the clients that install packages as they start (opencode and Kilo fetch their plugin
#: SDK): nothing listens there, so they go on without it at once, offline
OFFLINE_REGISTRY = "http://127.0.0.1:9/"


class World:
    """One run's world: its HOME, working directory, environment, and upstreams by place (started on first use)."""

    def __init__(self, root: Path):
        self.root = root
        root.mkdir(parents=True)
        self.env = base_env(root, FIRSTTOKEN_STATE_DIR=str(root / "state"), XDG_RUNTIME_DIR=str(root / "runtime"),
                            npm_config_registry=OFFLINE_REGISTRY)
        self.home = Path(self.env["HOME"])
        self.cwd = root / "work"
        for d in (self.cwd, root / "state", root / "runtime"):
            d.mkdir(mode=0o700)
        self.servers: dict[str, SimServer] = {}
        self.ollamas: dict[str, OllamaUpstream] = {}  # Ollama's native API (tests/ollama_upstream.py), by place
        self.locals: dict[str, tuple[LocalServer, SimServer]] = {}  # a local server for Codex --oss, by place

    def url(self, place: str) -> str:
        """The URL of the upstream at ``place`` ("real", or the place a decoy stands for)."""
        if place not in self.servers:
            self.servers[place] = SimServer(SimConfig(**FAST)).start()
        return self.servers[place].url

    def ollama(self, place: str) -> str:
        """The URL of an Ollama at ``place`` (its native /api/chat: the simulator does not speak it)."""
        if place not in self.ollamas:
            self.ollamas[place] = OllamaUpstream().__enter__()
        return self.ollamas[place].url

    def local(self, place: str) -> str:
        """The URL of a local model server at ``place`` as Codex's --oss checks it (/api/tags, /api/version), its
        Responses API from a simulator of its own behind (tests/test_run_ollama.py LocalServer)."""
        if place not in self.locals:
            behind = SimServer(SimConfig(**FAST)).start()
            self.locals[place] = (LocalServer(behind.url).__enter__(), behind)
        return self.locals[place][0].url

    def write(self, path: Path | str, text: str) -> Path:
        p = Path(path) if Path(path).is_absolute() else self.cwd / path
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
        return p

    def hits(self) -> collections.Counter:
        """How many exchanges reached each place, as firsttoken counts them: HTTP requests, and each
        WebSocket turn in place of the upgrade that carried it (an upgrade answered 101 is no row)."""
        return collections.Counter({place: n for place, s in self.servers.items()
                                    if (n := len(s.arrivals) - s.upgrades + len(s.ws_turns))}
                                   | {place: len(u.log) for place, u in self.ollamas.items() if u.log}
                                   | {place: len(f.paths) for place, (f, _) in self.locals.items() if f.paths})

    def place_of(self, url: str) -> str | None:
        port = urlsplit(url).port
        return next((place for place, s in self.servers.items() if s.port == port), None) or \
            next((place for place, u in (*self.ollamas.items(), *((p, f) for p, (f, _) in self.locals.items()))
                  if urlsplit(u.url).port == port), None)

    def close(self) -> None:
        for s in self.servers.values():
            s.stop()
        for u in self.ollamas.values():
            u.__exit__(None, None, None)
        for front, behind in self.locals.values():
            front.__exit__(None, None, None)
            behind.stop()


@dataclass(frozen=True)
class Case:
    client: str  # the adapter's name
    style: str  # the set-up style, in docs/run.md's words
    program: tuple[str, str]  # ("node" | "venv" | "python", name): where its program is
    set_up: Callable[[World], list[str]] | None  # builds the set-up in a world; the client's arguments
    goes: str | None = "real"  # where the client itself sends its requests; None: its public default host
    limit: float = 150.0  # the longest one run may take (goes=None: how long it is watched, then stopped)
    #: goes=None: what the client prints once its outcome is known (it tried each way it has to its public host,
    #: and failed): the watch ends there rather than at ``limit``
    until: tuple[str, ...] = ()
    secs: float = 2.0  # about how long one run takes here unloaded: the longest start first
    offline: str | None = None  # why this set-up cannot run here, said instead of running it
    env: dict[str, str] = field(default_factory=dict)  # the client's quiet settings (no telemetry, no updates)
    says: str = SIM_TEXT  # what the client prints when its answer came (the simulator's text, or the Ollama's)

    @property
    def id(self) -> str:
        return f"{self.client}: {self.style}"


def program(case: Case) -> str | None:
    kind, name = case.program
    if kind == "python":
        return sys.executable
    path = (NODE_BIN if kind == "node" else ROOT / ".ci" / name / "bin") / name
    return str(path) if path.exists() else None


# -- the set-ups, client by client ---------------------------------------------------------------

def claude(place: str) -> Callable[[World], list[str]]:
    """Claude Code: managed › settings.json env (local › project › user) › ANTHROPIC_BASE_URL."""
    order = ["ANTHROPIC_BASE_URL", "user", "project", "local"]

    def set_up(w: World) -> list[str]:
        for p in order[: order.index(place) + 1]:  # the real one where the style puts it, decoys below it
            base = w.url("real" if p == place else p)
            if p == "ANTHROPIC_BASE_URL":
                w.env[p] = base
                continue
            path = {"user": w.home / ".claude" / "settings.json", "project": w.cwd / ".claude" / "settings.json",
                    "local": w.cwd / ".claude" / "settings.local.json"}[p]
            w.write(path, json.dumps({"env": {"ANTHROPIC_BASE_URL": base}}))
        w.env["OPENAI_BASE_URL"] = w.url("OPENAI_BASE_URL")  # not Claude Code's
        return ["-p", PROMPT]
    return set_up


CLAUDE_ENV = {"ANTHROPIC_API_KEY": ANT_KEY, "DISABLE_TELEMETRY": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
              "DISABLE_AUTOUPDATER": "1"}


def codex(style: str) -> Callable[[World], list[str]]:
    """Codex: -c KEY=… › profile › config.toml (a custom provider's base_url; the built-in one's
    openai_base_url); OPENAI_BASE_URL only before 0.120."""
    def set_up(w: World) -> list[str]:
        w.env["OPENAI_BASE_URL"] = w.url("OPENAI_BASE_URL")
        conf, args = "", []
        if style == "custom provider":
            conf = (f'model_provider = "gw"\nopenai_base_url = "{w.url("openai_base_url")}/v1"\n\n[model_providers.gw]\n'
                    f'name = "gw"\nbase_url = "{w.url("real")}/v1"\nenv_key = "OPENAI_API_KEY"\nwire_api = "responses"\n')
        elif style == "openai_base_url":
            conf = f'openai_base_url = "{w.url("real")}/v1"\n'
        elif style == "-c openai_base_url":
            conf = f'openai_base_url = "{w.url("config.toml")}/v1"\n'
            args = ["-c", f'openai_base_url="{w.url("real")}/v1"']
        elif style.startswith("--oss"):  # its built-in ollama provider: CODEX_OSS_BASE_URL (0.171 refuses to start
            conf = f'openai_base_url = "{w.url("openai_base_url")}/v1"\n'  # on a [model_providers.ollama] table)
            w.env["CODEX_OSS_BASE_URL"] = f"{w.local('real')}/v1"
            args = ["--oss", "--local-provider", "ollama", "-m", "sim-1"]
        elif style == "--profile (NAME.config.toml)":
            conf = f'openai_base_url = "{w.url("openai_base_url")}/v1"\n'
            w.write(w.home / ".codex" / "gw.config.toml", f'openai_base_url = "{w.url("real")}/v1"\n')
            args = ["--profile", "gw"]
        if conf:
            w.write(w.home / ".codex" / "config.toml", conf)
        return ["exec", "--skip-git-repo-check", *args, PROMPT]
    return set_up


def cline(style: str) -> Callable[[World], list[str]]:
    """Cline: CLINE_PROVIDER_SETTINGS_PATH › CLINE_DATA_DIR › --config DIR / CLINE_DIR / ~/.cline."""
    def providers(path: Path, base: str) -> None:
        settings = {"provider": "openai-compatible", "apiKey": KEY, "model": "gpt-4o-mini", "baseUrl": f"{base}/v1"}
        doc = {"version": 1, "lastUsedProvider": "openai-compatible", "modes": {},
               "providers": {"openai-compatible": {"settings": settings, "updatedAt": "2026-01-01T00:00:00.000Z",
                                                   "tokenSource": "manual"}}}  # (as `cline auth` writes it)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(doc, indent=2))

    def set_up(w: World) -> list[str]:
        mine = w.home / ".cline" / "data" / "settings"
        mine.mkdir(parents=True)
        (mine / "global-settings.json").write_text(json.dumps({"telemetryOptOut": True, "autoUpdateEnabled": False}))
        w.env["OPENAI_BASE_URL"] = w.url("OPENAI_BASE_URL")
        args = []
        if style == "~/.cline":
            providers(mine / "providers.json", w.url("real"))
        else:
            providers(mine / "providers.json", w.url("~/.cline"))
            if style == "CLINE_PROVIDER_SETTINGS_PATH":
                w.env[style] = str(w.root / "p.json")
                providers(w.root / "p.json", w.url("real"))
            else:  # --config DIR
                providers(w.root / "cfg" / "data" / "settings" / "providers.json", w.url("real"))
                args = ["--config", str(w.root / "cfg")]
        return [*args, "--json", PROMPT]
    return set_up


CLINE_ENV = {"E2E_TEST": "true", "CLINE_NO_AUTO_UPDATE": "1", "CLINE_SESSION_BACKEND_MODE": "local"}


def opencode_like(style: str, name: str) -> Callable[[World], list[str]]:
    """opencode (and Kilo, its fork, with its own files): provider.ID.options.baseURL, merged: global ‹
    $NAME_CONFIG ‹ the project's NAME.json ‹ $NAME_CONFIG_CONTENT."""
    upper = name.upper()

    def conf(base: str) -> str:
        return json.dumps({"model": "local/gpt-4o-mini", "autoupdate": False, "share": "disabled",
                           "provider": {"local": {"npm": "@ai-sdk/openai-compatible", "name": "Local",
                                                  "options": {"baseURL": f"{base}/v1", "apiKey": KEY},
                                                  "models": {"gpt-4o-mini": {"name": "gpt-4o-mini"}}}}})

    def set_up(w: World) -> list[str]:
        w.env["OPENAI_BASE_URL"] = w.url("OPENAI_BASE_URL")
        glob = w.home / ".config" / name / f"{name}.json"
        layers = ["global", f"{upper}_CONFIG", "project", f"{upper}_CONFIG_CONTENT"]
        for layer in layers[: layers.index(style) + 1]:  # the real one where the style puts it, decoys below
            text = conf(w.url("real" if layer == style else layer))
            if layer == "global":
                w.write(glob, text)
            elif layer == "project":
                w.write(w.cwd / f"{name}.json", text)
            elif layer.endswith("_CONTENT"):
                w.env[layer] = text
            else:
                w.env[layer] = str(w.write(w.root / f"my-{name}.json", text))
        if name == "kilo":  # opencode's own file: Kilo never reads it
            w.write(w.home / ".config" / "opencode" / "opencode.json", conf(w.url("opencode.json")))
        return ["run", PROMPT]
    return set_up


OPENCODE_ENV = {"OPENCODE_DISABLE_MODELS_FETCH": "1", "OPENCODE_DISABLE_AUTOUPDATE": "1",
                "OPENCODE_DISABLE_LSP_DOWNLOAD": "1", "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1"}
KILO_ENV = {"KILO_DISABLE_MODELS_FETCH": "1", "KILO_DISABLE_AUTOUPDATE": "1", "KILO_DISABLE_LSP_DOWNLOAD": "1",
            "KILO_DISABLE_DEFAULT_PLUGINS": "1", "KILO_DISABLE_SESSION_INGEST": "1", "KILO_DISABLE_CLAUDE_CODE": "1",
            "KILO_TELEMETRY_LEVEL": "off"}  # (with telemetry on, every run waits 2 s at exit for PostHog, offline)


def qwen(style: str) -> Callable[[World], list[str]]:
    """Qwen Code: the model's modelProviders baseUrl › --openai-base-url › OPENAI_BASE_URL (environment, its
    .env file) › security.auth.baseUrl; no auth type set: the environment selects it."""
    quiet = {"privacy": {"usageStatisticsEnabled": False}, "telemetry": {"enabled": False}}

    def set_up(w: World) -> list[str]:
        settings = w.home / ".qwen" / "settings.json"
        args = []
        base = {**quiet, "security": {"auth": {"selectedType": "openai"}}, "model": {"name": "gpt-4o-mini"}}
        w.env["OPENAI_API_KEY"] = KEY
        if style == "modelProviders":
            w.env["OPENAI_BASE_URL"] = w.url("OPENAI_BASE_URL")
            base["modelProviders"] = {"openai": [{"id": "gpt-4o-mini", "name": "local", "envKey": "OPENAI_API_KEY",
                                                  "baseUrl": f"{w.url('real')}/v1"}]}
            w.write(settings, json.dumps(base))
        elif style == "--openai-base-url":
            w.env["OPENAI_BASE_URL"] = w.url("OPENAI_BASE_URL")
            w.write(settings, json.dumps(base))
            args = ["--openai-base-url", f"{w.url('real')}/v1"]
        elif style == "environment only":  # its README's way: no settings.json at all
            w.env.update(OPENAI_BASE_URL=f"{w.url('real')}/v1", OPENAI_MODEL="gpt-4o-mini")
            w.write(w.cwd / ".env", f"OPENAI_BASE_URL={w.url('.env')}/v1\n")  # the environment beats it
        elif style == ".env":
            w.write(w.cwd / ".env", f"OPENAI_BASE_URL={w.url('real')}/v1\nOPENAI_MODEL=gpt-4o-mini\n")
            w.write(w.home / ".env", f"OPENAI_BASE_URL={w.url('~/.env')}/v1\n")  # only the first .env found is read
        elif style == "security.auth.baseUrl":
            base["security"]["auth"]["baseUrl"] = f"{w.url('real')}/v1"
            w.env["OPENAI_API_BASE"] = w.url("OPENAI_API_BASE")  # not Qwen Code's
            w.write(settings, json.dumps(base))
        return [*args, "-p", PROMPT]
    return set_up


AIDER_ARGS = ["--message", PROMPT, "--no-git", "--yes-always", "--no-check-update", "--analytics-disable",
              "--no-show-model-warnings", "--no-pretty", "--model", "openai/gpt-4o-mini", "--openai-api-key", KEY]


def aider(style: str) -> Callable[[World], list[str]]:
    """aider (litellm): OPENAI_BASE_URL (environment, .env, --set-env) › OPENAI_API_BASE (--openai-api-base,
    .aider.conf.yml)."""
    def set_up(w: World) -> list[str]:
        caches = w.home / ".aider" / "caches"  # its model-price cache, fresh: it fetches nothing
        w.write(caches / "model_prices_and_context_window.json", "{}")
        args = []
        if style == "--openai-api-base":
            args = ["--openai-api-base", f"{w.url('real')}/v1"]
            w.write(w.home / ".aider.conf.yml", f"openai-api-base: {w.url('~/.aider.conf.yml')}/v1\n")
        elif style == ".aider.conf.yml":
            w.write(w.cwd / ".aider.conf.yml", f"openai-api-base: {w.url('real')}/v1\n")
        elif style == "OPENAI_BASE_URL":
            w.env["OPENAI_BASE_URL"] = f"{w.url('real')}/v1"
            args = ["--openai-api-base", f"{w.url('--openai-api-base')}/v1"]
        elif style == "--set-env":
            w.env["OPENAI_BASE_URL"] = f"{w.url('OPENAI_BASE_URL')}/v1"
            args = ["--set-env", f"OPENAI_BASE_URL={w.url('real')}/v1"]
        return [*AIDER_ARGS, *args]
    return set_up


def llm(style: str) -> Callable[[World], list[str]]:
    """llm: extra-openai-models.yaml's api_base in its user directory (LLM_USER_PATH, else
    ~/.config/io.datasette.llm); its built-in models: OPENAI_BASE_URL."""
    def models(d: Path, base: str) -> None:
        d.mkdir(parents=True, exist_ok=True)
        (d / "extra-openai-models.yaml").write_text(f"- model_id: local\n  model_name: gpt-4o-mini\n"
                                                    f"  api_base: \"{base}/v1\"\n")

    def set_up(w: World) -> list[str]:
        default = w.home / ".config" / "io.datasette.llm"
        if style == "built-in model":
            w.env.update(OPENAI_BASE_URL=f"{w.url('real')}/v1", OPENAI_API_KEY=KEY)
            models(default, w.url("api_base"))
            return ["-m", "gpt-4o-mini", PROMPT]
        w.env["OPENAI_BASE_URL"] = f"{w.url('OPENAI_BASE_URL')}/v1"
        if style == "LLM_USER_PATH":
            w.env[style] = str(w.root / "llm-dir")
            models(w.root / "llm-dir", w.url("real"))
            models(default, w.url("~/.config/io.datasette.llm"))
        else:
            models(default, w.url("real"))
        return ["-m", "local", PROMPT]
    return set_up


def cn(style: str) -> Callable[[World], list[str]]:
    """Continue's cn: --config FILE › $CONTINUE_GLOBAL_DIR/config.yaml (~/.continue); a model's apiBase."""
    def yaml(base: str) -> str:
        return (f"name: local\nversion: 1.0.0\nschema: v1\nmodels:\n  - name: local\n    provider: openai\n"
                f"    model: gpt-4o-mini\n    apiBase: {base}/v1/\n    apiKey: {KEY}\n    roles: [chat]\n")

    def set_up(w: World) -> list[str]:
        w.env["OPENAI_BASE_URL"] = f"{w.url('OPENAI_BASE_URL')}/v1"
        mine = w.home / ".continue" / "config.yaml"
        if style == "~/.continue":
            w.write(mine, yaml(w.url("real")))
            return ["-p", PROMPT]
        w.write(mine, yaml(w.url("~/.continue")))
        if style == "CONTINUE_GLOBAL_DIR":
            w.env[style] = str(w.root / "cont")
            w.write(w.root / "cont" / "config.yaml", yaml(w.url("real")))
            return ["-p", PROMPT]
        return ["--config", str(w.write(w.root / "cn.yaml", yaml(w.url("real")))), "-p", PROMPT]
    return set_up


def kimi(style: str) -> Callable[[World], list[str]]:
    """Kimi CLI: the model's provider's base_url in ~/.kimi/config.toml, beaten by KIMI_BASE_URL (type kimi)
    or OPENAI_BASE_URL (openai_legacy)."""
    def set_up(w: World) -> list[str]:
        kind = "kimi" if style == "KIMI_BASE_URL" else "openai_legacy"
        conf_place = "real" if style == "config.toml" else "config.toml"
        w.write(w.home / ".kimi" / "config.toml",
                f'default_model = "local"\n\n[providers.gw]\ntype = "{kind}"\nbase_url = "{w.url(conf_place)}/v1"\n'
                f'api_key = "{KEY}"\n\n[models.local]\nprovider = "gw"\nmodel = "gpt-4o-mini"\nmax_context_size = 128000\n')
        if style == "config.toml":
            w.env["KIMI_BASE_URL"] = f"{w.url('KIMI_BASE_URL')}/v1"  # a kimi provider's, not this one's
        else:
            w.env[style] = f"{w.url('real')}/v1"
        return ["--print", "--final-message-only", "-p", PROMPT]
    return set_up


def copilot(style: str) -> Callable[[World], list[str]]:
    """GitHub Copilot CLI: bring-your-own-key's COPILOT_PROVIDER_BASE_URL (COPILOT_PROVIDER_TYPE openai or
    anthropic), never OPENAI_BASE_URL / ANTHROPIC_BASE_URL; without it, GitHub's service (a login)."""
    def set_up(w: World) -> list[str]:
        w.env.update(OPENAI_BASE_URL=f"{w.url('OPENAI_BASE_URL')}/v1", ANTHROPIC_BASE_URL=w.url("ANTHROPIC_BASE_URL"),
                     OPENAI_API_KEY=KEY)
        if style != "OPENAI_BASE_URL only":
            kind = style.split("(")[1].rstrip(")")
            w.env.update(COPILOT_OFFLINE="true", COPILOT_PROVIDER_TYPE=kind, COPILOT_PROVIDER_API_KEY=KEY,
                         COPILOT_MODEL="gpt-4o-mini",
                         COPILOT_PROVIDER_BASE_URL=w.url("real") + ("/v1" if kind == "openai" else ""))
        return ["-p", PROMPT, "-s", "--allow-all-tools", "--no-auto-update"]
    return set_up


SDK_CHILD = {
    "openai": ("import openai\nc = openai.OpenAI(max_retries=0)\n"
               "print(''.join(x.choices[0].delta.content or '' for x in c.chat.completions.create("
               "model='gpt-4o-mini', messages=[{'role': 'user', 'content': 'hi'}], stream=True) if x.choices))\n"),
    "anthropic": ("import anthropic\nc = anthropic.Anthropic(max_retries=0)\n"
                  "with c.messages.stream(model='claude-sonnet-4-5', max_tokens=64, "
                  "messages=[{'role': 'user', 'content': 'hi'}]) as s:\n    print(''.join(s.text_stream))\n"),
}


def sdk(family: str) -> Callable[[World], list[str]]:
    """Any other command (the official SDKs): the base-URL variable it already has."""
    def set_up(w: World) -> list[str]:
        if family == "openai":
            w.env.update(OPENAI_BASE_URL=f"{w.url('real')}/v1", OPENAI_API_KEY=KEY,
                         ANTHROPIC_BASE_URL=w.url("ANTHROPIC_BASE_URL"))
        else:
            w.env.update(ANTHROPIC_BASE_URL=w.url("real"), ANTHROPIC_API_KEY=ANT_KEY,
                         OPENAI_BASE_URL=f"{w.url('OPENAI_BASE_URL')}/v1")
        w.env["OPENAI_API_BASE"] = f"{w.url('OPENAI_API_BASE')}/v1"  # the SDKs do not read it
        return [str(w.write(w.cwd / "app.py", SDK_CHILD[family]))]
    return set_up


def ollama_sdk(w: World) -> list[str]:
    """A script on Ollama's Python library: the OLLAMA_HOST it has (host:port, as users write it), and a decoy
    in OPENAI_BASE_URL, which it does not read."""
    w.env.update(OLLAMA_HOST=w.ollama("real").split("://", 1)[1], OPENAI_BASE_URL=f"{w.url('OPENAI_BASE_URL')}/v1")
    return [str(w.write(w.cwd / "app.py", "import ollama\nprint(''.join(c.message.content or '' for c in ollama.chat("
                                          "model='llama3.2', messages=[{'role': 'user', 'content': 'hi'}], "
                                          "stream=True)))\n"))]


def case(client: str, style: str, prog: tuple[str, str], set_up, **kw) -> Case:
    return Case(client, style, prog, set_up, **kw)


#: every client `run` knows × every set-up style docs/run.md lists for it
CASES: list[Case] = [
    *(case("claude-code", f"{p}" if p == "ANTHROPIC_BASE_URL" else f"settings.json env ({p})", ("node", "claude"),
           claude(p), env=CLAUDE_ENV) for p in ("ANTHROPIC_BASE_URL", "user", "project", "local")),
    case("claude-code", "managed policy", ("node", "claude"), None,
         offline="its file is system-wide (/etc/claude-code/managed-settings.json): a test does not write it; `run` "
                 "takes forward mode for it (tests/test_run.py test_managed_claude_settings_fall_back_to_forward_mode)"),
    case("claude-code", "Bedrock / Vertex", ("node", "claude"), None,
         offline="Claude Code on Bedrock or Vertex signs with cloud credentials and talks to AWS/Google hosts: "
                 "no offline stand-in yet (a row to add)"),
    *(case("codex", s, ("node", "codex"), codex(s), env={"OPENAI_API_KEY": KEY})
      for s in ("custom provider", "openai_base_url", "-c openai_base_url", "--profile (NAME.config.toml)",
                "--oss (CODEX_OSS_BASE_URL)")),
    # its Responses WebSocket first, then HTTPS: done once the HTTPS transport failed too (alone the host does
    # not resolve; through `run` the proxy's 502 for it), and it only retries
    case("codex", "OPENAI_BASE_URL only", ("node", "codex"), codex("OPENAI_BASE_URL only"), goes=None, limit=60,
         until=("Falling back from WebSockets to HTTPS transport", "Reconnecting"), secs=10,
         env={"OPENAI_API_KEY": KEY}),
    case("codex", "ChatGPT login", ("node", "codex"), None,
         offline="`codex login` needs chatgpt.com; its requests go to chatgpt.com/backend-api (forward mode)"),
    *(case("cline", s, ("node", "cline"), cline(s), env=CLINE_ENV)
      for s in ("~/.cline", "CLINE_PROVIDER_SETTINGS_PATH", "--config DIR")),
    case("cline", "sandbox (--data-dir, CLINE_SANDBOX)", ("node", "cline"), None,
         offline="nothing relocates a sandbox's settings and forward mode cannot carry a loopback upstream: `run` "
                 "refuses before starting (tests/test_run_destination.py)"),
    *(case("opencode", s, ("node", "opencode"), opencode_like(s, "opencode"), env=OPENCODE_ENV, limit=300, secs=6)
      for s in ("global", "OPENCODE_CONFIG", "project", "OPENCODE_CONFIG_CONTENT")),
    *(case("kilo", s, ("node", "kilo"), opencode_like(s, "kilo"), env=KILO_ENV, limit=300, secs=12)
      for s in ("global", "KILO_CONFIG", "project", "KILO_CONFIG_CONTENT")),
    *(case("qwen-code", s, ("node", "qwen"), qwen(s), secs=3.5)
      for s in ("modelProviders", "--openai-base-url", "environment only", ".env", "security.auth.baseUrl")),
    case("qwen-code", "Qwen OAuth", ("node", "qwen"), None,
         offline="needs a login at chat.qwen.ai; `run` takes forward mode for it"),
    *(case("aider", s, ("venv", "aider"), aider(s), env={"LITELLM_LOCAL_MODEL_COST_MAP": "True"}, secs=5)
      for s in ("--openai-api-base", ".aider.conf.yml", "OPENAI_BASE_URL", "--set-env")),
    *(case("llm", s, ("venv", "llm"), llm(s)) for s in ("extra-openai-models.yaml", "LLM_USER_PATH", "built-in model")),
    *(case("cn", s, ("node", "cn"), cn(s), env={"CONTINUE_CLI_ENABLE_TELEMETRY": "0", "CONTINUE_METRICS_ENABLED": "0"})
      for s in ("~/.continue", "--config", "CONTINUE_GLOBAL_DIR")),
    case("cn", "Continue Hub assistant", ("node", "cn"), None,
         offline="a Hub assistant is fetched from hub.continue.dev after a login; `run` takes forward mode for it"),
    *(case("kimi", s, ("venv", "kimi"), kimi(s), env={"KIMI_CLI_NO_AUTO_UPDATE": "1", "KIMI_DISABLE_TELEMETRY": "1"},
           secs=3)
      for s in ("config.toml", "KIMI_BASE_URL", "OPENAI_BASE_URL")),
    *(case("copilot", s, ("node", "copilot"), copilot(s), env={"COPILOT_AUTO_UPDATE": "false"})
      for s in ("COPILOT_PROVIDER_BASE_URL (openai)", "COPILOT_PROVIDER_BASE_URL (anthropic)")),
    case("copilot", "OPENAI_BASE_URL only", ("node", "copilot"), copilot("OPENAI_BASE_URL only"), goes=None, limit=30, secs=5,
         env={"COPILOT_AUTO_UPDATE": "false"}),
    *(case("other", f"{f} SDK, {f.upper()}_BASE_URL", ("python", "python"), sdk(f)) for f in ("openai", "anthropic")),
    case("other", "ollama library, OLLAMA_HOST", ("python", "python"), ollama_sdk, says="".join(REPLY)),
    case("ollama", "the ollama CLI", ("python", "python"), None,
         offline="no package registry ships Ollama's binary; it reads OLLAMA_HOST as the library does "
                 "(tests/test_run_ollama.py checks the rule against the library's own parser)"),
]


def printed(marks: tuple[str, ...]) -> Callable[[str, str], bool]:
    """Whether a run's output (its stdout, then its stderr) holds each of ``marks``, in that order."""
    def seen(out: str, err: str) -> bool:
        text, at = out + err, 0
        for m in marks:
            if (at := text.find(m, at)) < 0:
                return False
            at += len(m)
        return True
    return seen


@dataclass
class Outcome:
    secs: float
    code: int | None
    out: str
    err: str
    hits: collections.Counter
    recorded: collections.Counter | None = None  # firsttoken's records by place ("elsewhere": any other host)
    elsewhere: list[str] = field(default_factory=list)
    cpu: float = 0.0  # the CPU seconds the run took (the client's, and through `run` firsttoken's too)


def run_once(c: Case, root: Path, through: bool) -> Outcome:
    """One run in a fresh world built by the row's set-up: the client alone, or through `firsttoken run`."""
    prog = program(c)
    assert prog is not None
    w = World(root)
    try:
        w.env.update(c.env)
        argv = [prog, *c.set_up(w)]
        db = w.root / "ft.db"
        cmd = [FT, "run", "--no-join", "--db", str(db), "--", *argv] if through else argv
        t0 = time.monotonic()
        ran = run_for(cmd, w.env, w.cwd, c.limit, until=printed(c.until) if c.until else None)
        o = Outcome(time.monotonic() - t0, ran.code, ran.out, ran.err, w.hits(), cpu=ran.cpu)
        if through:
            recs = rows(db) if db.exists() else []
            o.recorded = collections.Counter(w.place_of(r["upstream_url"] or "") or "elsewhere" for r in recs)
            o.elsewhere = [r["upstream_url"] for r in recs if w.place_of(r["upstream_url"] or "") is None]
        return o
    finally:
        w.close()


@pytest.fixture(scope="module")
def outcomes(request):
    """Every selected row's two runs, DESTINATION_JOBS at a time."""
    chosen = [item.callspec.params["c"] for item in request.session.items
              if getattr(item, "originalname", "") == "test_destination" and hasattr(item, "callspec")]
    todo = [c for c in chosen if c.set_up is not None and c.offline is None and program(c) is not None]
    root = Path(tempfile.mkdtemp(prefix="ft-destinations-"))
    results: dict[str, dict[bool, object]] = {}
    lock = threading.Lock()

    def one(job):
        i, c, through = job
        try:
            r = run_once(c, root / str(i) / ("run" if through else "alone"), through)
        except Exception as e:  # noqa: BLE001 - said by the row's own test
            r = e
        with lock:
            results.setdefault(c.id, {})[through] = r

    # the two runs of a row are in worlds of their own: they run at once too
    jobs = sorted(((i, c, through) for i, c in enumerate(todo) for through in (False, True)),
                  key=lambda job: -job[1].secs)  # the longest first: the last to end are short
    with ThreadPoolExecutor(max_workers=max(1, int(os.environ.get("DESTINATION_JOBS") or 8))) as pool:
        list(pool.map(one, jobs))
    yield results
    shutil.rmtree(root, ignore_errors=True)


@pytest.mark.parametrize("c", CASES, ids=[c.id for c in CASES])
def test_destination(outcomes, c: Case):
    if c.offline or c.set_up is None:
        pytest.skip(f"not run offline: {c.offline}")
    if program(c) is None:
        msg = f"{c.program[1]} is not installed ({NODE_BIN if c.program[0] == 'node' else '.ci/' + c.program[1]})"
        pytest.fail(msg) if in_ci() else pytest.skip(msg)
    alone, through = outcomes[c.id][False], outcomes[c.id][True]
    for result in (alone, through):
        if isinstance(result, BaseException):
            raise result
    print(f"{c.id}: alone {alone.secs:.1f}s (CPU {alone.cpu:.1f}s), through run {through.secs:.1f}s (CPU {through.cpu:.1f}s)")
    said = f"\n-- alone:\n{alone.out[-1500:]}\n{alone.err[-3000:]}\n-- through run:\n{through.out[-1500:]}\n{through.err[-3000:]}"
    # what the installed client does on its own: the row's claim (a new release that moved fails here first)
    assert set(alone.hits) == ({c.goes} if c.goes else set()), f"alone it contacted {dict(alone.hits)}{said}"
    if c.goes:
        assert alone.code == 0 and c.says in alone.out, said
        assert through.code == 0 and c.says in through.out, said
    # the same places through `firsttoken run`, and every request that reached one recorded, at it
    assert set(through.hits) == set(alone.hits), f"through run it contacted {dict(through.hits)}{said}"
    recorded = through.recorded or collections.Counter()
    assert {p: n for p, n in recorded.items() if p != "elsewhere"} == dict(through.hits), \
        f"recorded {dict(recorded)}, arrived {dict(through.hits)}{said}"
    if c.goes:
        assert not through.elsewhere, through.elsewhere
    else:  # its public default host, unreachable offline: whatever firsttoken forwarded went there, not to loopback
        assert all(urlsplit(u).hostname not in ("127.0.0.1", "localhost") for u in through.elsewhere), through.elsewhere
