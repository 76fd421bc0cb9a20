"""Shared types for the API interpreters.

An interpreter is pure and incremental: it is fed SSE events (``on_event``) or one whole
non-streaming body (``on_body``) and returns the token-bearing deltas each one carried,
while accumulating what the stream said about itself in ``facts``. No I/O, no clocks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from ..sse import SSEEvent

#: delta kinds; all but "reasoning" are visible output (they stop the TTFT clock)
TEXT, REASONING, TOOL, REFUSAL = "text", "reasoning", "tool", "refusal"
VISIBLE = frozenset({TEXT, TOOL, REFUSAL})


@dataclass(slots=True)
class Delta:
    kind: str  # TEXT | REASONING | TOOL | REFUSAL
    text: str  # the generated characters (tool-call argument fragments for TOOL)


@dataclass
class ApiFacts:
    model: str | None = None
    response_id: str | None = None
    usage_prompt_tokens: int | None = None  # total input (Anthropic: input + cache read + cache creation)
    usage_completion_tokens: int | None = None
    usage_cached_tokens: int | None = None  # cache hits
    usage_cache_creation_tokens: int | None = None
    usage_reasoning_tokens: int | None = None
    finish_reason: str | None = None
    done: bool = False  # saw the API's terminal event ([DONE], message_stop, response.completed ...)
    error_message: str | None = None  # error object from the upstream (body, or event inside a 200 stream)
    error_type: str | None = None
    no_choices: str | None = None  # first ~300 chars of a 200 JSON body/chunk without choices/content
    malformed: int = 0  # data payloads that were not JSON
    malformed_sample: str | None = None  # first ~200 chars of the first one


class Interpreter(Protocol):
    api: str
    facts: ApiFacts

    def on_event(self, event: SSEEvent) -> list[Delta]: ...

    def on_body(self, body: bytes) -> list[Delta]: ...
