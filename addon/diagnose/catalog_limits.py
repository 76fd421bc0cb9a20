"""The ``limits`` family of the finding catalog, in English and Chinese.

Output-token and context limits, malformed requests, rate limits, quota, overload and
other upstream HTTP errors.

Plain data: ``catalog.py`` assembles the families in order and documents the row format.
"""

from __future__ import annotations

from typing import Any

_E, _W, _I = "error", "warn", "info"

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
               "The prompt does not fit the context window of {model} (limit {limit:,} tokens, server counted {server_tokens:,}); firsttoken counted {prompt_tokens:,} prompt tokens, max_tokens {max_tokens}.",
               "Remove about {excess:,} tokens: the largest part is {largest} ({largest_tokens:,} tokens); drop old turns or large tool results, shorten the system prompt or tool schemas, lower max_tokens, or use a model with a longer context."),
        "zh": ("提示词超出上下文窗口",
               "400/413 且错误说提示词超出了模型的上下文长度。",
               "提示词超出了 {model} 的上下文窗口（上限 {limit:,} token，服务器计数 {server_tokens:,}）；firsttoken 统计提示词 {prompt_tokens:,} token，max_tokens 为 {max_tokens}。",
               "大约需要删掉 {excess:,} 个 token：最大的部分是{largest}（{largest_tokens:,} token）；删除旧的对话轮次或过大的工具结果，精简系统提示词或工具定义，降低 max_tokens，或换用上下文更长的模型。"),
    }),
    ("request.malformed", "limits", _E, (_W,), {
        "en": ("Invalid request",
               "The request body is not valid JSON (firsttoken could not parse it), or a 400/422 the upstream explains as an invalid request.",
               {"body": "The request body could not be read: {detail}; {host} answered {status}.",
                "server": "{host} rejected the request as invalid ({status}): \u201c{server}\u201d."},
               {"body": "Send one JSON object with Content-Type: application/json: with curl use --data-binary @body.json (or -d '...' in single quotes so the shell keeps the double quotes); look for trailing commas and unescaped line breaks.",
                "server": "Fix what the message names: roles must be user/assistant (Anthropic takes the system prompt in the top-level \"system\" field), required fields (model, messages; max_tokens for Anthropic) and value types."}),
        "zh": ("请求无效",
               "请求体不是合法 JSON（firsttoken 无法解析），或上游以 400/422 说明请求无效。",
               {"body": "无法读取请求体：{detail}；{host} 返回 {status}。",
                "server": "{host} 认为请求无效（{status}）：\u201c{server}\u201d。"},
               {"body": "发送一个 JSON 对象并带上 Content-Type: application/json：curl 用 --data-binary @body.json（或用单引号包住 -d '...'，让 shell 保留双引号）；检查多余的逗号和未转义的换行。",
                "server": "按错误信息修正：role 只能是 user/assistant（Anthropic 的系统提示词放在顶层 \"system\" 字段），必填字段（model、messages；Anthropic 还需 max_tokens）以及取值类型。"}),
    }),
    ("rate.limited", "limits", _E, (), {
        "en": ("Rate limited",
               "429 that is not a quota/billing error.",
               {"retry": "{host} rate-limited the request ({status}{kind}) and asks to retry in {retry_after:g} s: \u201c{server}\u201d.",
                "noretry": "{host} rate-limited the request ({status}{kind}): \u201c{server}\u201d."},
               {"retry": "Retry after {retry_after:g} s with exponential backoff (the openai/anthropic SDKs do with max_retries); lower concurrency or tokens per minute, or raise the limit of the organisation that owns {fingerprint}.",
                "noretry": "Retry with exponential backoff honouring the retry-after header (the openai/anthropic SDKs do with max_retries); lower concurrency or tokens per minute, or raise the limit of the organisation that owns {fingerprint}."}),
        "zh": ("触发限流",
               "非配额/账单类的 429。",
               {"retry": "{host} 对请求限流（{status}{kind}），要求 {retry_after:g} 秒后重试：\u201c{server}\u201d。",
                "noretry": "{host} 对请求限流（{status}{kind}）：\u201c{server}\u201d。"},
               {"retry": "{retry_after:g} 秒后按指数退避重试（openai/anthropic SDK 的 max_retries 会自动这样做）；降低并发或每分钟 token 数，或为 {fingerprint} 所属组织申请更高限额。",
                "noretry": "按 retry-after 响应头做指数退避重试（openai/anthropic SDK 的 max_retries 会自动这样做）；降低并发或每分钟 token 数，或为 {fingerprint} 所属组织申请更高限额。"}),
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
               "{host} is overloaded ({status} {error_type}): \u201c{server}\u201d.",
               "Retry with exponential backoff (honour retry-after / x-should-retry), spread the load over time, or fall back to another model or region."),
        "zh": ("上游过载",
               "529、503 或 overloaded_error 错误体。",
               "{host} 过载（{status} {error_type}）：\u201c{server}\u201d。",
               "按指数退避重试（遵循 retry-after / x-should-retry），错峰发送，或切换到其他模型或地区。"),
    }),
    ("upstream.server_error", "limits", _E, (), {
        "en": ("Upstream server error",
               "Any other 5xx from the upstream.",
               "{host} failed with {status} ({error_type}): \u201c{server}\u201d.",
               {"with_id": "A server-side fault, not your request: retry with backoff; if it persists, report it with request id {request_id}.",
                "no_id": "A server-side fault, not your request: retry with backoff; if it persists, report it to the provider with the time of the request."}),
        "zh": ("上游服务器错误",
               "上游返回的其他 5xx。",
               "{host} 出错，返回 {status}（{error_type}）：\u201c{server}\u201d。",
               {"with_id": "这是服务端故障，不是你的请求有问题：退避重试；若持续出现，带上请求 ID {request_id} 报告给服务商。",
                "no_id": "这是服务端故障，不是你的请求有问题：退避重试；若持续出现，带上请求时间报告给服务商。"}),
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
