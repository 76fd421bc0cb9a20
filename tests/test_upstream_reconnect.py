"""An upstream that closes its connection after each streamed response although it says keep-alive
(llama.cpp's llama-server does): the proxy's next request on that connection goes out on a new one,
the client never sees a 502 the upstream did not send."""

from __future__ import annotations

import json
import socket
import threading
import time

import httpx
import pytest
from conftest import rows

from firsttoken.cli.proxy.server import ProxyServer

BODY = (b"data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\n"
        b"data: [DONE]\n\n")


class ClosingUpstream:
    """Answers each request with a chunked SSE response marked ``Connection: keep-alive``, then closes
    the socket (one request per connection)."""

    def __init__(self, linger: float = 0.0) -> None:
        self.linger = linger  # seconds between the response's last byte and the close
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.connections = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn: socket.socket) -> None:
        with conn:
            buf = b""
            while b"\r\n\r\n" not in buf:
                got = conn.recv(65536)
                if not got:
                    return
                buf += got
            head, _, rest = buf.partition(b"\r\n\r\n")
            n = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                      if line.lower().startswith(b"content-length:")), 0)
            while len(rest) < n:
                rest += conn.recv(65536)
            conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: keep-alive\r\n"
                         b"transfer-encoding: chunked\r\n\r\n"
                         + b"%x\r\n%s\r\n0\r\n\r\n" % (len(BODY), BODY))
            time.sleep(self.linger)

    def close(self) -> None:
        self.sock.close()


@pytest.mark.parametrize("linger", [0.0, 0.005, 0.02])
def test_closed_kept_alive_upstream_connection_is_not_a_502(tmp_path, linger):
    up = ClosingUpstream(linger)
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
    seen = []
    ls = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        conn, _ = ls.accept()
        with conn:
            for i in range(2):
                buf = b""
                while b"\r\n\r\n" not in buf:
                    buf += conn.recv(65536)
                seen.append(buf)
                head = (b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: keep-alive\r\n"
                        b"transfer-encoding: chunked\r\n\r\n")
                if i == 0:
                    conn.sendall(head + b"%x\r\n%s\r\n0\r\n\r\n" % (len(BODY), BODY))
                else:
                    conn.sendall(head + b"%x\r\n%s\r\n" % (len(BODY[:20]), BODY[:20]))
                    time.sleep(0.05)

    threading.Thread(target=serve, daemon=True).start()
    db = tmp_path / "ft.db"
    url = f"http://127.0.0.1:{ls.getsockname()[1]}"
    try:
        with ProxyServer([url], str(db), port=0) as proxy, httpx.Client(timeout=30) as client:
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
        ls.close()
    assert outcomes[0] == 200 and outcomes[1] != 200, outcomes
    assert len(seen) == 2
    broken = rows(db)[1]
    found = {f["code"]: f for f in json.loads(broken["findings"])}
    # closed after the response's headers: the row has them (status 200), its finding says "while sending"
    assert broken["status"] == 200 and "upstream.closed" in found, found
    assert "closed the connection while" in found["upstream.closed"]["message"], found
