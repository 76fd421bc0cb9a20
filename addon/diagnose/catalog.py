"""Every finding code, in English and Chinese: severity, title, when it fires, message and hint.

A finding stores ``code`` + ``params`` (the facts of the request); ``render`` turns them into
the one-line message and the concrete hint in either language, so stored findings can be
re-rendered later (``firsttoken show --lang zh``). Templates use ``str.format`` fields named
after params; an entry may have *variants* (a dict of templates chosen by
``params["variant"]``). Params named in ``LABELLED`` are codes translated through ``LABELS``.
``docs/diagnoses.md`` is generated from this file (``firsttoken diagnoses --markdown``).
"""

from __future__ import annotations

import string
from dataclasses import dataclass, field
from typing import Any

LANGS = ("en", "zh")
SEVERITIES = ("error", "warn", "info")
#: params whose values are label codes (or lists of them), shown translated
LABELLED = ("facts", "largest")

#: family -> (en, zh) heading, in the order rules run and docs list them
FAMILIES: dict[str, tuple[str, str]] = {
    "auth": ("Authentication", "认证"),
    "paths": ("Paths and models", "路径与模型"),
    "limits": ("Request limits and upstream errors", "请求限制与上游错误"),
    "connectivity": ("Connectivity", "连接"),
    "streams": ("Streams and response bodies", "流与响应体"),
    "latency": ("Latency verdicts and prompt size", "延迟判定与提示词大小"),
}

#: label codes used inside params (key facts, prompt parts)
LABELS: dict[str, dict[str, str]] = {
    "leading_whitespace": {"en": "leading whitespace", "zh": "开头有空白"},
    "trailing_whitespace": {"en": "trailing whitespace", "zh": "末尾有空白"},
    "newline": {"en": "a line break", "zh": "换行符"},
    "escaped_newline": {"en": "a literal \\n (an escaped line break)", "zh": "字面的 \\n（被转义的换行）"},
    "inner_whitespace": {"en": "a space inside the key", "zh": "密钥中间有空格"},
    "system": {"en": "the system prompt", "zh": "系统提示词"},
    "tools": {"en": "the tool definitions", "zh": "工具定义"},
    "history": {"en": "the earlier turns", "zh": "之前的对话轮次"},
    "last_user": {"en": "the last user message", "zh": "最后一条用户消息"},
}

_E, _W, _I = "error", "warn", "info"

