"""`firsttoken run -- CMD`: real children (Python SDK scripts, Claude Code, Codex) against the
simulator, each with only the base URL a user already had for the "real" upstream; the proxy
runs inside `firsttoken run`, the summary is checked against the records. (The Cline CLI:
tests/test_cline.py.)
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import rows
from runkit import FT, NODE_BIN, SIM_TEXT, base_env, ft_run

from firsttoken.addon.record import percentile
from firsttoken.addon.store import queries
from firsttoken.cli import output
from firsttoken.cli.proxy.server import ProxyServer
from firsttoken.cli.proxy.state import clear_state, write_state
from firsttoken.cli.terminal import PseudoTerminal

pytestmark = pytest.mark.slow  # the real agent CLIs: the slow tier (`pytest -m slow`)


def run_id_of(stderr: str) -> str:
    m = re.search(r"firsttoken run ([0-9a-f]{8}):", stderr)
    assert m, f"no summary on stderr:\n{stderr}"
    return m.group(1)


def check_summary(stderr: str, rs: list[dict]) -> str:
    """Every record is under the run the summary names, and the summary's numbers are the records'."""
    run_id = run_id_of(stderr)
    assert rs and all(r["run_id"] == run_id for r in rs), [r["run_id"] for r in rs]
    # the model calls are counted (a probe or a model list is said apart), their latency over the streamed ones:
    # the stats engine's populations, the figures `stats --run ID` prints
    calls = [r for r in rs if queries.is_model_call(r)]
    assert f"{run_id}: {len(calls)} request{'s' if len(calls) != 1 else ''}" in stderr
    others = len(rs) - len(calls)
    assert (f"and {others} request{'s' if others != 1 else ''} that" in stderr) == bool(others), stderr
    for name, col in (("TTFB", "ttfb_ms"), ("TTFT", "ttft_ms"), ("gap", "gap_ms")):
        vals = sorted(r[col] for r in calls if r[col] is not None and queries.is_streamed(r))
        if vals:
            assert f"{name} P50 {output.ms(percentile(vals, 50))} P95 {output.ms(percentile(vals, 95))}" in stderr
    prompt = sum(r["usage_prompt_tokens"] or 0 for r in rs)
    out = sum(r["usage_completion_tokens"] or 0 for r in rs)
    if all(r["usage_prompt_tokens"] is not None for r in rs if r["status"] == 200):
        assert f"tokens: {prompt:,} in" in stderr and f"· {out:,} out" in stderr
    for m, n in {r["model"]: sum(1 for x in rs if x["model"] == r["model"]) for r in rs if r["model"]}.items():
        assert f"{m} ×{n}" in stderr
    assert f"firsttoken logs --run {run_id}" in stderr
    return run_id


# -- Python children: the official SDKs ----------------------------------------------------------

OPENAI_CHILD = """
import sys, openai

c = openai.OpenAI()
parts = []
for ch in c.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}],
                                    stream=True, stream_options={"include_usage": True}):
    if ch.choices and ch.choices[0].delta.content:
        parts.append(ch.choices[0].delta.content)
print("stream:", "".join(parts))
r = c.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}])
print("plain:", r.choices[0].message.content)
sys.exit(int(sys.argv[1]))
"""

ANTHROPIC_CHILD = """
import sys, anthropic
c = anthropic.Anthropic()
with c.messages.stream(model="claude-sonnet-4-5", max_tokens=64, messages=[{"role": "user", "content": "hi"}]) as s:
    print("stream:", "".join(s.text_stream))
