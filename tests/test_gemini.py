"""Google's Gemini API through the real proxy with the real google-genai SDK: api, model, stream, TTFT
inside [upstream-sent, client-seen], usage, Google's errors as the findings users know, keys never on disk."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from conftest import rows
from gemini_upstream import (
    BLOCKED,
    DEADLINE,
    FIRST_TOKEN,
    FIRST_VISIBLE,
    KEY_INVALID,
    NOT_FOUND,
    OVERLOADED,
    PERMISSION_DENIED,
    QUOTA,
    body_replay,
    stream_replay,
)
from google import genai  # the test extra's: a missing SDK fails here, never skips
from google.genai import types
from rawserver import Replay, ReplayUpstream

from firsttoken.addon import tokens
from firsttoken.addon.apis import detect_api, make_interpreter
from firsttoken.addon.apis.gemini import gemini_call, is_vertex, path_facts
from firsttoken.addon.secrets import redact_path
from firsttoken.addon.sse import SSEDecoder
from firsttoken.cli.proxy.server import ProxyServer

KEY = "AIzaSyD-test-key-0000000000000000000wxyz"
FLASH = "gemini-2.5-flash"


# -- the dialect, without a proxy ---------------------------------------------------------

@pytest.mark.parametrize("path,api", [
    ("/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse", "gemini.generate"),
    ("/v1beta/models/gemini-2.5-flash:generateContent", "gemini.generate"),
    ("/v1/models/gemini-2.5-pro:generateContent?key=AIzaXYZ", "gemini.generate"),
    ("/v1/projects/p-1/locations/us-central1/publishers/google/models/gemini-2.5-pro:streamGenerateContent?alt=sse",
     "gemini.generate"),
    ("/gemini/v1beta/tunedModels/my-tune:generateContent", "gemini.generate"),
    ("/v1beta/models/gemini-2.5-flash:countTokens", "other"),
    ("/v1beta/models/text-embedding-004:embedContent", "other"),
    ("/v1beta/openai/chat/completions", "openai.chat"),  # Gemini's OpenAI-compatible endpoint
    ("/v1/projects/p/locations/l/publishers/anthropic/models/claude-x:streamRawPredict", "anthropic.vertex"),  # not Gemini
])
def test_detect_api_knows_gemini_paths(path: str, api: str) -> None:
    assert detect_api("POST", path) == api
    assert detect_api("GET", path) == "other"


def test_path_facts_name_the_model_and_the_stream() -> None:
    assert path_facts("POST", "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse") == \
        {"model": "gemini-2.5-flash", "stream": True}
    assert path_facts("POST", "/v1beta/models/gemini-2.5-flash:generateContent") == \
        {"model": "gemini-2.5-flash", "stream": False}
    assert path_facts("POST", "/v1beta/models/gemini-2.5-flash:countTokens") == {"model": "gemini-2.5-flash"}
    assert path_facts("POST", "/v1/chat/completions") == {}
    assert path_facts("POST", "/v1/projects/p/locations/l/publishers/anthropic/models/claude-x:streamRawPredict") == {}
    assert gemini_call("POST", "/v1/projects/p/locations/l/publishers/google/models/gemini-2.0:generateContent") \
        == ("gemini-2.0", "generatecontent")
    assert is_vertex("/v1/projects/p/locations/l/publishers/google/models/m:generateContent")
    assert is_vertex("/v1beta/models/m:generateContent", "https://us-central1-aiplatform.googleapis.com")
    assert not is_vertex("/v1beta/models/m:generateContent", "https://generativelanguage.googleapis.com")


def test_a_key_in_the_query_is_redacted_for_storage() -> None:
    assert redact_path(f"/v1beta/models/m:generateContent?key={KEY}&alt=sse") == \
        "/v1beta/models/m:generateContent?key=[REDACTED]&alt=sse"


def test_a_json_array_answer_and_its_error() -> None:
    """streamGenerateContent without alt=sse answers a JSON array of responses."""
    i = make_interpreter("gemini.generate")
    deltas = i.on_body(json.dumps([{"candidates": [{"content": {"parts": [{"text": "a"}]}}]},
                                   {"candidates": [{"content": {"parts": [{"text": "b"}]}, "finishReason": "STOP"}],
                                    "usageMetadata": {"promptTokenCount": 3, "candidatesTokenCount": 2}}]).encode())
    assert [d.text for d in deltas] == ["a", "b"]
    assert (i.facts.finish_reason, i.facts.usage_prompt_tokens, i.facts.usage_completion_tokens, i.facts.done) == \
        ("STOP", 3, 2, True)
    e = make_interpreter("gemini.generate")
    e.on_body(json.dumps([KEY_INVALID]).encode())
    assert e.facts.error_type == "API_KEY_INVALID"


def test_stream_parts_become_reasoning_text_and_tool_deltas() -> None:
    i = make_interpreter("gemini.generate")
    body = b"".join(stream_replay().parts) + b'data: {"candidates":[{"content":{"parts":[{"functionCall":' \
        b'{"name":"get_weather","args":{"city":"Paris"}}}]}}]}\r\n\r\n'
    dec = SSEDecoder()
    kinds = [(d.kind, d.text) for ev in dec.feed(body) + dec.close() for d in i.on_event(ev)]
    assert kinds == [("reasoning", "Thinking about it"), ("text", "Paris is"), ("text", " the capital."),
                     ("tool", "get_weather"), ("tool", '{"city":"Paris"}')]
    f = i.facts
    # candidatesTokenCount leaves the thoughts out; the record's completion count holds them
    assert (f.usage_prompt_tokens, f.usage_completion_tokens, f.usage_reasoning_tokens, f.usage_cached_tokens) == \
        (21, 15, 9, 8)
    assert (f.finish_reason, f.done, f.model, f.response_id) == ("STOP", True, FLASH, "resp-1")


def test_prompt_count_of_the_gemini_shape() -> None:
    body = {"contents": [{"role": "user", "parts": [{"text": "What is the capital of France?"}]},
                         {"role": "model", "parts": [{"text": "Paris."}]},
                         {"role": "user", "parts": [{"text": "And of Italy?"},
                                                    {"inlineData": {"mimeType": "image/png", "data": "iVBORw0K"}}]}],
            "systemInstruction": {"parts": [{"text": "You answer in one word."}]},
            "tools": [{"functionDeclarations": [{"name": "lookup", "description": "Look a city up.",
                                                 "parameters": {"type": "OBJECT",
                                                                "properties": {"city": {"type": "STRING"}}}}]}],
            "generationConfig": {"maxOutputTokens": 100}}
    tc = tokens.count_request("gemini.generate", body, FLASH)
    assert tc.messages == 3 and tc.images == 1 and not tc.exact
    assert tc.system_tokens == tokens.count_text("You answer in one word.")[0]
    assert tc.tools_tokens > 5 and tc.last_user_tokens > 258
    assert tc.prompt_tokens_est == tc.prefix_tokens + tc.last_user_tokens + 3  # + reply priming
    assert tc.prefix_hash is not None


# -- through the proxy, with the real SDK ---------------------------------------------------

class Bench:
    def __init__(self, proxy: ProxyServer, upstream: ReplayUpstream, db: Path):
        self.proxy, self.upstream, self.db = proxy, upstream, db
        self.seen: set[str] = set()

    def client(self, key: str = KEY) -> Any:
        return genai.Client(api_key=key, http_options=types.HttpOptions(
            base_url=self.proxy.url, retry_options=types.HttpRetryOptions(attempts=1)))

    def new_row(self) -> dict[str, Any]:
        """The one request since the last call, once final: on a loaded machine the proxy's last hooks
        can run seconds after the client had its answer (flush waits two), so wait for 'done'."""
        deadline = time.monotonic() + 20
        while True:
            self.proxy.flush()
            new = [r for r in rows(self.db) if r["id"] not in self.seen]
            if all(r["state"] == "done" for r in new) or time.monotonic() > deadline:
                break
        self.seen.update(r["id"] for r in new)
        assert len(new) == 1, f"expected one new record, got {len(new)}"
        row = new[0]
        row["findings"] = json.loads(row["findings"] or "[]")
        return row


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    db = tmp_path_factory.mktemp("gemini") / "ft.db"
    with ReplayUpstream() as up, ProxyServer([up.url], str(db), port=0) as p:
        yield Bench(p, up, db)


def _codes(row: dict[str, Any]) -> list[str]:
    return [f["code"] for f in row["findings"]]


def test_sdk_stream_is_timed_counted_and_reconciled(bench: Bench) -> None:
    replay = bench.upstream.arm(stream_replay())
    client = bench.client()
    sent = time.perf_counter()
    seen_visible = seen_any = None
    text = []
    for chunk in client.models.generate_content_stream(
            model=FLASH, contents="What is the capital of France?",
            config=types.GenerateContentConfig(system_instruction="Answer briefly.", max_output_tokens=200)):
        now = time.perf_counter()
        seen_any = seen_any or now
        parts = chunk.candidates[0].content.parts if chunk.candidates and chunk.candidates[0].content else []
        if any(p.text and not p.thought for p in parts or []):
            seen_visible = seen_visible or now
            text += [p.text for p in parts if p.text and not p.thought]
    assert "".join(text) == "Paris is the capital."
    assert replay.done.wait(10)
    row = bench.new_row()
    method, target, headers, _ = replay.request
    # google-genai 2.x asks /v1beta, 3.x (Python 3.12+) /v1: both are the Gemini API
    assert target in (f"/v1beta/models/{FLASH}:streamGenerateContent?alt=sse", f"/v1/models/{FLASH}:streamGenerateContent?alt=sse")
    assert row["api"] == "gemini.generate" and row["model"] == FLASH and row["stream"] == 1
    assert row["path"] == target and row["max_tokens"] == 200
    assert row["state"] == "done" and row["status"] == 200 and row["stream_done"] == 1
    assert (row["usage_prompt_tokens"], row["usage_completion_tokens"], row["usage_reasoning_tokens"],
            row["usage_cached_tokens"]) == (21, 15, 9, 8)
    assert row["finish_reason"] == "STOP"
    assert row["key_header"] == "x-goog-api-key" and row["key_fingerprint"] == "AIz…wxyz"
    # a labelled estimate (no Gemini tokenizer offline), reconciled with the server's count
    assert row["prompt_tokens_est"] > 0 and row["tokens_exact"] == 0 and row["system_tokens"] > 0
    assert row["usage_ratio"] == pytest.approx(21 / row["prompt_tokens_est"], rel=1e-3)
    # TTFT stops at the first visible text, not at the thought; both inside [upstream sent, client saw]
    assert row["first_token_ms"] < row["ttft_ms"]
    lo, hi = sent, replay.received_at
    assert replay.sent_at[FIRST_VISIBLE] <= hi + row["ttft_ms"] / 1000 + 0.002
    assert lo + row["ttft_ms"] / 1000 <= seen_visible
    assert replay.sent_at[FIRST_TOKEN] <= hi + row["first_token_ms"] / 1000 + 0.002
    assert lo + row["first_token_ms"] / 1000 <= seen_any
    assert row["ttft_ms"] >= 200 - 5  # 150 ms to the thought, 50 more to the text
    assert row["reasoning_chars"] == len("Thinking about it") and row["output_chars"] == len("Paris is the capital.")
    assert not [f for f in row["findings"] if f["severity"] == "error"], row["findings"]


def test_sdk_generate_content_json_body(bench: Bench) -> None:
    body = {"candidates": [{"content": {"parts": [{"text": "Rome."}], "role": "model"}, "finishReason": "MAX_TOKENS"}],
            "usageMetadata": {"promptTokenCount": 12, "candidatesTokenCount": 2, "totalTokenCount": 14},
            "modelVersion": "gemini-2.5-pro"}
    replay = bench.upstream.arm(body_replay(body))
    client = bench.client()  # kept: a Client closes its connections when it is collected
    r = client.models.generate_content(model="gemini-2.5-pro", contents="And of Italy?")
    assert r.text == "Rome."
    assert replay.done.wait(10)
    row = bench.new_row()
    assert row["api"] == "gemini.generate" and row["model"] == "gemini-2.5-pro" and row["stream"] == 0
    assert (row["usage_prompt_tokens"], row["usage_completion_tokens"], row["finish_reason"]) == (12, 2, "MAX_TOKENS")
    assert "stream.not_requested" in _codes(row)  # a non-streamed generation, said so (info)


@pytest.mark.parametrize("body,status,code,variant", [
    (KEY_INVALID, 400, "auth.rejected", "google_key"),
    (PERMISSION_DENIED, 403, "auth.rejected", "google_denied"),
    (QUOTA, 429, "rate.limited", "google_retry"),
    (NOT_FOUND, 404, "model.not_found", "gemini"),
    (OVERLOADED, 503, "upstream.overloaded", "said"),
    (DEADLINE, 504, "upstream.server_error", "deadline"),
])
def test_google_errors_are_the_findings_users_know(bench: Bench, body: dict, status: int, code: str,
                                                   variant: str) -> None:
    replay = bench.upstream.arm(body_replay(body, status))
    model = "gemini-9-ultra" if code == "model.not_found" else FLASH
    client = bench.client()
    with pytest.raises(genai.errors.APIError) as err:
        client.models.generate_content(model=model, contents="hi")
    assert err.value.code == status
    assert replay.done.wait(10)
    row = bench.new_row()
    top = row["findings"][0]
    assert (row["top_code"], top["params"].get("variant")) == (code, variant), row["findings"]
    assert "request.malformed" not in _codes(row)
    reasons = [d["reason"] for d in body["error"].get("details", []) if "reason" in d]
    assert row["upstream_error_type"] == (reasons[0] if reasons else body["error"]["status"])
    if code == "auth.rejected":
        assert top["params"]["env"] == "GEMINI_API_KEY"
        assert "aistudio.google.com" in top["hint"] or "Generative Language API" in top["hint"]
    if code == "rate.limited":
        assert row["retry_after"] == 17 and "17" in top["message"]
    if code == "model.not_found":
        assert "/v1beta/models" in top["hint"] and "x-goog-api-key" in top["hint"]


def test_a_blocked_prompt_is_a_finding(bench: Bench) -> None:
    replay = bench.upstream.arm(stream_replay([BLOCKED], gaps=[0.0]))
    client = bench.client()
    chunks = list(client.models.generate_content_stream(model=FLASH, contents="something forbidden"))
    assert chunks and chunks[0].prompt_feedback.block_reason.value == "PROHIBITED_CONTENT"
    assert replay.done.wait(10)
    row = bench.new_row()
    assert row["finish_reason"] == "blocked:PROHIBITED_CONTENT" and row["stream_done"] == 1
    assert row["top_code"] == "response.blocked" and row["findings"][0]["params"]["variant"] == "prompt"


def test_a_key_in_the_url_never_reaches_the_database(bench: Bench) -> None:
    """Google's REST examples put the key in ``?key=``: fingerprinted, redacted, never stored."""
    replay = bench.upstream.arm(stream_replay())
    url = f"{bench.proxy.url}/v1beta/models/{FLASH}:streamGenerateContent?alt=sse&key={KEY}"
    with httpx.Client(timeout=30) as c:
        r = c.post(url, json={"contents": [{"parts": [{"text": "hi"}]}]})
    assert r.status_code == 200 and replay.done.wait(10)
    assert replay.request[1].endswith(f"key={KEY}")  # forwarded unchanged
    row = bench.new_row()
    assert row["api"] == "gemini.generate" and row["key_header"] == "query:key" and row["key_fingerprint"] == "AIz…wxyz"
    assert row["path"] == f"/v1beta/models/{FLASH}:streamGenerateContent?alt=sse&key=[REDACTED]"
    bench.proxy.flush()
    for f in bench.db.parent.glob(bench.db.name + "*"):  # the database, its WAL and shared memory
        assert KEY.encode() not in f.read_bytes(), f"the key reached {f.name}"


