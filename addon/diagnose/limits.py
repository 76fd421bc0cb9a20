"""Request limits and upstream errors: quota, rate limits, output and context limits, 5xx, bad requests.

The numbers the hints need (the server's limit, when to retry) are parsed from the
upstream's error text, the only place the record keeps them.
"""

from __future__ import annotations

import re
from typing import Any

from firsttoken.addon import engines
from firsttoken.addon.diagnose.context import AUTH_STATUSES, Ctx, first_int, has_any, largest_part, quote, server_text

QUOTA_WORDS = (
    "insufficient_quota", "exceeded your current quota", "check your plan and billing", "credit balance",
    "billing", "payment required", "insufficient balance", "insufficient credits", "out of credits",
    "quota exceeded", "余额不足", "arrearage",
)
QUOTA_TYPES = ("insufficient_quota", "billing_error", "billing_hard_limit_reached", "payment_required")
CONTEXT_WORDS = (
    "context length", "context window", "context_length", "prompt is too long", "maximum context",
    "input is too long", "too many input tokens", "reduce the length", "exceeds the context",
    "input tokens exceed", "prompt too long", "available context size",
)
#: error types that mean the prompt did not fit (OpenAI's; llama-server's)
CONTEXT_TYPES = ("context_length_exceeded", "exceed_context_size_error")
MAX_TOKENS_PARAMS = ("max_completion_tokens", "max_output_tokens", "max_tokens")
TOO_LARGE_WORDS = ("too large", "at most", "maximum", "exceed", "less than or equal", " > ", "<=", "range of")
OVERLOADED_STATUSES = (503, 529)
#: Google's status for rate limits and quotas alike (its free tier's per-minute limits say "exceeded your
#: current quota ... billing"): a rate limit with Google's own fix, never "retrying will not help"
GOOGLE_EXHAUSTED = "RESOURCE_EXHAUSTED"
#: Google's status when its server gave up at its deadline (504)
GOOGLE_DEADLINE = "DEADLINE_EXCEEDED"

_LIMIT = (
    r"max_(?:completion_|output_)?tokens\W+\d[\d,]*\s*>\s*(\d[\d,]*)",
    r"at most\s+(\d[\d,]*)",
    r"(?:<=|less than or equal to|must be at most|maximum(?: value)?(?: is| of)?|max(?:imum)? allowed(?: is)?)\s*`?(\d[\d,]*)",
    r"range of \[\s*\d+\s*,\s*(\d[\d,]*)\s*\]",
)
_REQUESTED = (r"too large:\s*(\d[\d,]*)", r"max_(?:completion_|output_)?tokens\W+(\d[\d,]*)\s*>", r"you provided\s+(\d[\d,]*)")
_CONTEXT_LIMIT = (
    r"maximum context length is\s+(\d[\d,]*)", r">\s*(\d[\d,]*)\s*maximum", r"context window of\s+(\d[\d,]*)",
    r"context length of\s+(\d[\d,]*)", r"limit of\s+(\d[\d,]*)\s*tokens",
    r"available context size \((\d[\d,]*) tokens\)",
)
_CONTEXT_USED = (r"resulted in\s+(\d[\d,]*)\s*tokens", r"prompt is too long:\s*(\d[\d,]*)", r"requested\s+(\d[\d,]*)\s*tokens",
                 r"request \((\d[\d,]*) tokens\) exceeds", r"at least\s+(\d[\d,]*)\s+input tokens")
_RETRY = re.compile(r"(?:try again|retry)(?: after| in)?\s+((?:\d+h)?(?:\d+m(?!s))?(?:\d+(?:\.\d+)?(?:ms|s))?)", re.IGNORECASE)
_RATE_KIND = re.compile(r"\((RPM|TPM|RPD|TPD|IPM|ITPM|OTPM)\)")


def retry_after_s(rec: Any) -> float | None:
    """Seconds the server asked to wait: the record's retry_after if the core keeps it, else the error text."""
    v = getattr(rec, "retry_after", None)
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return float(v)
    m = _RETRY.search(rec.upstream_error or "")
    if not m or not m.group(1):
        return None
    total, text = 0.0, m.group(1)
    for num, unit in re.findall(r"(\d+(?:\.\d+)?)(ms|h|m|s)", text):
        total += float(num) * {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}[unit]
    return round(total, 3) if total else None