# (code, family, usual severity, other possible severities, {lang: (title, when, message, hint)})
ENTRIES: list[tuple[str, str, str, tuple[str, ...], dict[str, tuple[Any, Any, Any, Any]]]] = [
    # ---------------------------------------------------------------- authentication
    ("auth.missing", "auth", _E, (), {
        "en": ("No API key sent",
               "401/403 and the request carried no credential header, or an empty one.",
               {"missing": "{host} answered {status} and the request carried no API key (no Authorization or x-api-key header).",
                "empty": "{host} answered {status} and the {header} header was empty."},
               "Set {env} for the client (sent as `{expected}`), or pass the key explicitly (api_key=...)."),
        "zh": ("未发送 API 密钥",
               "401/403，且请求没有携带凭据头或凭据为空。",
               {"missing": "{host} 返回 {status}，请求中没有 API 密钥（没有 Authorization 或 x-api-key 头）。",
                "empty": "{host} 返回 {status}，{header} 头的值为空。"},
               "为客户端设置 {env}（以 `{expected}` 发送），或在代码中显式传入密钥（api_key=...）。"),
    }),
    ("auth.whitespace", "auth", _E, (_W,), {
        "en": ("Whitespace or line break in the key",
               "The key contains whitespace, a line break or a literal \\n (error on 401/403, else warning).",
               "The API key ({fingerprint}, {length} chars, in {header}) contains {facts}; {host} answered {status}.",
               "Re-set {env} without spaces, line breaks or a literal \\n: in a .env file write {env}=sk-... with nothing after it; "
               "in a shell: export {env}=\"$(printf %s \"${env}\" | tr -d '[:space:]')\"."),
        "zh": ("密钥中有空白或换行",
               "密钥含空白、换行或字面 \\n（401/403 时为错误，否则为警告）。",
               "API 密钥（{fingerprint}，{length} 个字符，位于 {header}）包含{facts}；{host} 返回 {status}。",
               "重新设置 {env}，去掉空格、换行和字面的 \\n：.env 文件中写成 {env}=sk-...，后面不要有任何字符；"
               "在 shell 中：export {env}=\"$(printf %s \"${env}\" | tr -d '[:space:]')\"。"),
    }),
    ("auth.quoted", "auth", _E, (_W,), {
        "en": ("Quotes around the key",
               "The key value starts and ends with a quote character (error on 401/403, else warning).",
               "The API key ({fingerprint}, {length} chars, in {header}) is wrapped in quote characters that were sent as part of it; {host} answered {status}.",
               "Remove the quotes from the value of {env}: docker --env-file, systemd EnvironmentFile and some .env loaders keep them literally; write {env}=sk-... without quotes."),
        "zh": ("密钥被引号包住",
               "密钥以引号开头并以引号结尾（401/403 时为错误，否则为警告）。",
               "API 密钥（{fingerprint}，{length} 个字符，位于 {header}）被引号包住，引号也作为密钥的一部分发送了；{host} 返回 {status}。",
               "去掉 {env} 值两边的引号：docker --env-file、systemd EnvironmentFile 以及部分 .env 加载器会原样保留引号；写成 {env}=sk-...，不加引号。"),
    }),
    ("auth.unexpanded", "auth", _E, (_W,), {
        "en": ("Unexpanded variable instead of a key",
               "The key is literally a variable name such as $OPENAI_API_KEY (error on 401/403, else warning).",
               "The API key sent is the literal text {fingerprint}: a variable that was never expanded; {host} answered {status}.",
               "Export the variable before starting the client (export {env}=sk-...) and use double quotes, not single quotes, where it is referenced; in JSON/YAML configs put the key itself or use that tool's own interpolation syntax."),
        "zh": ("变量未展开",
               "发送的密钥是字面的变量名，例如 $OPENAI_API_KEY（401/403 时为错误，否则为警告）。",
               "发送的 API 密钥是字面文本 {fingerprint}：一个没有被展开的变量；{host} 返回 {status}。",
               "启动客户端前先 export {env}=sk-...，引用处用双引号而不是单引号；在 JSON/YAML 配置里直接写密钥，或使用该工具自己的变量插值语法。"),
    }),
    ("auth.non_ascii", "auth", _E, (_W,), {
        "en": ("Non-ASCII characters in the key",
               "The key contains characters outside ASCII, e.g. smart quotes or a zero-width space (error on 401/403, else warning).",
               "The API key ({fingerprint}, {length} chars, in {header}) contains non-ASCII characters (a smart quote, a zero-width or full-width character from copy-paste); {host} answered {status}.",
               "Copy the key again as plain text and re-set {env}; find the culprit with: printf %s \"${env}\" | LC_ALL=C grep -n '[^ -~]'."),
        "zh": ("密钥含非 ASCII 字符",
               "密钥中有 ASCII 以外的字符，如中文引号、零宽空格（401/403 时为错误，否则为警告）。",
               "API 密钥（{fingerprint}，{length} 个字符，位于 {header}）含有非 ASCII 字符（复制粘贴带入的中文引号、零宽或全角字符）；{host} 返回 {status}。",
               "以纯文本重新复制密钥并重新设置 {env}；用以下命令找出问题字符：printf %s \"${env}\" | LC_ALL=C grep -n '[^ -~]'。"),
    }),
    ("auth.no_bearer", "auth", _E, (_W,), {
        "en": ("Authorization without \"Bearer\"",
               "The Authorization header has no `Bearer ` scheme, or a lower-case one the server refused (error on 401/403, else warning).",
               {"no_scheme": "The Authorization header carries the key ({fingerprint}) without the `Bearer ` scheme; {host} answered {status}.",
                "bearer_case": "The Authorization scheme is written `{scheme}` instead of `Bearer`; {host} answered {status}."},
               {"no_scheme": "Send `Authorization: Bearer <key>`: with curl -H \"Authorization: Bearer ${env}\"; the SDKs add it themselves when you set {env}.",
                "bearer_case": "Write the scheme as `Bearer` with a capital B: `Authorization: Bearer <key>`."}),
        "zh": ("Authorization 缺少 \"Bearer\"",
               "Authorization 头没有 `Bearer ` 前缀，或是服务器不接受的小写形式（401/403 时为错误，否则为警告）。",
               {"no_scheme": "Authorization 头直接携带了密钥（{fingerprint}），没有 `Bearer ` 前缀；{host} 返回 {status}。",
                "bearer_case": "Authorization 的方案写成了 `{scheme}` 而不是 `Bearer`；{host} 返回 {status}。"},
               {"no_scheme": "发送 `Authorization: Bearer <密钥>`：curl 用 -H \"Authorization: Bearer ${env}\"；设置 {env} 后 SDK 会自动加上。",
                "bearer_case": "把方案写成首字母大写的 `Bearer`：`Authorization: Bearer <密钥>`。"}),
    }),
    ("auth.bearer_in_api_key", "auth", _E, (_W,), {
        "en": ("\"Bearer\" inside x-api-key",
               "An x-api-key / api-key header whose value starts with `Bearer ` (error on 401/403, else warning).",
               "The {header} header contains `Bearer <key>` ({fingerprint}); that header takes the bare key. {host} answered {status}.",
               "Send `x-api-key: <key>` without `Bearer `, or send the key as `Authorization: Bearer <key>` instead. Claude Code sends ANTHROPIC_API_KEY as x-api-key and ANTHROPIC_AUTH_TOKEN as Authorization: Bearer."),
        "zh": ("x-api-key 中带了 \"Bearer\"",
               "x-api-key / api-key 头的值以 `Bearer ` 开头（401/403 时为错误，否则为警告）。",
               "{header} 头的值是 `Bearer <密钥>`（{fingerprint}），而该头只接受裸密钥。{host} 返回 {status}。",
               "发送 `x-api-key: <密钥>`，不要带 `Bearer `；或改用 `Authorization: Bearer <密钥>`。Claude Code 会把 ANTHROPIC_API_KEY 作为 x-api-key 发送，把 ANTHROPIC_AUTH_TOKEN 作为 Authorization: Bearer 发送。"),
    }),
    ("auth.wrong_header", "auth", _E, (), {
        "en": ("Key in the wrong header",
               "x-api-key sent to an OpenAI-style path that answered 401/403, or only Authorization: Bearer sent to an Anthropic path that answered 401/403.",
               {"x_api_key": "The key ({fingerprint}) was sent as `x-api-key`, but {path} is an OpenAI-style endpoint that reads `Authorization: Bearer`; {host} answered {status}.",
                "bearer": "Only `Authorization: Bearer` ({fingerprint}) was sent to the Anthropic endpoint {path}; Anthropic API keys go in `x-api-key` (Bearer is for OAuth tokens). {host} answered {status}."},
               {"x_api_key": "Send `Authorization: Bearer <key>`: use the openai SDK with OPENAI_API_KEY, or curl -H \"Authorization: Bearer $OPENAI_API_KEY\"; x-api-key is Anthropic's header.",
                "bearer": "Set ANTHROPIC_API_KEY (sent as x-api-key) instead of ANTHROPIC_AUTH_TOKEN (sent as Authorization: Bearer); with curl: -H \"x-api-key: $ANTHROPIC_API_KEY\" -H \"anthropic-version: 2023-06-01\"."}),
        "zh": ("密钥放错了请求头",
               "向 OpenAI 风格路径发送了 x-api-key 且返回 401/403；或向 Anthropic 路径只发送了 Authorization: Bearer 且返回 401/403。",
               {"x_api_key": "密钥（{fingerprint}）以 `x-api-key` 发送，但 {path} 是读取 `Authorization: Bearer` 的 OpenAI 风格接口；{host} 返回 {status}。",
                "bearer": "向 Anthropic 接口 {path} 只发送了 `Authorization: Bearer`（{fingerprint}）；Anthropic 的 API 密钥应放在 `x-api-key`（Bearer 用于 OAuth 令牌）。{host} 返回 {status}。"},
               {"x_api_key": "发送 `Authorization: Bearer <密钥>`：使用 openai SDK 并设置 OPENAI_API_KEY，或 curl -H \"Authorization: Bearer $OPENAI_API_KEY\"；x-api-key 是 Anthropic 的请求头。",
                "bearer": "设置 ANTHROPIC_API_KEY（以 x-api-key 发送），而不是 ANTHROPIC_AUTH_TOKEN（以 Authorization: Bearer 发送）；curl 写法：-H \"x-api-key: $ANTHROPIC_API_KEY\" -H \"anthropic-version: 2023-06-01\"。"}),
    }),
    ("auth.conflict", "auth", _E, (_W,), {
        "en": ("Two different credentials",
               "Both an Authorization Bearer token and a different API key were sent, as Claude Code does when a login and ANTHROPIC_API_KEY coexist (error on 401/403, else warning).",
               "Two different credentials were sent ({header}: {fingerprint} and another key); the upstream may pick either one. {host} answered {status}.",
               "Keep one: for Claude Code either run `claude /logout` (use the API key) or `unset ANTHROPIC_API_KEY` (use the login); don't set ANTHROPIC_AUTH_TOKEN and ANTHROPIC_API_KEY together."),
        "zh": ("同时发送了两个不同的凭据",
               "同时发送了 Authorization Bearer 令牌和另一个 API 密钥，Claude Code 在已登录又设置了 ANTHROPIC_API_KEY 时就会这样（401/403 时为错误，否则为警告）。",
               "请求发送了两个不同的凭据（{header}：{fingerprint} 和另一个密钥），上游可能任选其一。{host} 返回 {status}。",
               "只保留一个：Claude Code 可以运行 `claude /logout`（改用 API 密钥），或 `unset ANTHROPIC_API_KEY`（改用登录）；不要同时设置 ANTHROPIC_AUTH_TOKEN 和 ANTHROPIC_API_KEY。"),
    }),
    ("auth.rejected", "auth", _E, (), {
        "en": ("Key refused by the upstream",
               "A well-formed key answered with 401/403 (no other key problem explains it).",
               "{host} refused the key {fingerprint} ({length} chars, in {header}) with {status}: \u201c{server}\u201d",
               {"401": "The key is well-formed but not valid here: check that it belongs to this provider ({host}) and project, and is not revoked or expired; create a new key and re-set {env}.",
                "403": "The key was accepted but is not allowed to do this: check the project/organisation permissions, model access, IP allow-lists and region restrictions for {fingerprint}."}),
        "zh": ("上游拒绝了密钥",
               "格式正常的密钥收到 401/403（且没有其他密钥问题可以解释）。",
               "{host} 以 {status} 拒绝了密钥 {fingerprint}（{length} 个字符，位于 {header}）：\u201c{server}\u201d",
               {"401": "密钥格式正确，但在这里无效：确认它属于该服务商（{host}）和该项目、没有被吊销或过期；必要时新建密钥并重新设置 {env}。",
                "403": "密钥有效但无权执行此操作：检查 {fingerprint} 所在项目/组织的权限、模型访问权限、IP 白名单和地区限制。"}),
    }),
    # ---------------------------------------------------------------- paths and models
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
    # ---------------------------------------------------------------- request limits, upstream errors
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
    # ---------------------------------------------------------------- connectivity
    ("upstream.unreachable", "connectivity", _E, (), {
        "en": ("Upstream unreachable",
               "No response: the proxy could not connect (DNS failure, connection refused, TLS verification failed, timeout...).",
               {"dns": "The upstream host {host} does not resolve: {error}.",
                "refused": "Nothing accepted a connection at {host}:{port} (connection refused): {error}.",
                "tls": "The TLS certificate of {host}:{port} was rejected: {error}.",
                "not_tls": "{host}:{port} does not speak TLS, but the upstream is given as https://: {error}.",
                "timeout": "Connecting to {host}:{port} timed out: {error}.",
                "network": "There is no network route to {host}:{port}: {error}.",
                "not_http": "{host}:{port} answered something that is not HTTP: {error}.",
                "other": "The proxy could not reach {host}:{port}: {error}."},
               {"dns": "Check the host name in --upstream ({upstream}) for typos, and your DNS or VPN (getent hosts {host}).",
                "refused": "Start the upstream server, or fix the port in --upstream ({upstream}); check that it listens on that address (0.0.0.0 vs 127.0.0.1).",
                "tls": "If a private CA or a corporate proxy signs it, trust that CA: --set ssl_verify_upstream_trusted_ca=/path/ca.pem; check that the host name matches the certificate; only for a local test server, --insecure-upstream.",
                "not_tls": "Use http:// in --upstream: http://{host}:{port}{prefix}.",
                "timeout": "A firewall drops the packets or the host is down: check the address and port, the VPN, and whether an HTTP proxy is required (HTTPS_PROXY).",
                "network": "Check the network (VPN, Wi-Fi, routes) and the address in --upstream ({upstream}).",
                "not_http": "Check the port in --upstream ({upstream}); if the server speaks TLS, use https://.",
                "other": "Check --upstream ({upstream}) and that the server is up."}),
        "zh": ("无法连接上游",
               "没有响应：代理无法建立连接（DNS 失败、连接被拒绝、TLS 校验失败、超时等）。",
               {"dns": "上游主机名 {host} 无法解析：{error}。",
                "refused": "{host}:{port} 拒绝连接（connection refused）：{error}。",
                "tls": "{host}:{port} 的 TLS 证书未通过校验：{error}。",
                "not_tls": "{host}:{port} 不支持 TLS，但上游写的是 https://：{error}。",
                "timeout": "连接 {host}:{port} 超时：{error}。",
                "network": "没有到 {host}:{port} 的网络路由：{error}。",
                "not_http": "{host}:{port} 返回的不是 HTTP：{error}。",
                "other": "代理无法连接 {host}:{port}：{error}。"},
               {"dns": "检查 --upstream（{upstream}）中的主机名是否拼错，并检查 DNS 或 VPN（getent hosts {host}）。",
                "refused": "启动上游服务，或修正 --upstream（{upstream}）中的端口；确认服务监听在该地址上（0.0.0.0 还是 127.0.0.1）。",
                "tls": "如果证书由私有 CA 或公司代理签发，信任该 CA：--set ssl_verify_upstream_trusted_ca=/path/ca.pem；确认主机名与证书一致；仅对本地测试服务器使用 --insecure-upstream。",
                "not_tls": "在 --upstream 中使用 http://：http://{host}:{port}{prefix}。",
                "timeout": "防火墙丢弃了数据包或主机已宕机：检查地址和端口、VPN，以及是否需要 HTTP 代理（HTTPS_PROXY）。",
                "network": "检查网络（VPN、Wi-Fi、路由）以及 --upstream（{upstream}）中的地址。",
                "not_http": "检查 --upstream（{upstream}）中的端口；如果服务器使用 TLS，请用 https://。",
                "other": "检查 --upstream（{upstream}）以及服务器是否在运行。"}),
    }),
    ("upstream.closed", "connectivity", _E, (), {
        "en": ("Upstream closed the connection",
               "The server closed the connection before or while sending its response.",
               {"before_response": "{host}:{port} closed the connection before sending a response: {error}.",
                "mid_response": "{host} closed the connection while sending the response (status {status}, after {events} token events and {total_ms:,.0f} ms): {error}."},
               {"before_response": "The server crashed, refused the request, or expects TLS (if it is HTTPS, use https:// in --upstream); check the server's logs.",
                "mid_response": "The answer is incomplete: retry; if long answers are always cut, a gateway in between (idle/read timeout, maximum response size) is closing them."}),
        "zh": ("上游关闭了连接",
               "服务器在发送响应之前或发送过程中关闭了连接。",
               {"before_response": "{host}:{port} 在发送响应前关闭了连接：{error}。",
                "mid_response": "{host} 在发送响应的过程中关闭了连接（状态 {status}，已收到 {events} 个 token 事件，{total_ms:,.0f} 毫秒）：{error}。"},
               {"before_response": "服务器崩溃、拒绝了请求，或者它要求 TLS（若是 HTTPS，请在 --upstream 中使用 https://）；查看服务器日志。",
                "mid_response": "回答不完整：请重试；如果较长的回答总被截断，说明中间某个网关（空闲/读取超时、响应大小上限）在关闭连接。"}),
    }),
    ("client.aborted", "connectivity", _W, (_I,), {
        "en": ("Client disconnected",
               "The client closed the connection before the response ended (warning before the first token, info while streaming).",
               {"before_headers": "The client gave up after {total_ms:,.0f} ms, before {host} sent response headers.",
                "before_tokens": "The client gave up after {total_ms:,.0f} ms: headers came at {ttfb_ms:,.0f} ms but no token yet.",
                "streaming": "The client stopped reading after {total_ms:,.0f} ms and {events} token events, while the stream was still running."},
               {"before_headers": "The client's timeout is shorter than this upstream's response time: raise it (openai/anthropic SDK: timeout=..., Claude Code: API_TIMEOUT_MS, curl: --max-time).",
                "before_tokens": "The client's timeout is shorter than this upstream's time to first token: raise it (openai/anthropic SDK: timeout=..., Claude Code: API_TIMEOUT_MS, curl: --max-time).",
                "streaming": "Fine if it was cancelled on purpose; otherwise a client read timeout closed it (longest gap between tokens: {itl_max_ms:,.0f} ms): raise the read timeout."}),
        "zh": ("客户端断开了连接",
               "客户端在响应结束前关闭了连接（首个 token 之前为警告，流式输出中为提示）。",
               {"before_headers": "客户端在 {total_ms:,.0f} 毫秒后放弃，此时 {host} 还没有返回响应头。",
                "before_tokens": "客户端在 {total_ms:,.0f} 毫秒后放弃：响应头在 {ttfb_ms:,.0f} 毫秒到达，但还没有任何 token。",
                "streaming": "客户端在 {total_ms:,.0f} 毫秒、收到 {events} 个 token 事件后停止读取，而流仍在进行。"},
               {"before_headers": "客户端超时比上游的响应时间短：调大超时（openai/anthropic SDK：timeout=...，Claude Code：API_TIMEOUT_MS，curl：--max-time）。",
                "before_tokens": "客户端超时比上游的首 token 时间短：调大超时（openai/anthropic SDK：timeout=...，Claude Code：API_TIMEOUT_MS，curl：--max-time）。",
                "streaming": "若是主动取消则无妨；否则是客户端的读取超时关闭了连接（token 之间最长间隔 {itl_max_ms:,.0f} 毫秒）：调大读取超时。"}),
    }),
    # ---------------------------------------------------------------- streams and bodies
    ("stream.error_event", "streams", _E, (), {
        "en": ("Error inside a 200 stream",
               "The stream answered 200, then carried an error event.",
               "The stream started (200) but {host} sent an error after {events} token events: \u201c{server}\u201d ({error_type}).",
               "The answer is incomplete: retry (overloaded and server errors are transient); make sure your client treats in-stream error events as failures."),
        "zh": ("200 流中出现错误",
               "流以 200 开始，随后出现了错误事件。",
               "流已开始（200），但 {host} 在 {events} 个 token 事件后发来错误：\u201c{server}\u201d（{error_type}）。",
               "回答不完整：请重试（过载和服务器错误通常是暂时的）；确保客户端把流中的错误事件当作失败处理。"),
    }),
    ("stream.truncated", "streams", _E, (_W,), {
        "en": ("Stream ended without its terminator",
               "A 200 event stream ended cleanly but without [DONE] / message_stop / response.completed (warning when the model reported a finish reason).",
               {"cut": "The stream ended after {events} token events without {terminator} and without a finish reason: the answer is probably cut off.",
                "finished": "The stream ended without {terminator}, although the model finished (finish_reason {finish_reason}) after {events} token events."},
               {"cut": "Retry; if it repeats, a gateway in between closes long streams (check its timeouts) or the server drops the end of the stream.",
                "finished": "The server does not send {terminator}: clients that wait for it may hang or report an error; report it to the server's maintainers."}),
        "zh": ("流没有正常结束",
               "200 的事件流结束了，但没有 [DONE] / message_stop / response.completed（模型给出结束原因时为警告）。",
               {"cut": "流在 {events} 个 token 事件后结束，既没有 {terminator} 也没有结束原因：回答很可能被截断了。",
                "finished": "流结束时没有 {terminator}，尽管模型在 {events} 个 token 事件后已结束（finish_reason {finish_reason}）。"},
               {"cut": "请重试；如果反复出现，说明中间的网关在关闭较长的流（检查其超时），或服务器丢掉了流的结尾。",
                "finished": "服务器不发送 {terminator}：等待它的客户端可能挂起或报错；请向服务器维护者报告。"}),
    }),
    ("stream.not_sse", "streams", _E, (), {
        "en": ("Stream requested, plain body returned",
               "The request asked for \"stream\": true but the 200 response is not text/event-stream.",
               "The client asked for a stream but {host} answered with Content-Type {content_type}: one body after {total_ms:,.0f} ms.",
               "The upstream (or a gateway in between) ignores \"stream\": true here: use an endpoint or model that streams, or enable streaming in the gateway; clients expecting SSE may show nothing."),
        "zh": ("请求了流式，返回的却是普通响应体",
               "请求带了 \"stream\": true，但 200 响应不是 text/event-stream。",
               "客户端请求了流式输出，但 {host} 返回的 Content-Type 是 {content_type}：在 {total_ms:,.0f} 毫秒后一次性返回了整个响应体。",
               "上游（或中间的网关）在这里忽略了 \"stream\": true：换用支持流式的接口或模型，或在网关中开启流式；期待 SSE 的客户端可能什么都显示不出来。"),
    }),
    ("stream.buffered", "streams", _W, (), {
        "en": ("Stream buffered on the way",
               "At least {BUFFERED_SHARE:.0%} of the token events (min. {BUFFERED_MIN_EVENTS}) arrived within {BUFFERED_WINDOW_MS:.0f} ms (or {BUFFERED_WINDOW_SHARE:.0%} of the response) at the end, faster than any model generates, after the client had waited at least {BUFFERED_MIN_WAIT_MS:.0f} ms for nothing.",
               "{burst_events} of {events} token events arrived within {burst_ms:,.1f} ms at the very end; for {wait_ms:,.0f} ms after the headers the client received no token.",
               "Something between the model and the client buffers the stream: for nginx set `proxy_buffering off;` (or have the upstream send `X-Accel-Buffering: no`), turn off response buffering/compression in gateways and CDNs, and check the HTTP(S)_PROXY in between."),
        "zh": ("流在途中被缓冲",
               "至少 {BUFFERED_SHARE:.0%} 的 token 事件（至少 {BUFFERED_MIN_EVENTS} 个）在末尾 {BUFFERED_WINDOW_MS:.0f} 毫秒（或响应时长的 {BUFFERED_WINDOW_SHARE:.0%}）内集中到达，快于任何模型的生成速度，此前客户端至少空等了 {BUFFERED_MIN_WAIT_MS:.0f} 毫秒。",
               "{events} 个 token 事件中有 {burst_events} 个在最后 {burst_ms:,.1f} 毫秒内集中到达；响应头之后客户端有 {wait_ms:,.0f} 毫秒没有收到任何 token。",
               "模型和客户端之间有东西在缓冲流：nginx 设置 `proxy_buffering off;`（或让上游发送 `X-Accel-Buffering: no`），关闭网关和 CDN 的响应缓冲/压缩，并检查中间的 HTTP(S)_PROXY。"),
    }),
    ("stream.stall", "streams", _W, (), {
        "en": ("Stall inside the stream",
               "The longest gap between two token events exceeds --stall-ms.",
               "The stream paused {itl_max_ms:,.0f} ms between two tokens (limit {stall_ms:,.0f} ms), after token event {at_event} at {at_ms:,.0f} ms.",
               "Pauses inside an answer come from the upstream (load, a long tool call) or a proxy flushing late: make sure client read timeouts exceed {itl_max_ms:,.0f} ms; raise --stall-ms if such pauses are expected."),
        "zh": ("流中出现停顿",
               "两个 token 事件之间的最长间隔超过 --stall-ms。",
               "流在两个 token 之间停顿了 {itl_max_ms:,.0f} 毫秒（阈值 {stall_ms:,.0f} 毫秒），发生在第 {at_event} 个 token 事件之后、{at_ms:,.0f} 毫秒处。",
               "回答中的停顿来自上游（负载、生成较长的工具调用）或中间代理延迟刷新：确保客户端读取超时大于 {itl_max_ms:,.0f} 毫秒；如果这种停顿属于正常，调大 --stall-ms。"),
    }),
    ("response.no_choices", "streams", _E, (), {
        "en": ("200 without choices or content",
               "A 200 body or chunk that has neither choices/content nor an error.",
               "{host} answered 200 but without choices or content: \u201c{sample}\u201d.",
               "Often a content filter, a gateway error wrapped in a 200, or a provider-specific body: read the body above; the client gets an empty answer."),
        "zh": ("200 响应中没有 choices 或内容",
               "200 的响应体或数据块既没有 choices/content，也没有错误。",
               "{host} 返回 200，但没有 choices 或内容：\u201c{sample}\u201d。",
               "常见原因是内容过滤、网关把错误包在 200 里，或服务商特有的响应格式：查看上面的内容；客户端会得到空回答。"),
    }),
    ("response.malformed", "streams", _W, (_E,), {
        "en": ("Malformed events",
               "Data payloads that are not valid JSON (error when no token could be read at all).",
               "{count} event(s) of the response were not valid JSON, e.g. \u201c{sample}\u201d.",
               "The upstream or a proxy in between corrupts or splits events (a gateway rewriting the stream, a wrong Content-Encoding, a server bug); clients may drop these tokens or fail."),
        "zh": ("事件格式错误",
               "数据负载不是合法 JSON（完全读不到 token 时为错误）。",
               "响应中有 {count} 个事件不是合法 JSON，例如\u201c{sample}\u201d。",
               "上游或中间代理损坏或拆分了事件（网关改写了流、Content-Encoding 错误、服务器缺陷）；客户端可能丢掉这些 token 或直接报错。"),
    }),
    ("usage.missing", "streams", _I, (), {
        "en": ("No usage in the stream",
               "A streamed 200 response that reported no token usage.",
               "The streamed response reported no token usage; the counts shown are firsttoken's estimates ({output_tokens} output tokens).",
               {"chat": "Add \"stream_options\": {{\"include_usage\": true}} to the request; if it is already there, the upstream ignores it.",
                "other": "The upstream does not report usage for this API; firsttoken's estimates stand in."}),
        "zh": ("流中没有用量信息",
               "流式 200 响应没有报告 token 用量。",
               "流式响应没有报告 token 用量；显示的数量是 firsttoken 的估算（{output_tokens} 个输出 token）。",
               {"chat": "在请求中加入 \"stream_options\": {{\"include_usage\": true}}；如果已经加了，说明上游忽略了它。",
                "other": "上游不为此 API 报告用量；以 firsttoken 的估算代替。"}),
    }),
    ("stream.not_requested", "streams", _I, (), {
        "en": ("Not streamed",
               "A 200 answer to an LLM request that did not ask for streaming: TTFT cannot be measured.",
               "The request did not ask for streaming, so TTFT cannot be measured: the client waited {total_ms:,.0f} ms for the whole answer.",
               "Send \"stream\": true (openai: stream=True; anthropic: client.messages.stream(...)) to receive tokens as they are generated."),
        "zh": ("未使用流式",
               "LLM 请求没有要求流式输出，返回 200：无法测量 TTFT。",
               "请求没有要求流式输出，因此无法测量 TTFT：客户端等了 {total_ms:,.0f} 毫秒才拿到完整回答。",
               "发送 \"stream\": true（openai：stream=True；anthropic：client.messages.stream(...)），即可边生成边接收 token。"),
    }),
    # ---------------------------------------------------------------- latency
    ("latency.network", "latency", _W, (), {
        "en": ("Slow before the headers (network, gateway, queue)",
               "TTFB is at least half of TTFT and either above {NETWORK_TTFB_MS:.0f} ms, or above {NETWORK_BASELINE_RATIO:.0f}x the median of the last {BASELINE_MIN_SAMPLES}+ warm requests to the same model (and above {NETWORK_BASELINE_FLOOR_MS:.0f} ms).",
               {"absolute": "TTFB was {ttfb_ms:,.0f} ms of a {ttft_ms:,.0f} ms TTFT: the time went before {host} sent response headers, not to generation.",
                "baseline": "TTFB was {ttfb_ms:,.0f} ms, {ratio:.1f}x the median of the last {samples} requests to {model} ({median_ms:,.0f} ms): the extra wait came before the response headers."},
               "Look before the model: the network path or region (connecting took {connect_ms:,.0f} ms), a gateway or proxy in between, or a provider-side queue (overload, rate-limit tier); compare with curl -w '%{{time_starttransfer}}' against the upstream directly."),
        "zh": ("响应头之前很慢（网络、网关、排队）",
               "TTFB 至少占 TTFT 的一半，并且超过 {NETWORK_TTFB_MS:.0f} 毫秒，或超过同模型最近 {BASELINE_MIN_SAMPLES} 个以上热连接请求中位数的 {NETWORK_BASELINE_RATIO:.0f} 倍（且超过 {NETWORK_BASELINE_FLOOR_MS:.0f} 毫秒）。",
               {"absolute": "在 {ttft_ms:,.0f} 毫秒的 TTFT 中，TTFB 占了 {ttfb_ms:,.0f} 毫秒：时间花在 {host} 返回响应头之前，而不是生成上。",
                "baseline": "TTFB 为 {ttfb_ms:,.0f} 毫秒，是最近 {samples} 个 {model} 请求中位数（{median_ms:,.0f} 毫秒）的 {ratio:.1f} 倍：多出的等待发生在响应头之前。"},
               "问题在模型之前：网络路径或地区（建立连接用了 {connect_ms:,.0f} 毫秒）、中间的网关或代理，或服务商侧排队（过载、限流等级）；用 curl -w '%{{time_starttransfer}}' 直连上游对比。"),
    }),
    ("latency.prefill", "latency", _W, (), {
        "en": ("Slow prompt processing (prefill)",
               "The gap between headers and first token is more than half of TTFT and above {PREFILL_GAP_MS:.0f} ms, for a prompt of at least {PREFILL_MIN_TOKENS} tokens.",
               "{gap_ms:,.0f} ms passed between the headers and the first token (TTFT {ttft_ms:,.0f} ms) for {prompt_tokens:,} prompt tokens: {ms_per_1k:,.0f} ms per 1k tokens of prefill.",
               "Send fewer tokens (largest part: {largest}, {largest_tokens:,} tokens) or reuse a cached prefix: keep the start of the prompt identical across calls (OpenAI caches prefixes of 1024+ tokens automatically; Anthropic needs cache_control on the last stable block)."),
        "zh": ("提示词处理（prefill）缓慢",
               "响应头到首 token 的间隔超过 TTFT 的一半且超过 {PREFILL_GAP_MS:.0f} 毫秒，且提示词至少 {PREFILL_MIN_TOKENS} token。",
               "响应头之后过了 {gap_ms:,.0f} 毫秒才出现首 token（TTFT {ttft_ms:,.0f} 毫秒），提示词 {prompt_tokens:,} token：prefill 约每 1k token {ms_per_1k:,.0f} 毫秒。",
               "减少发送的 token（最大部分：{largest}，{largest_tokens:,} token），或复用缓存前缀：让提示词开头在多次调用间保持完全一致（OpenAI 自动缓存 1024 token 以上的前缀；Anthropic 需要在最后一个稳定块上加 cache_control）。"),
    }),
    ("latency.reasoning", "latency", _I, (), {
        "en": ("Reasoning before the answer",
               "Reasoning ran at least {REASONING_MS:.0f} ms (and {REASONING_SHARE:.0%} of TTFT) before the first visible token: streamed reasoning tokens, or hidden reasoning tokens reported in usage.",
               {"visible": "The first (reasoning) token came at {first_token_ms:,.0f} ms but the first visible token only at {ttft_ms:,.0f} ms: {reasoning_ms:,.0f} ms of reasoning before any answer text.",
                "hidden": "TTFT was {ttft_ms:,.0f} ms and the upstream reported {reasoning_tokens} reasoning tokens: the model reasoned (unstreamed) before answering."},
               "Expected for reasoning models: lower the effort (OpenAI \"reasoning_effort\": \"low\", Anthropic thinking.budget_tokens) or use a non-reasoning model where TTFT matters; show the reasoning as progress."),
        "zh": ("回答前在推理",
               "首个可见 token 之前推理了至少 {REASONING_MS:.0f} 毫秒（且占 TTFT 的 {REASONING_SHARE:.0%}）：流式的推理 token，或用量中报告的隐藏推理 token。",
               {"visible": "第一个（推理）token 在 {first_token_ms:,.0f} 毫秒到达，第一个可见 token 直到 {ttft_ms:,.0f} 毫秒才出现：回答文字之前推理了 {reasoning_ms:,.0f} 毫秒。",
                "hidden": "TTFT 为 {ttft_ms:,.0f} 毫秒，上游报告了 {reasoning_tokens} 个推理 token：模型在回答前进行了（未流式输出的）推理。"},
               "推理模型的正常现象：降低推理强度（OpenAI \"reasoning_effort\": \"low\"，Anthropic thinking.budget_tokens），或在看重 TTFT 的场景使用非推理模型；把推理过程作为进度展示给用户。"),
    }),
    ("latency.cold_connection", "latency", _I, (), {
        "en": ("Cold connection",
               "The request opened a new upstream connection and connecting took at least {COLD_CONNECT_MS:.0f} ms; exclude it from baselines.",
               "This request opened a new connection to {host}: connecting took {connect_ms:,.0f} ms of its {ttfb_ms:,.0f} ms TTFB.",
               "Normal for the first request of a run (DNS, TCP, TLS): exclude it from baselines; clients that keep connections alive pay this once."),
        "zh": ("冷连接",
               "请求新建了上游连接且连接耗时至少 {COLD_CONNECT_MS:.0f} 毫秒；统计基线时应排除。",
               "该请求新建了到 {host} 的连接：在 {ttfb_ms:,.0f} 毫秒的 TTFB 中，建立连接用了 {connect_ms:,.0f} 毫秒。",
               "一次运行中的第一个请求通常如此（DNS、TCP、TLS）：统计基线时排除它；保持长连接的客户端只需付出一次。"),
    }),
    ("prompt.large", "latency", _W, (), {
        "en": ("Large prompt",
               "The counted prompt exceeds --warn-prompt-tokens.",
               "The prompt is {prompt_tokens:,} tokens (limit {limit:,}): system {system_tokens:,}, tools {tools_tokens:,}, last user message {last_user_tokens:,}, {messages} messages.",
               "The largest part is {largest} ({largest_tokens:,} tokens): trim it, summarise old turns, or cache the stable prefix; raise --warn-prompt-tokens if this size is expected."),
        "zh": ("提示词过大",
               "统计出的提示词超过 --warn-prompt-tokens。",
               "提示词有 {prompt_tokens:,} token（阈值 {limit:,}）：系统 {system_tokens:,}，工具 {tools_tokens:,}，最后一条用户消息 {last_user_tokens:,}，共 {messages} 条消息。",
               "最大的部分是{largest}（{largest_tokens:,} token）：精简它、总结旧的对话轮次，或缓存稳定前缀；如果这个大小是预期的，调大 --warn-prompt-tokens。"),
    }),
    ("prompt.repeated_prefix", "latency", _I, (), {
        "en": ("Repeated prefix without cache hits",
               "A stable prefix (system, tools, earlier turns) of at least {REPEATED_PREFIX_TOKENS} tokens was sent before in this run and the upstream reported no cached tokens.",
               "The first {prefix_tokens:,} prompt tokens (system, tools, earlier turns) were already sent {seen_before} time(s) in this run, and the upstream reported no cache hit.",
               {"anthropic": "Add \"cache_control\": {{\"type\": \"ephemeral\"}} to the last stable block (the system prompt or the last tool) so repeats are read from the cache: faster prefill, a fraction of the price.",
                "openai": "OpenAI-style providers cache identical prefixes of 1024+ tokens automatically: keep the prefix byte-identical (no timestamps or ids near the start) and set prompt_cache_key; if this provider has no prompt caching, the cost repeats every call."}),
        "zh": ("前缀重复但没有命中缓存",
               "本次运行中已发送过的、至少 {REPEATED_PREFIX_TOKENS} token 的稳定前缀（系统、工具、之前的轮次）再次发送，上游没有报告缓存 token。",
               "前 {prefix_tokens:,} 个提示词 token（系统、工具、之前的轮次）在本次运行中已发送过 {seen_before} 次，上游没有报告缓存命中。",
               {"anthropic": "在最后一个稳定块（系统提示词或最后一个工具）上加 \"cache_control\": {{\"type\": \"ephemeral\"}}，重复部分就会从缓存读取：prefill 更快，价格只是一小部分。",
                "openai": "OpenAI 风格的服务商会自动缓存 1024 token 以上的相同前缀：保持前缀逐字节一致（开头不要放时间戳或 ID），并设置 prompt_cache_key；如果该服务商不支持提示词缓存，每次调用都要重复付出这部分开销。"}),
    }),
]


