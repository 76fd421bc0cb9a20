"""Real model-server captures (Ollama, Ollama's /v1, vLLM, TGI, SGLang) replayed through the real proxy.

The captures live outside the project, in ``../shared/real-streams/engines`` (its SOURCES.md says where each
came from); they are read at test time, never copied here. Each is unpacked from its container (httprr's raw
HTTP, a vcrpy cassette, llama-stack's openai-python objects, a syrupy snapshot, a docs page), served by a
loopback upstream as the engine sent it (a stream one line or event per chunk, paced; then the same bytes cut
anywhere), and the record is compared with what the capture's own bytes say: the API, the model, the visible and
reasoning characters, the usage, and the engine's report (Ollama's nanosecond durations, TGI's headers,
SGLang's ``meta_info``, vLLM's usage). Nothing expected is written down here: each value is parsed from the capture.
"""

from __future__ import annotations

import json
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
import yaml
from rawserver import Replay, ReplayUpstream
from test_real_streams import SHARED

from firsttoken.addon.engines import COLD_LOAD_MS
from firsttoken.cli.proxy.server import ProxyServer

ENGINES = SHARED / "engines" if SHARED else None
#: seconds between events; before the first visible one (and after it) longer, so the clock tells them apart
GAP, BEFORE_KEY, AFTER_KEY = 0.004, 0.04, 0.09
#: how late the proxy may stamp an event it has been sent (its event loop under load); below AFTER_KEY
LATE_MS = 60.0
#: bytes per write when the body is cut anywhere (odd: mid-line, mid-character)
CUT = 211
#: the framing headers the replay writes itself
FRAMING = {"transfer-encoding", "content-length", "connection"}


@dataclass
class Capture:
    name: str
    target: str  # the request's path and query
    request: bytes  # its body
    status: int
    headers: list[tuple[str, str]]  # the response's, framing headers left out
    parts: list[bytes]  # the body as the engine wrote it: a stream's lines or events, else the whole body
    kind: str  # ndjson | sse | body

    @property
    def body(self) -> bytes:
        return b"".join(self.parts)

    def header(self, name: str) -> str | None:
        return next((v for k, v in self.headers if k.lower() == name), None)


# -- unpacking the containers ---------------------------------------------------------------


def _kind(headers: list[tuple[str, str]]) -> str:
    ct = next((v for k, v in headers if k.lower() == "content-type"), "").lower()
    return "ndjson" if "ndjson" in ct else "sse" if "event-stream" in ct else "body"


def _split(body: bytes, kind: str) -> list[bytes]:
    """A stream in the units its engine flushes: NDJSON lines, SSE events (each with its blank line)."""
    if kind == "ndjson":
        return [ln for ln in body.splitlines(keepends=True) if ln.strip()] or [body]
    if kind == "sse":
        parts = [p + b"\n\n" for p in body.replace(b"\r\n", b"\n").split(b"\n\n") if p.strip()]
        return parts if b"".join(parts) == body else [body]  # (kept whole when the split would change a byte)
    return [body]


def _capture(name: str, url: str, request: bytes, status: int, headers: list[tuple[str, str]], body: bytes) -> Capture:
    u = urlsplit(url)
    headers = [(k, v) for k, v in headers if k.lower() not in FRAMING]
    kind = _kind(headers)
    return Capture(name, u.path + (f"?{u.query}" if u.query else ""), request, status, headers, _split(body, kind), kind)


def _http_message(raw: bytes) -> tuple[str, list[tuple[str, str]], bytes]:
    head, _, body = raw.partition(b"\r\n\r\n")
    first, *lines = head.decode("latin-1").split("\r\n")
    headers = [(k.strip(), v.strip()) for k, _, v in (ln.partition(":") for ln in lines)]
    if any(k.lower() == "transfer-encoding" and "chunked" in v.lower() for k, v in headers):
        out = bytearray()
        while True:
            size, _, body = body.partition(b"\r\n")
            n = int(size.split(b";")[0], 16)
            if not n:
                break
            out += body[:n]
            body = body[n + 2:]
        body = bytes(out)
    return first, headers, body


