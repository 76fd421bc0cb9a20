"""`firsttoken run`, `env` and `doctor` with Gemini CLI's set-up as 0.61 reads it (cli/run/clients/gemini.py):
auth type from settings.json or the environment, GOOGLE_GEMINI_BASE_URL / GOOGLE_VERTEX_BASE_URL from the
environment over its .env file, Login with Google not recordable. The real CLI: tests/test_gemini_cli.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from firsttoken.cli.run.clients.base import Context
from firsttoken.cli.run.clients.gemini import read_setup
from firsttoken.cli.run.upstreams import client_of, make_plan, redirect, serves

PROXY = "http://127.0.0.1:8787"
KEY = "AIzaSyD-test-key-0000000000000000000wxyz"


def settings(home: Path, auth: str | None, **more) -> Path:
    p = home / ".gemini" / "settings.json"
    p.parent.mkdir(parents=True, exist_ok=True)
    doc = dict(more)
    if auth:
        doc["security"] = {"auth": {"selectedType": auth}}
    p.write_text(json.dumps(doc))
    return p


def no_system(tmp_path: Path) -> dict[str, str]:
    """The machine's /etc/gemini-cli files are not the test's: point both system scopes at nothing."""
    return {"GEMINI_CLI_SYSTEM_SETTINGS_PATH": str(tmp_path / "none" / "settings.json")}


@pytest.mark.parametrize("argv,at", [
    (["gemini", "-p", "hi"], 1),
    (["npx", "-y", "@google/gemini-cli@0.61.0", "-p", "hi"], 3),
    (["node", "/x/node_modules/@google/gemini-cli/bundle/gemini.js", "-p", "hi"], 2),
])
def test_client_of_knows_gemini_cli(argv, at):
    assert client_of(argv) == ("gemini-cli", at)


def test_api_key_from_settings_and_base_url_from_the_environment_over_dotenv(tmp_path):
    home, work = tmp_path / "home", tmp_path / "work"
    settings(home, "gemini-api-key")
    (work / ".gemini").mkdir(parents=True)
    (work / ".gemini" / ".env").write_text("GOOGLE_GEMINI_BASE_URL=http://127.0.0.1:9999\n")
    env = {**no_system(tmp_path), "GEMINI_API_KEY": KEY, "GOOGLE_GEMINI_BASE_URL": "http://127.0.0.1:9100"}
    plan = make_plan(["gemini", "-p", "hi"], env, home, work)
    up = plan.upstreams["gemini"]
    assert (up.family, up.url, up.source) == ("gemini", "http://127.0.0.1:9100", "$GOOGLE_GEMINI_BASE_URL")
    assert not plan.forward_reason and not plan.cannot and "GEMINI_API_KEY" in plan.key_source
    r = redirect(plan, PROXY, plan.routes(), env)
    assert r.env == {"GOOGLE_GEMINI_BASE_URL": f"{PROXY}/gemini"} and r.argv == plan.argv and not r.files
    assert serves(plan.routes()["gemini"], up)
    # without the variable, its .env file's value is the one it uses
    plan = make_plan(["gemini"], {k: v for k, v in env.items() if k != "GOOGLE_GEMINI_BASE_URL"}, home, work)
    assert plan.upstreams["gemini"].url == "http://127.0.0.1:9999" and plan.upstreams["gemini"].source == \
        "$GOOGLE_GEMINI_BASE_URL"


def test_api_key_only_in_the_environment_runs_forward(tmp_path):
    """No selectedType anywhere: GEMINI_API_KEY picks gemini-api-key; GOOGLE_GEMINI_BASE_URL would make 0.61
    pick its "gateway" type (which `-p` refuses), so `run` keeps its setup and records it through HTTPS_PROXY."""
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    settings(home, None, privacy={"usageStatisticsEnabled": False})
    env = {**no_system(tmp_path), "GEMINI_API_KEY": KEY}
    plan = make_plan(["gemini", "-p", "hi"], env, home, work)
    assert plan.upstreams["gemini"].url == "https://generativelanguage.googleapis.com"
    assert plan.forward_reason and "gateway" in plan.forward_reason and "selectedType" in plan.forward_reason
    assert not plan.cannot
    # a base URL in its .env file: it picks "gateway" itself (and `-p` refuses it with or without firsttoken)
    (work / ".env").write_text("GOOGLE_GEMINI_BASE_URL=http://127.0.0.1:9999\n")
    plan = make_plan(["gemini", "-p", "hi"], env, home, work)
    assert plan.upstreams["gemini"].url == "http://127.0.0.1:9999" and not plan.forward_reason
    assert any("gateway" in n for n in plan.notes)


def test_vertex_mode_uses_google_vertex_base_url(tmp_path):
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    env = {**no_system(tmp_path), "GOOGLE_GENAI_USE_VERTEXAI": "true", "GOOGLE_CLOUD_PROJECT": "p-1",
           "GOOGLE_CLOUD_LOCATION": "europe-west4"}
    plan = make_plan(["gemini", "-p", "hi"], env, home, work)
    assert plan.upstreams["gemini"].url == "https://europe-west4-aiplatform.googleapis.com"
    assert "Application Default Credentials" in plan.key_source
    r = redirect(plan, PROXY, plan.routes(), env)
    assert r.env == {"GOOGLE_VERTEX_BASE_URL": f"{PROXY}/gemini"} and not r.files
    env["GOOGLE_VERTEX_BASE_URL"] = "https://vertex.example.com"
    assert make_plan(["gemini"], env, home, work).upstreams["gemini"].url == "https://vertex.example.com"
    env.pop("GOOGLE_VERTEX_BASE_URL")
    env["GOOGLE_CLOUD_LOCATION"] = "us"
    assert make_plan(["gemini"], env, home, work).upstreams["gemini"].url == "https://aiplatform.us.rep.googleapis.com"


def test_login_with_google_cannot_be_recorded_and_no_auth_runs_forward(tmp_path):
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    settings(home, "oauth-personal")
    plan = make_plan(["gemini"], no_system(tmp_path), home, work)
    assert plan.cannot and "cloudcode-pa.googleapis.com" in plan.cannot and not plan.upstreams
    settings(home, None)
    plan = make_plan(["gemini"], no_system(tmp_path), home, work)
    assert plan.forward_reason and "no auth type" in plan.forward_reason


def test_a_broken_settings_file_is_a_plan_error(tmp_path):
    from firsttoken.cli.run.clients.base import PlanError

    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    (home / ".gemini").mkdir(parents=True)
    (home / ".gemini" / "settings.json").write_text("{ not json")
    with pytest.raises(PlanError, match="settings.json"):
        read_setup(Context(env=no_system(tmp_path), home=home, cwd=work))


def test_doctor_reads_gemini_cli_as_run_does(tmp_path):
    from firsttoken.cli.doctor import checks as dc

    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()

    def found(env):
        ctx = dc.Context(env={**no_system(tmp_path), **env}, home=home, cwd=work, network=False)
        return {c.id: c for c in dc.check_gemini_cli(ctx) + dc.check_env_base_urls(ctx) + dc.check_keys(ctx)}

    assert found({}) == {"key.none": found({})["key.none"]}  # not set up here: nothing said about it
    got = found({"GEMINI_API_KEY": KEY, "GOOGLE_GEMINI_BASE_URL": "http://127.0.0.1:8787/v1beta"})
    assert got["gemini_cli.auth"].status == dc.FAIL and "gateway" in got["gemini_cli.auth"].detail
    assert got["base_url.environment.GOOGLE_GEMINI_BASE_URL"].status == dc.FAIL
    assert got["base_url.environment.GOOGLE_GEMINI_BASE_URL"].fix == "use http://127.0.0.1:8787"
    assert got["key.GEMINI_API_KEY"].status == dc.PASS and KEY not in repr(got["key.GEMINI_API_KEY"])
    settings(home, "gemini-api-key")
    got = found({"GEMINI_API_KEY": KEY})
    assert got["gemini_cli.auth"].status == dc.PASS and "generativelanguage.googleapis.com" in got["gemini_cli.auth"].detail
    (work / ".env").write_text("GOOGLE_GEMINI_BASE_URL=http://127.0.0.1:8787/v1\n")
    got = found({"GEMINI_API_KEY": KEY})
    assert [c for c in got.values() if c.id.startswith("base_url.") and c.status == dc.FAIL]  # the .env's URL is checked
    settings(home, "oauth-personal")
    assert found({})["gemini_cli.auth"].status == dc.WARN


def test_the_banner_names_gemini_s_variable_only_for_a_google_route():
    from firsttoken.addon import routing

    plain = routing.client_bases("http://127.0.0.1:8787", routing.parse_upstreams(["https://api.openai.com"]))
    assert [cb.family for cb in plain] == ["openai", "anthropic"]
    routes = routing.parse_upstreams(["openai=https://api.openai.com/v1", "gemini=https://generativelanguage.googleapis.com"])
    found = {cb.family: cb.text for cb in routing.client_bases("http://127.0.0.1:8787", routes)}
    assert found["gemini"] == "GOOGLE_GEMINI_BASE_URL=http://127.0.0.1:8787/gemini"
    assert found["openai"] == "OPENAI_BASE_URL=http://127.0.0.1:8787/openai"
