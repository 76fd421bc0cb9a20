"""`firsttoken env CLIENT`: exactly what to set so a client goes through the proxy.

The proxy's address and routes come from ``--upstream`` (same syntax as ``firsttoken
proxy``), else from the state file a running proxy writes (``<db dir>/proxy.json``, see
:func:`write_state`), else the defaults (port 8787, one route at the root). The rules:

* OpenAI-style clients append ``/chat/completions`` / ``/responses`` to their base URL, so it
  needs ``/v1`` — unless the upstream's path already carries a version (``https://host/v1``,
  ``…/api/paas/v4``, ``…/v1beta/openai``): then the proxy adds it and the base URL must not.
* Anthropic clients append ``/v1/messages`` themselves: ``ANTHROPIC_BASE_URL`` never ends in
  ``/v1`` (and an upstream ending in ``/v1`` would produce ``/v1/v1/messages``).
* Keys are never printed: the client keeps its own, the proxy forwards it unchanged.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import click

from firsttoken.addon import forward as fwd
from firsttoken.addon import routing
from firsttoken.addon.routing import Route

from .common import db_option, resolve_db

CLIENTS = ("claude-code", "openai", "anthropic", "cline", "codex", "curl")
DEFAULT_PORT = 8787
STATE_FILE = "proxy.json"


class EnvError(click.ClickException):
    pass


# -- the state file a running proxy writes ---------------------------------------------------

def state_path(db_path: str | os.PathLike | None = None) -> Path:
    """``proxy.json`` next to the database (the default one unless ``db_path``)."""
    return Path(resolve_db(str(db_path) if db_path else None)).expanduser().parent / STATE_FILE


def write_state(server: Any, db_path: str | os.PathLike | None = None) -> Path | None:
    """Record a started ProxyServer (url, routes, mode) so `firsttoken env` / `doctor` find it.

    Call once the proxy listens (``on_ready``); :func:`clear_state` on exit. Never raises."""
    try:
        path = state_path(db_path or server.db)
        entry = {
            "pid": os.getpid(),
            "url": server.url,
            "port": server.bound_port,
            "host": server.host,
            "db": str(server.db),
            "forward": bool(getattr(server, "forward_mode", False)),
            "confdir": (getattr(server, "options", {}) or {}).get("confdir"),
            "metrics_url": getattr(server, "metrics_url", None),
            "routes": [_route_spec(r) for r in server.routes],
            "started_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        }
        proxies = [p for p in _load(path) if p.get("port") != entry["port"] and _alive(p)]
        _save(path, proxies + [entry])
        return path
    except Exception:  # noqa: BLE001 - a state file is a convenience, never a reason to fail
        return None


def clear_state(server: Any, db_path: str | os.PathLike | None = None) -> None:
    try:
        path = state_path(db_path or server.db)
        proxies = [p for p in _load(path) if p.get("port") != server.bound_port and _alive(p)]
        if proxies:
            _save(path, proxies)
        else:
            path.unlink(missing_ok=True)
    except Exception:  # noqa: BLE001
        pass


def read_states(db_path: str | os.PathLike | None = None) -> list[dict[str, Any]]:
    """Running proxies from the state file, newest last (stale entries dropped)."""
    try:
        return [p for p in _load(state_path(db_path)) if _alive(p)]
    except Exception:  # noqa: BLE001
        return []


def _route_spec(r: Route) -> str:
    return f"{r.name}={r.url}" if r.name else r.url


def _load(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    doc = json.loads(path.read_text(encoding="utf-8"))
    return [p for p in doc.get("proxies", []) if isinstance(p, dict)]


def _save(path: Path, proxies: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps({"version": 1, "proxies": proxies}, indent=2), encoding="utf-8")
    os.replace(tmp, path)


def _alive(p: dict[str, Any]) -> bool:
    pid = p.get("pid")
    if not isinstance(pid, int) or pid <= 0:
        return False
    if os.name == "nt":
        return True  # no cheap check; the port test in doctor tells the rest
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


# -- where the proxy is ----------------------------------------------------------------------

@dataclass
class Target:
    url: str  # http://127.0.0.1:8787 (no trailing slash)
    routes: list[Route] | None  # None: not known (assume one route at the root, no version in its path)
    source: str
    forward: bool = False
    confdir: str | None = None


def resolve_target(*, upstreams=(), port: int | None = None, host: str | None = None, db_path=None,
                   forward: bool = False, states: list[dict[str, Any]] | None = None) -> Target:
    host = host or "127.0.0.1"
    if upstreams:
        try:
            routes = routing.parse_upstreams(list(upstreams))
        except routing.RouteError as e:
            raise EnvError(str(e)) from None
        return Target(_url(host, port or DEFAULT_PORT), routes, "--upstream")
    states = read_states(db_path) if states is None else states
    if port is not None:
        states = [s for s in states if s.get("port") == port]
    if forward:
        states = [s for s in states if s.get("forward")] or states
    if states:
        s = states[-1]
        try:
            routes = routing.parse_upstreams(s.get("routes") or [])
        except routing.RouteError:
            routes = None
        more = f"; {len(states) - 1} more running, pick one with --port" if len(states) > 1 else ""
        return Target(s["url"].rstrip("/"), routes, f"the running proxy (pid {s.get('pid')}){more}",
                      forward=bool(s.get("forward")) or forward, confdir=s.get("confdir"))
    if forward:
        return Target(_url(host, port or 8080), [], "defaults (no running forward proxy found)", forward=True)
    return Target(_url(host, port or DEFAULT_PORT), None,
                  "defaults: no running proxy found and no --upstream given")


def _url(host: str, port: int) -> str:
    h = f"[{host}]" if ":" in host else host
    return f"http://{h}:{port}"


_VERSION_SEGMENT = re.compile(r"^v\d+[a-z0-9]*$", re.IGNORECASE)


def has_version(prefix: str) -> bool:
    """Whether an upstream path already holds an API version (/v1, /v4, /v1beta)."""
    return any(_VERSION_SEGMENT.match(seg) for seg in prefix.split("/") if seg)


def _looks(route: Route, family: str) -> bool:
    name, host = (route.name or "").lower(), route.host.lower()
    anthropic = bool(re.search(r"anth|claude", name) or "anthropic" in host or route.prefix.lower().endswith("/anthropic"))
    return anthropic if family == "anthropic" else not anthropic


def pick_route(target: Target, family: str, name: str | None) -> Route | None:
    """The route a client of ``family`` should use (None: routes unknown)."""
    routes = target.routes
    if routes is None:
        if name:
            return Route(name if name != "default" else None, "https", "unknown", 443, "")
        return None
    if not routes:
        return None
    if name:
        for r in routes:
            if (r.name or "default") == name:
                return r
        raise EnvError(f"no route named {name!r}; routes: {', '.join(r.name or 'default' for r in routes)}")
    if len(routes) == 1:
        return routes[0]
    fits = [r for r in routes if _looks(r, family)]
    if family == "anthropic":
        fits = [r for r in fits if _looks(r, "anthropic")]
    if len(fits) == 1:
        return fits[0]
    default = [r for r in routes if r.name is None]
    if default and family != "anthropic":
        return default[0]
    raise EnvError(f"the proxy has {len(routes)} routes; pass --route NAME (one of: "
                   f"{', '.join(r.name or 'default' for r in routes)})")


def openai_base(target: Target, route: Route | None) -> str:
    mount = route.mount if route else ""
    prefix = route.prefix if route else ""
    return f"{target.url}{mount}" + ("" if has_version(prefix) else "/v1")


def anthropic_base(target: Target, route: Route | None) -> tuple[str, list[str]]:
    warnings = []
    if route is not None and re.search(r"/v1$", route.prefix):
        warnings.append(
            f"route {route.name or 'default'!r} forwards to {route.url}: Anthropic clients add /v1/messages "
            f"themselves, so the upstream would see {route.prefix}/v1/messages. Start the proxy with "
            f"--upstream {(route.name + '=') if route.name else ''}{route.url[: -len('/v1')]} instead.")
    return f"{target.url}{route.mount if route else ''}", warnings


# -- the plan: what to set ---------------------------------------------------------------------

@dataclass
class Plan:
    client: str
    title: str
    exports: list[tuple[str, str]] = field(default_factory=list)  # set these
    placeholders: list[tuple[str, str]] = field(default_factory=list)  # shown commented: the user fills them
    blocks: list[tuple[str, str]] = field(default_factory=list)  # (where, text): settings.json, config.toml…
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def _route_label(target: Target, route: Route | None) -> str:
    if route is None:
        return f"proxy {target.url} (upstream unknown)"
    return f"proxy {target.url}{route.mount or ''} → {route.url}  (route {route.name or 'default'!r})"


def claude_oauth_login(home: Path) -> bool:
    return (home / ".claude" / ".credentials.json").is_file()


def auth_conflict(env: Mapping[str, str], home: Path) -> str | None:
    """Claude Code's "auth conflict": a login (claude.ai OAuth or ANTHROPIC_AUTH_TOKEN) and an API key."""
    key = (env.get("ANTHROPIC_API_KEY") or "").strip()
    if not key:
        return None
    logins = []
    if claude_oauth_login(home):
        logins.append("a claude.ai login (~/.claude/.credentials.json)")
    if (env.get("ANTHROPIC_AUTH_TOKEN") or "").strip():
        logins.append("ANTHROPIC_AUTH_TOKEN")
    if not logins:
        return None
    return (f"auth conflict: ANTHROPIC_API_KEY is set and so is {' and '.join(logins)}. Claude Code warns "
            "about this and may bill the API key instead of your subscription (or send the wrong credential "
            "through the proxy). Keep one: `unset ANTHROPIC_API_KEY` (and remove it from settings.json), "
            "or run `claude /logout` to use only the key.")


