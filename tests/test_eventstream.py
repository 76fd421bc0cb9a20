"""AWS event-stream framing (addon/framing) and the Bedrock dialects (addon/apis/bedrock.py),
checked against botocore's own parser as the oracle (a test dependency only)."""

from __future__ import annotations

import json
import random
import struct
import uuid
import zlib

import pytest
from bedrock_wire import anthropic_events, chunk_frame, converse_frames, exception_frame

from firsttoken.addon.apis import base as apis_base
from firsttoken.addon.apis import detect_api, make_interpreter
from firsttoken.addon.apis.bedrock import FIRST_BYTE, INVOCATION
from firsttoken.addon.apis.clouds import url_facts
from firsttoken.addon.framing import EventStreamDecoder, decoder_for, framing_of
from firsttoken.addon.record import Clock
from firsttoken.addon.tap import StreamTap

botocore_es = pytest.importorskip("botocore.eventstream")


@pytest.fixture(autouse=True)
def strict(monkeypatch):
    monkeypatch.setattr(apis_base, "STRICT", True)


def oracle(data: bytes) -> list[tuple[dict, bytes]]:
    buf = botocore_es.EventStreamBuffer()
    buf.add_data(data)
    return [(m.headers, m.payload) for m in buf]


def ours(*chunks: bytes) -> tuple[list[tuple[dict, bytes]], EventStreamDecoder]:
    d = EventStreamDecoder()
    out = []
    for c in chunks:
        one = d.feed_one(c)
        msgs = [one] if one is not None else d.feed(c)
        out += [(m.headers, m.payload) for m in msgs]
    d.close()
    return out, d


def typed_frame() -> bytes:
    """A frame with every header type AWS defines, written by hand."""
    def h(name: str, t: int, value: bytes) -> bytes:
        return bytes([len(name)]) + name.encode() + bytes([t]) + value
    u = uuid.UUID("12345678-1234-5678-1234-567812345678")
    hb = (h("t", 0, b"") + h("f", 1, b"") + h("b", 2, b"\x7f") + h("s", 3, struct.pack(">h", -2))
          + h("i", 4, struct.pack(">i", 70000)) + h("l", 5, struct.pack(">q", 2**40))
          + h("ba", 6, struct.pack(">H", 3) + b"\x00\x01\x02") + h(":event-type", 7, struct.pack(">H", 5) + b"chunk")
          + h("ts", 8, struct.pack(">q", 1_700_000_000_000)) + h("u", 9, u.bytes))
    payload = b'{"x": 1}'
    total = 12 + len(hb) + len(payload) + 4
    pre = struct.pack(">II", total, len(hb))
    pre += zlib.crc32(pre).to_bytes(4, "big")
    body = pre + hb + payload
    return body + zlib.crc32(body).to_bytes(4, "big")


def test_frames_match_botocore_whatever_the_chunking():
    frames = [chunk_frame(e) for e in anthropic_events(tool=True)] + [exception_frame("throttlingException", "slow down")]
    data = b"".join(frames)
    want = oracle(data)
    assert len(want) == len(frames)
    got, d = ours(data)
    assert got == want and d.corrupt is None and d.tail == 0
    assert ours(*frames)[0] == want  # a frame a chunk: the short path
    rng = random.Random(7)
    for _ in range(50):
        cuts = sorted(rng.sample(range(1, len(data)), rng.randint(1, 30)))
        parts = [data[a:b] for a, b in zip([0] + cuts, cuts + [len(data)])]
        assert ours(*parts)[0] == want
    assert ours(*[data[i:i + 1] for i in range(len(data))])[0] == want  # byte by byte


def test_every_header_type_reads_as_botocore_reads_it():
    f = typed_frame()
    (want_h, want_p), = oracle(f)
    (got_h, got_p), = ours(f)[0]
    assert got_p == want_p
    for k, v in want_h.items():
        if k == "ts":
            continue  # botocore turns it into a datetime; ours keeps the milliseconds
        if k == "u":
            assert got_h[k] == v.hex() if isinstance(v, bytes) else got_h[k] == uuid.UUID(str(v)).hex
            continue
        assert got_h[k] == v, k
    assert got_h["ts"] == 1_700_000_000_000


@pytest.mark.parametrize("damage", ["payload", "prelude_crc", "length", "message_crc"])
def test_a_corrupt_frame_stops_decoding_and_says_why(damage):
    good = chunk_frame({"type": "ping"})
    bad = bytearray(chunk_frame({"type": "content_block_delta", "delta": {"type": "text_delta", "text": "x"}}))
    if damage == "payload":
        bad[len(bad) - 10] ^= 0xFF
    elif damage == "prelude_crc":
        bad[9] ^= 0x01
    elif damage == "length":
        bad[0:4] = struct.pack(">I", 0x7FFFFFF0)
    else:
        bad[-1] ^= 0x01
    with pytest.raises(botocore_es.ParserError):
        oracle(good + bytes(bad))
    for chunks in ([good + bytes(bad) + good], [good, bytes(bad), good]):
        got, d = ours(*chunks)
        assert len(got) == 1  # the good frame before it; nothing after it
        assert d.corrupt and f"at byte {len(good)}" in d.corrupt
        assert ("CRC32" in d.corrupt) == (damage != "length")


