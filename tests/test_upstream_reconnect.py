"""An upstream that closes its connection after each streamed response although it says keep-alive
(llama.cpp's llama-server does): the proxy's next request on that connection goes out on a new one,
the client never sees a 502 the upstream did not send."""

from __future__ import annotations

import json
import time

import httpx
import pytest
from conftest import rows
from rawserver import SocketConn, SocketUpstream

from firsttoken.cli.proxy.server import ProxyServer

BODY = (b"data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\n"
        b"data: [DONE]\n\n")
HEAD = (b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: keep-alive\r\n"
        b"transfer-encoding: chunked\r\n\r\n")
WHOLE = HEAD + b"%x\r\n%s\r\n0\r\n\r\n" % (len(BODY), BODY)  # the response, to its last chunk


def closing_upstream(linger: float = 0.0) -> SocketUpstream:
    """Answers each request with a chunked SSE response marked ``Connection: keep-alive``, then closes
    the socket ``linger`` seconds after the response's last byte (one request per connection)."""

    def script(conn: SocketConn) -> None:
        if conn.read_request() is not None:
            conn.send(WHOLE)
            time.sleep(linger)

    return SocketUpstream(script)


@pytest.mark.parametrize("linger", [0.0, 0.005, 0.02])
def test_closed_kept_alive_upstream_connection_is_not_a_502(tmp_path, linger):
    up = closing_upstream(linger)
    db = tmp_path / "ft.db"
    try:
        with ProxyServer([up.url], str(db), port=0) as proxy, httpx.Client(timeout=30) as client:
            statuses = []
            for _ in range(40):  # one client connection, reused: each request after the first finds it closed
                with client.stream("POST", proxy.url + "/v1/chat/completions",
                                   json={"model": "m", "stream": True, "messages": []}) as r:
                    r.read()
                    statuses.append(r.status_code)
            proxy.flush()
    finally:
        up.close()
    assert statuses == [200] * 40, statuses
    assert up.connections == 40
    rs = rows(db)
    assert len(rs) == 40 and all(r["status"] == 200 and not r["error"] for r in rs), [r["status"] for r in rs]
    # each request paid for the connection it was answered on: a new one, its setup timed
    assert all(r["conn_reused"] == 0 and r["connect_ms"] is not None and r["connect_ms"] >= 0 for r in rs), \
        [(r["conn_reused"], r["connect_ms"]) for r in rs]
    assert all(r["ttfb_ms"] is not None and r["ttfb_ms"] >= 0 for r in rs)


def test_close_mid_response_on_a_reused_connection_stays_an_error(tmp_path):
    """The second response on a kept-alive connection breaks after its headers: the client sees the
    break, the row says upstream.closed mid-response, and the request is not sent again."""

    def script(conn: SocketConn) -> None:
        for i in range(2):
            if conn.read_request() is None:
                return
            if i == 0:
                conn.send(WHOLE)
            else:
                conn.send(HEAD + b"%x\r\n%s\r\n" % (len(BODY[:20]), BODY[:20]))
                time.sleep(0.05)

    up = SocketUpstream(script)
    db = tmp_path / "ft.db"
    try:
        with ProxyServer([up.url], str(db), port=0) as proxy, httpx.Client(timeout=30) as client:
            outcomes = []
            for _ in range(2):
                try:
                    with client.stream("POST", proxy.url + "/v1/chat/completions",
                                       json={"model": "m", "stream": True, "messages": []}) as r:
                        r.read()
                        outcomes.append(r.status_code)
                except httpx.HTTPError as e:
                    outcomes.append(type(e).__name__)
            proxy.flush()
    finally:
        up.close()
    assert outcomes[0] == 200 and outcomes[1] != 200, outcomes
    assert len(up.requests) == 2
    broken = rows(db)[1]
    found = {f["code"]: f for f in json.loads(broken["findings"])}
    # closed after the response's headers: the row has them (status 200), its finding says "while sending"
    assert broken["status"] == 200 and "upstream.closed" in found, found
    assert "closed the connection while" in found["upstream.closed"]["message"], found
