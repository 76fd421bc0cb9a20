"""Codex: its config.toml (``model_provider`` → ``[model_providers.ID] base_url``; ``openai_base_url`` for the
built-in provider), ``--profile NAME`` (0.171: NAME.config.toml over it; before, a [profiles.NAME] table),
``-c KEY=VALUE`` (beats them all); ``OPENAI_BASE_URL`` only for the versions that read it (before 0.120, told
by its package.json). Redirected by ``-c KEY=…``; its local providers (``--oss``, ``model_provider = "ollama"``
or ``"lmstudio"``) by ``CODEX_OSS_BASE_URL``. The clients table: docs/run.md."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path

from firsttoken.cli.run.clients import installed, ollama
from firsttoken.cli.run.clients.base import Client, Context, Plan, PlanError, Redirect, Upstream, option_value, strip_v1

_ID = re.compile(r"^[A-Za-z0-9_-]+$")  # a provider id Codex's dotted -c path can name
DEFAULT = "https://api.openai.com/v1"
#: Codex's built-in providers that reach a model server on this machine (Ollama, LM Studio; ``oss`` before
#: 0.5x), by their default port. Codex builds them itself and lets no [model_providers.ID] or -c override them
#: (model-provider-info: merge_configured_model_providers): their base URL is ``CODEX_OSS_BASE_URL``, else
#: http://localhost:``CODEX_OSS_PORT`` (else the default port)/v1, read from the environment (both named in the
#: 0.171 binary). ``--oss`` picks one: ``--local-provider ID``, else ``oss_provider`` in config.toml.
LOCAL_BUILTINS = {"ollama": 11434, "lmstudio": 1234, "oss": 11434}
#: the providers Codex knows without a [model_providers.ID] table
BUILTIN_PROVIDERS = ("openai", *LOCAL_BUILTINS)
#: OPENAI_BASE_URL sends the built-in provider elsewhere up to 0.118 (deprecated from 0.110 or so, with a
#: warning) and is ignored from 0.120 on (openai/codex#16720; 0.120.0's binary no longer names it; no 0.119
#: was published). Read from the shipped binaries' strings and checked with the real 0.171 (tests/test_destinations.py).
ENV_READ_BEFORE = (0, 119)
ENV_IGNORED_FROM = (0, 120)


def config_path(env: Mapping[str, str], home: Path) -> Path:
    """Codex's config.toml: ``$CODEX_HOME/config.toml``, else ``~/.codex/config.toml``."""
    base = env.get("CODEX_HOME")
    return (Path(base).expanduser() if base else home / ".codex") / "config.toml"


def overrides(args: list[str]) -> tuple[dict[str, object], str | None]:
    """The ``-c/--config KEY=VALUE`` overrides on Codex's command line (a VALUE that is not TOML is a
    string, as Codex reads it; the last one wins) and its ``-p/--profile``, before ``--``."""
    import tomllib

    out: dict[str, object] = {}
    profile, i = None, 0
    while i < len(args) and args[i] != "--":
        a, value = args[i], None
        if a in ("-c", "--config", "-p", "--profile") and i + 1 < len(args):
            value, i = args[i + 1], i + 1
        elif a.startswith(("--config=", "--profile=")):
            value = a.split("=", 1)[1]
        if value is not None and a.startswith(("-p", "--profile")):
            profile = value
        elif value is not None and "=" in value:
            key, raw = (x.strip() for x in value.split("=", 1))
            try:
                out[key] = tomllib.loads(f"v = {raw}")["v"]
            except tomllib.TOMLDecodeError:
                out[key] = raw
        i += 1
    return out, profile


