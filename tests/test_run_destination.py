"""The guarantee of `firsttoken run`: a request never goes to a host other than the one the client
would have used without firsttoken.

Each client here is a real program (a Python script on the official openai SDK) that picks its base
URL its own way, the way real clients do; two simulators log where every request arrived: the
upstream the client is configured for, and a decoy (what a wrong guess would reach). Each command
runs once without firsttoken and once through `firsttoken run`: the same requests must reach the
same server, and every record must name it.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import FAST, rows
from runkit import FT, base_env, ft_run

from firsttoken.cli.proxy.server import ProxyServer
from firsttoken.cli.proxy.state import clear_state, write_state
from firsttoken.cli.simulate.config import SimConfig
from firsttoken.cli.simulate.server import SimServer

pytestmark = pytest.mark.slow  # each case runs a client twice, with and without `firsttoken run`

KEY = "sk-test-123456789012345678901234"

#: how a client finds its base URL: its own flag first (Qwen Code), the environment first (litellm
#: inside aider), or its own config file only (opencode, Continue, llm)
CLIENT = """
import json, os, sys, openai
flag = sys.argv[sys.argv.index("--api-base") + 1] if "--api-base" in sys.argv else None
conf = json.load(open("client.json"))["base_url"] if os.path.exists("client.json") else None
order = sys.argv[1]
if order == "flag-first":
    base = flag or os.environ.get("OPENAI_BASE_URL")
elif order == "env-first":
    base = os.environ.get("OPENAI_BASE_URL") or flag
else:
    base = conf
c = openai.OpenAI(base_url=base, api_key=os.environ.get("MY_KEY"), max_retries=0)
for _ in range(2):
    for ch in c.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}],
                                        stream=True, stream_options={"include_usage": True}):
        pass
