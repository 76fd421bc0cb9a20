"""The client adapters of `firsttoken run` (cli/run/clients/): each reads where its client would go in
that client's own precedence, and redirects it for one run without writing the user's files. Pure
plans here (no client runs); tests/test_run_clients.py runs the real clients, and
tests/test_run_destination.py checks the destination guarantee end to end."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import FAST, rows
from runkit import base_env, ft_run

from firsttoken.addon import routing
from firsttoken.cli.run.upstreams import client_of, make_plan, redirect
from firsttoken.cli.simulate.config import SimConfig
from firsttoken.cli.simulate.server import SimServer

PROXY = "http://127.0.0.1:8787"


def plan_and_redirect(argv, env, home, cwd):
    plan = make_plan(argv, env, home, cwd)
    return plan, redirect(plan, PROXY, plan.routes(), env)


@pytest.mark.parametrize("argv, client, at", [
    (["aider", "--model", "x"], "aider", 1),
    (["uvx", "--from", "aider-chat", "aider", "--message", "hi"], "aider", 4),
    (["uvx", "aider-chat@0.86.2", "--message", "hi"], "aider", 2),
    (["pipx", "run", "--spec", "aider-chat", "aider"], "aider", 5),
    (["pipx", "run", "llm", "-m", "x", "hi"], "llm", 3),
    (["uv", "tool", "run", "llm", "hi"], "llm", 4),
    (["npx", "-y", "opencode-ai@1.18.33", "run", "hi"], "opencode", 3),
    (["npx", "@qwen-code/qwen-code", "-p", "hi"], "qwen-code", 2),
    (["/x/node_modules/.bin/qwen", "-p", "hi"], "qwen-code", 1),
    (["node", "/x/node_modules/@continuedev/cli/dist/cn.js", "-p", "hi"], "cn", 2),
    (["bunx", "@continuedev/cli", "-p", "hi"], "cn", 2),
    (["opencode", "run", "hi"], "opencode", 1),
    (["kilo", "run", "hi"], "kilo", 1),
    (["npx", "-y", "@kilocode/cli@7.7.7", "run", "hi"], "kilo", 3),
    (["/x/node_modules/.bin/kilocode", "run", "hi"], "kilo", 1),
    (["kimi", "--print", "-p", "hi"], "kimi", 1),
    (["uvx", "kimi-cli@1.51.0", "--print"], "kimi", 2),
    (["uvx", "--from", "kimi-cli", "kimi", "-p", "hi"], "kimi", 4),
    (["uvx", "ruff", "check"], "other", 1),
    (["python", "-m", "aider"], "other", 1),
])
def test_client_of_knows_the_new_clients_and_python_launchers(argv, client, at):
    assert client_of(argv) == (client, at)


def test_aider_precedence_env_files_and_flag(tmp_path):
    home, cwd = tmp_path / "home", tmp_path / "proj"
    home.mkdir()
    cwd.mkdir()
    plan, r = plan_and_redirect(["aider", "--openai-api-base", "http://127.0.0.1:9100/v1", "f.py"], {}, home, cwd)
    assert plan.upstreams["openai"].url == "http://127.0.0.1:9100/v1"
    assert r.argv == ["aider", "--openai-api-base", "http://127.0.0.1:9100/v1", "f.py",
                      "--set-env", f"OPENAI_BASE_URL={PROXY}/openai",  # last: it wins, litellm reads it first
                      "--set-env", f"OLLAMA_API_BASE={PROXY}/ollama"]  # its Ollama models: litellm's default
    assert r.env == {} and plan.upstreams["ollama"].url == "http://localhost:11434" and plan.upstreams["ollama"].implied
    # OLLAMA_API_BASE as aider reads it (environment, .env, --set-env): the route's upstream, no longer implied
    plan = make_plan(["aider", "--set-env", "OLLAMA_API_BASE=http://127.0.0.1:9400/"], {}, home, cwd)
    assert plan.upstreams["ollama"].url == "http://127.0.0.1:9400" and not plan.upstreams["ollama"].implied
    (cwd / ".aider.conf.yml").write_text("openai-api-base: http://127.0.0.1:9200/v1\n")
    assert make_plan(["aider"], {}, home, cwd).upstreams["openai"].source.endswith(".aider.conf.yml openai-api-base")
    # OPENAI_BASE_URL beats --openai-api-base in litellm; a .env file overrides the environment
    assert make_plan(["aider", "--openai-api-base", "http://a/v1"], {"OPENAI_BASE_URL": "http://b/v1"}, home,
                     cwd).upstreams["openai"].url == "http://b/v1"
    (cwd / ".env").write_text("OPENAI_BASE_URL='http://c/v1'  \n")
    assert make_plan(["aider"], {"OPENAI_BASE_URL": "http://b/v1"}, home, cwd).upstreams["openai"].url == "http://c/v1"
    assert make_plan(["aider", "--set-env", "OPENAI_BASE_URL=http://d/v1"], {}, home,
                     cwd).upstreams["openai"].url == "http://d/v1"
    r = redirect(make_plan(["aider", "--", "f.py"], {}, home, cwd), PROXY,
                 make_plan(["aider"], {}, home, cwd).routes(), {})
    assert r.argv[:3] == ["aider", "--set-env", f"OPENAI_BASE_URL={PROXY}/openai"] and r.argv[-2:] == ["--", "f.py"]


def test_qwen_code_provider_beats_flag_beats_env(tmp_path):
    home = tmp_path / "home"
    (home / ".qwen").mkdir(parents=True)
    settings = home / ".qwen" / "settings.json"
    doc = {"security": {"auth": {"selectedType": "openai"}}, "model": {"name": "m1"},
           "modelProviders": {"openai": [{"id": "m1", "baseUrl": "http://127.0.0.1:9100/v1", "envKey": "K"},
                                         {"id": "m2", "envKey": "K"}]}}
    settings.write_text(json.dumps(doc))
    env = {"OPENAI_BASE_URL": "http://127.0.0.1:9999/v1",
           "QWEN_CODE_SYSTEM_SETTINGS_PATH": str(tmp_path / "no-system.json")}
    plan, r = plan_and_redirect(["qwen", "-p", "hi"], env, home, tmp_path)
    assert [u.url for u in plan.upstreams.values()] == ["http://127.0.0.1:9100/v1"]  # the env is not used
    (f,) = r.files
    assert f.env == "QWEN_CODE_SYSTEM_SETTINGS_PATH"
    assert json.loads(f.text)["modelProviders"]["openai"][0]["baseUrl"] == f"{PROXY}/openai"
    assert json.loads(settings.read_text()) == doc  # the user's file as it was
    # m2 has no baseUrl: the flag, then OPENAI_BASE_URL
    plan, r = plan_and_redirect(["qwen", "-m", "m2", "-p", "hi"], env, home, tmp_path)
    assert plan.upstreams["openai-2"].url == "http://127.0.0.1:9999/v1"
    assert r.argv[1:3] == ["--openai-base-url", f"{PROXY}/openai-2"]
    plan, r = plan_and_redirect(["qwen", "-m", "m2", "--openai-base-url", "http://127.0.0.1:9300/v1"], env, home, tmp_path)
    assert plan.upstreams["openai-2"].source == "qwen --openai-base-url"
    assert r.argv.count("--openai-base-url") == 1 and f"{PROXY}/openai-2" in r.argv
    # Qwen OAuth (no auth type): not redirected by guess
    settings.write_text("{}")
    plan = make_plan(["qwen"], env, home, tmp_path)
    assert plan.upstreams == {} and "Qwen OAuth" in plan.forward_reason


@pytest.mark.parametrize("where", ["environment", "cwd .env", "project .qwen/.env", "~/.qwen/.env", "settings env"])
def test_qwen_code_set_up_by_environment_only_selects_openai(tmp_path, where):
    """Issue 29: OPENAI_API_KEY, OPENAI_BASE_URL and OPENAI_MODEL with no auth type in any settings (its
    README's way) select the openai auth type (Qwen Code 0.15's getAuthTypeFromEnv), wherever Qwen Code
    reads its variables from: the environment, its one .env file, or settings.json's env."""
    home, proj = tmp_path / "home", tmp_path / "proj"
    (home / ".qwen").mkdir(parents=True)
    (proj / "sub").mkdir(parents=True)
    gw = {"OPENAI_API_KEY": "sk-x", "OPENAI_BASE_URL": "http://127.0.0.1:9400/v1", "OPENAI_MODEL": "m9"}
    env = {"QWEN_CODE_SYSTEM_SETTINGS_PATH": str(tmp_path / "no-system.json")}
    dotenv = "".join(f"{k}={v}\n" for k, v in gw.items())
    if where == "environment":
        env.update(gw)
    elif where == "cwd .env":
        (proj / ".env").write_text(dotenv)
    elif where == "project .qwen/.env":
        (proj / ".qwen").mkdir()
        (proj / ".qwen" / ".env").write_text(dotenv)
        (proj / ".env").write_text("OPENAI_BASE_URL=http://127.0.0.1:9/v1\n")  # .qwen/.env is found first, alone
    elif where == "~/.qwen/.env":
        (home / ".qwen" / ".env").write_text(dotenv)
    else:
        (home / ".qwen" / "settings.json").write_text(json.dumps({"env": gw}))
    plan, r = plan_and_redirect(["qwen", "-p", "hi"], env, home, proj / "sub" if where != "cwd .env" else proj)
    assert plan.forward_reason is None, plan.forward_reason
    assert [u.url for u in plan.upstreams.values()] == ["http://127.0.0.1:9400/v1"]
    assert r.argv[1:3] == ["--openai-base-url", f"{PROXY}/openai"]
    # one of the three missing: no auth type, Qwen OAuth: forward mode, as before
    env.pop("OPENAI_MODEL", None)
    if where == "environment":
        assert make_plan(["qwen", "-p", "hi"], env, home, proj).forward_reason


