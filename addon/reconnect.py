"""A request on a kept-alive upstream connection the server closed unanswered goes out again on a new one.

Servers may close a connection they said was keep-alive (llama.cpp's llama-server does after each streamed
response); mitmproxy (``HttpStream.handle_protocol_error``) answers the request that met the close with a
502. Retried once, as HTTP clients do; a close after any response byte stays ``upstream.closed`` (docs/faults.md).
"""

from __future__ import annotations

from typing import Any

#: flow.metadata key: this request went out again on a new connection after its reused one closed
RETRIED = "firsttoken_reconnected"
#: mitmproxy's Http1Client message for a close before any byte of the response
_CLOSED_UNANSWERED = "server closed connection"


def retryable(stream: Any, event: Any) -> bool:
    """Whether ``stream`` (mitmproxy's HttpStream) meeting ``event`` is a reused connection closed unanswered."""
    from mitmproxy.proxy.layers.http import ResponseProtocolError

    f = stream.flow
    conn = f.server_conn if f else None
    return (isinstance(event, ResponseProtocolError) and event.message == _CLOSED_UNANSWERED
            and f.response is None and not f.metadata.get(RETRIED)
            and stream.client_state == stream.state_done  # the whole request was read (not streamed): it can be sent again
            and stream.server_state == stream.state_wait_for_response_headers
            and conn is not None and conn.timestamp_start is not None
            and f.request.timestamp_start is not None
            and conn.timestamp_start < f.request.timestamp_start)  # opened for an earlier request: reused


def _resend(stream: Any):
    """The request again, on a new connection (mitmproxy's own steps for a whole request)."""
    from mitmproxy.proxy.layers.http import RequestData, RequestEndOfMessage, RequestHeaders, RequestTrailers, SendHttp

    f = stream.flow
    f.metadata[RETRIED] = True
    if not (yield from stream.make_server_connection()):  # the old one is closed: GetHttpConnection opens one
        return
    content = f.request.raw_content
    yield SendHttp(RequestHeaders(stream.stream_id, f.request, not (content or f.request.trailers)), stream.context.server)
    if content:
        yield SendHttp(RequestData(stream.stream_id, content), stream.context.server)
    if f.request.trailers:
        yield SendHttp(RequestTrailers(stream.stream_id, f.request.trailers), stream.context.server)
    yield SendHttp(RequestEndOfMessage(stream.stream_id), stream.context.server)


def install() -> None:
    """Wrap mitmproxy's ``HttpStream.handle_protocol_error`` once (mitmproxy has no option or hook for it)."""
    from mitmproxy.proxy.layers.http import HttpStream

    original = HttpStream.handle_protocol_error
    if getattr(original, "firsttoken_reconnect", False):
        return

    def handle_protocol_error(self, event):
        if retryable(self, event):
            return (yield from _resend(self))
        return (yield from original(self, event))

    handle_protocol_error.firsttoken_reconnect = True
    HttpStream.handle_protocol_error = handle_protocol_error


class Reconnect:
    """The addon: installs the retry when mitmproxy loads firsttoken."""

    def load(self, loader: Any) -> None:
        install()
