"""Conversations and turns: which requests belong together, and where a prompt changed.

Pure and in memory (runs on the analysis thread): :func:`prompt_parts` reads a request body,
:class:`ConversationIndex` places it, :func:`divergence` says where it stopped matching the
previous one. How requests are grouped: docs/conversations.md.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import re
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from firsttoken.addon.tokens.prefix import strip_cache_hints

#: conversations remembered (least recently used forgotten first)
MAX_CONVERSATIONS = 256
#: system text kept per conversation, to find where it changed
MAX_SYSTEM_CHARS = 256 * 1024
#: ends of requests kept per conversation (for the client-side gap of overlapping requests)
MAX_ENDS = 8
#: a conversation without a session id is continued only within this many seconds
CHAIN_TTL_S = 3600.0
KINDS = ("main", "side", "count_tokens")
#: a side call that does not extend the conversation (opencode's title call: its own system prompt,
#: then the user's first message) joins it by a user message they share, within this many seconds
ANCHOR_TTL_S = 900.0
#: user messages per request that can tie a side call to its conversation, and their shortest text
#: (a "hi" or "ping" is too common to tell two conversations apart)
MAX_ANCHORS = 3
MIN_ANCHOR_CHARS = 16
#: a request identical to its conversation's last one, sent after that one failed, within this many
#: seconds, is a retry of it (same conversation, same turn)
RETRY_WINDOW_S = 300.0
#: two system prompts (or tool lists) sharing less than this share of their text are different
#: prompts (a side task's), not one prompt edited (a timestamp that moved)
SAME_PROMPT_SHARE = 0.5

_UUID = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
_CLAUDE_USER_ID = re.compile(r"_session_(" + _UUID + r")")
_SESSION_KEYS = ("session_id", "conversation_id", "thread_id", "sessionId", "conversationId")


@dataclass
class Parts:
    """What one request's prompt looks like, reduced to what grouping and cache diagnosis need."""

    session: str | None = None  # the client's own session / conversation id
    client_turn: str | None = None  # the client's own turn id (Codex)
    system: str = ""  # system / instructions / leading system messages, as text
    tools: list[str] = field(default_factory=list)  # tool names, in order
    tool_defs: list[str] = field(default_factory=list)  # one hash per tool definition (cache hints stripped)
    messages: list[str] = field(default_factory=list)  # one 16-hex hash per message (cache hints stripped)
    user_turns: int = 0  # user messages that are not tool results
    new_turn: bool = False  # the last message is a user message that is not a tool result
    has_tools: bool = False
    cache_marker: bool = False  # an Anthropic ``cache_control`` anywhere
    cache_markers: int = 0  # how many ``cache_control`` markers the request carries
    #: hashes of the first few user messages long enough to tell a conversation by (a side call that
    #: quotes the user, like opencode's title call, shares one with the main request)
    anchors: list[str] = field(default_factory=list)
    #: Responses ``previous_response_id``: the server holds the earlier items, only new ones are sent
    previous_response_id: str | None = None


#: ``canonical_json``'s encoder, made once (``json.dumps`` with arguments builds one per call)
_CANONICAL = json.JSONEncoder(sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)


