"""Forward-proxy mode: the LLM host allow-list, and a real HTTPS round trip through mitmproxy."""

from __future__ import annotations

import inspect
import json
import ssl
import time

import httpx
import pytest
from conftest import rows
from tls_upstream import TLSUpstream, make_ca_and_cert

from firsttoken.addon import forward
from firsttoken.cli.proxy.server import ProxyServer

# -- the allow-list -------------------------------------------------------------------------

@pytest.mark.parametrize("host,port,ok", [
    ("api.openai.com", 443, True),
    ("API.OpenAI.com.", 443, True),
    ("api.anthropic.com", 443, True),
    ("openrouter.ai", 443, True),
    ("generativelanguage.googleapis.com", 443, True),
    ("my-res.openai.azure.com", 443, True),
    ("europe-west4-aiplatform.googleapis.com", 443, True),
    ("dashscope.aliyuncs.com", 443, True),
    ("open.bigmodel.cn", 443, True),
    ("api.moonshot.cn", 443, True),
    ("openai.azure.com", 443, False),  # the bare domain is not a resource
    ("api.openai.com.evil.example", 443, False),
    ("evilapi.openai.com", 443, False),
    ("github.com", 443, False),
    ("pypi.org", 443, False),
    ("localhost", 11434, False),  # local servers only with --host-match
    ("", 443, False),
    (None, 443, False),
])
def test_default_allow_list(host, port, ok):
    assert forward.HostFilter().allowed(host, port) is ok


def test_host_match_forms():
    hf = forward.HostFilter(["localhost:11434", "*.corp.example", "llm.internal", r"^10\.1\.2\.\d+:8000$"])
    assert hf.allowed("localhost", 11434) and not hf.allowed("localhost", 8080)
    assert hf.allowed("a.b.corp.example", 443) and not hf.allowed("corp.example", 443)
    assert hf.allowed("llm.internal", 80) and not hf.allowed("xllm.internal", 80)
    assert hf.allowed("10.1.2.7", 8000) and not hf.allowed("10.1.2.7", 8001)
    assert hf.allowed("[::1]", 11434) is False
    with pytest.raises(forward.HostMatchError):
        forward.HostFilter(["(unclosed"])
    with pytest.raises(forward.HostMatchError):
        forward.user_regex(" ")


def test_mitmproxy_allow_hosts_match_like_mitmproxy_does():
    """mitmproxy searches each regex in "host:port" strings: every default must be anchored."""
    import re

    pats = forward.HostFilter().mitmproxy_allow_hosts()
    assert all(p.startswith("^") and p.endswith("$") for p in pats)

    def mitm_allows(host, port):  # next_layer._ignore_connection's test
        return any(re.search(p, f"{host}:{port}", re.IGNORECASE) for p in pats)

    assert mitm_allows("api.openai.com", 443) and mitm_allows("x.openai.azure.com", 443)
    assert not mitm_allows("api.openai.com.evil.example", 443) and not mitm_allows("example.com", 443)


def test_provider_names_follow_the_semconv():
    assert forward.provider_for_host("api.openai.com") == "openai"
    assert forward.provider_for_host("api.anthropic.com") == "anthropic"
    assert forward.provider_for_host("r.openai.azure.com") == "azure.ai.openai"
    assert forward.provider_for_host("generativelanguage.googleapis.com") == "gcp.gemini"
    assert forward.provider_for_host("us-east5-aiplatform.googleapis.com") == "gcp.vertex_ai"
    assert forward.provider_for_host("api.x.ai") == "x_ai"
    assert forward.provider_for_host("api.mistral.ai") == "mistral_ai"
    assert forward.provider_for_host("example.com") is None