def test_gemini_openai_compatible_endpoint_still_works(bench: Bench) -> None:
    import openai

    chunk = {"id": "c1", "object": "chat.completion.chunk", "model": FLASH,
             "choices": [{"index": 0, "delta": {"role": "assistant", "content": "Hi"}, "finish_reason": None}]}
    end = {"id": "c1", "object": "chat.completion.chunk", "model": FLASH,
           "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
           "usage": {"prompt_tokens": 4, "completion_tokens": 1, "total_tokens": 5}}
    from rawserver import Replay

    parts = [b"data: " + json.dumps(c).encode() + b"\n\n" for c in (chunk, end)] + [b"data: [DONE]\n\n"]
    replay = bench.upstream.arm(Replay(200, [("content-type", "text/event-stream")], parts, [0.02, 0.02, 0.0]))
    client = openai.OpenAI(base_url=f"{bench.proxy.url}/v1beta/openai", api_key=KEY, max_retries=0)
    got = "".join(c.choices[0].delta.content or "" for c in client.chat.completions.create(
        model=FLASH, messages=[{"role": "user", "content": "hi"}], stream=True) if c.choices)
    assert got == "Hi" and replay.done.wait(10)
    assert replay.request[1] == "/v1beta/openai/chat/completions"
    row = bench.new_row()
    assert row["api"] == "openai.chat" and row["model"] == FLASH and row["stream"] == 1 and row["ttft_ms"] > 0
    assert row["key_fingerprint"] == "AIz…wxyz"


