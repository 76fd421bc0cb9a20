"""Anthropic on Bedrock and on Vertex AI through the real proxy, with the real Anthropic SDK's
``AnthropicBedrock`` and ``AnthropicVertex`` (fake credentials) against a loopback upstream that
speaks each wire on a known schedule: api, model, stream, TTFT inside [upstream-seen, client-seen],
usage, Bedrock's own timings, exception and corrupt frames, SigV4 host binding, no secret on disk."""

from __future__ import annotations

import json
import re
import time

import pytest
from cloud_upstream import SECRET, CloudUpstream
from conftest import rows

from firsttoken.addon.hops import reported_timings
from firsttoken.cli.proxy.server import ProxyServer

anthropic = pytest.importorskip("anthropic")
pytest.importorskip("botocore")
pytest.importorskip("google.auth")

AK, TOKEN = "AKIAIOSFODNN7EXAMPLE", "FQoGZXIvYXdzEXAMPLESESSIONTOKENvalue0123456789"
VERTEX_TOKEN = "ya29.a0AfB_byEXAMPLEaccesstokenNOTREAL0123456789abcdef"
BEDROCK_MODEL = "anthropic.claude-sonnet-4-5-20250929-v1:0"
VERTEX_MODEL = "claude-sonnet-4-5@20250929"


@pytest.fixture
def upstream():
    with CloudUpstream() as u:
        yield u


@pytest.fixture
def proxied(upstream, db_path):
    p = ProxyServer([upstream.url], str(db_path), port=0)
    p.start()
    yield p
    p.stop()


def bedrock(base_url: str):
    return anthropic.AnthropicBedrock(base_url=base_url, aws_access_key=AK, aws_secret_key=SECRET,
                                      aws_session_token=TOKEN, aws_region="us-east-1", max_retries=0)


def vertex(base_url: str):
    return anthropic.AnthropicVertex(base_url=base_url, project_id="my-project", region="us-east5",
                                     access_token=VERTEX_TOKEN, max_retries=0)


def timed_stream(client, model: str, **kw) -> tuple[float, float, str]:
    """(when the call started, when its first text arrived, the text), client-side."""
    start, seen, text = time.perf_counter(), None, ""
    with client.messages.stream(model=model, max_tokens=64, messages=[{"role": "user", "content": "Say hello"}],
                                **kw) as s:
        for t in s.text_stream:
            if seen is None and t:
                seen = time.perf_counter()
            text += t
    return start, seen, text


def in_band(row: dict, up: dict, start: float, seen: float) -> None:
    """firsttoken's TTFT lies inside what the upstream and the client saw (2 ms of rounding either side)."""
    low = (up["first_visible_sent"] - up["received"]) * 1000.0 - 2.0
    high = (seen - start) * 1000.0 + 2.0
    assert low <= row["ttft_ms"] <= high, (low, row["ttft_ms"], high)


def no_secret_on_disk(db_path, *secrets: str) -> None:
    for suffix in ("", "-wal", "-shm"):
        f = db_path.parent / (db_path.name + suffix)
        if f.exists():
            data = f.read_bytes()
            for s in secrets:
                assert s.encode() not in data, f"{s[:6]}… found in {f.name}"


def test_bedrock_stream_through_the_proxy(upstream, proxied, db_path):
    start, seen, text = timed_stream(bedrock(proxied.url), BEDROCK_MODEL)
    assert text == "Hello!"
    proxied.flush(settle=10)
    r, = rows(db_path)
    up, = upstream.log
    assert up["path"] == f"/model/{BEDROCK_MODEL}/invoke-with-response-stream"
    assert (r["api"], r["model"], r["stream"], r["status"]) == ("anthropic.bedrock", BEDROCK_MODEL, 1, 200)
    assert r["content_type"] == "application/vnd.amazon.eventstream"
    assert (r["usage_prompt_tokens"], r["usage_cached_tokens"], r["usage_completion_tokens"]) == (12, 2, 7)
    assert r["stream_done"] == 1 and r["finish_reason"] == "end_turn" and r["reasoning_chars"] == 3
    assert r["frame_error"] is None and r["prompt_tokens_est"]
    in_band(r, up, start, seen)
    hop = json.loads(r["hop_headers"])
    got = {(x.what, x.ms, x.who) for x in reported_timings(hop)}
    assert ("provider_first_byte", 123.0, "Bedrock") in got and ("provider_processing", 420.0, "Bedrock") in got
    assert r["key_scheme"] == "AWS4-HMAC-SHA256" and r["key_fingerprint"] == "AKI…MPLE"
    assert not [f for f in json.loads(r["findings"]) if f["severity"] == "error"]
    # what the client signed travelled untouched, and what reached the disk holds none of it
    sig = up["headers"]["authorization"].rsplit("Signature=", 1)[1]
    no_secret_on_disk(db_path, sig, TOKEN, AK, SECRET)


