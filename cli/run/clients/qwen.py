"""Qwen Code (``qwen``): its OpenAI-compatible requests go to the model's ``modelProviders.openai`` ``baseUrl``,
else ``--openai-base-url``, ``OPENAI_BASE_URL``, ``security.auth.baseUrl``. Redirected by ``--openai-base-url``
and, for ``modelProviders``, ``QWEN_CODE_SYSTEM_SETTINGS_PATH`` = a private copy of the system settings
(they beat user and project). Settings, auth type, model: docs/run.md (Client by client: Qwen Code)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

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
        flag_auth = option_value(args, ("--auth-type",))
        auth = flag_auth[1] if flag_auth else setting("security", "auth", "selectedType")[0]
        plan.key_source = ("OPENAI_API_KEY (environment, a .env file, or \"env\" in ~/.qwen/settings.json), the "
                           "envKey of its modelProviders entry, or --openai-api-key")
        if auth != "openai":
            why = (f"Qwen Code's auth type is {auth!r}" if auth else "Qwen Code has no auth type set (it would use "
                   "Qwen OAuth)")
            plan.forward_reason = (f"{why}, whose base URL firsttoken does not redirect: it runs through "
                                   "HTTPS_PROXY instead (only known LLM API hosts are recorded)")
            return
        flag_model = option_value(args, ("-m", "--model"))
        model = flag_model[1] if flag_model else ctx.var("OPENAI_MODEL") or setting("model", "name")[0]
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
            dotenv = read_dotenv(ctx.cwd / ".env").get("OPENAI_BASE_URL") or read_dotenv(
                ctx.cwd / ".qwen" / ".env").get("OPENAI_BASE_URL")
            legacy, legacy_source = setting("security", "auth", "baseUrl")
            if flag:
                url, source = flag[1], "qwen --openai-base-url"
            elif ctx.var("OPENAI_BASE_URL"):
                url, source = ctx.var("OPENAI_BASE_URL"), "$OPENAI_BASE_URL"
            elif dotenv:
                url, source = dotenv, ".env OPENAI_BASE_URL"
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
