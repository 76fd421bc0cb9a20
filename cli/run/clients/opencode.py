"""opencode (sst / anomalyco, npm ``opencode-ai``). Its config files are merged, later ones winning
for the same key (opencode.ai/docs/config, "Precedence order"): the global config
(``$XDG_CONFIG_HOME/opencode/`` or ~/.config/opencode/: config.json, opencode.json, opencode.jsonc),
``$OPENCODE_CONFIG`` (a file), the project's opencode.json / opencode.jsonc (from the directory up to the
git root; the nearest wins) and its .opencode/ directories, then ``$OPENCODE_CONFIG_CONTENT`` (inline
JSON). A provider's requests go to ``provider.ID.options.baseURL``, else its package's default.

Redirected by ``OPENCODE_CONFIG_CONTENT``: the user's own inline config (if any) plus
``provider.ID.options.baseURL`` → the proxy for each provider that names a base URL. Providers with no
base URL in any file (opencode's built-in ones) are left alone: not recorded, and they go where they
went; when none names one, opencode runs in forward mode."""

from __future__ import annotations

import json
from pathlib import Path

from firsttoken.cli.run.clients.base import (
    Client,
    Context,
    Plan,
    PlanError,
    Redirect,
    add_upstream,
    strip_v1,
    versioned_base,
)
from firsttoken.cli.run.clients.files import ConfigError, git_root, read_json


def config_files(ctx: Context) -> list[Path]:
    """opencode's config files, lowest precedence first."""
    glob = Path(ctx.var("XDG_CONFIG_HOME") or ctx.home / ".config") / "opencode"
    files = [glob / n for n in ("config.json", "opencode.json", "opencode.jsonc")]
    if ctx.var("OPENCODE_CONFIG"):
        files.append(ctx.cwd / ctx.var("OPENCODE_CONFIG"))
    top = git_root(ctx.cwd) or ctx.cwd
    dirs = [d for d in (ctx.cwd, *ctx.cwd.parents) if d == top or top in d.parents]
    for d in reversed(dirs):  # the nearest last: it wins
        files += [d / "opencode.json", d / "opencode.jsonc"]
        files += [d / ".opencode" / "opencode.json", d / ".opencode" / "opencode.jsonc"]
    return files


def family(pid: str, provider: dict) -> str:
    npm = str(provider.get("npm") or "")
    return "anthropic" if npm == "@ai-sdk/anthropic" or (not npm and pid == "anthropic") else "openai"


class Opencode(Client):
    name = "opencode"
    title = "opencode"
    programs = ("opencode",)
    packages = ("opencode-ai",)

    def find(self, plan: Plan, ctx: Context) -> None:
        providers: dict[str, tuple[str, str]] = {}  # id → (baseURL, where)
        layers = []
        for path in config_files(ctx):
            try:
                doc = read_json(path, ctx.label(path), comments=True)
            except ConfigError as e:
                raise PlanError(f"{e}: opencode would not start either; fix it first") from None
            if isinstance(doc, dict):
                layers.append((ctx.label(path), doc))
        inline = ctx.var("OPENCODE_CONFIG_CONTENT")
        if inline:
            try:
                doc = json.loads(inline)
            except ValueError as e:
                raise PlanError(f"OPENCODE_CONFIG_CONTENT is not valid JSON ({e}): opencode would not start "
                                "either; fix it first") from None
            layers.append(("$OPENCODE_CONFIG_CONTENT", doc if isinstance(doc, dict) else {}))
        kinds = {}
        for where, doc in layers:
            for pid, p in (doc.get("provider") or {}).items() if isinstance(doc.get("provider"), dict) else ():
                if not isinstance(p, dict):
                    continue
                kinds[pid] = family(pid, p) if p.get("npm") or pid not in kinds else kinds[pid]
                base = (p.get("options") or {}).get("baseURL") if isinstance(p.get("options"), dict) else None
                if isinstance(base, str) and base.strip():
                    providers[pid] = (base.strip(), f"{where} provider.{pid}.options.baseURL")
        routes = {}
        for pid, (base, where) in providers.items():
            fam = kinds.get(pid, "openai")
            routes[pid] = add_upstream(plan, fam, strip_v1(base) if fam == "anthropic" else base, where,
                                       name=fam)
        plan.state.update(routes=routes, inline=inline)
        plan.key_source = ("`opencode auth login` (~/.local/share/opencode/auth.json), the provider's "
                           "options.apiKey in opencode.json, or its variable (OPENAI_API_KEY, ANTHROPIC_API_KEY…)")
        if not routes:
            plan.forward_reason = ("no provider of opencode's config names a base URL (its built-in providers use "
                                   "their own): opencode runs through HTTPS_PROXY instead (only known LLM API hosts "
                                   "are recorded)")

    def redirect(self, plan, bases, proxy_url, routes, env) -> Redirect:
        inline = json.loads(plan.state["inline"]) if plan.state.get("inline") else {}
        inline = inline if isinstance(inline, dict) else {}
        prov = inline.setdefault("provider", {})
        for pid, name in plan.state["routes"].items():
            if name in routes:
                entry = prov.setdefault(pid, {})
                entry.setdefault("options", {})["baseURL"] = versioned_base(proxy_url, routes[name])
        return Redirect(list(plan.argv), {"OPENCODE_CONFIG_CONTENT": json.dumps(inline)},
                        "OPENCODE_CONFIG_CONTENT = provider.ID.options.baseURL → the proxy (inline config beats "
                        "opencode's config files)")

    def by_hand(self, plan):
        return ["\"provider\": {\"ID\": {\"options\": {\"baseURL\": \"<the proxy's URL>/v1\"}}} in opencode.json"]
