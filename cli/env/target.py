"""Where the proxy is, which of its routes a client uses, and the base-URL rules.

The rules (shared with `firsttoken doctor`, which checks base URLs against them):

* OpenAI-style clients append ``/chat/completions`` / ``/responses`` to their base URL, so it
  needs ``/v1`` — unless the upstream's path already carries a version (``https://host/v1``,
  ``…/api/paas/v4``, ``…/v1beta/openai``): then the proxy adds it and the base URL must not.
* Anthropic clients append ``/v1/messages`` themselves: ``ANTHROPIC_BASE_URL`` never ends in
  ``/v1`` (and an upstream ending in ``/v1`` would produce ``/v1/v1/messages``).
"""

from __future__ import annotations

import re
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


# -- the base-URL rules --------------------------------------------------------------------------

_VERSION_SEGMENT = re.compile(r"^v\d+[a-z0-9]*$", re.IGNORECASE)
_ENDS_IN_V1 = re.compile(r"/v1$")


def count_versions(path: str) -> int:
    """How many API-version segments (/v1, /v4, /v1beta) a URL path holds."""
    return sum(1 for seg in path.split("/") if _VERSION_SEGMENT.match(seg))


def has_version(prefix: str) -> bool:
    """Whether an upstream path already holds an API version (/v1, /v4, /v1beta)."""
    return count_versions(prefix) > 0


def ends_in_v1(path: str) -> bool:
    """A path ending in /v1: wrong for Anthropic clients, which append /v1/messages themselves."""
    return bool(_ENDS_IN_V1.search(path))


# -- which route ---------------------------------------------------------------------------------

def looks_like(route: Route, family: str) -> bool:
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
    fits = [r for r in routes if looks_like(r, family)]
    if family == "anthropic":
        fits = [r for r in fits if looks_like(r, "anthropic")]
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
    if route is not None and ends_in_v1(route.prefix):
        warnings.append(
            f"route {route.name or 'default'!r} forwards to {route.url}: Anthropic clients add /v1/messages "
            f"themselves, so the upstream would see {route.prefix}/v1/messages. Start the proxy with "
            f"--upstream {(route.name + '=') if route.name else ''}{route.url[: -len('/v1')]} instead.")
    return f"{target.url}{route.mount if route else ''}", warnings
