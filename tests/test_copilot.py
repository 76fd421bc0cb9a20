"""GitHub Copilot CLI's bring-your-own-key provider (cli/run/clients/copilot.py): `run -- copilot` points
COPILOT_PROVIDER_BASE_URL at the proxy (OPENAI_BASE_URL, which Copilot ignores, is left alone) and keeps
COPILOT_PROVIDER_TYPE; `env copilot` prints the same settings. The slow tests run the real Copilot CLI
(npm @github/copilot, pinned in .ci/run, in .ci/node) with COPILOT_OFFLINE=true against a simulator: no
GitHub login, no network."""

from __future__ import annotations

import pytest
from conftest import FAST, rows
from runkit import KEY, NODE_BIN, SIM_TEXT, base_env, find_client, ft_run

from firsttoken.cli.env import clients as E
from firsttoken.cli.env.command import render
from firsttoken.cli.env.target import resolve_target
from firsttoken.cli.run.upstreams import PlanError, client_of, make_plan, redirect
from firsttoken.cli.simulate.config import SimConfig
from firsttoken.cli.simulate.server import SimServer

PROXY = "http://127.0.0.1:8787"


def plan_and_redirect(env, tmp_path, argv=("copilot", "-p", "hi")):
    plan = make_plan(list(argv), env, tmp_path, tmp_path)
    return plan, redirect(plan, PROXY, plan.routes(), env)


@pytest.mark.parametrize("argv, at", [(["copilot", "-p", "hi"], 1), (["npx", "-y", "@github/copilot@1.0.102", "-p"], 3),
                                      (["/x/node_modules/.bin/copilot"], 1)])
def test_client_of_knows_copilot(argv, at):
    assert client_of(argv) == ("copilot", at)


@pytest.mark.parametrize("kind, url, base", [
    (None, "http://127.0.0.1:11434/v1", "/openai"),  # openai by default; the path holds the version: no /v1 added
    ("openai", "https://api.example.com", "/openai/v1"),
    ("anthropic", "https://api.anthropic.com", "/anthropic"),  # Copilot appends /v1/messages itself
    ("azure", "https://r.openai.azure.com", "/cloud"),  # …and /openai/v1/… for azure
])
def test_run_sets_copilot_provider_base_url_and_keeps_the_type(tmp_path, kind, url, base):
    env = {"COPILOT_PROVIDER_BASE_URL": url, "OPENAI_BASE_URL": "http://127.0.0.1:1/v1", "COPILOT_MODEL": "m"}
    if kind:
        env["COPILOT_PROVIDER_TYPE"] = kind
    plan, r = plan_and_redirect(env, tmp_path)
    assert [u.url for u in plan.upstreams.values()] == [url]
    assert plan.forward_reason is None and plan.cannot is None
    assert r.env["COPILOT_PROVIDER_BASE_URL"] == PROXY + base  # the route's mount, then the base-URL rule
    assert "OPENAI_BASE_URL" not in r.env and "COPILOT_PROVIDER_TYPE" not in r.env  # the user's type stays
    assert f"COPILOT_PROVIDER_TYPE {kind or 'openai'} kept" in r.how
    assert "COPILOT_PROVIDER_API_KEY" in plan.key_source


def test_run_without_byok_is_forward_mode_and_says_why(tmp_path):
    plan, _ = plan_and_redirect({"OPENAI_BASE_URL": "http://127.0.0.1:1/v1"}, tmp_path)
    assert plan.upstreams == {}
    assert "COPILOT_PROVIDER_BASE_URL is not set" in plan.forward_reason
    assert "ignores OPENAI_BASE_URL), which is not among the LLM API hosts firsttoken records" in plan.forward_reason


def test_run_refuses_an_unknown_provider_type(tmp_path):
    with pytest.raises(PlanError, match="COPILOT_PROVIDER_TYPE = 'gemini' is not one of openai, azure, anthropic"):
        make_plan(["copilot"], {"COPILOT_PROVIDER_BASE_URL": "http://127.0.0.1:9/v1", "COPILOT_PROVIDER_TYPE": "gemini"},
                  tmp_path, tmp_path)


@pytest.mark.parametrize("upstream, env, exports", [
    ("http://127.0.0.1:11434/v1", {}, {"COPILOT_PROVIDER_BASE_URL": PROXY, "COPILOT_PROVIDER_TYPE": "openai"}),
    ("https://api.anthropic.com", {}, {"COPILOT_PROVIDER_BASE_URL": PROXY, "COPILOT_PROVIDER_TYPE": "anthropic"}),
    ("https://r.openai.azure.com", {"COPILOT_PROVIDER_TYPE": "azure"},
     {"COPILOT_PROVIDER_BASE_URL": PROXY, "COPILOT_PROVIDER_TYPE": "azure"}),
])
def test_env_prints_copilot_byok_settings(tmp_path, upstream, env, exports):
    t = resolve_target(upstreams=(upstream,), port=8787, host="127.0.0.1", db_path=tmp_path / "none.db")
    plan = E.plan_for("copilot", t, env=env, home=tmp_path, model="gpt-4o-mini")
    assert dict(plan.exports) == {**exports, "COPILOT_MODEL": "gpt-4o-mini"}
    text = render(plan)
    assert "never OPENAI_BASE_URL" in text and "OPENAI_BASE_URL=" not in text
    assert E.plan_for("copilot", t, env=env, home=tmp_path).placeholders == [
        ("COPILOT_MODEL", "<a model the upstream serves>")]


