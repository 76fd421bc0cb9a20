"""The request plan: every decision the proxy makes from a request head, as a pure function
(route or refusal, the run mark, key facts, body policy). The hooks that apply it run in
test_capture_hooks.py (taddons/tflow) and end to end in test_capture.py and test_wire.py."""

from __future__ import annotations

import json

import pytest

from firsttoken.addon.plan import REQUEST_READ_MAX, plan_request
from firsttoken.addon.routing import parse_upstreams

ROUTES = parse_upstreams(["openai=https://api.openai.com/v1", "anthropic=https://api.anthropic.com"])
KEY = ("authorization", "Bearer sk-proj-abcdefghijklmnop1234")
JSON = ("content-type", "application/json")


def plan(path, headers=(KEY, JSON, ("content-length", "20")), routes=ROUTES, method="POST", run_id=None):
    return plan_request(method, path, list(headers), routes, run_id=run_id, own_url="http://127.0.0.1:8787",
                        origin="https://api.example.com:443")


def test_a_named_route_sends_the_client_path_after_its_prefix():
    p = plan("/openai/v1/chat/completions")
    assert (p.route, p.upstream, p.refusal) == ("openai", "https://api.openai.com/v1", None)
    assert (p.target.scheme, p.target.host, p.target.port) == ("https", "api.openai.com", 443)
    assert p.upstream_path == "/v1/v1/chat/completions"  # concatenated, never "fixed": diagnosed instead
    assert p.api == "openai.chat"


def test_no_route_is_refused_with_the_base_url_to_use():
    p = plan("/gemini/v1/chat/completions")
    assert p.refusal.status == 404 and p.refusal.type == "firsttoken_no_route" and p.route is None
    msg = json.loads(p.refusal.body())["error"]["message"]
    assert "/openai, /anthropic" in msg and "http://127.0.0.1:8787/<route>" in msg
    assert not p.stream_body  # a refused request has no body to stream upstream


def test_a_run_mark_is_stripped_and_stamped():
    p = plan("/_run/ab12cd34/anthropic/v1/messages", run_id="proxy-own")
    assert p.run_id == "ab12cd34" and p.path == "/anthropic/v1/messages" and p.upstream_path == "/v1/messages"
    assert plan("/_run/ab12cd34?x=1").path == "/?x=1"
    # without routes of its own (script or forward mode) a path is left as the client sent it
    assert plan("/_run/ab12cd34/v1/messages", routes=[]).path == "/_run/ab12cd34/v1/messages"


def test_without_routes_mitmproxy_mode_decides_where_it_goes():
    p = plan("/v1/chat/completions", routes=[])
    assert (p.route, p.upstream, p.target) == ("default", "https://api.example.com:443", None)


@pytest.mark.parametrize("value, what", [("a\r\n b", "obs-fold"), ("a\rb", "bare CR")])
def test_a_smuggling_shaped_header_is_answered_400_and_closes(value, what):
    p = plan("/openai/v1/chat/completions", headers=(KEY, ("x-custom", value)))
    assert p.refusal.status == 400 and p.refusal.close and what in p.refusal.message


def test_the_key_is_a_fingerprint_and_its_value_kept_only_for_redaction():
    p = plan("/openai/v1/chat/completions")
    assert p.key.header == "authorization" and p.key.fingerprint.startswith("sk-proj-") and "abcdefghijklmnop" not in repr(p)
    assert "sk-proj-abcdefghijklmnop1234" in p.secrets


def test_a_key_in_the_query_is_fingerprinted_and_redacted_from_the_stored_path():
    p = plan("/openai/v1beta/models?key=AIzaSyA1234567890abcdefghijklmnopqrstuv", headers=(JSON,))
    assert p.key.header == "query:key" and "AIzaSyA1234567890abcdefghijklmnopqrstuv" in p.secrets
    assert "AIzaSyA1234567890" not in p.stored_path


def test_experiment_header_tags_the_request():
    assert plan("/openai/v1/chat/completions", headers=(KEY, ("X-Firsttoken-Experiment", "ab"))).experiment == "ab"


@pytest.mark.parametrize("headers, streams", [
    ((("content-length", "1024"),), False),  # read first: known even when the upstream is unreachable
    ((("content-length", str(REQUEST_READ_MAX + 1)),), True),  # too large to hold
    ((("transfer-encoding", "chunked"),), True),  # unknown size
    ((), True),
    ((("content-length", "12"), ("content-length", "12")), True),  # not one clear size: never waited for
])
def test_body_policy(headers, streams):
    assert plan("/openai/v1/chat/completions", headers=(KEY, *headers)).stream_body is streams
