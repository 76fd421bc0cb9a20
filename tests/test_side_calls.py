"""Side calls of real clients, in the shapes they send, through the real proxy (issue 23, item 3).

* opencode fires its title call (its own system prompt, no tools, "Generate a title for this
  conversation:" then the user's first message) beside the first main request, in either order:
  one conversation, the main request turn 1, the title call `side`, and `firsttoken sessions`
  lists it.
* Qwen Code's managed-memory extractor runs after each answer: the whole history, its own system
  prompt, a few tools of its own, then a task prompt. A side call: no turn 2, no `cache.miss`.
* A retry of a call that failed is the same conversation and turn.

The prompts are shortened from the clients' own sources (opencode packages/opencode/src/agent/prompt/
title.txt and session/prompt.ts ensureTitle; @qwen-code/qwen-code 0.15.10, packages/core/src/memory/
extractionAgentPlanner.ts), keeping what matters here: which part differs and how.
"""

from __future__ import annotations

import json
import threading

import openai
import pytest
from conftest import FAST, rows

from firsttoken.addon.conversations import ConversationIndex, prompt_parts, same_prompt, same_tools
from firsttoken.cli.proxy.server import ProxyServer
from firsttoken.cli.simulate import SimConfig, SimServer

OPENCODE_SYSTEM = ("You are opencode, an interactive CLI tool that helps users with software engineering tasks.\n"
                   "Use the instructions below and the tools available to you to assist the user.\n") * 20
TITLE_SYSTEM = ("You are a title generator. You output ONLY a thread title. Nothing else.\n<task>\nGenerate a brief "
                "title that would help the user find this conversation later.\n</task>\n<rules>\n- a single line\n"
                "- ≤50 characters\n- Never use tools\n</rules>\n")
QWEN_SYSTEM = ("You are Qwen Code, an interactive CLI agent developed by Alibaba Group, specializing in software "
               "engineering tasks.\n# Core Mandates\n- Conventions: rigorously adhere to existing project conventions.\n"
               "# Environment\nToday's date is Wednesday, December 2, 2026.\n") * 10
MEMORY_SYSTEM = ("You are now acting as the managed memory extraction subagent for an AI coding assistant.\n\nThe "
                 "recent conversation history is already in your context. Analyze only that recent conversation and "
                 "use it to update persistent managed memory.\n\nRules:\n- Read existing memory files first to avoid "
                 "creating duplicates.\n- Extract only durable facts stated by the user.\n")
QWEN_TOOLS = ["read_file", "grep_search", "glob", "list_directory", "run_shell_command", "write_file", "edit",
              "todo_write", "save_memory", "web_fetch", "task", "skill", "exit_plan_mode"]
MEMORY_TOOLS = ["read_file", "grep_search", "glob", "list_directory", "run_shell_command", "write_file", "edit"]
OPENCODE_TOOLS = ["bash", "edit", "glob", "grep", "list", "read", "write", "todowrite", "todoread", "task", "webfetch"]
USER = "Explain what src/server.ts does, in two sentences."


def _cli(*args, width=160):
    from click.testing import CliRunner

    from firsttoken.cli.main import cli
    return CliRunner(env={"COLUMNS": str(width)}).invoke(cli, list(args), catch_exceptions=False)


def tools(names):
    return [{"type": "function", "function": {"name": n, "description": f"the {n} tool",
                                               "parameters": {"type": "object", "properties": {}}}} for n in names]


@pytest.fixture(scope="module")
def cache_sim():
    with SimServer(SimConfig(**FAST, prompt_cache=True)) as s:
        yield s


@pytest.fixture
def proxy(cache_sim, db_path):
    p = ProxyServer([cache_sim.url], str(db_path), port=0)
    p.start()
    yield p
    p.stop()


def client(proxy):
    return openai.OpenAI(base_url=proxy.url + "/v1", api_key="sk-test-00000000000000000000000", max_retries=0)


def opencode_title(c):
    c.chat.completions.create(model="sim-1", max_tokens=32, messages=[
        {"role": "system", "content": TITLE_SYSTEM},
        {"role": "user", "content": "Generate a title for this conversation:\n"},
        {"role": "user", "content": USER}])


def opencode_main(c):
    c.chat.completions.create(model="sim-1", stream=True, tools=tools(OPENCODE_TOOLS), messages=[
        {"role": "system", "content": OPENCODE_SYSTEM}, {"role": "user", "content": USER}]).close()


@pytest.mark.parametrize("order", ["title first", "main first", "together"])
def test_opencode_title_call_is_a_side_call_of_its_conversation(proxy, db_path, order):
    c = client(proxy)
    if order == "title first":
        opencode_title(c)
        opencode_main(c)
    elif order == "main first":
        opencode_main(c)
        opencode_title(c)
    else:  # fire-and-forget, as opencode does: both in flight at once
        t = threading.Thread(target=opencode_title, args=(c,))
        t.start()
        opencode_main(c)
        t.join()
    proxy.flush()
    rs = rows(db_path)
    assert len(rs) == 2
    assert len({r["conversation_id"] for r in rs}) == 1, [(r["conversation_id"], r["request_kind"]) for r in rs]
    kinds = {("tools" if r["tools_tokens"] else "title"): (r["request_kind"], r["turn"]) for r in rs}
    assert kinds == {"tools": ("main", 1), "title": ("side", 1)}
    assert not any(f["code"] == "cache.miss" for r in rs for f in json.loads(r["findings"] or "[]"))
    out = _cli("sessions", "--db", str(db_path))
    assert out.exit_code == 0 and "No conversations" not in out.output, out.output
    assert rs[0]["conversation_id"] in out.output and "(1 side)" in out.output


