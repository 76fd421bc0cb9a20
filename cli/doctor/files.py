"""`firsttoken doctor`, the clients' own settings files: Claude Code's settings.json files
(their ``env`` blocks), Codex's config.toml (its model providers) and Gemini CLI's auth type and .env file.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from firsttoken.cli.doctor.core import FAIL, KEY_VARS, PASS, WARN, Check, Context
from firsttoken.cli.doctor.env import check_base_url, check_key
from firsttoken.cli.run.clients import claude, codex
from firsttoken.cli.run.clients import gemini as gemini_cli
from firsttoken.cli.run.clients.base import Context as RunContext
from firsttoken.cli.run.clients.base import PlanError

CODEX_BUILTIN_PROVIDERS = codex.BUILTIN_PROVIDERS
CLAUDE_SETTINGS = claude.SETTINGS_FILES  # where they are: the adapter's rule (cli/run/clients/claude.py)


# -- Claude Code ---------------------------------------------------------------------------------

def read_claude_settings(ctx: Context) -> tuple[list[Check], list[tuple[str, dict[str, Any]]]]:
    """Parse errors as checks, and the `env` blocks found."""
    problems, blocks = claude.read_settings_env(ctx.home, ctx.cwd)
    checks = []
    for label, kind, detail in problems:
        if kind == "json":
            checks.append(Check(f"claude.{label}", "claude_code", FAIL, f"{label} is not valid JSON",
                                str(detail), "fix the syntax (a trailing comma? a comment?): Claude Code ignores the file"))
        elif kind == "env_not_object":
            checks.append(Check(f"claude.{label}.env", "claude_code", FAIL, f"{label}: \"env\" is not an object",
                                repr(detail)[:80], 'write it as "env": {"ANTHROPIC_BASE_URL": "…"}'))
        else:
            checks.append(Check(f"claude.{label}.env_types", "claude_code", WARN,
                                f"{label}: env values must be strings", ", ".join(detail), "quote them"))
    return checks, blocks


def check_claude_code(ctx: Context, blocks: list[tuple[str, dict[str, Any]]]) -> list[Check]:
    out = []
    for label, block in blocks:
        # its own base URL, and on Bedrock / Vertex AI theirs (a URL it appends the whole path to)
        for var, kind in (("ANTHROPIC_BASE_URL", "anthropic"), ("ANTHROPIC_BEDROCK_BASE_URL", "cloud"),
                          ("ANTHROPIC_VERTEX_BASE_URL", "cloud")):
            v = block.get(var)
            if isinstance(v, str):
                out.append(check_base_url(var, v, kind, ctx, source=label))
    return out


# -- Codex ---------------------------------------------------------------------------------------

def codex_config_path(ctx: Context) -> Path:
    return codex.config_path(ctx.env, ctx.home)


def check_codex(ctx: Context) -> list[Check]:
    path = codex_config_path(ctx)
    label = "~/.codex/config.toml" if not ctx.env.get("CODEX_HOME") else str(path)
    if not path.is_file():
        return []
    try:
        cfg = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        return [Check("codex.parse", "codex", FAIL, f"{label} is not valid TOML", str(e), "fix the syntax")]
    out: list[Check] = []
    providers = cfg.get("model_providers") or {}
    if not isinstance(providers, dict):
        return [Check("codex.providers", "codex", FAIL, f"{label}: model_providers is not a table", "", None)]
    for pid, p in providers.items():
        if isinstance(p, dict) and ("model_provider" in p or "model" in p):
            key = "model_provider" if "model_provider" in p else "model"
            out.append(Check(f"codex.{pid}.misplaced", "codex", FAIL,
                             f"{label}: `{key}` is inside [model_providers.{pid}]",
                             "TOML puts keys after a [table] header into that table, so Codex never sees it",
                             f"move `{key} = …` above the first [table] in the file"))
    chosen = cfg.get("model_provider", "openai")
    if chosen not in providers and chosen not in CODEX_BUILTIN_PROVIDERS:
        out.append(Check("codex.model_provider", "codex", FAIL, f"{label}: model_provider = {chosen!r} is not defined",
                         f"defined: {', '.join(providers) or 'none'}; built in: {', '.join(CODEX_BUILTIN_PROVIDERS)}",
                         f"add a [model_providers.{chosen}] table (`firsttoken env codex` prints one)"))
    for pid, p in providers.items():
        if not isinstance(p, dict):
            continue
        src = f"{label} [model_providers.{pid}]"
        if isinstance(p.get("base_url"), str):
            out.append(check_base_url("base_url", p["base_url"], "openai", ctx, source=src))
        if p.get("wire_api") == "chat":
            out.append(Check(f"codex.{pid}.wire_api", "codex", WARN, f"{src}: wire_api = \"chat\"",
                             "Codex deprecated (newer versions reject) the chat wire API",
                             'use wire_api = "responses" with an upstream that serves /v1/responses'))
        env_key = p.get("env_key")
        if isinstance(env_key, str) and pid == chosen:
            if not (ctx.env.get(env_key) or "").strip():
                out.append(Check(f"codex.{pid}.env_key", "codex", FAIL, f"{src}: env_key {env_key} is not set",
                                 "Codex stops with 'Missing environment variable'",
                                 f"export {env_key}='<key>' before starting codex"))
            elif env_key not in KEY_VARS and env_key not in ctx.env_keys:
                out.append(check_key(env_key, ctx.env[env_key]))
    if not out:
        out.append(Check("codex.ok", "codex", PASS, f"{label} parses; model_provider = {chosen!r}"))
    return out


# -- Gemini CLI ----------------------------------------------------------------------------------

def check_gemini_cli(ctx: Context) -> list[Check]:
    """Gemini CLI's auth type and base URL as it reads them (the run adapter's rule): only when it is set up
    here (its settings file, or a Gemini variable in the environment)."""
    rctx = RunContext(env=ctx.env, home=ctx.home, cwd=ctx.cwd)
    used = any((ctx.env.get(v) or "").strip() for v in ("GEMINI_API_KEY", "GOOGLE_GEMINI_BASE_URL",
                                                          "GOOGLE_GENAI_USE_VERTEXAI", "GOOGLE_VERTEX_BASE_URL"))
    if not used and not gemini_cli.settings_paths(rctx)["user"].is_file():
        return []
    try:
        setup = gemini_cli.read_setup(rctx)
    except PlanError as e:
        return [Check("gemini_cli.settings", "gemini_cli", FAIL, str(e).split(":")[0] + " is not valid JSON", str(e),
                      "fix the syntax: Gemini CLI refuses to start with it")]
    out: list[Check] = []
    dotenv = gemini_cli.env_file(rctx)
    if setup.url_source.startswith("$") and setup.variable not in ctx.env and dotenv is not None:
        out.append(check_base_url(setup.variable, setup.url, "gemini", ctx, source=rctx.label(dotenv)))
    if setup.auth in gemini_cli.GOOGLE_LOGIN:
        out.append(Check("gemini_cli.auth", "gemini_cli", WARN, f"Gemini CLI signs in with Google ({setup.auth})",
                         f"{setup.auth_source}: its requests go to Google's Code Assist API "
                         "(cloudcode-pa.googleapis.com), which firsttoken does not record",
                         "to record it, use a Gemini API key: GEMINI_API_KEY and \"security\": {\"auth\": "
                         "{\"selectedType\": \"gemini-api-key\"}} in ~/.gemini/settings.json"))
    elif setup.auth == gemini_cli.GATEWAY and not setup.auth_from_settings:
        out.append(Check("gemini_cli.auth", "gemini_cli", FAIL, "Gemini CLI has no auth type in settings.json and "
                         "GOOGLE_GEMINI_BASE_URL is set",
                         "it then picks its \"gateway\" auth type, which `gemini -p` refuses "
                         "(\"Invalid auth method selected\")",
                         "add \"security\": {\"auth\": {\"selectedType\": \"gemini-api-key\"}} to "
                         "~/.gemini/settings.json"))
    elif setup.auth is None:
        out.append(Check("gemini_cli.auth", "gemini_cli", WARN, "Gemini CLI has no auth type",
                         "no security.auth.selectedType in its settings.json and no GEMINI_API_KEY / "
                         "GOOGLE_GENAI_USE_VERTEXAI: `gemini -p` stops with \"Please set an Auth method\"",
                         "export GEMINI_API_KEY=… (a key from https://aistudio.google.com/apikey)"))
    else:
        out.append(Check("gemini_cli.auth", "gemini_cli", PASS, f"Gemini CLI: auth type {setup.auth}",
                         f"{setup.auth_source}; its requests go to {setup.url} ({setup.url_source})"))
    return out
