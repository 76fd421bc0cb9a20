"""Where the proxy is and which routes it has (from --upstream, the registry of running proxies,
or the defaults), and which route a client uses.

The base-URL rule itself lives in ``firsttoken.addon.routing`` (``pick_route``,
``client_base_url``, ``base_url_warnings``): every command asks it, so they all agree.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import click

from firsttoken.addon import routing
from firsttoken.addon.routing import Route
from firsttoken.cli.proxy.state import read_states, state_routes

DEFAULT_PORT = 8787


class EnvError(click.ClickException):
    pass


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
        routes = state_routes(s)
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


def pick_route(target: Target, family: str, name: str | None = None) -> Route | None:
    """``routing.pick_route`` for the target's routes, its errors as the env command's EnvError."""
    try:
        return routing.pick_route(target.routes, family, name)
    except routing.RouteError as e:
        raise EnvError(str(e)) from None