def _msg(rec: Any) -> str:
    return (rec.upstream_error or "").lower()


def _fp(rec: Any) -> str:
    return rec.key_fingerprint or "?"


def rule_quota(rec: Any, c: Ctx) -> None:
    s = rec.status
    if s not in (400, 401, 402, 403, 429):
        return
    if rec.upstream_error_type == GOOGLE_EXHAUSTED:
        return
    if s == 402 or rec.upstream_error_type in QUOTA_TYPES or has_any(_msg(rec), QUOTA_WORDS):
        c.add("rate.quota", "error", **c.common(), server=server_text(rec) or "-", fingerprint=_fp(rec))


def rule_rate_limited(rec: Any, c: Ctx) -> None:
    google = rec.upstream_error_type == GOOGLE_EXHAUSTED and (rec.status or 0) >= 400
    if (rec.status != 429 and not google) or c.has("rate.quota"):
        return
    wait = retry_after_s(rec)
    m = _RATE_KIND.search(rec.upstream_error or "")
    c.add("rate.limited", "error", variant=("google_" if google else "") + ("retry" if wait else "noretry"), **c.common(),
          server=server_text(rec) or "-", retry_after=wait, kind=f", {m.group(1)}" if m else "",
          fingerprint=_fp(rec))


def rule_context_length(rec: Any, c: Ctx) -> None:
    if rec.status not in (400, 413, 422) or c.errors():
        return
    msg = rec.upstream_error or ""
    if rec.upstream_error_type not in CONTEXT_TYPES and not has_any(msg, CONTEXT_WORDS):
        return
    limit = first_int(msg, _CONTEXT_LIMIT)
    used = first_int(msg, _CONTEXT_USED)
    counted = used or rec.prompt_tokens_est
    excess = None
    if limit and counted:
        excess = counted - limit
        if excess <= 0 and rec.max_tokens:
            excess = counted + rec.max_tokens - limit
        excess = excess if excess > 0 else None
    label, tokens = largest_part(rec)
    # only an engine that named itself: a loopback gateway (LiteLLM) in front of a cloud keeps the cloud's advice
    engine = rec.engine
    engine_fix = {} if engine is None else dict(engine=engines.knobs.name(engine),
                                                 engine_fix=engines.knobs.knob(engines.knobs.CONTEXT, engine))
    c.add("request.context_length", "error", variant="engine" if engine_fix else "cloud", **engine_fix, **c.common(),
          server=server_text(rec), model=rec.model or "?",
          limit=limit, server_tokens=used, prompt_tokens=rec.prompt_tokens_est,
          max_tokens=rec.max_tokens if rec.max_tokens is not None else "-",
          excess=excess, largest=label, largest_tokens=tokens)


def rule_max_tokens(rec: Any, c: Ctx) -> None:
    if rec.status not in (400, 422) or c.errors():
        return
    msg = rec.upstream_error or ""
    low = msg.lower()
    param = next((p for p in MAX_TOKENS_PARAMS if p in low), None)
    if param is None or not has_any(low, TOO_LARGE_WORDS) or has_any(low, CONTEXT_WORDS):
        return
    limit = first_int(msg, _LIMIT)
    requested = rec.max_tokens if rec.max_tokens is not None else first_int(msg, _REQUESTED)
    c.add("request.max_tokens_too_large", "error", variant="limit" if limit else "unknown", **c.common(),
          server=server_text(rec), param=param, requested=requested, limit=limit)


def rule_overloaded(rec: Any, c: Ctx) -> None:
    s = rec.status
    if s is None or s < 500 or c.errors():
        return
    overloaded = s in OVERLOADED_STATUSES or rec.upstream_error_type == "overloaded_error" or "overloaded" in _msg(rec)
    code = "upstream.overloaded" if overloaded else "upstream.server_error"
    server = server_text(rec)
    if code == "upstream.overloaded":
        variant = "said" if server else "silent"
    elif rec.upstream_error_type == GOOGLE_DEADLINE:
        variant = "deadline"
    else:  # the fix names the request id when the upstream gave one
        variant = ("with_id" if rec.upstream_request_id else "no_id") + ("" if server else "_silent")
    c.add(code, "error", variant=variant, **c.common(), server=server, error_type=rec.upstream_error_type or "-",
          request_id=rec.upstream_request_id)


