"""Error replies in the exact shape of each API: injected error faults, auth, unknown paths, bad bodies."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from firsttoken.cli.simulate.wire import alnum

OPENAI_CONTEXT_WINDOW = 8192
OPENAI_MAX_COMPLETION = 4096
ANTHROPIC_CONTEXT_WINDOW = 200000
ANTHROPIC_MAX_OUTPUT = 8192
RETRY_AFTER_S = 2

MALFORMED_OPENAI = (
    "We could not parse the JSON body of your request. (HINT: This likely means you aren't using your HTTP "
    "library correctly. The OpenAI API expects a JSON payload, but what was sent was not valid JSON. If you have "
    "trouble figuring out how to fix this, please contact us through our help center at help.openai.com.)"
)


@dataclass
class ErrorReply:
    status: int
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)


def openai_error(status: int, message: str, etype: str, param: str | None = None, code: str | None = None,
                 headers: dict[str, str] | None = None) -> ErrorReply:  # fmt: skip
    body = {"error": {"message": message, "type": etype, "param": param, "code": code}}
    return ErrorReply(status, body, headers or {})


def anthropic_error(status: int, etype: str, message: str, headers: dict[str, str] | None = None) -> ErrorReply:
    body = {"type": "error", "error": {"type": etype, "message": message}, "request_id": "req_011C" + alnum(20)}
    return ErrorReply(status, body, headers or {})


def _mask(key: str) -> str:
    if len(key) <= 8:
        return "*" * len(key)
    return key[:3] + "*" * (len(key) - 7) + key[-4:]


# ---- not faults: unknown path, auth, unparsable body, missing fields ----------------------------


def not_found(proto: str, method: str, path: str) -> ErrorReply:
    if proto == "anthropic":
        return anthropic_error(404, "not_found_error", "Not Found")
    return openai_error(404, f"Invalid URL ({method} {path})", "invalid_request_error")


def unauthorized(proto: str, given_key: str | None) -> ErrorReply:
    if proto == "anthropic":
        message = "invalid x-api-key" if given_key else "x-api-key header is required"
        return anthropic_error(401, "authentication_error", message)
    if not given_key:
        return openai_error(
            401,
            "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer "
            "auth (i.e. Authorization: Bearer YOUR_KEY), or as the password field (with blank username) if you're "
            "accessing the API from your browser and are prompted for a username. You can obtain an API key from "
            "https://platform.openai.com/account/api-keys.",
            "invalid_request_error",
        )
    return openai_error(
        401,
        f"Incorrect API key provided: {_mask(given_key)}. You can find your API key at "
        "https://platform.openai.com/account/api-keys.",
        "invalid_request_error",
        code="invalid_api_key",
    )


def malformed(proto: str, exc: Exception) -> ErrorReply:
    if proto == "anthropic":
        detail = str(exc) if isinstance(exc, json.JSONDecodeError) else "expected a JSON object"
        return anthropic_error(400, "invalid_request_error", f"The request body is not valid JSON: {detail}")
    return openai_error(400, MALFORMED_OPENAI, "invalid_request_error")


def unknown_fault(proto: str, message: str) -> ErrorReply:
    if proto == "anthropic":
        return anthropic_error(400, "invalid_request_error", message)
    return openai_error(400, message, "invalid_request_error", param="x-sim-fault")


def validate(api: str, body: dict[str, Any]) -> ErrorReply | None:
    """The few required-field checks the real APIs make before anything else."""
    if api == "anthropic":
        for name in ("model", "max_tokens", "messages"):
            if name not in body:
                return anthropic_error(400, "invalid_request_error", f"{name}: Field required")
        return None
    if api == "count_tokens":
        return None if "messages" in body else anthropic_error(400, "invalid_request_error", "messages: Field required")
    if not isinstance(body.get("model"), str) or not body.get("model"):
        return openai_error(400, "you must provide a model parameter", "invalid_request_error")
    if api == "chat" and not isinstance(body.get("messages"), list):
        message = "Missing required parameter: 'messages'."
        return openai_error(400, message, "invalid_request_error", "messages", "missing_required_parameter")
    return None


# ---- injected error faults ----------------------------------------------------------------------


def error_fault(fault: str, proto: str, api: str, model: str, *, api_key: str | None, max_tokens_param: str,
                max_tokens: int | None, prompt_tokens: int) -> ErrorReply:  # fmt: skip
    """The reply for one of config.ERROR_FAULTS, as `proto` ("openai" / "anthropic") would send it."""
    if proto == "anthropic":
        return _anthropic_fault(fault, model, max_tokens, prompt_tokens)
    return _openai_fault(fault, api, model, api_key, max_tokens_param, max_tokens, prompt_tokens)


def _openai_fault(fault: str, api: str, model: str, api_key: str | None, param: str, max_tokens: int | None,
                  prompt_tokens: int) -> ErrorReply:  # fmt: skip
    if fault == "auth":
        return unauthorized("openai", api_key or "sk-simulated-invalid-key")
    if fault == "model_not_found":
        msg = f"The model `{model}` does not exist or you do not have access to it."
        return openai_error(404, msg, "invalid_request_error", code="model_not_found")
    if fault == "rate_limit":
        msg = (
            f"Rate limit reached for {model} in organization org-simulated on requests per min (RPM): Limit 3, "
            f"Used 3, Requested 1. Please try again in {RETRY_AFTER_S}s. Visit "
            "https://platform.openai.com/account/rate-limits to learn more."
        )
        headers = {
            "retry-after": str(RETRY_AFTER_S),
            "x-ratelimit-limit-requests": "3",
            "x-ratelimit-remaining-requests": "0",
            "x-ratelimit-reset-requests": f"{RETRY_AFTER_S}s",
            "x-ratelimit-limit-tokens": "40000",
            "x-ratelimit-remaining-tokens": "39000",
            "x-ratelimit-reset-tokens": "1.5s",
        }
        return openai_error(429, msg, "requests", code="rate_limit_exceeded", headers=headers)
    if fault == "quota":
        msg = (
            "You exceeded your current quota, please check your plan and billing details. For more information on "
            "this error, read the docs: https://platform.openai.com/docs/guides/error-codes/api-errors."
        )
        return openai_error(429, msg, "insufficient_quota", code="insufficient_quota")
    if fault == "server_error":
        return openai_error(500, "The server had an error while processing your request. Sorry about that!", "server_error")
    if fault == "overloaded":
        return openai_error(503, "The engine is currently overloaded, please try again later", "server_error")
    if fault == "max_tokens":
        n = max_tokens if max_tokens is not None and max_tokens > OPENAI_MAX_COMPLETION else 16384
        msg = (
            f"{param} is too large: {n}. This model supports at most {OPENAI_MAX_COMPLETION} completion tokens, "
            f"whereas you provided {n}."
        )
        return openai_error(400, msg, "invalid_request_error", param=param)
    if fault == "context_length":
        n = prompt_tokens if prompt_tokens > OPENAI_CONTEXT_WINDOW else prompt_tokens + OPENAI_CONTEXT_WINDOW
        if api == "responses":
            msg = "Your input exceeds the context window of this model. Please adjust your input and try again."
            return openai_error(400, msg, "invalid_request_error", param="input", code="context_length_exceeded")
        what = "prompt" if api == "completions" else "messages"
        msg = (
            f"This model's maximum context length is {OPENAI_CONTEXT_WINDOW} tokens. However, your {what} resulted in "
            f"{n} tokens. Please reduce the length of the {what}."
        )
        return openai_error(400, msg, "invalid_request_error", param=what, code="context_length_exceeded")
    raise ValueError(f"not an error fault: {fault}")


def _anthropic_fault(fault: str, model: str, max_tokens: int | None, prompt_tokens: int) -> ErrorReply:
    if fault == "auth":
        return anthropic_error(401, "authentication_error", "invalid x-api-key")
    if fault == "model_not_found":
        return anthropic_error(404, "not_found_error", f"model: {model}")
    if fault == "rate_limit":
        reset = (datetime.now(UTC) + timedelta(seconds=RETRY_AFTER_S)).strftime("%Y-%m-%dT%H:%M:%SZ")
        msg = (
            "This request would exceed the rate limit for your organization (org-simulated) of 50 requests per "
            "minute. For details, refer to: https://docs.claude.com/en/api/rate-limits. You can see the response "
            "headers for current usage. Please reduce the prompt length or the maximum tokens requested, or try "
            "again later. You may also contact sales at https://www.anthropic.com/contact-sales to discuss your "
            "options for a rate limit increase."
        )
        headers = {
            "retry-after": str(RETRY_AFTER_S),
            "anthropic-ratelimit-requests-limit": "50",
            "anthropic-ratelimit-requests-remaining": "0",
            "anthropic-ratelimit-requests-reset": reset,
            "x-should-retry": "true",
        }
        return anthropic_error(429, "rate_limit_error", msg, headers)
    if fault == "quota":
        msg = (
            "Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or "
            "purchase credits."
        )
        return anthropic_error(400, "invalid_request_error", msg)
    if fault == "server_error":
        return anthropic_error(500, "api_error", "Internal server error")
    if fault == "overloaded":
        return anthropic_error(529, "overloaded_error", "Overloaded", {"x-should-retry": "true"})
    if fault == "max_tokens":
        n = max_tokens if max_tokens is not None and max_tokens > ANTHROPIC_MAX_OUTPUT else 64000
        msg = f"max_tokens: {n} > {ANTHROPIC_MAX_OUTPUT}, which is the maximum allowed number of output tokens for {model}"
        return anthropic_error(400, "invalid_request_error", msg)
    if fault == "context_length":
        n = prompt_tokens if prompt_tokens > ANTHROPIC_CONTEXT_WINDOW else prompt_tokens + ANTHROPIC_CONTEXT_WINDOW
        msg = f"prompt is too long: {n} tokens > {ANTHROPIC_CONTEXT_WINDOW} maximum"
        return anthropic_error(400, "invalid_request_error", msg)
    raise ValueError(f"not an error fault: {fault}")

