"""WebSocket: a refused upgrade and the HTTP fallback it costs, a close that hit a turn, the
server's connection limit, binary frames. docs/record.md ("WebSocket turns")."""

from __future__ import annotations

import datetime as _dt
from typing import Any

from firsttoken.addon.diagnose.context import Ctx, quote, server_text
from firsttoken.addon.diagnose.thresholds import WS_FALLBACK_WINDOW_S

#: the error of a turn a close frame (or a dropped connection) ended before its terminal event
WS_CLOSED_ERROR = "the WebSocket closed mid-turn"
#: the Responses API's error code when a connection reached its time limit (60 minutes)
CONNECTION_LIMIT = "websocket_connection_limit_reached"


def ws_closed_error(code: int | None, by: str | None) -> str:
    """The record's ``error`` for a turn a close hit."""
    who = f" by the {by}" if by else ""
    return f"{WS_CLOSED_ERROR}{who} (close code {code if code is not None else 'none'})"


def close_variant(code: int | None) -> str:
    """What a close code says (RFC 6455 §7.4, and 4000-4999 for the service's own codes)."""
    if code in (1000, 1005):
        return "normal"
    if code == 1001:
        return "going_away"
    if code == 1006 or code is None:
        return "abnormal"
    if code == 1009:
        return "too_big"
    if code in (1011, 1012, 1013, 1014):
        return "server_error"
    if 4000 <= code <= 4999:
        return "application"
    return "other"


def _refused(r: Any) -> bool:
    """A refused WebSocket upgrade: the GET asking for one answered with an error."""
    return (getattr(r, "transport", None) == "websocket" and getattr(r, "ws_turn", None) is None
            and r.status is not None and r.status >= 400)


def _start(r: Any) -> float | None:
    try:
        return _dt.datetime.fromisoformat(r.started_at).timestamp()
    except (TypeError, ValueError):
        return None


def _same_client(a: Any, b: Any) -> bool:
    return a.route == b.route and a.key_fingerprint == b.key_fingerprint and a.upstream == b.upstream


def _refusals_before(rec: Any, c: Ctx) -> list[Any]:
    """This client's refused upgrades in the window before ``rec``, since its last HTTP Responses
    request (whose ws.fallback counted the earlier ones)."""
    t = _start(rec)
    if t is None:
        return []
    out = []
    for r in reversed(c.recent):
        if r is rec or not _same_client(r, rec):
            continue
        rt = _start(r)
        if rt is None or rt > t:
            continue
        if t - rt > WS_FALLBACK_WINDOW_S:
            break
        if _refused(r):
            out.append(r)
        elif r.api == "openai.responses" and getattr(r, "transport", "http") == "http":
            break
    return out


def rule_upgrade_refused(rec: Any, c: Ctx) -> None:
    if not _refused(rec):
        return
    before = _refusals_before(rec, c)
    first = _start(before[-1]) if before else None
    span = (_start(rec) - first) if first is not None and _start(rec) is not None else 0.0
    variant = "auth" if rec.status in (401, 403) else "refused"
    c.add("ws.upgrade_refused", "warn" if variant == "auth" else "error", variant=variant, **c.common(),
          tries=len(before) + 1, span_s=round(span, 1), server=server_text(rec) or "-")


def rule_fallback(rec: Any, c: Ctx) -> None:
    if getattr(rec, "transport", "http") != "http" or rec.api != "openai.responses":
        return
    before = _refusals_before(rec, c)
    if not before:
        return
    t, first = _start(rec), _start(before[-1])
    lost = (t - first) if t is not None and first is not None else None
    c.add("ws.fallback", "warn", **c.common(), tries=len(before), lost_s=round(lost, 1) if lost is not None else None,
          refused_status=before[0].status)


def rule_closed(rec: Any, c: Ctx) -> None:
    if rec.ws_turn is None or not (rec.error or "").startswith(WS_CLOSED_ERROR):
        return
    by = rec.ws_closed_by or "server"
    variant = "client" if by == "client" else close_variant(rec.ws_close_code)
    c.add("ws.closed", "warn" if by == "client" else "error", variant=variant, **c.common(),
          close_code=rec.ws_close_code if rec.ws_close_code is not None else "-", reason=quote(rec.ws_close_reason) or "-",
          by=by, events=rec.events, total_ms=rec.total_ms)


