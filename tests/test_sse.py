"""The incremental SSE decoder: WHATWG parsing rules, chunking invariance, robustness."""

from __future__ import annotations

import random
import re
import sys
from pathlib import Path

import pytest

from firsttoken.addon import sse as sse_mod
from firsttoken.addon.sse import SSEDecoder, SSEEvent

FIXTURES = sorted((Path(__file__).parent / "fixtures" / "streams").glob("*.sse"))


def decode(*chunks: bytes) -> tuple[list[SSEEvent], SSEDecoder]:
    d = SSEDecoder()
    out: list[SSEEvent] = []
    for c in chunks:
        out += d.feed(c)
    out += d.close()
    return out, d


def events(*chunks: bytes) -> list[tuple[str, str, str | None]]:
    return [(e.event, e.data, e.id) for e in decode(*chunks)[0]]


def reference(data: bytes) -> tuple[list[tuple[str, str, str | None]], int]:
    """A deliberately naive, whole-input implementation of the same rules (the oracle)."""
    text = data.decode("utf-8", "replace")
    if text.startswith("\ufeff"):
        text = text[1:]
    lines = re.split(r"\r\n|\r|\n", text)
    if lines[-1] == "":
        lines.pop()  # the input ended with a line end
    out, comments = [], 0
    ev, buf, last_id = "", None, None
    for line in lines + [""]:  # close() = one more blank line
        if line == "":
            if buf is not None:
                out.append((ev or "message", "\n".join(buf), last_id))
            ev, buf = "", None
            continue
        if line.startswith(":"):
            comments += 1
            continue
        if ":" in line:
            name, value = line.split(":", 1)
            if value.startswith(" "):
                value = value[1:]
        else:
            name, value = line, ""
        if name == "data":
            buf = (buf or []) + [value]
        elif name == "event":
            ev = value
        elif name == "id" and "\0" not in value:
            last_id = value
        elif name == "error":
            out.append(("error", value, last_id))
    return out, comments


# -- the rules --------------------------------------------------------------------


def test_multiline_data_and_event_type() -> None:
    assert events(b"data: YHOO\ndata: +2\ndata: 10\n\nevent: add\ndata: 73857293\n\n") == [
        ("message", "YHOO\n+2\n10", None),
        ("add", "73857293", None),
    ]


def test_whatwg_spec_example_ids_and_spaces() -> None:
    stream = b": test stream\n\ndata: first event\nid: 1\n\ndata:second event\nid\n\ndata:  third event\n\n"
    evs, d = decode(stream)
    assert [(e.event, e.data, e.id) for e in evs] == [
        ("message", "first event", "1"),
        ("message", "second event", ""),  # `id` with no value resets the id to ""
        ("message", " third event", ""),  # only one space is removed; the id persists
    ]
    assert d.comments == 1


def test_empty_data_lines() -> None:
    # `data` without a colon and `data:` are data lines with an empty value
    assert events(b"data\n\ndata\ndata\n\n") == [("message", "", None), ("message", "\n", None)]


def test_event_without_data_is_not_dispatched_and_type_resets() -> None:
    assert events(b"event: foo\n\nid: 7\n\ndata: x\n\n") == [("message", "x", "7")]


def test_comments_counted_not_emitted() -> None:
    evs, d = decode(b": keep-alive\n\n:\n: OPENROUTER PROCESSING\r\ndata: a\n\n")
    assert [(e.event, e.data) for e in evs] == [("message", "a")]
    assert d.comments == 3


def test_retry_and_unknown_fields() -> None:
    evs, d = decode(b"retry: 3000\nfoo: bar\nretry: soon\nretry: \xc2\xb2\ndata: x\n\n")
    assert [(e.event, e.data) for e in evs] == [("message", "x")]
    assert d.retry == 3000


def test_id_with_nul_is_ignored() -> None:
    assert events(b"id: 1\ndata: a\n\nid: 2\x003\ndata: b\n\n") == [("message", "a", "1"), ("message", "b", "1")]


def test_field_names_are_case_sensitive_and_exact() -> None:
    assert events(b"Data: x\ndata : y\n\n") == []


@pytest.mark.parametrize("sep", [b"\n", b"\r\n", b"\r"])
def test_line_endings(sep: bytes) -> None:
    stream = sep.join([b"event: e", b"data: 1", b"data: 2", b"", b"data: 3", b"", b""])
    assert events(stream) == [("e", "1\n2", None), ("message", "3", None)]


def test_mixed_line_endings() -> None:
    assert events(b"data: a\r\ndata: b\rdata: c\n\r\ndata: d\r\r") == [("message", "a\nb\nc", None), ("message", "d", None)]


