"""Qwen Code (``qwen``): its OpenAI-compatible requests go to the model's ``modelProviders.openai`` ``baseUrl``,
else ``--openai-base-url``, ``OPENAI_BASE_URL``, ``security.auth.baseUrl``. Its environment is the process's
plus one .env file and settings ``env``; with no auth type set, the environment selects it (0.15: all of
``OPENAI_API_KEY``, ``OPENAI_MODEL``, ``OPENAI_BASE_URL`` → openai). Redirected by ``--openai-base-url`` and
``QWEN_CODE_SYSTEM_SETTINGS_PATH`` = a private copy of the system settings. docs/run.md (Qwen Code)."""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from pathlib import Path

from firsttoken.cli.run.clients import installed
from firsttoken.cli.run.clients.base import (
    ChildFile,
    Client,
    Context,
    Plan,
    PlanError,
    Redirect,
    add_upstream,
    option_value,
)
from firsttoken.cli.run.clients.files import ConfigError, read_dotenv, read_json

DEFAULT = "https://api.openai.com/v1"
SYSTEM = Path("/etc/qwen-code/settings.json")


def settings_files(ctx: Context) -> list[tuple[str, Path]]:
    """(scope, path), lowest precedence first."""
    home = Path(ctx.var("QWEN_HOME")) if ctx.var("QWEN_HOME") else ctx.home / ".qwen"
    home = ctx.cwd / home.expanduser() if not home.expanduser().is_absolute() else home.expanduser()
    system = ctx.cwd / ctx.var("QWEN_CODE_SYSTEM_SETTINGS_PATH") if ctx.var("QWEN_CODE_SYSTEM_SETTINGS_PATH") else SYSTEM
    return [("user", home / "settings.json"), ("project", ctx.cwd / ".qwen" / "settings.json"), ("system", system)]


def _get(doc, *keys):
    for k in keys:
        doc = doc.get(k) if isinstance(doc, dict) else None
    return doc


class QwenEnv(dict):
    """Qwen Code's environment: the variables and where each came from (:meth:`source`)."""

    def __init__(self) -> None:
        super().__init__()
        self.sources: dict[str, str] = {}

    def add(self, values: dict, source: str) -> None:
        for k, v in values.items():  # the first wins: Qwen Code never overrides a variable already set
            if isinstance(v, str) and k not in self:
                self[k], self.sources[k] = v, source

    def source(self, name: str) -> str:
        return self.sources.get(name, f"${name}")


#: a project .env never sets these (Qwen Code's PROJECT_ENV_HARDCODED_EXCLUSIONS)
PROJECT_EXCLUDED = ("QWEN_HOME", "QWEN_RUNTIME_DIR")


def env_file(ctx: Context) -> tuple[Path | None, bool]:
    """The one .env file Qwen Code loads, and whether it is a home one: from the working directory up,
    ``.qwen/.env`` then ``.env`` in each; in the home directory (or after the root when home was not on
    the way) ``$QWEN_HOME/.env``, ``~/.qwen/.env``, ``~/.env`` (its findEnvFile, 0.15)."""
    home = ctx.home
    qwen_home = Path(ctx.var("QWEN_HOME")).expanduser() if ctx.var("QWEN_HOME") else home / ".qwen"
    at_home = [qwen_home / ".env", home / ".qwen" / ".env", home / ".env"]
    found = None
    for d in (ctx.cwd, *ctx.cwd.parents):
        found = next((c for c in (at_home if d == home else [d / ".qwen" / ".env", d / ".env"]) if c.is_file()), None)
        if found:  # (past home too: Qwen Code walks on up to the root)
            break
    if found is None and home not in (ctx.cwd, *ctx.cwd.parents):
        found = next((c for c in at_home if c.is_file()), None)
    return found, found in at_home