# -- the real Copilot CLI (npm @github/copilot, in .ci/node) ----------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("kind", ["openai", "anthropic"])
def test_real_copilot_byok_is_recorded(tmp_path, kind):
    """`copilot -p` with BYOK, offline: every request it sent reached the user's upstream through the proxy and
    is recorded; OPENAI_BASE_URL (the decoy) is ignored by Copilot and left so."""
    copilot = find_client("copilot", NODE_BIN)
    with SimServer(SimConfig(**FAST)) as upstream, SimServer(SimConfig(**FAST)) as decoy:
        env = base_env(tmp_path, COPILOT_OFFLINE="true", COPILOT_AUTO_UPDATE="false", COPILOT_PROVIDER_TYPE=kind,
                       COPILOT_PROVIDER_BASE_URL=upstream.url + ("/v1" if kind == "openai" else ""),
                       COPILOT_PROVIDER_API_KEY=KEY, COPILOT_MODEL="gpt-4o-mini",
                       OPENAI_BASE_URL=decoy.url + "/v1")
        db = tmp_path / "ft.db"
        r = ft_run(db, [copilot, "-p", "Say hi", "-s", "--allow-all-tools", "--no-auto-update"], env, timeout=180,
                   cwd=tmp_path)
        assert r.returncode == 0, r.stdout + r.stderr
        assert SIM_TEXT in r.stdout, r.stdout + r.stderr
        assert decoy.arrivals == []
        posts = [a for a in upstream.arrivals if a.method == "POST"]
        assert posts and {a.path for a in posts} == {"/v1/chat/completions" if kind == "openai" else "/v1/messages"}
        rs = rows(db)
        assert len(rs) == len(upstream.arrivals), (upstream.arrivals, rs)
        assert all(x["upstream_url"].startswith(upstream.url + "/v1/") and x["status"] == 200 for x in rs), rs
        assert f"via: COPILOT_PROVIDER_BASE_URL → the proxy (COPILOT_PROVIDER_TYPE {kind} kept)" in r.stderr


def test_env_picks_the_route_of_the_provider_type(tmp_path):
    t = resolve_target(upstreams=("openai=http://127.0.0.1:11434/v1", "anthropic=https://api.anthropic.com"),
                       port=8787, host="127.0.0.1", db_path=tmp_path / "none.db")
    assert dict(E.plan_for("copilot", t, env={}, home=tmp_path).exports) == {
        "COPILOT_PROVIDER_BASE_URL": PROXY + "/openai", "COPILOT_PROVIDER_TYPE": "openai"}
    assert dict(E.plan_for("copilot", t, env={"COPILOT_PROVIDER_TYPE": "anthropic"}, home=tmp_path).exports) == {
        "COPILOT_PROVIDER_BASE_URL": PROXY + "/anthropic", "COPILOT_PROVIDER_TYPE": "anthropic"}
    odd = E.plan_for("copilot", t, env={"COPILOT_PROVIDER_TYPE": "gemini"}, home=tmp_path, route_name="openai")
    assert "COPILOT_PROVIDER_TYPE = 'gemini' is not one of openai, azure, anthropic" in odd.warnings[0]


@pytest.mark.slow
def test_real_copilot_byok_on_a_local_ollama_is_recorded(tmp_path):
    """Copilot's usual local set-up (its own help's example): COPILOT_PROVIDER_BASE_URL at Ollama's /v1 and an
    Ollama model, here the loopback Ollama of tests/ollama_upstream.py; recorded through run with the model."""
    from ollama_upstream import OllamaUpstream

    copilot = find_client("copilot", NODE_BIN)
    with OllamaUpstream(ctx=32768) as ollama:
        env = base_env(tmp_path, COPILOT_OFFLINE="true", COPILOT_AUTO_UPDATE="false", COPILOT_MODEL="llama3.2",
                       COPILOT_PROVIDER_BASE_URL=ollama.url + "/v1")
        db = tmp_path / "ft.db"
        r = ft_run(db, [copilot, "-p", "Say hi", "-s", "--allow-all-tools", "--no-auto-update"], env, timeout=180,
                   cwd=tmp_path)
        assert r.returncode == 0 and "Paris is the capital of France." in r.stdout, r.stdout + r.stderr
        paths = [e.path for e in ollama.log]
    rs = rows(db)
    assert paths and set(paths) == {"/v1/chat/completions"} and len(rs) == len(paths), (paths, rs)
    assert all(x["upstream_url"] == ollama.url + "/v1/chat/completions" and x["status"] == 200 for x in rs), rs
    assert {x["model"] for x in rs} == {"llama3.2"}