@dataclass(frozen=True)
class Entry:
    code: str
    family: str
    severity: str  # the usual severity
    also: tuple[str, ...]  # other severities a rule may give it, depending on the request
    title: dict[str, str]
    when: dict[str, str]
    message: dict[str, Any]  # lang -> template, or lang -> {variant: template}
    hint: dict[str, Any]
    variants: tuple[str, ...] = field(default=())

    @property
    def severities(self) -> tuple[str, ...]:
        return (self.severity,) + tuple(s for s in self.also if s != self.severity)


def _build() -> dict[str, Entry]:
    out: dict[str, Entry] = {}
    for code, family, severity, also, texts in ENTRIES:
        if code in out:
            raise ValueError(f"duplicate catalog code {code}")
        title, when, message, hint = {}, {}, {}, {}
        for lang in LANGS:
            t = texts.get(lang)
            if t is None:
                continue
            title[lang], when[lang], message[lang], hint[lang] = t
        variants: list[str] = []
        for tmpl in list(message.values()) + list(hint.values()):
            if isinstance(tmpl, dict):
                variants += [v for v in tmpl if v not in variants]
        out[code] = Entry(code, family, severity, tuple(also), title, when, message, hint, tuple(variants))
    return out


CATALOG: dict[str, Entry] = _build()


