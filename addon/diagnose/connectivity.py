"""Connectivity: the upstream could not be reached, hung up, or the client left.

Sub-causes are read from mitmproxy's error text (``rec.error``); the fragments below were
matched against texts observed with mitmproxy 11 on real sockets. The findings: docs/diagnoses.md
("Connectivity").
"""

from __future__ import annotations

import re
from typing import Any

from firsttoken.addon.diagnose.context import Ctx, quote
from firsttoken.addon.safe_text import clause

#: (variant, lower-case fragments of the error text), first match wins. Texts seen: refused
#: "[Errno 111] Connect call failed ('127.0.0.1', 5)"; DNS "[Errno -2] Name or service not known"
#: (macOS "nodename nor servname provided"); TLS "Certificate verify failed: self-signed certificate";
#: https:// to plain HTTP "The remote server does not speak TLS."; not HTTP "Cannot parse HTTP
#: response: Bad HTTP response line: b'...'"
UNREACHABLE: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("dns", ("name or service not known", "nodename nor servname", "getaddrinfo failed", "no address associated",
             "temporary failure in name resolution", "name resolution", "errno -2]", "errno -3]", "errno -5]",
             "errno 11001", "errno 8]", "could not resolve")),
    ("not_tls", ("does not speak tls", "wrong version number", "unknown protocol", "packet length too long",
                 "http request", "record layer failure")),
    ("tls", ("certificate", "tls", "ssl", "handshake")),
    ("refused", ("connection refused", "connect call failed", "errno 111]", "errno 61]", "errno 10061")),
    ("timeout", ("timed out", "timeout", "errno 110]", "errno 60]", "errno 10060")),
    ("network", ("network is unreachable", "no route to host", "host is unreachable", "errno 101]", "errno 113]",
                 "errno 51]", "errno 65]")),
    ("not_http", ("cannot parse http response", "bad http response", "invalid http")),
)
#: closed before answering "server closed connection" (also http:// to a TLS port); mid-body "HTTP/1
#: protocol error: peer closed connection without sending complete message body ..."
CLOSED = ("server closed connection", "peer closed connection", "server disconnected", "connection reset",
          "connection closed by peer", "errno 104]", "errno 54]", "broken pipe", "eof occurred",
          "incomplete message body", "remote end closed", "connection aborted")
#: the error text of a request the proxy cut when it was stopped (after draining)
SHUTDOWN_ERROR = "the proxy shut down before this request finished"
#: ... and of an in-flight row a later proxy found left behind by a dead one
INTERRUPTED_ERROR = "the proxy process ended before this request finished"
#: prefix of the error of a request whose client broke it while sending it (Capture.error): mitmproxy
#: words a client's body cut short ("peer closed connection without sending complete message body
#: (received 40 bytes, expected 187)", "(incomplete chunked read)", "illegal chunk header: ...") as it
#: words the upstream's, so only this prefix tells them apart
CLIENT_REQUEST_ERROR = "the client did not send a complete request: "
#: the error of a request refused for a bare CR or an obs-fold line in its headers (Capture)
BAD_HEADER_ERROR = ("firsttoken answered 400 Bad Request: the request header {name} contains {what} "
                    "(RFC 9112 §2.2, §5.2); the request was not forwarded")
#: the two ``what`` of BAD_HEADER_ERROR
BARE_CR, OBS_FOLD = "a bare CR", "a folded line (obs-fold)"
#: errors that are the proxy's own business or the client's, never the upstream's
OWN_ERRORS = ("firsttoken", SHUTDOWN_ERROR, INTERRUPTED_ERROR, CLIENT_REQUEST_ERROR)


def client_request_error(error: str) -> str:
    """The error text of a request the client broke while sending its body (mitmproxy's words kept)."""
    return CLIENT_REQUEST_ERROR + error


#: mitmproxy's words for requests it refused for the client's own doing, before forwarding them
_CLIENTS_DOING = ("from client", "received an http connect request", "http/2.0 connection preface")