def test_bedrock_invoke_and_converse(upstream, proxied, db_path):
    msg = bedrock(proxied.url).messages.create(model=BEDROCK_MODEL, max_tokens=16,
                                               messages=[{"role": "user", "content": "hi"}])
    assert msg.content[0].text == "Hello!"
    import httpx  # Converse has no Anthropic SDK client: what Cline's and LiteLLM's providers send, by hand

    with httpx.stream("POST", f"{proxied.url}/model/meta.llama3-70b-instruct-v1:0/converse-stream",
                      json={"messages": [{"role": "user", "content": [{"text": "hi"}]}]}) as resp:
        sent = b"".join(resp.iter_raw())
    proxied.flush(settle=10)
    inv, conv = rows(db_path)
    assert (inv["api"], inv["model"], inv["stream"], inv["output_chars"], inv["usage_completion_tokens"]) == (
        "anthropic.bedrock", BEDROCK_MODEL, 0, 6, 3)
    assert [x.ms for x in reported_timings(json.loads(inv["hop_headers"]))] == [420.0]
    assert (conv["api"], conv["model"], conv["stream"], conv["stream_done"], conv["finish_reason"]) == (
        "bedrock.converse", "meta.llama3-70b-instruct-v1:0", 1, 1, "tool_use")
    assert (conv["usage_prompt_tokens"], conv["usage_completion_tokens"], conv["ttft_ms"] is not None) == (24, 9, True)
    assert sent == upstream.log[1]["sent"]


def test_vertex_stream_and_body(upstream, proxied, db_path):
    start, seen, text = timed_stream(vertex(proxied.url), VERTEX_MODEL)
    assert text == "Hello!"
    msg = vertex(proxied.url).messages.create(model=VERTEX_MODEL, max_tokens=16,
                                              messages=[{"role": "user", "content": "hi"}])
    assert msg.content[0].text == "Hi there"
    proxied.flush(settle=10)
    s, b = rows(db_path)
    up = upstream.log[0]
    assert up["path"] == f"/projects/my-project/locations/us-east5/publishers/anthropic/models/{VERTEX_MODEL}:streamRawPredict"
    # anthropic<1 sends vertex-2023-10-16; anthropic 2.x (Python 3.12+) a dated version of its own
    assert re.fullmatch(r"(vertex-)?\d{4}-\d{2}-\d{2}", json.loads(up["body"])["anthropic_version"])
    assert (s["api"], s["model"], s["stream"], s["stream_done"]) == ("anthropic.vertex", VERTEX_MODEL, 1, 1)
    assert (s["usage_prompt_tokens"], s["usage_cached_tokens"], s["usage_completion_tokens"]) == (12, 2, 7)
    assert s["key_scheme"] == "Bearer" and VERTEX_TOKEN[-4:] in s["key_fingerprint"]
    in_band(s, up, start, seen)
    assert (b["api"], b["model"], b["stream"], b["usage_completion_tokens"]) == ("anthropic.vertex", VERTEX_MODEL, 0, 2)
    assert not [f for f in json.loads(s["findings"]) + json.loads(b["findings"]) if f["severity"] == "error"]
    no_secret_on_disk(db_path, VERTEX_TOKEN)


def test_exception_frame_is_a_finding(upstream, proxied, db_path):
    with pytest.raises(Exception) as info:
        timed_stream(bedrock(proxied.url), "anthropic.claude-exception-throttlingException")
    assert "Too many tokens" in str(info.value) or "throttling" in str(info.value).lower()
    proxied.flush(settle=10)
    r, = rows(db_path)
    assert (r["upstream_error_type"], r["upstream_error"]) == (
        "throttlingException", "Too many tokens, please wait before trying again.")
    assert r["top_code"] == "stream.bedrock_exception"
    f = json.loads(r["findings"])[0]
    assert f["params"]["variant"] == "throttling" and "quota" in f["hint"]