def effective_env(ctx: Context, docs: dict) -> QwenEnv:
    """The process's environment, then what its .env file adds, then the settings' ``env`` (system ›
    project › user), none overriding a variable already set: what Qwen Code's loadEnvironment does."""
    env = QwenEnv()
    env.update(ctx.env)
    f, home_file = env_file(ctx)
    if f is not None:
        env.add({k: v for k, v in read_dotenv(f).items() if home_file or k not in PROJECT_EXCLUDED}, ctx.label(f))
    for scope in ("system", "project", "user"):
        values = docs[scope].get("env") if isinstance(docs[scope].get("env"), dict) else {}
        env.add({k: v for k, v in values.items() if k not in PROJECT_EXCLUDED}, f"settings.json ({scope}) env")
    return env


#: the versions read: 0.15.10 selects openai by OPENAI_MODEL only; 0.24.4 by QWEN_MODEL too (between: not read)
QWEN_MODEL_IGNORED_UPTO, QWEN_MODEL_READ_FROM = (0, 15, 10), (0, 24, 4)


def auth_from_env(env: Mapping[str, str], version: tuple[int, ...] | None) -> str | None:
    """The auth type Qwen Code ``version`` selects from its environment when none is set (its
    getAuthTypeFromEnv, read in 0.15.10 and 0.24.4); "unknown" where that depends on a version not known."""
    def has(*names):
        return all(env.get(n) for n in names)

    if has("QWEN_OAUTH"):
        return "qwen-oauth"
    if has("OPENAI_API_KEY", "OPENAI_MODEL", "OPENAI_BASE_URL"):
        return "openai"
    if has("OPENAI_API_KEY", "QWEN_MODEL", "OPENAI_BASE_URL"):
        if version is not None and version >= QWEN_MODEL_READ_FROM:
            return "openai"
        if version is None or version > QWEN_MODEL_IGNORED_UPTO:
            return "unknown"
    if has("GEMINI_API_KEY", "GEMINI_MODEL"):
        return "gemini"
    if has("GOOGLE_API_KEY", "GOOGLE_MODEL") or has("GOOGLE_CLOUD_PROJECT", "GOOGLE_MODEL"):
        return "vertex-ai"
    if has("ANTHROPIC_API_KEY", "ANTHROPIC_MODEL", "ANTHROPIC_BASE_URL"):
        return "anthropic"
    return None