def test_mitmproxy_options_and_configure():
    from mitmproxy.test import taddons

    opts = forward.mitmproxy_options(["localhost:1234"])
    assert opts["mode"] == ["regular"] and opts["firsttoken_forward"] is True
    assert opts["allow_hosts"][-1] == r"^(?:localhost):1234$"

    from mitmproxy import exceptions
    from mitmproxy.test import tflow

    fw = forward.Forward()
    with taddons.context(fw) as tctx:
        o = tctx.options
        assert fw.host_filter is None  # off by default
        tctx.configure(fw, firsttoken_forward=True)
        assert fw.host_filter is not None and list(o.allow_hosts) == forward.HostFilter().mitmproxy_allow_hosts()
        tctx.configure(fw, firsttoken_host_match=["localhost:9"])
        assert list(o.allow_hosts)[-1] == r"^(?:localhost):9$"  # ours: kept in step
        tctx.configure(fw, allow_hosts=["^mine:443$"])
        assert list(o.allow_hosts) == ["^mine:443$"]  # the user's own: respected

        f = tflow.tflow()
        f.request.host, f.request.port = "pypi.org", 443
        fw.requestheaders(f)
        assert f.metadata.get(forward.SKIP)
        f = tflow.tflow()
        f.request.host, f.request.port = "api.openai.com", 443
        fw.requestheaders(f)
        assert not f.metadata.get(forward.SKIP)
        with pytest.raises(exceptions.OptionsError):
            tctx.configure(fw, firsttoken_host_match=["(bad"])


def test_combined_ca_bundle(tmp_path):
    with pytest.raises(FileNotFoundError, match="--forward"):
        forward.combined_ca_bundle(tmp_path / "b.pem", confdir=tmp_path)
    (tmp_path / "mitmproxy-ca-cert.pem").write_text("-----BEGIN CERTIFICATE-----\nX\n-----END CERTIFICATE-----\n")
    out = forward.combined_ca_bundle(tmp_path / "b.pem", confdir=tmp_path)
    text = out.read_text()
    assert text.count("BEGIN CERTIFICATE") > 10 and text.rstrip().endswith("X\n-----END CERTIFICATE-----")


def test_combined_ca_bundle_is_never_seen_half_written(tmp_path):
    """Two `run --forward` sharing ~/.mitmproxy write the bundle at once while a client reads it."""
    import threading

    (tmp_path / "mitmproxy-ca-cert.pem").write_text("-----BEGIN CERTIFICATE-----\nX\n-----END CERTIFICATE-----\n")
    dest = tmp_path / "b.pem"
    forward.combined_ca_bundle(dest, confdir=tmp_path)
    whole = dest.read_text()
    stop, seen = threading.Event(), []

    def write():
        while not stop.is_set():
            forward.combined_ca_bundle(dest, confdir=tmp_path)

    writers = [threading.Thread(target=write) for _ in range(3)]
    for w in writers:
        w.start()
    try:
        for _ in range(300):
            seen.append(dest.read_text() == whole)
    finally:
        stop.set()
        for w in writers:
            w.join()
    assert all(seen) and sorted(p.name for p in tmp_path.iterdir()) == ["b.pem", "mitmproxy-ca-cert.pem"]


# -- end to end -----------------------------------------------------------------------------

WIRED = "forward_mode" in inspect.signature(ProxyServer.__init__).parameters
needs_wiring = pytest.mark.skipif(
    not WIRED, reason="needs the lead's wiring: ProxyServer(forward_mode=, host_match=) + forward.* calls in Capture")


@pytest.fixture
def tls(tmp_path):
    ca, cert, key = make_ca_and_cert(tmp_path)
    with TLSUpstream(cert, key, events=6) as up:
        yield ca, up


