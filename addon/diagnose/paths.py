"""Paths and models: where the request was sent, and whether the upstream knows the model.

Path mistakes are judged from the URL actually forwarded (``upstream_url``), the client's
path and the route's prefix, so the hint can name the base URL to set. The protocol
mismatch is judged by a 404 and the shape of the error body.
"""

from __future__ import annotations

import re
from typing import Any

from firsttoken.addon import routing
from firsttoken.addon.apis.clouds import platform_of
from firsttoken.addon.diagnose.context import LLM_APIS, Ctx, client_path, has_any, quote, server_text, upstream_path

_ENDPOINTS = r"(chat/completions|completions|responses|messages)"
DOUBLE_ENDPOINT = re.compile(r"/" + _ENDPOINTS + r"(?:/v1)?/" + _ENDPOINTS + r"(?=/|$)")
DOUBLE_V1 = re.compile(r"/v1/v1(?=/|$)")
CANONICAL = re.compile(r"/v1/(chat/completions|completions|responses|messages)$")

MODEL_MISSING_WORDS = (
    "not found", "does not exist", "not exist", "unknown model", "invalid model", "no such model",
    "not a valid model", "unsupported model", "model_not_found", "no endpoints found", "is not supported",
    "model not available", "deploymentnotfound",
)
MODEL_ERROR_TYPES = ("model_not_found", "DeploymentNotFound", "model_not_available")
#: limit errors name the model too; they are not "unknown model"
LIMIT_WORDS = ("max_tokens", "max_completion_tokens", "max_output_tokens", "context", "too long", "too large")
#: Anthropic's own error types (an OpenAI-style path answering with these speaks Anthropic)
ANTHROPIC_404_TYPES = ("not_found_error",)


def _failed(rec: Any) -> bool:
    return rec.status is None or rec.status >= 400


def _rest(rec: Any, c: Ctx) -> str:
    """The client's path after the route's mount."""
    p = client_path(rec)
    m = c.mount()
    return p[len(m):] if m and p.startswith(m) else p


def _strip_v1(url: str | None) -> str:
    u = (url or "").rstrip("/")
    while u.endswith("/v1"):
        u = u[:-3]
    return u


def rule_no_route(rec: Any, c: Ctx) -> None:
    if rec.route is None and (rec.error or "").startswith("firsttoken has no route"):
        c.add("path.no_route", "error", path=client_path(rec), error=quote(rec.error), proxy=c.proxy_url)


def rule_double_v1(rec: Any, c: Ctx) -> None:
    up = upstream_path(rec)
    if not DOUBLE_V1.search(up):
        return
    _, _, _, prefix = c.target()
    rest = _rest(rec, c)
    if DOUBLE_V1.search(rest) or not prefix.endswith("/v1"):
        variant = "client"
    else:
        variant = "prefix_anthropic" if c.is_anthropic() else "prefix"
    c.add("path.double_v1", "error" if _failed(rec) else "warn", variant=variant, **c.common(),
          client_path=rest, env=c.base_env(), base=c.good_base(), fixed_upstream=_strip_v1(rec.upstream))


def rule_double_endpoint(rec: Any, c: Ctx) -> None:
    m = DOUBLE_ENDPOINT.search(upstream_path(rec))
    if not m:
        return
    _, _, _, prefix = c.target()
    variant = "prefix" if re.search(_ENDPOINTS + r"$", prefix) else "client"
    fixed = re.sub(r"/" + _ENDPOINTS + r"$", "", rec.upstream or "")
    c.add("path.double_endpoint", "error" if _failed(rec) else "warn", variant=variant, **c.common(),
          endpoint="/" + m.group(2), env=c.base_env(), base=c.good_base(), fixed_upstream=fixed)


def rule_model_not_found(rec: Any, c: Ctx) -> None:
    if rec.status not in (400, 404) or not rec.upstream_error:
        return
    msg = rec.upstream_error
    low = msg.lower()
    named = bool(rec.model) and rec.model.lower() in low
    typed = rec.upstream_error_type in MODEL_ERROR_TYPES
    anthropic_style = low.startswith("model:") and rec.upstream_error_type == "not_found_error"
    if not (typed or anthropic_style or (named and has_any(low, MODEL_MISSING_WORDS))):
        return
    if not typed and has_any(low, LIMIT_WORDS):
        return
    upstream = (rec.upstream or "").rstrip("/")
    _, _, _, prefix = c.target()
    family = c.family()
    if family == "gemini":
        models_url = upstream + ("/models" if routing.has_version(prefix) else "/v1beta/models")
    else:
        models_url = upstream + ("/models" if routing.has_version(prefix) else "/v1/models")
    # Ollama's own text ("model \"x\" not found, try pulling it first"), on its native API or its /v1
    ollama = rec.engine == "ollama" or (rec.api or "").startswith("ollama.") or "try pulling it" in low
    if ollama:
        models_url = upstream + "/api/tags"
    c.add("model.not_found", "error", variant="ollama" if ollama else family if family in ("anthropic", "gemini") else "openai", **c.common(),
          model=rec.model or "?", server=server_text(rec), models_url=models_url)