def test_qwen_code_model_in_qwen_model_selects_openai_by_version(tmp_path):
    """QWEN_MODEL in place of OPENAI_MODEL: 0.24.4 selects openai by it, 0.15.10 does not (Qwen OAuth: forward
    mode); a version that cannot be told: forward mode, which keeps the destination either way."""
    env = {"OPENAI_API_KEY": "sk-x", "OPENAI_BASE_URL": "http://127.0.0.1:9400/v1", "QWEN_MODEL": "m9",
           "QWEN_CODE_SYSTEM_SETTINGS_PATH": str(tmp_path / "none.json")}
    for version, redirected in (("0.24.4", True), ("0.15.10", False), (None, False)):
        bin_dir = fake_npm(tmp_path / str(version), "@qwen-code/qwen-code", version, "qwen") if version else tmp_path
        plan = make_plan(["qwen", "-p", "hi"], {**env, "PATH": str(bin_dir)}, tmp_path / "home", tmp_path)
        assert (plan.forward_reason is None) is redirected, (version, plan.forward_reason)
        if version is None:
            assert "version cannot be told" in plan.forward_reason


def test_qwen_code_picks_its_provider_by_the_settings_model_before_openai_model(tmp_path):
    """--model, else settings' model.name, else OPENAI_MODEL names the modelProviders entry (0.15.10)."""
    home = tmp_path / "home"
    (home / ".qwen").mkdir(parents=True)
    (home / ".qwen" / "settings.json").write_text(json.dumps({
        "security": {"auth": {"selectedType": "openai"}}, "model": {"name": "a"},
        "modelProviders": {"openai": [{"id": "a", "baseUrl": "http://127.0.0.1:9501/v1"},
                                      {"id": "b", "baseUrl": "http://127.0.0.1:9502/v1"}]}}))
    env = {"OPENAI_MODEL": "c", "QWEN_CODE_SYSTEM_SETTINGS_PATH": str(tmp_path / "none.json")}
    plan = make_plan(["qwen", "-p", "hi"], env, home, tmp_path)
    assert "fallback" not in plan.state and plan.upstreams["openai"].url == "http://127.0.0.1:9501/v1"