def httprr(path: Path) -> list[Capture]:
    """httprr: ``httprr trace v1``, then per interaction ``<request bytes> <response bytes>`` and the raw HTTP."""
    data = path.read_bytes()
    assert data.startswith(b"httprr trace v1\n")
    pos, out = len(b"httprr trace v1\n"), []
    while pos < len(data):
        eol = data.index(b"\n", pos)
        n_req, n_resp = map(int, data[pos:eol].split())
        req, resp = data[eol + 1:eol + 1 + n_req], data[eol + 1 + n_req:eol + 1 + n_req + n_resp]
        pos = eol + 1 + n_req + n_resp
        line, _, body = _http_message(req)
        status_line, headers, rbody = _http_message(resp)
        out.append(_capture(path.name, line.split()[1], body, int(status_line.split()[1]), headers, rbody))
    return out


def vcr(path: Path) -> list[Capture]:
    """A vcrpy cassette's model calls (its POSTs); pydantic-ai's ``parsed_body`` is serialised again."""
    out = []
    for it in yaml.safe_load(path.read_text(encoding="utf-8"))["interactions"]:
        rq, rs = it["request"], it["response"]
        if rq["method"] != "POST":
            continue
        req = rq.get("body") or json.dumps(rq.get("parsed_body") or {})
        body = rs["body"]["string"] if "body" in rs else json.dumps(rs["parsed_body"], separators=(",", ":"))
        headers = [(k, v) for k, vs in rs["headers"].items() for v in vs]
        out.append(_capture(path.name, rq["uri"], req.encode(), rs["status"]["code"], headers, body.encode()))
    return out


def _sse(chunks: list[dict]) -> list[bytes]:
    return [b"data: " + json.dumps(c, separators=(",", ":")).encode() + b"\n\n" for c in chunks] + [b"data: [DONE]\n\n"]


def llama_stack(path: Path) -> list[Capture]:
    """llama-stack's recording of a vLLM stream: openai-python chunks (``__data__``) sent again as SSE, ended as
    vLLM ends a stream (``data: [DONE]``). Their nulls stay: openai-python lists its unset fields as null, but the
    same dump keeps the nulls vLLM did send (``stop_reason: null``), and a null field is valid on the wire."""
    d = json.loads(path.read_text(encoding="utf-8"))
    chunks = [c["__data__"] for c in d["response"]["body"]]
    c = _capture(path.name, d["request"]["url"], json.dumps(d["request"]["body"]).encode(), 200,
                 [("content-type", "text/event-stream; charset=utf-8")], b"")
    c.parts, c.kind = _sse(chunks), "sse"
    return [c]


def tgi_snapshot(path: Path) -> list[Capture]:
    """TGI's own integration snapshot: the chunks huggingface_hub parsed, sent again as TGI 3 sends them."""
    chunks = json.loads(path.read_text(encoding="utf-8"))
    req = {"model": chunks[0]["model"], "messages": [{"role": "user", "content": "?"}], "stream": True}
    c = _capture(path.name, "http://tgi/v1/chat/completions", json.dumps(req).encode(), 200,
                 [("content-type", "text/event-stream")], b"")
    c.parts, c.kind = _sse(chunks), "sse"
    return [c]


def _json_values(text: str) -> list[Any]:
    dec, out, i = json.JSONDecoder(), [], 0
    while True:
        i = text.find("{", i)
        if i < 0:
            return out
        try:
            v, i = dec.raw_decode(text, i)
        except ValueError:
            i += 1
            continue
        out.append(v)


