"""What the proxy does with a request, decided from its head alone: a pure function of the method,
path, headers and routes (no mitmproxy, no I/O), so every rule is tested in-process.
How the hooks apply it: docs/architecture.md, "One request's way through"."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from firsttoken.addon import routing
from firsttoken.addon.apis import detect_api
from firsttoken.addon.diagnose.connectivity import BAD_HEADER_ERROR, BARE_CR, OBS_FOLD
from firsttoken.addon.secrets import SIGV4, KeyFingerprint, fingerprint_headers, query_secrets, redact_path, secret_values

EXPERIMENT_HEADER = "x-firsttoken-experiment"
#: ``/_run/<id>/rest``: a `firsttoken run` that joined this proxy marks its child's requests so
#: (the proxy strips the mark before routing and stamps ``run_id``)
RUN_MARK = re.compile(r"^/_run/([A-Za-z0-9][A-Za-z0-9_.-]{0,63})(?=/|\?|$)")
#: request bodies of a declared size up to this are read before the upstream connection opens
REQUEST_READ_MAX = 16 * 2**20


@dataclass(frozen=True)
class Refusal:
    """An answer the proxy gives itself instead of forwarding (no route; a smuggling-shaped header)."""

    status: int
    message: str
    type: str
    close: bool = False

    def body(self) -> str:
        return json.dumps({"error": {"message": self.message, "type": self.type}})


@dataclass(frozen=True)
class RequestPlan:
    run_id: str | None
    path: str  # the client's path without a run mark (what routing saw)
    route: str
    upstream: str | None  # the route's URL; for the default route without routes, where mitmproxy sends it
    target: routing.Route | None  # where to send it (None: where mitmproxy's mode already sends it)
    upstream_path: str  # the path the upstream receives
    api: str | None
    key: KeyFingerprint
    secrets: list[str] = field(repr=False)  # raw credential values, for redaction (memory only)
    experiment: str | None
    refusal: Refusal | None
    stream_body: bool  # forward the body as it arrives (unknown or very large size) instead of reading it first

    @property
    def stored_path(self) -> str:
        return redact_path(self.path)


def plan_request(method: str, path: str, headers: list[tuple[str, str]], routes: list[routing.Route], *,
                 run_id: str | None, own_url: str, origin: str) -> RequestPlan:
    """The plan for one request head. ``origin`` is where mitmproxy's mode sends it
    (``scheme://host:port``), used when the proxy has no routes of its own (script and forward mode)."""
    mark = RUN_MARK.match(path) if routes else None
    if mark:
        run_id, path = mark.group(1), (path[mark.end():] or "/")
        if path.startswith("?"):
            path = "/" + path
    key = fingerprint_headers(headers)
    in_query = query_secrets(path)
    if in_query and "missing" in key.facts:  # a key in the URL (e.g. Gemini's ?key=)
        key = fingerprint_headers([("x-api-key", v) for _, v in in_query])
        key.header = "query:" + "+".join(n for n, _ in in_query)
    refusal, target, route_name, upstream, upstream_path = None, None, "default", origin, path
    if routes:
        target, rest = routing.match(routes, path)
        if target is None:
            mounts = ", ".join(r.mount or "/" for r in routes)
            refusal = Refusal(404, f"firsttoken has no route for {redact_path(path)!r}. Routes: {mounts}. "
                                   f"Set your client's base URL to {own_url}/<route> "
                                   "(`firsttoken env CLIENT` prints the exact one).", "firsttoken_no_route")
            route_name, upstream = None, None
        else:
            route_name, upstream, upstream_path = target.name or "default", target.url, target.prefix + rest
    if key.scheme == SIGV4 and target is not None:
        # the client signed for the address it connected to, the proxy's (mitmproxy has already set the
        # Host to the route's): forwarded to the route, the signature covers a Host it does not arrive with
        key.facts.append("sigv4_rewritten")
    if refusal is None and (bad := bad_header(headers)) is not None:  # never forward a smuggling-shaped header
        refusal = Refusal(400, BAD_HEADER_ERROR.format(name=repr(bad[0])[:80], what=bad[1]), "firsttoken_bad_header",
                          close=True)
    return RequestPlan(
        run_id=run_id, path=path, route=route_name, upstream=upstream, target=target, upstream_path=upstream_path,
        api=detect_api(method, upstream_path), key=key,
        secrets=secret_values(headers) + [v for _, v in in_query],
        experiment=header(headers, EXPERIMENT_HEADER),
        refusal=refusal, stream_body=refusal is None and not read_before_connecting(headers),
    )


def read_before_connecting(headers: list[tuple[str, str]]) -> bool:
    """Whether mitmproxy should read this request's body before it connects upstream.

    Reading a body of known size from a client on this machine costs about a millisecond per
    megabyte, and a request whose upstream cannot be reached is then still known in full. Chunked
    bodies and bodies over REQUEST_READ_MAX stream through instead, so the client never waits."""
    length = header(headers, "content-length")
    if length is None or "chunked" in (header(headers, "transfer-encoding") or "").lower():
        return False
    try:
        return 0 <= int(length.strip()) <= REQUEST_READ_MAX
    except ValueError:
        return False


def header(headers: list[tuple[str, str]], name: str) -> str | None:
    """A header's value, repeated fields joined with ", " (as mitmproxy's ``Headers.get`` joins them)."""
    values = [v for n, v in headers if n.lower() == name]
    return ", ".join(values) if values else None


def bad_header(headers: list[tuple[str, str]]) -> tuple[str, str] | None:
    """(name, what) of the first request header holding a bare CR or an obs-fold line, else None.
    mitmproxy would forward both verbatim; RFC 9112 §2.2 and §5.2 let a server answer 400 instead."""
    for name, value in headers:
        if "\r" in value or "\n" in value or "\r" in name or "\n" in name:
            return name, OBS_FOLD if "\n" in value else BARE_CR
    return None