def test_cr_lf_split_across_feeds_is_one_line_end() -> None:
    # "\r" ends a feed, "\n" starts the next: one line end, so no blank line in between
    assert events(b"data: a\r", b"\ndata: b\r", b"\n\r", b"\n") == [("message", "a\nb", None)]
    # ... even with empty feeds in between
    assert events(b"data: a\r", b"", b"\ndata: b\r\n\r\n") == [("message", "a\nb", None)]
    # but "\r" "\r" is two line ends
    assert events(b"data: a\r", b"\rdata: b\n\n") == [("message", "a", None), ("message", "b", None)]


def test_event_dispatched_as_soon_as_blank_line_arrives() -> None:
    d = SSEDecoder()
    assert d.feed(b"data: a\n") == []
    assert [e.data for e in d.feed(b"\n")] == ["a"]
    assert d.feed(b"data: b\r") == []
    assert [e.data for e in d.feed(b"\r")] == ["b"]  # a lone CR ends the line at once


def test_utf8_split_across_feeds() -> None:
    raw = "data: héllo 👋 世界\n\n".encode()
    for i in range(len(raw) + 1):
        assert events(raw[:i], raw[i:]) == [("message", "héllo 👋 世界", None)]
    assert events(*[raw[i : i + 1] for i in range(len(raw))]) == [("message", "héllo 👋 世界", None)]


def test_invalid_utf8_is_replaced() -> None:
    assert events(b"data: a\xffb\xc3\n\n") == [("message", "a\ufffdb\ufffd", None)]
    assert events(b"data: \xe2\x82", b"\n\n") == [("message", "\ufffd", None)]


def test_leading_bom_dropped_once() -> None:
    assert events(b"\xef\xbb\xbfdata: a\n\n") == [("message", "a", None)]
    assert events(b"\xef", b"\xbb", b"\xbfdata: a\n\n") == [("message", "a", None)]
    # a second BOM is part of the field name, so the line is an unknown field
    assert events(b"\xef\xbb\xbf\xef\xbb\xbfdata: a\n\n") == []
    # a BOM later in the stream is data
    assert events(b"data: \xef\xbb\xbfa\n\n") == [("message", "\ufeffa", None)]


def test_bare_error_line_emitted_immediately() -> None:
    d = SSEDecoder()
    out = d.feed(b'data: {"a":1}\nerror: {"message":"upstream timeout"}\n')
    assert out == [SSEEvent("error", '{"message":"upstream timeout"}', None)]
    # the pending event is untouched
    assert d.feed(b"\n") == [SSEEvent("message", '{"a":1}', None)]
    assert events(b"error:boom\n") == [("error", "boom", None)]
    # `event: error` is an ordinary named event
    assert events(b"event: error\ndata: x\n\n") == [("error", "x", None)]


def test_close_dispatches_pending_event_and_partial_line() -> None:
    assert events(b"data: a\n") == [("message", "a", None)]
    assert events(b"data: a\n\ndata: [DONE]") == [("message", "a", None), ("message", "[DONE]", None)]
    assert events(b"data: a\r") == [("message", "a", None)]
    assert events(b"event: x\n") == []  # nothing to dispatch
    assert events(b"data: \xe2\x82") == [("message", "\ufffd", None)]  # a cut character


def test_close_is_final_and_idempotent() -> None:
    d = SSEDecoder()
    d.feed(b"data: a")
    assert [e.data for e in d.close()] == ["a"]
    assert d.close() == []
    assert d.feed(b"\n\ndata: b\n\n") == []


def test_feed_odd_inputs() -> None:
    d = SSEDecoder()
    assert d.feed(b"") == []
    assert d.feed(bytearray(b"data: a\n")) == []
    assert [e.data for e in d.feed(memoryview(b"\n"))] == ["a"]
    assert d.feed("not bytes") == []  # type: ignore[arg-type]
    assert d.feed(None) == []  # type: ignore[arg-type]


def test_long_line_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sse_mod, "MAX_LINE", 100)
    d = SSEDecoder()
    for _ in range(50):
        assert d.feed(b"x" * 7) == []
    assert len(d._buf) <= 100
    assert d.feed(b"\n") == []  # the (cut) line was an unknown field
    d.feed(b"data: " + b"y" * 500)
    assert len(d._buf) <= 100
    out = d.feed(b"\n\n")
    assert len(out) == 1 and out[0].data == "y" * 94
    assert d.truncated >= 1


def test_byte_by_byte_long_line_stays_compact() -> None:
    d = SSEDecoder()
    for _ in range(200_000):
        d.feed(b"x")
    assert sys.getsizeof(d._buf) < 2 * 200_000 + 4096  # raw bytes, not one object per feed
    d.feed(b"\ndata: ok\n\n")
    assert len(d._buf) == 0


