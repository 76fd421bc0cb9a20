"""Conversations, turns and prompt-cache misses, with the official SDKs through the real proxy.

A scripted tool loop (user -> tool call -> tool result -> answer -> a new user message) must land in
one conversation with turns 1, 1, 2 and client-side gaps equal to the sleeps between requests; a
system prompt whose timestamp changes must be diagnosed as cache.miss with its divergence point.
"""

from __future__ import annotations

import json
import pathlib
import sqlite3
import time

import anthropic
import openai
import pytest
from conftest import FAST, rows

from firsttoken.addon.conversations import ConversationIndex, Parts, divergence, prompt_parts, session_of
from firsttoken.cli.proxy.server import ProxyServer
from firsttoken.cli.simulate import SimConfig, SimServer

SLEEP_S = 0.3
GOLDEN = pathlib.Path(__file__).resolve().parent / "fixtures" / "conversations_golden.json"
GAP_TOLERANCE_MS = 150.0

TOOL_AN = {"name": "read_file", "description": "Read a file", "input_schema": {
    "type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}
TOOL_OA = {"type": "function", "function": {"name": "read_file", "description": "Read a file", "parameters": {
    "type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}}


@pytest.fixture(scope="module")
def cache_sim():
    with SimServer(SimConfig(**FAST, prompt_cache=True)) as s:
        yield s


@pytest.fixture
def cache_proxy(cache_sim, db_path):
    p = ProxyServer([cache_sim.url], str(db_path), port=0)
    p.start()
    yield p
    p.stop()


def client_gap_within(r: dict, since_previous_s: float) -> None:
    """A request's client gap (the previous response's end to this request, as the proxy saw them):
    about the client's pause at least, and at most the time from the previous request's start to
    this one's, as this client measured it, plus how long this one's bytes waited for the proxy
    (its recorded lag). A busy machine moves the upper bound with it; a gap that misses the pause,
    or spans more than the previous request (from the one before it), falls outside."""
    upper = since_previous_s * 1000 + (r["proxy_lag_ms"] or 0) + 5
    assert SLEEP_S * 1000 - GAP_TOLERANCE_MS <= r["client_gap_ms"] <= upper, (r["client_gap_ms"], upper)


def _main_rows(db_path):
    return [r for r in rows(db_path) if r["request_kind"] == "main"]


def test_anthropic_tool_loop_is_one_conversation(proxy, db_path):
    c = anthropic.Anthropic(base_url=proxy.url, api_key="sk-ant-test-000000000000000000000", max_retries=0)
    msgs = [{"role": "user", "content": "What is in a.txt?"}]
    sent = [time.monotonic()]  # when each request of the loop began, as this client saw it
    r1 = c.messages.create(model="sim-tool-1", max_tokens=64, tools=[TOOL_AN], messages=msgs)
    call = next(b for b in r1.content if b.type == "tool_use")
    time.sleep(SLEEP_S)  # "running the tool"
    msgs += [{"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in r1.content]},
             {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call.id, "content": "hello"}]}]
    sent.append(time.monotonic())
    r2 = c.messages.create(model="sim-1", max_tokens=64, tools=[TOOL_AN], messages=msgs)
    time.sleep(SLEEP_S)  # "the user typing"
    msgs += [{"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in r2.content]},
             {"role": "user", "content": "Thanks. And b.txt?"}]
    sent.append(time.monotonic())
    with c.messages.stream(model="sim-1", max_tokens=64, tools=[TOOL_AN], messages=msgs) as s:
        s.get_final_message()
    # a side call (a small model, no tools), like Claude Code's title generation
    c.messages.create(model="sim-haiku-1", max_tokens=16, messages=msgs[:1] + [
        {"role": "assistant", "content": "ok"}, {"role": "user", "content": "Title for this chat?"}])
    proxy.flush()
    rs = rows(db_path)
    assert len(rs) == 4
    assert len({r["conversation_id"] for r in rs[:3]}) == 1 and rs[0]["conversation_id"]
    assert [r["turn"] for r in rs[:3]] == [1, 1, 2]
    assert [r["request_kind"] for r in rs[:3]] == ["main"] * 3
    assert rs[0]["client_gap_ms"] is None
    for i, r in enumerate(rs[1:3], 1):
        client_gap_within(r, sent[i] - sent[i - 1])
    # the side call continues the chain of the first request only: a conversation of its own, or
    # this one labelled side, never a main request of this conversation's turn
    side = rs[3]
    assert side["conversation_id"] != rs[0]["conversation_id"] or side["request_kind"] == "side"


def test_openai_tool_loop_is_one_conversation(proxy, db_path):
    c = openai.OpenAI(base_url=proxy.url + "/v1", api_key="sk-test-00000000000000000000000", max_retries=0)
    msgs = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "What is in a.txt?"}]
    sent = [time.monotonic()]  # when each request of the loop began, as this client saw it
    r1 = c.chat.completions.create(model="sim-tool-1", tools=[TOOL_OA], messages=msgs)
    call = r1.choices[0].message.tool_calls[0]
    time.sleep(SLEEP_S)
    msgs += [r1.choices[0].message.model_dump(exclude_none=True),
             {"role": "tool", "tool_call_id": call.id, "content": "hello"}]
    sent.append(time.monotonic())
    stream = c.chat.completions.create(model="sim-1", tools=[TOOL_OA], messages=msgs, stream=True)
    text = "".join(ch.choices[0].delta.content or "" for ch in stream if ch.choices)
    time.sleep(SLEEP_S)
    msgs += [{"role": "assistant", "content": text}, {"role": "user", "content": "And b.txt?"}]
    sent.append(time.monotonic())
    c.chat.completions.create(model="sim-1", tools=[TOOL_OA], messages=msgs)
    proxy.flush()
    rs = rows(db_path)
    assert len(rs) == 3
    assert len({r["conversation_id"] for r in rs}) == 1
    assert [r["turn"] for r in rs] == [1, 1, 2]
    assert [r["request_kind"] for r in rs] == ["main"] * 3
    for i, r in enumerate(rs[1:], 1):
        client_gap_within(r, sent[i] - sent[i - 1])


def test_session_id_groups_requests_that_share_no_messages(proxy, db_path):
    """Claude Code 2.x puts its session in metadata.user_id as JSON: two unrelated prompts of the
    same session are one conversation, another session is another."""
    c = anthropic.Anthropic(base_url=proxy.url, api_key="sk-ant-test-000000000000000000000", max_retries=0)
    sid = "16581633-a878-48d7-beee-19b764239012"
    meta = {"user_id": json.dumps({"device_id": "df01", "account_uuid": "", "session_id": sid})}
    for text in ("first", "second"):
        c.messages.create(model="sim-1", max_tokens=8, metadata=meta, messages=[{"role": "user", "content": text}])
    c.messages.create(model="sim-1", max_tokens=8, messages=[{"role": "user", "content": "first"}],
                      metadata={"user_id": "user_ab12_account_00000000-0000-4000-8000-000000000000_session_"
                                           "11111111-2222-4333-8444-555555555555"})
    proxy.flush()
    rs = rows(db_path)
    assert rs[0]["conversation_id"] == rs[1]["conversation_id"] != rs[2]["conversation_id"]
    assert [r["turn"] for r in rs] == [1, 2, 1]


def test_turns_go_on_after_a_proxy_restart(sim, db_path):
    """A Claude Code session outlives a proxy restart: the next proxy on the same database picks
    up its turns where the last one left them, and still tells a side call from the main loop."""
    sid = "0c9a2b7e-5d1f-4a3b-9c8d-7e6f5a4b3c2d"
    meta = {"user_id": json.dumps({"device_id": "df01", "account_uuid": "", "session_id": sid})}
    msgs = [{"role": "user", "content": "What is in a.txt?"}]

    def ask(p, model="sim-1", tools=(TOOL_AN,), messages=None):
        c = anthropic.Anthropic(base_url=p.url, api_key="sk-ant-test-000000000000000000000", max_retries=0)
        return c.messages.create(model=model, max_tokens=16, metadata=meta, tools=list(tools),
                                 messages=messages or msgs)

    def reply(r):
        return {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in r.content]}

    first = ProxyServer([sim.url], str(db_path), port=0).start()
    try:
        msgs.append(reply(ask(first)))
        msgs.append({"role": "user", "content": "And b.txt?"})
        r = ask(first, model="sim-tool-1")  # turn 2 asks for a tool; the proxy stops while it runs
        first.flush()
    finally:
        first.stop()
    call = next(b for b in r.content if b.type == "tool_use")
    msgs += [reply(r), {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call.id, "content": "hi"}]}]
    second = ProxyServer([sim.url], str(db_path), port=0).start()
    try:
        msgs.append(reply(ask(second)))  # the tool's result: still turn 2
        msgs.append({"role": "user", "content": "And c.txt?"})
        ask(second)  # a new user message: the next turn
        ask(second, model="sim-haiku-1", tools=(), messages=[{"role": "user", "content": "Title for this chat?"}])
        second.flush()
    finally:
        second.stop()
    rs = rows(db_path)
    assert len(rs) == 5 and len({r["conversation_id"] for r in rs}) == 1
    assert [r["turn"] for r in rs[:4]] == [1, 2, 2, 3]
    assert [r["request_kind"] for r in rs] == ["main"] * 4 + ["side"]