def test_opencode_merges_its_configs_and_redirects_inline(tmp_path):
    home, proj = tmp_path / "home", tmp_path / "proj"
    (home / ".config" / "opencode").mkdir(parents=True)
    (proj / ".git").mkdir(parents=True)
    (home / ".config" / "opencode" / "opencode.json").write_text(json.dumps(
        {"provider": {"gw": {"npm": "@ai-sdk/openai-compatible", "options": {"baseURL": "http://127.0.0.1:9100/v1"}},
                      "claude": {"npm": "@ai-sdk/anthropic", "options": {"baseURL": "https://gw.example/v1"}}}}))
    (proj / "opencode.jsonc").write_text('{\n  // the project wins\n  "provider": {"gw": {"options": '
                                         '{"baseURL": "http://127.0.0.1:9200/v1",}}}\n}\n')
    bin_dir = fake_npm(tmp_path / "old", "opencode-ai", "1.17.0", "opencode")
    env = {"OPENCODE_CONFIG_CONTENT": json.dumps({"theme": "x"}), "PATH": str(bin_dir)}
    plan, r = plan_and_redirect(["opencode", "run", "hi"], env, home, proj)  # the project wins
    assert {n: (u.family, u.url) for n, u in plan.upstreams.items()} == {
        "openai": ("openai", "http://127.0.0.1:9200/v1"), "anthropic": ("anthropic", "https://gw.example")}
    inline = json.loads(r.env["OPENCODE_CONFIG_CONTENT"])
    assert inline["theme"] == "x"  # the user's own inline config is kept
    assert inline["provider"]["gw"]["options"]["baseURL"] == f"{PROXY}/openai"
    assert inline["provider"]["claude"]["options"]["baseURL"] == f"{PROXY}/anthropic/v1"  # ai-sdk appends /messages
    assert routing.parse_upstream("anthropic=https://gw.example").url == plan.routes()["anthropic"].url
    # no provider with a base URL: forward mode, not a guess
    assert make_plan(["opencode"], {}, tmp_path / "nobody", tmp_path).forward_reason
    # 1.18 applies the project's file too (the real 1.18.33 goes where it says, tests/test_destinations.py), and a
    # version that cannot be told is read by the same order
    for path in (str(fake_npm(tmp_path / "new", "opencode-ai", "1.18.33", "opencode")), str(tmp_path)):
        plan = make_plan(["opencode", "run", "hi"], {**env, "PATH": path}, home, proj)
        assert plan.upstreams["openai"].url == "http://127.0.0.1:9200/v1" and not plan.forward_reason