class _Lenient(string.Formatter):
    """Missing fields and values that don't fit their format spec never raise."""

    def get_value(self, key, args, kwargs):
        if isinstance(key, str):
            return kwargs.get(key)
        return super().get_value(key, args, kwargs)

    def format_field(self, value, format_spec):
        if value is None:
            return "?"
        try:
            return super().format_field(value, format_spec)
        except (ValueError, TypeError):
            return str(value)


_FMT = _Lenient()


def _label(value: Any, lang: str) -> str:
    if isinstance(value, (list, tuple)):
        sep = "、" if lang == "zh" else ", "
        return sep.join(_label(v, lang) for v in value)
    entry = LABELS.get(value) if isinstance(value, str) else None
    return entry.get(lang, entry["en"]) if entry else str(value)


def _pick(tmpl: Any, variant: Any) -> str:
    if isinstance(tmpl, dict):
        if variant in tmpl:
            return tmpl[variant]
        return next(iter(tmpl.values()))
    return tmpl


def template(code: str, part: str, lang: str, variant: str | None = None) -> str:
    """The raw template of ``part`` ("message" / "hint" / "title" / "when")."""
    e = CATALOG[code]
    texts = getattr(e, part)
    return _pick(texts.get(lang) or texts["en"], variant)


def fields(tmpl: str) -> set[str]:
    """Names of the params a template uses."""
    return {name.split(".")[0].split("[")[0] for _, name, _, _ in string.Formatter().parse(tmpl) if name}


