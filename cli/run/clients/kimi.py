"""Kimi CLI (``kimi``, PyPI ``kimi-cli``; 1.51 is its last working release). Its config: ``--config TEXT``,
else ``--config-file FILE``, else ``$KIMI_SHARE_DIR/config.toml`` (~/.kimi). The model: ``--model`` when
the config names it, else ``default_model``; its provider's ``base_url`` is beaten by ``KIMI_BASE_URL``
(type kimi) or ``OPENAI_BASE_URL`` (openai_legacy, openai_responses) (kimi_cli/app.py, llm.py).
Redirected by that variable; other provider types, or a plugin fed the base URL: forward mode (docs/run.md)."""

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
    option_value,
    strip_v1,
)
from firsttoken.cli.run.clients.files import ConfigError, read_json

#: provider type → the variable that beats its base_url (the openai SDK's chat / responses APIs)
VARIABLES = {"kimi": "KIMI_BASE_URL", "openai_legacy": "OPENAI_BASE_URL", "openai_responses": "OPENAI_BASE_URL"}


def share_dir(ctx: Context) -> Path:
    return ctx.cwd / Path(ctx.var("KIMI_SHARE_DIR")).expanduser() if ctx.var("KIMI_SHARE_DIR") else ctx.home / ".kimi"


def read_config(plan: Plan, ctx: Context) -> tuple[dict, str]:
    """Kimi's config (its data, where it is in words), as kimi would pick it."""
    import tomllib  # (only for Kimi CLI: `run` starts its child before anything it does not need)

    args = plan.argv[plan.args_at:]
    text = option_value(args, ("--config",))
    if text:
        try:
            return json.loads(text[1]), "kimi --config"
        except ValueError:
            pass
        try:
            return tomllib.loads(text[1]), "kimi --config"
        except tomllib.TOMLDecodeError as e:
            raise PlanError(f"kimi --config is neither JSON nor TOML ({e}): Kimi CLI would refuse it too; "
                            "fix it first") from None
    flag = option_value(args, ("--config-file",))
    path = ctx.cwd / Path(flag[1]).expanduser() if flag else share_dir(ctx) / "config.toml"
    if not flag and not path.is_file() and (path.parent / "config.json").is_file():
        path = path.parent / "config.json"  # the legacy file kimi migrates
    try:
        if path.suffix.lower() == ".json":
            doc = read_json(path, ctx.label(path))
        else:
            doc = tomllib.loads(path.read_text(encoding="utf-8")) if path.is_file() else None
    except (ConfigError, OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise PlanError(f"{ctx.label(path)} cannot be read ({e}): Kimi CLI would refuse it too; fix it "
                        "first") from None
    return (doc if isinstance(doc, dict) else {}), ctx.label(path)


def fed_plugins(ctx: Context) -> list[str]:
    """Kimi's plugins whose config it rewrites with the model's base URL at start-up (plugin.json ``inject``)."""
    d = share_dir(ctx) / "plugins"
    try:
        specs = sorted(d.glob("*/plugin.json")) if d.is_dir() else []
    except OSError:
        return []
    out = []
    for spec in specs:
        try:
            doc = read_json(spec, ctx.label(spec))
        except ConfigError:
            continue
        inject = doc.get("inject") if isinstance(doc, dict) else None
        if isinstance(inject, dict) and "base_url" in inject.values() and doc.get("config_file"):
            out.append(ctx.label(spec.parent))
    return out


class KimiCli(Client):
    name = "kimi"
    title = "Kimi CLI"
    programs = ("kimi", "kimi-cli")
    packages = ("kimi-cli",)

    def find(self, plan: Plan, ctx: Context) -> None:
        doc, where = read_config(plan, ctx)
        models = doc.get("models") if isinstance(doc.get("models"), dict) else {}
        providers = doc.get("providers") if isinstance(doc.get("providers"), dict) else {}
        flag = option_value(plan.argv[plan.args_at:], ("-m", "--model"))
        name = flag[1] if flag else doc.get("default_model") or None
        model = models.get(name) if isinstance(name, str) and isinstance(models.get(name), dict) else None
        provider = providers.get(model.get("provider")) if model else {"type": "kimi", "base_url": ""}
        provider = provider if isinstance(provider, dict) else {}
        kind, base = provider.get("type"), str(provider.get("base_url") or "").strip()
        source = f"{where} providers.{model.get('provider')}.base_url" if model else ""
        plan.key_source = (f"the api_key of its provider in {where}, KIMI_API_KEY (type kimi) or OPENAI_API_KEY "
                           "(openai types), or `kimi login`")
        var = VARIABLES.get(str(kind))
        if var and ctx.var(var):
            base, source = ctx.var(var), f"${var}"
        if var and base:
            plan.state.update(variable=var, route=add_upstream(plan, "openai", base, source))
        plugins = fed_plugins(ctx)
        if not plan.upstreams:
            what = (f"its model {name!r} uses a provider of type {kind!r}, whose base URL only its config file sets"
                    if model else f"{where} names no model it uses, and no KIMI_BASE_URL is set")
            plan.forward_reason = (f"{what}: Kimi CLI runs through HTTPS_PROXY instead (only known LLM API hosts "
                                   "are recorded)")
            if kind == "anthropic" and base:  # forward mode records its host; plain HTTP: said before starting
                add_upstream(plan, "anthropic", strip_v1(base), source)
        elif plugins:
            plan.forward_reason = (f"Kimi CLI writes its model's base URL into the config of its plugin(s) "
                                   f"{', '.join(plugins)} at start-up, so a redirect would leave the proxy's address "
                                   "there: it runs through HTTPS_PROXY instead (only known LLM API hosts are "
                                   "recorded)")

    def redirect(self, plan, bases, proxy_url, routes, env) -> Redirect:
        var = plan.state["variable"]
        return Redirect(list(plan.argv), {var: bases[plan.state["route"]]},
                        f"{var} (it beats the base_url of Kimi CLI's config for its model's provider)")

    def by_hand(self, plan):
        if plan.state.get("variable"):
            return [f"{plan.state['variable']}=<the proxy's URL>/v1 kimi …"]
        return ["base_url = \"<the proxy's URL>\" (with /v1 for the OpenAI types, without for anthropic) for the "
                "model's provider, in a copy of ~/.kimi/config.toml given with kimi --config-file"]
