"""`firsttoken run`: where the child would have sent its requests, and how to send them through the
proxy instead: one adapter per client (cli/run/clients/), this module the glue (the plan, the
redirect with the one base-URL rule, forward mode, what `run` says when nothing can record it).
The guarantee, the clients, launchers and forward mode: docs/run.md."""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Mapping
from pathlib import Path

from firsttoken.addon import routing
from firsttoken.addon.routing import Route
from firsttoken.cli.run.clients import registry
from firsttoken.cli.run.clients.base import ChildFile, Context, Plan, PlanError, Redirect, Upstream
from firsttoken.cli.run.clients.claude import MANAGED_SETTINGS as MANAGED_CLAUDE_SETTINGS
from firsttoken.cli.run.clients.claude import ClaudeCode
from firsttoken.cli.run.clients.sdk import DEFAULTS as DEFAULT_UPSTREAMS

__all__ = ["ChildFile", "Plan", "PlanError", "Redirect", "Upstream", "client_of", "make_plan", "redirect",
           "forward_env", "export_lines", "home_dir", "serves", "cannot_record", "MANAGED_CLAUDE_SETTINGS"]



def client_of(argv: list[str]) -> tuple[str, int]:
    """Which client a command runs (its adapter's name: claude-code, codex, …, or other), and where
    the client's own arguments start in ``argv`` (see :func:`registry.client_of`)."""
    adapter, at = registry.client_of(argv)
    return adapter.name, at


def make_plan(argv: list[str], env: Mapping[str, str], home: Path, cwd: Path,
              managed: tuple[Path, ...] = MANAGED_CLAUDE_SETTINGS) -> Plan:
    adapter, args_at = registry.client_of(argv)
    if isinstance(adapter, ClaudeCode) and managed != MANAGED_CLAUDE_SETTINGS:
        adapter = ClaudeCode(managed)
    plan = Plan(list(argv), adapter.name, {}, args_at)
    adapter.find(plan, Context(env=env, home=home, cwd=cwd))
    for name, up in plan.upstreams.items():
        route = routing.parse_upstream(f"{name}={up.url}") if "://" in up.url else None
        if route is None:
            raise PlanError(f"{up.source} = {up.url!r} is not an http(s) URL: fix it (e.g. "
                            f"{DEFAULT_UPSTREAMS.get(up.family, 'https://host/path')}) or unset it")
        plan.notes += routing.base_url_warnings(route, up.family)
        if up.family == "openai" and not routing.has_version(route.prefix):
            plan.notes.append(f"{up.source} = {up.url} has no API version: through firsttoken the client calls "
                              f"{up.url}/v1/… (the base-URL rule adds /v1).")
    plan.routes()  # a URL that does not parse is a PlanError now, not a crash later
    if plan.forward_reason and not plan.cannot:
        plain = [u for u in plan.upstreams.values() if u.url.lower().startswith("http://")]
        if plain:
            plan.cannot = (f"{plan.forward_reason.split(':')[0]}, and forward mode cannot record it: its upstream "
                           f"{plain[0].url} ({plain[0].source}) is plain HTTP, which HTTPS_PROXY does not carry")
    return plan


def cannot_record(plan: Plan) -> list[str]:
    """What `run` says, before starting anything, for a client it cannot record: why, and the by-hand way."""
    adapter = registry.by_name(plan.client)
    lines = [f"firsttoken run cannot record {adapter.title} here: {plan.cannot}.",
             "Record it by hand: start the proxy for its upstream(s), then point the client at it:",
             "  firsttoken proxy " + " ".join(f"--upstream {shlex.quote(s)}" for s in plan.route_specs())
             if plan.upstreams else "  firsttoken proxy --upstream URL"]
    lines += [f"  {x}" for x in adapter.by_hand(plan)]
    lines.append("(or run the command without firsttoken: nothing was started)")
    return lines


def serves(route: Route, upstream: Upstream) -> bool:
    """Whether a proxy ``route`` forwards a client of ``upstream.family`` that sets the base URL the
    proxy gives it to ``upstream.url``: the route's URL, plus the /v1 the base-URL rule adds."""
    try:
        want = routing.parse_upstream(upstream.url).url.rstrip("/")
    except routing.RouteError:
        return False
    base = routing.client_base_url("", route, upstream.family)
    return (route.url + base[len(route.mount):]).rstrip("/") == want