def test_event_data_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sse_mod, "MAX_EVENT_DATA", 50)
    out, d = decode(b"data: 0123456789\n" * 20 + b"\n")
    assert len(out) == 1 and len(out[0].data) <= 50
    assert out[0].data.startswith("0123456789\n0123456789")
    assert d.truncated > 0


def test_real_size_long_line_does_not_crash() -> None:
    d = SSEDecoder()
    chunk = b"a" * (1024 * 1024)
    for _ in range(9):
        d.feed(chunk)
    assert len(d._buf) <= sse_mod.MAX_LINE
    assert d.feed(b"\n\ndata: ok\n\n") == [SSEEvent("message", "ok", None)]


# -- chunking invariance over the fixtures ----------------------------------------------


def _variants(raw: bytes) -> dict[str, bytes]:
    lf = raw.replace(b"\r\n", b"\n")
    return {"lf": lf, "crlf": lf.replace(b"\n", b"\r\n"), "cr": lf.replace(b"\n", b"\r"), "bom": b"\xef\xbb\xbf" + lf}


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.name)
def test_fixture_every_split_offset(path: Path) -> None:
    raw = path.read_bytes()
    whole, d = decode(raw)
    assert whole, "fixture yields events"
    assert ([(e.event, e.data, e.id) for e in whole], d.comments) == reference(raw)
    for i in range(len(raw) + 1):
        assert decode(raw[:i], raw[i:])[0] == whole, f"split at {i}"


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.name)
def test_fixture_byte_by_byte_and_random_splits(path: Path) -> None:
    raw = path.read_bytes()
    whole, d0 = decode(raw)
    evs, d1 = decode(*[raw[i : i + 1] for i in range(len(raw))])
    assert evs == whole and d1.comments == d0.comments
    rng = random.Random(path.name)
    for _ in range(40):
        cuts = sorted(rng.sample(range(1, len(raw)), rng.randint(1, 30)))
        parts = [raw[a:b] for a, b in zip([0, *cuts], [*cuts, len(raw)])]
        assert decode(*parts)[0] == whole


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.name)
def test_fixture_line_ending_variants_agree(path: Path) -> None:
    variants = _variants(path.read_bytes())
    expected = decode(variants["lf"])[0]
    for name, raw in variants.items():
        assert decode(raw)[0] == expected, name
        # CR/LF pairs cut at every possible place
        for i in range(0, len(raw), 97):
            assert decode(raw[:i], raw[i:])[0] == expected, (name, i)


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.name)
def test_fixture_agrees_with_openai_sdk_decoder(path: Path) -> None:
    streaming = pytest.importorskip("openai._streaming")
    raw = path.read_bytes()
    theirs = [(e.event or "message", e.data, e.id) for e in streaming.SSEDecoder().iter_bytes(iter([raw]))]
    ours = events(raw)
    if b"\nerror:" in raw:  # the SDK ignores the non-standard bare `error:` line
        assert ("error", '{"message":"upstream idle timeout after 60s","type":"gateway_timeout"}', None) in ours
        ours = [e for e in ours if e[0] != "error"]
    if not raw.endswith((b"\n\n", b"\r\n\r\n", b"\r\r")):  # only we dispatch an unterminated last event
        ours = ours[:-1]
    assert ours == theirs


# -- garbage ------------------------------------------------------------------------

_ATOMS = [b"data:", b"data: ", b"event:", b"id:", b"retry:", b"error:", b":", b" ", b"\r", b"\n", b"\r\n",
          b"\xef\xbb\xbf", b"\xe2\x82", b"\xac", b"\xff", b"\xc3", b"\x00", b"x", b"{}", b"[DONE]", "é👋".encode()]


def _garbage(rng: random.Random) -> bytes:
    if rng.random() < 0.3:
        return rng.randbytes(rng.randint(0, 400))
    return b"".join(rng.choice(_ATOMS) for _ in range(rng.randint(0, 120)))


def test_garbage_never_raises_and_is_chunking_invariant() -> None:
    rng = random.Random(1234)
    for case in range(600):
        raw = _garbage(rng)
        whole, d = decode(raw)
        assert ([(e.event, e.data, e.id) for e in whole], d.comments) == reference(raw), (case, raw)
        if len(raw) > 1:
            cuts = sorted(rng.sample(range(1, len(raw)), min(len(raw) - 1, rng.randint(1, 20))))
            parts = [raw[a:b] for a, b in zip([0, *cuts], [*cuts, len(raw)])]
            evs, d2 = decode(*parts)
            assert evs == whole and d2.comments == d.comments, (case, parts)
            assert decode(*[raw[i : i + 1] for i in range(len(raw))])[0] == whole, (case, raw)


# -- feed_one: the tap's shortcut for a chunk that is exactly one event ---------------------