@pytest.mark.parametrize("upstream,path,provider", [
    ("https://generativelanguage.googleapis.com", f"/v1beta/models/{FLASH}:streamGenerateContent?alt=sse", "gcp.gemini"),
    ("https://us-central1-aiplatform.googleapis.com",
     f"/v1/projects/p/locations/us-central1/publishers/google/models/{FLASH}:generateContent", "gcp.vertex_ai"),
    ("http://127.0.0.1:4000", f"/v1beta/models/{FLASH}:generateContent", "gcp.gemini"),  # a gateway: by the path
    ("http://127.0.0.1:4000", f"/v1/projects/p/locations/l/publishers/google/models/{FLASH}:generateContent",
     "gcp.vertex_ai"),
])
def test_otel_and_prometheus_name_google_as_the_genai_conventions_do(upstream, path, provider) -> None:
    from firsttoken.addon.metrics import genai_identity
    from firsttoken.addon.otel import span_attributes
    from firsttoken.addon.record import Record

    rec = Record(id="r1", started_at="2026-12-03T00:00:00+00:00", api="gemini.generate", model=FLASH, path=path,
                 upstream=upstream, upstream_url=upstream + path.split("?")[0], stream=True, status=200)
    operation, got, _, _ = genai_identity(rec)
    assert (operation, got) == ("generate_content", provider)
    attrs = span_attributes(rec)
    assert attrs["gen_ai.provider.name"] == provider and attrs["gen_ai.operation.name"] == "generate_content"


