"""Each hop's own fix for a stream it buffers, in English and Chinese.

``HOP_LABELS`` maps the label code ``hop_fix.<kind>`` (see ``fix_code``) to its texts; the
diagnosis catalog translates a finding's ``hop_fix`` param through it, so a stored finding
re-renders in either language (and ``hop.unnamed``, the words for a hop no header names). Kinds without their own advice get ``hop_fix.generic``.
"""

from __future__ import annotations

_GENERIC = (
    "Something between the model and the client buffers the stream: for nginx set `proxy_buffering off;` "
    "(or have the upstream send `X-Accel-Buffering: no`) and keep text/event-stream out of gzip; turn off response "
    "buffering and compression in gateways, CDNs and load balancers for the API path; check the HTTP(S)_PROXY in between.",
    "模型和客户端之间有东西在缓冲流：nginx 设置 `proxy_buffering off;`（或让上游发送 `X-Accel-Buffering: no`），并且不要对 "
    "text/event-stream 做 gzip；在网关、CDN 和负载均衡上为 API 路径关闭响应缓冲和压缩；检查中间的 HTTP(S)_PROXY。",
)

#: kind -> (en, zh)
FIXES: dict[str, tuple[str, str]] = {
    "nginx": (
        "In nginx's location for the API: `proxy_buffering off;` (or have the upstream send `X-Accel-Buffering: no`), "
        "remove text/event-stream from `gzip_types` (gzip holds the stream until its buffer fills), keep "
        "`proxy_http_version 1.1;`; larger `proxy_buffers` only make it wait longer.",
        "在 nginx 代理 API 的 location 中设置 `proxy_buffering off;`（或让上游发送 `X-Accel-Buffering: no`），把 "
        "text/event-stream 从 `gzip_types` 中去掉（gzip 会把流压到缓冲区满才发出），保留 `proxy_http_version 1.1;`；"
        "调大 `proxy_buffers` 只会让它等得更久。",
    ),
    "kong": (
        "Kong (nginx underneath): set the route's `response_buffering` to false and do not compress text/event-stream "
        "(response-transformer/compression plugins hold the whole body).",
        "Kong（底层是 nginx）：把路由的 `response_buffering` 设为 false，并且不要压缩 text/event-stream（响应转换和压缩插件会扣住整个响应体）。",
    ),
    "cloudflare": (
        "Cloudflare streams text/event-stream as it comes unless something reads the whole body: send "
        "`Content-Type: text/event-stream` and `Cache-Control: no-cache, no-transform`, keep the API path out of "
        "caching, Workers that await the body, and compression/optimisation rules; a proxied origin server "
        "(nginx behind it) may be the one buffering.",
        "Cloudflare 会按到达顺序转发 text/event-stream，除非有东西读取了整个响应体：发送 `Content-Type: text/event-stream` 和 "
        "`Cache-Control: no-cache, no-transform`，让 API 路径避开缓存、会等待整个响应体的 Worker 以及压缩/优化规则；"
        "也可能是它后面的源站（例如 nginx）在缓冲。",
    ),
    "caddy": (
        "In Caddy's `reverse_proxy`: `flush_interval -1`, and keep text/event-stream out of `encode` (gzip/zstd buffer it).",
        "在 Caddy 的 `reverse_proxy` 中设置 `flush_interval -1`，并让 text/event-stream 不经过 `encode`（gzip/zstd 会缓冲它）。",
    ),
    "envoy": (
        "In Envoy: no buffer filter (`envoy.filters.http.buffer`) on the API route, and text/event-stream excluded from "
        "the compressor filter (Istio: look for EnvoyFilters that add them).",
        "在 Envoy 中：API 路由上不要有 buffer 过滤器（`envoy.filters.http.buffer`），并把 text/event-stream 排除在 compressor "
        "过滤器之外（Istio：检查添加了它们的 EnvoyFilter）。",
    ),
    "apache": (
        "In Apache httpd: `flushpackets=on` on the `ProxyPass` line, and no mod_deflate for the stream "
        "(`SetEnvIfNoCase Content-Type text/event-stream no-gzip` or `SetEnv no-gzip 1` on the API path).",
        "在 Apache httpd 中：在 `ProxyPass` 行加上 `flushpackets=on`，并对流关闭 mod_deflate"
        "（`SetEnvIfNoCase Content-Type text/event-stream no-gzip`，或在 API 路径上 `SetEnv no-gzip 1`）。",
    ),
    "iis": (
        "In IIS with ARR: response buffer threshold 0 (`responseBufferLimit=\"0\"`, ARR proxy \"Response buffer "
        "threshold\" 0) and no dynamic compression for text/event-stream.",
        "在 IIS + ARR 中：把响应缓冲阈值设为 0（`responseBufferLimit=\"0\"`，ARR 代理的“响应缓冲区阈值”设为 0），并对 "
        "text/event-stream 关闭动态压缩。",
    ),
    "aws": (
        "AWS load balancers pass streams through; look behind it (nginx, the app server) or in front (CloudFront, "
        "API Gateway, which returns whole bodies unless response streaming is enabled).",
        "AWS 负载均衡会直接转发流；问题在它后面（nginx、应用服务器）或前面（CloudFront、API Gateway：未开启响应流式时会返回完整响应体）。",
    ),
    "cloudfront": (
        "CloudFront: a cache behaviour for the API path with caching disabled and compression off, and the origin "
        "sending text/event-stream.",
        "CloudFront：为 API 路径设置关闭缓存、关闭压缩的缓存行为，并让源站发送 text/event-stream。",
    ),
    "gcp": (
        "Google Cloud load balancer / Cloud Run: make sure the backend sends text/event-stream and flushes it, and "
        "that Cloud CDN is off for the API path.",
        "Google Cloud 负载均衡 / Cloud Run：确保后端发送 text/event-stream 并及时刷新，并为 API 路径关闭 Cloud CDN。",
    ),
    "azure": (
        "Azure: in API Management use `<forward-request buffer-response=\"false\" />` for the API; in Front Door, "
        "keep compression and caching off for the API path.",
        "Azure：在 API Management 中为该 API 使用 `<forward-request buffer-response=\"false\" />`；在 Front Door 中为 API "
        "路径关闭压缩和缓存。",
    ),
    "akamai": (
        "Akamai: turn off caching, prefetching and compression for the API path, and enable response streaming "
        "(chunked transfer) for it.",
        "Akamai：为 API 路径关闭缓存、预取和压缩，并开启响应流式（分块传输）。",
    ),
    "fastly": (
        "Fastly/Varnish: `set beresp.do_stream = true;` and no gzip (`beresp.gzip`) for text/event-stream; pass the API path.",
        "Fastly/Varnish：`set beresp.do_stream = true;`，不要对 text/event-stream 做 gzip（`beresp.gzip`），并让 API 路径直接透传（pass）。",
    ),
    "squid": (
        "Squid: it forwards as it receives, but an ICAP/eCAP or content-adaptation service (antivirus, DLP) holds "
        "the whole body: bypass it for the API host.",
        "Squid 本身边收边发，但 ICAP/eCAP 或内容适配服务（杀毒、DLP）会扣住整个响应体：让 API 域名绕过它们。",
    ),
    "litellm": (
        "LiteLLM forwards chunks as they come; the buffering is in a hop in front of it or behind it (its reverse "
        "proxy: nginx `proxy_buffering off;`), or the model's provider answered without streaming.",
        "LiteLLM 会边收边转发；缓冲发生在它前面或后面的一跳（它前面的反向代理：nginx `proxy_buffering off;`），或模型服务商没有流式返回。",
    ),
    "oneapi": (
        "one-api/new-api: make sure the channel streams (a channel that cannot makes the gateway turn a whole answer "
        "into events at the end) and that the reverse proxy in front of it has `proxy_buffering off;`.",
        "one-api/new-api：确认渠道支持流式（不支持的渠道会让网关在最后把整个回答拆成事件发出），并确认它前面的反向代理设置了 "
        "`proxy_buffering off;`。",
    ),
}
FIXES["varnish"] = FIXES["fastly"]
FIXES["generic"] = _GENERIC


def fix_code(kind: str | None) -> str:
    """The label code of ``kind``'s fix (the generic one when it has none)."""
    return f"hop_fix.{kind if kind in FIXES else 'generic'}"


#: label code -> {lang: text}, for the catalog's LABELS: each fix, and the words for a hop no header names
HOP_LABELS: dict[str, dict[str, str]] = {
    **{f"hop_fix.{k}": {"en": en, "zh": zh} for k, (en, zh) in FIXES.items()},
    "hop.unnamed": {"en": "A hop between the model and firsttoken", "zh": "模型与 firsttoken 之间的某一跳"},
}