def test_kilo_reads_its_own_files_and_leaves_managed_providers_alone(tmp_path):
    """Kilo's files, not opencode's: ~/.config/kilo < KILO_CONFIG < the project's kilo.json < opencode.json <
    .kilo/ < KILO_CONFIG_CONTENT; /etc/kilo beats the inline config, so a provider it sets is not redirected."""
    home, proj = tmp_path / "home", tmp_path / "proj"
    (home / ".config" / "kilo").mkdir(parents=True)
    (home / ".config" / "opencode").mkdir(parents=True)
    (proj / ".git").mkdir(parents=True)

    def provider(url, npm="@ai-sdk/openai-compatible"):
        return {"npm": npm, "options": {"baseURL": url}}

    (home / ".config" / "opencode" / "opencode.json").write_text(json.dumps(  # opencode's: not Kilo's
        {"provider": {"oc": provider("http://127.0.0.1:9000/v1")}}))
    (home / ".config" / "kilo" / "kilo.json").write_text(json.dumps(
        {"provider": {"gw": provider("http://127.0.0.1:9100/v1"), "mine": provider("http://127.0.0.1:9101/v1")}}))
    (proj / "kilo.jsonc").write_text('{"provider": {"gw": {"options": {"baseURL": "http://127.0.0.1:9200/v1",}}}}')
    (proj / "opencode.json").write_text(json.dumps({"provider": {"gw": provider("http://127.0.0.1:9300/v1")}}))
    old = {"PATH": str(fake_npm(tmp_path / "old", "@kilocode/cli", "7.6.0", "kilo"))}  # the project's too
    plan, r = plan_and_redirect(["kilo", "run", "hi"], old, home, proj)
    assert sorted(u.url for u in plan.upstreams.values()) == ["http://127.0.0.1:9101/v1", "http://127.0.0.1:9300/v1"]
    inline = json.loads(r.env["KILO_CONFIG_CONTENT"])
    assert set(inline["provider"]) == {"gw", "mine"} and "OPENCODE_CONFIG_CONTENT" not in r.env
    (proj / ".kilo").mkdir()
    (proj / ".kilo" / "kilo.json").write_text(json.dumps({"provider": {"gw": provider("http://127.0.0.1:9400/v1")}}))
    env = {**old, "KILO_CONFIG_CONTENT": json.dumps({"provider": {"mine": provider("https://gw.example/v1",
                                                                                    "@ai-sdk/anthropic")}})}
    plan = make_plan(["kilo", "run", "hi"], env, home, proj)
    assert {(u.family, u.url) for u in plan.upstreams.values()} == {("openai", "http://127.0.0.1:9400/v1"),
                                                                     ("anthropic", "https://gw.example")}
    assert make_plan(["kilo"], {"KILO_DISABLE_PROJECT_CONFIG": "1"}, home, proj).upstreams["openai"].url == \
        "http://127.0.0.1:9100/v1"
    # the managed config beats KILO_CONFIG_CONTENT: its provider is left alone, and said so
    from firsttoken.cli.run.clients.base import Context, Plan
    from firsttoken.cli.run.clients.kilo import Kilo

    managed = tmp_path / "etc-kilo"
    managed.mkdir()
    (managed / "kilo.json").write_text(json.dumps({"provider": {"gw": {"options": {"baseURL": "https://corp/v1"}}}}))
    plan = Plan(["kilo"], "kilo", {})
    Kilo(managed).find(plan, Context(env=old, home=home, cwd=proj))
    assert [u.url for u in plan.upstreams.values()] == ["http://127.0.0.1:9101/v1"]
    assert any("provider.gw.options.baseURL = https://corp/v1 beats" in n for n, _ in plan.unrecorded)
    (home / ".config" / "kilo" / "kilo.json").unlink()
    plan = Plan(["kilo"], "kilo", {})
    Kilo(managed).find(plan, Context(env={}, home=home, cwd=tmp_path))
    assert plan.upstreams == {} and plan.forward_reason
    # 7.7 applies the project's kilo.json too (the real 7.7.7 goes where it says), and so does a version that
    # cannot be told
    (home / ".config" / "kilo" / "kilo.json").write_text(json.dumps({"provider": {"gw": provider("http://127.0.0.1:9100/v1")}}))
    (proj / ".kilo" / "kilo.json").unlink()
    for new in ({"PATH": str(fake_npm(tmp_path / "new", "@kilocode/cli", "7.7.7", "kilo"))}, {}):
        plan = make_plan(["kilo", "run", "hi"], new, home, proj)
        assert plan.upstreams["openai"].url == "http://127.0.0.1:9300/v1" and not plan.forward_reason