def _merged(base: dict, over: dict) -> dict:
    """A config layer over another (tables merged key by key, as Codex layers its files)."""
    out = dict(base)
    for k, v in over.items():
        out[k] = _merged(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def _text(v: object) -> str | None:
    return v.strip() if isinstance(v, str) and v.strip() else None


class Codex(Client):
    name = "codex"
    title = "Codex"
    programs = ("codex",)
    packages = ("@openai/codex",)

    def find(self, plan: Plan, ctx: Context) -> None:
        import tomllib  # (here: `run` starts its child before anything it does not need)

        path = config_path(ctx.env, ctx.home)
        try:
            cfg = tomllib.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
            raise PlanError(f"{path} is not valid TOML ({e}): Codex would not start either; fix it first") from None
        flags, flag_profile = overrides(plan.argv[plan.args_at:])
        label = ctx.label(path)

        def setting(key: str) -> tuple[object, str]:  # a -c override, else the profile's, else the file's
            if key in flags:
                return flags[key], f"codex -c {key}"
            if isinstance(profile, dict) and key in profile:
                return profile[key], f"{profile_where} {key}"
            return cfg.get(key), f"{label} {key}"

        profile_name = flag_profile or _text(flags.get("profile")) or _text(cfg.get("profile"))
        profiles = cfg.get("profiles") if isinstance(cfg.get("profiles"), dict) else {}
        profile = profiles.get(profile_name) if profile_name else None
        profile_where = f"{label} [profiles.{profile_name}]"
        if flag_profile and not isinstance(profile, dict):  # Codex 0.171: --profile NAME reads NAME.config.toml
            layer = path.parent / f"{flag_profile}.config.toml"
            try:  # (a legacy [profiles.NAME] table instead: only the versions that still read it start)
                extra = tomllib.loads(layer.read_text(encoding="utf-8")) if layer.is_file() else {}
            except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
                raise PlanError(f"{layer} is not valid TOML ({e}): Codex would not start either; fix it first") from None
            cfg, profile, profile_where = _merged(cfg, extra), extra, ctx.label(layer)
        chosen = _text(setting("model_provider")[0]) or "openai"
        args = plan.argv[plan.args_at:]
        if "--oss" in args[:args.index("--") if "--" in args else len(args)]:
            local = option_value(args, ("--local-provider",))
            chosen = (local[1].strip() if local else None) or _text(setting("oss_provider")[0]) or ""
            if not chosen and not ctx.var("CODEX_OSS_BASE_URL"):
                plan.cannot = ("`codex --oss` names no local provider (no --local-provider and no oss_provider in "
                               "config.toml), so Codex asks which one and firsttoken cannot tell which server it "
                               "goes to: add --local-provider ollama (or lmstudio)")
                return
            chosen = chosen or "ollama"  # CODEX_OSS_BASE_URL: the same server for either provider
        providers = cfg.get("model_providers") if isinstance(cfg.get("model_providers"), dict) else {}
        p = providers.get(chosen) if isinstance(providers.get(chosen), dict) else {}
        flag_base = _text(flags.get(f"model_providers.{chosen}.base_url"))
        plan.key_source = "OPENAI_API_KEY (or `codex login`)"
        if isinstance(p.get("env_key"), str):
            plan.key_source = f"{p['env_key']} (env_key of [model_providers.{chosen}] in {label})"
        plan.upstreams["openai"] = Upstream("openai", DEFAULT, "default")
        if chosen not in BUILTIN_PROVIDERS and (flag_base or _text(p.get("base_url"))):
            source = (f"codex -c model_providers.{chosen}.base_url" if flag_base
                      else f"{label} [model_providers.{chosen}]")
            plan.upstreams["openai"] = Upstream("openai", flag_base or _text(p.get("base_url")) or "", source)
            if _ID.match(chosen):
                plan.state["provider"] = chosen
            else:
                plan.forward_reason = (f"Codex provider id {chosen!r} cannot be named in a `-c` override: "
                                       "Codex runs through HTTPS_PROXY instead")
        elif chosen == "openai":
            plan.state["provider"] = "openai"
            value, source = setting("openai_base_url")
            if _text(value):
                plan.upstreams["openai"] = Upstream("openai", _text(value) or "", source)
            else:
                self._env_base(plan, ctx)
        elif chosen in LOCAL_BUILTINS:  # a local server over plain HTTP: CODEX_OSS_BASE_URL, never HTTPS_PROXY
            plan.upstreams.clear()
            self._local(plan, ctx, chosen)
        elif chosen in providers:
            plan.forward_reason = (f"Codex's provider {chosen!r} has no base_url firsttoken can override: "
                                   "Codex runs through HTTPS_PROXY instead (only known LLM API hosts are recorded)")
        else:
            raise PlanError(f"{path}: model_provider = {chosen!r} is not defined, so Codex would not start: "
                            f"add [model_providers.{chosen}] (`firsttoken env codex` prints one)")

    def _local(self, plan: Plan, ctx: Context, provider: str) -> None:
        """A built-in local provider: the server it goes to, as a route to the server's root (its base URL less
        /v1: Codex's Ollama support also calls /api/tags, /api/pull … on the base URL less its /v1)."""
        url, source = ctx.var("CODEX_OSS_BASE_URL"), "$CODEX_OSS_BASE_URL"
        if not url:
            port = ctx.var("CODEX_OSS_PORT")
            port = port if port.isdigit() and int(port) < 65536 else str(LOCAL_BUILTINS[provider])
            url = f"http://localhost:{port}/v1"
            source = f"Codex's default for its {provider} provider" + (" ($CODEX_OSS_PORT)" if ctx.var("CODEX_OSS_PORT") else "")
        root = strip_v1(url)
        versioned = root != url.strip().rstrip("/")
        plan.upstreams[provider] = Upstream(ollama.FAMILY if versioned else "cloud", root if versioned else url, source)
        plan.state.update(provider=provider, local="/v1" if versioned else "")
        plan.key_source = "none: Codex's local providers send no key"

    def _env_base(self, plan: Plan, ctx: Context) -> None:
        """The built-in provider with no openai_base_url: OPENAI_BASE_URL, for the versions that read it."""
        var = next((n for n in ("OPENAI_BASE_URL", "OPENAI_API_BASE") if ctx.var(n)), None)
        if var is None:
            return
        version = installed.npm_version(plan, ctx.env, ctx.cwd, self.packages)
        shown = ".".join(map(str, version)) if version else "unknown"
        if var == "OPENAI_API_BASE" or (version is not None and version >= ENV_IGNORED_FROM):
            plan.notes.append(f"${var} is set, but Codex {shown} does not read it: it goes to {DEFAULT} (set "
                              "openai_base_url in config.toml to send it elsewhere)")
        elif version is not None and version < ENV_READ_BEFORE:
            plan.upstreams["openai"] = Upstream("openai", ctx.var(var), f"${var} (read by Codex {shown})")
        else:  # which way it goes depends on the version: forward mode keeps either destination
            plan.forward_reason = (f"$OPENAI_BASE_URL is set and Codex's version is {shown} here (Codex before 0.120 "
                                   "goes there, later ones ignore it): Codex runs through HTTPS_PROXY instead, which "
                                   "keeps its destination (only known LLM API hosts are recorded)")

    def redirect(self, plan, bases, proxy_url, routes, env) -> Redirect:
        provider = plan.state.get("provider")
        if "local" in plan.state:  # CODEX_OSS_BASE_URL: Codex's only setting for its local providers
            return Redirect(list(plan.argv), {"CODEX_OSS_BASE_URL": bases[provider] + plan.state["local"]},
                            f"CODEX_OSS_BASE_URL=… (Codex's {provider} provider)")
        key = "openai_base_url" if provider == "openai" else f"model_providers.{provider}.base_url"
        argv = list(plan.argv)
        head, args = argv[:plan.args_at], _without_override(argv[plan.args_at:], key)
        return Redirect(head + ["-c", f"{key}={json.dumps(bases['openai'])}"] + args, {},
                        f"codex -c {key}=… (beats config.toml)")

    def by_hand(self, plan):
        return ["in ~/.codex/config.toml, a [model_providers.ID] with base_url = \"<the proxy's URL>/v1\" and "
                "model_provider = \"ID\" (`firsttoken env codex` prints one)",
                "for --oss (its ollama and lmstudio providers): export CODEX_OSS_BASE_URL=<the proxy's URL>/v1"]


def _without_override(args: list[str], key: str) -> list[str]:
    """``args`` less the user's own ``-c KEY=…`` (``run``'s replaces it: the proxy forwards to its value; a
    later one, also under a subcommand, would beat ``run``'s)."""
    out, i = [], 0
    while i < len(args):
        a = args[i]
        if a == "--":
            return out + args[i:]
        if a in ("-c", "--config") and i + 1 < len(args) and args[i + 1].split("=", 1)[0].strip() == key:
            i += 2
            continue
        if a.startswith("--config=") and a[len("--config="):].split("=", 1)[0].strip() == key:
            i += 1
            continue
        out.append(a)
        i += 1
    return out
