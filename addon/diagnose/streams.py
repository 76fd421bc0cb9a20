"""Streams and response bodies: what a 200 answer got wrong on its way to the client."""

from __future__ import annotations

import statistics
from typing import Any

from firsttoken.addon.apis import gemini
from firsttoken.addon.diagnose.context import LLM_APIS, TERMINATOR, Ctx, quote, readable, server_text
from firsttoken.addon.diagnose.thresholds import BASELINE_MIN_SAMPLES, BUFFERED_MIN_EVENTS
from firsttoken.addon.framing import framing_of
from firsttoken.addon.hops import PASS_THROUGH, buffer_shape, fix_code, name_hop
from firsttoken.addon.sse import MAX_EVENT_DATA


def _turn(rec: Any) -> bool:
    """A Responses turn on a WebSocket: its frames are the events of a stream."""
    return getattr(rec, "ws_turn", None) is not None


def _ok(rec: Any) -> bool:
    return rec.status is not None and 200 <= rec.status < 300


def _sse(rec: Any) -> bool:
    """An event stream, whatever frames it (SSE, AWS's event stream: addon/framing; a WebSocket turn)."""
    return framing_of(rec.content_type) is not None or _turn(rec)


#: Bedrock's exception frames inside a 200 event stream (``:exception-type``) -> the finding's variant
BEDROCK_EXCEPTIONS = {"throttlingException": "throttling", "modelStreamErrorException": "model_stream",
                      "validationException": "validation", "serviceUnavailableException": "unavailable",
                      "internalServerException": "internal", "modelTimeoutException": "internal"}


def rule_error_event(rec: Any, c: Ctx) -> None:
    if not (_ok(rec) and rec.upstream_error) or c.errors():
        return
    kind = BEDROCK_EXCEPTIONS.get(rec.upstream_error_type or "")
    if kind is not None:
        c.add("stream.bedrock_exception", "error", variant=kind, **c.common(), server=server_text(rec),
              error_type=rec.upstream_error_type, events=rec.events, model=rec.model or "?")
        return
    typed = {"variant": "typed", "error_type": rec.upstream_error_type} if rec.upstream_error_type else {
        "variant": "untyped"}  # (Ollama's {"error": "..."} line has a text and no type)
    c.add("stream.error_event", "error", **typed, **c.common(), server=server_text(rec), events=rec.events)


def rule_blocked(rec: Any, c: Ctx) -> None:
    """Gemini refused the prompt (``promptFeedback.blockReason``) or a content filter stopped the answer."""
    reason = rec.finish_reason or ""
    if not _ok(rec) or c.errors():
        return
    if reason.startswith(gemini.BLOCKED):
        variant, reason = "prompt", reason[len(gemini.BLOCKED):]
    elif rec.api == gemini.API and reason in gemini.FILTERED:
        variant = "output"
    else:
        return
    c.add("response.blocked", "error" if variant == "prompt" or not rec.output_chars else "warn", variant=variant,
          **c.common(), reason=reason, model=rec.model or "?", output_chars=rec.output_chars)


def rule_no_choices(rec: Any, c: Ctx) -> None:
    if _ok(rec) and rec.no_choices and not rec.upstream_error:
        c.add("response.no_choices", "error" if not c.errors() and not rec.output_chars else "warn",
              **c.common(), sample=quote(rec.no_choices, 200))


def _foreign_body(rec: Any) -> bool:
    """An event-stream response whose body held no event, only lines that are no SSE field."""
    return _sse(rec) and bool(getattr(rec, "sse_foreign_lines", 0)) and not rec.events


