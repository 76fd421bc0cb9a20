"""Egress: how firsttoken's own upstream connections leave this machine (proxies, trusted CAs).

:mod:`~firsttoken.addon.egress.rules` holds THE rule (which proxy for which upstream),
:mod:`~firsttoken.addon.egress.trust` the CAs an upstream's certificate is verified against,
and :mod:`~firsttoken.addon.egress.addon` the mitmproxy addon that applies both.
"""

from __future__ import annotations

from firsttoken.addon.egress.rules import (
    PROXY_VARS,
    Decision,
    EgressError,
    Proxy,
    check,
    decide,
    is_loopback,
    no_proxy_match,
    parse_proxy_url,
)

__all__ = [
    "PROXY_VARS",
    "Decision",
    "EgressError",
    "Proxy",
    "check",
    "decide",
    "is_loopback",
    "no_proxy_match",
    "parse_proxy_url",
]