def test_a_json_body_sent_as_an_event_stream_is_foreign_text():
    d = EventStreamDecoder()
    assert d.feed(b'{"message": "The security token included in the request is invalid."}') == []
    d.close()
    assert d.foreign and "security token" in d.foreign_text


def test_an_unfinished_last_frame_is_the_tail():
    f = chunk_frame({"type": "ping"})
    got, d = ours(f + f[:20])
    assert len(got) == 1 and d.tail == 20 and d.corrupt is None


def test_framing_is_chosen_by_content_type():
    assert framing_of("application/vnd.amazon.eventstream") == "eventstream"
    assert framing_of("text/event-stream; charset=utf-8") == "sse"
    assert framing_of("application/json") is None
    assert isinstance(decoder_for("application/vnd.amazon.eventstream"), EventStreamDecoder)


def test_cloud_paths():
    vx = "/v1/projects/p/locations/us-east5/publishers/anthropic/models/claude-sonnet-4-5@20250929:streamRawPredict"
    assert detect_api("POST", vx) == "anthropic.vertex"
    assert url_facts("anthropic.vertex", vx) == {"model": "claude-sonnet-4-5@20250929", "stream": True}
    assert detect_api("POST", vx.replace("streamRawPredict", "rawPredict")) == "anthropic.vertex"
    assert detect_api("POST", "/v1/projects/p/locations/l/publishers/anthropic/models/count-tokens:rawPredict") == "other"
    br = "/model/anthropic.claude-sonnet-4-5-20250929-v1:0/invoke-with-response-stream"
    assert detect_api("POST", br) == "anthropic.bedrock"
    assert url_facts("anthropic.bedrock", br)["stream"] is True
    assert url_facts("anthropic.bedrock", br.replace("-with-response-stream", ""))["stream"] is False
    assert detect_api("POST", "/model/us.anthropic.claude-3-5-haiku-20241022-v1:0/invoke") == "anthropic.bedrock"
    assert detect_api("POST", "/model/meta.llama3-70b-instruct-v1:0/invoke") == "other"
    assert detect_api("POST", "/model/meta.llama3-70b-instruct-v1:0/converse-stream") == "bedrock.converse"
    arn = "/model/arn%3Aaws%3Abedrock%3Aus-east-1%3A1%3Aapplication-inference-profile%2Fabc/invoke"
    assert url_facts(detect_api("POST", arn), arn)["model"].endswith("application-inference-profile/abc")
    assert detect_api("GET", br) == "other"


def tap_through(api: str, frames: list[bytes], ct: str = "application/vnd.amazon.eventstream") -> StreamTap:
    tap = StreamTap(Clock(t0=0.0, hook=0.0), api, ct, None)
    for f in frames:
        assert tap(f) is f
    tap.finish()
    return tap


def test_bedrock_invoke_stream_through_the_tap():
    tap = tap_through("anthropic.bedrock", [chunk_frame(e) for e in anthropic_events(tool=True)])
    f = tap.facts
    assert tap.error is None and tap.frame_error is None
    assert "".join(tap.text).startswith("Hello!") and "get_weather" in "".join(tap.text)
    assert "".join(tap.reasoning_text) == "hmm"
    assert f.done and f.finish_reason == "tool_use" and f.model == "claude-sonnet-4-5-20250929"
    assert (f.usage_prompt_tokens, f.usage_cached_tokens, f.usage_completion_tokens) == (12, 2, 7)
    assert f.reported == {FIRST_BYTE: "123", INVOCATION: "420"}
    assert tap.clock.first_visible is not None


def test_exception_frames_are_the_upstream_error():
    for kind in ("throttlingException", "modelStreamErrorException", "validationException",
                 "serviceUnavailableException", "internalServerException"):
        frames = [chunk_frame(e) for e in anthropic_events(metrics=None)[:3]] + [exception_frame(kind, f"{kind} said no")]
        tap = tap_through("anthropic.bedrock", frames)
        assert (tap.facts.error_type, tap.facts.error_message) == (kind, f"{kind} said no")
        assert not tap.facts.done


def test_corrupt_frame_in_the_tap_forwards_and_reports():
    frames = [chunk_frame(e) for e in anthropic_events()]
    bad = bytearray(frames[3])
    bad[20] ^= 0xFF
    frames[3] = bytes(bad)
    tap = tap_through("anthropic.bedrock", frames)
    assert tap.error is None and tap.frame_error and "CRC32" in tap.frame_error
    assert tap.bytes == sum(len(f) for f in frames)


