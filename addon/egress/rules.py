"""THE egress rule: which proxy (if any) an upstream connection goes through.

The rule curl, Python and Go share (``HTTPS_PROXY`` / ``HTTP_PROXY`` / ``ALL_PROXY`` / ``NO_PROXY``,
loopback never proxied from the environment), docs/clients.md ("Behind a proxy"). Pure: ``env`` is
passed in; the proxy, ``env``, ``doctor``, ``run`` and the banner all ask :func:`decide`.
"""

from __future__ import annotations

import base64
import ipaddress
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import unquote, urlsplit

from firsttoken.addon.secrets import mask

#: the proxy variables, in the order of precedence for each scheme (lower case first)
SCHEME_VARS = {
    "https": ("https_proxy", "HTTPS_PROXY"),
    "http": ("http_proxy", "HTTP_PROXY"),
}
ALL_VARS = ("all_proxy", "ALL_PROXY")
NO_PROXY_VARS = ("no_proxy", "NO_PROXY")
#: every variable that can send an upstream through a proxy
PROXY_VARS = SCHEME_VARS["https"] + SCHEME_VARS["http"] + ALL_VARS

SOCKS_SCHEMES = ("socks", "socks4", "socks4a", "socks5", "socks5h")


class EgressError(ValueError):
    """A proxy setting firsttoken cannot use (a SOCKS proxy, a URL that does not parse)."""


@dataclass(frozen=True)
class Proxy:
    scheme: str  # http | https (the connection to the proxy itself)
    host: str
    port: int
    source: str  # "--upstream-proxy", "HTTPS_PROXY", "all_proxy", ...
    username: str | None = None
    password: str | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        """scheme://host:port, never the credentials."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}"

    @property
    def has_credentials(self) -> bool:
        return self.username is not None

    @property
    def display(self) -> str:
        """For people: the URL and a fingerprint of the credentials (never the password)."""
        if not self.has_credentials:
            return self.url
        return f"{self.url} (with Basic credentials for user {mask(self.username or '')}; the password is never shown)"

    def authorization(self) -> str | None:
        """The ``Proxy-Authorization`` header value, or None without credentials."""
        if not self.has_credentials:
            return None
        raw = f"{self.username}:{self.password or ''}".encode()
        return "Basic " + base64.b64encode(raw).decode("ascii")

    def __str__(self) -> str:
        return self.display


@dataclass(frozen=True)
class Decision:
    """How one upstream is reached: ``proxy`` None is a direct connection; ``reason`` says why."""

    proxy: Proxy | None
    reason: str

    @property
    def direct(self) -> bool:
        return self.proxy is None

    def describe(self) -> str:
        """One phrase for banners and tables: "via http://proxy:3128 (HTTPS_PROXY)" or "direct (…)"."""
        if self.proxy is None:
            return f"direct ({self.reason})"
        return f"via {self.proxy.display} ({self.reason})"


def parse_proxy_url(value: str, source: str) -> Proxy:
    """A proxy variable's or option's value as a :class:`Proxy` (EgressError when unusable)."""
    text = (value or "").strip()
    if not text:
        raise EgressError(f"{source} is empty")
    if "://" not in text:
        text = "http://" + text
    try:
        u = urlsplit(text)
        port = u.port
    except ValueError as e:
        raise EgressError(f"{source}: the proxy URL does not parse ({e}): write it as http://host:port") from None
    scheme = u.scheme.lower()
    shown = _without_credentials(u)
    if scheme in SOCKS_SCHEMES:
        raise EgressError(
            f"{source} is the SOCKS proxy {shown}, and firsttoken's upstream connections can only use an HTTP "
            f"proxy (mitmproxy has no SOCKS upstream). Give it an HTTP proxy instead: Clash and V2Ray serve HTTP "
            f"and SOCKS on one port (their 'mixed' port), e.g. --upstream-proxy http://{_hostport(u, 7890)}; "
            "for `ssh -D`, run an HTTP proxy such as tinyproxy; or --no-upstream-proxy to connect directly.")
    if scheme not in ("http", "https"):
        raise EgressError(f"{source}: {shown} is not an http:// or https:// proxy URL: write it as http://host:port")
    if not u.hostname:
        raise EgressError(f"{source}: {shown} has no host name: write it as http://host:port")
    if u.path not in ("", "/") or u.query or u.fragment:
        raise EgressError(f"{source}: {shown}: a proxy URL is just scheme://host:port (drop the path)")
    user = unquote(u.username) if u.username is not None else None
    password = unquote(u.password) if u.password is not None else None
    return Proxy(scheme, u.hostname.lower(), port or (443 if scheme == "https" else 80), source, user, password)


def _hostport(u, default_port: int) -> str:
    host = u.hostname or "127.0.0.1"
    try:
        port = u.port or default_port
    except ValueError:
        port = default_port
    return f"{host}:{port}"


def _without_credentials(u) -> str:
    """A URL for messages: scheme://host:port, the credentials left out."""
    netloc = u.netloc.rsplit("@", 1)[-1]
    return f"{u.scheme}://{netloc}" if u.scheme else netloc


