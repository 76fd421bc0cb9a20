"""Upstream specs and routes.

``--upstream https://host/api`` (one route, served at the proxy's root) or
``--upstream name=https://host/v1`` (served at ``/name``). The upstream path prefix is
prepended to what the client sent, a pure concatenation: a wrong client path reaches the
upstream as sent, so it can be diagnosed rather than silently "fixed".
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urlsplit

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$")


class RouteError(ValueError):
    pass


@dataclass(frozen=True)
class Route:
    name: str | None  # None: the default route (served at /)
    scheme: str
    host: str
    port: int
    prefix: str  # "" or "/api" (never a trailing slash)

    @property
    def url(self) -> str:
        default = 443 if self.scheme == "https" else 80
        port = "" if self.port == default else f":{self.port}"
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}{port}{self.prefix}"

    @property
    def mount(self) -> str:
        """Where clients reach this route on the proxy."""
        return f"/{self.name}" if self.name else ""


def parse_upstream(spec: str) -> Route:
    name = None
    text = spec.strip()
    m = re.match(r"^([A-Za-z0-9][A-Za-z0-9_.\-]*)=(.+)$", text)
    if m and "://" not in m.group(1):
        name, text = m.group(1), m.group(2)
    if "://" not in text:
        raise RouteError(
            f"upstream {spec!r} has no scheme: write it as https://host/path "
            "(or name=https://host/path for several upstreams)"
        )
    u = urlsplit(text)
    if u.scheme not in ("http", "https"):
        raise RouteError(f"upstream {spec!r}: only http:// and https:// upstreams are supported")
    if not u.hostname:
        raise RouteError(f"upstream {spec!r} has no host name")
    if u.query or u.fragment:
        raise RouteError(f"upstream {spec!r}: drop the ?query / #fragment, give just scheme://host/path")
    try:
        port = u.port or (443 if u.scheme == "https" else 80)
    except ValueError as e:
        raise RouteError(f"upstream {spec!r}: {e}") from None
    if name is not None and not _NAME.match(name):
        raise RouteError(f"route name {name!r}: use letters, digits, '-', '_' or '.'")
    return Route(name, u.scheme, u.hostname, port, u.path.rstrip("/"))


def parse_upstreams(specs: list[str] | tuple[str, ...]) -> list[Route]:
    routes = [parse_upstream(s) for s in specs if s and s.strip()]
    names = [r.name for r in routes]
    if names.count(None) > 1:
        raise RouteError(
            "more than one upstream without a name: name them, e.g. "
            "--upstream openai=https://api.openai.com/v1 --upstream anthropic=https://api.anthropic.com"
        )
    dup = {n for n in names if n is not None and names.count(n) > 1}
    if dup:
        raise RouteError(f"route name used twice: {', '.join(sorted(dup))}")
    return routes


def match(routes: list[Route], path: str) -> tuple[Route | None, str]:
    """The route for a client path and the rest of the path to append to its prefix."""
    default = None
    for r in routes:
        if r.name is None:
            default = r
            continue
        mount = "/" + r.name
        if path == mount or path.startswith(mount + "/") or path.startswith(mount + "?"):
            rest = path[len(mount):]
            if not rest.startswith("/"):
                rest = "/" + rest
            return r, rest
    return default, path