def rule_connection_limit(rec: Any, c: Ctx) -> None:
    if CONNECTION_LIMIT in (rec.upstream_error_type or "") or CONNECTION_LIMIT in (rec.upstream_error or ""):
        c.add("ws.connection_limit", "warn", **c.common(), turn=rec.ws_turn,
              age_s=_connection_age(rec))


def _connection_age(rec: Any) -> float | None:
    conn = rec.ws_connection if isinstance(rec.ws_connection, dict) else {}
    try:
        opened = _dt.datetime.fromisoformat(conn.get("started_at")).timestamp()
        return round(_dt.datetime.fromisoformat(rec.started_at).timestamp() - opened, 1)
    except (TypeError, ValueError):
        return None


def rule_binary(rec: Any, c: Ctx) -> None:
    if getattr(rec, "ws_binary_frames", 0):
        c.add("ws.binary_frames", "info", **c.common(), count=rec.ws_binary_frames)


RULES = (rule_upgrade_refused, rule_fallback, rule_closed, rule_connection_limit, rule_binary)


# ---- The ``websocket`` family of the finding catalog, in English and Chinese.

_E, _W, _I = "error", "warn", "info"

_FIX_EN = ("serve WebSockets on this route (an upstream or gateway that accepts `GET {path}` with `Upgrade: websocket`), "
           "or make the client use HTTP + SSE: in Codex, a custom provider with `supports_websockets = false` "
           "([model_providers.NAME] in ~/.codex/config.toml, `model_provider = \"NAME\"`). The base URL itself is right: "
           "the same path answers HTTP")
_FIX_ZH = ("让这条路由支持 WebSocket（上游或网关接受带 `Upgrade: websocket` 的 `GET {path}`），"
           "或者让客户端改用 HTTP + SSE：在 Codex 中使用 `supports_websockets = false` 的自定义 provider"
           "（~/.codex/config.toml 中的 [model_providers.NAME]，并设置 `model_provider = \"NAME\"`）。base URL 本身没错："
           "同一路径可以正常响应 HTTP")