print("ok")
"""


@pytest.fixture
def servers():
    with SimServer(SimConfig(**FAST)) as upstream, SimServer(SimConfig(**FAST)) as decoy:
        yield upstream, decoy


def where(*servers: SimServer) -> list[tuple[int, str]]:
    """Every request that arrived, as (port, path), and forget them."""
    out = []
    for s in servers:
        out += [(a.port, a.path) for a in s.arrivals]
        s.arrivals.clear()
    return sorted(out)


@pytest.mark.parametrize("order, use_flag, env_decoy, conf", [
    ("flag-first", True, True, False),  # its flag beats OPENAI_BASE_URL (which names the decoy)
    ("env-first", True, False, False),  # OPENAI_BASE_URL would beat its flag: unset, it must stay unset
    ("env-first", True, True, False),  # … and set, it wins with or without firsttoken
    ("config", False, False, True),  # its own config file, no variable at all
])
def test_an_unknown_client_goes_where_it_went(servers, tmp_path, order, use_flag, env_decoy, conf):
    upstream, decoy = servers
    (tmp_path / "child.py").write_text(CLIENT)
    if conf:
        (tmp_path / "client.json").write_text(f'{{"base_url": "{upstream.url}/v1"}}')
    argv = [sys.executable, "child.py", order] + (["--api-base", f"{upstream.url}/v1"] if use_flag else [])
    env = base_env(tmp_path, MY_KEY=KEY, **({"OPENAI_BASE_URL": f"{decoy.url}/v1"} if env_decoy else {}))
    direct = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert direct.returncode == 0 and "ok" in direct.stdout, direct.stderr
    without = where(upstream, decoy)
    assert len(without) == 2
    db = tmp_path / "ft.db"
    r = ft_run(db, argv, env, cwd=tmp_path)
    assert r.returncode == 0 and "ok" in r.stdout, r.stderr
    assert where(upstream, decoy) == without  # the same requests reached the same server
    arrived_at = {upstream.port: upstream.url, decoy.port: decoy.url}[without[0][0]]
    for rec in rows(db):  # whatever was recorded was forwarded there
        assert rec["upstream_url"].startswith(arrived_at + "/"), rec["upstream_url"]
    if env_decoy:  # a variable the user set is redirected to its own value (recorded when the client reads it)
        assert len(rows(db)) == (2 if order == "env-first" else 0), r.stderr
        assert "via: base URLs in the environment (OPENAI_BASE_URL, OLLAMA_HOST)" in r.stderr
    else:  # nothing set: forward mode, which keeps every destination
        assert "forward mode" in r.stderr


def test_forward_mode_cannot_carry_a_plain_http_upstream_so_run_says_so_before_starting(servers, tmp_path):
    """A Cline sandbox (nothing relocates its settings) whose provider is a plain-HTTP server: forward
    mode would not see it, so `run` starts nothing and prints the by-hand way."""
    upstream, _ = servers
    sandbox = tmp_path / "sb" / "settings"
    sandbox.mkdir(parents=True)
    (sandbox / "providers.json").write_text(
        '{"version": 1, "lastUsedProvider": "openai-compatible", "providers": {"openai-compatible": '
        f'{{"settings": {{"provider": "openai-compatible", "baseUrl": "{upstream.url}/v1", "apiKey": "{KEY}"}}}}}}}}')
    env = base_env(tmp_path)
    r = ft_run(tmp_path / "ft.db", ["cline", "--data-dir", str(tmp_path / "sb"), "Say hi"], env)
    assert r.returncode == 2, r.stderr
    assert "cannot record Cline here" in r.stderr and "plain HTTP" in r.stderr
    assert f"firsttoken proxy --upstream openai={upstream.url}/v1" in r.stderr
    assert "cline auth -p openai-compatible -b" in r.stderr and "nothing was started" in r.stderr
    assert where(upstream) == [] and not (tmp_path / "ft.db").exists()
    printed = subprocess.run([FT, "run", "--print-env", "--db", str(tmp_path / "ft.db"), "--", "cline", "--data-dir",
                              str(tmp_path / "sb"), "Say hi"], env=env, capture_output=True, text=True, timeout=30)
    assert printed.returncode == 0 and "# firsttoken run cannot record Cline here" in printed.stdout


def test_an_openai_only_proxy_is_joined_by_an_openai_client(servers, tmp_path):
    """`firsttoken proxy --upstream http://127.0.0.1:PORT` (one route, no /v1, no Anthropic route) serves a
    client whose base URL is http://127.0.0.1:PORT/v1: `run` joins it, and prints only what it serves."""
    upstream, decoy = servers
    (tmp_path / "child.py").write_text(CLIENT)
    argv = [sys.executable, "child.py", "env-first"]
    env = base_env(tmp_path, MY_KEY=KEY, OPENAI_BASE_URL=f"{upstream.url}/v1")
    db = tmp_path / "ft.db"
    with ProxyServer([upstream.url], str(db), port=0) as p:
        write_state(p)
        try:
            printed = subprocess.run([FT, "run", "--db", str(db), "--print-env", "--", *argv], env=env,
                                     capture_output=True, text=True, timeout=30, cwd=tmp_path)
            r = ft_run(db, argv, env, cwd=tmp_path)
        finally:
            clear_state(p)
        p.flush()
    exports = [x for x in printed.stdout.splitlines() if x.startswith("export ")]
    run_id = next(x.split("=", 1)[1] for x in exports if x.startswith("export FIRSTTOKEN_RUN_ID="))
    assert exports == [f"export OPENAI_BASE_URL={p.url}/_run/{run_id}/v1", f"export FIRSTTOKEN_RUN_ID={run_id}"], \
        printed.stdout  # exactly what the run sets: the joined proxy's run path
    assert r.returncode == 0, r.stderr
    assert f"proxy {p.url}" in r.stderr
    assert where(upstream, decoy) == [(upstream.port, "/v1/chat/completions")] * 2
    assert [x["upstream_url"] for x in rows(db)] == [f"{upstream.url}/v1/chat/completions"] * 2


def test_plan_never_adds_an_unset_variable(tmp_path):
    """…but OLLAMA_HOST, whose unset value means Ollama's default: a route to that same default moves no client."""
    from firsttoken.cli.run.upstreams import make_plan

    plan = make_plan(["python", "app.py"], {"OPENAI_BASE_URL": "http://127.0.0.1:9/v1"}, tmp_path, tmp_path)
    assert list(plan.upstreams) == ["openai", "ollama"] and plan.forward_reason is None
    assert plan.upstreams["ollama"].url == "http://127.0.0.1:11434" and plan.upstreams["ollama"].implied
    plan = make_plan(["python", "app.py"], {}, tmp_path, tmp_path)
    assert plan.upstreams == {} and "forward mode" in (plan.forward_reason or "")