def is_clients_doing(error: str, method: str | None, body_done: bool, answered: bool) -> bool:
    """Whether mitmproxy's error is about the client's request, not the upstream: it hung up or
    framed its body badly while sending it (``HTTP/1 protocol error``, before the body was read),
    or mitmproxy refused it outright (invalid Content-Length, Content-Length with
    Transfer-Encoding, a CONNECT to this reverse proxy, HTTP/2 without TLS)."""
    if answered:
        return False
    if not body_done and error.startswith("HTTP/1 protocol error"):
        return True
    low = error.lower()
    return (method or "").upper() in ("CONNECT", "PRI") or any(w in low for w in _CLIENTS_DOING)


def _cause(error: str) -> str | None:
    low = error.lower()
    for variant, words in UNREACHABLE:
        if any(w in low for w in words):
            return variant
    return None


def forward_mode(rec: Any) -> bool:
    """Whether the request came through forward mode (`proxy --forward`), where there is no
    --upstream: its upstream is the client's own target, written by capture as scheme://host:port
    with the port always spelled out, while a configured route's URL (routing.Route.url) never
    spells out the scheme's default port."""
    up = rec.upstream or ""
    return rec.route in (None, "", "default") and (
        (up.startswith("https://") and up.endswith(":443")) or (up.startswith("http://") and up.endswith(":80")))


def _own(error: str) -> bool:
    low = error.lower()
    return any(low.startswith(w) or w in low[:40] for w in OWN_ERRORS)


def rule_proxy_stopped(rec: Any, c: Ctx) -> None:
    err = rec.error or ""
    if err.startswith(SHUTDOWN_ERROR):
        c.add("proxy.shutdown", "warn", **c.common(), total_ms=rec.total_ms, events=rec.events)
    elif err.startswith(INTERRUPTED_ERROR):
        c.add("proxy.interrupted", "warn", **c.common(), pid=rec.proxy_pid, phase=rec.phase or "connecting",
              started_at=rec.started_at)


def rule_client_aborted(rec: Any, c: Ctx) -> None:
    if not rec.client_aborted:
        return
    if rec.ttfb_ms is None:
        variant, sev = "before_headers", "warn"
    elif not rec.events:
        variant, sev = "before_tokens", "warn"
    else:
        variant, sev = "streaming", "info"
    # the longest wait the client met: between two token events, or the silence it hung up in
    longest = max(rec.itl_max_ms or 0.0, rec.end_silence_ms or 0.0)
    c.add("client.aborted", sev, variant=variant, **c.common(), total_ms=rec.total_ms, ttfb_ms=rec.ttfb_ms,
          events=rec.events, itl_max_ms=longest)


def rule_client_request(rec: Any, c: Ctx) -> None:
    """The client hung up mid-upload or framed its body badly: its doing, not the upstream's."""
    err = rec.error or ""
    if err.startswith(CLIENT_REQUEST_ERROR):
        detail = err[len(CLIENT_REQUEST_ERROR):]
        low = detail.lower()
        method = (rec.method or "").upper()
        if method == "CONNECT" or "connect request" in low:
            c.add("client.bad_framing", "error", variant="connect", **c.common(), error=quote(detail), base=c.good_base(),
                  env=c.base_env())
        elif method == "PRI" or "http/2" in low:
            c.add("client.bad_framing", "error", variant="h2c", **c.common(), error=quote(detail))
        elif "content-length" in low or "transfer-encoding" in low:
            c.add("client.bad_framing", "error", variant="headers", **c.common(), error=quote(detail))
        elif "peer closed" in low or "incomplete" in low or "disconnected" in low:
            m = re.search(r"received (\d+) bytes, expected (\d+)", detail)
            variant = "length" if m else "chunked"
            c.add("client.aborted_upload", "warn", variant=variant, **c.common(), total_ms=rec.total_ms,
                  received=int(m.group(1)) if m else rec.request_bytes or 0,
                  expected=int(m.group(2)) if m else 0, error=quote(detail))
        else:
            c.add("client.bad_framing", "error", variant="body", **c.common(), error=quote(detail))
    elif err.startswith(BAD_HEADER_ERROR[:40]):
        m = re.search(r"header (.+?) contains an? (bare CR|folded line)", err)
        name, what = (m.group(1), m.group(2)) if m else ("?", "bare CR")
        c.add("client.bad_framing", "error", variant="obs_fold" if what == "folded line" else "bare_cr",
              **c.common(), name=quote(name, 80))