def test_a_single_main_request_with_tools_is_listed(proxy, db_path):
    opencode_main(client(proxy))
    proxy.flush()
    out = _cli("sessions", "--db", str(db_path))
    assert rows(db_path)[0]["conversation_id"] in out.output, out.output
    # a one-off script (no tools) stays behind --all
    client(proxy).chat.completions.create(model="sim-1", messages=[{"role": "user", "content": "Say hi, briefly please."}])
    proxy.flush()
    listed = [json.loads(line) for line in _cli("sessions", "--db", str(db_path), "--json").output.splitlines()]
    assert len(listed) == 1
    assert len(_cli("sessions", "--db", str(db_path), "--all", "--json").output.splitlines()) == 2


def test_qwen_memory_extraction_is_a_side_call_not_a_turn(proxy, db_path):
    c = client(proxy)
    history = [{"role": "system", "content": QWEN_SYSTEM}, {"role": "user", "content": USER}]
    r = c.chat.completions.create(model="sim-tool-1", tools=tools(QWEN_TOOLS), messages=history)
    call = r.choices[0].message.tool_calls[0]
    history += [r.choices[0].message.model_dump(exclude_none=True),
                {"role": "tool", "tool_call_id": call.id, "content": "export function serve() {}"}]
    r = c.chat.completions.create(model="sim-1", tools=tools(QWEN_TOOLS), messages=history)
    history += [{"role": "assistant", "content": r.choices[0].message.content}]
    # the forked extractor: the same history under its own system prompt and tools, then its task
    memory = [{"role": "system", "content": MEMORY_SYSTEM}, *history[1:],
              {"role": "user", "content": "Scan the recent conversation history in your context and update durable "
                                          "managed memory."}]
    c.chat.completions.create(model="sim-1", tools=tools(MEMORY_TOOLS), messages=memory)
    # the user's next question continues the main conversation as turn 2
    history += [{"role": "user", "content": "And src/client.ts?"}]
    c.chat.completions.create(model="sim-1", tools=tools(QWEN_TOOLS), messages=history)
    proxy.flush()
    rs = rows(db_path)
    assert len({r["conversation_id"] for r in rs}) == 1
    assert [(r["request_kind"], r["turn"]) for r in rs] == [("main", 1), ("main", 1), ("side", 1), ("main", 2)]
    codes = [f["code"] for r in rs for f in json.loads(r["findings"] or "[]")]
    assert "cache.miss" not in codes, codes


def test_a_retry_after_a_failure_is_the_same_conversation_and_turn(proxy, db_path):
    c = client(proxy)
    msgs = [{"role": "system", "content": QWEN_SYSTEM}, {"role": "user", "content": USER}]
    with pytest.raises(openai.APIStatusError):
        c.chat.completions.create(model="fault-overloaded", tools=tools(QWEN_TOOLS), messages=msgs)
    with pytest.raises(openai.APIStatusError):
        c.chat.completions.create(model="fault-overloaded", tools=tools(QWEN_TOOLS), messages=msgs)
    proxy.flush()
    rs = rows(db_path)
    assert len(rs) == 2 and rs[0]["status"] >= 500
    assert rs[0]["conversation_id"] == rs[1]["conversation_id"]
    assert [(r["request_kind"], r["turn"]) for r in rs] == [("main", 1), ("main", 1)]


def test_identical_requests_that_succeed_are_not_retries():
    """A benchmark sends one prompt many times: each its own conversation (as before)."""
    idx = ConversationIndex()
    body = {"messages": [{"role": "system", "content": QWEN_SYSTEM}, {"role": "user", "content": USER}]}
    ids = set()
    for i in range(5):
        a = idx.assign(route="r", family="openai", model="m", path="/v1/chat/completions",
                       parts=prompt_parts("openai.chat", body), t0=float(i))
        idx.ended(a.conversation, i + 0.5, failed=False)
        ids.add(a.conversation_id)
    assert len(ids) == 5


def test_one_prompt_edited_is_not_another_prompt():
    stamped = "You are an agent.\nCurrent time: 2026-12-01T05:36:25Z\n" + "Rule.\n" * 50
    assert same_prompt(stamped, stamped.replace("05:36:25", "05:36:27"))
    assert same_prompt(stamped, stamped + "One more rule.\n")
    assert same_prompt("agent 1", "agent 3")
    assert not same_prompt(QWEN_SYSTEM, MEMORY_SYSTEM)
    assert not same_prompt(OPENCODE_SYSTEM, TITLE_SYSTEM)
    assert not same_prompt(OPENCODE_SYSTEM, "")
    assert same_tools(QWEN_TOOLS, list(reversed(QWEN_TOOLS)))
    assert same_tools(QWEN_TOOLS, QWEN_TOOLS + ["mcp__github__search"])
    assert not same_tools(QWEN_TOOLS, MEMORY_TOOLS[:3])
