"""opencode (sst / anomalyco, npm ``opencode-ai``): ``provider.ID.options.baseURL`` from its config files,
merged, later ones winning. Redirected by ``OPENCODE_CONFIG_CONTENT`` (inline JSON, which beats every
file): the user's own plus the proxy's base URL for each provider that names one; none names one:
forward mode. Its files, in order: docs/run.md (Client by client: opencode)."""

from __future__ import annotations

import json
from pathlib import Path

from firsttoken.addon import routing
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
    """opencode's config files, lowest precedence first (the project's, found up from its directory, last)."""
    glob = Path(ctx.var("XDG_CONFIG_HOME") or ctx.home / ".config") / "opencode"
    files = [glob / n for n in ("config.json", "opencode.json", "opencode.jsonc")]
    if ctx.var("OPENCODE_CONFIG"):
        files.append(ctx.cwd / ctx.var("OPENCODE_CONFIG"))
    top = git_root(ctx.cwd) or ctx.cwd
    dirs = [d for d in (ctx.cwd, *ctx.cwd.parents) if d == top or top in d.parents]
    for d in reversed(dirs):  # the nearest last: it wins
        files += [d / "opencode.json", d / "opencode.jsonc", d / ".opencode" / "opencode.json",
                  d / ".opencode" / "opencode.jsonc"]
    return files


#: the AI SDK's community Ollama providers (npm ollama-ai-provider, ollama-ai-provider-v2): Ollama's native API,
#: whose baseURL is the server's ``/api`` (they append /chat), by default:
OLLAMA_NPM, OLLAMA_DEFAULT = "ollama-ai-provider", "http://127.0.0.1:11434/api"


def family(pid: str, provider: dict) -> str:
    """How a provider's baseURL maps to the upstream: anthropic (…/v1 + /messages), ollama (an Ollama
    provider's …/api + /chat: taken as it is) or openai (…/v1 + /chat/completions: opencode's Ollama recipe,
    an @ai-sdk/openai-compatible provider at http://localhost:11434/v1, is one)."""
    npm = str(provider.get("npm") or "")
    if npm.startswith(OLLAMA_NPM):
        return "ollama"
    return "anthropic" if npm == "@ai-sdk/anthropic" or (not npm and pid == "anthropic") else "openai"


class Opencode(Client):
    name = "opencode"
    title = "opencode"
    programs = ("opencode",)
    packages = ("opencode-ai",)
    content_var = "OPENCODE_CONFIG_CONTENT"  # inline JSON that beats every config file
    key_source = ("`opencode auth login` (~/.local/share/opencode/auth.json), the provider's options.apiKey in "
                  "opencode.json, or its variable (OPENAI_API_KEY, ANTHROPIC_API_KEY…)")

    def config_files(self, ctx: Context) -> list[Path]:
        """The client's config files, lowest precedence first (those that beat the inline config: not here)."""
        return config_files(ctx)

    def overriding_files(self, ctx: Context) -> list[Path]:
        """Config files that beat the inline config (an enterprise's managed config): none for opencode."""
        return []

    def _layers(self, paths: list[Path], ctx: Context) -> list[tuple[str, dict]]:
        layers = []
        for path in paths:
            try:
                doc = read_json(path, ctx.label(path), comments=True)
            except ConfigError as e:
                raise PlanError(f"{e}: {self.title} would not start either; fix it first") from None
            if isinstance(doc, dict):
                layers.append((ctx.label(path), doc))
        return layers

    def find(self, plan: Plan, ctx: Context) -> None:
        files = self.config_files(ctx)
        layers = self._layers(files, ctx)  # the project's too: they beat OPENCODE_CONFIG
        inline = ctx.var(self.content_var)
        if inline:
            try:
                doc = json.loads(inline)
            except ValueError as e:
                raise PlanError(f"{self.content_var} is not valid JSON ({e}): {self.title} would not start "
                                "either; fix it first") from None
            layers.append((f"${self.content_var}", doc if isinstance(doc, dict) else {}))
        plan.key_source = self.key_source
        kinds: dict[str, str] = {}
        providers = provider_bases(layers, kinds)
        fixed = provider_bases(self._layers(self.overriding_files(ctx), ctx), kinds)
        for pid, (base, where) in fixed.items():
            providers.pop(pid, None)
            plan.unrecorded.append((f"{where} = {base} beats any setting firsttoken can make for one run: that "
                                    "provider's requests are not recorded (they go there as always); to record "
                                    f"them, start `firsttoken proxy --upstream {base}` and point that setting at it",
                                    base))
        routes = {}
        for pid, (base, where) in providers.items():
            fam = kinds.get(pid, "openai")
            routes[pid] = add_upstream(plan, fam, strip_v1(base) if fam == "anthropic" else base, where,
                                       name=fam)
        plan.state.update(routes=routes, inline=inline)
        if not routes:
            plan.forward_reason = (f"no provider of {self.title}'s config names a base URL that firsttoken can "
                                   "redirect (its built-in providers use their own): it runs through HTTPS_PROXY "
                                   "instead (only known LLM API hosts are recorded)")

    def redirect(self, plan, bases, proxy_url, routes, env) -> Redirect:
        inline = json.loads(plan.state["inline"]) if plan.state.get("inline") else {}
        inline = inline if isinstance(inline, dict) else {}
        prov = inline.setdefault("provider", {})
        for pid, name in plan.state["routes"].items():
            if name in routes:
                entry = prov.setdefault(pid, {})
                fam = plan.upstreams[name].family if name in plan.upstreams else "openai"
                entry.setdefault("options", {})["baseURL"] = (
                    routing.client_base_url(proxy_url, routes[name], "ollama") if fam == "ollama"
                    else versioned_base(proxy_url, routes[name]))
        return Redirect(list(plan.argv), {self.content_var: json.dumps(inline)},
                        f"{self.content_var} = provider.ID.options.baseURL → the proxy (inline config beats "
                        f"{self.title}'s config files)")

    def by_hand(self, plan):
        return ["\"provider\": {\"ID\": {\"options\": {\"baseURL\": \"<the proxy's URL>/v1\"}}} in opencode.json"]


def provider_bases(layers: list[tuple[str, dict]], kinds: dict[str, str]) -> dict[str, tuple[str, str]]:
    """Provider id → (its base URL, where it is set) from config layers merged in order (the last wins);
    ``kinds`` is filled with each provider's family (anthropic | openai)."""
    providers: dict[str, tuple[str, str]] = {}
    for where, doc in layers:
        for pid, p in (doc.get("provider") or {}).items() if isinstance(doc.get("provider"), dict) else ():
            if not isinstance(p, dict):
                continue
            kinds[pid] = family(pid, p) if p.get("npm") or pid not in kinds else kinds[pid]
            base = (p.get("options") or {}).get("baseURL") if isinstance(p.get("options"), dict) else None
            if isinstance(base, str) and base.strip():
                providers[pid] = (base.strip(), f"{where} provider.{pid}.options.baseURL")
            elif kinds[pid] == "ollama" and pid not in providers:  # its package's default: Ollama on this machine
                providers[pid] = (OLLAMA_DEFAULT, f"the Ollama provider's default (provider.{pid} in {where})")
    return providers