def bash_lib(path: Path) -> list[Capture]:
    """ollama-bash-lib's demo: the stream as jq printed it (one object per line again), its request from the
    demo's debug log."""
    text = path.read_text(encoding="utf-8")
    block = text.split("```json", 1)[1].split("```", 1)[0]
    lines = [json.dumps(o, separators=(",", ":")).encode() + b"\n" for o in _json_values(block)]
    req = re.search(r"json_payload: (\{.*\})", text).group(1)
    c = _capture(path.name, "http://localhost:11434/api/generate", req.encode(), 200,
                 [("content-type", "application/x-ndjson")], b"")
    c.parts, c.kind = lines, "ndjson"
    return [c]


def sglang_doc(path: Path) -> list[Capture]:
    """SGLang's ``/generate`` answer pasted in its docs, and the curl request printed beside it."""
    text = path.read_text(encoding="utf-8")
    req = re.search(r"-d '(\{.*?\})'", text).group(1)
    (answer,) = [v for v in _json_values(text) if isinstance(v, dict) and "meta_info" in v]
    return [_capture(path.name, "http://127.0.0.1:30000/generate", req.encode(), 200,
                     [("content-type", "application/json")], json.dumps(answer, separators=(",", ":")).encode())]


def _raw_string(text: str, name: str) -> str | None:
    """C#'s raw string literal ``const string NAME = \"\"\" ... \"\"\";``, its indentation (the closing quotes') removed."""
    m = re.search(rf'const string {name} = """\n(.*?)\n([ \t]*)""";', text, re.S)
    if m is None:
        return None
    pad = m.group(2)
    return "\n".join(ln[len(pad):] if ln.startswith(pad) else ln.lstrip() for ln in m.group(1).split("\n"))


def dotnet(path: Path) -> list[Capture]:
    """dotnet/extensions' Ollama tests: each test's ``Input`` (the request) and ``Output`` (Ollama's answer, as the
    test's handler serves it: a stream's lines, else the whole body) raw string literals."""
    out = []
    for test in re.split(r"\n\s*public async Task ", path.read_text(encoding="utf-8"))[1:]:
        req, resp = _raw_string(test, "Input"), _raw_string(test, "Output")
        if req is None or resp is None:
            continue
        stream = json.loads(req).get("stream", True) is not False
        ct = "application/x-ndjson" if stream else "application/json; charset=utf-8"
        c = _capture(f"{path.name}:{test.split('(', 1)[0]}", "http://localhost:11434/api/chat", req.encode(), 200,
                     [("content-type", ct)], (resp + "\n").encode() if stream else resp.encode())
        out.append(c)
    return out


LOADERS = {".httprr": httprr, ".yaml": vcr, ".cs": dotnet}


def load(path: Path) -> list[Capture]:
    if path.parent.name == "vllm":
        return llama_stack(path)
    if path.name.startswith("tgi-repo_snapshot"):
        return tgi_snapshot(path)
    if path.name.startswith("ollama-bash-lib"):
        return bash_lib(path)
    if path.parent.name == "sglang":
        return sglang_doc(path)
    return LOADERS[path.suffix](path)


def _files() -> list[Path]:
    if ENGINES is None or not ENGINES.is_dir():
        return []
    return sorted(p for p in ENGINES.glob("*/*") if p.suffix in (".httprr", ".yaml", ".json", ".md", ".cs")
                  and p.name != "SOURCES.md")


CAPTURES = [pytest.param(c, id=f"{p.parent.name}/{p.name[:60]}#{i}")
            for p in _files() for i, c in enumerate(load(p))] or [pytest.param(None, id="engine-captures-missing")]


# -- what the capture's bytes say ---------------------------------------------------------------


@dataclass
class Said:
    """What a capture says, parsed here from its bytes (by this test's own reading of each wire)."""
    api: str
    model: str | None = None
    text: str = ""  # visible output: content, tool names and their arguments
    reasoning: str = ""
    first_visible: int | None = None  # index of the part holding the first visible output
    first_any: int | None = None  # ... of any token, reasoning included
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    engine: dict[str, Any] | None = None  # engine_* column -> value
    error: str | None = None
    finish: str | None = None  # the last finish reason the answer gave