def test_index_resumes_a_recorded_session_and_starts_afresh_without_history():
    def broken(_cid):
        raise OSError("database gone")

    asked = []
    for history, turn in ((None, 1), (broken, 1), (lambda _cid: None, 1), (lambda cid: asked.append(cid) or (7, "sim-1"), 8)):
        idx = ConversationIndex(history=history)
        for t0 in (1.0, 2.0):  # asked once, when the session is first met
            parts = Parts(session="s-1", messages=["a"] * int(t0), user_turns=1, new_turn=t0 == 1.0)
            a = idx.assign(route="r", family="anthropic", model="sim-1", path="/v1/messages", parts=parts, t0=t0)
            assert a.turn == turn
    assert len(asked) == 1


def _big_system(stamp: str) -> str:
    return f"Current time: {stamp}.\n" + "You are a careful assistant. Follow the house rules. " * 300


@pytest.mark.parametrize("shape", ["anthropic", "openai"])
def test_timestamp_in_system_prompt_is_a_cache_miss(cache_proxy, db_path, shape):
    stamps = ["2026-12-01T05:36:25Z", "2026-12-01T05:36:27Z"]
    history = [{"role": "user", "content": "Summarise the rules."}]
    if shape == "anthropic":
        c = anthropic.Anthropic(base_url=cache_proxy.url, api_key="sk-ant-test-000000000000000000000", max_retries=0)

        def send(stamp, msgs):
            system = [{"type": "text", "text": _big_system(stamp), "cache_control": {"type": "ephemeral"}}]
            return c.messages.create(model="sim-1", max_tokens=16, system=system, messages=msgs).content[0].text
    else:
        c = openai.OpenAI(base_url=cache_proxy.url + "/v1", api_key="sk-test-00000000000000000000000", max_retries=0)

        def send(stamp, msgs):
            return c.chat.completions.create(
                model="sim-1", messages=[{"role": "system", "content": _big_system(stamp)}, *msgs]
            ).choices[0].message.content
    answer = send(stamps[0], history)
    history += [{"role": "assistant", "content": answer}, {"role": "user", "content": "Shorter."}]
    answer = send(stamps[0], history)  # the same system prompt: the cache hits
    history += [{"role": "assistant", "content": answer}, {"role": "user", "content": "Shorter still."}]
    send(stamps[1], history)  # the clock moved: the cache misses
    cache_proxy.flush()
    rs = rows(db_path)
    assert len({r["conversation_id"] for r in rs}) == 1
    assert rs[1]["usage_cached_tokens"] > 0 and rs[1]["top_code"] != "cache.miss"
    assert rs[2]["usage_cached_tokens"] == 0
    miss = [f for f in json.loads(rs[2]["findings"]) if f["code"] == "cache.miss"]
    assert miss, rs[2]["findings"]
    offset = len("Current time: 2026-12-01T05:36:2")
    assert miss[0]["params"]["offset"] == offset
    assert miss[0]["params"]["variant"] == "system_volatile"
    assert f"at character {offset:,}" in miss[0]["message"] and "timestamp" in miss[0]["message"]