def plan_for(client: str, target: Target, *, route_name: str | None = None, model: str | None = None,
             env: Mapping[str, str] | None = None, home: Path | None = None) -> Plan:
    env = os.environ if env is None else env
    home = Path.home() if home is None else home
    if client not in CLIENTS:
        raise EnvError(f"unknown client {client!r}; one of: {', '.join(CLIENTS)}")
    if target.forward:
        return _forward_plan(client, target, env)
    plan = Plan(client, "")
    if target.routes is None:
        plan.notes.append(
            f"no running proxy found ({target.source.split(':')[0]}): assuming `firsttoken proxy --port "
            f"{target.url.rsplit(':', 1)[1]}` with one upstream whose path has no /v1. Pass the same "
            "--upstream as the proxy (or start it first) to be exact.")
    if client in ("openai", "codex"):
        route = pick_route(target, "openai", route_name)
        base = openai_base(target, route)
        plan.title = f"{client}: {_route_label(target, route)}"
        _version_note(plan, route)
        if client == "openai":
            plan.exports.append(("OPENAI_BASE_URL", base))
            plan.notes += [
                "OpenAI SDKs read OPENAI_BASE_URL: Python `openai.OpenAI()` and Node `new OpenAI()` pick it up "
                f"(or pass base_url / baseURL = {base}).",
                "Code on openai<1.0 or LangChain's older classes read OPENAI_API_BASE instead: set it to the same value.",
                "Keep OPENAI_API_KEY as it is: the proxy forwards it unchanged.",
            ]
            if not (env.get("OPENAI_API_KEY") or "").strip():
                plan.warnings.append("OPENAI_API_KEY is not set in this shell: the SDK will refuse to start without it.")
        else:
            plan.exports.append(("OPENAI_BASE_URL", base))
            plan.blocks.append(("~/.codex/config.toml", _codex_toml(base, model)))
            plan.notes += [
                "Codex: the config.toml block is the durable way; `model_provider` must stay above every "
                "[table] in the file. For one shell, OPENAI_BASE_URL (read by Codex's built-in openai "
                "provider) is enough.",
                "wire_api = \"responses\": the upstream must serve the Responses API (/v1/responses); "
                "Codex no longer supports chat completions.",
                "env_key names the variable that holds the key; Codex sends it as Authorization: Bearer.",
            ]
        return plan
    if client in ("claude-code", "anthropic"):
        route = pick_route(target, "anthropic", route_name)
        base, warns = anthropic_base(target, route)
        plan.warnings += warns
        plan.title = f"{client}: {_route_label(target, route)}"
        plan.exports.append(("ANTHROPIC_BASE_URL", base))
        third_party = route is not None and route.host != "unknown" and route.host != "api.anthropic.com" \
            and not fwd.is_loopback(route.host)
        if client == "anthropic":
            plan.notes += [
                "Anthropic SDKs read ANTHROPIC_BASE_URL (no /v1: the SDK adds /v1/messages); Python "
                f"`anthropic.Anthropic()` / Node `new Anthropic()` pick it up (or pass base_url / baseURL = {base}).",
                "Keep ANTHROPIC_API_KEY as it is: the proxy forwards it unchanged.",
            ]
        else:
            envblock: dict[str, str] = {"ANTHROPIC_BASE_URL": base}
            if third_party:
                envblock["ANTHROPIC_AUTH_TOKEN"] = f"<your {route.host} key>"
                plan.placeholders.append(("ANTHROPIC_AUTH_TOKEN", f"<your {route.host} key>"))
            if model:
                envblock["ANTHROPIC_MODEL"] = model
                plan.exports.append(("ANTHROPIC_MODEL", model))
            elif third_party:
                envblock["ANTHROPIC_MODEL"] = f"<a model {route.host} serves>"
                plan.placeholders.append(("ANTHROPIC_MODEL", f"<a model {route.host} serves>"))
            plan.blocks.append(("~/.claude/settings.json (or ./.claude/settings.json for one project)",
                                json.dumps({"env": envblock}, indent=2)))
            plan.notes += [
                "ANTHROPIC_BASE_URL has no /v1: Claude Code adds /v1/messages itself.",
                "Auth: a claude.ai login or ANTHROPIC_API_KEY goes through the proxy unchanged — nothing to add. "
                "ANTHROPIC_API_KEY is sent as x-api-key; ANTHROPIC_AUTH_TOKEN as Authorization: Bearer "
                "(what gateways and Anthropic-compatible providers expect). Set only one of them.",
                "ANTHROPIC_MODEL picks the model (needed when the upstream is not Anthropic).",
                "Restart Claude Code after editing settings.json; `claude /status` shows the base URL in use.",
            ]
            conflict = auth_conflict(env, home)
            if conflict:
                plan.warnings.append(conflict)
            if (env.get("ANTHROPIC_API_KEY") or "").strip() and (env.get("ANTHROPIC_AUTH_TOKEN") or "").strip():
                plan.warnings.append("both ANTHROPIC_API_KEY and ANTHROPIC_AUTH_TOKEN are set: Claude Code sends "
                                     "both headers; unset the one your upstream does not expect.")
        return plan
    if client == "cline":
        return _cline_plan(plan, target, route_name, model)
    return _curl_plan(plan, target, route_name, model)