def test_env_gemini_prints_what_the_sdk_reads(bench: Bench, monkeypatch) -> None:
    """`firsttoken env google-genai` for a proxy with a Gemini route beside an OpenAI one: the SDK, with nothing but
    the exported GOOGLE_GEMINI_BASE_URL, reaches the Gemini route."""
    from firsttoken.addon import routing
    from firsttoken.cli.env.clients import plan_for
    from firsttoken.cli.env.target import Target

    routes = routing.parse_upstreams(["openai=https://api.openai.com/v1", f"gemini={bench.upstream.url}"])
    plan = plan_for("google-genai", Target(bench.proxy.url, routes, "test"), env={"GEMINI_API_KEY": KEY})
    assert plan.exports == [("GOOGLE_GEMINI_BASE_URL", f"{bench.proxy.url}/gemini")]
    cli_plan = plan_for("gemini-cli", Target(bench.proxy.url, routes, "test"), env={})
    assert cli_plan.exports == plan.exports and "gemini-api-key" in cli_plan.blocks[0][1] and cli_plan.warnings
    vertex = plan_for("gemini-cli", Target(bench.proxy.url, routes, "test"), env={"GOOGLE_GENAI_USE_VERTEXAI": "true"})
    assert vertex.exports == [("GOOGLE_VERTEX_BASE_URL", f"{bench.proxy.url}/gemini")]
    # the bench's proxy has one route at its root: the SDK reads the variable the plan exports
    [(var, _)] = plan_for("google-genai", Target(bench.proxy.url, None, "test"), env={}).exports
    monkeypatch.setenv(var, bench.proxy.url)
    replay = bench.upstream.arm(stream_replay())
    client = genai.Client(api_key=KEY)
    assert "".join(c.text or "" for c in client.models.generate_content_stream(model=FLASH, contents="hi"))
    assert replay.done.wait(10)
    assert bench.new_row()["api"] == "gemini.generate"