KIMI_TOML = """default_model = "local"

[providers.gw]
type = "openai_legacy"
base_url = "http://127.0.0.1:9100/v1"
api_key = "sk-x"

[providers.moon]
type = "kimi"
base_url = "https://api.moonshot.ai/v1"
api_key = "sk-y"

[providers.claude]
type = "anthropic"
base_url = "http://127.0.0.1:9300"
api_key = "sk-z"

[models.local]
provider = "gw"
model = "m"
max_context_size = 1000

[models.k2]
provider = "moon"
model = "kimi-k2"
max_context_size = 1000

[models.c]
provider = "claude"
model = "claude-x"
max_context_size = 1000
"""


def test_kimi_model_provider_and_its_variable(tmp_path):
    """The model (--model if the config names it, else default_model) picks the provider; KIMI_BASE_URL
    (type kimi) or OPENAI_BASE_URL (openai types) beats its base_url, and is how it is redirected."""
    home = tmp_path / "home"
    (home / ".kimi").mkdir(parents=True)
    (home / ".kimi" / "config.toml").write_text(KIMI_TOML)
    plan, r = plan_and_redirect(["kimi", "--print", "-p", "hi"], {}, home, tmp_path)
    assert [(u.url, u.source) for u in plan.upstreams.values()] == [
        ("http://127.0.0.1:9100/v1", "~/.kimi/config.toml providers.gw.base_url")]
    assert r.env == {"OPENAI_BASE_URL": f"{PROXY}/openai"} and r.files == [] and r.argv == plan.argv
    plan, r = plan_and_redirect(["kimi", "-m", "k2", "-p", "hi"], {"OPENAI_BASE_URL": "http://127.0.0.1:9999/v1"},
                                home, tmp_path)
    assert [u.url for u in plan.upstreams.values()] == ["https://api.moonshot.ai/v1"]  # OPENAI_BASE_URL: not type kimi
    assert list(r.env) == ["KIMI_BASE_URL"]
    plan = make_plan(["kimi", "-m", "k2"], {"KIMI_BASE_URL": "http://127.0.0.1:9200/v1"}, home, tmp_path)
    assert plan.upstreams["openai"].source == "$KIMI_BASE_URL"
    # an unknown --model: no model of the config, only KIMI_BASE_URL (else nothing to guess from)
    plan = make_plan(["kimi", "-m", "nope"], {"KIMI_BASE_URL": "http://127.0.0.1:9200/v1"}, home, tmp_path)
    assert plan.upstreams["openai"].url == "http://127.0.0.1:9200/v1"
    assert make_plan(["kimi", "-m", "nope"], {}, home, tmp_path).forward_reason
    # --config-file and --config TEXT (JSON or TOML)
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"default_model": "a", "models": {"a": {"provider": "p", "model": "m",
                                                                         "max_context_size": 1}},
                                 "providers": {"p": {"type": "openai_responses", "base_url": "http://127.0.0.1:9400/v1",
                                                     "api_key": "k"}}}))
    assert make_plan(["kimi", "--config-file", str(other)], {}, home, tmp_path).upstreams["openai"].url == \
        "http://127.0.0.1:9400/v1"
    assert make_plan(["kimi", "--config", other.read_text()], {}, home, tmp_path).upstreams["openai"].source == \
        "kimi --config providers.p.base_url"
    # an anthropic provider has no variable: forward mode, and plain HTTP is refused before starting
    plan = make_plan(["kimi", "-m", "c"], {}, home, tmp_path)
    assert plan.forward_reason and "type 'anthropic'" in plan.forward_reason and plan.cannot
    # a plugin Kimi feeds the base URL to would keep the proxy's address: forward mode
    plugin = home / ".kimi" / "plugins" / "p1"
    plugin.mkdir(parents=True)
    (plugin / "plugin.json").write_text(json.dumps({"name": "p1", "config_file": "c.json",
                                                    "inject": {"llm.url": "base_url"}}))
    plan = make_plan(["kimi", "-p", "hi"], {}, home, tmp_path)
    assert "~/.kimi/plugins/p1" in plan.forward_reason and plan.cannot  # its upstream is plain HTTP