def _api(target: str) -> str:
    p = urlsplit(target).path.rstrip("/")
    for suffix, api in (("/api/chat", "ollama.chat"), ("/api/generate", "ollama.generate"),
                        ("/chat/completions", "openai.chat")):
        if p.endswith(suffix):
            return api
    return "other"


def _objects(c: Capture) -> list[tuple[int, Any]]:
    """(part index, JSON value) of each NDJSON line, SSE data, or the whole body."""
    out = []
    for i, part in enumerate(c.parts):
        text = part.decode("utf-8")
        if c.kind == "sse":
            for ln in text.splitlines():
                if ln.startswith("data:") and ln[5:].strip() != "[DONE]":
                    out.append((i, json.loads(ln[5:])))
        elif c.kind == "ndjson":
            out += [(i, json.loads(ln)) for ln in text.splitlines() if ln.strip()]
        else:
            try:
                out.append((i, json.loads(text)))
            except ValueError:
                pass
    return out


def said(c: Capture) -> Said:
    s = Said(_api(c.target))
    s.model = (json.loads(c.request or b"{}") or {}).get("model") if c.request.strip().startswith(b"{") else None

    def saw(i: int, visible: str = "", reasoning: str = "") -> None:
        if visible:
            s.text += visible
            s.first_visible = i if s.first_visible is None else s.first_visible
        if reasoning:
            s.reasoning += reasoning
        if visible or reasoning:
            s.first_any = i if s.first_any is None else s.first_any

    named: set = set()
    for i, o in _objects(c):
        if not isinstance(o, dict):
            continue
        if isinstance(o.get("error"), str):
            s.error = o["error"]
        if s.model is None and isinstance(o.get("model"), str) and o["model"]:
            s.model = o["model"]  # (the model asked for, else the first the answer names)
        if s.api.startswith("ollama."):
            m = o.get("message") or {}
            saw(i, m.get("content") or o.get("response") or "", m.get("thinking") or o.get("thinking") or "")
            for tc in m.get("tool_calls") or []:
                f = tc["function"]
                saw(i, f["name"] + json.dumps(f["arguments"], separators=(",", ":")))
            if isinstance(o.get("done_reason"), str) and o["done_reason"]:
                s.finish = o["done_reason"]
            if o.get("done") is True:
                s.prompt_tokens, s.completion_tokens = o.get("prompt_eval_count"), o.get("eval_count")
                ms = {k: o[f] / 1e6 for k, f in (("engine_load_ms", "load_duration"),
                                                 ("engine_prefill_ms", "prompt_eval_duration"),
                                                 ("engine_decode_ms", "eval_duration")) if f in o}
                s.engine = {"engine": "ollama", **ms, "engine_prompt_tokens": o.get("prompt_eval_count"),
                            "engine_decode_tokens": o.get("eval_count")}
        elif s.api == "openai.chat":
            for ch in o.get("choices") or []:
                d = ch.get("delta") or ch.get("message") or {}
                s.finish = ch.get("finish_reason") or s.finish
                saw(i, d.get("content") or "", d.get("reasoning_content") or d.get("reasoning") or "")
                for j, tc in enumerate(d.get("tool_calls") or []):
                    f, key = tc.get("function") or {}, (ch.get("index", 0), tc.get("index", j))
                    if f.get("name") and key not in named:  # a name is output the first time it is seen
                        named.add(key)
                        saw(i, f["name"])
                    saw(i, f.get("arguments") or "")
            u = o.get("usage")
            if isinstance(u, dict):
                s.prompt_tokens, s.completion_tokens = u.get("prompt_tokens"), u.get("completion_tokens")
            if any("stop_reason" in ch or "token_ids" in ch for ch in o.get("choices") or []):
                s.engine = {"engine": "vllm"}
            if o.get("system_fingerprint") == "fp_ollama":  # Ollama's /v1: no durations, its usage its own count
                s.engine = {"engine": "ollama"}
        elif isinstance(o.get("token"), dict):  # TGI's native /generate_stream: one token per event
            saw(i, "" if o["token"].get("special") else o["token"].get("text") or "")
            if isinstance(o.get("details"), dict):
                s.completion_tokens = o["details"].get("generated_tokens")
                s.finish = o["details"].get("finish_reason") or s.finish
        elif isinstance(o.get("meta_info"), dict):  # SGLang's native /generate
            mi = o["meta_info"]
            s.engine = {"engine": "sglang", "engine_prompt_tokens": mi["prompt_tokens"],
                        "engine_cached_tokens": mi["cached_tokens"], "engine_decode_tokens": mi["completion_tokens"]}
    if s.engine and (s.engine["engine"] == "vllm" or s.api == "openai.chat") and s.prompt_tokens is not None:
        s.engine.update(engine_prompt_tokens=s.prompt_tokens, engine_decode_tokens=s.completion_tokens)
    if c.header("x-queue-time") is not None:  # TGI's report, on a whole answer
        s.engine = {"engine": "tgi", "engine_queue_ms": float(c.header("x-queue-time")),
                    "engine_prompt_tokens": int(c.header("x-prompt-tokens")),
                    "engine_decode_tokens": int(c.header("x-generated-tokens"))}
    if c.status >= 400 and s.error is None and c.kind == "body" and not c.body.startswith(b"{"):
        s.error = c.body.decode("utf-8")
    return s


