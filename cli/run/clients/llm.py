"""Simon Willison's ``llm``: the ``api_base`` of its extra-openai-models.yaml (in its user directory), and
``OPENAI_BASE_URL`` for its built-in models. Redirected by ``LLM_USER_PATH`` = a private directory with a
copy of that file (``api_base`` → the proxy) and links to the rest of the user directory, and
``OPENAI_BASE_URL``. Where that directory is, and why links: docs/run.md (Client by client: llm)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from firsttoken.cli.run.clients.base import ChildFile, Client, Context, Plan, PlanError, Redirect, add_upstream
from firsttoken.cli.run.clients.files import ConfigError, read_yaml

DEFAULT = "https://api.openai.com/v1"
EXTRA = "extra-openai-models.yaml"


def user_dir(ctx: Context) -> Path:  # llm's: $LLM_USER_PATH, else click.get_app_dir("io.datasette.llm")
    if ctx.var("LLM_USER_PATH"):
        return ctx.cwd / ctx.var("LLM_USER_PATH")
    if sys.platform == "darwin":
        return ctx.home / "Library" / "Application Support" / "io.datasette.llm"
    return Path(ctx.var("XDG_CONFIG_HOME") or ctx.home / ".config") / "io.datasette.llm"


class Llm(Client):
    name = "llm"
    title = "llm"
    programs = ("llm",)
    packages = ("llm",)

    def find(self, plan: Plan, ctx: Context) -> None:
        var = ctx.var("OPENAI_BASE_URL")
        d = user_dir(ctx)
        path = d / EXTRA
        try:
            doc = read_yaml(path, ctx.label(path))
        except ConfigError as e:
            raise PlanError(f"{e}: llm would fail on it too; fix it first") from None
        routes = {}
        for m in doc if isinstance(doc, list) else []:
            base = m.get("api_base") if isinstance(m, dict) else None
            if isinstance(base, str) and base.strip():
                routes[base.strip()] = add_upstream(plan, "openai", base, f"{ctx.label(path)} api_base of "
                                                    f"{m.get('model_id')!r}")
        if var or not routes:  # the built-in models: OPENAI_BASE_URL, else the SDK's default
            plan.state["builtin"] = add_upstream(plan, "openai", var or DEFAULT,
                                                 "$OPENAI_BASE_URL" if var else "the openai SDK's default")
        else:
            plan.unrecorded.append(("OPENAI_BASE_URL is not set: llm's built-in OpenAI models are not recorded "
                                    f"(they go to {DEFAULT} as always); the models of {EXTRA} are", DEFAULT))
        plan.state.update(dir=d, doc=doc, routes=routes)
        plan.key_source = (f"llm's keys (`llm keys set openai`, {ctx.label(d / 'keys.json')}) or OPENAI_API_KEY; "
                           f"a model of {EXTRA} uses its api_key_name")

    def redirect(self, plan, bases, proxy_url, routes, env) -> Redirect:
        builtin = plan.state.get("builtin")
        out = {"OPENAI_BASE_URL": bases[builtin]} if builtin in bases else {}
        if not plan.state.get("routes"):
            return Redirect(list(plan.argv), out, "OPENAI_BASE_URL (llm's OpenAI models use the openai SDK)")
        d: Path = plan.state["dir"]
        doc = [dict(m, api_base=bases[plan.state["routes"][m["api_base"].strip()]])
               if isinstance(m, dict) and isinstance(m.get("api_base"), str) and m["api_base"].strip() else m
               for m in plan.state["doc"]]
        files = [ChildFile(EXTRA, json.dumps(doc, indent=2) + "\n")]  # JSON is YAML
        try:
            entries = sorted(p.name for p in d.iterdir()) if d.is_dir() else []
        except OSError:
            entries = []
        # links to the rest: llm logs and reads its keys where it always does
        for name in dict.fromkeys([*entries, "logs.db"] if d.is_dir() else entries):
            if name != EXTRA:
                files.append(ChildFile(name, link=str(d / name)))
        out["LLM_USER_PATH"] = Redirect([], {}, "").dir_placeholder
        how = (f"LLM_USER_PATH = a private directory with a copy of {EXTRA} (api_base → the proxy) and links to "
               "the rest of llm's directory" + ("; OPENAI_BASE_URL for its built-in models" if builtin in bases else ""))
        return Redirect(list(plan.argv), out, how, files)

    def by_hand(self, plan):
        return [f"api_base: <the proxy's URL>/v1 in {EXTRA} (`llm --help` shows its directory)"]