def test_a_chat_is_one_conversation_of_turns(bench: Bench) -> None:
    """The SDK's chat resends the history: the proxy groups its requests into one conversation, a turn each."""
    client = bench.client()
    chat = client.chats.create(model=FLASH, config=types.GenerateContentConfig(system_instruction="Be brief."))
    got = []
    for question in ("Name the capital of Peru.", "And the one of Chile?"):
        replay = bench.upstream.arm(stream_replay())
        assert "".join(c.text or "" for c in chat.send_message_stream(question))
        assert replay.done.wait(10)
        got.append(bench.new_row())
    assert got[0]["conversation_id"] and got[0]["conversation_id"] == got[1]["conversation_id"]
    assert [r["turn"] for r in got] == [1, 2] and [r["request_kind"] for r in got] == ["main", "main"]
    assert got[1]["messages"] > got[0]["messages"] == 1 and got[1]["prefix_tokens"] > got[0]["prefix_tokens"]


@pytest.mark.parametrize("express", [False, True])
def test_sdk_on_vertex_ai(bench: Bench, express: bool) -> None:
    """google-genai with vertexai=True: Vertex AI's project path and an OAuth token (express mode: the
    project-less path and an API key), the same dialect."""
    from google.oauth2.credentials import Credentials

    opts = types.HttpOptions(base_url=bench.proxy.url, retry_options=types.HttpRetryOptions(attempts=1))
    if express:
        client = genai.Client(vertexai=True, api_key=KEY, http_options=opts)
    else:
        client = genai.Client(vertexai=True, project="p-1", location="us-central1", http_options=opts,
                              credentials=Credentials(token="ya29.fake-access-token-000000000000"))
    replay = bench.upstream.arm(stream_replay())
    assert "".join(c.text or "" for c in client.models.generate_content_stream(model=FLASH, contents="hi"))
    assert replay.done.wait(10)
    target = replay.request[1]
    want = "/publishers/google/models/" + FLASH + ":streamGenerateContent?alt=sse"
    assert target.endswith(want) and (express or "/projects/p-1/locations/us-central1/" in target), target
    row = bench.new_row()
    assert row["api"] == "gemini.generate" and row["model"] == FLASH and row["stream"] == 1 and row["ttft_ms"] > 0
    assert row["usage_prompt_tokens"] == 21 and row["prompt_tokens_est"] > 0
    assert row["key_header"] == ("x-goog-api-key" if express else "authorization")
    from firsttoken.addon.apis.gemini import is_vertex

    assert is_vertex(row["path"])


