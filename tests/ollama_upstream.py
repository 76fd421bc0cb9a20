"""A loopback Ollama for tests, written from Ollama's own API reference (docs/api.md in ollama/ollama) and its
server (server/routes.go), and checked against the real captured Ollama streams in ../shared/real-streams/engines.

Native ``/api/chat`` and ``/api/generate``: ``stream`` defaults to true; a stream is ``application/x-ndjson``, one
object per line each ending in ``\\n``, the last ``done: true`` with ``done_reason`` and the engine's report in
nanoseconds (``total_duration``, ``load_duration``, ``prompt_eval_count``, ``prompt_eval_duration``, ``eval_count``,
``eval_duration``); ``stream: false`` is that object whole, ``application/json; charset=utf-8``. An unknown model is
404 ``{"error":"model \\"x\\" not found, try pulling it first"}`` (routes.go's text); the model ``MIDSTREAM_ERROR``
writes an ``{"error": …}`` line after two objects, as Ollama does when the runner fails mid-generation. Also
``/api/tags``, ``/api/ps``, ``/api/show`` and the OpenAI-compatible ``/v1/chat/completions`` and
Anthropic-compatible ``/v1/messages`` (SSE, usage only: Ollama puts no durations there).

What real Ollama does silently, on purpose: a prompt longer than the context (``options.num_ctx``, else the
server's ``ctx``) is cut to it with a 200 OK and a small ``prompt_eval_count``; a model not loaded (the first
request, or after its ``keep_alive`` expired) is loaded first: ``load_s`` before the response headers, reported as
``load_duration``. ``log`` keeps each request: (path, body, received_at, headers_at, sent_at[...]) in
``time.perf_counter()``, each line's time taken just before it is written, and ``wire``, the body's bytes.
"""

from __future__ import annotations

import json
import re
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from rawserver import LoopbackServer

NDJSON = "application/x-ndjson"
JSON = "application/json; charset=utf-8"
MIDSTREAM_ERROR = "broken:1b"
MIDSTREAM_TEXT = "an error was encountered while running the model: unexpected EOF"
REPLY = ["Paris", " is", " the", " capital", " of", " France", "."]
THOUGHT = ["The", " user", " asks", " about", " France", "."]
NS = 1_000_000_000
#: a model's details in /api/tags and /api/ps (docs/api.md's example's fields)
DETAILS = {"parent_model": "", "format": "gguf", "family": "llama", "families": ["llama"], "parameter_size": "3.2B",
           "quantization_level": "Q4_K_M"}
_WORD = re.compile(r"\w+|[^\w\s]")


def count_tokens(text: str) -> int:
    """This server's own tokenizer: a word or a punctuation mark is one token (close to tiktoken on prose)."""
    return len(_WORD.findall(text))


def not_found(model: str) -> dict:
    return {"error": f'model "{model}" not found, try pulling it first'}


@dataclass
class Exchange:
    path: str
    body: Any
    received_at: float
    headers_at: float | None = None
    sent_at: list[float] = field(default_factory=list)
    wire: bytearray = field(default_factory=bytearray)  # the body as written (chunk framing removed)
    done: threading.Event = field(default_factory=threading.Event)