def rule_not_sse(rec: Any, c: Ctx) -> None:
    if not _ok(rec) or rec.upstream_error:
        return
    if _foreign_body(rec):
        c.add("stream.not_sse", "error", variant="body", **c.common(), content_type=rec.content_type,
              total_ms=rec.total_ms, sample=quote(readable(rec.malformed_sample), 200))
    elif rec.stream is True and rec.api in LLM_APIS and not _sse(rec):
        if rec.api == gemini.API and "alt=sse" not in (rec.path or ""):  # Google's JSON array: the client's choice
            c.add("stream.not_sse", "warn", variant="gemini_array", **c.common(),
                  content_type=rec.content_type or "(none)", total_ms=rec.total_ms)
            return
        c.add("stream.not_sse", "error", variant="plain", **c.common(), content_type=rec.content_type or "(none)",
              total_ms=rec.total_ms)


def rule_truncated(rec: Any, c: Ctx) -> None:
    if not (_ok(rec) and _sse(rec) and rec.stream_done is False):
        return
    if rec.upstream_error or rec.error or rec.client_aborted or c.errors() or _foreign_body(rec):
        return
    finished = bool(rec.finish_reason)
    c.add("stream.truncated", "warn" if finished else "error", variant="finished" if finished else "cut",
          **c.common(), terminator=TERMINATOR.get(rec.api, "the end-of-stream event"), events=rec.events,
          finish_reason=rec.finish_reason)


def rule_malformed(rec: Any, c: Ctx) -> None:
    if not rec.malformed_events or rec.status is None or rec.status >= 300 or _foreign_body(rec):
        return
    nothing = not rec.events and not rec.output_chars
    c.add("response.malformed", "error" if nothing and not c.errors() else "warn", **c.common(),
          count=rec.malformed_events, sample=quote(rec.malformed_sample, 200))


def rule_corrupt_frame(rec: Any, c: Ctx) -> None:
    why = getattr(rec, "frame_error", None)
    if why and rec.status is not None and rec.status < 300:
        c.add("stream.corrupt_frame", "error" if not c.errors() else "warn", **c.common(), why=why,
              content_type=rec.content_type, events=rec.events)