def test_a_json_array_stream_without_alt_sse_is_said_not_timed(bench: Bench) -> None:
    """streamGenerateContent without alt=sse (Google's REST default): one JSON array, read whole; a warning says
    why TTFT is missing and how to get it."""
    chunks = [json.loads(p[len(b"data: "):]) for p in stream_replay().parts]
    replay = bench.upstream.arm(Replay(200, [("content-type", "application/json; charset=UTF-8")],
                                       [json.dumps(chunks).encode()], framing="length"))
    with httpx.Client(timeout=30) as c:
        r = c.post(f"{bench.proxy.url}/v1beta/models/{FLASH}:streamGenerateContent",
                   headers={"x-goog-api-key": KEY}, json={"contents": [{"parts": [{"text": "hi"}]}]})
    assert r.status_code == 200 and replay.done.wait(10)
    row = bench.new_row()
    assert row["api"] == "gemini.generate" and row["stream"] == 1 and row["usage_completion_tokens"] == 15
    assert row["output_chars"] == len("Paris is the capital.") and row["finish_reason"] == "STOP"
    f = next(f for f in row["findings"] if f["code"] == "stream.not_sse")
    assert f["severity"] == "warn" and f["params"]["variant"] == "gemini_array" and "alt=sse" in f["hint"]