@needs_wiring
def test_forward_mode_records_llm_hosts_and_tunnels_the_rest(tls, sim, tmp_path, db_path):
    ca, up = tls
    confdir = tmp_path / "mitm"
    p = ProxyServer([], str(db_path), port=0, forward_mode=True, host_match=["localhost"],
                    extra_options={"confdir": str(confdir), "ssl_verify_upstream_trusted_ca": str(ca)})
    with p:
        mitm_ca = forward.ca_cert_path(confdir)
        assert mitm_ca.exists()  # mitmproxy made its CA in our confdir
        both = ssl.create_default_context(cafile=str(mitm_ca))
        both.load_verify_locations(cafile=str(ca))
        body = {"model": "tls-model", "messages": [{"role": "user", "content": "hi"}], "stream": True}

        # 1. an allow-listed host over HTTPS: intercepted (mitmproxy's cert), streamed, recorded
        only_mitm = ssl.create_default_context(cafile=str(mitm_ca))
        with httpx.Client(proxy=p.url, verify=only_mitm, timeout=10) as c:
            chunks = []
            with c.stream("POST", f"https://localhost:{up.port}/v1/chat/completions", json=body) as r:
                assert r.status_code == 200
                chunks = list(r.iter_raw())
        assert b"[DONE]" in b"".join(chunks)

        # 2. a host not on the list, over HTTPS: tunnelled, TLS untouched -> the client sees the
        #    upstream's own certificate (trusting only the test CA works) and nothing is recorded
        only_test_ca = ssl.create_default_context(cafile=str(ca))
        with httpx.Client(proxy=p.url, verify=only_test_ca, timeout=10) as c:
            r = c.post(f"https://127.0.0.1:{up.port}/v1/chat/completions", json=body)
            assert r.status_code == 200 and b"[DONE]" in r.content
        with httpx.Client(proxy=p.url, verify=only_mitm, timeout=10) as c:
            with pytest.raises(httpx.ConnectError):  # proof: not mitmproxy's certificate
                c.get(f"https://127.0.0.1:{up.port}/")

        # 3. plain HTTP: proxied both ways, recorded only for an allow-listed host
        with httpx.Client(proxy=p.url, timeout=10) as c:
            chat = {"model": "sim-1", "messages": [{"role": "user", "content": "x"}], "stream": True}
            assert c.post(f"http://127.0.0.1:{sim.port}/v1/chat/completions", json=chat).status_code == 200
            assert c.post(f"http://localhost:{sim.port}/v1/chat/completions", json=chat).status_code == 200
        p.flush()
        time.sleep(0.1)
        rs = rows(db_path)

    # both POSTs reached the upstream; the GET died in the client's TLS handshake (the real certificate)
    assert [(m, path) for m, path, _ in up.requests] == [("POST", "/v1/chat/completions")] * 2
    assert len(rs) == 2, [r["upstream_url"] for r in rs]
    tls_row, http_row = sorted(rs, key=lambda r: r["upstream_url"].startswith("http:"))
    assert tls_row["upstream_url"] == f"https://localhost:{up.port}/v1/chat/completions"
    assert tls_row["api"] == "openai.chat" and tls_row["status"] == 200 and tls_row["model"] == "tls-model"
    assert tls_row["ttfb_ms"] >= 25 and tls_row["ttft_ms"] > tls_row["ttfb_ms"]
    assert tls_row["events"] == 6 and tls_row["usage_completion_tokens"] == 6 and tls_row["stream_done"] == 1
    assert tls_row["connect_ms"] is not None
    assert json.loads(tls_row["event_offsets"])[-1] > json.loads(tls_row["event_offsets"])[0]
    assert http_row["upstream_url"] == f"http://localhost:{sim.port}/v1/chat/completions"


@needs_wiring
def test_forward_and_upstream_do_not_mix(db_path):
    from firsttoken.addon.routing import RouteError

    with pytest.raises(RouteError):
        ProxyServer(["https://api.openai.com"], str(db_path), forward_mode=True)
    with pytest.raises(RouteError, match="host-match"):
        ProxyServer([], str(db_path), forward_mode=True, host_match=["(bad"])


@needs_wiring
@pytest.mark.parametrize("mode", ["forward", "upstream"])
def test_dns_hint_names_upstream_only_when_there_is_one(tmp_path, db_path, mode):
    """A host that does not resolve: through --upstream the hint points at --upstream; through
    forward mode (which has no --upstream) at the client's own base URL."""
    from firsttoken.cli.output import localize

    host = "no-such-host.invalid"
    if mode == "forward":
        p = ProxyServer([], str(db_path), port=0, forward_mode=True, host_match=[host],
                        extra_options={"confdir": str(tmp_path / "mitm")})
    else:
        p = ProxyServer([f"http://{host}"], str(db_path), port=0)
    chat = {"model": "sim-1", "messages": [{"role": "user", "content": "x"}], "stream": True}
    with p:
        if mode == "forward":
            with httpx.Client(proxy=p.url, timeout=30) as c:
                status = c.post(f"http://{host}/v1/chat/completions", json=chat).status_code
        else:
            status = httpx.post(p.url + "/v1/chat/completions", json=chat, timeout=30).status_code
        assert status == 502
        p.flush()
        time.sleep(0.1)
        (row,) = rows(db_path)
    (found,) = [f for f in localize(json.loads(row["findings"]), "en") if f["code"] == "upstream.unreachable"]
    zh = [f for f in localize(json.loads(row["findings"]), "zh") if f["code"] == "upstream.unreachable"][0]
    assert host in found["message"] and "does not resolve" in found["message"]
    if mode == "forward":
        assert "--upstream" not in found["hint"] + zh["hint"]
        assert "client's own base URL" in found["hint"] and host in found["hint"]
    else:
        assert f"--upstream (http://{host})" in found["hint"]
