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


# -- THE base-URL rule ---------------------------------------------------------------------------
# Every command asks these functions which base URL a client needs: `env`, the proxy's banner,
# the live header, the diagnosis hints, `doctor` and `run`. A second copy would drift, and users
# would get two answers.
#
# * OpenAI-style clients append ``/chat/completions`` / ``/responses`` to their base URL, so it
#   needs an API version — unless the upstream's path already carries one (``https://host/v1``,
#   ``…/api/paas/v4``, ``…/v1beta/openai``): then the proxy adds it and the base URL must not.
# * Anthropic clients append ``/v1/messages`` themselves: their base URL never ends in a version
#   (and an upstream ending in ``/v1`` would produce ``/v1/v1/messages``).

FAMILIES = ("openai", "anthropic")

_VERSION_SEGMENT = re.compile(r"^v\d+[a-z0-9]*$", re.IGNORECASE)


def count_versions(path: str) -> int:
    """How many API-version segments (/v1, /v4, /v1beta) a URL path holds."""
    return sum(1 for seg in (path or "").split("/") if _VERSION_SEGMENT.match(seg))


def has_version(path: str) -> bool:
    """Whether a path already holds an API version (/v1, /v4, /v1beta)."""
    return count_versions(path) > 0


def ends_in_v1(path: str) -> bool:
    """A path ending in /v1: wrong for Anthropic clients, which append /v1/messages themselves."""
    return bool(re.search(r"/v1$", (path or "").rstrip("/")))


def family_of_api(api: str | None) -> str:
    """Which client family speaks an API: 'anthropic' for the Messages API, 'gemini' for Google's
    Gemini API, else 'openai'."""
    api = api or ""
    return "anthropic" if api.startswith("anthropic") else "gemini" if api.startswith("gemini") else "openai"


def looks_like(route: Route, family: str) -> bool:
    """Whether a route appears to serve ``family`` (by its name, host or path)."""
    name, host = (route.name or "").lower(), route.host.lower()
    # Google's own API (not its OpenAI-compatible endpoint, …/v1beta/openai)
    gemini = bool(re.search(r"gemini|google|vertex", name) or host.endswith("googleapis.com")) \
        and not route.prefix.lower().rstrip("/").endswith("/openai")
    if family == "gemini":
        return gemini
    if family == "ollama":  # Ollama's native API, at the server's root (OLLAMA_HOST)
        return "ollama" in name or "ollama" in host or route.port == 11434
    anthropic = bool(re.search(r"anth|claude", name) or "anthropic" in host or route.prefix.lower().endswith("/anthropic"))
    return anthropic if family == "anthropic" else not anthropic and not gemini


class AmbiguousRoute(RouteError):
    """Several routes could serve a client; the user must name one."""


def pick_route(routes: list[Route] | None, family: str, name: str | None = None) -> Route | None:
    """The route a client of ``family`` should use; None when the routes are unknown or empty.

    Raises RouteError for an unknown ``name`` and AmbiguousRoute when no route stands out."""
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
        raise RouteError(f"no route named {name!r}; routes: {', '.join(r.name or 'default' for r in routes)}")
    if len(routes) == 1:
        return routes[0]
    fits = [r for r in routes if looks_like(r, family)]
    if len(fits) == 1:
        return fits[0]
    default = [r for r in routes if r.name is None]
    if default and family != "anthropic":
        return default[0]
    raise AmbiguousRoute(f"the proxy has {len(routes)} routes; pass --route NAME (one of: "
                         f"{', '.join(r.name or 'default' for r in routes)})")


def client_base_url(proxy_url: str, route: Route | None, family: str) -> str:
    """The base URL a client of ``family`` sets to reach ``route`` through the proxy at ``proxy_url``.

    ``route`` None means one route at the proxy's root whose upstream path holds no version."""
    base = proxy_url.rstrip("/") + (route.mount if route else "")
    # their clients add /v1/messages, /v1beta/models/..., /api/chat themselves; cloud: a base URL the client
    # appends its whole path to (Bedrock, Vertex); ollama: OLLAMA_HOST, the server's root (/api/chat)
    if family in ("anthropic", "gemini", "cloud", "ollama"):
        return base
    return base if route is not None and has_version(route.prefix) else base + "/v1"


def base_url_warnings(route: Route | None, family: str) -> list[str]:
    """What is wrong with a route for a client of ``family`` whatever base URL it sets."""
    if family != "anthropic" or route is None or not has_version(route.prefix):
        return []
    label = route.name or "default"
    if ends_in_v1(route.prefix):
        return [f"route {label!r} forwards to {route.url}: Anthropic clients add /v1/messages "
                f"themselves, so the upstream would see {route.prefix}/v1/messages. Start the proxy with "
                f"--upstream {(route.name + '=') if route.name else ''}{route.url[: -len('/v1')]} instead."]
    return [f"route {label!r} forwards to {route.url}, whose path already holds an API version: Anthropic "
            f"clients add /v1/messages themselves, so the upstream would see {route.prefix}/v1/messages. "
            "This looks like an OpenAI-style endpoint; for Anthropic clients add a route to the provider's "
            "Anthropic endpoint (e.g. --upstream anthropic=https://host/api/anthropic)."]


def base_url_env(family: str) -> str:
    """The variable a client of ``family`` reads its base URL from."""
    return {"anthropic": "ANTHROPIC_BASE_URL", "gemini": "GOOGLE_GEMINI_BASE_URL",
            "ollama": "OLLAMA_HOST"}.get(family, "OPENAI_BASE_URL")


def record_route(name: str | None, upstream: str | None) -> Route | None:
    """The Route a recorded request went through, rebuilt from its ``route`` and ``upstream`` columns
    (None when the upstream is unknown or not a URL)."""
    if not upstream:
        return None
    spec = upstream if name in (None, "", "default") else f"{name}={upstream}"
    try:
        return parse_upstream(spec)
    except RouteError:
        return None


@dataclass(frozen=True)
class ClientBase:
    """What a client of one family sets to use the proxy: the outcome of the rule for one family."""

    family: str
    env: str  # OPENAI_BASE_URL / ANTHROPIC_BASE_URL
    url: str | None  # None: no route stands out (see ``problem``)
    route: Route | None
    warnings: tuple[str, ...] = ()
    choices: tuple[str, ...] = ()  # the routes to choose from when none stands out

    @property
    def text(self) -> str:
        """One line to show: ``VAR=url``, or what to run when several routes could serve the client."""
        if self.url is None:
            return (f"{self.env}: several routes fit ({', '.join(self.choices)}); run "
                    f"`firsttoken env {self.family} --route NAME`")
        return f"{self.env}={self.url}"


def client_bases(proxy_url: str, routes: list[Route] | None) -> list[ClientBase]:
    """For each client family, the route ``pick_route`` chooses and the base URL to set for it."""
    out = []
    families = FAMILIES + (("gemini",) if any(looks_like(r, "gemini") for r in routes or []) else ())
    for family in families:  # Gemini's line only for a route that looks like Google's
        env = base_url_env(family)
        try:
            route = pick_route(routes, family)
        except AmbiguousRoute:
            out.append(ClientBase(family, env, None, None, choices=tuple(r.name or "default" for r in routes or [])))
            continue
        out.append(ClientBase(family, env, client_base_url(proxy_url, route, family), route,
                              tuple(base_url_warnings(route, family))))
    return out

