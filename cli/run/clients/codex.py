"""Codex: its config.toml's model provider (``profile`` → ``model_provider``, ``[model_providers.ID]
base_url``), ``openai_base_url`` or ``OPENAI_BASE_URL`` for the built-in openai provider. Redirected by
``-c KEY=…`` (beats config.toml). The clients table: docs/run.md."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path

from firsttoken.cli.run.clients.base import Client, Context, Plan, PlanError, Redirect, Upstream

_ID = re.compile(r"^[A-Za-z0-9_-]+$")  # a provider id Codex's dotted -c path can name
DEFAULT = "https://api.openai.com/v1"
#: Codex's built-in providers that reach a model server on this machine (Ollama, LM Studio)
LOCAL_BUILTINS = ("ollama", "lmstudio", "oss")
#: the providers Codex knows without a [model_providers.ID] table
BUILTIN_PROVIDERS = ("openai", *LOCAL_BUILTINS)


def config_path(env: Mapping[str, str], home: Path) -> Path:
    """Codex's config.toml: ``$CODEX_HOME/config.toml``, else ``~/.codex/config.toml``."""
    base = env.get("CODEX_HOME")
    return (Path(base).expanduser() if base else home / ".codex") / "config.toml"


class Codex(Client):
    name = "codex"
    title = "Codex"
    programs = ("codex",)
    packages = ("@openai/codex",)

    def find(self, plan: Plan, ctx: Context) -> None:
        import tomllib  # (here: `run` starts its child before anything it does not need)

        env_var = next((n for n in ("OPENAI_BASE_URL", "OPENAI_API_BASE") if ctx.var(n)), None)
        plan.upstreams["openai"] = (Upstream("openai", ctx.var(env_var), f"${env_var}") if env_var
                                    else Upstream("openai", DEFAULT, "default"))
        path = config_path(ctx.env, ctx.home)
        try:
            cfg = tomllib.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
            raise PlanError(f"{path} is not valid TOML ({e}): Codex would not start either; fix it first") from None
        profiles = cfg.get("profiles") if isinstance(cfg.get("profiles"), dict) else {}
        profile = profiles.get(cfg.get("profile"))
        chosen = (profile or {}).get("model_provider") if isinstance(profile, dict) else None
        chosen = chosen or cfg.get("model_provider") or "openai"
        providers = cfg.get("model_providers") if isinstance(cfg.get("model_providers"), dict) else {}
        p = providers.get(chosen)
        plan.key_source = "OPENAI_API_KEY (or `codex login`)"
        if isinstance(p, dict) and isinstance(p.get("env_key"), str):
            plan.key_source = f"{p['env_key']} (env_key of [model_providers.{chosen}] in {ctx.label(path)})"
        if isinstance(p, dict) and isinstance(p.get("base_url"), str) and p["base_url"].strip():
            plan.upstreams["openai"] = Upstream("openai", p["base_url"].strip(),
                                                f"{ctx.label(path)} [model_providers.{chosen}]")
            if _ID.match(chosen):
                plan.state["provider"] = chosen
            else:
                plan.forward_reason = (f"Codex provider id {chosen!r} cannot be named in a `-c` override: "
                                       "Codex runs through HTTPS_PROXY instead")
        elif chosen == "openai":
            v = cfg.get("openai_base_url")
            if isinstance(v, str) and v.strip():
                plan.upstreams["openai"] = Upstream("openai", v.strip(), f"{ctx.label(path)} openai_base_url")
            plan.state["provider"] = "openai"
        elif chosen in LOCAL_BUILTINS:  # a local server over plain HTTP: forward mode would not see it either
            plan.upstreams.clear()
            plan.cannot = (f"Codex's built-in provider {chosen!r} talks plain HTTP to a local model server, which "
                           "no Codex setting firsttoken knows relocates and HTTPS_PROXY does not carry")
        elif chosen in BUILTIN_PROVIDERS:
            plan.forward_reason = (f"Codex's built-in provider {chosen!r} has no base URL firsttoken can override: "
                                   "Codex runs through HTTPS_PROXY instead (only known LLM API hosts are recorded)")
        else:
            raise PlanError(f"{path}: model_provider = {chosen!r} is not defined, so Codex would not start: "
                            f"add [model_providers.{chosen}] (`firsttoken env codex` prints one)")

    def redirect(self, plan, bases, proxy_url, routes, env) -> Redirect:
        provider = plan.state.get("provider")
        key = "openai_base_url" if provider == "openai" else f"model_providers.{provider}.base_url"
        argv = list(plan.argv)
        argv[plan.args_at:plan.args_at] = ["-c", f"{key}={json.dumps(bases['openai'])}"]
        return Redirect(argv, {}, f"codex -c {key}=… (beats config.toml)")

    def by_hand(self, plan):
        return ["in ~/.codex/config.toml, a [model_providers.ID] with base_url = \"<the proxy's URL>/v1\" and "
                "model_provider = \"ID\" (`firsttoken env codex` prints one)"]
