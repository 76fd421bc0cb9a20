"""Bad and old HTTP on the wire, through the real proxy with raw sockets on loopback.

The right party is blamed when the client breaks its own request (issue 12 #6), HTTP/1.0
clients get a body they can read (#9), and a bare CR or a folded header line never reaches the
upstream (#10).
"""

from __future__ import annotations

import json
import socket
import time

import pytest
from conftest import rows
from rawserver import SocketConn, SocketUpstream

from firsttoken.cli.proxy.server import ProxyServer

BODY = json.dumps({"model": "gpt-4o-mini", "stream": True,
                   "messages": [{"role": "user", "content": "hi " * 40}]}).encode()
PATH = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"


def exchange(port: int, data: bytes, *, hang_up: bool = False, timeout: float = 5.0, proxy=None) -> bytes:
    """Send ``data``; with ``hang_up`` close the sending side once the proxy (when given) has begun
    the request (a fixed 0.1 s was not enough for a busy proxy: it then read the bytes and the
    hang-up together), else after 0.1 s. Returns all the proxy answered."""
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(data)
        if hang_up:
            deadline = time.monotonic() + 30
            while proxy is not None and not proxy.in_flight() and time.monotonic() < deadline:
                time.sleep(0.005)
            time.sleep(0.1)
            s.shutdown(socket.SHUT_WR)
        s.settimeout(timeout)
        got = b""
        try:
            while chunk := s.recv(65536):
                got += chunk
        except (TimeoutError, ConnectionResetError):
            pass
        return got


def codes(row: dict) -> list[str]:
    """The request's finding codes, but ``proxy.saturated``: the proxy's honest note about its own
    load (its recorded delay), present whenever the machine running the tests is busy."""
    return [f["code"] for f in json.loads(row["findings"] or "[]") if f["code"] != "proxy.saturated"]


def only_row(proxy: ProxyServer, db_path) -> dict:
    proxy.flush()
    rs = rows(db_path)
    assert len(rs) == 1, rs
    return rs[0]


UPSTREAM_BLAME = {"upstream.closed", "upstream.unreachable", "request.malformed"}


# -- 6. the client broke its own request ---------------------------------------------------------
def test_content_length_body_cut_short_blames_the_client(proxy, db_path):
    head = PATH + b"Content-Length: %d\r\n\r\n" % len(BODY)
    exchange(proxy.bound_port, head + BODY[:40], hang_up=True, proxy=proxy)
    row = only_row(proxy, db_path)
    assert "client.aborted_upload" in codes(row) and not UPSTREAM_BLAME & set(codes(row)), codes(row)
    f = json.loads(row["findings"])[0]
    assert f["params"]["received"] == 40 and f["params"]["expected"] == len(BODY)
    assert "client closed the connection after sending 40 of the" in f["message"]
    assert row["status"] is None and row["error"].startswith("the client did not send a complete request")


def test_chunked_body_cut_mid_chunk_blames_the_client(proxy, db_path):
    head = PATH + b"Transfer-Encoding: chunked\r\n\r\n"
    exchange(proxy.bound_port, head + b"%x\r\n" % len(BODY) + BODY[:40], hang_up=True, proxy=proxy)
    row = only_row(proxy, db_path)
    assert "client.aborted_upload" in codes(row) and not UPSTREAM_BLAME & set(codes(row)), codes(row)
    assert "chunked request body" in json.loads(row["findings"])[0]["message"]


def test_bad_chunk_size_line_blames_the_client(proxy, db_path):
    head = PATH + b"Transfer-Encoding: chunked\r\n\r\n"
    got = exchange(proxy.bound_port, head + b"28\r\n" + BODY[:40] + b"\r\nzz-not-hex\r\n")
    # mitmproxy closes the connection itself before any addon hook runs, so no 400 can be sent
    assert got == b""
    row = only_row(proxy, db_path)
    assert codes(row) == ["client.bad_framing"], codes(row)
    assert "illegal chunk header" in row["error"]


def test_a_real_upstream_close_is_still_the_upstreams(sim, db_path):
    """The mirror case: the same mitmproxy words from the upstream side still blame the upstream."""
    with ProxyServer([sim.url], str(db_path), port=0) as p:
        head = PATH + b"x-sim-fault: drop\r\nContent-Length: %d\r\n\r\n" % len(BODY)
        exchange(p.bound_port, head + BODY)
        row = only_row(p, db_path)
    assert "upstream.closed" in codes(row) and not any(c.startswith("client.") for c in codes(row)), codes(row)


# -- 10. bare CR and obs-fold in request headers -----------------------------------------------
def recorder() -> SocketUpstream:
    """A loopback upstream that records every byte it receives and answers a small JSON 200."""

    def script(conn: SocketConn) -> None:
        conn.read_request(timeout=2)
        body = b'{"id":"x","object":"chat.completion","choices":[]}'
        conn.send(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n"
                  b"connection: close\r\n\r\n%s" % (len(body), body))

    return SocketUpstream(script)


@pytest.mark.parametrize("header, variant", [
    (b"X-Evil: a\rinjected: 1\r\n", "bare_cr"),
    (b"X-Fold: first\r\n  second-line\r\n", "obs_fold"),
])
def test_bare_cr_and_obs_fold_get_400_and_never_reach_the_upstream(db_path, header, variant):
    with recorder() as up, ProxyServer([up.url], str(db_path), port=0) as p:
        clean = exchange(p.bound_port, PATH + b"X-Ok: fine\r\nContent-Length: %d\r\n\r\n" % len(BODY) + BODY)
        assert clean.startswith(b"HTTP/1.1 200") and b"X-Ok: fine" in up.received  # the recorder does see requests
        got = exchange(p.bound_port, PATH + header + b"Content-Length: %d\r\n\r\n" % len(BODY) + BODY)
        p.flush()
        rs = rows(db_path)
    assert got.startswith(b"HTTP/1.1 400 ") and b"firsttoken_bad_header" in got
    assert up.received.count(b"POST ") == 1, up.received  # only the clean request
    assert b"\r\n " not in up.received and b"a\r" not in up.received and b"injected" not in up.received
    bad = rs[-1]
    assert bad["status"] == 400 and codes(bad) == ["client.bad_framing"]
    assert json.loads(bad["findings"])[0]["params"]["variant"] == variant


# -- 9. HTTP/1.0 clients -----------------------------------------------------------------------------
def test_http10_client_gets_a_close_delimited_body(proxy, db_path):
    got = exchange(proxy.bound_port,
                   PATH.replace(b"HTTP/1.1", b"HTTP/1.0") + b"Content-Length: %d\r\n\r\n" % len(BODY) + BODY)
    head, _, body = got.partition(b"\r\n\r\n")
    lines = head.lower().split(b"\r\n")
    assert lines[0].startswith(b"http/1.1 200")
    assert not any(h.startswith(b"transfer-encoding") for h in lines), head
    assert b"connection: close" in lines
    # the raw SSE, no chunk-size lines in between, complete up to the end marker
    assert body.startswith(b"data: {") and body.rstrip().endswith(b"data: [DONE]"), body[:200]
    events = [e for e in body.split(b"\n\n") if e.strip()]
    assert all(e.startswith(b"data: ") for e in events), events[:3]
    row = only_row(proxy, db_path)
    assert row["status"] == 200 and row["error"] is None and row["output_tokens_est"]


def test_http11_client_still_gets_chunks(proxy, db_path):
    got = exchange(proxy.bound_port, PATH + b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(BODY) + BODY)
    assert b"transfer-encoding: chunked" in got.split(b"\r\n\r\n", 1)[0].lower()