def test_count_tokens_is_recorded_not_timed_and_its_key_error_is_a_key_finding(bench: Bench) -> None:
    replay = bench.upstream.arm(body_replay({"totalTokens": 31}))
    client = bench.client()
    assert client.models.count_tokens(model=FLASH, contents="How many tokens is this?").total_tokens == 31
    assert replay.done.wait(10)
    row = bench.new_row()
    assert row["api"] == "other" and row["model"] == FLASH and row["stream"] is None and row["ttft_ms"] is None
    assert row["request_kind"] in (None, "count_tokens") and not row["findings"]
    replay = bench.upstream.arm(body_replay(KEY_INVALID, 400))
    with pytest.raises(genai.errors.APIError):
        client.models.count_tokens(model=FLASH, contents="x")
    assert replay.done.wait(10)
    row = bench.new_row()
    assert row["top_code"] == "auth.rejected" and row["findings"][0]["params"]["variant"] == "google_key"


def test_a_gemini_key_sent_as_bearer_is_the_wrong_header(bench: Bench) -> None:
    """OpenAI habits: the AIza key as `Authorization: Bearer` to Google's own API (Google answers 401)."""
    body = {"error": {"code": 401, "status": "UNAUTHENTICATED",
                      "message": "Request had invalid authentication credentials. Expected OAuth 2 access token.",
                      "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo",
                                   "reason": "ACCESS_TOKEN_TYPE_UNSUPPORTED"}]}}
    replay = bench.upstream.arm(body_replay(body, 401))
    with httpx.Client(timeout=30) as c:
        r = c.post(f"{bench.proxy.url}/v1beta/models/{FLASH}:generateContent", headers={"authorization": f"Bearer {KEY}"},
                   json={"contents": [{"parts": [{"text": "hi"}]}]})
    assert r.status_code == 401 and replay.done.wait(10)
    row = bench.new_row()
    f = row["findings"][0]
    assert (row["top_code"], f["params"]["variant"]) == ("auth.wrong_header", "gemini_bearer")
    assert "x-goog-api-key" in f["hint"] and KEY not in json.dumps(row["findings"])