def test_converse_stream_and_body():
    tap = tap_through("bedrock.converse", converse_frames())
    f = tap.facts
    assert "".join(tap.text) == 'Helloget_weather{"city":"Paris"}' and "".join(tap.reasoning_text) == "hmm"
    assert f.done and f.finish_reason == "tool_use"
    assert (f.usage_prompt_tokens, f.usage_cached_tokens, f.usage_completion_tokens) == (24, 4, 9)
    assert f.reported == {"bedrock-converse-metrics.latencyms": "321"}
    it = make_interpreter("bedrock.converse")
    deltas = it.on_body(json.dumps({"output": {"message": {"role": "assistant", "content": [
        {"reasoningContent": {"reasoningText": {"text": "r"}}}, {"text": "hi"}]}}, "stopReason": "end_turn",
        "usage": {"inputTokens": 3, "outputTokens": 1}, "metrics": {"latencyMs": 50}}).encode())
    assert [(d.kind, d.text) for d in deltas] == [("reasoning", "r"), ("text", "hi")]
    assert it.facts.usage_prompt_tokens == 3 and it.facts.finish_reason == "end_turn"
    it = make_interpreter("bedrock.converse")
    it.on_body(b'{"message": "The provided model identifier is invalid."}')
    assert it.facts.error_message == "The provided model identifier is invalid."


def test_vertex_is_the_messages_dialect_over_sse():
    body = b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in anthropic_events(metrics=None))
    tap = tap_through("anthropic.vertex", [body], ct="text/event-stream")
    assert "".join(tap.text) == "Hello!" and tap.facts.done and tap.facts.usage_completion_tokens == 7


def test_deferred_decoding_after_the_first_token_reads_frames_the_same():
    """After the first visible token the tap keeps chunks for the analysis thread (drain): a Bedrock
    stream split at odd places decodes to the same text, usage and timings."""
    data = b"".join(chunk_frame(e) for e in anthropic_events(tool=True))
    tap = StreamTap(Clock(t0=0.0, hook=0.0), "anthropic.bedrock", "application/vnd.amazon.eventstream", None, defer=True)
    for i in range(0, len(data), 37):
        tap(data[i:i + 37])
    assert tap.deferring and tap.kept  # the event loop stopped decoding
    tap.finish()
    tap.drain()
    assert "".join(tap.text).startswith("Hello!") and tap.facts.done and tap.facts.usage_completion_tokens == 7
    assert tap.frame_error is None and tap.facts.reported[FIRST_BYTE] == "123"


def test_otel_and_prometheus_name_the_platform():
    from firsttoken.addon.metrics import genai_identity
    from firsttoken.addon.otel import span_attributes
    from firsttoken.addon.record import Record

    for api, url, provider in (("anthropic.bedrock", "http://127.0.0.1:9/model/x/invoke", "aws.bedrock"),
                               ("bedrock.converse", "http://127.0.0.1:9/model/x/converse", "aws.bedrock"),
                               ("anthropic.vertex", "http://gw.local/v1/projects/p/x:rawPredict", "gcp.vertex_ai"),
                               ("anthropic.messages", "https://bedrock-runtime.us-east-1.amazonaws.com/model/x/invoke",
                                "aws.bedrock")):
        rec = Record(id="r", started_at="2026-01-01T00:00:00.000+00:00", api=api, upstream_url=url, model="m")
        assert genai_identity(rec)[:2] == ("chat", provider)
        attrs = span_attributes(rec)
        assert attrs["gen_ai.provider.name"] == attrs["gen_ai.system"] == provider


def test_bench_decodes_both_framings_alike():
    from firsttoken.cli.bench import framing

    for kind in ("sse", "eventstream"):
        assert framing.per_event_us(kind, n=200, repeats=1) > 0  # (it checks the stream was read whole)
    ev = framing.chunks("eventstream", 3)
    assert oracle(b"".join(ev))[0][0][":event-type"] == "chunk"


def test_vertex_error_in_a_list_is_the_upstream_error():
    it = make_interpreter("anthropic.vertex")
    it.on_body(b'[{"error": {"code": 429, "message": "Quota exceeded for aiplatform.googleapis.com/online_prediction_'
               b'requests_per_base_model", "status": "RESOURCE_EXHAUSTED"}}]')
    assert it.facts.error_message.startswith("Quota exceeded") and it.facts.malformed == 0


def test_malformed_headers_and_garbage_never_raise():
    hb = b"\x03abc\x63"  # a header of type 99: no such type
    total = 12 + len(hb) + 2 + 4
    pre = struct.pack(">II", total, len(hb))
    pre += zlib.crc32(pre).to_bytes(4, "big")
    body = pre + hb + b"{}"
    frame = body + zlib.crc32(body).to_bytes(4, "big")
    got, d = ours(chunk_frame({"type": "ping"}) + frame)
    assert len(got) == 1 and "headers are malformed" in d.corrupt
    rng = random.Random(3)
    good = b"".join(chunk_frame(e) for e in anthropic_events())
    for _ in range(300):
        data = bytearray(good)
        for _ in range(rng.randint(0, 4)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        if rng.random() < 0.3:
            data = bytearray(rng.randbytes(rng.randint(0, 400)))
        cuts = sorted(rng.sample(range(1, len(data)), min(len(data) - 1, rng.randint(0, 8)))) if len(data) > 1 else []
        parts = [bytes(data[a:b]) for a, b in zip([0] + cuts, cuts + [len(data)])]
        tap = tap_through("anthropic.bedrock", parts)  # forwards each chunk as it came, never raises
        assert tap.error is None and tap.bytes == len(data)
