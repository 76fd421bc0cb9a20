"""Whether an upstream is a model server of the user's own: on this machine or the local network."""

from __future__ import annotations

import functools
import ipaddress
from typing import Any
from urllib.parse import urlsplit

from firsttoken.addon.egress.rules import is_loopback


@functools.lru_cache(maxsize=256)  # (a few routes, asked several times a request: the URL parse is the cost)
def is_local(upstream: str | None) -> bool:
    """A loopback, private-network or ``.local`` host (``http://127.0.0.1:8080``, ``192.168.1.5``)."""
    if not upstream:
        return False
    try:
        host = urlsplit(upstream if "://" in upstream else "//" + upstream).hostname or ""
    except ValueError:
        return False
    if is_loopback(host) or host.endswith((".local", ".lan", ".internal")):
        return True
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return False
    return ip.is_private or ip.is_link_local


def is_engine_side(rec: Any) -> bool:
    """A model server of the user's own answered: one that named itself (its report, Server header or
    error type), or a loopback / LAN upstream that no known hop (a LiteLLM proxy, a gateway) answered for."""
    return bool(getattr(rec, "engine", None)) or (is_local(getattr(rec, "upstream", None)) and not getattr(rec, "hop", None))
