"""Claude Code: ``ANTHROPIC_BASE_URL`` from the environment, then its settings.json ``env`` blocks
(user, project, local: the last wins), then a managed policy (wins over everything, even
``--settings``). Redirected by ``--settings '{"env": {"ANTHROPIC_BASE_URL": …}}'``, which beats
settings.json and the environment. On Bedrock or Vertex AI (CLAUDE_CODE_USE_BEDROCK / _VERTEX) its
ANTHROPIC_BEDROCK_BASE_URL / ANTHROPIC_VERTEX_BASE_URL instead (cloud.py). The clients table: docs/run.md."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from firsttoken.cli.run.clients import cloud
from firsttoken.cli.run.clients.base import Client, Context, Plan, Redirect, Upstream

#: Claude Code's managed (policy) settings: they beat even --settings
MANAGED_SETTINGS = (Path("/etc/claude-code/managed-settings.json"),
                    Path("/Library/Application Support/ClaudeCode/managed-settings.json"))
DEFAULT = "https://api.anthropic.com"
#: Claude Code's settings files, in the order it reads them (the last one wins): (label, relative to)
SETTINGS_FILES = (("~/.claude/settings.json", "home"), ("./.claude/settings.json", "cwd"),
                  ("./.claude/settings.local.json", "cwd"))


def settings_path(label: str, home: Path, cwd: Path) -> Path:
    return (home if label.startswith("~") else cwd) / label.split("/", 1)[1]


def read_settings_env(home: Path, cwd: Path) -> tuple[list[tuple[str, str, Any]], list[tuple[str, dict[str, Any]]]]:
    """The ``env`` blocks of Claude Code's settings files, in its order, and what is wrong with
    the others: ``(label, "json" | "env_not_object" | "env_not_strings", detail)``."""
    problems, blocks = [], []
    for label, _ in SETTINGS_FILES:
        path = settings_path(label, home, cwd)
        if not path.is_file():
            continue
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError, UnicodeDecodeError) as e:
            problems.append((label, "json", e))
            continue
        block = doc.get("env") if isinstance(doc, dict) else None
        if block is None:
            continue
        if not isinstance(block, dict):
            problems.append((label, "env_not_object", block))
            continue
        nonstr = [k for k, v in block.items() if not isinstance(v, str)]
        if nonstr:
            problems.append((label, "env_not_strings", nonstr))
        blocks.append((label, block))
    return problems, blocks


class ClaudeCode(Client):
    name = "claude-code"
    title = "Claude Code"
    programs = ("claude",)
    packages = ("@anthropic-ai/claude-code",)

    def __init__(self, managed: tuple[Path, ...] = MANAGED_SETTINGS) -> None:
        self.managed = managed

    def find(self, plan: Plan, ctx: Context) -> None:
        if cloud.find(plan, self._effective_env(ctx)):
            return  # Claude Code on Bedrock or Vertex AI: its own base URL and its own way to sign
        v = ctx.var("ANTHROPIC_BASE_URL")
        plan.upstreams["anthropic"] = Upstream("anthropic", v or DEFAULT, "$ANTHROPIC_BASE_URL" if v else "default")
        plan.key_source = ("ANTHROPIC_API_KEY / ANTHROPIC_AUTH_TOKEN (environment or the \"env\" block of "
                           "~/.claude/settings.json), apiKeyHelper, or the login of `claude /login`")
        _, blocks = read_settings_env(ctx.home, ctx.cwd)
        for label, block in blocks:  # user, then project, then local: the last one wins
            v = block.get("ANTHROPIC_BASE_URL")
            if isinstance(v, str) and v.strip():
                plan.upstreams["anthropic"] = Upstream("anthropic", v.strip(), f"{label} env.ANTHROPIC_BASE_URL")
        for path in self.managed:
            try:
                doc = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            v = (doc.get("env") or {}).get("ANTHROPIC_BASE_URL") if isinstance(doc, dict) else None
            if isinstance(v, str) and v.strip():
                plan.upstreams["anthropic"] = Upstream("anthropic", v.strip(), f"{path} env.ANTHROPIC_BASE_URL")
                plan.forward_reason = (f"{path} (a managed policy) sets ANTHROPIC_BASE_URL, which nothing "
                                       "overrides: Claude Code runs through HTTPS_PROXY instead")

    def _effective_env(self, ctx: Context) -> dict[str, str]:
        """The variables Claude Code ends up with: the environment, then its settings files' "env"
        blocks (the last wins), then a managed policy's."""
        out = {k: v for k, v in ctx.env.items() if isinstance(v, str)}
        _, blocks = read_settings_env(ctx.home, ctx.cwd)
        for _, block in blocks:
            out.update({k: v for k, v in block.items() if isinstance(v, str)})
        for path in self.managed:
            try:
                doc = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            block = doc.get("env") if isinstance(doc, dict) else None
            if isinstance(block, dict):
                out.update({k: v for k, v in block.items() if isinstance(v, str)})
        return out

    def redirect(self, plan, bases, proxy_url, routes, env) -> Redirect:
        var = cloud.BASE_VARS.get(next(iter(bases)), "ANTHROPIC_BASE_URL") if len(bases) == 1 else "ANTHROPIC_BASE_URL"
        argv = list(plan.argv)
        argv[plan.args_at:plan.args_at] = ["--settings", json.dumps({"env": {var: next(iter(bases.values()))}})]
        return Redirect(argv, {},
                        f"claude --settings '{{\"env\": {{\"{var}\": …}}}}' (beats settings.json and the "
                        "environment)")

    def by_hand(self, plan):
        var = cloud.BASE_VARS.get(next(iter(plan.upstreams), ""), "ANTHROPIC_BASE_URL")
        return [f"export {var}=<the proxy's URL>   (or \"env\" in ~/.claude/settings.json)"]