def test_anthropic_without_cache_control_is_named(cache_proxy, db_path):
    c = anthropic.Anthropic(base_url=cache_proxy.url, api_key="sk-ant-test-000000000000000000000", max_retries=0)
    history = [{"role": "user", "content": "Summarise the rules."}]
    for follow_up in ("Shorter.", None):
        answer = c.messages.create(model="sim-1", max_tokens=16, system=_big_system("fixed"),
                                   messages=history).content[0].text
        if follow_up:
            history += [{"role": "assistant", "content": answer}, {"role": "user", "content": follow_up}]
    cache_proxy.flush()
    rs = rows(db_path)
    assert rs[1]["usage_cached_tokens"] == 0
    miss = [f for f in json.loads(rs[1]["findings"]) if f["code"] == "cache.miss"]
    assert miss and miss[0]["params"]["variant"] == "no_marker"
    assert "cache_control" in miss[0]["message"]


# ---- the pure parts ---------------------------------------------------------------------------

def test_session_ids_of_real_clients():
    # Claude Code 2.1 (captured): metadata.user_id is a JSON string
    body = {"metadata": {"user_id": '{"device_id":"df01","account_uuid":"","session_id":"16581633-a878-48d7-beee-19b764239012"}'}}
    assert session_of(body) == ("16581633-a878-48d7-beee-19b764239012", None)
    # Claude Code 1.x: user_<hash>_account_<uuid>_session_<uuid>
    old = {"metadata": {"user_id": "user_9f2c_account_aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa_session_"
                                   "bbbbbbbb-bbbb-4bbb-8bbb-bbbbbbbbbbbb"}}
    assert session_of(old)[0] == "bbbbbbbb-bbbb-4bbb-8bbb-bbbbbbbbbbbb"
    # Codex 0.171 (captured): prompt_cache_key and client_metadata with the turn id
    codex = {"prompt_cache_key": "01a23025-ccbf-7a21-b00d-93b554f6ffc7",
             "client_metadata": {"turn_id": "01a23025-ccdc-7ef2", "session_id": "01a23025-ccbf-7a21-b00d-93b554f6ffc7"}}
    assert session_of(codex) == ("01a23025-ccbf-7a21-b00d-93b554f6ffc7", "01a23025-ccdc-7ef2")
    assert session_of({"messages": []}) == (None, None)