class OllamaUpstream(LoopbackServer):
    """``models``: the names it has pulled; ``ctx``: the context when a request sets no ``num_ctx``; ``load_s``: the
    cold load; ``keep_alive_s``: how long a model stays loaded after a request (a request's own ``keep_alive``
    in seconds overrides it; 0 unloads at once); ``gap_s``: between streamed objects; ``token_share``: what its
    tokenizer counts of a word-per-token one (a model whose tokenizer merges more counts fewer)."""

    def __init__(self, models: tuple[str, ...] = ("llama3.2", MIDSTREAM_ERROR), ctx: int = 2048,
                 load_s: float = 0.0, keep_alive_s: float = 300.0, gap_s: float = 0.03, prefill_s: float = 0.05,
                 token_share: float = 1.0, port: int = 0):
        self.models, self.ctx, self.load_s, self.keep_alive_s = set(models), ctx, load_s, keep_alive_s
        self.token_share = token_share
        self.gap_s, self.prefill_s = gap_s, prefill_s
        self.loaded: dict[str, float] = {}  # model -> when it unloads (perf_counter)
        self.log: list[Exchange] = []
        self.lock = threading.Lock()
        outer = self

        class H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def setup(self):
                super().setup()  # Go's net/http sets TCP_NODELAY: a line is not held for the ACK of the headers
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def do_GET(self):
                outer._route(self)

            do_POST = do_HEAD = do_GET

        self.serve(H, port)

    # -- the engine's state ----------------------------------------------------------
    def _load(self, model: str, keep_alive: Any) -> float:
        """Seconds spent loading ``model`` now (0 when it was loaded); it stays loaded ``keep_alive``."""
        now = time.perf_counter()
        with self.lock:
            cold = self.loaded.get(model, 0.0) <= now
        load = self.load_s if cold else 0.0
        if load:
            time.sleep(load)
        keep = self.keep_alive_s if not isinstance(keep_alive, (int, float)) else float(keep_alive)
        with self.lock:
            self.loaded[model] = time.perf_counter() + keep
        return load

    def expire(self) -> None:
        """Every model's keep_alive runs out now (the next request loads it again)."""
        with self.lock:
            self.loaded.clear()

    # -- HTTP --------------------------------------------------------------------------
    def _route(self, h: BaseHTTPRequestHandler) -> None:
        n = int(h.headers.get("content-length") or 0)
        raw = h.rfile.read(n) if n else b""
        try:
            body = json.loads(raw) if raw else {}
        except ValueError:
            body = None
        path = h.path.split("?", 1)[0].rstrip("/")
        ex = Exchange(path, body, time.perf_counter())
        with self.lock:
            self.log.append(ex)
        try:
            self._answer(h, path, body if isinstance(body, dict) else None, ex)
        finally:
            ex.done.set()

    def _answer(self, h: BaseHTTPRequestHandler, path: str, body: dict | None, ex: Exchange) -> None:
        if path == "/api/tags":  # docs/api.md "List Local Models"
            return _json(h, 200, {"models": [{"name": m, "model": m, "modified_at": "2025-01-01T00:00:00Z",
                                              "size": 1 << 30, "digest": "0" * 64, "details": DETAILS}
                                             for m in sorted(self.models)]}, ex)
        if path == "/api/ps":  # "List Running Models": what is loaded, until when, its context
            now, wall = time.perf_counter(), time.time()
            return _json(h, 200, {"models": [
                {"name": m, "model": m, "size": 1 << 30, "digest": "0" * 64, "details": DETAILS,
                 "expires_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(wall + until - now)),
                 "size_vram": 1 << 30, "context_length": self.ctx}
                for m, until in sorted(self.loaded.items()) if until > now]}, ex)
        if body is None:
            return _json(h, 400, {"error": "invalid character 'x' looking for beginning of value"}, ex)
        if path == "/api/show":
            m = body.get("model") or body.get("name") or ""
            if m not in self.models:
                return _json(h, 404, {"error": f"model '{m}' not found"}, ex)
            return _json(h, 200, {"details": {"family": "llama"}, "model_info": {"llama.context_length": 131072}}, ex)
        model = body.get("model") or ""
        if path in ("/api/chat", "/api/generate", "/v1/chat/completions", "/v1/messages") and model not in self.models:
            if path == "/v1/messages":
                return _json(h, 404, {"type": "error", "error": {"type": "not_found_error",
                                                                 "message": not_found(model)["error"]}}, ex)
            if path == "/v1/chat/completions":
                return _json(h, 404, {"error": {"message": not_found(model)["error"], "type": "api_error",
                                                "param": None, "code": None}}, ex)
            return _json(h, 404, not_found(model), ex)
        if path in ("/api/chat", "/api/generate"):
            return self._native(h, path, body, ex)
        if path == "/v1/chat/completions":
            return self._openai(h, body, ex)
        if path == "/v1/messages":
            return self._anthropic(h, body, ex)
        _json(h, 404, {"error": "404 page not found"}, ex, text=True)

    def _prompt(self, path: str, body: dict) -> tuple[int, int]:
        """(tokens sent, tokens the engine evaluated): the prompt is cut silently to the context, as Ollama's
        server/prompt.go chatPrompt does: whole turns dropped from the front, every system message and the last
        turn kept; what still does not fit is cut by the runner to the context (llm/llama_server.go: the first
        num_keep tokens and the tail)."""
        opts = body.get("options") if isinstance(body.get("options"), dict) else {}
        ctx = opts.get("num_ctx") if isinstance(opts.get("num_ctx"), int) and opts["num_ctx"] > 0 else self.ctx
        if path.endswith("/generate"):
            sent = self._count(f"{body.get('system') or ''} {body.get('prompt') or ''}") + 4
            return sent, min(sent, ctx)
        msgs = [m for m in body.get("messages") or [] if isinstance(m, dict)]
        sysp = body.get("system") if path == "/v1/messages" else None
        if isinstance(sysp, str):
            msgs = [{"role": "system", "content": sysp}, *msgs]

        def cost(ms: list[dict]) -> int:
            return sum(self._count(_content(m)) for m in ms) + 4

        kept = msgs
        for i in range(len(msgs)):
            kept = [m for m in msgs[:i] if m.get("role") == "system"] + msgs[i:]
            if cost(kept) <= ctx or i == len(msgs) - 1:
                break
        return cost(msgs), min(cost(kept), ctx)

    def _count(self, text: str) -> int:
        return round(count_tokens(text) * self.token_share)

    def _native(self, h: BaseHTTPRequestHandler, path: str, body: dict, ex: Exchange) -> None:
        chat = path == "/api/chat"
        model = body["model"]
        t0 = time.perf_counter()
        load = self._load(model, body.get("keep_alive"))
        sent, evaluated = self._prompt(path, body)
        time.sleep(self.prefill_s)
        think = body.get("think") is True
        tools = bool(body.get("tools")) and chat
        objs: list[dict] = []

        def obj(text: str = "", thinking: str = "", calls: list | None = None) -> dict:
            o: dict = {"model": model, "created_at": "2025-08-20T13:48:24.316155Z"}
            if chat:
                m: dict = {"role": "assistant", "content": text}
                if thinking:
                    m["thinking"] = thinking
                if calls:
                    m["tool_calls"] = calls
                o["message"] = m
            else:
                o["response"] = text
                if thinking:
                    o["thinking"] = thinking
            o["done"] = False
            return o

        if think:
            objs += [obj(thinking=t) for t in THOUGHT]
        if tools:
            objs.append(obj(calls=[{"function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]))
        else:
            objs += [obj(t) for t in REPLY]
        decode = len(objs)
        if body.get("stream", True) is False:
            final = obj("".join(REPLY) if not tools else "", "".join(THOUGHT) if think else "",
                        objs[-1]["message"].get("tool_calls") if tools else None)
            time.sleep(self.gap_s * decode)
            final.update(self._report(t0, load, evaluated, decode))
            return _json(h, 200, final, ex)
        h.send_response(200)
        h.send_header("Content-Type", NDJSON)
        h.send_header("Date", "Wed, 20 Aug 2025 13:48:24 GMT")
        h.send_header("Transfer-Encoding", "chunked")
        h.end_headers()
        h.wfile.flush()
        ex.headers_at = time.perf_counter()
        for i, o in enumerate(objs):
            if i and self.gap_s:
                time.sleep(self.gap_s)
            if model == MIDSTREAM_ERROR and i == 2:
                _chunk(h, {"error": MIDSTREAM_TEXT}, ex)
                break
            _chunk(h, o, ex)
        else:
            time.sleep(self.gap_s)
            last = obj()
            last.update(self._report(t0, load, evaluated, decode))
            _chunk(h, last, ex)
        h.wfile.write(b"0\r\n\r\n")
        h.wfile.flush()

    def _report(self, t0: float, load: float, evaluated: int, decode: int) -> dict:
        """The final object's fields, as Ollama's ``api.Metrics`` marshals them (nanoseconds)."""
        total = time.perf_counter() - t0
        return {"done": True, "done_reason": "stop", "total_duration": int(total * NS),
                "load_duration": int(load * NS), "prompt_eval_count": evaluated,
                "prompt_eval_duration": int(self.prefill_s * NS), "eval_count": decode,
                "eval_duration": int(max(0.0, total - load - self.prefill_s) * NS)}

    def _sse_head(self, h: BaseHTTPRequestHandler, ex: Exchange) -> None:
        h.send_response(200)
        h.send_header("Content-Type", "text/event-stream")
        h.send_header("Transfer-Encoding", "chunked")
        h.end_headers()
        h.wfile.flush()
        ex.headers_at = time.perf_counter()

    def _openai(self, h: BaseHTTPRequestHandler, body: dict, ex: Exchange) -> None:
        """Ollama's openai.ChatCompletion(Chunk): ids ``chatcmpl-N``, ``system_fingerprint: fp_ollama``, usage in
        the last chunk when ``stream_options.include_usage`` is set."""
        model = body["model"]
        self._load(model, None)
        _, evaluated = self._prompt("/v1/chat/completions", body)
        time.sleep(self.prefill_s)
        base = {"id": "chatcmpl-405", "created": 1755697704, "model": model, "system_fingerprint": "fp_ollama"}
        usage = {"prompt_tokens": evaluated, "completion_tokens": len(REPLY), "total_tokens": evaluated + len(REPLY)}
        if not body.get("stream"):
            return _json(h, 200, {**base, "object": "chat.completion", "usage": usage, "choices": [
                {"index": 0, "message": {"role": "assistant", "content": "".join(REPLY)}, "finish_reason": "stop"}]}, ex)
        self._sse_head(h, ex)
        for i, t in enumerate(REPLY):
            if i:
                time.sleep(self.gap_s)
            _sse(h, {**base, "object": "chat.completion.chunk", "choices": [
                {"index": 0, "delta": {"role": "assistant", "content": t}, "finish_reason": None}]}, ex)
        _sse(h, {**base, "object": "chat.completion.chunk", "choices": [
            {"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": "stop"}]}, ex)
        if (body.get("stream_options") or {}).get("include_usage"):
            _sse(h, {**base, "object": "chat.completion.chunk", "choices": [], "usage": usage}, ex)
        _raw(h, b"data: [DONE]\n\n", ex)
        h.wfile.write(b"0\r\n\r\n")
        h.wfile.flush()

    def _anthropic(self, h: BaseHTTPRequestHandler, body: dict, ex: Exchange) -> None:
        """Ollama's Anthropic compatibility (``/v1/messages``): the Messages events, usage in message_delta."""
        model = body["model"]
        self._load(model, None)
        _, evaluated = self._prompt("/v1/messages", body)
        time.sleep(self.prefill_s)
        msg = {"id": "msg_ollama_1", "type": "message", "role": "assistant", "model": model, "content": [],
               "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": evaluated, "output_tokens": 0}}
        if not body.get("stream"):
            return _json(h, 200, {**msg, "content": [{"type": "text", "text": "".join(REPLY)}], "stop_reason": "end_turn",
                                  "usage": {"input_tokens": evaluated, "output_tokens": len(REPLY)}}, ex)
        self._sse_head(h, ex)
        _sse(h, {"type": "message_start", "message": msg}, ex, "message_start")
        _sse(h, {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}, ex,
             "content_block_start")
        for i, t in enumerate(REPLY):
            if i:
                time.sleep(self.gap_s)
            _sse(h, {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": t}}, ex,
                 "content_block_delta")
        _sse(h, {"type": "content_block_stop", "index": 0}, ex, "content_block_stop")
        _sse(h, {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                 "usage": {"input_tokens": evaluated, "output_tokens": len(REPLY)}}, ex, "message_delta")
        _sse(h, {"type": "message_stop"}, ex, "message_stop")
        h.wfile.write(b"0\r\n\r\n")
        h.wfile.flush()


def _content(m: Any) -> str:
    if not isinstance(m, dict):
        return ""
    c = m.get("content")
    if isinstance(c, str):
        return c
    if isinstance(c, list):
        return " ".join(p.get("text", "") for p in c if isinstance(p, dict))
    return ""


def _json(h: BaseHTTPRequestHandler, status: int, obj: dict, ex: Exchange, text: bool = False) -> None:
    data = json.dumps(obj, separators=(",", ":")).encode() if not text else obj["error"].encode()
    h.send_response(status)
    h.send_header("Content-Type", JSON if not text else "text/plain")
    h.send_header("Content-Length", str(len(data)))
    h.end_headers()
    ex.headers_at = time.perf_counter()
    ex.sent_at.append(ex.headers_at)
    ex.wire += data
    h.wfile.write(data)
    h.wfile.flush()


def _raw(h: BaseHTTPRequestHandler, data: bytes, ex: Exchange) -> None:
    ex.sent_at.append(time.perf_counter())
    ex.wire += data
    h.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
    h.wfile.flush()


def _chunk(h: BaseHTTPRequestHandler, obj: dict, ex: Exchange) -> None:
    """One object, one line, one HTTP chunk (Go's json.Encoder + Flush per object)."""
    _raw(h, json.dumps(obj, separators=(",", ":")).encode() + b"\n", ex)


def _sse(h: BaseHTTPRequestHandler, obj: dict, ex: Exchange, event: str | None = None) -> None:
    head = f"event: {event}\n".encode() if event else b""
    _raw(h, head + b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n", ex)