# -- serving ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    db = tmp_path_factory.mktemp("engine-streams") / "ft.db"
    with ReplayUpstream() as up, ProxyServer([up.url], str(db), port=0) as p, httpx.Client(timeout=30) as client:
        yield up, p, db, client


def _new_row(proxy: ProxyServer, db: Path, seen: set) -> dict[str, Any]:
    import sqlite3
    for _ in range(100):
        proxy.flush()
        conn = sqlite3.connect(str(db))
        conn.row_factory = sqlite3.Row
        try:
            rs = [dict(r) for r in conn.execute("SELECT * FROM requests WHERE state = 'done'")]
        finally:
            conn.close()
        new = [r for r in rs if r["id"] not in seen]
        if new:
            assert len(new) == 1, f"expected one record, got {len(new)}"
            seen.add(new[0]["id"])
            return new[0]
        time.sleep(0.05)
    raise AssertionError("no record")


SEEN: set = set()


def exchange(bench, c: Capture, replay: Replay) -> tuple[dict[str, Any], float]:
    up, proxy, db, client = bench
    up.arm(replay)
    got = bytearray()
    sent_at = time.perf_counter()
    with client.stream("POST", proxy.url + c.target, content=c.request,
                       headers={"content-type": "application/json"}) as r:
        for part in r.iter_raw():
            got += part
    assert replay.done.wait(10), "the upstream never finished its answer"
    assert replay.request is not None and replay.request[1] == c.target and replay.request[3] == c.request
    assert r.status_code == c.status
    assert bytes(got) == c.body == bytes(replay.body), "the client did not receive the engine's bytes unchanged"
    return _new_row(proxy, db, SEEN), sent_at


def paced(c: Capture, s: Said) -> Replay:
    if c.kind == "body":
        return Replay(c.status, c.headers, c.parts, [BEFORE_KEY], framing="length")
    keys = {i for i in (s.first_visible, s.first_any) if i is not None}
    gaps = [max(GAP, BEFORE_KEY if i == 0 or i in keys else 0, AFTER_KEY if i - 1 in keys else 0)
            for i in range(len(c.parts))]
    return Replay(c.status, c.headers, c.parts, gaps, framing="chunked")