def test_llm_user_dir_copy_and_links(tmp_path):
    d = tmp_path / "llmdir"
    d.mkdir()
    (d / "extra-openai-models.yaml").write_text("- model_id: a\n  model_name: m\n  api_base: http://127.0.0.1:9100/v1\n")
    (d / "keys.json").write_text("{}")
    plan, r = plan_and_redirect(["llm", "-m", "a", "hi"], {"LLM_USER_PATH": str(d)}, tmp_path, tmp_path)
    assert list(plan.upstreams) == ["openai"] and plan.upstreams["openai"].url == "http://127.0.0.1:9100/v1"
    assert "OPENAI_BASE_URL" not in r.env and r.env["LLM_USER_PATH"] == r.dir_placeholder
    files = {f.name: f for f in r.files}
    assert json.loads(files["extra-openai-models.yaml"].text)[0]["api_base"] == f"{PROXY}/openai"
    assert files["keys.json"].link == str(d / "keys.json") and files["logs.db"].link == str(d / "logs.db")
    plan = make_plan(["llm", "hi"], {"OPENAI_BASE_URL": "http://127.0.0.1:9300/v1", "LLM_USER_PATH": str(d)},
                     tmp_path, tmp_path)
    assert sorted(u.url for u in plan.upstreams.values()) == ["http://127.0.0.1:9100/v1", "http://127.0.0.1:9300/v1"]


def test_cn_config_flag_is_replaced_by_a_copy(tmp_path):
    conf = tmp_path / "my.yaml"
    conf.write_text("name: x\nmodels:\n  - name: a\n    provider: openai\n    model: m\n    apiBase: http://127.0.0.1:9100/v1/\n"
                    "  - name: b\n    provider: anthropic\n    model: c\n    apiBase: https://gw.example/v1/\n"
                    "  - name: c\n    provider: openai\n    model: m\n")
    plan, r = plan_and_redirect(["cn", "--config", str(conf), "-p", "hi"], {}, tmp_path, tmp_path)
    assert {u.url for u in plan.upstreams.values()} == {"http://127.0.0.1:9100/v1/", "https://gw.example"}
    assert r.argv == ["cn", "--config", r.dir_placeholder + "/cn-config.yaml", "-p", "hi"]
    models = json.loads(r.files[0].text)["models"]
    assert [m.get("apiBase") for m in models] == [f"{PROXY}/openai/", f"{PROXY}/anthropic/v1/", None]
    assert make_plan(["cn", "--config", "acme/assistant"], {}, tmp_path, tmp_path).forward_reason


def test_opencode_ollama_providers(tmp_path):
    """opencode's Ollama recipe (an @ai-sdk/openai-compatible provider at …:11434/v1) is an OpenAI base URL; the
    AI SDK's Ollama providers (npm ollama-ai-provider, -v2: native API, baseURL the server's /api, default
    http://127.0.0.1:11434/api) are routed to that /api as it is and given the route's root, no /v1 added."""
    home = tmp_path / "home"
    (home / ".config" / "opencode").mkdir(parents=True)
    (home / ".config" / "opencode" / "opencode.json").write_text(json.dumps({"provider": {
        "ollama": {"npm": "@ai-sdk/openai-compatible", "options": {"baseURL": "http://localhost:11434/v1"}},
        "native": {"npm": "ollama-ai-provider-v2", "options": {"baseURL": "http://10.0.0.5:11434/api"}},
        "plain": {"npm": "ollama-ai-provider"}}}))
    plan, r = plan_and_redirect(["opencode", "run", "hi"], {}, home, tmp_path)
    assert not plan.forward_reason
    assert sorted((u.family, u.url) for u in plan.upstreams.values()) == [
        ("ollama", "http://10.0.0.5:11434/api"), ("ollama", "http://127.0.0.1:11434/api"),
        ("openai", "http://localhost:11434/v1")]
    prov = json.loads(r.env["OPENCODE_CONFIG_CONTENT"])["provider"]
    by_url = {u.url: n for n, u in plan.upstreams.items()}
    assert prov["ollama"]["options"]["baseURL"] == f"{PROXY}/{by_url['http://localhost:11434/v1']}"
    assert prov["native"]["options"]["baseURL"] == f"{PROXY}/{by_url['http://10.0.0.5:11434/api']}"
    assert prov["plain"]["options"]["baseURL"] == f"{PROXY}/{by_url['http://127.0.0.1:11434/api']}"

def test_cn_ollama_models_go_to_a_route_to_the_server_s_root(tmp_path):
    """cn's ollama provider is Ollama's OpenAI-compatible API: apiBase (default http://localhost:11434/) plus the
    "v1/" cn appends unless it is there. The route is the server's root and the copy's apiBase the route's root,
    so cn's own v1/ makes /v1/chat/completions upstream, once; a model naming no apiBase is redirected too."""
    conf = tmp_path / "my.yaml"
    conf.write_text("name: x\nmodels:\n  - name: a\n    provider: ollama\n    model: llama3.2\n"
                    "  - name: b\n    provider: ollama\n    model: qwen3\n    apiBase: http://10.0.0.5:11434/v1/\n"
                    "  - name: c\n    provider: ollama\n    model: qwen3\n    apiBase: http://10.0.0.5:11434\n")
    plan, r = plan_and_redirect(["cn", "--config", str(conf), "-p", "hi"], {}, tmp_path, tmp_path)
    assert not plan.forward_reason
    assert {n: (u.family, u.url) for n, u in plan.upstreams.items()} == {
        "ollama": ("ollama", "http://localhost:11434"), "ollama-2": ("ollama", "http://10.0.0.5:11434")}
    assert plan.upstreams["ollama"].source == "cn's default for the ollama provider of 'a'"
    models = json.loads(r.files[0].text)["models"]
    assert [m.get("apiBase") for m in models] == [f"{PROXY}/ollama/", f"{PROXY}/ollama-2/", f"{PROXY}/ollama-2/"]