ENTRIES: list[tuple[str, str, str, tuple[str, ...], dict[str, tuple[Any, Any, Any, Any]]]] = [
    ("ws.upgrade_refused", "websocket", _E, (_W,), {
        "en": ("WebSocket upgrade refused",
               "A request to become a WebSocket (`GET` with `Upgrade: websocket`, e.g. Codex's built-in OpenAI provider on `/v1/responses`) was answered with an error instead of 101 (within WS_FALLBACK_WINDOW_S s, refusals of one client are added up).",
               {"refused": "{host} refused the WebSocket upgrade of {path} with {status} ({server}); try {tries} of this client in {span_s} s. A client that speaks Responses over WebSocket retries the upgrade (Codex 0.171: 7 tries in about 6 s) before it falls back to HTTP, and pays that again at every session start.",
                "auth": "{host} refused the WebSocket upgrade of {path} with {status}: the credentials were not accepted ({server}); try {tries} of this client in {span_s} s."},
               {"refused": _FIX_EN + ".",
                "auth": "Fix the key first (see the auth finding); if the upstream only refuses WebSockets, " + _FIX_EN + "."}),
        "zh": ("WebSocket 升级被拒绝",
               "一个要升级为 WebSocket 的请求（带 `Upgrade: websocket` 的 `GET`，例如 Codex 内置 OpenAI provider 访问 `/v1/responses`）得到的是错误而不是 101（同一客户端在 WS_FALLBACK_WINDOW_S 秒内的拒绝会被合计）。",
               {"refused": "{host} 以 {status} 拒绝了 {path} 的 WebSocket 升级（{server}）；这是该客户端 {span_s} 秒内的第 {tries} 次尝试。通过 WebSocket 使用 Responses 的客户端会反复重试升级（Codex 0.171：约 6 秒内 7 次），然后才回退到 HTTP，并且每次开始会话时都要再付出这段时间。",
                "auth": "{host} 以 {status} 拒绝了 {path} 的 WebSocket 升级：凭据未被接受（{server}）；这是该客户端 {span_s} 秒内的第 {tries} 次尝试。"},
               {"refused": _FIX_ZH + "。",
                "auth": "先修正密钥（见认证相关的发现）；如果上游只是不支持 WebSocket，" + _FIX_ZH + "。"}),
    }),
    ("ws.fallback", "websocket", _W, (), {
        "en": ("Fell back to HTTP after refused WebSocket upgrades",
               "A Responses request over HTTP came after refused WebSocket upgrades from the same client (route and key) within WS_FALLBACK_WINDOW_S s.",
               "This request came over HTTP after {tries} refused WebSocket upgrade(s) ({refused_status}) by the same client: about {lost_s} s lost before it fell back, at every session start.",
               _FIX_EN + "."),
        "zh": ("WebSocket 升级被拒绝后回退到 HTTP",
               "同一客户端（路由与密钥）在 WS_FALLBACK_WINDOW_S 秒内的 WebSocket 升级被拒绝之后，又通过 HTTP 发出了 Responses 请求。",
               "该请求通过 HTTP 发出，此前同一客户端的 {tries} 次 WebSocket 升级被拒绝（{refused_status}）：回退之前大约损失了 {lost_s} 秒，并且每次开始会话都会如此。",
               _FIX_ZH + "。"),
    }),
    ("ws.closed", "websocket", _E, (_W,), {
        "en": ("WebSocket closed mid-turn",
               "The WebSocket a Responses turn rode closed before the turn's terminal event (response.completed / failed / incomplete / error).",
               {"client": "The client closed the WebSocket (code {close_code}, {reason}) after {total_ms:,.0f} ms and {events} token events, before this turn ended.",
                "normal": "The server closed the WebSocket normally (code {close_code}, {reason}) before this turn ended, after {total_ms:,.0f} ms and {events} token events.",
                "going_away": "The server went away (code {close_code} going away, {reason}) before this turn ended: a restart or a deploy on its side.",
                "abnormal": "The connection dropped without a close frame (code {close_code}: abnormal closure, by the {by}) after {total_ms:,.0f} ms and {events} token events: the peer or something between died, or a timeout cut it.",
                "too_big": "The WebSocket was closed with code {close_code} (message too big, {reason}): a frame was larger than the {by} accepts.",
                "server_error": "The server closed the WebSocket with code {close_code} (an error on its side, {reason}) before this turn ended.",
                "application": "The service closed the WebSocket with its own code {close_code} ({reason}) before this turn ended.",
                "other": "The WebSocket was closed with code {close_code} ({reason}, by the {by}) before this turn ended."},
               {"client": "Fine if it was cancelled on purpose (Ctrl-C, an interrupt); otherwise look at the client's own timeout or error.",
                "normal": "The client reconnects and resends the turn; if it recurs, the server ends connections on purpose (an idle or age limit).",
                "going_away": "Transient: the client reconnects with a new upgrade. If it recurs, look for deploys or restarts of the upstream or a gateway in between.",
                "abnormal": "Look at what sits between (a gateway's or load balancer's idle timeout, a VPN) and at the upstream's health; the client resends on a new connection.",
                "too_big": "Send less per turn (fewer or smaller input items), or raise the frame size limit of the server or gateway in between.",
                "server_error": "A server-side failure: retry; if it persists, report it to the provider with the time and the request id.",
                "application": "The reason text is the service's own: look it up in its documentation (4xxx codes are defined by the service).",
                "other": "Look up the close code (RFC 6455 §7.4) and the reason text."}),
        "zh": ("WebSocket 在一轮中途关闭",
               "承载 Responses 这一轮的 WebSocket 在该轮结束事件（response.completed / failed / incomplete / error）之前关闭了。",
               {"client": "客户端在 {total_ms:,.0f} 毫秒、{events} 个 token 事件之后、本轮结束之前关闭了 WebSocket（代码 {close_code}，{reason}）。",
                "normal": "服务器在本轮结束之前正常关闭了 WebSocket（代码 {close_code}，{reason}），此时已过 {total_ms:,.0f} 毫秒、{events} 个 token 事件。",
                "going_away": "服务器在本轮结束之前离开了（代码 {close_code} going away，{reason}）：对方在重启或部署。",
                "abnormal": "连接在没有关闭帧的情况下断开（代码 {close_code}：异常关闭，由{by}一侧），此时已过 {total_ms:,.0f} 毫秒、{events} 个 token 事件：对端或中间环节崩溃，或被超时切断。",
                "too_big": "WebSocket 以代码 {close_code} 关闭（消息过大，{reason}）：某个帧超过了{by}一侧接受的大小。",
                "server_error": "服务器在本轮结束之前以代码 {close_code} 关闭了 WebSocket（服务器端错误，{reason}）。",
                "application": "服务在本轮结束之前以其自定义代码 {close_code} 关闭了 WebSocket（{reason}）。",
                "other": "WebSocket 在本轮结束之前以代码 {close_code} 关闭（{reason}，由{by}一侧）。"},
               {"client": "如果是有意取消（Ctrl-C、中断）则无妨；否则请检查客户端自身的超时或错误。",
                "normal": "客户端会重新连接并重发本轮；如果反复出现，说明服务器有意结束连接（空闲或时长限制）。",
                "going_away": "暂时性问题：客户端会重新升级连接。如果反复出现，检查上游或中间网关的部署与重启。",
                "abnormal": "检查中间环节（网关或负载均衡的空闲超时、VPN）以及上游的健康状况；客户端会在新连接上重发。",
                "too_big": "每轮发送更少的内容（更少或更小的 input 项），或提高服务器或中间网关的帧大小上限。",
                "server_error": "服务器端故障：重试；如果持续出现，请把时间和请求 ID 报告给服务商。",
                "application": "原因文字由服务自己定义：请查阅其文档（4xxx 代码由服务定义）。",
                "other": "查阅关闭代码（RFC 6455 §7.4）和原因文字。"}),
    }),
    ("ws.connection_limit", "websocket", _W, (), {
        "en": ("WebSocket connection limit reached",
               "The upstream answered a turn with `websocket_connection_limit_reached`: a Responses WebSocket lives at most 60 minutes.",
               "Turn {turn} of this WebSocket failed with websocket_connection_limit_reached, {age_s} s after the connection opened: the server ends a connection after 60 minutes.",
               "The client must open a new WebSocket (a new upgrade) and resend the turn; Codex does so on its own. If turns keep failing with it, update the client, or use HTTP (a Codex provider with `supports_websockets = false`)."),
        "zh": ("WebSocket 连接达到时长上限",
               "上游对某一轮返回了 `websocket_connection_limit_reached`：Responses 的 WebSocket 连接最多保持 60 分钟。",
               "该 WebSocket 的第 {turn} 轮因 websocket_connection_limit_reached 失败，距连接建立 {age_s} 秒：服务器会在 60 分钟后结束连接。",
               "客户端需要新建 WebSocket（重新升级）并重发本轮；Codex 会自动这样做。如果各轮持续因此失败，请升级客户端，或改用 HTTP（Codex 中 `supports_websockets = false` 的 provider）。"),
    }),
    ("ws.binary_frames", "websocket", _I, (), {
        "en": ("Binary WebSocket frames",
               "The server sent binary frames where the Responses API sends JSON text frames.",
               "{count} of the server's frames in this turn were binary, not text: firsttoken read them as UTF-8 JSON and forwarded them unchanged.",
               "Nothing to do if the client reads them; a client that expects text frames may drop them: check the gateway or server that sends binary."),
        "zh": ("二进制 WebSocket 帧",
               "服务器发送了二进制帧，而 Responses API 通常发送 JSON 文本帧。",
               "本轮中服务器有 {count} 个帧是二进制而非文本：firsttoken 按 UTF-8 JSON 读取它们并原样转发。",
               "如果客户端能读取则无需处理；期望文本帧的客户端可能会丢弃它们：请检查发送二进制帧的网关或服务器。"),
    }),
]