def test_divergence_names_the_part():
    def parts(system="s", tools=("a", "b"), msgs=("hi",)):
        return prompt_parts("openai.chat", {"messages": [{"role": "system", "content": system}] + [
            {"role": "user", "content": m} for m in msgs],
            "tools": [{"type": "function", "function": {"name": t}} for t in tools]})
    assert divergence(parts(), parts(msgs=("hi", "more"))) is None
    d = divergence(parts(system="date: 2026-01-01 10:00"), parts(system="date: 2026-01-01 10:01"))
    assert d["part"] == "system" and d["offset"] == len("date: 2026-01-01 10:0") and d["volatile"]
    assert divergence(parts(), parts(tools=("b", "a")))["part"] == "tools_order"
    assert divergence(parts(), parts(tools=("a", "c"))) == {"part": "tools", "added": ["c"], "removed": ["b"]}
    assert divergence(parts(msgs=("hi", "x")), parts(msgs=("hello", "x")))["index"] == 0


def test_index_is_bounded_and_keeps_routes_apart():
    idx = ConversationIndex(maxsize=3)
    first = prompt_parts("anthropic.messages", {"messages": [{"role": "user", "content": "q"}]})
    grown = prompt_parts("anthropic.messages", {"messages": [
        {"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}, {"role": "user", "content": "q2"}]})
    a = idx.assign(route="a", family="anthropic", model="m", path="/v1/messages", parts=first, t0=1.0)
    b = idx.assign(route="b", family="anthropic", model="m", path="/v1/messages", parts=grown, t0=2.0)
    assert b.conversation_id != a.conversation_id  # another route: another conversation
    c = idx.assign(route="a", family="anthropic", model="m", path="/v1/messages", parts=grown, t0=3.0)
    assert (c.conversation_id, c.turn) == (a.conversation_id, 2)
    for i in range(10):
        idx.assign(route="a", family="anthropic", model="m", path="/v1/messages",
                   parts=prompt_parts("anthropic.messages", {"messages": [{"role": "user", "content": str(i)}]}), t0=4.0 + i)
    assert len(idx) == 3



def _placement_workload(seed: int, maxsize: int, n: int = 3000) -> list[str]:
    """Where ``n`` requests land: floods of one-message prompts, growing conversations (tool loops, new
    turns, retries of the same prompt, branches, side calls, count_tokens), sessions, two routes and two
    families, gaps beyond the chain TTL. One line per request; conversations numbered as first seen."""
    import random

    rng = random.Random(seed)
    idx = ConversationIndex(maxsize=maxsize)
    convs: list[list] = []  # open chains: (route, family, messages, tools)
    req_of_parts: dict[int, int] = {}
    ordinal: dict[str, int] = {}
    out, t = [], 100.0
    for i in range(n):
        t += rng.choice((0.01, 0.5, 3.0)) if rng.random() < 0.98 else 4000.0  # now and then beyond CHAIN_TTL_S
        r = rng.random()
        route, family = rng.choice((("default", "openai"), ("default", "openai"), ("b", "openai"),
                                    ("default", "anthropic")))
        body: dict = {"model": "m"}
        path = "/v1/chat/completions"
        if r < 0.45:  # the flood: the same short prompt, or one of a few
            body["messages"] = [{"role": "user", "content": rng.choice(("Say hi.", "Say hi.", "ping", "2+2?"))}]
        elif r < 0.55:  # a follow-up on one of them: main, side call or count_tokens (many candidates alike)
            body["messages"] = [{"role": "user", "content": rng.choice(("Say hi.", "ping"))},
                                {"role": "assistant", "content": "Hi!"},
                                {"role": "user", "content": rng.choice(("more", "title?"))}]
            body["model"] = rng.choice(("m", "m", "small"))
            if rng.random() < 0.2:
                path = "/v1/messages/count_tokens"
        elif r < 0.85 or not convs:  # grow an open conversation (or start one)
            if not convs or rng.random() < 0.1:
                system = [{"role": "system", "content": f"agent {rng.randrange(6)}"}] if rng.random() < 0.7 else []
                convs.append([route, family, system + [{"role": "user", "content": f"task {i % 17}"}],
                              rng.random() < 0.5])
            c = rng.choice(convs)
            route, family = c[0], c[1]
            step = rng.random()
            if step < 0.4:
                c[2] = c[2] + [{"role": "assistant", "content": f"call {i}"},
                               {"role": "tool", "tool_call_id": str(i), "content": "result"}]
            elif step < 0.8:
                c[2] = c[2] + [{"role": "assistant", "content": f"answer {i}"}, {"role": "user", "content": f"more {i}"}]
            elif step < 0.9 and len(c[2]) > 2:  # a branch: an edited earlier message
                c[2] = c[2][:-2] + [{"role": "user", "content": f"edited {i}"}]
            msgs = c[2]  # else: a retry of the same prompt
            body["messages"] = list(msgs)
            if c[3]:
                body["tools"] = [{"type": "function", "function": {"name": "read"}}]
            if rng.random() < 0.1:
                body["model"] = "small"  # a side call
                body.pop("tools", None)
            if rng.random() < 0.05:
                path = "/v1/messages/count_tokens"
        else:  # a client session id
            body["messages"] = [{"role": "user", "content": f"s {i}"}]
            body["metadata"] = {"session_id": f"sess-{rng.randrange(8)}"}
        parts = prompt_parts("openai.chat", body)
        a = idx.assign(route=route, family=family, model=body["model"], path=path, parts=parts, t0=t)
        req_of_parts[id(parts)] = i
        conv = ordinal.setdefault(a.conversation_id, len(ordinal))
        prev = "-" if a.previous is None else req_of_parts[id(a.previous)]
        since = "-" if a.since_previous_s is None else f"{a.since_previous_s:.3f}"
        out.append(f"{conv} {a.turn} {a.request_kind} {prev} {since}")
        idx.ended(a.conversation, t + 0.2)
    return out


def test_placement_matches_the_recorded_workloads():
    """The index places every request where it did before it was made faster (recorded with the
    linear scan over all conversations: python tests/test_conversations.py regenerates, only for an
    intended change)."""
    want = json.loads(GOLDEN.read_text())
    got = {"256": _placement_workload(1, 256), "24": _placement_workload(2, 24), "3": _placement_workload(3, 3, 800)}
    for k in want:
        for i, (g, w) in enumerate(zip(got[k], want[k], strict=True)):
            assert g == w, (k, i)


def test_new_conversation_ids_are_twelve_hex_and_distinct():
    idx = ConversationIndex()
    ids = set()
    for i in range(3000):
        a = idx.assign(route="default", family="openai", model="m", path="/v1/chat/completions",
                       parts=prompt_parts("openai.chat", {"messages": [{"role": "user", "content": "Say hi."}]}),
                       t0=float(i))
        assert len(a.conversation_id) == 12 and int(a.conversation_id, 16) >= 0
        ids.add(a.conversation_id)
    assert len(ids) == 3000

# ---- sessions / session / stats ---------------------------------------------------------------

def _cli(*args, width=160):
    from click.testing import CliRunner

    from firsttoken.cli.main import cli
    return CliRunner(env={"COLUMNS": str(width)}).invoke(cli, list(args), catch_exceptions=False)


def _agent_conversation(proxy_url):
    """A tool loop in one Claude Code-like session, a side call, and a timestamp that moves."""
    c = anthropic.Anthropic(base_url=proxy_url, api_key="sk-ant-test-000000000000000000000", max_retries=0)
    meta = {"user_id": json.dumps({"device_id": "d", "account_uuid": "", "session_id": "5f0c2a8e-1b7d-4c3e-9a6f-2d8b7e4c1a90"})}

    def system(stamp):
        return [{"type": "text", "text": _big_system(stamp), "cache_control": {"type": "ephemeral"}}]
    msgs = [{"role": "user", "content": "What does a.txt say?"}]
    r = c.messages.create(model="sim-tool-1", max_tokens=32, system=system("09:00:00"), tools=[TOOL_AN],
                          messages=msgs, metadata=meta)
    call = next(b for b in r.content if b.type == "tool_use")
    time.sleep(SLEEP_S)
    msgs += [{"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in r.content]},
             {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call.id, "content": "hello"}]}]
    r = c.messages.create(model="sim-1", max_tokens=32, system=system("09:00:00"), tools=[TOOL_AN], messages=msgs,
                          metadata=meta)
    c.messages.create(model="sim-haiku-1", max_tokens=8, messages=[{"role": "user", "content": "Title: a.txt"}],
                      metadata=meta)
    msgs += [{"role": "assistant", "content": r.content[0].text}, {"role": "user", "content": "And b.txt?"}]
    c.messages.create(model="sim-1", max_tokens=32, system=system("09:00:04"), tools=[TOOL_AN], messages=msgs,
                      metadata=meta)


def test_sessions_and_session_views(cache_proxy, db_path):
    _agent_conversation(cache_proxy.url)
    cache_proxy.flush()
    listed = _cli("sessions", "--db", str(db_path), "--json")
    assert listed.exit_code == 0
    (s,) = [json.loads(ln) for ln in listed.output.splitlines()]
    assert (s["requests"], s["main_requests"], s["side_requests"], s["turns"]) == (4, 3, 1, 2)
    assert s["models"][0] == "sim-1" and "sim-haiku-1" in s["models"]
    assert 0 < s["cached_share"] < 1 and s["client_ms"] >= SLEEP_S * 1000 - GAP_TOLERANCE_MS
    for width in (60, 80, 120, 200):
        out = _cli("sessions", "--db", str(db_path), width=width).output
        assert s["id"] in out, out
        out = _cli("session", s["id"][:5], "--db", str(db_path), width=width).output
        assert max(len(ln) for ln in out.splitlines()) <= width, out
        assert "side" in out and "cache.miss" in out.replace("\n", "") or width < 120, out
        assert "went to the model" in " ".join(out.split()), out
        # one language per view: Chinese headers, notes and verdict with --lang zh
        out = _cli("sessions", "--lang", "zh", "--db", str(db_path), width=width).output
        assert s["id"] in out and "会话" in out and "请求之间" in " ".join(out.split()), out
        assert "between requests" not in " ".join(out.split()), out
        out = _cli("session", s["id"][:5], "--lang", "zh", "--db", str(db_path), width=width).output
        assert max(len(ln) for ln in out.splitlines()) <= width, out
        assert "轮" in out and "客户端间隔" in "".join(out.split()) and "went to the model" not in " ".join(out.split()), out
    doc = json.loads(_cli("session", s["id"], "--db", str(db_path), "--json").output)
    kinds = [(r["turn"], r["request_kind"]) for r in doc["requests_detail"]]
    assert kinds == [(1, "main"), (1, "main"), (1, "side"), (2, "main")]
    assert doc["requests_detail"][-1]["top_code"] == "cache.miss"
    bad = _cli("session", "zzzz", "--db", str(db_path))
    assert bad.exit_code == 1 and "firsttoken sessions" in bad.output


def test_stats_fits_ttft_against_uncached_tokens(db_path):
    """With prompt caching, prefill follows the uncached tokens: that fit must win on R²."""
    cfg = dict(FAST, prefill_ms_per_1k_tokens=120, prompt_cache=True)
    with SimServer(SimConfig(**cfg)) as sim:
        p = ProxyServer([sim.url], str(db_path), port=0)
        p.start()
        try:
            c = openai.OpenAI(base_url=p.url + "/v1", api_key="sk-test-00000000000000000000000", max_retries=0)
            for size in (300, 700, 1100, 1500, 1900):
                system = f"size {size}. " + "Rules of the house apply. " * size
                for _ in range(2):  # the first misses, the repeat hits the cache
                    for _ in c.chat.completions.create(
                            model="sim-1", stream=True, stream_options={"include_usage": True},
                            messages=[{"role": "system", "content": system}, {"role": "user", "content": "hi"}]):
                        pass
            p.flush()
        finally:
            p.stop()
    res = json.loads(_cli("stats", "--db", str(db_path), "--json").output)
    (g,) = res["groups"]
    # a cache hit the proxy itself delayed (proxy.saturated, on a busy machine) is left out of every fit
    con = sqlite3.connect(db_path)
    try:
        left = con.execute("SELECT count(*) FROM requests WHERE usage_cached_tokens > 0 AND ttft_outlier IS NOT NULL"
                           ).fetchone()[0]
    finally:
        con.close()
    assert left <= 2 and g["uncached_fit"]["cached_requests"] == 5 - left
    assert g["uncached_fit"]["ttft_fit_r2"] > g["ttft_fit_r2"]
    assert g["better_fit"] == "uncached"
    text = _cli("stats", "--db", str(db_path)).output
    assert "TTFT follows uncached input tokens better" in " ".join(text.split())


if __name__ == "__main__":
    GOLDEN.write_text(json.dumps({"256": _placement_workload(1, 256), "24": _placement_workload(2, 24),
                                  "3": _placement_workload(3, 3, 800)}, indent=0) + "\n")