#: mitmproxy's words when the upstream proxy answered its CONNECT with something else than 2xx
_CONNECT_REFUSED = re.compile(r"refused HTTP CONNECT request: (\d{3})\s*(.*)$", re.IGNORECASE)
EGRESS_CODES = ("egress.proxy_down", "egress.proxy_auth", "egress.proxy_refused", "egress.proxy_upstream")


def setting(rec: Any) -> str:
    """Where the upstream came from, for hints: ``--upstream``, or (``run`` chose it, or forward
    mode took it from the client) the client's own base URL (a label code, see engine.LABELS)."""
    return "setting.run" if rec.run_id else "setting.forward" if forward_mode(rec) else "setting.upstream"


def rule_egress(rec: Any, c: Ctx) -> None:
    """The egress proxy (HTTPS_PROXY, --upstream-proxy) is down, refuses, wants credentials, or
    could not reach the upstream itself: its place, not the upstream's."""
    proxy = getattr(rec, "egress_proxy", None)
    err = rec.error or ""
    if not proxy or rec.client_aborted or _own(err):
        return
    host, port, _, _ = c.target()
    base = dict(c.common(), proxy=proxy, port=port)
    m = _CONNECT_REFUSED.search(err)
    status = int(m.group(1)) if m else (rec.status if rec.status in (403, 407, 502, 503, 504) else None)
    reason = (m.group(2).strip() if m else "") or ""
    if m is None and rec.status is None and err:
        cause = _cause(err)
        if cause in ("refused", "dns", "timeout", "network") or any(w in err.lower() for w in CLOSED[:2]):
            c.add("egress.proxy_down", "error", variant=cause if cause in ("refused", "dns", "timeout") else "other",
                  **base, error=clause(quote(err)))
        return
    if status is None or (m is None and rec.status in (502, 503, 504) and (rec.upstream_error or rec.events)):
        return  # an answer from the upstream (an API error body or a stream), passed on by the proxy
    if status == 407:
        c.add("egress.proxy_auth", "error", **base, answer=quote(f"{status} {reason}".strip()))
    elif status in (502, 503, 504) or (m is not None and status >= 500):  # (tinyproxy: "500 Unable to connect")
        c.add("egress.proxy_upstream", "error", **base, answer=quote(f"{status} {reason}".strip()),
              body=quote(clause(rec.upstream_error or rec.malformed_sample or rec.no_choices or "-"), 200))
    elif m is not None:
        c.add("egress.proxy_refused", "error", **base, answer=quote(f"{status} {reason}".strip()))


def rule_unreachable(rec: Any, c: Ctx) -> None:
    err = rec.error
    if not err or rec.client_aborted or _own(err) or c.has(*EGRESS_CODES):
        return
    host, port, scheme, prefix = c.target()
    base = dict(c.common(), port=port, scheme=scheme, prefix=prefix, error=clause(quote(err)),  # (the templates end the sentence)
                setting=setting(rec))
    low = err.lower()
    closed = any(w in low for w in CLOSED)
    if rec.status is None:
        cause = _cause(err)
        if cause is None and closed:
            c.add("upstream.closed", "error", variant="before_response", **base)
        else:
            if cause == "dns" and forward_mode(rec):
                cause = "dns_forward"  # the host came from the client's own base URL, not from --upstream
            c.add("upstream.unreachable", "error", variant=cause or "other", **base)
    elif closed:
        c.add("upstream.closed", "error", variant="mid_response", **base, events=rec.events, total_ms=rec.total_ms)


RULES = (rule_proxy_stopped, rule_client_aborted, rule_client_request, rule_egress, rule_unreachable)


# ---- The ``connectivity`` family of the finding catalog, in English and Chinese.

_E, _W, _I = "error", "warn", "info"

