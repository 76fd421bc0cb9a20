"""Connectivity: the upstream could not be reached, hung up, or the client left.

Sub-causes are read from mitmproxy's error text (``rec.error``). Texts observed with
mitmproxy 11 against real sockets:

* refused: ``[Errno 111] Connect call failed ('127.0.0.1', 5)``
* DNS: ``[Errno -2] Name or service not known`` (macOS: ``nodename nor servname provided``)
* TLS: ``Certificate verify failed: self-signed certificate``
* https:// to a plain-HTTP server: ``The remote server does not speak TLS.``
* closed before answering: ``server closed connection`` (also http:// to a TLS port)
* closed mid-body: ``HTTP/1 protocol error: peer closed connection without sending complete message body ...``
* not HTTP: ``Cannot parse HTTP response: Bad HTTP response line: b'...'``
* client gone: ``Client disconnected.``
"""

from __future__ import annotations

from typing import Any

from .rules_base import Ctx, quote

#: (variant, lower-case fragments of the error text), first match wins
UNREACHABLE: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("dns", ("name or service not known", "nodename nor servname", "getaddrinfo failed", "no address associated",
             "temporary failure in name resolution", "name resolution", "errno -2]", "errno -3]", "errno -5]",
             "errno 11001", "errno 8]", "could not resolve")),
    ("not_tls", ("does not speak tls", "wrong version number", "unknown protocol", "packet length too long",
                 "http request", "record layer failure")),
    ("tls", ("certificate", "tls", "ssl", "handshake")),
    ("refused", ("connection refused", "connect call failed", "errno 111]", "errno 61]", "errno 10061")),
    ("timeout", ("timed out", "timeout", "errno 110]", "errno 60]", "errno 10060")),
    ("network", ("network is unreachable", "no route to host", "host is unreachable", "errno 101]", "errno 113]",
                 "errno 51]", "errno 65]")),
    ("not_http", ("cannot parse http response", "bad http response", "invalid http")),
)
CLOSED = ("server closed connection", "peer closed connection", "server disconnected", "connection reset",
          "connection closed by peer", "errno 104]", "errno 54]", "broken pipe", "eof occurred",
          "incomplete message body", "remote end closed", "connection aborted")
#: errors that are the proxy's own business, not the upstream's
OWN_ERRORS = ("firsttoken", "the proxy shut down")


def _cause(error: str) -> str | None:
    low = error.lower()
    for variant, words in UNREACHABLE:
        if any(w in low for w in words):
            return variant
    return None


def _own(error: str) -> bool:
    low = error.lower()
    return any(low.startswith(w) or w in low[:40] for w in OWN_ERRORS)


def rule_client_aborted(rec: Any, c: Ctx) -> None:
    if not rec.client_aborted:
        return
    if rec.ttfb_ms is None:
        variant, sev = "before_headers", "warn"
    elif not rec.events:
        variant, sev = "before_tokens", "warn"
    else:
        variant, sev = "streaming", "info"
    c.add("client.aborted", sev, variant=variant, **c.common(), total_ms=rec.total_ms, ttfb_ms=rec.ttfb_ms,
          events=rec.events, itl_max_ms=rec.itl_max_ms or 0.0)


def rule_unreachable(rec: Any, c: Ctx) -> None:
    err = rec.error
    if not err or rec.client_aborted or _own(err):
        return
    host, port, scheme, prefix = c.target()
    base = dict(c.common(), port=port, scheme=scheme, prefix=prefix, error=quote(err))
    low = err.lower()
    closed = any(w in low for w in CLOSED)
    if rec.status is None:
        cause = _cause(err)
        if cause is None and closed:
            c.add("upstream.closed", "error", variant="before_response", **base)
        else:
            c.add("upstream.unreachable", "error", variant=cause or "other", **base)
    elif closed:
        c.add("upstream.closed", "error", variant="mid_response", **base, events=rec.events, total_ms=rec.total_ms)


RULES = (rule_client_aborted, rule_unreachable)
