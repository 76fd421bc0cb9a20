"""Continue's CLI ``cn`` (npm ``@continuedev/cli``): ``--config FILE``, else ``$CONTINUE_GLOBAL_DIR/config.yaml``;
a model's requests go to its ``apiBase``; a ``provider: ollama`` model's to Ollama's OpenAI-compatible API
(``apiBase``, default http://localhost:11434/, plus ``v1/``). Redirected by ``--config`` = a private copy whose ``apiBase`` values
are the proxy; a Hub assistant, or no model with an ``apiBase``: forward mode. Precedence, and relative
paths in the copy: docs/run.md (Client by client: Continue's cn)."""

from __future__ import annotations

import json
from pathlib import Path

from firsttoken.addon import routing
from firsttoken.cli.run.clients.base import (
    ChildFile,
    Client,
    Context,
    Plan,
    PlanError,
    Redirect,
    add_upstream,
    option_value,
    strip_v1,
    versioned_base,
)
from firsttoken.cli.run.clients.files import ConfigError, read_yaml

COPY = "cn-config.yaml"
#: the server cn's ollama provider goes to when its model names no apiBase (it adds /v1/)
OLLAMA_DEFAULT = "http://localhost:11434"


class ContinueCli(Client):
    name = "cn"
    title = "Continue's cn"
    programs = ("cn",)
    packages = ("@continuedev/cli",)

    def find(self, plan: Plan, ctx: Context) -> None:
        flag = option_value(plan.argv[plan.args_at:], ("--config",))
        home = ctx.cwd / ctx.var("CONTINUE_GLOBAL_DIR") if ctx.var("CONTINUE_GLOBAL_DIR") else ctx.home / ".continue"
        plan.key_source = "the model's apiKey in its config.yaml (often ${{ secrets.NAME }}), or `cn login`"
        if flag and not _is_file_path(flag[1]):
            plan.forward_reason = (f"cn --config {flag[1]} is a Continue Hub assistant, whose models firsttoken "
                                   "cannot read: cn runs through HTTPS_PROXY instead (only known LLM API hosts are "
                                   "recorded)")
            return
        path = (ctx.cwd / Path(flag[1]).expanduser()) if flag else home / "config.yaml"
        if not path.is_file():
            plan.forward_reason = ("cn has no config.yaml (it would use Continue's remote default): it runs through "
                                   "HTTPS_PROXY instead (only known LLM API hosts are recorded)")
            return
        try:
            doc = read_yaml(path, ctx.label(path))
        except ConfigError as e:
            raise PlanError(f"{e}: cn would not start either; fix it first") from None
        routes = {}
        for i, m in enumerate(doc.get("models") or [] if isinstance(doc, dict) else []):
            base = m.get("apiBase") if isinstance(m, dict) else None
            name = f"{m.get('name') or m.get('model')!r}" if isinstance(m, dict) else ""
            if isinstance(m, dict) and m.get("provider") == "ollama":
                # cn's Ollama provider is Ollama's OpenAI-compatible API: apiBase (default
                # http://localhost:11434/) with "v1/" appended unless it ends so; the route is the server's root
                given = isinstance(base, str) and base.strip()
                routes[i] = add_upstream(plan, "ollama", strip_v1(base) if given else OLLAMA_DEFAULT,
                                         f"{ctx.label(path)} apiBase of {name}" if given
                                         else f"cn's default for the ollama provider of {name}")
            elif isinstance(base, str) and base.strip():
                fam = "anthropic" if m.get("provider") == "anthropic" else "openai"
                routes[i] = add_upstream(plan, fam, strip_v1(base) if fam == "anthropic" else base,
                                         f"{ctx.label(path)} apiBase of {name}")
        plan.state.update(doc=doc, routes=routes, flag=flag)
        if not routes:
            plan.forward_reason = (f"no model of {ctx.label(path)} names an apiBase (cn uses its providers' "
                                   "defaults): cn runs through HTTPS_PROXY instead (only known LLM API hosts are "
                                   "recorded)")

    def redirect(self, plan, bases, proxy_url, routes, env) -> Redirect:
        doc = json.loads(json.dumps(plan.state["doc"], default=str))
        for i, name in plan.state["routes"].items():
            if name in routes and doc["models"][i].get("provider") == "ollama":  # cn appends v1/ itself
                doc["models"][i]["apiBase"] = routing.client_base_url(proxy_url, routes[name], "ollama") + "/"
            elif name in routes:
                doc["models"][i]["apiBase"] = versioned_base(proxy_url, routes[name]) + "/"
        argv = list(plan.argv)
        # the copy lives in the private directory: a relative `uses: ./…` in it is read from there
        placeholder = Redirect([], {}, "").dir_placeholder + "/" + COPY
        flag = plan.state.get("flag")
        if flag:
            i = plan.args_at + flag[0]
            argv[i:i + (1 if argv[i].startswith("--config=") else 2)] = ["--config", placeholder]
        else:
            argv[plan.args_at:plan.args_at] = ["--config", placeholder]
        return Redirect(argv, {}, "cn --config = a private copy of its config.yaml, apiBase → the proxy",
                        [ChildFile(COPY, json.dumps(doc, indent=2) + "\n")])

    def by_hand(self, plan):
        return ["apiBase: <the proxy's URL>/v1/ for the model in ~/.continue/config.yaml"]


def _is_file_path(value: str) -> bool:
    """cn's isFilePath: a path, not a Hub slug (``owner/assistant``)."""
    return value.startswith((".", "/", "~", "file:")) or value.endswith((".yaml", ".yml")) or "\\" in value