def check(row: dict[str, Any], c: Capture, s: Said) -> None:
    ctx = {k: row[k] for k in ("api", "model", "status", "output_chars", "reasoning_chars", "usage_prompt_tokens", "malformed_sample",
                               "usage_completion_tokens", "engine", "engine_sources", "upstream_error", "findings")}
    assert row["status"] == c.status and row["response_bytes"] == len(c.body), ctx
    assert row["api"] == s.api and row["model"] == s.model, ctx
    if s.api != "other" or c.kind != "body":
        assert row["output_chars"] == len(s.text), ctx
        assert row["reasoning_chars"] == len(s.reasoning), ctx
        if c.status < 400:
            assert s.text or s.reasoning, "a capture with nothing in it proves nothing"
    if s.api != "other" or c.kind != "body":
        assert row["finish_reason"] == s.finish, (row["finish_reason"], ctx)
    if s.prompt_tokens is not None:
        assert row["usage_prompt_tokens"] == s.prompt_tokens, ctx
    if s.completion_tokens is not None:
        assert row["usage_completion_tokens"] == s.completion_tokens, ctx
    if s.engine is None:
        assert row["engine"] is None, ctx
    else:
        for col in ("engine", "engine_queue_ms", "engine_load_ms", "engine_prefill_ms", "engine_decode_ms",
                    "engine_prompt_tokens", "engine_cached_tokens", "engine_decode_tokens"):
            if col not in s.engine:  # not in the capture: nothing, or the proxy's inference, labelled so
                sources = json.loads(row["engine_sources"] or "{}")
                assert row[col] is None or sources.get(col[7:], "").startswith("inferred: "), (col, ctx)
                continue
            want = s.engine[col]
            assert row[col] == (pytest.approx(want, abs=0.001) if isinstance(want, float) else want), (col, ctx)
    findings = json.loads(row["findings"] or "[]")
    errors = [f["code"] for f in findings if f["severity"] == "error"]
    codes = {f["code"] for f in findings}
    if c.kind != "body" and s.api != "other":  # the stream's end as its wire says it: [DONE], or Ollama's done: true
        ended = c.parts[-1].strip() == b"data: [DONE]" if c.kind == "sse" else any(
            isinstance(o, dict) and o.get("done") is True for _, o in _objects(c))
        assert bool(row["stream_done"]) == ended, ctx
        assert ("stream.truncated" in codes) == (not ended), ctx
    if (s.engine or {}).get("engine_load_ms", 0) >= COLD_LOAD_MS:  # the engine says it loaded the model first
        assert "engine.cold_load" in codes and "keep_alive" in json.dumps(findings), ctx
    if s.error is not None:  # a JSON error's text is upstream_error; a plain-text one's the sample; a finding quotes it
        got = row["upstream_error"] if c.body.startswith(b"{") else row["malformed_sample"]
        assert got and s.error.startswith(got[:80]), json.dumps(ctx)
        assert errors and any(s.error[:40] in f["message"] for f in findings if f["severity"] == "error"), ctx
    elif c.status < 400:
        assert not errors, ctx


def _near(ms: float, lo: float, hi: float, sent: float, what: str) -> None:
    """A stamp ``ms`` after the proxy's t0 (which lies between ``lo`` and ``hi``) is the moment ``sent``."""
    assert hi + ms / 1000 >= sent, f"{what} is before its event was sent"
    assert lo + ms / 1000 <= sent + LATE_MS / 1000, f"{what} is {lo * 1000 + ms - sent * 1000:.1f} ms after its event"


def _missing() -> None:
    msg = ("the engine captures are missing: expected them in ../shared/real-streams/engines beside the clone "
           "(or set FIRSTTOKEN_REAL_STREAMS)")
    if os.environ.get("CI"):
        pytest.fail(msg)
    pytest.skip(msg)


