"""Gen: everything about one simulated answer (request facts, what gets generated, ids, usage numbers)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from firsttoken.cli.simulate import tokens
from firsttoken.cli.simulate.config import SimConfig
from firsttoken.cli.simulate.wire import alnum, hexid

CACHE_HIT_FRACTION = 0.8


def _int_or_none(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def requested_max_tokens(api: str, body: dict[str, Any]) -> tuple[str, int | None]:
    """(name of the parameter, value) of the output-length limit of the request."""
    if api == "responses":
        return "max_output_tokens", _int_or_none(body.get("max_output_tokens"))
    if api == "chat" and _int_or_none(body.get("max_completion_tokens")) is not None:
        return "max_completion_tokens", _int_or_none(body.get("max_completion_tokens"))
    return "max_tokens", _int_or_none(body.get("max_tokens"))


def _wants_reasoning(api: str, model: str, body: dict[str, Any]) -> bool:
    if api == "completions":
        return False
    m = model.lower()
    if "reason" in m or "think" in m:
        return True
    thinking = body.get("thinking")
    return api == "anthropic" and isinstance(thinking, dict) and thinking.get("type") in ("enabled", "adaptive")


def _tool_for(api: str, model: str, body: dict[str, Any]) -> dict[str, Any] | None:
    tools = body.get("tools")
    if api == "completions" or "tool" not in model.lower() or not isinstance(tools, list) or not tools:
        return None
    choice = body.get("tool_choice")
    if choice == "none" or (isinstance(choice, dict) and choice.get("type") == "none"):
        return None
    first = tools[0]
    return first if isinstance(first, dict) else None


@dataclass
class Gen:
    api: str  # "chat" | "completions" | "responses" | "anthropic"
    body: dict[str, Any]
    model: str
    stream: bool
    faults: frozenset[str]
    include_usage: bool
    max_tokens_param: str
    max_tokens: int | None
    words: list[str]  # visible output tokens (text words, or tool-call argument fragments)
    rwords: list[str]  # reasoning tokens, streamed before `words`
    tool: dict[str, Any] | None
    tool_name: str = ""
    limited: bool = False  # stopped by max_tokens
    prompt_tokens: int = 0
    cached_tokens: int = 0
    created: int = field(default_factory=lambda: int(time.time()))
    fingerprint: str = field(default_factory=lambda: "fp_" + hexid(10))
    request_id: str = ""
    ids: dict[str, str] = field(default_factory=dict)

    @classmethod
    def build(cls, api: str, body: dict[str, Any], faults: frozenset[str], cfg: SimConfig) -> Gen:
        model = body.get("model") if isinstance(body.get("model"), str) else ""
        stream = body.get("stream") is True
        opts = body.get("stream_options")
        include_usage = isinstance(opts, dict) and opts.get("include_usage") is True
        param, max_tokens = requested_max_tokens(api, body)
        if cfg.ignore_max_tokens:
            n = cfg.output_tokens
        elif cfg.fill_max_tokens and max_tokens is not None:
            n = min(max_tokens, cfg.max_fill_tokens)
        elif max_tokens is not None:
            n = min(max_tokens, cfg.output_tokens)
        else:
            n = cfg.output_tokens
        n = max(0, n)
        limited = max_tokens is not None and n >= max_tokens and not cfg.ignore_max_tokens
        tool = _tool_for(api, model, body)
        rwords = tokens.reasoning_words(cfg.reasoning_tokens) if _wants_reasoning(api, model, body) else []
        tool_name = ""
        if tool is not None:
            tool_name, words = tokens.tool_call_fragments(tool, n)
            limited = False
        else:
            words = tokens.text_words(n)
        gen = cls(
            api=api, body=body, model=model, stream=stream, faults=faults, include_usage=include_usage,
            max_tokens_param=param, max_tokens=max_tokens, words=words, rwords=rwords, tool=tool,
            tool_name=tool_name, limited=limited,
        )  # fmt: skip
        if api == "anthropic":
            gen.request_id = "req_011C" + alnum(20)
        else:
            gen.request_id = "req_" + hexid(32)
        return gen

    # ---- derived facts ------------------------------------------------------------------------

    @property
    def n_reasoning(self) -> int:
        return len(self.rwords)

    @property
    def n_output(self) -> int:
        """Completion tokens: reasoning + visible."""
        return len(self.rwords) + len(self.words)

    @property
    def text(self) -> str:
        return "".join(self.words)

    @property
    def reasoning_text(self) -> str:
        return "".join(self.rwords)

    @property
    def usage_on(self) -> bool:
        return "no_usage" not in self.faults

    @property
    def no_choices(self) -> bool:
        return "no_choices" in self.faults

    def set_prompt_tokens(self, n: int) -> None:
        self.prompt_tokens = n
        self.cached_tokens = round(n * CACHE_HIT_FRACTION) if "cache_hit" in self.faults else 0

    def id(self, kind: str) -> str:
        """Stable per-answer ids: chat, cmpl, resp, msg (responses message item), rs, fc, call, anthropic, toolu."""
        if kind not in self.ids:
            self.ids[kind] = {
                "chat": lambda: "chatcmpl-" + alnum(29),
                "cmpl": lambda: "cmpl-" + alnum(29),
                "resp": lambda: "resp_" + hexid(50),
                "msg": lambda: "msg_" + hexid(50),
                "rs": lambda: "rs_" + hexid(50),
                "fc": lambda: "fc_" + hexid(50),
                "call": lambda: "call_" + alnum(24),
                "anthropic": lambda: "msg_01" + alnum(22),
                "toolu": lambda: "toolu_01" + alnum(22),
            }[kind]()
        return self.ids[kind]

    # ---- usage in each API's shape ------------------------------------------------------------

    def openai_usage(self) -> dict[str, Any]:
        p, c = self.prompt_tokens, self.n_output
        if self.api == "completions":
            return {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c}
        return {
            "prompt_tokens": p,
            "completion_tokens": c,
            "total_tokens": p + c,
            "prompt_tokens_details": {"cached_tokens": self.cached_tokens, "audio_tokens": 0},
            "completion_tokens_details": {
                "reasoning_tokens": self.n_reasoning,
                "audio_tokens": 0,
                "accepted_prediction_tokens": 0,
                "rejected_prediction_tokens": 0,
            },
        }

    def responses_usage(self) -> dict[str, Any]:
        p, c = self.prompt_tokens, self.n_output
        return {
            "input_tokens": p,
            "input_tokens_details": {"cached_tokens": self.cached_tokens},
            "output_tokens": c,
            "output_tokens_details": {"reasoning_tokens": self.n_reasoning},
            "total_tokens": p + c,
        }

    def anthropic_usage(self, output_tokens: int | None = None) -> dict[str, Any]:
        return {
            "input_tokens": self.prompt_tokens - self.cached_tokens,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": self.cached_tokens,
            "cache_creation": {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 0},
            "output_tokens": self.n_output if output_tokens is None else output_tokens,
            "service_tier": "standard",
        }
