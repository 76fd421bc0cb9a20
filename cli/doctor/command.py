"""`firsttoken doctor`: find what stands between a client and the proxy, without sending a prompt.

The checks live in doctor_checks.py and the modules it gathers (pure functions of env, home and
cwd); this module builds their context from the real environment, prints them, and exits 1
when one fails.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import click
from rich.console import Console
from rich.text import Text

from firsttoken.addon import routing
from firsttoken.cli.doctor import checks as dc
from firsttoken.cli.options import db_option
from firsttoken.cli.output import plural, wrap
from firsttoken.cli.proxy.state import read_states, state_routes

STYLE = {dc.PASS: ("[green]✓[/]", "ok"), dc.WARN: ("[yellow]![/]", "warn"), dc.FAIL: ("[bold red]✗[/]", "FAIL")}


def build_context(*, proxy_url: str | None, env_keys, db_path, upstreams, offline: bool, timeout: float,
                  env=None, home: Path | None = None, cwd: Path | None = None) -> dc.Context:
    env = dict(os.environ) if env is None else env
    states = read_states(db_path)
    routes, forward, confdir = None, False, None
    if proxy_url is None and states:
        proxy_url = states[-1]["url"]
    proxy_url = proxy_url or dc.DEFAULT_PROXY
    for s in states:
        if s.get("url", "").rstrip("/") == proxy_url.rstrip("/"):
            routes = state_routes(s)
            forward, confdir = bool(s.get("forward")), s.get("confdir")
    if upstreams and routes is None:
        try:
            routes = routing.parse_upstreams(list(upstreams))
        except routing.RouteError as e:
            raise click.BadParameter(str(e), param_hint="--upstream") from None
    return dc.Context(env=env, home=home or Path.home(), cwd=cwd or Path.cwd(), proxy_url=proxy_url,
                      env_keys=tuple(env_keys), db_path=db_path, upstreams=tuple(upstreams), routes=routes,
                      forward=forward, confdir=confdir, net=dc.Net(timeout), network=not offline,
                      running=tuple(str(s["url"]) for s in read_states() if s.get("url")))


def render(checks: list[dc.Check], out: Console) -> None:
    """Each check on lines no wider than the terminal, wrapped between words under its own text
    (``output.wrap``): never cut mid-word by the terminal."""
    def say(text: Text, indent: int, rest: int) -> None:
        for line in wrap(text, out.width, indent, rest):
            out.print(line)

    for section, title in dc.SECTIONS.items():
        group = [c for c in checks if c.section == section]
        if not group:
            continue
        out.print(f"[bold]{title}[/]")
        for c in group:
            mark = Text.from_markup(STYLE[c.status][0])
            say(Text.assemble(mark, " ", c.title), 2, 4)
            if c.detail and c.status != dc.PASS or c.detail and len(c.detail) < 100:
                say(Text(c.detail, style="dim"), 6, 6)
            if c.fix and c.status != dc.PASS:
                say(Text.assemble("fix: ", c.fix), 6, 11)
        out.print()
    s = dc.summary(checks)
    color = "red" if s[dc.FAIL] else "yellow" if s[dc.WARN] else "green"
    out.print(f"[{color}]{s[dc.PASS]} ok, {plural(s[dc.WARN], 'warning')}, {s[dc.FAIL]} failed[/]")


@click.command("doctor")
@click.option("--json", "as_json", is_flag=True, help="One JSON document (for scripts).")
@click.option("--proxy", "proxy_url", default=None, metavar="URL",
              help="Where firsttoken listens (default: the running proxy, else http://127.0.0.1:8787).")
@click.option("--env-key", "env_keys", multiple=True, metavar="VAR", help="Also check this key variable (repeatable).")
@click.option("--upstream", "-u", "upstreams", multiple=True, metavar="[NAME=]URL",
              help="Upstreams to probe (default: the running proxy's, the base URLs found, else OpenAI and Anthropic).")
@click.option("--offline", is_flag=True, help="Skip the DNS/TCP/TLS probes of the upstreams.")
@click.option("--timeout", type=float, default=2.0, show_default=True, help="Seconds per network probe.")
@db_option
def doctor(as_json, proxy_url, env_keys, upstreams, offline, timeout, db_path):
    """Check the setup without sending a prompt: proxy variables, keys (fingerprints only),
    base URLs (environment, Claude Code settings, Codex config, Gemini CLI), the proxy, the upstreams,
    a model server of your own (which engine answers, its loaded model: read-only GETs), tokenizers,
    the database and mitmproxy. Exit code 1 when a check fails."""
    ctx = build_context(proxy_url=proxy_url, env_keys=env_keys, db_path=db_path, upstreams=upstreams,
                        offline=offline, timeout=timeout)
    checks = dc.run_checks(ctx)
    failed = any(c.status == dc.FAIL for c in checks)
    if as_json:
        click.echo(json.dumps({"ok": not failed, "proxy": ctx.proxy_url, "summary": dc.summary(checks),
                               "checks": [c.as_dict() for c in checks]}, indent=2, ensure_ascii=False))
    else:
        render(checks, Console(highlight=False, soft_wrap=True))
    raise SystemExit(1 if failed else 0)