def env_value(env: Mapping[str, str], names: tuple[str, ...]) -> tuple[str, str] | None:
    """(name, value) of the first of ``names`` set to a non-empty value."""
    for name in names:
        value = (env.get(name) or "").strip()
        if value:
            return name, value
    return None


def env_proxy(scheme: str, env: Mapping[str, str]) -> Proxy | None:
    """The proxy the environment names for ``scheme`` (its own variable, else ALL_PROXY)."""
    found = env_value(env, SCHEME_VARS.get(scheme, ())) or env_value(env, ALL_VARS)
    return parse_proxy_url(found[1], found[0]) if found else None


def is_loopback(host: str) -> bool:
    h = _norm_host(host)
    if h == "localhost" or h.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(h).is_loopback
    except ValueError:
        return False


def _norm_host(host: str) -> str:
    h = (host or "").strip().lower().rstrip(".")
    if h.startswith("[") and h.endswith("]"):
        h = h[1:-1]
    return h


def _split_entry(entry: str) -> tuple[str, int | None]:
    """A NO_PROXY entry as (host or network, port or None)."""
    e = entry.strip().lower()
    if e.startswith("["):  # [::1]:8080 or [::1]
        end = e.find("]")
        host, rest = e[1:end], e[end + 1:]
        port = int(rest[1:]) if rest.startswith(":") and rest[1:].isdigit() else None
        return host, port
    if e.count(":") == 1:  # host:port (a bare IPv6 address has several colons)
        host, _, p = e.partition(":")
        return host, int(p) if p.isdigit() else None
    return e, None


def no_proxy_match(host: str, port: int | None, no_proxy: str) -> str | None:
    """The NO_PROXY entry that exempts ``host:port``, or None (``port`` None: any port)."""
    h = _norm_host(host)
    try:
        ip = ipaddress.ip_address(h)
    except ValueError:
        ip = None
    for raw in re.split(r"[,\s]+", no_proxy or ""):
        if not raw:
            continue
        if raw.strip() == "*":
            return "*"
        name, eport = _split_entry(raw)
        if eport is not None and port is not None and eport != port:
            continue
        if "/" in name:  # CIDR: only IP literals are compared, nothing is resolved
            try:
                net = ipaddress.ip_network(name, strict=False)
            except ValueError:
                continue
            if ip is not None and ip.version == net.version and ip in net:
                return raw
            continue
        if name.startswith("*."):
            name = name[2:]
        name = name.lstrip(".").rstrip(".")
        if not name:
            continue
        try:
            entry_ip = ipaddress.ip_address(name)
        except ValueError:
            entry_ip = None
        if entry_ip is not None:  # an IP entry matches only that IP
            if ip is not None and entry_ip == ip:
                return raw
            continue
        if h == name or h.endswith("." + name):
            return raw
    return None


def decide(scheme: str, host: str, port: int, env: Mapping[str, str], *, explicit: str | None = None,
           disabled: bool = False) -> Decision:
    """How firsttoken reaches ``scheme://host:port`` (raises EgressError for a proxy it cannot use).

    ``explicit``: ``--upstream-proxy``'s URL (replaces the proxy variables); ``disabled``:
    ``--no-upstream-proxy``."""
    if disabled:
        return Decision(None, "--no-upstream-proxy")
    found = env_value(env, NO_PROXY_VARS)
    if found:
        entry = no_proxy_match(host, port, found[1])
        if entry is not None:
            return Decision(None, f"{found[0]} has {entry}")
    if explicit:
        return Decision(parse_proxy_url(explicit, "--upstream-proxy"), "--upstream-proxy")
    if is_loopback(host):
        return Decision(None, "a loopback host: proxy variables do not apply")
    proxy = env_proxy(scheme, env)
    if proxy is None:
        return Decision(None, "no proxy variable set")
    return Decision(proxy, proxy.source)


def check(env: Mapping[str, str], *, explicit: str | None = None, disabled: bool = False) -> None:
    """Raise EgressError when a proxy setting that could apply cannot be used (at start): ALL_PROXY
    only where a scheme has no variable of its own (Clash exports http HTTPS/HTTP_PROXY beside a
    socks5 ALL_PROXY, which then never applies)."""
    if disabled:
        return
    if explicit:
        parse_proxy_url(explicit, "--upstream-proxy")
        return
    for scheme in SCHEME_VARS:
        env_proxy(scheme, env)
