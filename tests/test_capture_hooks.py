"""Capture's hooks in-process, with mitmproxy's own test helpers (taddons, tflow): routing,
the no-route answer, a whole streamed request through the hooks, and the option rules.
The same paths run end to end through real sockets in test_capture.py."""

from __future__ import annotations

import asyncio
import json
import sqlite3

import pytest
from mitmproxy import exceptions
from mitmproxy.test import taddons, tflow, tutils

from firsttoken.addon.capture import Capture

CHAT = json.dumps({"model": "gpt-4o-mini", "stream": True,
                   "messages": [{"role": "user", "content": "hello there"}]}).encode()
SSE = [
    b'data: {"id":"c1","choices":[{"index":0,"delta":{"role":"assistant"}}]}\n\n',
    b'data: {"id":"c1","choices":[{"index":0,"delta":{"content":"Hi"}}]}\n\n',
    b'data: {"id":"c1","choices":[{"index":0,"delta":{"content":" you"},"finish_reason":"stop"}]}\n\n',
    b"data: [DONE]\n\n",
]


def chat_flow(path: str = "/openai/v1/chat/completions"):
    req = tutils.treq(method=b"POST", path=path.encode(), content=CHAT,
                      headers=((b"content-type", b"application/json"), (b"authorization", b"Bearer sk-test-1234567890abcd")))
    return tflow.tflow(req=req)


def run(coro):
    return asyncio.run(coro)


def rows(db) -> list[dict]:
    conn = sqlite3.connect(db)
    conn.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in conn.execute("SELECT * FROM requests")]
    finally:
        conn.close()


def test_named_route_rewrites_the_request_and_records_it(tmp_path):
    db = tmp_path / "h.db"

    async def go():
        cap = Capture()
        with taddons.context(cap) as tctx:
            tctx.configure(cap, firsttoken_db=str(db),
                           firsttoken_upstream=["openai=http://10.1.2.3:9000/v1", "anthropic=https://api.anthropic.com"])
            cap.running()
            f = chat_flow()
            cap.requestheaders(f)
            for part in (CHAT[:20], CHAT[20:], b""):  # mitmproxy streams the body through BodyCopy
                assert f.request.stream(part) == part
            assert (f.request.scheme, f.request.host, f.request.port) == ("http", "10.1.2.3", 9000)
            assert f.request.path == "/v1/v1/chat/completions"  # prefix + client path: concatenated, never "fixed"
            cap.request(f)
            f.response = tutils.tresp(status_code=200, headers=((b"content-type", b"text/event-stream"),), content=b"")
            cap.responseheaders(f)
            assert callable(f.response.stream)
            for chunk in SSE:
                assert f.response.stream(chunk) == chunk  # the tap returns every chunk unchanged
            assert f.response.stream(b"") == b""
            cap.response(f)
            cap.done()

    run(go())
    (row,) = rows(db)
    assert row["route"] == "openai" and row["upstream"] == "http://10.1.2.3:9000/v1"
    assert row["model"] == "gpt-4o-mini" and row["stream"] == 1 and row["status"] == 200
    assert row["ttfb_ms"] is not None and row["ttft_ms"] is not None and row["ttft_ms"] >= row["ttfb_ms"]
    assert row["key_fingerprint"] and "sk-test-1234567890abcd" not in json.dumps(row)
    assert "paths.double_v1" in (row["findings"] or "") or "v1/v1" in (row["findings"] or "")


def test_a_path_without_a_route_is_answered_404_by_the_proxy_and_recorded(tmp_path):
    db = tmp_path / "n.db"

    async def go():
        cap = Capture()
        with taddons.context(cap) as tctx:
            tctx.configure(cap, firsttoken_db=str(db), firsttoken_upstream=["openai=http://10.1.2.3:9000/v1"])
            cap.running()
            f = chat_flow("/nowhere/v1/chat/completions")
            cap.requestheaders(f)
            assert f.response is not None and f.response.status_code == 404
            body = json.loads(f.response.content)
            assert body["error"]["type"] == "firsttoken_no_route" and "/openai" in body["error"]["message"]
            cap.request(f)
            cap.response(f)
            cap.done()

    run(go())
    (row,) = rows(db)
    assert row["status"] == 404 and "no route" in row["error"]


def test_connection_strategy_is_set_to_lazy_once_and_then_defended(caplog):
    from mitmproxy.addons.proxyserver import Proxyserver

    cap = Capture()
    with taddons.context(Proxyserver(), cap) as tctx:
        cap.configure(set(tctx.options.keys()))  # as mitmproxy does when it loads a script
        assert tctx.options.connection_strategy == "lazy"  # changed from mitmproxy's default, and said so
        assert "connection_strategy set to lazy" in caplog.text
        with pytest.raises(exceptions.OptionsError, match="needs connection_strategy=lazy"):
            tctx.configure(cap, connection_strategy="eager")


def test_language_option_takes_only_known_languages():
    cap = Capture()
    with taddons.context(cap) as tctx:
        tctx.configure(cap, firsttoken_lang="zh")
        with pytest.raises(exceptions.OptionsError):
            tctx.configure(cap, firsttoken_lang="fr")
