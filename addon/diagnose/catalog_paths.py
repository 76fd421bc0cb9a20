"""The ``paths`` family of the finding catalog, in English and Chinese.

No route, /v1 or the endpoint twice, the wrong protocol, an unknown path or model.

Plain data: ``catalog.py`` assembles the families in order and documents the row format.
"""

from __future__ import annotations

from typing import Any

_E, _W, _I = "error", "warn", "info"

# (code, family, usual severity, other possible severities, {lang: (title, when, message, hint)})
ENTRIES: list[tuple[str, str, str, tuple[str, ...], dict[str, tuple[Any, Any, Any, Any]]]] = [
    ("path.no_route", "paths", _E, (), {
        "en": ("No proxy route for this path",
               "The proxy runs several named upstreams and the path matched none of them.",
               "The proxy has no route for {path}: {error}",
               "Point the client at one of the proxy's routes: base URL {proxy}/<route name> (the names given as --upstream name=URL)."),
        "zh": ("代理没有匹配此路径的路由",
               "代理配置了多个命名上游，而该路径一个也没有匹配。",
               "代理没有 {path} 的路由：{error}",
               "把客户端指向代理的某个路由：基础 URL 为 {proxy}/<路由名>（即 --upstream name=URL 中的名字）。"),
    }),
    ("path.double_v1", "paths", _E, (_W,), {
        "en": ("/v1 twice in the URL",
               "`/v1/v1/` in the forwarded URL: the base URL ends in /v1 and the client or the upstream prefix adds another (error unless the upstream answered 2xx).",
               {"client": "The request went to {url}: /v1 appears twice because the client's base URL already ends in /v1.",
                "prefix": "The request went to {url}: the upstream {upstream} already ends in /v1 and the client's path {client_path} starts with another /v1.",
                "prefix_anthropic": "The request went to {url}: the upstream {upstream} ends in /v1 and the Anthropic client adds /v1/messages itself."},
               {"client": "Set {env}={base} (not .../v1/v1).",
                "prefix": "Set {env}={base} (without /v1: the upstream already has it), or run the proxy with --upstream {fixed_upstream}.",
                "prefix_anthropic": "Run the proxy with --upstream {fixed_upstream} (without /v1) and keep {env}={base}."}),
        "zh": ("URL 中出现两次 /v1",
               "转发的 URL 中有 `/v1/v1/`：基础 URL 已以 /v1 结尾，客户端或上游前缀又加了一个（除非上游返回 2xx，否则为错误）。",
               {"client": "请求被发往 {url}：/v1 出现了两次，因为客户端的基础 URL 已经以 /v1 结尾。",
                "prefix": "请求被发往 {url}：上游 {upstream} 已以 /v1 结尾，客户端路径 {client_path} 又以 /v1 开头。",
                "prefix_anthropic": "请求被发往 {url}：上游 {upstream} 以 /v1 结尾，而 Anthropic 客户端会自己加上 /v1/messages。"},
               {"client": "设置 {env}={base}（不要写成 .../v1/v1）。",
                "prefix": "设置 {env}={base}（不带 /v1：上游地址里已经有了），或用 --upstream {fixed_upstream} 启动代理。",
                "prefix_anthropic": "用 --upstream {fixed_upstream}（不带 /v1）启动代理，并保持 {env}={base}。"}),
    }),
    ("path.double_endpoint", "paths", _E, (_W,), {
        "en": ("Endpoint repeated in the URL",
               "The path contains the endpoint twice (e.g. /chat/completions/chat/completions, /messages/v1/messages): the base URL already contained it.",
               "The request went to {url}: {endpoint} appears twice because the base URL already contains the endpoint.",
               {"client": "Set {env}={base} (the base URL stops before {endpoint}; the client appends the endpoint itself).",
                "prefix": "Run the proxy with --upstream {fixed_upstream} (the upstream URL stops before {endpoint}; the client appends the endpoint itself)."}),
        "zh": ("URL 中重复了接口路径",
               "路径中接口出现两次（如 /chat/completions/chat/completions、/messages/v1/messages）：基础 URL 已包含接口路径。",
               "请求被发往 {url}：{endpoint} 出现了两次，因为基础 URL 已经包含了接口路径。",
               {"client": "设置 {env}={base}（基础 URL 应在 {endpoint} 之前结束，客户端会自己拼上接口路径）。",
                "prefix": "用 --upstream {fixed_upstream} 启动代理（上游 URL 应在 {endpoint} 之前结束，客户端会自己拼上接口路径）。"}),
    }),
    ("path.protocol_mismatch", "paths", _E, (), {
        "en": ("API protocol not served by the upstream",
               "404 to an Anthropic path with an OpenAI-shaped error body, or to an OpenAI path with an Anthropic-shaped one.",
               {"anthropic_to_openai": "{host} answered the Anthropic request {path} with {status} in OpenAI's error format (\u201c{server}\u201d): it serves the OpenAI API, not Anthropic Messages.",
                "openai_to_anthropic": "{host} answered the OpenAI request {path} with {status} in Anthropic's error format (\u201c{server}\u201d): it serves Anthropic Messages, not the OpenAI API."},
               {"anthropic_to_openai": "Use an OpenAI-compatible client for this upstream (OPENAI_BASE_URL={proxy}{mount}/v1), or point ANTHROPIC_BASE_URL at the provider's Anthropic-compatible endpoint if it has one.",
                "openai_to_anthropic": "Use an Anthropic client for this upstream (ANTHROPIC_BASE_URL={proxy}{mount}, POST /v1/messages), or the provider's OpenAI-compatible endpoint if it has one."}),
        "zh": ("上游不支持该 API 协议",
               "Anthropic 路径返回 404 且错误体是 OpenAI 格式，或 OpenAI 路径返回 404 且错误体是 Anthropic 格式。",
               {"anthropic_to_openai": "{host} 以 OpenAI 的错误格式对 Anthropic 请求 {path} 返回 {status}（\u201c{server}\u201d）：它提供的是 OpenAI API，而不是 Anthropic Messages。",
                "openai_to_anthropic": "{host} 以 Anthropic 的错误格式对 OpenAI 请求 {path} 返回 {status}（\u201c{server}\u201d）：它提供的是 Anthropic Messages，而不是 OpenAI API。"},
               {"anthropic_to_openai": "对这个上游使用 OpenAI 兼容客户端（OPENAI_BASE_URL={proxy}{mount}/v1）；若服务商提供 Anthropic 兼容接口，把 ANTHROPIC_BASE_URL 指向它。",
                "openai_to_anthropic": "对这个上游使用 Anthropic 客户端（ANTHROPIC_BASE_URL={proxy}{mount}，POST /v1/messages）；若服务商提供 OpenAI 兼容接口，改用它。"}),
    }),
    ("path.missing_v1", "paths", _E, (), {
        "en": ("/v1 missing from the URL",
               "404 for an API path without a /v1 segment (e.g. /chat/completions).",
               "{host} answered {status} for {url}: the path has no /v1 (\u201c{server}\u201d).",
               "Set {env}={base} (with /v1)."),
        "zh": ("URL 缺少 /v1",
               "不含 /v1 段的 API 路径（如 /chat/completions）返回 404。",
               "{host} 对 {url} 返回 {status}：路径里没有 /v1（\u201c{server}\u201d）。",
               "设置 {env}={base}（带上 /v1）。"),
    }),
    ("path.not_found", "paths", _E, (), {
        "en": ("No such endpoint",
               "404 that no more specific rule explains.",
               "{host} has no endpoint at {url} ({status}: \u201c{server}\u201d).",
               "Check the base URL against the provider's docs: OpenAI-style clients use the URL up to /v1 (e.g. {env}={base}); Anthropic clients use the root without /v1."),
        "zh": ("接口不存在",
               "没有更具体规则可以解释的 404。",
               "{host} 上没有 {url} 这个接口（{status}：\u201c{server}\u201d）。",
               "对照服务商文档检查基础 URL：OpenAI 风格客户端使用到 /v1 为止的地址（如 {env}={base}）；Anthropic 客户端使用不带 /v1 的根地址。"),
    }),
    ("model.not_found", "paths", _E, (), {
        "en": ("Unknown model",
               "404/400 whose error names the model or says it does not exist.",
               "{host} does not know the model \u201c{model}\u201d ({status}: \u201c{server}\u201d).",
               {"openai": "Use the exact model id (case, hyphens, date suffix, provider prefix such as openai/...); list the ids this key can use: curl {models_url} -H \"Authorization: Bearer $OPENAI_API_KEY\".",
                "anthropic": "Use the exact model id (case, hyphens, date suffix); list the ids this key can use: curl {models_url} -H \"x-api-key: $ANTHROPIC_API_KEY\" -H \"anthropic-version: 2023-06-01\"."}),
        "zh": ("模型不存在",
               "404/400 且错误信息提到了模型名或说模型不存在。",
               "{host} 不认识模型\u201c{model}\u201d（{status}：\u201c{server}\u201d）。",
               {"openai": "使用准确的模型 ID（大小写、连字符、日期后缀、如 openai/... 的服务商前缀）；列出该密钥可用的模型：curl {models_url} -H \"Authorization: Bearer $OPENAI_API_KEY\"。",
                "anthropic": "使用准确的模型 ID（大小写、连字符、日期后缀）；列出该密钥可用的模型：curl {models_url} -H \"x-api-key: $ANTHROPIC_API_KEY\" -H \"anthropic-version: 2023-06-01\"。"}),
    }),
]
