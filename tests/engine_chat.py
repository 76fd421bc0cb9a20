"""What the engine tests (tests/test_llama_server.py, tests/test_vllm.py) send a real model server and what
its client saw: prompts of a size in the engine's own tokens, distinct from their first word on; one chat
through the openai SDK, timed as the client saw it (``Seen``); the one row the proxy recorded for it."""

from __future__ import annotations

import random
import time

import openai
from conftest import rows

from firsttoken.cli.proxy.server import ProxyServer

WORDS = ("the", "slot", "block", "cache", "prompt", "token", "engine", "queue", "batch", "decode", "prefill",
         "server", "request", "stream", "chunk", "model", "layer", "weight", "value", "return", "import", "class",
         "self", "data", "time", "first", "last", "while", "yield", "async", "await", "error", "result")


def text(n_words: int, tag: str) -> str:
    """Distinct from its first word on: no slot (llama.cpp) or cached block (vLLM) of an earlier prompt can
    serve it."""
    rnd = random.Random(tag)
    return f"[{tag}] " + " ".join(rnd.choice(WORDS) for _ in range(n_words))


def sized(server, n_tokens: int, tag: str) -> str:
    """A prompt of about ``n_tokens`` (within 3 %) of the server's model's tokens, counted by the engine's own
    /tokenize (``server.count_tokens``)."""
    n_words = n_tokens
    for _ in range(4):
        t = text(n_words, tag)
        got = server.count_tokens(t)
        if abs(got - n_tokens) <= 0.03 * n_tokens:
            return t
        n_words = max(1, round(n_words * n_tokens / got))
    return t


class Seen:
    """What the client saw of one chat: when the headers and each chunk came (s after the call), the JSON."""

    def __init__(self):
        self.t_headers = self.t_first = None
        self.gaps: list[float] = []
        self.headers: dict = {}
        self.body: dict | None = None  # a whole (not streamed) answer
        self.last: dict | None = None  # the last chunk, or the body
        self.usage: dict | None = None  # the chunk's (or body's) usage
        self.final: dict | None = None  # the chunk (or body) that carried llama.cpp's `timings`
        self.error: openai.APIStatusError | None = None


def chat(client: openai.OpenAI, prompt: str, experiment: str, *, stream: bool, usage: bool = False,
         max_tokens: int = 6) -> Seen:
    """One chat completion, tagged ``experiment``; streamed with ``stream_options.include_usage`` when ``usage``."""
    seen = Seen()
    kw = dict(model="random", messages=[{"role": "user", "content": prompt}], max_tokens=max_tokens, temperature=0,
              extra_headers={"x-firsttoken-experiment": experiment})
    if stream and usage:
        kw["stream_options"] = {"include_usage": True}
    t0 = time.perf_counter()
    try:
        raw = client.chat.completions.with_raw_response.create(stream=stream, **kw)
    except openai.APIStatusError as e:
        seen.error = e
        return seen
    seen.t_headers = time.perf_counter() - t0
    seen.headers = dict(raw.headers)
    if not stream:
        seen.body = seen.last = seen.final = raw.parse().model_dump()
        seen.usage = seen.body.get("usage")
        return seen
    last = None
    for chunk in raw.parse():
        now = time.perf_counter() - t0
        d = chunk.model_dump()
        seen.last = d
        if d.get("usage"):
            seen.usage = d["usage"]
        if d.get("timings"):
            seen.final = d
        if any((c.get("delta") or {}).get("content") for c in d.get("choices") or []):
            if seen.t_first is None:
                seen.t_first = now
            else:
                seen.gaps.append(now - last)
            last = now
    return seen


def row(proxy: ProxyServer, db, experiment: str) -> dict:
    """The one finished row the proxy recorded tagged ``experiment``."""
    proxy.flush()
    rs = rows(db, "WHERE experiment = ? AND state = 'done'", (experiment,))
    assert len(rs) == 1, rs
    return rs[0]
