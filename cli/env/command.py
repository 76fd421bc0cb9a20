"""`firsttoken env CLIENT`: exactly what to set so a client goes through the proxy.

The proxy's routes come from ``--upstream``, else the registry of running proxies, else the
defaults; base URLs from the one rule in ``firsttoken.addon.routing``. This module renders a plan
(target.py, clients.py) and holds the click command. See docs/clients.md.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys

import click

from firsttoken.cli.env.clients import CLIENTS, Plan, auth_conflict, claude_oauth_login, plan_for
from firsttoken.cli.env.target import (
    DEFAULT_PORT,
    EnvError,
    Target,
    resolve_target,
)
from firsttoken.cli.options import PORT, db_option
from firsttoken.cli.proxy.state import clear_state, read_states, registry_dir, state_path, state_routes, write_state

__all__ = [
    "CLIENTS", "DEFAULT_PORT", "EnvError", "Plan", "Target", "auth_conflict", "claude_oauth_login",
    "clear_state", "env", "plan_for", "read_states", "registry_dir", "render", "resolve_target", "state_path",
    "state_routes", "write_state",
]


# -- rendering ---------------------------------------------------------------------------------

def _ps_quote(v: str) -> str:
    return '"' + v.replace("`", "``").replace('"', '`"').replace("$", "`$") + '"'


def render(plan: Plan, fmt: str = "human", width: int | None = None) -> str:
    """``human``: blocks and notes; ``shell``: ``export`` lines; ``powershell``: ``$env:`` lines.
    The shell formats hold only assignments and ``#`` comments, so they can be eval'd. ``width``
    (a terminal's): the notes wrap between words; what is there to copy stays one line each."""
    lines: list[str] = []
    if fmt in ("shell", "powershell"):
        lines.append(f"# firsttoken env {plan.title}")
        for k, v in plan.exports:
            lines.append(f"export {k}={shlex.quote(v)}" if fmt == "shell" else f"$env:{k} = {_ps_quote(v)}")
        for k, v in plan.placeholders:
            lines.append(f"# export {k}={shlex.quote(v)}" if fmt == "shell" else f"# $env:{k} = {_ps_quote(v)}")
        if not plan.exports:
            lines.append("# nothing to set in the environment for this client:")
            for where, text in plan.blocks:
                lines.append(f"# {where}:")
                lines += [f"#   {t}" for t in text.splitlines()]
        return "\n".join(lines) + "\n"
    def prose(text: str, rest: int = 2) -> list[str]:  # wrapped between words on a terminal
        if not width:
            return [text]
        from firsttoken.cli.output import wrap

        return [ln.plain.rstrip() for ln in wrap(text, width, 0, rest)]

    lines += prose(f"firsttoken env {plan.title}")
    lines.append("")
    if plan.exports and plan.client not in ("cline",):
        lines.append("Environment (shell):")
        for k, v in plan.exports:
            lines.append(f"  export {k}={shlex.quote(v)}")
        for k, v in plan.placeholders:
            lines.append(f"  export {k}={shlex.quote(v)}   # fill in")
        lines.append("")
    for where, text in plan.blocks:
        lines += prose(f"{where}:")
        lines += [f"  {t}" if t else "" for t in text.splitlines()]  # to copy: one line each
        lines.append("")
    notes = [f"- {n}" for n in plan.notes]
    if plan.exports:
        notes.append(f'- In a shell: `eval "$(firsttoken env {plan.client} --shell)"` with the same options '
                     f"(PowerShell: `firsttoken env {plan.client} --powershell | Invoke-Expression`)")
    lines += [ln for n in notes for ln in prose(n)]
    return "\n".join(lines).rstrip() + "\n"


def egress_notes(target, environ) -> list[str]:
    """Which way firsttoken's own upstream leg goes (the egress rule), when a proxy setting is in play."""
    from firsttoken.addon.egress import PROXY_VARS, EgressError, decide

    if not any((environ.get(v) or "").strip() for v in PROXY_VARS):
        return []
    ways = ([(r.url, r.scheme, r.host, r.port) for r in target.routes] if target.routes
            else [("https:// LLM hosts", "https", "api.openai.com", 443)])
    out = []
    for what, scheme, host, port in ways:
        try:
            d = decide(scheme, host, port, environ)
        except EgressError as e:
            out.append(f"firsttoken cannot use this machine's proxy setting: {e}")
            continue
        out.append(f"firsttoken reaches {what} {d.describe()}, as your clients would "
                   "(a proxy started with --upstream-proxy or --no-upstream-proxy goes that way instead)")
    return out


# -- the command -------------------------------------------------------------------------------

class ClientName(click.ParamType):
    """A client, by its one name or its program's (``claude``): the registry's name rule."""

    name = "client"

    def convert(self, value, param, ctx) -> str:
        from firsttoken.cli.run.clients import registry

        return registry.client_name(value) or self.fail(registry.unknown_client(value), param, ctx)

    def shell_complete(self, ctx, param, incomplete):
        from click.shell_completion import CompletionItem

        return [CompletionItem(n) for n in CLIENTS if n.startswith(incomplete)]


@click.command("env", help="Print what to set so CLIENT goes through the proxy.\n\nCLIENT: "
               + ", ".join(CLIENTS) + ": a client's name or its program's (claude, qwen). Keys are never printed: "
               "clients keep their own and the proxy forwards them unchanged.")
@click.argument("client", type=ClientName())
@click.option("--port", "-p", type=PORT, default=None, help="The proxy's port (default: the running proxy's, else 8787).")
@click.option("--host", default=None, help="The proxy's address (default 127.0.0.1).")
@click.option("--route", "route_name", default=None, metavar="NAME", help="Which route (for a proxy with several upstreams).")
@click.option("--upstream", "-u", "upstreams", multiple=True, metavar="[NAME=]URL",
              help="The proxy's upstreams, as given to `firsttoken proxy` (default: read from the running proxy).")
@click.option("--model", default=None, help="Model to put in the settings (ANTHROPIC_MODEL, Codex model).")
@click.option("--forward", "forward_mode", is_flag=True, help="Settings for `firsttoken proxy --forward` (HTTPS_PROXY + CA).")
@click.option("--shell", "fmt", flag_value="shell", help="Only `export` lines, for eval \"$(firsttoken env … --shell)\".")
@click.option("--powershell", "fmt", flag_value="powershell", help="Only `$env:X = \"…\"` lines.")
@db_option
def env(client, port, host, route_name, upstreams, model, forward_mode, fmt, db_path):
    target = resolve_target(upstreams=upstreams, port=port, host=host, db_path=db_path, forward=forward_mode)
    plan = plan_for(client, target, route_name=route_name, model=model)
    plan.notes += egress_notes(target, os.environ)
    width = shutil.get_terminal_size().columns if sys.stdout.isatty() else None
    click.echo(render(plan, fmt or "human", width=width), nl=False)
    said = [f"note: {n}" for n in plan.notes if fmt and n.startswith("no running proxy found")]
    said += [f"warning: {w}" for w in plan.warnings]
    wide = shutil.get_terminal_size().columns if sys.stderr.isatty() else None
    for n in said:
        if wide:
            from firsttoken.cli.output import wrap

            n = "\n".join(ln.plain.rstrip() for ln in wrap(n, wide, 0, 2))
        click.echo(n, err=True)
