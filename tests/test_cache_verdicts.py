"""Prompt-cache verdicts on real clients' request sequences (issue 24, items 3 and 4).

Claude Code re-sends a ``role: "system"`` message inside ``messages`` as a one-block list with
``cache_control`` while it is the last message, then as a plain string once the marker has moved on:
to a prompt cache that is the same prefix, so no "the history was edited" verdict; when the upstream
reports 0 cached tokens for a repeated prefix the verdict is about the upstream.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler

import anthropic
import openai
import pytest
from conftest import rows
from rawserver import LoopbackServer
from test_run import base_env, find_cli, ft_run

from firsttoken.addon.conversations import divergence, prompt_parts
from firsttoken.cli.proxy.server import ProxyServer

SYSTEM = [{"type": "text", "text": "x-anthropic-billing-header: cc_version=2.1.197;"},
          {"type": "text", "text": "You are Claude Code. " * 200, "cache_control": {"type": "ephemeral"}}]
TOOLS = [{"name": "Read", "description": "Reads a file " * 50, "input_schema": {"type": "object"}},
         {"name": "Bash", "description": "Runs a command " * 50, "input_schema": {"type": "object"},
          "cache_control": {"type": "ephemeral"}}]
AGENTS = "Available agent types for the Agent tool:\n- claude: Catch-all for any task. " * 20


def _body(messages, tools=TOOLS):
    return {"model": "claude-sonnet-4-5", "max_tokens": 32000, "stream": True, "system": SYSTEM, "tools": tools,
            "messages": messages, "metadata": {"user_id": json.dumps({"session_id": "7d1d1b2e-3f4a-4b5c-8d9e-0a1b2c3d4e5f"})}}


def _claude_code_loop():
    """Two requests of a Read tool loop, shaped as Claude Code 2.1 sends them."""
    user = {"role": "user", "content": [{"type": "text", "text": "<system-reminder>today</system-reminder>"},
                                        {"type": "text", "text": "read f0.txt"}]}
    first = _body([user, {"role": "system", "content": [{"type": "text", "text": AGENTS,
                                                          "cache_control": {"type": "ephemeral"}}]}])
    call = {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_0", "name": "Read",
                                              "input": {"file_path": "f0.txt"}}]}
    result = {"role": "user", "content": [{"tool_use_id": "toolu_0", "type": "tool_result",
                                           "content": [{"type": "text", "text": "1\tfile 0"}],
                                           "cache_control": {"type": "ephemeral"}}]}
    second = _body([user, {"role": "system", "content": AGENTS}, call, result])
    third_result = {"role": "user", "content": [{"tool_use_id": "toolu_0", "type": "tool_result", "content": "1\tfile 0"}]}
    third = _body([user, {"role": "system", "content": AGENTS}, call, third_result,
                   {"role": "assistant", "content": [{"type": "text", "text": "done"}]},
                   {"role": "user", "content": [{"type": "text", "text": "thanks", "cache_control": {"type": "ephemeral"}}]}])
    return first, second, third


def test_a_string_and_a_one_block_list_are_the_same_prefix():
    first, second, third = (prompt_parts("anthropic.messages", b) for b in _claude_code_loop())
    assert divergence(first, second) is None
    assert divergence(second, third) is None  # a tool result's content as a list, then as a string
    assert second.cache_markers == 3


def test_what_a_cache_sees_differently_still_counts():
    first_body, second_body, _ = _claude_code_loop()
    first = prompt_parts("anthropic.messages", first_body)
    edited = json.loads(json.dumps(second_body))
    edited["messages"][1]["content"] = AGENTS + " (edited)"
    assert divergence(first, prompt_parts("anthropic.messages", edited)) == {
        "part": "messages", "index": 1, "previous_messages": 2}
    two_blocks = json.loads(json.dumps(second_body))  # two blocks are not one string: another prompt
    two_blocks["messages"][1]["content"] = [{"type": "text", "text": AGENTS}, {"type": "text", "text": "more"}]
    assert divergence(first, prompt_parts("anthropic.messages", two_blocks))["part"] == "messages"
    retooled = json.loads(json.dumps(second_body))
    retooled["tools"][0]["description"] = "Reads a file, now differently"
    assert divergence(first, prompt_parts("anthropic.messages", retooled)) == {
        "part": "tools_changed", "changed": ["Read"], "count": 1}


# ---- the real Claude Code, in a Read tool loop, against an upstream that never caches ------------------------

class ToolLoopUpstream(LoopbackServer):
    """An Anthropic-shaped upstream: asks for Read of f0, f1, f2 one after the other, then answers;
    reports ``cache_read_input_tokens: 0`` every time (it never caches)."""

    def __init__(self, files: list[str]):
        self.bodies: list[dict] = []
        self.lock = threading.Lock()
        up = self

        class H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_HEAD(self):
                self.send_response(200)
                self.send_header("content-length", "0")
                self.end_headers()

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)) or b"{}")
                with up.lock:
                    up.bodies.append(body)
                data, ctype = up.answer(body)
                self.send_response(200)
                self.send_header("content-type", ctype)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.files = files
        self.serve(H)

    def answer(self, body: dict) -> tuple[bytes, str]:
        usage = {"input_tokens": 3000, "output_tokens": 1, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0}
        if not body.get("stream"):
            return json.dumps({"id": "msg_x", "type": "message", "role": "assistant", "model": body.get("model"),
                               "content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn",
                               "usage": {"input_tokens": 10, "output_tokens": 1}}).encode(), "application/json"
        done = sum(1 for m in body.get("messages") or [] if isinstance(m.get("content"), list)
                   for b in m["content"] if isinstance(b, dict) and b.get("type") == "tool_result")
        wants_read = any(t.get("name") == "Read" for t in body.get("tools") or [])
        ev = [{"type": "message_start", "message": {"id": f"msg_{done}", "type": "message", "role": "assistant",
                                                    "model": body.get("model"), "content": [], "stop_reason": None,
                                                    "usage": usage}}]
        if wants_read and done < len(self.files):
            ev += [{"type": "content_block_start", "index": 0,
                    "content_block": {"type": "tool_use", "id": f"toolu_{done:02d}", "name": "Read", "input": {}}},
                   {"type": "content_block_delta", "index": 0,
                    "delta": {"type": "input_json_delta", "partial_json": json.dumps({"file_path": self.files[done]})}},
                   {"type": "content_block_stop", "index": 0},
                   {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 10}}]
        else:
            ev += [{"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
                   {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "all files read"}},
                   {"type": "content_block_stop", "index": 0},
                   {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 3}}]
        ev.append({"type": "message_stop"})
        return b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in ev), "text/event-stream"


@pytest.mark.slow
def test_claude_code_tool_loop_against_an_upstream_that_never_caches(tmp_path):
    claude = find_cli("claude")
    files = []
    for i in range(3):
        f = tmp_path / f"f{i}.txt"
        f.write_text(f"file {i} content\n")
        files.append(str(f))
    with ToolLoopUpstream(files) as up:
        env = base_env(tmp_path, ANTHROPIC_API_KEY="sk-ant-test-1234567890123456789012", DISABLE_TELEMETRY="1",
                       CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1", DISABLE_AUTOUPDATER="1", ANTHROPIC_BASE_URL=up.url)
        db = tmp_path / "ft.db"
        r = ft_run(db, [claude, "-p", "read the files f0.txt, f1.txt and f2.txt", "--allowedTools", "Read"], env,
                   timeout=180, cwd=tmp_path)
        assert r.returncode == 0, r.stdout + r.stderr
        assert "all files read" in r.stdout
    loop = [x for x in up.bodies if x.get("stream") and x.get("tools")]
    assert len(loop) >= 4, "Claude Code did not run the Read loop"
    # what the issue saw: a role "system" message inside messages, re-sent in another shape
    assert any(m.get("role") == "system" for m in loop[-1]["messages"])
    rs = [x for x in rows(db) if x["api"] == "anthropic.messages" and x["request_kind"] == "main"]
    assert len(rs) >= 4
    findings = [f for x in rs for f in json.loads(x["findings"] or "[]")]
    misses = [f for f in findings if f["code"] == "cache.miss"]
    variants = {f["params"].get("variant") for f in misses}
    assert "messages" not in variants and "no_marker" not in variants, misses
    # a repeated prefix the upstream did not cache: said of the upstream, which never cached on this route
    assert variants == {"same_prefix_never"}, variants
    assert all("never reported a cached token" in f["message"] for f in misses)
    assert all(f["params"]["markers"] >= 1 for f in misses)
    assert not [f for f in findings if f["code"] == "prompt.repeated_prefix" and f["params"].get("variant") == "anthropic"]
    assert "history was edited" not in r.stderr


# ---- prompt.repeated_prefix counts within the run -------------------------------------------------------------

def _one_call(url: str, system: str) -> None:
    c = openai.OpenAI(base_url=url, api_key="sk-test-00000000000000000000000", max_retries=0, timeout=20)
    for _ in c.chat.completions.create(model="gpt-4o-mini", stream=True, stream_options={"include_usage": True},
                                       messages=[{"role": "system", "content": system},
                                                 {"role": "user", "content": "hi"}]):
        pass


def _finished(db, n: int) -> list[dict]:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        rs = [r for r in rows(db) if r["state"] == "done"]
        if len(rs) >= n:
            return rs
        time.sleep(0.05)
    raise AssertionError(f"{n} finished rows expected")


def test_repeated_prefix_counts_within_the_run_not_the_database(sim, tmp_path):
    """Earlier proxies' records in the same database are not this run; two `firsttoken run`s that join one
    proxy (``/_run/<id>`` marks) are two runs; within one run repeats count."""
    db = tmp_path / "ft.db"
    system = "You are a careful assistant. " * 250
    with ProxyServer([sim.url], str(db), port=0) as p:
        for _ in range(3):
            _one_call(p.url + "/v1", system)
        _finished(db, 3)
    with ProxyServer([sim.url], str(db), port=0) as p:  # a new proxy on the same database: a new run
        _one_call(p.url + "/v1", system)
        _one_call(p.url + "/_run/aaaa1111/v1", system)  # a joined `firsttoken run`: its own run
        _one_call(p.url + "/_run/aaaa1111/v1", system)
        _one_call(p.url + "/_run/bbbb2222/v1", system)
        rs = _finished(db, 7)
    assert [r["prefix_seen_before"] for r in rs] == [0, 1, 2, 0, 0, 1, 0]
    assert [r["run_id"] for r in rs[3:]] == [None, "aaaa1111", "aaaa1111", "bbbb2222"]
    repeated = [json.loads(r["findings"] or "[]") for r in rs]
    said = [[f["params"]["seen_before"] for f in fs if f["code"] == "prompt.repeated_prefix"] for fs in repeated]
    assert said == [[], [1], [2], [], [], [1], []]


def test_repeated_prefix_with_cache_markers_blames_the_upstream(sim, tmp_path):
    """Anthropic requests that already carry cache_control markers: the advice is about the upstream, not
    "add cache_control"."""
    db = tmp_path / "ft.db"
    system = [{"type": "text", "text": "You are a careful assistant. " * 250, "cache_control": {"type": "ephemeral"}}]
    with ProxyServer([sim.url], str(db), port=0) as p:
        c = anthropic.Anthropic(base_url=p.url, api_key="sk-ant-test-00000000000000000000", max_retries=0, timeout=20)
        for i in range(2):  # two conversations (another first message), one prefix (the system prompt)
            with c.messages.stream(model="claude-sonnet-4-5", max_tokens=64, system=system,
                                   messages=[{"role": "user", "content": f"question {i}"}]) as s:
                s.until_done()
        rs = _finished(db, 2)
    found = [f for f in json.loads(rs[1]["findings"] or "[]") if f["code"] == "prompt.repeated_prefix"]
    assert not rs[1]["usage_cached_tokens"]  # the simulator caches only when asked to (a fault)
    assert found and found[0]["params"]["variant"] == "marked", rs[1]["findings"]
    assert found[0]["params"]["markers"] == 1
    assert 'Add "cache_control"' not in found[0]["hint"] and "ignored the markers" in found[0]["hint"]


# ---- whether the upstream ever cached on the route --------------------------------------------------------------

def _two_turns(url: str, tag: str, fault: str | None = None) -> None:
    """One conversation of two requests whose prefix repeats (the second extends the first)."""
    c = openai.OpenAI(base_url=url, api_key="sk-test-00000000000000000000000", max_retries=0, timeout=20)
    msgs = [{"role": "system", "content": f"{tag}: you are a careful assistant. " * 200},
            {"role": "user", "content": "first question"}]
    for i in range(2):
        extra = {"extra_headers": {"x-sim-fault": fault}} if fault and i == 0 else {}
        answer = c.chat.completions.create(model="gpt-4o-mini", messages=msgs, stream=False, **extra)
        msgs += [{"role": "assistant", "content": answer.choices[0].message.content},
                 {"role": "user", "content": "second question"}]


def _misses(rs: list[dict]) -> list[dict]:
    return [f for r in rs for f in json.loads(r["findings"] or "[]") if f["code"] == "cache.miss"]


def test_a_same_prefix_miss_says_whether_the_route_ever_cached(sim, tmp_path):
    db = tmp_path / "ft.db"
    with ProxyServer([sim.url], str(db), port=0) as p:
        _two_turns(p.url + "/v1", "never")
        rs = _finished(db, 2)
        [miss] = _misses(rs)
        assert rs[1]["usage_cached_tokens"] == 0 and miss["params"]["variant"] == "same_prefix_never", miss
        assert "never reported a cached token on this route (default)" in miss["message"]
        _two_turns(p.url + "/v1", "cached", fault="cache_hit")  # the upstream reports cached tokens once
        rs = _finished(db, 4)
        assert rs[2]["usage_cached_tokens"]
        [miss] = _misses(rs[3:])
        assert miss["params"]["variant"] == "same_prefix" and "did report cached tokens" in miss["message"], miss
    with ProxyServer([sim.url], str(db), port=0) as p:  # a restart remembers it from the database
        _two_turns(p.url + "/v1", "again")
        rs = _finished(db, 6)
        [miss] = _misses(rs[5:])
        assert miss["params"]["variant"] == "same_prefix", miss