def _version_note(plan: Plan, route: Route | None) -> None:
    if route is not None and has_version(route.prefix):
        plan.notes.append(f"The upstream path {route.prefix!r} already holds the API version, so the base URL has "
                          "no /v1 (the client appends /chat/completions or /responses to it).")


def _codex_toml(base: str, model: str | None) -> str:
    lines = ['model_provider = "firsttoken"']
    lines.append(f'model = "{model}"' if model else '# model = "gpt-5-codex"')
    lines += ["", "[model_providers.firsttoken]", 'name = "firsttoken"', f'base_url = "{base}"',
              'env_key = "OPENAI_API_KEY"', 'wire_api = "responses"']
    return "\n".join(lines)


def _families(target: Target, route_name: str | None) -> list[tuple[str, Route | None]]:
    """For clients that speak both APIs (cline, curl): which API each route serves."""
    if target.routes is None and not route_name:
        return [("openai", None), ("anthropic", None)]
    if route_name or len(target.routes or []) <= 1:
        r = pick_route(target, "openai", route_name)
        return [("anthropic" if r is not None and _looks(r, "anthropic") else "openai", r)]
    out = []
    for fam in ("openai", "anthropic"):
        try:
            out.append((fam, pick_route(target, fam, None)))
        except EnvError:
            pass
    if not out:
        raise EnvError(f"the proxy has {len(target.routes or [])} routes; pass --route NAME")
    return out