sys.exit(int(sys.argv[1]))
"""


@pytest.mark.parametrize("code", [0, 3])
def test_openai_sdk_child(sim, tmp_path, code):
    script = tmp_path / "child.py"
    script.write_text(OPENAI_CHILD)
    env = base_env(tmp_path, OPENAI_BASE_URL=sim.url + "/v1", OPENAI_API_KEY="sk-test-123456789012345678901234")
    direct = subprocess.run([sys.executable, str(script), str(code)], env=env, capture_output=True, text=True, timeout=60)
    assert direct.returncode == code and SIM_TEXT in direct.stdout, direct.stderr
    db = tmp_path / "ft.db"
    r = ft_run(db, [sys.executable, str(script), str(code)], env)
    assert r.returncode == code, r.stderr
    assert r.stdout == direct.stdout  # the child's output, untouched; the summary is on stderr only
    rs = rows(db)
    assert len(rs) == 2
    assert {x["upstream_url"] for x in rs} == {sim.url + "/v1/chat/completions"}
    assert all(x["status"] == 200 and x["route"] == "openai" for x in rs)
    check_summary(r.stderr, rs)
    assert "via: base URLs in the environment" in r.stderr


def test_anthropic_sdk_child(sim, tmp_path):
    script = tmp_path / "child.py"
    script.write_text(ANTHROPIC_CHILD)
    env = base_env(tmp_path, ANTHROPIC_BASE_URL=sim.url, ANTHROPIC_API_KEY="sk-ant-test-1234567890123456789012")
    db = tmp_path / "ft.db"
    r = ft_run(db, [sys.executable, str(script), "0"], env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("stream: " + SIM_TEXT)
    rs = rows(db)
    assert [(x["route"], x["upstream_url"], x["status"]) for x in rs] == [("anthropic", sim.url + "/v1/messages", 200)]
    check_summary(r.stderr, rs)
    # and `logs --run` lists exactly these
    logs = subprocess.run([FT, "logs", "--db", str(db), "--run", run_id_of(r.stderr), "--json"],
                          capture_output=True, text=True, timeout=30)
    assert [json.loads(line)["id"] for line in logs.stdout.splitlines()] == [x["id"] for x in rs]
    other = subprocess.run([FT, "logs", "--db", str(db), "--run", "00000000", "--json"], capture_output=True,
                           text=True, timeout=30)
    assert other.stdout.strip() == ""


def test_joins_a_running_proxy_for_the_same_upstreams(sim, tmp_path):
    """A proxy already running for the upstream (same db) is used; its records carry the run id."""
    db = tmp_path / "ft.db"
    script = tmp_path / "child.py"
    script.write_text(ANTHROPIC_CHILD)
    env = base_env(tmp_path, ANTHROPIC_BASE_URL=sim.url, ANTHROPIC_API_KEY="sk-ant-test-1234567890123456789012")
    with ProxyServer([f"anthropic={sim.url}", "openai=https://api.openai.com/v1"], str(db), port=0) as p:
        write_state(p)
        try:
            printed = subprocess.run([FT, "run", "--db", str(db), "--print-env", "--", sys.executable, str(script)],
                                     env=env, capture_output=True, text=True, timeout=30)
            # exactly what the run sets: the joined proxy's run path, with its own run id
            m = re.search(rf"export ANTHROPIC_BASE_URL={re.escape(p.url)}/_run/([0-9a-f]{{8}})/anthropic\n", printed.stdout)
            assert m and f"export FIRSTTOKEN_RUN_ID={m.group(1)}" in printed.stdout, printed.stdout
            pasted = dict(env, ANTHROPIC_BASE_URL=f"{p.url}/_run/{m.group(1)}/anthropic")
            assert subprocess.run([sys.executable, str(script), "0"], env=pasted, capture_output=True,
                                  timeout=60).returncode == 0
            r = ft_run(db, [sys.executable, str(script), "0"], env)
        finally:
            clear_state(p)
        p.flush()
    assert r.returncode == 0, r.stderr
    pasted_rows = rows(db, "WHERE run_id = ?", (m.group(1),))  # the printed lines, pasted, record under their run
    assert len(pasted_rows) == 1 and pasted_rows[0]["path"] == "/anthropic/v1/messages", pasted_rows
    rs = rows(db, "WHERE run_id IS NOT ?", (m.group(1),))
    assert len(rs) == 1 and rs[0]["path"] == "/anthropic/v1/messages" and rs[0]["upstream_url"] == sim.url + "/v1/messages"
    check_summary(r.stderr, rs)
    assert f"proxy {p.url}" in r.stderr


# -- --print-env ---------------------------------------------------------------------------------


def test_joins_a_proxy_on_another_database_unless_db_is_given(sim, tmp_path):
    """Discovery goes through the per-user registry: a proxy started with --db sweep.db is joined by a
    plain `firsttoken run` (no --db), but not by one given another --db."""
    script = tmp_path / "child.py"
    script.write_text(ANTHROPIC_CHILD)
    env = base_env(tmp_path, ANTHROPIC_BASE_URL=sim.url, ANTHROPIC_API_KEY="sk-ant-test-1234567890123456789012",
                   XDG_DATA_HOME=str(tmp_path / "xdg"))
    with ProxyServer([f"anthropic={sim.url}", "openai=https://api.openai.com/v1"], str(tmp_path / "sweep.db"),
                     port=0) as p:
        write_state(p)
        try:
            plain = subprocess.run([FT, "run", "--print-env", "--", sys.executable, str(script)],
                                   env=env, capture_output=True, text=True, timeout=30)
            other = subprocess.run([FT, "run", "--db", str(tmp_path / "other.db"), "--print-env", "--",
                                    sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=30)
        finally:
            clear_state(p)
    assert re.search(rf"export ANTHROPIC_BASE_URL={re.escape(p.url)}/_run/[0-9a-f]{{8}}/anthropic\n", plain.stdout), \
        plain.stdout + plain.stderr
    assert p.url not in other.stdout

def test_print_env_defaults_and_env(tmp_path):
    """Any other command gets only the base-URL variables it already had: an unset one stays unset
    (setting it could send a client that falls back to its own configuration elsewhere). The one exception,
    OLLAMA_HOST, names Ollama's default, where its clients go with it unset (docs/run.md, The guarantee)."""
    env = base_env(tmp_path, ANTHROPIC_BASE_URL="https://gw.example.com/anthropic")
    r = subprocess.run([FT, "run", "--db", str(tmp_path / "x.db"), "--print-env", "--", "python", "app.py"],
                       env=env, capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert "export ANTHROPIC_BASE_URL=http://127.0.0.1:8787/anthropic" in lines
    assert not any("OPENAI_BASE_URL=" in x or "OPENAI_API_BASE=" in x for x in lines if x.startswith("export"))
    assert "export OLLAMA_HOST=http://127.0.0.1:8787/ollama" in lines
    assert any(x.endswith("firsttoken proxy --upstream anthropic=https://gw.example.com/anthropic "
                          "--upstream ollama=http://127.0.0.1:11434") for x in lines)
    assert any("OPENAI_BASE_URL is not set" in x for x in lines)
    assert not (tmp_path / "x.db").exists()  # nothing started, nothing written


ENV_CHILD = """
import json, os
print(json.dumps({k: os.environ.get(k) for k in ("OPENAI_BASE_URL", "OLLAMA_HOST", "ANTHROPIC_BASE_URL")}))
"""


def test_print_env_says_what_a_run_with_its_own_proxy_sets(tmp_path):
    """No proxy runs: `--print-env` says the run starts its own on a free port and sets exactly these values
    (the port the one thing chosen later); what the run then gave its child is that, with the port filled in."""
    script = tmp_path / "child.py"
    script.write_text(ENV_CHILD)
    env = base_env(tmp_path, OPENAI_BASE_URL="https://api.openai.com/v1")
    printed = subprocess.run([FT, "run", "--db", str(tmp_path / "x.db"), "--print-env", "--", sys.executable,
                              str(script)], env=env, capture_output=True, text=True, timeout=30)
    said = dict(re.findall(r"^#   ([A-Z_]+)=(http://127\.0\.0\.1:<port>\S*)$", printed.stdout, re.M))
    assert set(said) == {"OPENAI_BASE_URL", "OLLAMA_HOST"}, printed.stdout
    r = ft_run(tmp_path / "x.db", [sys.executable, str(script)], env)
    got = json.loads(r.stdout.strip().splitlines()[-1])
    port = re.match(r"http://127\.0\.0\.1:(\d+)/", got["OPENAI_BASE_URL"]).group(1)
    assert {k: v.replace("<port>", port) for k, v in said.items()} == {k: got[k] for k in said}, (said, got)
    assert got["ANTHROPIC_BASE_URL"] is None


def test_print_env_claude_settings_and_codex_config(tmp_path):
    env = base_env(tmp_path, ANTHROPIC_BASE_URL="https://wrong.example.com")
    home = Path(env["HOME"])
    (home / ".claude").mkdir()
    (home / ".claude" / "settings.json").write_text(json.dumps({"env": {"ANTHROPIC_BASE_URL": "https://api.z.example/api/anthropic"}}))
    r = subprocess.run([FT, "run", "--print-env", "--db", str(tmp_path / "x.db"), "--", "claude", "-p", "hi"],
                       env=env, capture_output=True, text=True, timeout=30)
    assert "anthropic=https://api.z.example/api/anthropic (~/.claude/settings.json env.ANTHROPIC_BASE_URL)" in r.stdout
    assert """#   claude --settings '{"env": {"ANTHROPIC_BASE_URL": "http://127.0.0.1:8787/anthropic"}}' -p hi""" in r.stdout
    (home / ".codex").mkdir()
    (home / ".codex" / "config.toml").write_text('model_provider = "gw"\n\n[model_providers.gw]\nname = "gw"\n'
                                                 'base_url = "https://gw.example.com/openai/v1"\nwire_api = "responses"\n')
    r = subprocess.run([FT, "run", "--print-env", "--db", str(tmp_path / "x.db"), "--", "codex", "exec", "hi"],
                       env=env, capture_output=True, text=True, timeout=30)
    assert "openai=https://gw.example.com/openai/v1 (" in r.stdout
    assert """#   codex -c 'model_providers.gw.base_url="http://127.0.0.1:8787/openai"' exec hi""" in r.stdout
    (home / ".codex" / "config.toml").write_text('model_provider = "nope"\n')
    r = subprocess.run([FT, "run", "--print-env", "--db", str(tmp_path / "x.db"), "--", "codex", "exec", "hi"],
                       env=env, capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "model_provider = 'nope' is not defined" in r.stderr


def test_managed_claude_settings_fall_back_to_forward_mode(tmp_path):
    from firsttoken.cli.run.upstreams import make_plan

    managed = tmp_path / "managed-settings.json"
    managed.write_text(json.dumps({"env": {"ANTHROPIC_BASE_URL": "https://corp-gw.example.com"}}))
    plan = make_plan(["claude"], {}, tmp_path, tmp_path, managed=(managed,))
    assert plan.upstreams["anthropic"].url == "https://corp-gw.example.com"
    assert plan.forward_reason and "managed" in plan.forward_reason
    assert make_plan(["claude"], {}, tmp_path, tmp_path, managed=(tmp_path / "none.json",)).forward_reason is None


@pytest.mark.parametrize("argv, client, at", [
    (["claude", "-p", "hi"], "claude-code", 1),
    (["/usr/local/bin/codex.exe", "exec"], "codex", 1),
    (["cline", "--json", "Say hi"], "cline", 1),
    (["npx", "claude", "-p", "hi"], "claude-code", 2),
    (["npx", "-y", "@anthropic-ai/claude-code@2.1.197", "-p", "hi"], "claude-code", 3),
    (["npx", "--", "claude", "-p", "hi"], "claude-code", 3),
    (["npx", "-p", "@openai/codex", "codex", "exec", "hi"], "codex", 4),
    (["npx", "--package=@openai/codex", "codex", "exec"], "codex", 3),
    (["bunx", "cline@3.0.65", "--json", "Say hi"], "cline", 2),
    (["bun", "x", "@openai/codex", "exec"], "codex", 3),
    (["pnpm", "dlx", "@anthropic-ai/claude-code", "-p", "hi"], "claude-code", 3),
    (["yarn", "dlx", "cline", "--json", "Say hi"], "cline", 3),
    (["node", "/usr/lib/node_modules/@anthropic-ai/claude-code/cli.js", "-p", "hi"], "claude-code", 2),
    (["node", "--max-old-space-size", "4096", "/x/node_modules/@anthropic-ai/claude-code/cli.js"], "claude-code", 4),
    (["/usr/bin/node", "--require", "./hook.js", "./node_modules/@openai/codex/bin/codex.js", "exec"], "codex", 4),
    (["bun", "run", "/opt/node_modules/cline/bin/cline", "--json", "Say hi"], "cline", 3),
    (["node", "./bin/claude.mjs"], "claude-code", 2),
    # not a client: a command given as a string, another package, a plain script, a bare launcher
    (["npx", "-c", "claude -p hi"], "other", 1),
    (["node", "-e", "require('@anthropic-ai/claude-code')"], "other", 1),
    (["npx", "prettier", "claude.js"], "other", 1),
    (["node", "app.js", "claude"], "other", 1),
    (["python", "my_app.py"], "other", 1),
    (["npx"], "other", 1),
    ([], "other", 1),
])
def test_client_of_sees_through_launchers(argv, client, at):
    """A client run through npx / bunx / pnpm dlx / yarn dlx / node SCRIPT is that client, and its
    own arguments (where `run` adds --settings or -c) start after the launcher's."""
    from firsttoken.cli.run.upstreams import client_of

    assert client_of(argv) == (client, at)


def test_print_env_through_a_launcher_puts_the_setting_after_the_package(tmp_path):
    env = base_env(tmp_path, ANTHROPIC_BASE_URL="https://gw.example.com")
    r = subprocess.run([FT, "run", "--print-env", "--db", str(tmp_path / "x.db"), "--", "npx", "-y",
                        "@anthropic-ai/claude-code", "-p", "hi"], env=env, capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("# firsttoken run: claude-code;")
    assert ("""#   npx -y @anthropic-ai/claude-code --settings '{"env": {"ANTHROPIC_BASE_URL": "http://127.0.0.1:8787/anthropic"}}'"""
            " -p hi") in r.stdout


# -- the terminal and signals --------------------------------------------------------------------

def test_tty_passes_through(tmp_path):
    term = PseudoTerminal(100, 30)
    try:
        term.spawn([FT, "run", "--db", str(tmp_path / "ft.db"), "--", sys.executable, "-c",
                    "import sys; print('tty', sys.stdin.isatty(), sys.stdout.isatty(), sys.stderr.isatty()); sys.exit(5)"],
                   env=base_env(tmp_path))
        assert term.wait_exit(60) == 5
        text = term.text()
        assert "tty True True True" in text
        assert "the command sent no request through firsttoken" in text
    finally:
        term.close()


CTRL_C_CHILD = """
import signal, sys, time
n = []
signal.signal(signal.SIGINT, lambda *_: n.append(1))
print("ready", flush=True)
deadline = time.time() + 20
while not n and time.time() < deadline:
    time.sleep(0.05)
time.sleep(0.5)  # a second (duplicated) SIGINT would arrive now
print("SIGINTs:", len(n), flush=True)
sys.exit(len(n))
"""


def test_ctrl_c_on_the_terminal_reaches_the_child_once_and_firsttoken_survives(tmp_path):
    """The terminal sends Ctrl-C to the foreground group (firsttoken and the child): firsttoken must
    neither die nor forward a second one (twice Ctrl-C quits Claude Code)."""
    import fcntl
    import termios

    (tmp_path / "child.py").write_text(CTRL_C_CHILD)
    term = PseudoTerminal(100, 30)
    try:
        slave = term.slave
        term.proc = subprocess.Popen(
            [FT, "run", "--db", str(tmp_path / "ft.db"), "--", sys.executable, str(tmp_path / "child.py")],
            stdin=slave, stdout=slave, stderr=slave, env=base_env(tmp_path), start_new_session=True,
            preexec_fn=lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 0))  # the pty is its controlling terminal
        term.wait_for("ready", 30)
        os.write(term.master, b"\x03")
        assert term.wait_exit(30) == 1
        text = term.text()
        assert "SIGINTs: 1" in text
        assert "firsttoken run" in text
    finally:
        term.close()


SIGNAL_CHILD = """
import signal, sys, time

def on(sig, _):
    print("child got", signal.Signals(sig).name, flush=True)
    sys.exit(42)
signal.signal(signal.SIGTERM, on)
print("ready", flush=True)
time.sleep(60)
"""


def _start_and_wait_ready(tmp_path, script: str) -> subprocess.Popen:
    (tmp_path / "child.py").write_text(script)
    p = subprocess.Popen([FT, "run", "--db", str(tmp_path / "ft.db"), "--", sys.executable, str(tmp_path / "child.py")],
                         env=base_env(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         stdin=subprocess.DEVNULL)
    assert p.stdout.readline().strip() == "ready"
    return p


def test_sigterm_reaches_the_child_and_its_exit_code_is_ours(tmp_path):
    p = _start_and_wait_ready(tmp_path, SIGNAL_CHILD)
    p.send_signal(signal.SIGTERM)
    out, err = p.communicate(timeout=30)
    assert p.returncode == 42, err
    assert "child got SIGTERM" in out
    assert "firsttoken run" in err  # firsttoken survived to write the summary


def test_a_child_killed_by_a_signal_exits_128_plus_n(tmp_path):
    p = _start_and_wait_ready(tmp_path, "import time; print('ready', flush=True); time.sleep(60)")
    p.send_signal(signal.SIGINT)  # no terminal here: firsttoken forwards it; the child dies of it
    out, err = p.communicate(timeout=30)
    assert p.returncode == 128 + signal.SIGINT, err
    assert "firsttoken run" in err


# -- the real CLIs -------------------------------------------------------------------------------

def find_cli(name: str) -> str:
    for candidate in (NODE_BIN / name, shutil.which(name)):
        if candidate and Path(candidate).exists():
            return str(candidate)
    msg = (f"the {name} CLI is not installed: `npm install --prefix .ci/node @anthropic-ai/claude-code @openai/codex "
           "cline` (.ci/run does it)")
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(msg)
    pytest.skip(msg)


@pytest.mark.parametrize("where", ["env", "settings.json"])
def test_claude_code(sim, tmp_path, where):
    claude = find_cli("claude")
    env = base_env(tmp_path, ANTHROPIC_API_KEY="sk-ant-test-1234567890123456789012", DISABLE_TELEMETRY="1",
                   CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1", DISABLE_AUTOUPDATER="1")
    if where == "env":
        env["ANTHROPIC_BASE_URL"] = sim.url
    else:  # the user's settings.json wins over the environment: it is the upstream
        env["ANTHROPIC_BASE_URL"] = "http://127.0.0.1:9"
        (Path(env["HOME"]) / ".claude").mkdir()
        (Path(env["HOME"]) / ".claude" / "settings.json").write_text(json.dumps({"env": {"ANTHROPIC_BASE_URL": sim.url}}))
    db = tmp_path / "ft.db"
    t0 = time.monotonic()
    r = ft_run(db, [claude, "-p", "hi"], env, timeout=120, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert SIM_TEXT in r.stdout
    rs = rows(db)
    msgs = [x for x in rs if x["api"] == "anthropic.messages"]
    assert msgs and all(x["upstream"] == sim.url and x["status"] == 200 for x in msgs)
    assert all(x["upstream"] == sim.url for x in rs)
    check_summary(r.stderr, rs)
    assert "via: claude --settings" in r.stderr
    assert time.monotonic() - t0 < 120


def test_codex(sim, tmp_path):
    codex = find_cli("codex")
    env = base_env(tmp_path, OPENAI_API_KEY="sk-test-1234567890123456789012")
    conf = Path(env["HOME"]) / ".codex"
    conf.mkdir()
    (conf / "config.toml").write_text(f'model_provider = "sim"\nmodel = "gpt-5-codex"\n\n[model_providers.sim]\n'
                                      f'name = "sim"\nbase_url = "{sim.url}/v1"\nenv_key = "OPENAI_API_KEY"\n'
                                      'wire_api = "responses"\n')
    db = tmp_path / "ft.db"
    r = ft_run(db, [codex, "exec", "--skip-git-repo-check", "hi"], env, timeout=120, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert SIM_TEXT in r.stdout
    rs = rows(db)
    resp = [x for x in rs if x["api"] == "openai.responses"]
    assert resp and all(x["upstream_url"] == sim.url + "/v1/responses" and x["status"] == 200 for x in resp)
    check_summary(r.stderr, rs)
    assert "via: codex -c model_providers.sim.base_url" in r.stderr