def test_corrupt_frame_is_forwarded_untouched_and_a_finding(upstream, proxied, db_path):
    import httpx

    url = f"{proxied.url}/model/anthropic.claude-corrupt/invoke-with-response-stream"
    with httpx.stream("POST", url, json={"anthropic_version": "bedrock-2023-05-31", "max_tokens": 8,
                                         "messages": [{"role": "user", "content": "hi"}]}) as resp:
        got = b"".join(resp.iter_raw())
    proxied.flush(settle=10)
    r, = rows(db_path)
    assert got == upstream.log[0]["sent"] and r["response_bytes"] == len(got)
    assert "CRC32" in r["frame_error"] and r["top_code"] == "stream.corrupt_frame"
    assert r["output_chars"] == 5  # "Hel" and "lo" came before the bad frame; nothing after it was read


def test_sigv4_signed_for_the_proxy_fails_upstream_and_says_why(db_path):
    with CloudUpstream(check_signature=True) as up:
        direct = bedrock(up.url).messages.create(model=BEDROCK_MODEL, max_tokens=8,
                                                 messages=[{"role": "user", "content": "hi"}])
        assert direct.content[0].text == "Hello!"  # the checker accepts a request signed for its own host
        p = ProxyServer([up.url], str(db_path), port=0)
        p.start()
        try:
            with pytest.raises(anthropic.PermissionDeniedError):
                bedrock(p.url).messages.create(model=BEDROCK_MODEL, max_tokens=8,
                                               messages=[{"role": "user", "content": "hi"}])
            p.flush(settle=10)
        finally:
            p.stop()
        r, = rows(db_path)
        sig = up.log[1]["headers"]["authorization"].rsplit("Signature=", 1)[1]
    assert r["status"] == 403 and r["top_code"] == "auth.sigv4_host"
    f = json.loads(r["findings"])[0]
    assert f["params"]["variant"] == "rewritten" and "sigv4_rewritten" in json.loads(r["key_facts"])
    assert "signed the request for the address it was given" in f["message"] and "--forward" in f["hint"]
    assert "CLAUDE_CODE_SKIP_BEDROCK_AUTH=1" in f["hint"]
    no_secret_on_disk(db_path, sig, TOKEN, AK)


def test_forward_mode_keeps_the_signature_valid_and_knows_the_cloud_hosts(db_path, tmp_path):
    """Through forward mode the client signs for the upstream's own host, so a host-checking
    upstream accepts it; and forward mode records Bedrock's and Vertex's API hosts by default."""
    import importlib

    # the SDK's own HTTP package: httpx for anthropic<1 (Python 3.11), httpx2 for anthropic 2.x
    hx = importlib.import_module("httpx2" if int(anthropic.__version__.split(".")[0]) >= 2 else "httpx")
    from firsttoken.addon.forward import HostFilter

    hosts = HostFilter()
    assert hosts.allowed("bedrock-runtime.us-east-1.amazonaws.com") and hosts.allowed("us-east5-aiplatform.googleapis.com")
    assert hosts.allowed("bedrock-runtime-fips.us-gov-west-1.amazonaws.com") and not hosts.allowed("s3.amazonaws.com")
    with CloudUpstream(check_signature=True) as up:
        host = up.url.split("//", 1)[1]
        p = ProxyServer([], str(db_path), port=0, forward_mode=True, host_match=[host],
                        extra_options={"confdir": str(tmp_path / "mitm")})
        with p:
            client = anthropic.AnthropicBedrock(base_url=up.url, aws_access_key=AK, aws_secret_key=SECRET,
                                                aws_region="us-east-1", max_retries=0,
                                                http_client=hx.Client(proxy=p.url))
            start, seen, text = timed_stream(client, BEDROCK_MODEL)
            p.flush(settle=10)
        assert text == "Hello!"
        r, = rows(db_path)
    assert (r["api"], r["status"], r["stream_done"]) == ("anthropic.bedrock", 200, 1)
    assert "sigv4_rewritten" not in json.loads(r["key_facts"]) and r["top_code"] is None
    in_band(r, up.log[0], start, seen)