def rule_protocol_mismatch(rec: Any, c: Ctx) -> None:
    if rec.status != 404 or c.errors() or not CANONICAL.search(upstream_path(rec)):
        return
    kind = rec.upstream_error_type
    msg = (rec.upstream_error or "").lower()
    if rec.api == "anthropic.messages":
        if kind in ANTHROPIC_404_TYPES:
            return  # Anthropic's own 404: it speaks the protocol
        variant = "anthropic_to_openai"
    elif rec.api in LLM_APIS:
        if kind not in ANTHROPIC_404_TYPES or "model" in msg:
            return
        variant = "openai_to_anthropic"
    else:
        return
    route = c.route()
    c.add("path.protocol_mismatch", "error", variant=variant, **c.common(), server=server_text(rec) or "-",
          proxy=c.proxy_url, mount=c.mount(), openai_base=routing.client_base_url(c.proxy_url, route, "openai"),
          anthropic_base=routing.client_base_url(c.proxy_url, route, "anthropic"))


def rule_missing_v1(rec: Any, c: Ctx) -> None:
    if rec.status != 404 or c.errors() or platform_of(rec.api) or (rec.api or "").startswith("ollama."):
        return  # (Bedrock's paths hold no version, Vertex's one of its own, Ollama's /api/… none: no missing /v1)
    up = upstream_path(rec)
    if "/v1/" in up + "/" or has_any(up, ("/v1beta", "/v2/", "/v3/", "/deployments/", "/v4/")):
        return
    if rec.api not in LLM_APIS and not up.rstrip("/").endswith("/models"):
        return
    c.add("path.missing_v1", "error", **c.common(), server=server_text(rec) or "-", env=c.base_env(),
          base=c.good_base())


def rule_not_found(rec: Any, c: Ctx) -> None:
    if rec.status != 404 or c.errors():
        return
    c.add("path.not_found", "error", **c.common(), server=server_text(rec) or "-", env=c.base_env(),
          base=c.good_base())


RULES = (rule_no_route, rule_double_v1, rule_double_endpoint, rule_model_not_found, rule_protocol_mismatch,
         rule_missing_v1)
#: run after every other family (404s nothing else explained)
FALLBACKS = (rule_not_found,)


# ---- The ``paths`` family of the finding catalog, in English and Chinese.

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
               {"anthropic_to_openai": "Use an OpenAI-compatible client for this upstream (OPENAI_BASE_URL={openai_base}), or point ANTHROPIC_BASE_URL at the provider's Anthropic-compatible endpoint if it has one.",
                "openai_to_anthropic": "Use an Anthropic client for this upstream (ANTHROPIC_BASE_URL={anthropic_base}, POST /v1/messages), or the provider's OpenAI-compatible endpoint if it has one."}),
        "zh": ("上游不支持该 API 协议",
               "Anthropic 路径返回 404 且错误体是 OpenAI 格式，或 OpenAI 路径返回 404 且错误体是 Anthropic 格式。",
               {"anthropic_to_openai": "{host} 以 OpenAI 的错误格式对 Anthropic 请求 {path} 返回 {status}（\u201c{server}\u201d）：它提供的是 OpenAI API，而不是 Anthropic Messages。",
                "openai_to_anthropic": "{host} 以 Anthropic 的错误格式对 OpenAI 请求 {path} 返回 {status}（\u201c{server}\u201d）：它提供的是 Anthropic Messages，而不是 OpenAI API。"},
               {"anthropic_to_openai": "对这个上游使用 OpenAI 兼容客户端（OPENAI_BASE_URL={openai_base}）；若服务商提供 Anthropic 兼容接口，把 ANTHROPIC_BASE_URL 指向它。",
                "openai_to_anthropic": "对这个上游使用 Anthropic 客户端（ANTHROPIC_BASE_URL={anthropic_base}，POST /v1/messages）；若服务商提供 OpenAI 兼容接口，改用它。"}),
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
               {"ollama": "Pull it on the machine that runs Ollama: ollama pull {model}; ollama list (or curl {models_url}) shows the models it has, each with its tag (llama3.2:latest).",
                "openai": "Use the exact model id (case, hyphens, date suffix, provider prefix such as openai/...); list the ids this key can use: curl {models_url} -H \"Authorization: Bearer $OPENAI_API_KEY\".",
                "anthropic": "Use the exact model id (case, hyphens, date suffix); list the ids this key can use: curl {models_url} -H \"x-api-key: $ANTHROPIC_API_KEY\" -H \"anthropic-version: 2023-06-01\".",
                "gemini": "Use a model id the Gemini API serves for this method (e.g. gemini-2.5-flash; no models/ prefix in a client's model setting); list them: curl {models_url} -H \"x-goog-api-key: $GEMINI_API_KEY\". On Vertex AI, check that the model is offered in the location named in the URL."}),
        "zh": ("模型不存在",
               "404/400 且错误信息提到了模型名或说模型不存在。",
               "{host} 不认识模型\u201c{model}\u201d（{status}：\u201c{server}\u201d）。",
               {"ollama": "在运行 Ollama 的机器上拉取它：ollama pull {model}；ollama list（或 curl {models_url}）列出它已有的模型及标签（如 llama3.2:latest）。",
                "openai": "使用准确的模型 ID（大小写、连字符、日期后缀、如 openai/... 的服务商前缀）；列出该密钥可用的模型：curl {models_url} -H \"Authorization: Bearer $OPENAI_API_KEY\"。",
                "anthropic": "使用准确的模型 ID（大小写、连字符、日期后缀）；列出该密钥可用的模型：curl {models_url} -H \"x-api-key: $ANTHROPIC_API_KEY\" -H \"anthropic-version: 2023-06-01\"。",
                "gemini": "使用 Gemini API 为该方法提供的模型 ID（如 gemini-2.5-flash；客户端的模型设置里不要带 models/ 前缀）；列出可用模型：curl {models_url} -H \"x-goog-api-key: $GEMINI_API_KEY\"。在 Vertex AI 上，确认该模型在 URL 中的地区（location）提供。"}),
    }),
]