def decode_one_first(*chunks: bytes) -> tuple[list[SSEEvent], SSEDecoder]:
    """As the tap decodes: ``feed_one`` where it answers, ``feed`` otherwise."""
    d = SSEDecoder()
    out: list[SSEEvent] = []
    for c in chunks:
        ev = d.feed_one(c)
        if ev is not None:
            out.append(ev)
        else:
            out += d.feed(c)
    out += d.close()
    return out, d


def _event_chunks(raw: bytes) -> list[bytes]:
    """The stream cut after every blank line: one event per chunk, as servers send them."""
    parts = raw.replace(b"\r\n", b"\n").split(b"\n\n")
    return [p + b"\n\n" for p in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.name)
def test_feed_one_agrees_with_feed(path: Path) -> None:
    for raw in _variants(path.read_bytes()).values():
        for chunks in (_event_chunks(raw), [raw], [raw[i:i + 7] for i in range(0, len(raw), 7)]):
            got, d1 = decode_one_first(*chunks)
            want, d0 = decode(*chunks)
            assert got == want and d1.comments == d0.comments and d1.retry == d0.retry


def test_feed_one_on_garbage_agrees_with_the_reference() -> None:
    rng = random.Random(99)
    shots = 0
    for case in range(600):
        raw = _garbage(rng) if rng.random() < 0.5 else b"".join(
            rng.choice([b"data: {}\n\n", b"data: x\n\n", b"\xef\xbb\xbfdata: a\n\n", b"id: 7\n", b": c\n\n",
                        b"data: \xff\n\n", b"event: e\n", b"data: a\nb\n\n", b"data: y\r\n\r\n",
                        b"event: e\ndata: {}\n\n", b"event:e\ndata: x\n\n", b"event: \ndata: x\n\n",
                        b"event:  e2\ndata: y\n\n", b"event: \xff\ndata: \xfe\n\n", b"event: a:b\ndata:  z\n\n",
                        b"event: e\ndata:x\n\n", b"event: e\nid: 3\ndata: q\n\n", b"event: e\ndata: a\ndata: b\n\n",
                        b"event: e\n\n", b"event: e\ndata: \n\n"]) for _ in range(8))
        got, d = decode_one_first(*_event_chunks(raw))
        assert ([(e.event, e.data, e.id) for e in got], d.comments) == reference(raw.replace(b"\r\n", b"\n")), (case, raw)
        shots += sum(SSEDecoder().feed_one(c) is not None for c in _event_chunks(raw)[:1])
    assert shots > 50  # the shortcut did answer, often


def test_lines_that_are_no_sse_field_are_counted_and_sampled_in_any_chunking():
    """An error page or a JSON body sent as text/event-stream: no event, but the decoder counts
    the lines the spec ignores and keeps their first FOREIGN_CHARS, whatever the chunking."""
    import random

    from firsttoken.addon.sse import FOREIGN_CHARS

    body = b'{\n  "error": {"message": "quota"}\n}\n' + b"<html>" + b"x" * (2 * FOREIGN_CHARS) + b"\n"
    want = None
    for seed in range(20):
        rnd, d, i = random.Random(seed), SSEDecoder(), 0
        events = []
        while i < len(body):
            n = rnd.randint(1, 700)
            events += d.feed(body[i:i + n])
            i += n
        events += d.close()
        got = (events, d.foreign, d.foreign_text)
        assert want is None or got == want
        want = got
    assert want[0] == [] and want[1] == 4 and len(want[2]) == FOREIGN_CHARS
    assert want[2].startswith('{\n  "error": {"message": "quota"}\n}\n<html>')
    normal = SSEDecoder()
    normal.feed(b"event: x\ndata: 1\nid: 2\nretry: 3\n: comment\n\n")
    assert normal.foreign == 0 and normal.foreign_text == ""


def test_feed_one_answers_for_both_common_shapes() -> None:
    # OpenAI sends `data: …\n\n`, Anthropic `event: …\ndata: …\n\n`: both skip the line machinery
    d = SSEDecoder()
    assert d.feed_one(b'data: {"a": 1}\n\n') == SSEEvent("message", '{"a": 1}')
    assert d.feed_one(b'event: content_block_delta\ndata: {"b": 2}\n\n') == SSEEvent("content_block_delta", '{"b": 2}')
    assert d.feed_one(b"event:\ndata: x\n\n") == SSEEvent("message", "x")
    # two data lines, an id line, a missing space after data: left to feed(), nothing consumed
    for chunk in (b"event: e\ndata: a\ndata: b\n\n", b"event: e\nid: 1\ndata: a\n\n", b"event: e\ndata:a\n\n"):
        assert d.feed_one(chunk) is None
        assert d.feed(chunk)
        assert d.feed_one(b"data: z\n\n").data == "z"  # the decoder is between events again