# (code, family, usual severity, other possible severities, {lang: (title, when, message, hint)})
ENTRIES: list[tuple[str, str, str, tuple[str, ...], dict[str, tuple[Any, Any, Any, Any]]]] = [
    ("upstream.unreachable", "connectivity", _E, (), {
        "en": ("Upstream unreachable",
               "No response: the proxy could not connect (DNS failure, connection refused, TLS verification failed, timeout...).",
               {"dns": "The upstream host {host} does not resolve: {error}.",
                "dns_forward": "The host {host} the client asked for does not resolve: {error}.",
                "refused": "Nothing accepted a connection at {host}:{port} (connection refused): {error}.",
                "tls": "The TLS certificate of {host}:{port} was rejected: {error}.",
                "not_tls": "{host}:{port} does not speak TLS, but the upstream is given as https://: {error}.",
                "timeout": "Connecting to {host}:{port} timed out: {error}.",
                "network": "There is no network route to {host}:{port}: {error}.",
                "not_http": "{host}:{port} answered something that is not HTTP: {error}.",
                "other": "The proxy could not reach {host}:{port}: {error}."},
               {"dns": "Check the host name in {setting} ({upstream}) for typos, and your DNS or VPN (getent hosts {host}); if this machine reaches it only through a proxy, set HTTPS_PROXY (or --upstream-proxy URL): firsttoken follows it like your clients.",
                "dns_forward": "Check the host in the client's own base URL or endpoint setting ({host}) for typos, and this machine's DNS or VPN (getent hosts {host}).",
                "refused": "Start the upstream server, or fix the port in {setting} ({upstream}); check that it listens on that address (0.0.0.0 vs 127.0.0.1).",
                "tls": "If a private CA or a company's TLS-inspecting proxy signs it, trust that CA: --upstream-ca /path/ca.pem on firsttoken proxy or firsttoken run (or put it in SSL_CERT_FILE / REQUESTS_CA_BUNDLE, which firsttoken trusts like your clients); check that the host name matches the certificate; only for a local test server, --insecure-upstream.",
                "not_tls": "Use http:// in {setting}: http://{host}:{port}{prefix}.",
                "timeout": "A firewall drops the packets or the host is down: check the address and port and the VPN; if this machine reaches it only through a proxy, export HTTPS_PROXY (or pass --upstream-proxy URL): firsttoken's upstream leg follows it, and `firsttoken doctor` shows which way it goes.",
                "network": "Check the network (VPN, Wi-Fi, routes) and the address in {setting} ({upstream}).",
                "not_http": "Check the port in {setting} ({upstream}); if the server speaks TLS, use https://.",
                "other": "Check {setting} ({upstream}) and that the server is up."}),
        "zh": ("无法连接上游",
               "没有响应：代理无法建立连接（DNS 失败、连接被拒绝、TLS 校验失败、超时等）。",
               {"dns": "上游主机名 {host} 无法解析：{error}。",
                "dns_forward": "客户端请求的主机 {host} 无法解析：{error}。",
                "refused": "{host}:{port} 拒绝连接（connection refused）：{error}。",
                "tls": "{host}:{port} 的 TLS 证书未通过校验：{error}。",
                "not_tls": "{host}:{port} 不支持 TLS，但上游写的是 https://：{error}。",
                "timeout": "连接 {host}:{port} 超时：{error}。",
                "network": "没有到 {host}:{port} 的网络路由：{error}。",
                "not_http": "{host}:{port} 返回的不是 HTTP：{error}。",
                "other": "代理无法连接 {host}:{port}：{error}。"},
               {"dns": "检查 {setting}（{upstream}）中的主机名是否拼错，并检查 DNS 或 VPN（getent hosts {host}）；如果本机只能通过代理访问它，请设置 HTTPS_PROXY（或 --upstream-proxy URL）：firsttoken 会像客户端一样使用它。",
                "dns_forward": "检查客户端自己的 base URL 或接口地址设置中的主机（{host}）是否拼错，并检查本机的 DNS 或 VPN（getent hosts {host}）。",
                "refused": "启动上游服务，或修正 {setting}（{upstream}）中的端口；确认服务监听在该地址上（0.0.0.0 还是 127.0.0.1）。",
                "tls": "如果证书由私有 CA 或公司的 TLS 检查代理签发，信任该 CA：给 firsttoken proxy 或 firsttoken run 加 --upstream-ca /path/ca.pem（或放进 SSL_CERT_FILE / REQUESTS_CA_BUNDLE，firsttoken 像客户端一样信任它们）；确认主机名与证书一致；仅对本地测试服务器使用 --insecure-upstream。",
                "not_tls": "在 {setting} 中使用 http://：http://{host}:{port}{prefix}。",
                "timeout": "防火墙丢弃了数据包或主机已宕机：检查地址和端口以及 VPN；如果本机只能通过代理访问它，请导出 HTTPS_PROXY（或传入 --upstream-proxy URL）：firsttoken 的上游连接会使用它，`firsttoken doctor` 会显示实际走的路径。",
                "network": "检查网络（VPN、Wi-Fi、路由）以及 {setting}（{upstream}）中的地址。",
                "not_http": "检查 {setting}（{upstream}）中的端口；如果服务器使用 TLS，请用 https://。",
                "other": "检查 {setting}（{upstream}）以及服务器是否在运行。"}),
    }),
    ("egress.proxy_down", "connectivity", _E, (), {
        "en": ("Egress proxy unreachable",
               "firsttoken's upstream leg goes through an HTTP proxy (HTTPS_PROXY, HTTP_PROXY, ALL_PROXY or --upstream-proxy), and that proxy could not be reached: the upstream was never asked.",
               {"refused": "Nothing accepted a connection at the proxy {proxy} (connection refused), so {host} was never reached: {error}.",
                "dns": "The proxy's host name in {proxy} does not resolve, so {host} was never reached: {error}.",
                "timeout": "Connecting to the proxy {proxy} timed out, so {host} was never reached: {error}.",
                "other": "The proxy {proxy} could not be reached, so {host} was never reached: {error}."},
               "Start the proxy (Clash, V2Ray, the company proxy) or fix its address in HTTPS_PROXY / HTTP_PROXY / ALL_PROXY (or --upstream-proxy); if {host} is reachable directly, add it to NO_PROXY or run firsttoken with --no-upstream-proxy."),
        "zh": ("出口代理无法连接",
               "firsttoken 的上游连接经过一个 HTTP 代理（HTTPS_PROXY、HTTP_PROXY、ALL_PROXY 或 --upstream-proxy），而该代理无法连接：请求从未到达上游。",
               {"refused": "代理 {proxy} 拒绝连接（connection refused），因此没有到达 {host}：{error}。",
                "dns": "{proxy} 中代理的主机名无法解析，因此没有到达 {host}：{error}。",
                "timeout": "连接代理 {proxy} 超时，因此没有到达 {host}：{error}。",
                "other": "无法连接代理 {proxy}，因此没有到达 {host}：{error}。"},
               "启动代理（Clash、V2Ray、公司代理），或修正 HTTPS_PROXY / HTTP_PROXY / ALL_PROXY（或 --upstream-proxy）中的地址；如果 {host} 可以直连，把它加入 NO_PROXY，或用 --no-upstream-proxy 运行 firsttoken。"),
    }),
    ("egress.proxy_auth", "connectivity", _E, (), {
        "en": ("Egress proxy wants credentials",
               "The HTTP proxy firsttoken's upstream leg goes through answered 407 Proxy Authentication Required.",
               "The proxy {proxy} asked for credentials ({answer}) before it would reach {host}.",
               "Put them in the proxy URL: HTTPS_PROXY=http://USER:PASSWORD@host:port (or --upstream-proxy with the same URL; percent-encode @, : and / in the password). If the URL has them already, the proxy rejected them: check them. firsttoken sends them as Basic Proxy-Authorization and never stores them."),
        "zh": ("出口代理需要认证",
               "firsttoken 的上游连接所经过的 HTTP 代理返回了 407 Proxy Authentication Required。",
               "代理 {proxy} 要求提供凭据（{answer}），之后才会连接 {host}。",
               "把凭据写进代理 URL：HTTPS_PROXY=http://用户名:密码@host:port（或用同样的 URL 传给 --upstream-proxy；密码中的 @、:、/ 需要百分号编码）。如果 URL 中已有凭据，说明代理拒绝了它们：请检查。firsttoken 以 Basic Proxy-Authorization 发送它们，且从不保存。"),
    }),
    ("egress.proxy_refused", "connectivity", _E, (), {
        "en": ("Egress proxy refused the connection",
               "The HTTP proxy firsttoken's upstream leg goes through refused to open a tunnel to the upstream (its CONNECT answer was not 2xx): a policy of the proxy, not the upstream's doing.",
               "The proxy {proxy} refused to connect to {host}:{port}: {answer}.",
               "The proxy does not allow this host or port: ask its administrator, or (if {host} is reachable directly) add it to NO_PROXY or run firsttoken with --no-upstream-proxy."),
        "zh": ("出口代理拒绝了连接",
               "firsttoken 的上游连接所经过的 HTTP 代理拒绝建立到上游的隧道（CONNECT 的应答不是 2xx）：这是代理的策略，不是上游的问题。",
               "代理 {proxy} 拒绝连接 {host}:{port}：{answer}。",
               "代理不允许访问该主机或端口：请联系代理管理员；或者（如果 {host} 可以直连）把它加入 NO_PROXY，或用 --no-upstream-proxy 运行 firsttoken。"),
    }),
    ("egress.proxy_upstream", "connectivity", _E, (), {
        "en": ("Egress proxy could not reach the upstream",
               "The HTTP proxy firsttoken's upstream leg goes through answered 5xx itself (to its CONNECT, or 502/503/504 to a plain-HTTP request): it could not resolve or connect to the upstream.",
               "The proxy {proxy} could not reach {host}:{port}: it answered {answer} ({body}).",
               "The proxy's own way out failed: check the host in the base URL for typos, and the proxy's rules or its upstream (Clash: the selected node; a company proxy: its administrator). Your clients going through the same proxy would fail the same way."),
        "zh": ("出口代理无法连接上游",
               "firsttoken 的上游连接所经过的 HTTP 代理自己返回了 5xx（对 CONNECT 的应答，或对明文 HTTP 请求的 502/503/504）：它无法解析或连接上游。",
               "代理 {proxy} 无法连接 {host}:{port}：它返回了 {answer}（{body}）。",
               "是代理自身的出口失败了：检查 base URL 中的主机名是否拼错，以及代理的规则或其上游（Clash：所选节点；公司代理：联系管理员）。经过同一代理的客户端也会同样失败。"),
    }),
    ("upstream.closed", "connectivity", _E, (), {
        "en": ("Upstream closed the connection",
               "The server closed the connection before or while sending its response.",
               {"before_response": "{host}:{port} closed the connection before sending a response: {error}.",
                "mid_response": "{host} closed the connection while sending the response (status {status}, after {events} token events and {total_ms:,.0f} ms): {error}."},
               {"before_response": "The server crashed, refused the request, or expects TLS (if it is HTTPS, use https:// in {setting}); check the server's logs.",
                "mid_response": "The answer is incomplete: retry; if long answers are always cut, a gateway in between (idle/read timeout, maximum response size) is closing them."}),
        "zh": ("上游关闭了连接",
               "服务器在发送响应之前或发送过程中关闭了连接。",
               {"before_response": "{host}:{port} 在发送响应前关闭了连接：{error}。",
                "mid_response": "{host} 在发送响应的过程中关闭了连接（状态 {status}，已收到 {events} 个 token 事件，{total_ms:,.0f} 毫秒）：{error}。"},
               {"before_response": "服务器崩溃、拒绝了请求，或者它要求 TLS（若是 HTTPS，请在 {setting} 中使用 https://）；查看服务器日志。",
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
                "streaming": "Fine if it was cancelled on purpose; otherwise a client read timeout closed it (longest wait for a token, the silence it ended in included: {itl_max_ms:,.0f} ms): raise the read timeout."}),
        "zh": ("客户端断开了连接",
               "客户端在响应结束前关闭了连接（首个 token 之前为警告，流式输出中为提示）。",
               {"before_headers": "客户端在 {total_ms:,.0f} 毫秒后放弃，此时 {host} 还没有返回响应头。",
                "before_tokens": "客户端在 {total_ms:,.0f} 毫秒后放弃：响应头在 {ttfb_ms:,.0f} 毫秒到达，但还没有任何 token。",
                "streaming": "客户端在 {total_ms:,.0f} 毫秒、收到 {events} 个 token 事件后停止读取，而流仍在进行。"},
               {"before_headers": "客户端超时比上游的响应时间短：调大超时（openai/anthropic SDK：timeout=...，Claude Code：API_TIMEOUT_MS，curl：--max-time）。",
                "before_tokens": "客户端超时比上游的首 token 时间短：调大超时（openai/anthropic SDK：timeout=...，Claude Code：API_TIMEOUT_MS，curl：--max-time）。",
                "streaming": "若是主动取消则无妨；否则是客户端的读取超时关闭了连接（等待 token 的最长时间，含断开前的静默：{itl_max_ms:,.0f} 毫秒）：调大读取超时。"}),
    }),
    ("client.aborted_upload", "connectivity", _W, (), {
        "en": ("Client hung up mid-upload",
               "The client closed the connection before it had sent the whole request body: the request was never complete, so it was not (fully) sent upstream.",
               {"length": "The client closed the connection after sending {received:,} of the {expected:,} bytes its Content-Length announced, {total_ms:,.0f} ms into the request; the upstream never got a complete request.",
                "chunked": "The client closed the connection in the middle of its chunked request body ({received:,} bytes read), {total_ms:,.0f} ms into the request; the upstream never got a complete request."},
               "Not the upstream's fault: look at the client (a timeout while uploading, a crash, a killed process, or a body generator that failed). Retrying with the same body usually works."),
        "zh": ("客户端在上传中途断开",
               "客户端在发送完整个请求体之前关闭了连接：请求从未完整，因此没有（完整地）发往上游。",
               {"length": "客户端在请求开始 {total_ms:,.0f} 毫秒后关闭了连接，只发送了 Content-Length 声明的 {expected:,} 字节中的 {received:,} 字节；上游从未收到完整的请求。",
                "chunked": "客户端在分块（chunked）请求体中途关闭了连接（已读取 {received:,} 字节），距请求开始 {total_ms:,.0f} 毫秒；上游从未收到完整的请求。"},
               "不是上游的问题：检查客户端（上传时超时、崩溃、进程被杀，或生成请求体的代码出错）。用同样的请求体重试通常可以成功。"),
    }),
    ("client.bad_framing", "connectivity", _E, (), {
        "en": ("Client sent a malformed HTTP request",
               "The client's HTTP framing is invalid (a bad chunk-size line, a bare CR or a folded header line, an invalid Content-Length), or it speaks to the proxy as to something else (CONNECT, HTTP/2 without TLS): the proxy refused it instead of forwarding it.",
               {"body": "The client's chunked request body is malformed ({error}); the proxy closed the connection and did not forward the request.",
                "headers": "The client's request headers frame the body ambiguously ({error}): the proxy refused the request (request smuggling protection) and did not forward it.",
                "connect": "The client sent CONNECT: it uses this proxy as its HTTP(S) proxy (HTTPS_PROXY, --proxy), but firsttoken runs here as a reverse proxy in front of {host}; nothing was forwarded.",
                "h2c": "The client spoke HTTP/2 without TLS (h2c prior knowledge), which the proxy does not accept ({error}); nothing was forwarded.",
                "bare_cr": "The request header {name} contains a bare CR, which HTTP forbids (RFC 9112 §2.2): the proxy answered 400 Bad Request and did not forward the request.",
                "obs_fold": "The request header {name} is folded over several lines (obs-fold), which HTTP forbids (RFC 9112 §5.2): the proxy answered 400 Bad Request and did not forward the request."},
               {"body": "Not the upstream's fault: the client (or a library or gateway in front of it) writes invalid chunked encoding. Update it, or send the body with a Content-Length.",
                "headers": "Not the upstream's fault: the client sends a Content-Length that is not a number, or both Content-Length and Transfer-Encoding. Fix the client or the library that builds the request.",
                "connect": "Unset HTTPS_PROXY (or --proxy) for this client and set its base URL to this proxy instead ({env}={base}; `firsttoken env CLIENT` prints the exact setting), or run `firsttoken proxy --forward` to be its HTTPS proxy (it must then trust mitmproxy's CA).",
                "h2c": "Have the client use HTTP/1.1 for http:// URLs (curl: drop --http2-prior-knowledge; httpx: http2=False), or point it at the proxy over TLS.",
                "bare_cr": "Not the upstream's fault: the client puts a CR into a header value (often a value read from a file with its line ending). Strip CR/LF from header values.",
                "obs_fold": "Not the upstream's fault: the client sends a multi-line header value. Put the value on one line (strip CR/LF from header values)."}),
        "zh": ("客户端发送了格式错误的 HTTP 请求",
               "客户端的 HTTP 报文格式无效（错误的分块长度行、单独的 CR 或折行的请求头、无效的 Content-Length），或者把代理当成了别的东西（CONNECT、不加密的 HTTP/2）：代理拒绝了它，没有转发。",
               {"body": "客户端的分块（chunked）请求体格式错误（{error}）；代理关闭了连接，没有转发该请求。",
                "headers": "客户端的请求头对请求体长度的描述有歧义（{error}）：代理拒绝了该请求（防止请求走私），没有转发。",
                "connect": "客户端发送了 CONNECT：它把本代理当作 HTTP(S) 代理（HTTPS_PROXY、--proxy），但 firsttoken 在这里是位于 {host} 前面的反向代理；没有转发任何内容。",
                "h2c": "客户端使用了不加密的 HTTP/2（h2c prior knowledge），代理不接受（{error}）；没有转发任何内容。",
                "bare_cr": "请求头 {name} 中含有单独的 CR，这是 HTTP 禁止的（RFC 9112 §2.2）：代理返回了 400 Bad Request，没有转发该请求。",
                "obs_fold": "请求头 {name} 被折成了多行（obs-fold），这是 HTTP 禁止的（RFC 9112 §5.2）：代理返回了 400 Bad Request，没有转发该请求。"},
               {"body": "不是上游的问题：客户端（或其前面的库、网关）写出了无效的分块编码。请升级它，或改用 Content-Length 发送请求体。",
                "headers": "不是上游的问题：客户端发送的 Content-Length 不是数字，或同时发送了 Content-Length 和 Transfer-Encoding。请修复客户端或构造请求的库。",
                "connect": "为这个客户端去掉 HTTPS_PROXY（或 --proxy），改为把它的 base URL 设为本代理（{env}={base}；`firsttoken env CLIENT` 会打印准确的设置）；或者运行 `firsttoken proxy --forward` 作为它的 HTTPS 代理（客户端需信任 mitmproxy 的 CA）。",
                "h2c": "让客户端对 http:// 地址使用 HTTP/1.1（curl：去掉 --http2-prior-knowledge；httpx：http2=False），或通过 TLS 连接代理。",
                "bare_cr": "不是上游的问题：客户端在请求头值里放入了 CR（常见于从文件读取的值带着行尾符）。请去掉请求头值中的 CR/LF。",
                "obs_fold": "不是上游的问题：客户端发送了多行的请求头值。请把值放在一行（去掉请求头值中的 CR/LF）。"}),
    }),
    ("proxy.shutdown", "connectivity", _W, (), {
        "en": ("Cut when the proxy stopped",
               "The proxy was stopped (Ctrl-C, SIGTERM) while this request was still running, and it did not finish within the drain time.",
               "firsttoken was stopped while this request was running: after {total_ms:,.0f} ms and {events} token events it was cut, not finished by {host}.",
               "Not the upstream's fault. Stop the proxy when no request is running, or give streams longer to finish: --drain-seconds N (a second Ctrl-C cuts at once)."),
        "zh": ("代理停止时被切断",
               "代理在该请求仍在进行时被停止（Ctrl-C、SIGTERM），且请求没有在排空时间内结束。",
               "该请求进行中 firsttoken 被停止：在 {total_ms:,.0f} 毫秒、{events} 个 token 事件后被切断，而不是由 {host} 正常结束。",
               "不是上游的问题。请在没有请求进行时停止代理，或给流更多时间结束：--drain-seconds N（再按一次 Ctrl-C 立即切断）。"),
    }),
    ("proxy.interrupted", "connectivity", _W, (), {
        "en": ("Proxy process ended mid-request",
               "A row was still in flight when its proxy process ended without shutting down (kill -9, a crash, power loss); the next proxy on the same database closed it.",
               "The proxy process (pid {pid}) ended while this request was in phase {phase}: its outcome and timings were never recorded.",
               "Not the upstream's fault. Stop the proxy with Ctrl-C or SIGTERM (it drains and writes every record); if it was killed by the system, check for out-of-memory kills (dmesg) or a crashing host."),
        "zh": ("代理进程在请求中途结束",
               "代理进程未经正常关闭就结束了（kill -9、崩溃、断电），该行仍处于进行中；之后在同一数据库上启动的代理将其关闭。",
               "代理进程（pid {pid}）在该请求处于 {phase} 阶段时结束：它的结果和计时从未被记录。",
               "不是上游的问题。请用 Ctrl-C 或 SIGTERM 停止代理（它会排空并写入每条记录）；如果是被系统杀掉，检查是否因内存不足被杀（dmesg）或主机崩溃。"),
    }),
]