def rule_request_body(rec: Any, c: Ctx) -> None:
    err = rec.request_error
    # not the client's fault: our analysis failed, or the body was too large to analyse
    if not err or err.startswith(("analysis failed", "request body larger than")) or rec.status in AUTH_STATUSES:
        return
    failed = rec.status is None or rec.status >= 400
    c.add("request.malformed", "error" if failed and not c.errors() else "warn",
          variant="body" if rec.status is not None else "body_no_answer", **c.common(), detail=quote(err))


def rule_bad_request(rec: Any, c: Ctx) -> None:
    """Fallback: a 4xx nothing else explained (401/403 belong to auth, 404 to paths)."""
    s = rec.status
    if s is None or not 400 <= s < 500 or s in AUTH_STATUSES or s in (404, 429) or c.errors():
        return
    if s in (400, 422):
        c.add("request.malformed", "error", variant="server", **c.common(), server=server_text(rec) or "-")
    else:
        c.add("upstream.http_error", "error", **c.common(), server=server_text(rec) or "-")


RULES = (rule_quota, rule_rate_limited, rule_context_length, rule_max_tokens, rule_overloaded, rule_request_body)
FALLBACKS = (rule_bad_request,)


# ---- The ``limits`` family of the finding catalog, in English and Chinese.

_E, _W, _I = "error", "warn", "info"

_SERVER_FAULT_ID_EN = ("A server-side fault, not your request: retry with backoff; if it persists, report it with "
                       "request id {request_id}.")
_SERVER_FAULT_EN = ("A server-side fault, not your request: retry with backoff; if it persists, report it to the provider "
                    "with the time of the request.")
_SERVER_FAULT_ID_ZH = "这是服务端故障，不是你的请求有问题：退避重试；若持续出现，带上请求 ID {request_id} 报告给服务商。"
_SERVER_FAULT_ZH = "这是服务端故障，不是你的请求有问题：退避重试；若持续出现，带上请求时间报告给服务商。"