def _cline_plan(plan: Plan, target: Target, route_name: str | None, model: str | None) -> Plan:
    plan.title = f"cline: proxy {target.url}"
    text: list[str] = []
    for fam, route in _families(target, route_name):
        if text:
            text.append("")
        if fam == "openai":
            _version_note(plan, route)
            text += ["API Provider: OpenAI Compatible",
                     f"  Base URL: {openai_base(target, route)}",
                     "  API Key:  your upstream's key (forwarded unchanged)",
                     f"  Model ID: {model or '<the model name>'}"]
        else:
            base, warns = anthropic_base(target, route)
            plan.warnings += warns
            text += ["API Provider: Anthropic",
                     "  tick 'Use custom base URL'",
                     f"  Base URL: {base}   (no /v1)",
                     "  API Key:  your Anthropic key (forwarded unchanged)"]
    plan.blocks.append(("Cline settings (the gear icon in Cline's panel)", "\n".join(text)))
    plan.notes.append("Cline reads no environment variables for this: set it in its settings panel.")
    return plan


def _curl_plan(plan: Plan, target: Target, route_name: str | None, model: str | None) -> Plan:
    plan.title = f"curl: proxy {target.url}"
    examples = []
    for fam, route in _families(target, route_name):
        if fam == "openai":
            _version_note(plan, route)
            plan.exports.append(("OPENAI_BASE_URL", openai_base(target, route)))
            body = json.dumps({"model": model or "gpt-4o-mini", "stream": True,
                               "stream_options": {"include_usage": True},
                               "messages": [{"role": "user", "content": "Say hi"}]})
            examples.append('curl -N "$OPENAI_BASE_URL/chat/completions" \\\n'
                            '  -H "Authorization: Bearer $OPENAI_API_KEY" -H "Content-Type: application/json" \\\n'
                            f"  -d '{body}'")
        else:
            base, warns = anthropic_base(target, route)
            plan.warnings += warns
            plan.exports.append(("ANTHROPIC_BASE_URL", base))
            body = json.dumps({"model": model or "claude-sonnet-4-5", "max_tokens": 64, "stream": True,
                               "messages": [{"role": "user", "content": "Say hi"}]})
            examples.append('curl -N "$ANTHROPIC_BASE_URL/v1/messages" \\\n'
                            '  -H "x-api-key: $ANTHROPIC_API_KEY" -H "anthropic-version: 2023-06-01" '
                            '-H "Content-Type: application/json" \\\n'
                            f"  -d '{body}'")
    plan.blocks.append(("curl (-N prints the stream as it arrives)", "\n\n".join(examples)))
    plan.notes.append("Then `firsttoken logs` lists the request and `firsttoken show <id>` draws its timeline.")
    return plan