def render(code: str, params: dict[str, Any] | None, lang: str = "en") -> tuple[str, str]:
    """(message, hint) of a finding in ``lang``; unknown codes render as the code itself."""
    params = dict(params or {})
    lang = lang if lang in LANGS else "en"
    entry = CATALOG.get(code)
    if entry is None:
        return code, ""
    for k in LABELLED:
        if k in params:
            params[k] = _label(params[k], lang)
    variant = params.get("variant")
    msg = _FMT.format(template(code, "message", lang, variant), **params)
    hint = _FMT.format(template(code, "hint", lang, variant), **params)
    return msg, hint


def when(code: str, lang: str = "en") -> str:
    """When the code fires, with the thresholds filled in."""
    from .rules_base import THRESHOLDS

    values = {name: value for name, value, _, _ in THRESHOLDS}
    return _FMT.format(template(code, "when", lang), **values)


def title(code: str, lang: str = "en") -> str:
    e = CATALOG.get(code)
    if e is None:
        return code
    return e.title.get(lang) or e.title["en"]


def render_finding(finding: dict[str, Any], lang: str) -> dict[str, Any]:
    """A stored finding with message and hint re-rendered in ``lang`` (other keys kept)."""
    out = dict(finding)
    if finding.get("code") in CATALOG:
        out["message"], out["hint"] = render(finding["code"], finding.get("params") or {}, lang)
    return out


__all__ = ["CATALOG", "Entry", "FAMILIES", "LABELS", "LANGS", "SEVERITIES", "fields", "render",
           "render_finding", "template", "title", "when"]