class QwenCode(Client):
    name = "qwen-code"
    title = "Qwen Code"
    programs = ("qwen",)
    packages = ("@qwen-code/qwen-code",)

    def find(self, plan: Plan, ctx: Context) -> None:
        args = plan.argv[plan.args_at:]
        docs = {}
        for scope, path in settings_files(ctx):
            try:
                doc = read_json(path, ctx.label(path), comments=True)
            except ConfigError as e:
                raise PlanError(f"{e}: Qwen Code would not use it either; fix it first") from None
            docs[scope] = (path, doc if isinstance(doc, dict) else {})

        def setting(*keys):  # the value of the highest scope that has it, and where it is
            for scope in ("system", "project", "user"):
                v = _get(docs[scope][1], *keys)
                if v is not None:
                    return v, f"{ctx.label(docs[scope][0])} {'.'.join(keys)}"
            return None, ""

        providers: dict = {}
        for scope in ("user", "project", "system"):  # one auth type's list: the highest scope's
            mp = docs[scope][1].get("modelProviders")
            providers.update(mp if isinstance(mp, dict) else {})
        env = effective_env(ctx, {k: docs[k][1] for k in docs})
        flag_auth = option_value(args, ("--auth-type",))
        auth = flag_auth[1] if flag_auth else setting("security", "auth", "selectedType")[0]
        if not auth:
            auth = auth_from_env(env, installed.npm_version(plan, ctx.env, ctx.cwd, self.packages))
            if auth == "unknown":
                plan.forward_reason = ("Qwen Code's version cannot be told here, and whether QWEN_MODEL (set, with "
                                       "OPENAI_API_KEY and OPENAI_BASE_URL) selects its openai auth type depends on "
                                       "it: it runs through HTTPS_PROXY instead, which keeps its destination")
                return
        plan.key_source = ("OPENAI_API_KEY (environment, a .env file, or \"env\" in ~/.qwen/settings.json), the "
                           "envKey of its modelProviders entry, or --openai-api-key")
        if auth != "openai":
            why = (f"Qwen Code's auth type is {auth!r}" if auth else "Qwen Code has no auth type set and its "
                   "environment selects none (it would use Qwen OAuth)")
            plan.forward_reason = (f"{why}, whose base URL firsttoken does not redirect: it runs through "
                                   "HTTPS_PROXY instead (only known LLM API hosts are recorded)")
            return
        flag_model = option_value(args, ("-m", "--model"))
        model = (flag_model[1] if flag_model else setting("model", "name")[0] or env.get("OPENAI_MODEL")
                 or env.get("QWEN_MODEL"))
        entries = providers.get("openai") if isinstance(providers.get("openai"), list) else []
        routes, selected = {}, None
        for e in entries:
            base = e.get("baseUrl") if isinstance(e, dict) else None
            if isinstance(base, str) and base.strip():
                routes[base.strip()] = add_upstream(plan, "openai", base, f"modelProviders.openai {e.get('id')!r} baseUrl")
                if e.get("id") == model and selected is None:
                    selected = routes[base.strip()]
        plan.state.update(providers=providers, routes=routes, system=docs["system"])
        if selected is None:  # the model falls through to the flag, the environment and the settings
            flag = option_value(args, ("--openai-base-url", "--openaiBaseUrl"))
            legacy, legacy_source = setting("security", "auth", "baseUrl")
            if flag:
                url, source = flag[1], "qwen --openai-base-url"
            elif (env.get("OPENAI_BASE_URL") or "").strip():
                url, source = env["OPENAI_BASE_URL"].strip(), env.source("OPENAI_BASE_URL")
            elif isinstance(legacy, str) and legacy.strip():
                url, source = legacy, legacy_source
            else:
                url, source = DEFAULT, "the openai SDK's default"
            plan.state["fallback"] = add_upstream(plan, "openai", url, source)

    def redirect(self, plan, bases, proxy_url, routes, env) -> Redirect:
        argv, out, files, how = list(plan.argv), {}, [], []
        fallback = plan.state.get("fallback")
        if fallback in bases:
            args = argv[plan.args_at:]
            mine = option_value(args, ("--openai-base-url", "--openaiBaseUrl"))
            if mine:  # the user's own flag: its value becomes the proxy (yargs would make two an array)
                i = plan.args_at + mine[0]
                argv[i:i + (1 if "=" in argv[i] else 2)] = ["--openai-base-url", bases[fallback]]
            else:
                argv[plan.args_at:plan.args_at] = ["--openai-base-url", bases[fallback]]
            how.append("qwen --openai-base-url … (beats OPENAI_BASE_URL and settings.json)")
        if plan.state.get("routes"):
            providers = copy.deepcopy(plan.state["providers"])
            for e in providers.get("openai") or []:
                if isinstance(e, dict) and isinstance(e.get("baseUrl"), str) and e["baseUrl"].strip() in plan.state["routes"]:
                    e["baseUrl"] = bases[plan.state["routes"][e["baseUrl"].strip()]]
            system = dict(plan.state["system"][1], modelProviders=providers)
            files.append(ChildFile("qwen-system-settings.json", json.dumps(system, indent=2) + "\n",
                                   "QWEN_CODE_SYSTEM_SETTINGS_PATH"))
            how.append("QWEN_CODE_SYSTEM_SETTINGS_PATH = a private copy of the system settings whose "
                       "modelProviders' baseUrl → the proxy (the system scope beats user and project settings)")
        return Redirect(argv, out, "; ".join(how) or "Qwen Code's settings as they are", files)

    def by_hand(self, plan):
        return ["qwen --openai-base-url <the proxy's URL>/v1 … (or baseUrl in modelProviders of ~/.qwen/settings.json)"]