def _forward_plan(client: str, target: Target, env: Mapping[str, str]) -> Plan:
    ca = fwd.ca_cert_path(target.confdir)
    bundle = ca.parent / "firsttoken-ca-bundle.pem"
    plan = Plan(client, f"{client}: forward proxy {target.url} (HTTPS_PROXY; only LLM hosts are intercepted)")
    plan.exports.append(("HTTPS_PROXY", target.url))
    if not ca.exists():
        plan.warnings.append(f"{ca} does not exist yet: start `firsttoken proxy --forward` once, then run this again.")
    elif client in ("openai", "anthropic", "codex", "curl"):
        try:
            fwd.combined_ca_bundle(bundle, target.confdir)
        except OSError as e:
            plan.warnings.append(f"could not write {bundle}: {e}")
    if client in ("claude-code", "cline"):
        plan.exports.append(("NODE_EXTRA_CA_CERTS", str(ca)))
        plan.notes.append("Node adds NODE_EXTRA_CA_CERTS to its own CAs; it is read at start-up only.")
        if client == "claude-code":
            plan.blocks.append(("~/.claude/settings.json", json.dumps(
                {"env": {"HTTPS_PROXY": target.url, "NODE_EXTRA_CA_CERTS": str(ca)}}, indent=2)))
        else:
            plan.notes.append("Cline runs inside VS Code: start `code` from a shell with these set, or set "
                              "VS Code's http.proxy; the CA must be in NODE_EXTRA_CA_CERTS of VS Code's process.")
    elif client in ("openai", "anthropic"):
        plan.exports += [("SSL_CERT_FILE", str(bundle)), ("REQUESTS_CA_BUNDLE", str(bundle))]
        plan.exports.append(("NODE_EXTRA_CA_CERTS", str(ca)))
        plan.notes.append(f"{bundle.name} = the public CAs (certifi) + mitmproxy's CA: SSL_CERT_FILE replaces a "
                          "Python client's trust store, so it needs both. Node SDKs use NODE_EXTRA_CA_CERTS.")
    elif client == "codex":
        plan.exports.append(("SSL_CERT_FILE", str(bundle)))
    elif client == "curl":
        plan.exports.append(("CURL_CA_BUNDLE", str(bundle)))
    no_proxy = env.get("NO_PROXY") or env.get("no_proxy") or ""
    if "127.0.0.1" not in no_proxy and "localhost" not in no_proxy:
        plan.exports.append(("NO_PROXY", ",".join(x for x in (no_proxy, "127.0.0.1,localhost") if x)))
    return plan