def redirect(plan: Plan, proxy_url: str, routes: dict[str, Route], env: Mapping[str, str]) -> Redirect:
    """Reverse mode: the child points at the proxy (``proxy_url`` may carry a run mark), through its
    adapter; ``routes`` are the proxy's routes by the plan's route names."""
    adapter = registry.by_name(plan.client)
    bases = {name: routing.client_base_url(proxy_url, routes[name], up.family)
             for name, up in plan.upstreams.items() if name in routes}
    if not bases:
        return Redirect(list(plan.argv), {}, "nothing to redirect")
    r = adapter.redirect(plan, bases, proxy_url, routes, env)
    r.env.update(_no_proxy(env))
    return r


def forward_env(proxy_url: str, ca: Path, bundle: Path, env: Mapping[str, str]) -> dict[str, str]:
    """Forward mode for one child: HTTPS_PROXY and HTTP_PROXY (both cases: a plain-http:// base URL must not
    go around firsttoken through a company proxy left in HTTP_PROXY) and mitmproxy's CA for Node, Python,
    curl and OpenSSL. The user's own proxy is not lost: firsttoken's upstream leg goes on through it
    (addon/egress), read from the environment `run` itself was started with."""
    out = {"HTTPS_PROXY": proxy_url, "https_proxy": proxy_url, "HTTP_PROXY": proxy_url, "http_proxy": proxy_url,
           "NODE_EXTRA_CA_CERTS": str(ca),
           "SSL_CERT_FILE": str(bundle), "REQUESTS_CA_BUNDLE": str(bundle), "CURL_CA_BUNDLE": str(bundle)}
    out.update(_no_proxy({**env, "HTTPS_PROXY": proxy_url}))
    return out


def _no_proxy(env: Mapping[str, str]) -> dict[str, str]:
    """With a proxy configured, keep the child's requests to 127.0.0.1 (the firsttoken proxy) direct."""
    if not any((env.get(v) or "").strip() for v in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy",
                                                      "ALL_PROXY", "all_proxy")):
        return {}
    current = env.get("NO_PROXY") or env.get("no_proxy") or ""
    if "127.0.0.1" in current and "localhost" in current:
        return {}
    value = ",".join(x for x in (current, "127.0.0.1,localhost") if x)
    return {"NO_PROXY": value, "no_proxy": value}


def export_lines(plan: Plan, r: Redirect, proxy_note: list[str], notes: list[str]) -> list[str]:
    """`--print-env`: shell lines a user can paste (comments say where each value came from); ``notes``
    are the plan's for the run's mode (cli/run/summary.py mode_notes)."""
    lines = [f"# firsttoken run: {plan.client}; upstreams "
             + (", ".join(f"{name}={u.url} ({u.source})" for name, u in plan.upstreams.items()) or "none redirected")]
    lines += [f"# {n}" for n in proxy_note + notes]
    private = "<a private directory firsttoken run creates>"
    lines += [f"export {k}={shlex.quote(_printable(v.replace(r.dir_placeholder, private)))}" for k, v in r.env.items()]
    if r.argv != plan.argv:
        lines.append(f"# {plan.client}: its own configuration wins over the environment; run it as:")
        lines.append("#   " + shlex.join(a.replace(r.dir_placeholder, private) for a in r.argv))
    written = [f.name for f in r.files if f.link is None]
    if written:  # their text may hold the user's keys: described, never printed
        lines.append(f"# {plan.client}: `firsttoken run` writes {' and '.join(written)} to a private directory "
                     f"for the run (removed after it): {r.how}.")
        lines.append(f"# To set it once yourself: {'; '.join(registry.by_name(plan.client).by_hand(plan))}")
    return lines


def settings_lines(r: Redirect, base: str, shown: str) -> list[str]:
    """The variables ``r`` sets that name the proxy at ``base``, as comment lines with ``base`` written
    ``shown`` (`--print-env`'s account of a run's own proxy, whose port is chosen when it starts); keys
    masked as in ``export_lines``."""
    return [f"  {k}={_printable(v).replace(base, shown)}" for k, v in r.env.items() if base in v]


def _printable(value: str) -> str:
    """A value as `--print-env` shows it: inline JSON (OPENCODE_CONFIG_CONTENT) with its keys masked."""
    if not value.lstrip().startswith("{"):
        return value
    from firsttoken.addon.secrets import body_secrets, redact_text

    try:
        found = body_secrets(json.loads(value))
    except ValueError:
        return value
    return redact_text(value, found) if found else value


def home_dir(env: Mapping[str, str]) -> Path:
    return Path(env.get("HOME") or os.path.expanduser("~"))
