"""OpenAI Responses API: the typed SSE event sequence (with sequence_number) and the full response object."""

from __future__ import annotations

from typing import Any

from firsttoken.cli.simulate.context import Gen
from firsttoken.cli.simulate.openai_shapes import SERVER_ERROR_MESSAGE
from firsttoken.cli.simulate.wire import FINAL, HEAD, TAIL, TOKEN, Ev, sse


def _status(gen: Gen, done: bool) -> str:
    if not done:
        return "in_progress"
    return "incomplete" if gen.limited else "completed"


def response_obj(gen: Gen, *, done: bool, output: list[dict[str, Any]]) -> dict[str, Any]:
    body = gen.body
    tools = body.get("tools") if isinstance(body.get("tools"), list) else []
    status = _status(gen, done)
    return {
        "id": gen.id("resp"),
        "object": "response",
        "created_at": gen.created,
        "status": status,
        "background": False,
        "error": None,
        "incomplete_details": {"reason": "max_output_tokens"} if status == "incomplete" else None,
        "instructions": body.get("instructions"),
        "max_output_tokens": gen.max_tokens,
        "max_tool_calls": None,
        "model": gen.model,
        "output": output if not gen.no_choices else [],
        "parallel_tool_calls": True,
        "previous_response_id": body.get("previous_response_id"),
        "prompt_cache_key": None,
        "reasoning": {"effort": "medium" if gen.rwords else None, "summary": "auto" if gen.rwords else None},
        "safety_identifier": None,
        "service_tier": "default",
        "store": body.get("store", True),
        "temperature": body.get("temperature", 1.0),
        "text": {"format": {"type": "text"}, "verbosity": "medium"},
        "tool_choice": body.get("tool_choice", "auto"),
        "tools": tools,
        "top_logprobs": 0,
        "top_p": body.get("top_p", 1.0),
        "truncation": "disabled",
        "usage": gen.responses_usage() if done and gen.usage_on else None,
        "user": None,
        "metadata": body.get("metadata") or {},
    }


def _reasoning_item(gen: Gen, done: bool) -> dict[str, Any]:
    summary = [{"type": "summary_text", "text": gen.reasoning_text}] if done else []
    return {"id": gen.id("rs"), "type": "reasoning", "summary": summary}


def _text_part(text: str) -> dict[str, Any]:
    return {"type": "output_text", "annotations": [], "logprobs": [], "text": text}


def _message_item(gen: Gen, done: bool) -> dict[str, Any]:
    return {
        "id": gen.id("msg"),
        "type": "message",
        "status": "completed" if done else "in_progress",
        "content": [_text_part(gen.text)] if done else [],
        "role": "assistant",
    }


def _call_item(gen: Gen, done: bool) -> dict[str, Any]:
    return {
        "id": gen.id("fc"),
        "type": "function_call",
        "status": "completed" if done else "in_progress",
        "arguments": gen.text if done else "",
        "call_id": gen.id("call"),
        "name": gen.tool_name,
    }


def _final_output(gen: Gen) -> list[dict[str, Any]]:
    out = [_reasoning_item(gen, True)] if gen.rwords else []
    out.append(_call_item(gen, True) if gen.tool is not None else _message_item(gen, True))
    return out


class _Seq:
    def __init__(self) -> None:
        self.n = 0
        self.evs: list[Ev] = []

    def add(self, slot: int | None, kind: str, etype: str, **fields: Any) -> None:
        obj = {"type": etype, "sequence_number": self.n, **fields}
        self.n += 1
        self.evs.append(Ev(slot, sse(obj, etype), kind))


def responses_stream(gen: Gen) -> list[Ev]:
    s = _Seq()
    s.add(None, HEAD, "response.created", response=response_obj(gen, done=False, output=[]))
    s.add(None, HEAD, "response.in_progress", response=response_obj(gen, done=False, output=[]))
    r = gen.n_reasoning
    if gen.no_choices:
        last = max(0, gen.n_output - 1)
        final = "response.incomplete" if gen.limited else "response.completed"
        s.add(last, FINAL, final, response=response_obj(gen, done=True, output=[]))
        return s.evs
    oi = 0
    if gen.rwords:
        rid = gen.id("rs")
        s.add(0, HEAD, "response.output_item.added", output_index=oi, item=_reasoning_item(gen, False))
        part = {"type": "summary_text", "text": ""}
        s.add(0, HEAD, "response.reasoning_summary_part.added", item_id=rid, output_index=oi, summary_index=0, part=part)
        for k, w in enumerate(gen.rwords):
            s.add(k, TOKEN, "response.reasoning_summary_text.delta", item_id=rid, output_index=oi, summary_index=0, delta=w)
        text = gen.reasoning_text
        s.add(None, TAIL, "response.reasoning_summary_text.done", item_id=rid, output_index=oi, summary_index=0, text=text)
        part = {"type": "summary_text", "text": text}
        s.add(None, TAIL, "response.reasoning_summary_part.done", item_id=rid, output_index=oi, summary_index=0, part=part)
        s.add(None, TAIL, "response.output_item.done", output_index=oi, item=_reasoning_item(gen, True))
        oi += 1
    if gen.tool is not None:
        fid = gen.id("fc")
        s.add(r, HEAD, "response.output_item.added", output_index=oi, item=_call_item(gen, False))
        for i, frag in enumerate(gen.words):
            s.add(r + i, TOKEN, "response.function_call_arguments.delta", item_id=fid, output_index=oi, delta=frag)
        s.add(None, TAIL, "response.function_call_arguments.done", item_id=fid, output_index=oi, arguments=gen.text)
        s.add(None, TAIL, "response.output_item.done", output_index=oi, item=_call_item(gen, True))
    else:
        mid = gen.id("msg")
        s.add(r, HEAD, "response.output_item.added", output_index=oi, item=_message_item(gen, False))
        s.add(r, HEAD, "response.content_part.added", item_id=mid, output_index=oi, content_index=0, part=_text_part(""))
        for i, w in enumerate(gen.words):
            s.add(r + i, TOKEN, "response.output_text.delta", item_id=mid, output_index=oi, content_index=0, delta=w, logprobs=[])
        text = gen.text
        s.add(None, TAIL, "response.output_text.done", item_id=mid, output_index=oi, content_index=0, text=text, logprobs=[])
        s.add(None, TAIL, "response.content_part.done", item_id=mid, output_index=oi, content_index=0, part=_text_part(text))
        s.add(None, TAIL, "response.output_item.done", output_index=oi, item=_message_item(gen, True))
    final = "response.incomplete" if gen.limited else "response.completed"
    s.add(None, FINAL, final, response=response_obj(gen, done=True, output=_final_output(gen)))
    return s.evs


def responses_body(gen: Gen) -> dict[str, Any]:
    return response_obj(gen, done=True, output=_final_output(gen))


def stream_error(gen: Gen, seq: int = 0) -> bytes:
    obj = {"type": "error", "sequence_number": seq, "code": "server_error", "message": SERVER_ERROR_MESSAGE, "param": None}
    return sse(obj, "error")