def test_auth_rejected_fix_names_where_the_client_keeps_its_key(tmp_path):
    """The upstream rejects the key: the summary's fix says where this client's key comes from."""
    script = tmp_path / "child.py"
    script.write_text("import openai\ntry:\n    openai.OpenAI(max_retries=0).chat.completions.create(model='fault-auth', "
                      "messages=[{'role': 'user', 'content': 'hi'}])\nexcept openai.AuthenticationError:\n    pass\n")
    with SimServer(SimConfig(**FAST)) as sim:
        env = base_env(tmp_path, OPENAI_BASE_URL=sim.url + "/v1", OPENAI_API_KEY="sk-test-123456789012345678901234")
        r = ft_run(tmp_path / "ft.db", [sys.executable, str(script)], env)
    assert r.returncode == 0, r.stderr
    assert [x["status"] for x in rows(tmp_path / "ft.db")] == [401]
    assert "auth.rejected" in r.stderr
    assert "the command takes its key from its own configuration (OPENAI_API_KEY" in r.stderr


def test_print_env_describes_a_private_copy_without_printing_it(tmp_path):
    env = base_env(tmp_path)
    d = Path(env["HOME"]) / ".continue"
    d.mkdir()
    (d / "config.yaml").write_text("models:\n  - name: a\n    provider: openai\n    apiKey: sk-secret-key-1234567890\n"
                                   "    apiBase: http://127.0.0.1:9100/v1/\n")
    r = subprocess.run([str(Path(sys.executable).parent / "firsttoken"), "run", "--print-env", "--db",
                        str(tmp_path / "x.db"), "--", "cn", "-p", "hi"], env=env, capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 0, r.stderr
    assert "sk-secret" not in r.stdout
    assert "#   cn --config '<a private directory firsttoken run creates>/cn-config.yaml' -p hi" in r.stdout
    assert "firsttoken proxy --upstream openai=http://127.0.0.1:9100/v1/" in r.stdout


def test_print_env_masks_a_key_in_inline_config(tmp_path):
    """opencode's redirect carries the user's own OPENCODE_CONFIG_CONTENT: `--print-env` masks its keys."""
    inline = {"provider": {"gw": {"npm": "@ai-sdk/openai-compatible",
                                  "options": {"baseURL": "http://127.0.0.1:9100/v1",
                                              "apiKey": "sk-inline-secret-1234567890abcdef"}}}}
    env = base_env(tmp_path, OPENCODE_CONFIG_CONTENT=json.dumps(inline))
    r = subprocess.run([str(Path(sys.executable).parent / "firsttoken"), "run", "--print-env", "--db",
                        str(tmp_path / "x.db"), "--", "opencode", "run", "hi"], env=env, capture_output=True,
                       text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    assert "sk-inline-secret" not in r.stdout and "[REDACTED]" in r.stdout
    assert "export OPENCODE_CONFIG_CONTENT=" in r.stdout and '"baseURL": "http://127.0.0.1:8787/openai"' in r.stdout


def test_codex_oss_naming_no_local_provider_is_refused_before_starting(tmp_path):
    """`codex --oss` with no --local-provider and no oss_provider: Codex asks which local server (Ollama's port or
    LM Studio's), so `run` cannot tell where it goes and says so before starting anything. (A named one goes
    through the proxy by CODEX_OSS_BASE_URL: tests/test_run_ollama.py.)"""
    (tmp_path / ".codex").mkdir()
    (tmp_path / ".codex" / "config.toml").write_text('model = "gpt-oss:20b"\n')
    plan = make_plan(["codex", "--oss", "exec", "hi"], {}, tmp_path, tmp_path)
    assert plan.cannot and "--local-provider" in plan.cannot and plan.upstreams == {}
    env = base_env(tmp_path, HOME=str(tmp_path))
    r = subprocess.run([str(Path(sys.executable).parent / "firsttoken"), "run", "--db", str(tmp_path / "x.db"), "--",
                        "codex", "--oss", "exec", "hi"], env=env, capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "cannot record Codex here" in r.stderr and "CODEX_OSS_BASE_URL" in r.stderr
    assert not (tmp_path / "x.db").exists()


def fake_npm(root: Path, package: str, version: str, bin_name: str) -> Path:
    """An npm install of ``package`` at ``version`` (its package.json and bin, linked from .bin): what `run`
    reads a client's version from, without running anything. Returns the .bin directory."""
    pkg = root / "node_modules" / package
    (pkg / "bin").mkdir(parents=True)
    (pkg / "package.json").write_text(json.dumps({"name": package, "version": version}))
    (pkg / "bin" / f"{bin_name}.js").write_text("#!/usr/bin/env node\n")
    (pkg / "bin" / f"{bin_name}.js").chmod(0o755)
    (root / "node_modules" / ".bin").mkdir(exist_ok=True)
    (root / "node_modules" / ".bin" / bin_name).symlink_to(f"../{package}/bin/{bin_name}.js")
    return root / "node_modules" / ".bin"


def fake_codex(root: Path, version: str) -> Path:
    return fake_npm(root, "@openai/codex", version, "codex")


@pytest.mark.parametrize("version, goes", [
    ("0.171.0", "https://api.openai.com/v1"),  # ignores OPENAI_BASE_URL (issue 29)
    ("0.120.0", "https://api.openai.com/v1"),
    ("0.118.0", "https://gw.example.com/v1"),  # still reads it (deprecated)
    ("0.98.0", "https://gw.example.com/v1"),
    (None, None),  # no package.json to read: forward mode, which keeps either destination
])
def test_codex_reads_openai_base_url_only_where_its_version_does(tmp_path, version, goes):
    bin_dir = fake_codex(tmp_path / "inst", version) if version else tmp_path / "nobin"
    env = {"OPENAI_BASE_URL": "https://gw.example.com/v1", "PATH": str(bin_dir)}
    for argv in (["codex", "exec", "hi"], [str(bin_dir / "codex"), "exec", "hi"],
                 ["node", str(bin_dir.parent / "@openai" / "codex" / "bin" / "codex.js"), "exec", "hi"]):
        plan = make_plan(argv, env, tmp_path, tmp_path)
        if goes is None:
            assert plan.forward_reason and "version is unknown" in plan.forward_reason, argv
        else:
            assert plan.forward_reason is None and plan.upstreams["openai"].url == goes, argv
    # config.toml's openai_base_url, a -c override and a profile beat the variable whatever the version
    (tmp_path / ".codex").mkdir()
    (tmp_path / ".codex" / "config.toml").write_text('openai_base_url = "https://conf.example.com/v1"\n'
                                                     '[profiles.p1]\nopenai_base_url = "https://prof.example.com/v1"\n')
    assert make_plan(["codex", "exec", "hi"], env, tmp_path, tmp_path).upstreams["openai"].url == \
        "https://conf.example.com/v1"
    assert make_plan(["codex", "-p", "p1", "exec", "hi"], env, tmp_path, tmp_path).upstreams["openai"].url == \
        "https://prof.example.com/v1"
    (tmp_path / ".codex" / "p2.config.toml").write_text('openai_base_url = "https://file.example.com/v1"\n')
    plan = make_plan(["codex", "--profile", "p2", "exec", "hi"], env, tmp_path, tmp_path)  # 0.171's profile files
    assert (plan.upstreams["openai"].url, plan.upstreams["openai"].source) == ("https://file.example.com/v1",
                                                                               "~/.codex/p2.config.toml openai_base_url")
    plan, r = plan_and_redirect(["codex", "exec", "-c", 'openai_base_url="https://flag.example.com/v1"', "hi"], env,
                                tmp_path, tmp_path)
    assert plan.upstreams["openai"].url == "https://flag.example.com/v1" and plan.forward_reason is None
    assert r.argv == ["codex", "-c", 'openai_base_url="http://127.0.0.1:8787/openai"', "exec", "hi"]  # theirs replaced


def test_codex_version_through_launchers(tmp_path):
    from firsttoken.cli.run.clients import installed
    from firsttoken.cli.run.clients.base import Plan

    bin_dir = fake_codex(tmp_path, "0.171.0-linux-x64")
    pkgs = ("@openai/codex",)

    def v(argv, at):
        return installed.npm_version(Plan(argv, "codex", {}, at), {"PATH": str(bin_dir)}, tmp_path, pkgs)

    assert v(["codex"], 1) == (0, 171, 0)
    assert v(["npx", "-y", "@openai/codex@0.118.0"], 3) == (0, 118, 0)
    assert v(["npx", "-y", "@openai/codex@latest"], 3) is None and v(["npx", "codex"], 2) is None
    assert v(["node", "node_modules/@openai/codex/bin/codex.js"], 2) == (0, 171, 0)
    assert installed.parse("v1.2") == (1, 2) and installed.parse("next") is None