def rule_event_too_large(rec: Any, c: Ctx) -> None:
    if getattr(rec, "oversize_events", 0):
        c.add("response.event_too_large", "warn", **c.common(), count=rec.oversize_events,
              limit_mib=MAX_EVENT_DATA // 2**20)


def buffered_burst(rec: Any, ref_itl_ms: float | None = None) -> dict[str, Any] | None:
    """The facts of a buffered stream (``addon.hops.buffer_shape``), or None."""
    return buffer_shape(rec.event_offsets or [], rec.ttfb_ms, events=rec.events, ref_itl_ms=ref_itl_ms,
                        proxy_delay_ms=getattr(rec, "proxy_delay_ms", None))


def _buffered(rec: Any) -> bool:
    return any(f.get("code") == "stream.buffered" for f in (getattr(rec, "findings", None) or ()))


def route_itl(rec: Any, c: Ctx) -> tuple[float | None, int]:
    """(median ITL p50, count) of the same route's and model's earlier unbuffered streams."""
    vals = []
    for r in c.recent:
        if (getattr(r, "id", None) == rec.id or getattr(r, "route", None) != rec.route
                or getattr(r, "model", None) != rec.model or getattr(r, "status", None) != 200
                or (getattr(r, "events", 0) or 0) < BUFFERED_MIN_EVENTS or _buffered(r)):
            continue
        v = getattr(r, "itl_p50_ms", None)
        if isinstance(v, (int, float)):
            vals.append(v)
    if len(vals) < BASELINE_MIN_SAMPLES:
        return None, len(vals)
    return float(statistics.median(vals)), len(vals)


def hop_of(rec: Any):
    """The hop that answered this record (``addon.hops.name_hop``), or None."""
    headers = getattr(rec, "hop_headers", None)
    return name_hop(getattr(rec, "server", None), getattr(rec, "via", None), headers if isinstance(headers, dict) else None)


def rule_buffered(rec: Any, c: Ctx) -> None:
    if not (_ok(rec) and _sse(rec)) or c.errors():
        return
    facts = buffered_burst(rec)
    if not facts:  # the shape alone decides; the route's own streams can only take a verdict back
        return
    ref, samples = route_itl(rec, c)
    if ref is not None:
        facts = buffered_burst(rec, ref)
        if not facts:
            return
    hop = hop_of(rec)
    # the hop is said to have held the stream only when it is one that buffers unless told not to
    named = hop is not None and hop.kind not in PASS_THROUGH
    if facts.get("variant") == "tail" and facts.get("burst_ms", 1.0) < 0.05:
        facts = {**facts, "variant": "tail_at_once"}  # "within 0.0 ms" says nothing: they came in one read
    c.add("stream.buffered", "warn", **c.common(), **facts, who=hop.name if named else "hop.unnamed",
          hop=hop.name if hop else None, hop_kind=hop.kind if hop else None,
          hop_fix=fix_code(hop.kind if hop else None), ref_itl_ms=ref, ref_samples=samples)


def rule_stall(rec: Any, c: Ctx) -> None:
    if c.has("stream.buffered", "engine.decode_paused"):  # a hop's buffer, or the engine prefilling others
        return
    silence = rec.end_silence_ms
    if silence is not None and silence > c.stall_ms and silence >= (rec.itl_max_ms or 0.0):
        # it went silent and then ended (the client's read timeout, the upstream closing): the
        # longest pause is the one at the end, which no gap between two token events shows
        c.add("stream.stall", "warn", variant="end_client" if rec.client_aborted else "end_upstream", **c.common(),
              silence_ms=silence, stall_ms=c.stall_ms, events=rec.events, total_ms=rec.total_ms)
        return
    if rec.itl_max_ms is None or rec.itl_max_ms <= c.stall_ms:
        return
    offs = list(rec.event_offsets or [])
    at_event, at_ms = None, None
    for i in range(1, len(offs)):
        if abs((offs[i] - offs[i - 1]) - rec.itl_max_ms) < 1.0:
            at_event, at_ms = i, offs[i - 1]
            break
    c.add("stream.stall", "warn", variant="at" if at_event is not None else "somewhere", **c.common(),
          itl_max_ms=rec.itl_max_ms, stall_ms=c.stall_ms, at_event=at_event, at_ms=at_ms)


def rule_usage(rec: Any, c: Ctx) -> None:
    if not (_ok(rec) and _sse(rec) and rec.stream_done) or rec.api not in LLM_APIS or c.errors():
        return
    if rec.usage_completion_tokens is None and rec.usage_prompt_tokens is None:
        c.add("usage.missing", "info", variant="chat" if rec.api in ("openai.chat", "openai.completions") else "other",
              **c.common(), output_tokens=rec.output_tokens_est)


def rule_not_requested(rec: Any, c: Ctx) -> None:
    if _ok(rec) and rec.api in LLM_APIS and rec.stream is False and not _sse(rec) and not c.errors():
        c.add("stream.not_requested", "info", variant="gemini" if rec.api == gemini.API else "body", **c.common(),
              total_ms=rec.total_ms)


RULES = (rule_error_event, rule_blocked, rule_no_choices, rule_not_sse, rule_corrupt_frame, rule_truncated, rule_malformed,
         rule_event_too_large,
         rule_buffered,
         rule_stall, rule_usage, rule_not_requested)


# ---- The ``streams`` family of the finding catalog, in English and Chinese.

_E, _W, _I = "error", "warn", "info"
_STALL_FIX_EN = ("Either the upstream sent nothing for that long (load, a long tool call, a proxy in between flushing late), "
                 "or the client stopped reading and the proxy waited for it (a slow or paused consumer): make sure client "
                 "read timeouts exceed {itl_max_ms:,.0f} ms; raise --stall-ms if such pauses are expected.")
_STALL_FIX_ZH = ("要么上游在这段时间内没有发送任何内容（负载、生成较长的工具调用、中间代理延迟刷新），要么客户端停止了读取、代理在等它"
                 "（消费端过慢或暂停）：确保客户端读取超时大于 {itl_max_ms:,.0f} 毫秒；如果这种停顿属于正常，调大 --stall-ms。")

# (code, family, usual severity, other possible severities, {lang: (title, when, message, hint)})
ENTRIES: list[tuple[str, str, str, tuple[str, ...], dict[str, tuple[Any, Any, Any, Any]]]] = [
    ("stream.error_event", "streams", _E, (), {
        "en": ("Error inside a 200 stream",
               "The stream answered 200, then carried an error event.",
               {"typed": "The stream started (200) but {host} sent an error after {events} token events: \u201c{server}\u201d ({error_type}).",
                "untyped": "The stream started (200) but {host} sent an error after {events} token events: \u201c{server}\u201d."},
               "The answer is incomplete: retry (overloaded and server errors are transient); make sure your client treats in-stream error events as failures."),
        "zh": ("200 流中出现错误",
               "流以 200 开始，随后出现了错误事件。",
               {"typed": "流已开始（200），但 {host} 在 {events} 个 token 事件后发来错误：\u201c{server}\u201d（{error_type}）。",
                "untyped": "流已开始（200），但 {host} 在 {events} 个 token 事件后发来错误：\u201c{server}\u201d。"},
               "回答不完整：请重试（过载和服务器错误通常是暂时的）；确保客户端把流中的错误事件当作失败处理。"),
    }),
    ("response.blocked", "streams", _E, (_W,), {
        "en": ("Blocked by the content filter",
               "Gemini refused the prompt (promptFeedback.blockReason), or its safety filter stopped the answer (finishReason SAFETY, RECITATION, PROHIBITED_CONTENT, BLOCKLIST, SPII ...; a warning when part of the answer came).",
               {"prompt": "{host} answered 200 but refused the prompt itself (blockReason {reason}): {model} generated nothing.",
                "output": "{model}'s answer was stopped by the content filter (finishReason {reason}) after {output_chars} characters."},
               {"prompt": "Rephrase the prompt or remove what the filter objects to (the response's promptFeedback.safetyRatings say which category); safetySettings in the request can relax the adjustable categories (HARM_CATEGORY_*: BLOCK_ONLY_HIGH or BLOCK_NONE); PROHIBITED_CONTENT and BLOCKLIST cannot be relaxed.",
                "output": "RECITATION: the answer quoted protected text (ask for a summary in the model's own words); SAFETY: relax safetySettings for the category the candidate's safetyRatings name, or rephrase; PROHIBITED_CONTENT, BLOCKLIST and SPII cannot be relaxed. Retrying the same request usually gives the same result."}),
        "zh": ("被内容过滤拦截",
               "Gemini 拒绝了提示词（promptFeedback.blockReason），或安全过滤中止了回答（finishReason 为 SAFETY、RECITATION、PROHIBITED_CONTENT、BLOCKLIST、SPII 等；已有部分回答时为警告）。",
               {"prompt": "{host} 返回 200，但拒绝了提示词本身（blockReason {reason}）：{model} 没有生成任何内容。",
                "output": "{model} 的回答在 {output_chars} 个字符后被内容过滤中止（finishReason {reason}）。"},
               {"prompt": "改写提示词或去掉过滤器反对的内容（响应中的 promptFeedback.safetyRatings 会说明类别）；请求中的 safetySettings 可以放宽可调类别（HARM_CATEGORY_*：BLOCK_ONLY_HIGH 或 BLOCK_NONE）；PROHIBITED_CONTENT 和 BLOCKLIST 无法放宽。",
                "output": "RECITATION：回答引用了受保护的文本（请模型用自己的话概括）；SAFETY：为候选结果 safetyRatings 指出的类别放宽 safetySettings，或改写提示词；PROHIBITED_CONTENT、BLOCKLIST 和 SPII 无法放宽。原样重试通常结果相同。"}),
    }),
    ("stream.bedrock_exception", "streams", _E, (), {
        "en": ("Bedrock exception inside a 200 stream",
               "Bedrock's event stream answered 200, then carried an exception frame (:message-type exception): throttling, a model stream error, validation, service unavailable or an internal error.",
               "Bedrock's stream started (200) but sent a {error_type} frame after {events} token events: \u201c{server}\u201d.",
               {"throttling": "Bedrock throttled {model}: the account's tokens- or requests-per-minute quota for it in this region ran out. Retry with backoff; ask for a quota increase (Service Quotas, Amazon Bedrock), or spread the load with a cross-region inference profile (a model id starting us., eu., global.).",
                "model_stream": "The model's stream failed inside Bedrock (modelStreamErrorException): retry; if it repeats for this prompt, shorten it or lower max_tokens.",
                "validation": "Bedrock refused the request while streaming (validationException): read its message above: a parameter the model does not take, or a prompt beyond its context.",
                "unavailable": "Bedrock is unavailable for {model} right now (serviceUnavailableException): retry with backoff, or another region.",
                "internal": "An internal error inside Bedrock ({error_type}): transient; retry, and report the request id if it repeats."}),
        "zh": ("200 流中出现 Bedrock 异常",
               "Bedrock 的事件流以 200 开始，随后发来异常帧（:message-type exception）：限流、模型流错误、校验失败、服务不可用或内部错误。",
               "Bedrock 的流已开始（200），但在 {events} 个 token 事件后发来 {error_type} 帧：\u201c{server}\u201d。",
               {"throttling": "Bedrock 对 {model} 限流：账户在该区域此模型的每分钟 token 或请求配额已用完。请退避重试；在 Service Quotas（Amazon Bedrock）申请提高配额，或用跨区域推理配置文件（以 us.、eu.、global. 开头的模型 ID）分摊负载。",
                "model_stream": "模型的流在 Bedrock 内部失败（modelStreamErrorException）：请重试；如果这个提示词总是失败，缩短它或调低 max_tokens。",
                "validation": "Bedrock 在流式输出中拒绝了请求（validationException）：看上面的消息：模型不接受的参数，或超出上下文的提示词。",
                "unavailable": "Bedrock 上的 {model} 暂时不可用（serviceUnavailableException）：请退避重试，或换一个区域。",
                "internal": "Bedrock 内部错误（{error_type}）：通常是暂时的；请重试，若反复出现请附上请求 ID 报告。"}),
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
    ("stream.corrupt_frame", "streams", _E, (_W,), {
        "en": ("Corrupt event-stream frame",
               "A binary event stream (Bedrock's application/vnd.amazon.eventstream) held a frame that fails its CRC32 check, declares an impossible length or has malformed headers, or it ended inside a frame.",
               "{host}'s {content_type} stream could not be decoded past one frame: {why}. firsttoken forwarded every byte unchanged but analysed nothing after it ({events} token events before).",
               "The client's own decoder meets the same bytes and fails (the AWS SDKs raise a checksum error): retry; if it repeats, something between firsttoken and the model rewrites or cuts the body (a proxy that re-chunks or compresses it, a gateway's timeout)."),
        "zh": ("事件流帧损坏",
               "二进制事件流（Bedrock 的 application/vnd.amazon.eventstream）中有一帧未通过 CRC32 校验、声明了不可能的长度或头部格式错误，或者流在帧的中间结束了。",
               "{host} 的 {content_type} 流在某一帧之后无法解码：{why}。firsttoken 原样转发了全部字节，但没有分析它之后的内容（此前有 {events} 个 token 事件）。",
               "客户端自己的解码器会遇到同样的字节并失败（AWS SDK 会报校验错误）：请重试；如果反复出现，说明 firsttoken 与模型之间有东西改写或截断了响应体（重新分块或压缩它的代理、网关超时）。"),
    }),
    ("stream.not_sse", "streams", _E, (_W,), {
        "en": ("Stream requested, plain body returned",
               "The request asked for \"stream\": true but the 200 response is not text/event-stream; or it says text/event-stream but its body holds no event, only other text.",
               {"plain": "The client asked for a stream but {host} answered with Content-Type {content_type}: one body after {total_ms:,.0f} ms.",
                "body": "{host} answered 200 with Content-Type {content_type}, but the body is not an event stream: \u201c{sample}\u201d.",
                "gemini_array": "The client called streamGenerateContent without alt=sse, so {host} streamed one JSON array ({content_type}): firsttoken cannot time its tokens one by one (the answer took {total_ms:,.0f} ms)."},
               {"plain": "The upstream (or a gateway in between) ignores \"stream\": true here: use an endpoint or model that streams, or enable streaming in the gateway; clients expecting SSE may show nothing.",
                "body": "Read the text above: an error page or plain text under an event-stream header comes from a gateway or a web server in front of the API (check the base URL and that gateway); clients expecting SSE show nothing or fail to parse it.",
                "gemini_array": "Add ?alt=sse to the URL (…:streamGenerateContent?alt=sse), as the google-genai SDKs and Gemini CLI do: Google then sends one server-sent event per chunk, which firsttoken times."}),
        "zh": ("请求了流式，返回的却是普通响应体",
               "请求带了 \"stream\": true，但 200 响应不是 text/event-stream；或者声称是 text/event-stream，响应体里却没有任何事件，只有别的文本。",
               {"plain": "客户端请求了流式输出，但 {host} 返回的 Content-Type 是 {content_type}：在 {total_ms:,.0f} 毫秒后一次性返回了整个响应体。",
                "body": "{host} 返回 200，Content-Type 为 {content_type}，但响应体不是事件流：\u201c{sample}\u201d。",
                "gemini_array": "客户端调用 streamGenerateContent 时没有带 alt=sse，所以 {host} 以一个 JSON 数组（{content_type}）流式返回：firsttoken 无法逐个计时其 token（回答用了 {total_ms:,.0f} 毫秒）。"},
               {"plain": "上游（或中间的网关）在这里忽略了 \"stream\": true：换用支持流式的接口或模型，或在网关中开启流式；期待 SSE 的客户端可能什么都显示不出来。",
                "body": "看上面的文本：事件流响应头下的错误页或纯文本来自 API 前面的网关或 Web 服务器（检查 base URL 和该网关）；期待 SSE 的客户端会什么都不显示或解析失败。",
                "gemini_array": "在 URL 上加 ?alt=sse（…:streamGenerateContent?alt=sse），google-genai SDK 和 Gemini CLI 都这样做：Google 会为每个分块发送一个 server-sent event，firsttoken 即可计时。"}),
    }),
    ("stream.buffered", "streams", _W, (), {
        "en": ("Stream buffered on the way",
               "At least {BUFFERED_SHARE:.0%} of the token events (min. {BUFFERED_MIN_EVENTS}) arrived in releases: {BUFFERED_CLUMP_EVENTS}+ events at once ({BUFFERED_RELEASE_GAP_MS} ms apart on average: faster than any model generates), each after a silence of at least {BUFFERED_HOLD_MS:.0f} ms; with the headers, in buffer-sized bursts, or all at the end. TTFT and the gap of such a stream are the buffering hop's delay: latency.network and latency.prefill are not judged on it.",
               {"with_headers": "{who} held this stream for {first_ms:,.0f} ms: the response headers came only then, together with {burst_events} of its {events} token events at once ({held_events} events in {bursts} burst(s) of up to {largest}; the longest hold {held_ms:,.0f} ms). This TTFB and TTFT are that hop's delay, not the network and not the model's prefill.",
                "tail": "{who} held this stream for {wait_ms:,.0f} ms: after the headers the client received no token for {wait_ms:,.0f} ms, then {burst_events} of {events} token events arrived within {burst_ms:,.1f} ms. The gap before the first token is that hop's delay, not the model's prefill.",
                "tail_at_once": "{who} held this stream for {wait_ms:,.0f} ms: after the headers the client received no token for {wait_ms:,.0f} ms, then {burst_events} of {events} token events arrived at once, in one read. The gap before the first token is that hop's delay, not the model's prefill.",
                "bursts": "{who} held this stream back for up to {held_ms:,.0f} ms at a time: {held_events} of its {events} token events arrived in {bursts} bursts of up to {largest} events at once, the first at {first_ms:,.0f} ms. The TTFT is that hop's delay, not the model's prefill."},
               "{hop_fix} Every hop's own fix: `firsttoken docs gateways`."),
        "zh": ("流在途中被缓冲",
               "至少 {BUFFERED_SHARE:.0%} 的 token 事件（至少 {BUFFERED_MIN_EVENTS} 个）是成批放行到达的：每批 {BUFFERED_CLUMP_EVENTS} 个以上同时到达（平均间隔不超过 {BUFFERED_RELEASE_GAP_MS} 毫秒：快于任何模型的生成速度），且每批之前至少静默 {BUFFERED_HOLD_MS:.0f} 毫秒；可能与响应头一起、按缓冲区大小分批、或全部在末尾到达。这种流的 TTFT 和间隔是缓冲那一跳造成的延迟：不再对它判定 latency.network 和 latency.prefill。",
               {"with_headers": "{who}把这个流扣住了 {first_ms:,.0f} 毫秒：响应头直到那时才到达，同时到达的还有 {events} 个 token 事件中的 {burst_events} 个（{held_events} 个事件分 {bursts} 批到达，每批最多 {largest} 个；最长一次扣留 {held_ms:,.0f} 毫秒）。这里的 TTFB 和 TTFT 是那一跳的延迟，既不是网络也不是模型的 prefill。",
                "tail": "{who}把这个流扣住了 {wait_ms:,.0f} 毫秒：响应头之后客户端有 {wait_ms:,.0f} 毫秒没有收到任何 token，随后 {events} 个 token 事件中的 {burst_events} 个在 {burst_ms:,.1f} 毫秒内集中到达。首 token 之前的间隔是那一跳的延迟，不是模型的 prefill。",
                "tail_at_once": "{who}把这个流扣住了 {wait_ms:,.0f} 毫秒：响应头之后客户端有 {wait_ms:,.0f} 毫秒没有收到任何 token，随后 {events} 个 token 事件中的 {burst_events} 个在同一次读取中同时到达。首 token 之前的间隔是那一跳的延迟，不是模型的 prefill。",
                "bursts": "{who}每次最多把这个流扣住 {held_ms:,.0f} 毫秒：{events} 个 token 事件中的 {held_events} 个分 {bursts} 批到达，每批最多 {largest} 个同时到达，第一批在 {first_ms:,.0f} 毫秒。TTFT 是那一跳的延迟，不是模型的 prefill。"},
               "{hop_fix} 各种中间层各自的修复方法见 `firsttoken docs gateways`。"),
    }),
    ("stream.stall", "streams", _W, (), {
        "en": ("Stall inside the stream",
               "The longest gap between two token events, or the silence before a stream ended abnormally (a client hang-up, an upstream error), exceeds --stall-ms.",
               {"at": "The stream paused {itl_max_ms:,.0f} ms between two token events as seen by the proxy (limit {stall_ms:,.0f} ms), after token event {at_event} at {at_ms:,.0f} ms.",
                "somewhere": "The stream paused {itl_max_ms:,.0f} ms between two token events as seen by the proxy (limit {stall_ms:,.0f} ms).",
                "end_client": "The stream had sent nothing for {silence_ms:,.0f} ms (limit {stall_ms:,.0f} ms) when the client hung up at {total_ms:,.0f} ms, after {events} token events: it stalled, and the client gave up waiting.",
                "end_upstream": "The stream had sent nothing for {silence_ms:,.0f} ms (limit {stall_ms:,.0f} ms) when it ended with an error at {total_ms:,.0f} ms, after {events} token events."},
               {"at": _STALL_FIX_EN, "somewhere": _STALL_FIX_EN,
                "end_client": "The upstream stopped generating (load, a long tool call, a gateway holding the stream): retry; if such pauses are expected, make the client's read timeout longer than {silence_ms:,.0f} ms (openai/anthropic SDK: timeout=..., Claude Code: API_TIMEOUT_MS, curl: --max-time).",
                "end_upstream": "The upstream (or a gateway in between) went quiet and then cut the stream: retry; if it repeats, check the gateway's idle timeout against {silence_ms:,.0f} ms and the upstream's status."}),
        "zh": ("流中出现停顿",
               "两个 token 事件之间的最长间隔，或流异常结束（客户端断开、上游出错）之前的静默时长，超过 --stall-ms。",
               {"at": "代理观察到流在两个 token 事件之间停顿了 {itl_max_ms:,.0f} 毫秒（阈值 {stall_ms:,.0f} 毫秒），发生在第 {at_event} 个 token 事件之后、{at_ms:,.0f} 毫秒处。",
                "somewhere": "代理观察到流在两个 token 事件之间停顿了 {itl_max_ms:,.0f} 毫秒（阈值 {stall_ms:,.0f} 毫秒）。",
                "end_client": "客户端在 {total_ms:,.0f} 毫秒断开时，流已经 {silence_ms:,.0f} 毫秒没有发送任何内容（阈值 {stall_ms:,.0f} 毫秒），此前共 {events} 个 token 事件：流停顿了，客户端放弃了等待。",
                "end_upstream": "流在 {total_ms:,.0f} 毫秒以错误结束时，已经 {silence_ms:,.0f} 毫秒没有发送任何内容（阈值 {stall_ms:,.0f} 毫秒），此前共 {events} 个 token 事件。"},
               {"at": _STALL_FIX_ZH, "somewhere": _STALL_FIX_ZH,
                "end_client": "上游停止了生成（负载、较长的工具调用、网关扣住了流）：重试；如果这种停顿属于正常，把客户端的读取超时调到大于 {silence_ms:,.0f} 毫秒（openai/anthropic SDK：timeout=...，Claude Code：API_TIMEOUT_MS，curl：--max-time）。",
                "end_upstream": "上游（或中间的网关）先是没有动静，然后切断了流：重试；如果反复出现，对照 {silence_ms:,.0f} 毫秒检查网关的空闲超时和上游的状态。"}),
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
    ("response.event_too_large", "streams", _W, (), {
        "en": ("Event too large to analyse",
               "An SSE event (or a WebSocket frame) was larger than firsttoken's analysis limit; it was forwarded whole but not analysed.",
               "{count} event(s) of the stream were larger than firsttoken's {limit_mib} MiB analysis limit: the client received them unchanged, but firsttoken did not read them (token counts and usage may be missing).",
               "Not an upstream error: a limit of firsttoken. Nothing to fix unless such events are unexpected (a huge tool call or image in one event)."),
        "zh": ("事件过大，无法分析",
               "某个 SSE 事件（或 WebSocket 帧）超过了 firsttoken 的分析上限；它被完整转发，但没有被分析。",
               "流中有 {count} 个事件超过了 firsttoken 的 {limit_mib} MiB 分析上限：客户端原样收到了它们，但 firsttoken 没有解析（token 数和用量可能缺失）。",
               "不是上游错误，而是 firsttoken 的限制。除非这种事件出乎意料（一个事件里有巨大的工具调用或图片），否则无需处理。"),
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
               {"body": "Send \"stream\": true (openai: stream=True; anthropic: client.messages.stream(...)) to receive tokens as they are generated.",
                "gemini": "Call :streamGenerateContent?alt=sse instead of :generateContent (google-genai: client.models.generate_content_stream(...)) to receive tokens as they are generated."}),
        "zh": ("未使用流式",
               "LLM 请求没有要求流式输出，返回 200：无法测量 TTFT。",
               "请求没有要求流式输出，因此无法测量 TTFT：客户端等了 {total_ms:,.0f} 毫秒才拿到完整回答。",
               {"body": "发送 \"stream\": true（openai：stream=True；anthropic：client.messages.stream(...)），即可边生成边接收 token。",
                "gemini": "改用 :streamGenerateContent?alt=sse 而不是 :generateContent（google-genai：client.models.generate_content_stream(...)），即可边生成边接收 token。"}),
    }),
]