# -- rendering ---------------------------------------------------------------------------------

def _ps_quote(v: str) -> str:
    return '"' + v.replace("`", "``").replace('"', '`"').replace("$", "`$") + '"'


def render(plan: Plan, fmt: str = "human") -> str:
    """``human``: blocks and notes; ``shell``: ``export`` lines; ``powershell``: ``$env:`` lines.
    The shell formats hold only assignments and ``#`` comments, so they can be eval'd."""
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
    lines.append(f"firsttoken env {plan.title}")
    lines.append("")
    if plan.exports and plan.client not in ("cline",):
        lines.append("Environment (shell):")
        for k, v in plan.exports:
            lines.append(f"  export {k}={shlex.quote(v)}")
        for k, v in plan.placeholders:
            lines.append(f"  export {k}={shlex.quote(v)}   # fill in")
        lines.append("")
    for where, text in plan.blocks:
        lines.append(f"{where}:")
        lines += [f"  {t}" if t else "" for t in text.splitlines()]
        lines.append("")
    for n in plan.notes:
        lines.append(f"- {n}")
    if plan.exports:
        lines.append(f'- In a shell: eval "$(firsttoken env {plan.client} --shell)" with the same options '
                     f"(PowerShell: firsttoken env {plan.client} --powershell | Invoke-Expression)")
    return "\n".join(lines).rstrip() + "\n"


# -- the command -------------------------------------------------------------------------------

@click.command("env")
@click.argument("client", type=click.Choice(CLIENTS))
@click.option("--port", "-p", type=int, default=None, help="The proxy's port (default: the running proxy's, else 8787).")
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
    """Print what to set so CLIENT goes through the proxy.

    CLIENT: claude-code, openai (Python/Node SDK), anthropic (SDK), cline, codex or curl.
    Keys are never printed: clients keep their own and the proxy forwards them unchanged.
    """
    target = resolve_target(upstreams=upstreams, port=port, host=host, db_path=db_path, forward=forward_mode)
    plan = plan_for(client, target, route_name=route_name, model=model)
    click.echo(render(plan, fmt or "human"), nl=False)
    for n in plan.notes if fmt else []:
        if n.startswith("no running proxy found"):
            click.echo(f"note: {n}", err=True)
    for w in plan.warnings:
        click.echo(f"warning: {w}", err=True)