# (code, family, usual severity, other possible severities, {lang: (title, when, message, hint)})
ENTRIES: list[tuple[str, str, str, tuple[str, ...], dict[str, tuple[Any, Any, Any, Any]]]] = [
    ("request.max_tokens_too_large", "limits", _E, (), {
        "en": ("max_tokens above the model's limit",
               "400 whose error says the output-token parameter is too large; the limit is parsed from the message.",
               {"limit": "{host} rejected {param}={requested}: this model allows at most {limit} output tokens (\u201c{server}\u201d).",
                "unknown": "{host} rejected {param}={requested} as too large (\u201c{server}\u201d)."},
               {"limit": "Set {param} to {limit} or less (\"{param}\": {limit}).",
                "unknown": "Lower {param} to the model's documented output limit."}),
        "zh": ("max_tokens 超过模型上限",
               "400 且错误说输出 token 参数过大；上限从错误信息中解析。",
               {"limit": "{host} 拒绝了 {param}={requested}：该模型最多允许 {limit} 个输出 token（\u201c{server}\u201d）。",
                "unknown": "{host} 认为 {param}={requested} 过大而拒绝（\u201c{server}\u201d）。"},
               {"limit": "把 {param} 设为不超过 {limit}（\"{param}\": {limit}）。",
                "unknown": "把 {param} 降到该模型文档中的输出上限以内。"}),
    }),
    ("request.context_length", "limits", _E, (), {
        "en": ("Prompt longer than the context window",
               "400/413 whose error says the prompt exceeds the model's context length.",
               {"cloud": "The prompt does not fit the context window of {model} (limit {limit:,} tokens, server counted {server_tokens:,}); firsttoken counted {prompt_tokens:,} prompt tokens, max_tokens {max_tokens}.",
                "engine": "The prompt does not fit the context {engine} gives one request of {model} (limit {limit:,} tokens, server counted {server_tokens:,}); firsttoken counted {prompt_tokens:,} prompt tokens, max_tokens {max_tokens}."},
               {"cloud": "Remove about {excess:,} tokens: the largest part is {largest} ({largest_tokens:,} tokens); drop old turns or large tool results, shorten the system prompt or tool schemas, lower max_tokens, or use a model with a longer context.",
                "engine": "On the server: {engine_fix}. Or remove about {excess:,} tokens: the largest part is {largest} ({largest_tokens:,} tokens)."}),
        "zh": ("提示词超出上下文窗口",
               "400/413 且错误说提示词超出了模型的上下文长度。",
               {"cloud": "提示词超出了 {model} 的上下文窗口（上限 {limit:,} token，服务器计数 {server_tokens:,}）；firsttoken 统计提示词 {prompt_tokens:,} token，max_tokens 为 {max_tokens}。",
                "engine": "提示词超出了 {engine} 为 {model} 的单个请求提供的上下文（上限 {limit:,} token，服务器计数 {server_tokens:,}）；firsttoken 统计提示词 {prompt_tokens:,} token，max_tokens 为 {max_tokens}。"},
               {"cloud": "大约需要删掉 {excess:,} 个 token：最大的部分是{largest}（{largest_tokens:,} token）；删除旧的对话轮次或过大的工具结果，精简系统提示词或工具定义，降低 max_tokens，或换用上下文更长的模型。",
                "engine": "在服务器上：{engine_fix}。或者删掉大约 {excess:,} 个 token：最大的部分是{largest}（{largest_tokens:,} token）。"}),
    }),
    ("request.malformed", "limits", _E, (_W,), {
        "en": ("Invalid request",
               "The request body is not valid JSON (firsttoken could not parse it), or a 400/422 the upstream explains as an invalid request.",
               {"body": "The request body could not be read: {detail}; {host} answered {status}.",
                "body_no_answer": "The request body could not be read: {detail}; no answer came back.",
                "server": "{host} rejected the request as invalid ({status}): \u201c{server}\u201d."},
               {"body": "Send one JSON object with Content-Type: application/json: with curl use --data-binary @body.json (or -d '...' in single quotes so the shell keeps the double quotes); look for trailing commas and unescaped line breaks.",
                "body_no_answer": "Send one JSON object with Content-Type: application/json: with curl use --data-binary @body.json (or -d '...' in single quotes so the shell keeps the double quotes); look for trailing commas and unescaped line breaks.",
                "server": "Fix what the message names: roles must be user/assistant (Anthropic takes the system prompt in the top-level \"system\" field), required fields (model, messages; max_tokens for Anthropic) and value types."}),
        "zh": ("请求无效",
               "请求体不是合法 JSON（firsttoken 无法解析），或上游以 400/422 说明请求无效。",
               {"body": "无法读取请求体：{detail}；{host} 返回 {status}。",
                "body_no_answer": "无法读取请求体：{detail}；没有收到任何响应。",
                "server": "{host} 认为请求无效（{status}）：\u201c{server}\u201d。"},
               {"body": "发送一个 JSON 对象并带上 Content-Type: application/json：curl 用 --data-binary @body.json（或用单引号包住 -d '...'，让 shell 保留双引号）；检查多余的逗号和未转义的换行。",
                "body_no_answer": "发送一个 JSON 对象并带上 Content-Type: application/json：curl 用 --data-binary @body.json（或用单引号包住 -d '...'，让 shell 保留双引号）；检查多余的逗号和未转义的换行。",
                "server": "按错误信息修正：role 只能是 user/assistant（Anthropic 的系统提示词放在顶层 \"system\" 字段），必填字段（model、messages；Anthropic 还需 max_tokens）以及取值类型。"}),
    }),
    ("rate.limited", "limits", _E, (), {
        "en": ("Rate limited",
               "429 that is not a quota/billing error; Google's RESOURCE_EXHAUSTED (its rate limits and quotas).",
               {"retry": "{host} rate-limited the request ({status}{kind}) and asks to retry in {retry_after:g} s: \u201c{server}\u201d.",
                "noretry": "{host} rate-limited the request ({status}{kind}): \u201c{server}\u201d.",
                "google_retry": "{host} answered {status} RESOURCE_EXHAUSTED (a rate limit or quota of the key's project) and asks to retry in {retry_after:g} s: \u201c{server}\u201d.",
                "google_noretry": "{host} answered {status} RESOURCE_EXHAUSTED (a rate limit or quota of the key's project): \u201c{server}\u201d."},
               {"retry": "Retry after {retry_after:g} s with exponential backoff (the openai/anthropic SDKs do with max_retries); lower concurrency or tokens per minute, or raise the limit of the organisation that owns {fingerprint}.",
                "noretry": "Retry with exponential backoff honouring the retry-after header (the openai/anthropic SDKs do with max_retries); lower concurrency or tokens per minute, or raise the limit of the organisation that owns {fingerprint}.",
                "google_retry": "Wait {retry_after:g} s and retry with backoff (Gemini CLI and the google-genai SDK retry 429s themselves). Google's limits are per project and model, per minute and per day (https://ai.google.dev/gemini-api/docs/rate-limits): a free-tier day's quota resets at midnight Pacific time; for more, enable billing on the project of {fingerprint} or ask for a quota increase (Vertex AI: Provisioned Throughput or another region).",
                "google_noretry": "Retry with exponential backoff (Gemini CLI and the google-genai SDK retry 429s themselves). Google's limits are per project and model, per minute and per day (https://ai.google.dev/gemini-api/docs/rate-limits): a free-tier day's quota resets at midnight Pacific time; for more, enable billing on the project of {fingerprint} or ask for a quota increase (Vertex AI: Provisioned Throughput or another region)."}),
        "zh": ("触发限流",
               "非配额/账单类的 429；Google 的 RESOURCE_EXHAUSTED（其速率限制与配额）。",
               {"retry": "{host} 对请求限流（{status}{kind}），要求 {retry_after:g} 秒后重试：\u201c{server}\u201d。",
                "noretry": "{host} 对请求限流（{status}{kind}）：\u201c{server}\u201d。",
                "google_retry": "{host} 返回 {status} RESOURCE_EXHAUSTED（密钥所属项目的速率限制或配额），要求 {retry_after:g} 秒后重试：\u201c{server}\u201d。",
                "google_noretry": "{host} 返回 {status} RESOURCE_EXHAUSTED（密钥所属项目的速率限制或配额）：\u201c{server}\u201d。"},
               {"retry": "{retry_after:g} 秒后按指数退避重试（openai/anthropic SDK 的 max_retries 会自动这样做）；降低并发或每分钟 token 数，或为 {fingerprint} 所属组织申请更高限额。",
                "noretry": "按 retry-after 响应头做指数退避重试（openai/anthropic SDK 的 max_retries 会自动这样做）；降低并发或每分钟 token 数，或为 {fingerprint} 所属组织申请更高限额。",
                "google_retry": "等 {retry_after:g} 秒后退避重试（Gemini CLI 和 google-genai SDK 会自动重试 429）。Google 的限额按项目和模型计，分每分钟和每天（https://ai.google.dev/gemini-api/docs/rate-limits）：免费层的每日配额在太平洋时间午夜重置；需要更多时，为 {fingerprint} 所属项目启用结算或申请提高配额（Vertex AI：预配吞吐量或换一个地区）。",
                "google_noretry": "按指数退避重试（Gemini CLI 和 google-genai SDK 会自动重试 429）。Google 的限额按项目和模型计，分每分钟和每天（https://ai.google.dev/gemini-api/docs/rate-limits）：免费层的每日配额在太平洋时间午夜重置；需要更多时，为 {fingerprint} 所属项目启用结算或申请提高配额（Vertex AI：预配吞吐量或换一个地区）。"}),
    }),
    ("rate.quota", "limits", _E, (), {
        "en": ("Quota or credit exhausted",
               "429/400/402/403 whose error is about quota, billing or credit balance.",
               "{host} refused the request for lack of quota or credit ({status}): \u201c{server}\u201d.",
               "Add credit or raise the spending limit in the billing settings of the account that owns {fingerprint}; retrying will not help until then."),
        "zh": ("配额或余额不足",
               "429/400/402/403 且错误与配额、账单或余额有关。",
               "{host} 因配额或余额不足拒绝了请求（{status}）：\u201c{server}\u201d。",
               "在 {fingerprint} 所属账户的账单设置中充值或提高消费上限；在此之前重试无济于事。"),
    }),
    ("upstream.overloaded", "limits", _E, (), {
        "en": ("Upstream overloaded",
               "529, 503, or an overloaded_error body.",
               {"said": "{host} is overloaded ({status} {error_type}): \u201c{server}\u201d.",
                "silent": "{host} is overloaded: it answered {status} with no error message."},
               "Retry with exponential backoff (honour retry-after / x-should-retry), spread the load over time, or fall back to another model or region."),
        "zh": ("上游过载",
               "529、503 或 overloaded_error 错误体。",
               {"said": "{host} 过载（{status} {error_type}）：\u201c{server}\u201d。",
                "silent": "{host} 过载：返回 {status}，没有错误信息。"},
               "按指数退避重试（遵循 retry-after / x-should-retry），错峰发送，或切换到其他模型或地区。"),
    }),
    ("upstream.server_error", "limits", _E, (), {
        "en": ("Upstream server error",
               "Any other 5xx from the upstream.",
               {"with_id": "{host} failed with {status} ({error_type}): \u201c{server}\u201d.",
                "no_id": "{host} failed with {status} ({error_type}): \u201c{server}\u201d.",
                "with_id_silent": "{host} failed with {status} and sent no error message.",
                "no_id_silent": "{host} failed with {status} and sent no error message.",
                "deadline": "{host} gave up at its deadline ({status} DEADLINE_EXCEEDED): \u201c{server}\u201d."},
               {"with_id": _SERVER_FAULT_ID_EN, "no_id": _SERVER_FAULT_EN,
                "with_id_silent": _SERVER_FAULT_ID_EN, "no_id_silent": _SERVER_FAULT_EN,
                "deadline": "The answer did not finish within the deadline: the prompt or the requested output is too large to finish in time, or the client's deadline is too short. Raise the client's timeout (google-genai: HttpOptions(timeout=ms)), shorten the prompt, or stream the answer."}),
        "zh": ("上游服务器错误",
               "上游返回的其他 5xx。",
               {"with_id": "{host} 出错，返回 {status}（{error_type}）：\u201c{server}\u201d。",
                "no_id": "{host} 出错，返回 {status}（{error_type}）：\u201c{server}\u201d。",
                "with_id_silent": "{host} 出错，返回 {status}，没有错误信息。",
                "no_id_silent": "{host} 出错，返回 {status}，没有错误信息。",
                "deadline": "{host} 在其截止时间内没有完成（{status} DEADLINE_EXCEEDED）：\u201c{server}\u201d。"},
               {"with_id": _SERVER_FAULT_ID_ZH, "no_id": _SERVER_FAULT_ZH,
                "with_id_silent": _SERVER_FAULT_ID_ZH, "no_id_silent": _SERVER_FAULT_ZH,
                "deadline": "回答没能在截止时间内完成：提示词或要求的输出太大，或客户端的截止时间太短。调大客户端超时（google-genai：HttpOptions(timeout=毫秒)），缩短提示词，或改用流式输出。"}),
    }),
    ("upstream.http_error", "limits", _E, (), {
        "en": ("Other HTTP error",
               "A 4xx status that no other rule explains.",
               "{host} answered {status}: \u201c{server}\u201d.",
               "Read the upstream's message; check the method, path and headers the endpoint expects (e.g. anthropic-version for Anthropic, Content-Type: application/json)."),
        "zh": ("其他 HTTP 错误",
               "其他规则都无法解释的 4xx 状态。",
               "{host} 返回 {status}：\u201c{server}\u201d。",
               "阅读上游的错误信息；检查该接口要求的方法、路径和请求头（如 Anthropic 的 anthropic-version、Content-Type: application/json）。"),
    }),
]
