"""Answering one parsed API request on schedule: error faults, streamed answers, full bodies."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from firsttoken.cli.simulate import anthropic_shapes, openai_shapes, responses_shapes
from firsttoken.cli.simulate.cache import PromptCache
from firsttoken.cli.simulate.config import ERROR_FAULTS, SimConfig
from firsttoken.cli.simulate.context import Gen
from firsttoken.cli.simulate.faults import ErrorReply, error_fault
from firsttoken.cli.simulate.timing import KEEPALIVE_INTERVAL_S, Schedule, sleep_until
from firsttoken.cli.simulate.tokens import count_prompt_tokens
from firsttoken.cli.simulate.wire import FINAL, TOKEN, BodyWriter, Ev, truncate_data_line


class Upstream(Protocol):
    """What answering needs of the simulator: its settings, its prompt cache and its stop signal."""

    config: SimConfig
    prompt_cache: PromptCache
    stop_event: threading.Event


class SimHandler(Protocol):
    """What answering needs of the connection it answers on (the server's handler is one)."""

    note: str

    @property
    def sim(self) -> Upstream: ...
    def given_api_key(self, proto: str) -> str | None: ...
    def send_error_reply(self, reply: ErrorReply, proto: str) -> None: ...
    def send_json(self, status: int, body: Any, headers: dict[str, str] | None = None, *, gzip: bool = False,
                  indent: int | None = None, drop: bool = False, due: float | None = None) -> None: ...
    def start_stream(self, status: int, headers: dict[str, str], *, gzip: bool, buffered: bool) -> BodyWriter: ...
    def drop(self) -> None: ...

# api -> (stream events, full body, in-stream error event)
SHAPES: dict[str, tuple[Callable[[Gen], list[Ev]], Callable[[Gen], dict[str, Any]], Callable[..., bytes]]] = {
    "chat": (openai_shapes.chat_stream, openai_shapes.chat_body, openai_shapes.stream_error),
    "completions": (openai_shapes.completions_stream, openai_shapes.completions_body, openai_shapes.stream_error),
    "responses": (responses_shapes.responses_stream, responses_shapes.responses_body, responses_shapes.stream_error),
    "anthropic": (anthropic_shapes.messages_stream, anthropic_shapes.messages_body, anthropic_shapes.stream_error),
}

ERROR_LINE = b'error: {"message": "upstream timeout"}\n\n'
KEEPALIVE = b": keep-alive\n\n"
CUT_FAULTS = ("drop", "mid_stream_error", "error_line")


def proto_of(api: str) -> str:
    return "anthropic" if api in ("anthropic", "count_tokens") else "openai"


def success_headers(gen: Gen, sched: Schedule, content_type: str) -> dict[str, str]:
    headers = {"Content-Type": content_type}
    if proto_of(gen.api) == "anthropic":
        headers["request-id"] = gen.request_id
        headers["anthropic-organization-id"] = "00000000-0000-4000-8000-00000000517e"
    else:
        headers["x-request-id"] = gen.request_id
        headers["openai-organization"] = "org-simulated"
        headers["openai-version"] = "2020-10-01"
        headers["openai-processing-ms"] = str(max(0, round((sched.headers_at - sched.arrival) * 1000)))
    return headers


def answer(h: SimHandler, api: str, body: dict[str, Any], faults: frozenset[str], sched: Schedule) -> None:
    sim = h.sim
    gen = Gen.build(api, body, faults, sim.config)
    h.note = f"model={gen.model} stream={gen.stream} faults={','.join(sorted(faults)) or '-'}"
    errors = [f for f in ERROR_FAULTS if f in faults]
    if errors:
        prompt = count_prompt_tokens(api, body) if errors[0] == "context_length" else 0
        reply = error_fault(
            errors[0], proto_of(api), api, gen.model, api_key=h.given_api_key(proto_of(api)),
            max_tokens_param=gen.max_tokens_param, max_tokens=gen.max_tokens, prompt_tokens=prompt,
        )  # fmt: skip
        if sleep_until(sched.headers_at, sim.stop_event):
            h.send_error_reply(reply, proto_of(api))
        return
    if gen.stream and "not_sse" not in faults:
        _stream(h, gen, sched)
    else:
        _full(h, gen, sched)


def _plan(h: SimHandler, gen: Gen, sched: Schedule) -> None:
    gen.set_prompt_tokens(count_prompt_tokens(gen.api, gen.body))
    if h.sim.config.prompt_cache and "cache_hit" not in gen.faults:
        gen.cached_tokens = h.sim.prompt_cache.cached_tokens(gen.api, gen.body, gen.prompt_tokens)
    sched.plan(gen.prompt_tokens - gen.cached_tokens, gen.n_output, stall="stall" in gen.faults)


def _full(h: SimHandler, gen: Gen, sched: Schedule) -> None:
    _plan(h, gen, sched)
    body = SHAPES[gen.api][1](gen)
    if not sleep_until(sched.end_at, h.sim.stop_event):
        return
    headers = success_headers(gen, sched, "application/json")
    indent = 2 if proto_of(gen.api) == "openai" else None
    h.send_json(200, body, headers, gzip="gzip" in gen.faults, indent=indent, drop="drop" in gen.faults, due=sched.end_at)
    h.note += f" prompt={gen.prompt_tokens} out={gen.n_output}"


def _wait(h: SimHandler, deadline: float | None, out: BodyWriter, idle: list[float] | None) -> bool:
    """Sleep until deadline. With the keepalive fault (idle = [time of the last write]), a comment goes out
    whenever nothing was written for 100 ms: during the prefill, and during a stall."""
    stop = h.sim.stop_event
    if idle is not None and deadline is not None:
        while idle[0] + KEEPALIVE_INTERVAL_S < deadline:
            if not sleep_until(idle[0] + KEEPALIVE_INTERVAL_S, stop):
                return False
            out.write(KEEPALIVE, idle[0] + KEEPALIVE_INTERVAL_S)
            idle[0] += KEEPALIVE_INTERVAL_S
    ok = sleep_until(deadline, stop)
    if idle is not None:
        idle[0] = max(idle[0], time.monotonic())
    return ok


def _stream(h: SimHandler, gen: Gen, sched: Schedule) -> None:
    faults = gen.faults
    if not sleep_until(sched.headers_at, h.sim.stop_event):
        return
    hold = "hold_headers" in faults  # like LiteLLM's proxy: no headers before the first token is ready
    if hold:
        _plan(h, gen, sched)
        if not sleep_until(sched.first_at, h.sim.stop_event):
            return
    gzip = "gzip" in faults
    headers = success_headers(gen, sched, "text/event-stream; charset=utf-8")
    headers["Cache-Control"] = "no-cache"
    out = h.start_stream(200, headers, gzip=gzip, buffered="buffered" in faults,
                         block=4096 if "buffer_4k" in faults else 0)
    if not hold:  # headers are out: only now do the expensive part (the prefill sleep absorbs it)
        _plan(h, gen, sched)
    stream_fn, _, error_fn = SHAPES[gen.api]
    evs = stream_fn(gen)
    if "truncated" in faults:
        evs = [ev for ev in evs if ev.kind != FINAL]
    cut_slot = max(1, gen.n_output // 2)
    cut = next((i for i, ev in enumerate(evs) if ev.kind == TOKEN and ev.slot is not None and ev.slot >= cut_slot), None)
    if cut is None:
        cut = max(0, len(evs) - 1)
    cut_fault = next((f for f in CUT_FAULTS if f in faults), None)
    idle = [sched.headers_at] if "keepalive" in faults else None
    for i, ev in enumerate(evs):
        due = sched.at(ev.slot)
        if not _wait(h, due, out, idle):
            return h.drop()
        data = ev.data
        if i == cut:
            if cut_fault == "drop":
                out.finish(terminate=False)
                h.note += " dropped"
                return h.drop()
            if cut_fault == "mid_stream_error":
                out.write(error_fn(gen, i))
                break
            if cut_fault == "error_line":
                out.write(ERROR_LINE)
                break
            if "malformed_stream" in faults and ev.kind == TOKEN:
                data = truncate_data_line(data)
        out.write(data, due)
    out.finish()
    h.note += f" prompt={gen.prompt_tokens} out={gen.n_output}"