def _hash(value: Any) -> str:
    """16 hex digits of ``canonical_json(value)`` (cache hints stripped, keys sorted)."""
    try:
        if type(value) is dict and "cache_control" not in value and all(type(v) is str for v in value.values()):
            data = _CANONICAL.encode(value)  # a plain message: nothing to strip
        else:
            data = _CANONICAL.encode(strip_cache_hints(value))
    except (TypeError, ValueError, RecursionError):
        data = repr(value)
    return hashlib.blake2b(data.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()


def _text(content: Any) -> str:
    """The text of a system prompt / message content (a string or a list of text blocks)."""
    if isinstance(content, str):
        return content
    if isinstance(content, dict):
        return _text(content.get("text") if "text" in content else content.get("content"))
    if isinstance(content, list):
        return "\n".join(_text(b) for b in content)
    return ""


def session_of(body: dict[str, Any]) -> tuple[str | None, str | None]:
    """(session id, turn id) the client put in the body, else (None, None).

    Claude Code: ``metadata.user_id`` = ``user_<hash>_account_<uuid>_session_<uuid>`` (older) or a
    JSON string ``{"device_id":…, "session_id": "<uuid>"}`` (2.x). Codex: ``prompt_cache_key`` and
    ``client_metadata.session_id`` / ``turn_id``. Others: ``metadata.session_id`` / ``conversation_id``."""
    turn = None
    meta = body.get("metadata")
    cm = body.get("client_metadata")
    if isinstance(cm, dict) and isinstance(cm.get("turn_id"), str):
        turn = cm["turn_id"]
    for d in (meta, cm):
        if not isinstance(d, dict):
            continue
        uid = d.get("user_id")
        if isinstance(uid, str):
            m = _CLAUDE_USER_ID.search(uid)
            if m:
                return m.group(1), turn
            if uid.startswith("{"):
                try:
                    inner = json.loads(uid)
                except ValueError:
                    inner = None
                if isinstance(inner, dict) and isinstance(inner.get("session_id"), str) and inner["session_id"]:
                    return inner["session_id"][:200], turn
        for k in _SESSION_KEYS:
            if isinstance(d.get(k), str) and d[k]:
                return d[k][:200], turn
    key = body.get("prompt_cache_key")
    if isinstance(key, str) and key:
        return key[:200], turn
    return None, turn


def _is_tool_result(m: Any) -> bool:
    """A message that answers a tool call (continues a turn) rather than a new user message."""
    if not isinstance(m, dict):
        return False
    if m.get("role") == "tool" or m.get("type") in ("function_call_output", "custom_tool_call_output",
                                                    "computer_call_output", "function_call"):
        return True
    content = m.get("content")
    return (m.get("role") == "user" and isinstance(content, list) and bool(content)
            and all(isinstance(b, dict) and b.get("type") == "tool_result" for b in content))


def _is_user(m: Any) -> bool:
    return isinstance(m, dict) and m.get("role") == "user" and not _is_tool_result(m)


def _tool_names(tools: Any) -> list[str]:
    out = []
    for t in tools if isinstance(tools, list) else []:
        if isinstance(t, dict):
            fn = t.get("function")
            name = t.get("name") or (fn.get("name") if isinstance(fn, dict) else None) or t.get("type")
            out.append(str(name)[:200] if name else "?")
    return out


def _gemini_message(content: dict) -> dict:
    """A Gemini ``Content`` in the chat shape the rules compare: ``model`` is the assistant, a user turn
    made only of ``functionResponse`` parts answers a tool call (it continues the turn)."""
    role, parts = content.get("role"), content.get("parts")
    parts = parts if isinstance(parts, list) else []
    if role == "model":
        return {"role": "assistant", "content": parts}
    if parts and all(isinstance(x, dict) and ("functionResponse" in x or "function_response" in x) for x in parts):
        return {"role": "tool", "content": parts}
    return {"role": "user", "content": parts}


def _gemini_tools(tools: Any) -> list:
    """Gemini's ``tools`` (``[{"functionDeclarations": [...]}, {"googleSearch": {}}]``) as one list of tools."""
    out: list = []
    for t in tools if isinstance(tools, list) else []:
        decls = t.get("functionDeclarations", t.get("function_declarations")) if isinstance(t, dict) else None
        if isinstance(decls, list):
            out += [d for d in decls if isinstance(d, dict)]
        elif isinstance(t, dict):
            out.append({"type": next(iter(t), "?")} if len(t) == 1 else t)
    return out


def prompt_parts(api: str, body: Any) -> Parts | None:
    """The :class:`Parts` of one parsed request body (None for a body that is not a chat)."""
    if not isinstance(body, dict):
        return None
    p = Parts()
    p.session, p.client_turn = session_of(body)
    if api == "openai.responses":
        prev = body.get("previous_response_id")
        p.previous_response_id = prev[:200] if isinstance(prev, str) and prev else None
        inp = body.get("input")
        msgs = [{"role": "user", "content": inp}] if isinstance(inp, str) else inp if isinstance(inp, list) else []
        system = [_text(body.get("instructions"))] if body.get("instructions") else []
    elif api in ("openai.chat", "anthropic.messages", "ollama.chat"):
        msgs = body.get("messages") if isinstance(body.get("messages"), list) else []
        system = [_text(body.get("system"))] if api == "anthropic.messages" and body.get("system") else []
    elif api == "ollama.generate":
        msgs = [{"role": "user", "content": _text(body.get("prompt"))}]
        system = [_text(body.get("system"))] if body.get("system") else []
    elif api == "gemini.generate":
        msgs = [_gemini_message(c) for c in body.get("contents") or [] if isinstance(c, dict)] \
            if isinstance(body.get("contents"), list) else []
        si = body.get("systemInstruction", body.get("system_instruction"))
        system = [_text(si.get("parts") if isinstance(si, dict) else si)] if si else []
    else:
        return None
    # leading system / developer messages are the system prompt (OpenAI shapes)
    i = 0
    while i < len(msgs) and isinstance(msgs[i], dict) and msgs[i].get("role") in ("system", "developer"):
        system.append(_text(msgs[i].get("content")))
        i += 1
    msgs = msgs[i:]
    p.system = "\n".join(system)[:MAX_SYSTEM_CHARS]
    tools = _gemini_tools(body.get("tools")) if api == "gemini.generate" else body.get("tools")
    p.tools = _tool_names(tools)
    p.has_tools = bool(p.tools)
    p.tool_defs = [_hash(t) for t in tools] if p.has_tools else []
    p.messages = [_hash(as_cached(_without_ids(m))) for m in msgs]
    p.user_turns = sum(1 for m in msgs if _is_user(m))
    for m, h in zip(msgs, p.messages):
        if len(p.anchors) >= MAX_ANCHORS:
            break
        if _is_user(m) and len(_text(m.get("content")).strip()) >= MIN_ANCHOR_CHARS:
            p.anchors.append(h)
    last = next((m for m in reversed(msgs) if not (isinstance(m, dict) and m.get("role") == "assistant")), None)
    p.new_turn = _is_user(last)
    if api == "anthropic.messages":
        p.cache_markers = json.dumps([body.get("system"), body.get("tools"), msgs], default=str).count('"cache_control"')
        p.cache_marker = p.cache_markers > 0
    return p


_TEXT_BLOCK_KEYS = frozenset({"type", "text", "cache_control"})


def _one_text(content: Any) -> Any:
    """``content`` as a prompt cache sees it: a list holding one plain text block is the same
    prompt as that text given as a string (Claude Code sends a message as a one-block list while
    it carries the ``cache_control`` marker, and as a string once the marker has moved on)."""
    if (type(content) is list and len(content) == 1 and type(content[0]) is dict
            and content[0].get("type") == "text" and type(content[0].get("text")) is str
            and content[0].keys() <= _TEXT_BLOCK_KEYS):
        return content[0]["text"]
    return content


def as_cached(m: Any) -> Any:
    """A message reduced to what a provider's prompt cache compares: a string and a one-block
    text list are one prompt (also inside tool results); ``cache_control`` markers are stripped
    later, by the hash. Any role, ``system`` inside ``messages`` included."""
    if type(m) is not dict or "content" not in m:
        return m
    content = _one_text(m["content"])
    if type(content) is list:
        content = [dict(b, content=_one_text(b["content"])) if type(b) is dict and b.get("type") == "tool_result"
                   and "content" in b else b for b in content]
    return m if content is m["content"] else dict(m, content=content)


def _without_ids(m: Any) -> Any:
    """A Responses input item without its ``id`` (an echo of the server's item id, not content)."""
    if isinstance(m, dict) and "id" in m and m.get("type") in ("message", "reasoning"):
        return {k: v for k, v in m.items() if k != "id"}
    return m


# ---- where two prompts differ ------------------------------------------------------------------

_VOLATILE = re.compile(
    r"\d{4}-\d{2}-\d{2}[T ]\d{1,2}:\d{2}|\d{1,2}:\d{2}:\d{2}|\b1[6-9]\d{8,11}\b"  # times, unix stamps
    r"|" + _UUID + r"|\b[0-9a-f]{16,}\b|\d{4}-\d{2}-\d{2}", re.IGNORECASE)


def first_difference(a: str, b: str) -> int:
    """The index of the first character where ``a`` and ``b`` differ (len of the shorter if one
    is a prefix of the other)."""
    lo, hi = 0, min(len(a), len(b))  # a[:lo] == b[:lo] holds; binary search (comparisons in C)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[lo:mid] == b[lo:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def divergence(prev: Parts | None, cur: Parts) -> dict[str, Any] | None:
    """Where ``cur``'s cacheable prefix stops matching ``prev``'s (the previous request of the
    same conversation), in cache order: system prompt, tools, then messages. None when ``cur``
    repeats ``prev``'s whole prefix (its messages extend ``prev``'s)."""
    if prev is None:
        return None
    if cur.system != prev.system:
        at = first_difference(prev.system, cur.system)
        window = cur.system[max(0, at - 40): at + 40]
        return {"part": "system", "offset": at, "volatile": bool(_VOLATILE.search(window)),
                "before": prev.system[max(0, at - 20): at + 20], "after": cur.system[max(0, at - 20): at + 20]}
    if cur.tools != prev.tools:
        if sorted(cur.tools) == sorted(prev.tools):
            return {"part": "tools_order", "tools": len(cur.tools)}
        added = [t for t in cur.tools if t not in prev.tools]
        removed = [t for t in prev.tools if t not in cur.tools]
        return {"part": "tools", "added": added[:5], "removed": removed[:5]}
    if cur.tool_defs != prev.tool_defs and len(cur.tool_defs) == len(prev.tool_defs):
        changed = [name for name, a, b in zip(cur.tools, prev.tool_defs, cur.tool_defs, strict=False) if a != b]
        return {"part": "tools_changed", "changed": changed[:5], "count": len(changed)}
    if cur.previous_response_id is not None:
        return None  # only the new items were sent: the earlier ones are the server's, unchanged
    n = min(len(prev.messages), len(cur.messages))
    for i in range(n):
        if prev.messages[i] != cur.messages[i]:
            return {"part": "messages", "index": i, "previous_messages": len(prev.messages)}
    if len(cur.messages) < len(prev.messages):
        return {"part": "messages", "index": len(cur.messages), "previous_messages": len(prev.messages)}
    return None


def same_prompt(a: str, b: str) -> bool:
    """Whether two system prompts are one prompt, possibly edited (a moved timestamp, an added
    line), rather than two prompts (the main agent's and a side task's: a title generator, a memory
    extractor, a sub-agent). Shared text: the longer of (common prefix + common suffix) and the
    lines both contain; at least :data:`SAME_PROMPT_SHARE` of the longer prompt."""
    if a == b:
        return True
    longest = max(len(a), len(b))
    if not a or not b:
        return longest < 200  # a short prompt added or dropped is an edit; a whole agent prompt is not
    head = first_difference(a, b)
    tail = first_difference(a[head:][::-1], b[head:][::-1])
    if (head + tail) / longest >= SAME_PROMPT_SHARE:
        return True
    lines_b = set(b.splitlines())
    shared = sum(len(line) + 1 for line in set(a.splitlines()) if line.strip() and line in lines_b)
    return shared / longest >= SAME_PROMPT_SHARE


def identifies(parts: Parts) -> bool:
    """Whether a prompt is one conversation's rather than anyone's: a history (two messages or
    more), tools, or a user message long enough to tell conversations apart. A lone "Say hi." or
    "ping" (a demo, a health check, curl by hand) is sent alike by requests that share nothing,
    and a system prompt alone is an app's, shared by all its users."""
    return len(parts.messages) > 1 or parts.has_tools or bool(parts.anchors)


def same_tools(a: list[str], b: list[str]) -> bool:
    """Whether two tool lists are one agent's tools (equal, reordered, or a few added or removed:
    an MCP server connected) rather than two agents' (a side task given a few tools of its own)."""
    if a == b:
        return True
    sa, sb = set(a), set(b)
    return len(sa & sb) / max(len(sa), len(sb), 1) >= SAME_PROMPT_SHARE


# ---- the index ---------------------------------------------------------------------------------

@dataclass
class Conversation:
    id: str
    key: tuple[str, str]  # (route, API family)
    session: str | None
    turn: int = 0
    user_turns: int = -1
    client_turn: str | None = None
    main_model: str | None = None
    main_has_tools: bool = False
    last: Parts | None = None  # the last main request's parts
    last_seen: float = 0.0  # perf_counter of the last request's start
    ends: list[float] = field(default_factory=list)  # perf_counter ends of recent requests
    anchors: list[str] = field(default_factory=list)  # its first request's user-message hashes
    last_failed: bool = False  # its latest ended request failed (a retry may follow)
    #: record ids of main requests placed before any main request carried tools: if one with tools
    #: and another system prompt follows (opencode's title call raced ahead of the main request),
    #: these were side calls
    tentative: list[str] = field(default_factory=list)


@dataclass
class Assignment:
    conversation_id: str
    turn: int
    request_kind: str
    previous: Parts | None  # the previous main request's parts (for cache diagnosis)
    since_previous_s: float | None  # since the previous request of the conversation started
    conversation: Conversation
    #: record ids placed earlier as main requests that this one shows were side calls
    now_side: list[str] = field(default_factory=list)


def conversation_id_for(route: str, family: str, session: str) -> str:
    """A stable id for a client session (the same after a proxy restart)."""
    return hashlib.blake2b(f"{route}\0{family}\0{session}".encode("utf-8", "surrogatepass"),
                           digest_size=6).hexdigest()


#: 48-bit arithmetic for new conversation ids
_ID_MASK = (1 << 48) - 1


def _id_seed() -> int:
    return int.from_bytes(os.urandom(6), "big")


_ids = {"seed": _id_seed(), "count": itertools.count(1)}
if hasattr(os, "register_at_fork"):  # a forked child must not repeat the parent's ids
    os.register_at_fork(after_in_child=lambda: _ids.update(seed=_id_seed(), count=itertools.count(1)))


def new_conversation_id() -> str:
    """12 hex digits for a conversation without a session id: a per-process random start plus a
    counter, mixed (a bijection on 48 bits, so never twice in a process; across restarts as
    unlikely to repeat as random ids). No urandom syscall per conversation."""
    x = (_ids["seed"] + next(_ids["count"])) & _ID_MASK
    x = (x * 0x9E3779B97F4B) & _ID_MASK
    x ^= x >> 23
    x = (x * 0xC2B2AE3D27D5) & _ID_MASK
    x ^= x >> 27
    return f"{x:012x}"


class ConversationIndex:
    """Recent conversations in bounded memory; used on one thread (the analysis thread).

    Conversations without a session id are also filed under their last request's messages
    (route and family, how many, a hash of them), so a request looks up only the conversations
    its messages could extend, not every conversation it remembers."""

    def __init__(self, maxsize: int = MAX_CONVERSATIONS,
                 history: Callable[[str], tuple[int, str | None] | None] | None = None) -> None:
        self.maxsize = max(1, maxsize)
        #: a client session not in memory (a proxy restarted, or it was forgotten): its last recorded
        #: turn and main model, so turns go on where they were (``store.conversations.last_turn``)
        self.history = history
        self._convs: OrderedDict[str, Conversation] = OrderedDict()
        #: (key, number of messages, hash of them) -> the conversations filed there, least recently used first
        self._chains: dict[tuple[Any, ...], dict[str, Conversation]] = {}
        self._chain_of: dict[str, tuple[Any, ...]] = {}  # conversation id -> where it is filed
        self._failed: set[str] = set()  # conversations whose latest request failed (a retry may follow)
        self._lengths: dict[tuple[str, str], dict[int, int]] = {}  # key -> number of messages -> conversations
        #: (key, user-message hash) -> the conversation whose first request had it (side calls join by it)
        self._anchors: dict[tuple[Any, ...], str] = {}
        #: a Responses response id -> the conversation it answered (``previous_response_id`` chains)
        self._responses: OrderedDict[str, str] = OrderedDict()

    def __len__(self) -> int:
        return len(self._convs)

    def get(self, conversation_id: str) -> Conversation | None:
        return self._convs.get(conversation_id)

    def _resume(self, conv: Conversation) -> None:
        """Turn and main model of a session recorded before (a proxy restart): history is a bonus,
        so a lookup that fails leaves the conversation as new."""
        if self.history is None:
            return
        try:
            found = self.history(conv.id)
        except Exception:
            return
        if found:
            conv.turn, conv.main_model = found

    def _chain_match(self, key: tuple[str, str], parts: Parts, now: float) -> Conversation | None:
        """The conversation whose last request's messages ``parts`` extends (the longest; of
        equally long ones the most recently used)."""
        msgs = parts.messages
        total = len(msgs)
        lengths = self._lengths.get(key) if total > 1 else None
        if not lengths:
            return None
        for n in sorted((n for n in lengths if n < total), reverse=True):
            prefix = msgs[:n]
            found = self._chains.get((key, n, hash(tuple(prefix))))
            if not found:
                continue
            for conv in reversed(found.values()):
                if now - conv.last_seen > CHAIN_TTL_S:
                    continue
                if conv.last.messages == prefix:
                    return conv
        return None

    def _anchor_match(self, key: tuple[str, str], parts: Parts, now: float) -> Conversation | None:
        """A recent conversation whose first request shares a user message with ``parts`` while
        ``parts`` is another prompt (its own system prompt or tools): a side call that quotes the
        user, or the main request a side call raced ahead of."""
        for h in parts.anchors:
            conv = self._convs.get(self._anchors.get((key, h), ""))
            if conv is None or now - conv.last_seen > ANCHOR_TTL_S or conv.last is None:
                continue
            if not same_prompt(conv.last.system, parts.system) or parts.has_tools != conv.main_has_tools \
                    or not same_tools(conv.last.tools, parts.tools):
                return conv
        return None

    def _response_match(self, parts: Parts) -> Conversation | None:
        """The conversation whose response ``parts`` continues (``previous_response_id``)."""
        if parts.previous_response_id is None:
            return None
        cid = self._responses.get(parts.previous_response_id)
        return self._convs.get(cid) if cid is not None else None

    def _retry_match(self, key: tuple[str, str], parts: Parts, model: str | None, now: float) -> Conversation | None:
        """The conversation whose last request ``parts`` repeats exactly (messages, system, tools,
        model) after that request failed (an error status, a cut, the client giving up): a retry of
        one call. Identical requests while it runs are not retries (a load test sends many), nor is
        a prompt that could be anyone's (:func:`identifies`): five "Say hi." are five requests."""
        if not parts.messages or not self._failed or not identifies(parts):  # (no scan of twins for nothing)
            return None
        found = self._chains.get((key, len(parts.messages), hash(tuple(parts.messages))))
        for conv in reversed((found or {}).values()):
            last = conv.last
            if (now - conv.last_seen <= RETRY_WINDOW_S and conv.last_failed and conv.main_model == model
                    and last.messages == parts.messages and last.system == parts.system and last.tools == parts.tools):
                return conv
        return None

    def _file_anchors(self, conv: Conversation, parts: Parts) -> None:
        if conv.anchors or conv.session is not None:
            return
        conv.anchors = list(parts.anchors)
        for h in conv.anchors:
            self._anchors[(conv.key, h)] = conv.id

    def _forget(self, conv: Conversation) -> None:
        self._unfile(conv.id)
        self._failed.discard(conv.id)
        for h in conv.anchors:
            if self._anchors.get((conv.key, h)) == conv.id:
                del self._anchors[(conv.key, h)]

    def _unfile(self, conversation_id: str) -> None:
        where = self._chain_of.pop(conversation_id, None)
        if where is None:
            return
        found = self._chains[where]
        del found[conversation_id]
        if not found:
            del self._chains[where]
        key, n = where[0], where[1]
        lengths = self._lengths[key]
        if lengths[n] > 1:
            lengths[n] -= 1
        else:
            del lengths[n]
            if not lengths:
                del self._lengths[key]

    def _file(self, conv: Conversation) -> None:
        last = conv.last
        if conv.session is not None or last is None or not last.messages:
            return
        n = len(last.messages)
        where = (conv.key, n, hash(tuple(last.messages)))
        self._chains.setdefault(where, {})[conv.id] = conv
        self._chain_of[conv.id] = where
        lengths = self._lengths.setdefault(conv.key, {})
        lengths[n] = lengths.get(n, 0) + 1

    def assign(self, *, route: str | None, family: str, model: str | None, path: str | None,
               parts: Parts | None, t0: float, record_id: str | None = None) -> Assignment | None:
        """Place one request (at its parse); None when it is not a chat request. ``record_id``
        lets a later request say this one was a side call (:attr:`Assignment.now_side`)."""
        key = (route or "default", family)
        count_tokens = "/count_tokens" in (path or "") or ":counttokens" in (path or "").lower()
        if parts is None:
            return None
        conv = None
        if parts.session:
            cid = conversation_id_for(key[0], key[1], parts.session)
            conv = self._convs.get(cid)
            if conv is None:
                conv = Conversation(id=cid, key=key, session=parts.session)
                self._resume(conv)
        else:
            conv = (self._response_match(parts) or self._chain_match(key, parts, t0)
                    or self._retry_match(key, parts, model, t0) or self._anchor_match(key, parts, t0))
            if conv is None:
                conv = Conversation(id=new_conversation_id(), key=key, session=None)
        self._convs[conv.id] = conv
        self._convs.move_to_end(conv.id)
        self._unfile(conv.id)  # filed again below, as the most recent, under its (new) last messages
        while len(self._convs) > self.maxsize:
            self._forget(self._convs.popitem(last=False)[1])
        since = t0 - conv.last_seen if conv.last_seen else None
        conv.last_seen = t0

        kind, rebase = self._kind(conv, parts, model, count_tokens)
        previous = None if rebase else conv.last
        now_side: list[str] = []
        if rebase:  # the main requests so far were another task's (a title call that came first)
            now_side, conv.tentative = conv.tentative, []
            conv.turn, conv.user_turns, conv.client_turn, conv.last = 0, -1, None, None
            self._forget(conv)
            conv.anchors = []
        if kind == "main":
            conv.main_model = model
            conv.main_has_tools = conv.main_has_tools or parts.has_tools
            if parts.client_turn is not None:
                new = parts.client_turn != conv.client_turn
            else:
                extends = previous is not None and parts.previous_response_id is None and parts.messages[:len(previous.messages)] == previous.messages
                new = parts.new_turn and (parts.user_turns != conv.user_turns or not extends)
            if new or conv.turn == 0:
                conv.turn += 1
            conv.client_turn = parts.client_turn
            conv.user_turns = parts.user_turns
            conv.last = parts
            if not conv.main_has_tools and record_id is not None and len(conv.tentative) < MAX_ENDS:
                conv.tentative.append(record_id)
            elif conv.main_has_tools:
                conv.tentative = []
            self._file_anchors(conv, parts)
        self._file(conv)
        return Assignment(conv.id, max(conv.turn, 1), kind, previous, since, conv, now_side)

    @staticmethod
    def _kind(conv: Conversation, parts: Parts, model: str | None, count_tokens: bool) -> tuple[str, bool]:
        """(kind, whether the conversation's main requests so far were side calls after all).

        A side call is the client's own machinery beside the conversation: a small model without
        the main requests' tools (titles, summaries), or another prompt (a system prompt or tool
        set of its own: Qwen Code's memory extractor, opencode's title generator, a sub-agent)."""
        if count_tokens:
            return "count_tokens", False
        last = conv.last
        if conv.main_model is None or last is None:
            return "main", False
        other_prompt = not same_prompt(last.system, parts.system)
        if parts.has_tools and not conv.main_has_tools:
            # tools where the main requests had none: this is the agent; what came before under
            # another prompt was a side call that raced ahead of it
            return "main", other_prompt and bool(conv.tentative)
        if conv.main_has_tools:
            if not parts.has_tools or other_prompt or not same_tools(last.tools, parts.tools):
                return "side", False
            return "main", False
        return ("main" if model == conv.main_model and not other_prompt else "side"), False

    def ended(self, conv: Conversation, end: float, failed: bool = False, response_id: str | None = None) -> None:
        """A request of ``conv`` ended at perf_counter ``end`` (``failed``: an error, a cut, a 4xx/5xx);
        ``response_id``: the Responses id it got, which a later ``previous_response_id`` names."""
        if response_id:
            self._responses[response_id] = conv.id
            while len(self._responses) > MAX_CONVERSATIONS * MAX_ENDS:
                self._responses.popitem(last=False)
        conv.last_failed = failed
        if failed:
            self._failed.add(conv.id)
        else:
            self._failed.discard(conv.id)
        conv.ends.append(end)
        if len(conv.ends) > MAX_ENDS:
            del conv.ends[0]

    @staticmethod
    def client_gap_ms(conv: Conversation, t0: float) -> float | None:
        """Time between the end of the conversation's latest request that ended before ``t0``
        and ``t0``: the client's own time (tool execution, the user typing). None for the first."""
        before = [e for e in conv.ends if e <= t0]
        return round((t0 - max(before)) * 1000.0, 3) if before else None