@pytest.mark.parametrize("c", CAPTURES)
def test_engine_capture_paced_through_the_proxy(bench, c: Capture | None) -> None:
    if c is None:
        _missing()
    s = said(c)
    replay = paced(c, s)
    row, client_sent = exchange(bench, c, replay)
    check(row, c, s)
    if c.kind != "body":
        lo, hi = client_sent, replay.received_at
        if s.first_visible is not None:
            _near(row["ttft_ms"], lo, hi, replay.sent_at[s.first_visible], "TTFT")
        if s.first_any is not None:
            _near(row["first_token_ms"], lo, hi, replay.sent_at[s.first_any], "first_token_ms")


@pytest.mark.parametrize("c", CAPTURES)
def test_engine_capture_cut_anywhere_through_the_proxy(bench, c: Capture | None) -> None:
    if c is None:
        _missing()
    raw = c.body
    parts = [raw[i:i + CUT] for i in range(0, len(raw), CUT)] or [b""]
    replay = Replay(c.status, c.headers, parts, [0.001] * len(parts), framing="close" if c.kind != "body" else "chunked")
    row, _ = exchange(bench, c, replay)
    check(row, c, said(c))


SGLANG = [pytest.param(c, id=c.name) for p in CAPTURES if (c := p.values[0]) is not None and c.name.startswith("sglang")]


@pytest.mark.parametrize("incremental", [False, True], ids=["cumulative", "incremental"])
@pytest.mark.parametrize("c", SGLANG or [pytest.param(None, id="engine-captures-missing")])
def test_sglang_native_stream_built_from_its_recorded_answer(bench, c: Capture | None, incremental: bool) -> None:
    """No stream of SGLang's own /generate was recorded: its recorded answer is streamed here as SGLang's server
    streams it (``data: {text, output_ids, meta_info}`` per step, ``data: [DONE]``; ``text`` the whole output so far,
    or with ``--incremental-streaming-output`` only the new part). It was an unknown API's stream read as chat
    chunks: response.no_choices, an error, on a healthy stream, and no TTFT."""
    if c is None:
        _missing()
    answer = json.loads(c.body)
    text, ids, meta = answer["text"], answer["output_ids"], answer["meta_info"]
    pieces = re.findall(r"\s*\S+\s*", text)
    assert "".join(pieces) == text and len(pieces) > 1
    events, so_far = [], ""
    for i, piece in enumerate(pieces):
        so_far += piece
        last = i == len(pieces) - 1
        n = len(ids) if last else min(len(ids), i + 1)
        step = {"text": piece if incremental else so_far, "output_ids": ids[:n],
                "meta_info": {**meta, "finish_reason": meta["finish_reason"] if last else None, "completion_tokens": n}}
        events.append(b"data: " + json.dumps(step).encode() + b"\n\n")
    events.append(b"data: [DONE]\n\n")
    s = Capture(c.name, c.target, json.dumps({**json.loads(c.request), "stream": True}).encode(), 200,
                [("content-type", "text/event-stream; charset=utf-8")], events, "sse")
    gaps = [BEFORE_KEY, AFTER_KEY] + [GAP] * (len(events) - 2)
    replay = Replay(200, s.headers, events, gaps, framing="chunked")
    row, client_sent = exchange(bench, s, replay)
    findings = json.loads(row["findings"] or "[]")
    assert not [f for f in findings if f["severity"] == "error"], findings
    assert row["api"] == "other" and row["output_chars"] == len(text) and row["stream_done"] == 1
    assert row["finish_reason"] == meta["finish_reason"]["type"]
    assert (row["usage_prompt_tokens"], row["usage_completion_tokens"]) == (meta["prompt_tokens"], len(ids))
    assert row["engine"] == "sglang" and row["engine_prompt_tokens"] == meta["prompt_tokens"]
    assert row["engine_cached_tokens"] == meta["cached_tokens"] and row["engine_decode_tokens"] == len(ids)
    _near(row["ttft_ms"], client_sent, replay.received_at, replay.sent_at[0], "TTFT")
