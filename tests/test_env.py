"""`firsttoken env`: the printed settings, proven by running the official SDKs with them
(a subprocess python with exactly that environment) through a real proxy to the simulator."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import rows

from firsttoken.cli.env import command as E
from firsttoken.cli.proxy.server import ProxyServer


def run_env(*args: str) -> tuple[str, str]:
    r = CliRunner().invoke(E.env, list(args), catch_exceptions=False)
    assert r.exit_code == 0, r.output
    return r.stdout, r.stderr


def parse_exports(text: str) -> dict[str, str]:
    """What `eval "$(firsttoken env … --shell)"` would set (only export lines and comments allowed)."""
    out = {}
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        assert line.startswith("export "), f"not eval-safe: {line!r}"
        (assignment,) = shlex.split(line[len("export "):])
        k, _, v = assignment.partition("=")
        out[k] = v
    return out


def clean_env(**extra: str) -> dict[str, str]:
    keep = {k: v for k, v in os.environ.items()
            if not k.startswith(("OPENAI_", "ANTHROPIC_")) and k.lower() not in ("http_proxy", "https_proxy", "all_proxy")}
    keep["NO_PROXY"] = "127.0.0.1,localhost"
    keep.update(extra)
    return keep


def run_sdk(code: str, env: dict[str, str]) -> str:
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout


OPENAI_CHAT = """
import openai
c = openai.OpenAI(max_retries=0)
r = c.chat.completions.create(model="sim-1", messages=[{"role": "user", "content": "hello"}])
print(r.choices[0].message.content)
"""
ANTHROPIC_STREAM = """
import anthropic
c = anthropic.Anthropic(max_retries=0)
with c.messages.stream(model="claude-sim", max_tokens=30, messages=[{"role": "user", "content": "hi"}]) as s:
    print(s.get_final_text())
"""


@pytest.fixture
def routed(sim, db_path):
    """A proxy with two named routes: `oai` already holds /v1, `anth` is at the upstream root."""
    p = ProxyServer([f"oai={sim.url}/v1", f"anth={sim.url}"], str(db_path), port=0)
    p.start()
    yield p
    p.stop()


@pytest.mark.slow  # real processes and paced requests: seconds
def test_openai_sdk_with_printed_settings_default_route(proxy, db_path, sim):
    out, _ = run_env("openai", "--shell", "--port", str(proxy.bound_port), "--upstream", sim.url)
    env = parse_exports(out)
    assert env == {"OPENAI_BASE_URL": proxy.url + "/v1"}  # the upstream has no /v1: the base URL needs it
    text = run_sdk(OPENAI_CHAT, clean_env(**env, OPENAI_API_KEY="sk-test-env-000000000000000000"))
    assert text.strip()
    proxy.flush()
    (row,) = rows(db_path)
    assert row["path"] == "/v1/chat/completions" and row["status"] == 200 and row["route"] == "default"


@pytest.mark.slow  # real processes and paced requests: seconds
def test_sdks_with_printed_settings_named_routes(routed, db_path):
    port = str(routed.bound_port)
    ups = ["--upstream", routed.upstreams[0], "--upstream", routed.upstreams[1]]
    # openai: the route's upstream path ends in /v1 -> base URL without it
    env = parse_exports(run_env("openai", "--shell", "--port", port, *ups)[0])
    assert env["OPENAI_BASE_URL"] == routed.url + "/oai"
    assert run_sdk(OPENAI_CHAT, clean_env(**env, OPENAI_API_KEY="sk-test-env-000000000000000000")).strip()
    # anthropic SDK and Claude Code: the route is picked by its name, never with /v1
    for client in ("anthropic", "claude-code"):
        env = parse_exports(run_env(client, "--shell", "--port", port, *ups)[0])
        assert env["ANTHROPIC_BASE_URL"] == routed.url + "/anth"
        assert run_sdk(ANTHROPIC_STREAM, clean_env(**env, ANTHROPIC_API_KEY="sk-ant-test-env-00000000000000")).strip()
    routed.flush()
    rs = rows(db_path)
    assert [(r["route"], r["path"], r["upstream_url"].split("/", 3)[3], r["status"]) for r in rs] == [
        ("oai", "/oai/chat/completions", "v1/chat/completions", 200),
        ("anth", "/anth/v1/messages", "v1/messages", 200),
        ("anth", "/anth/v1/messages", "v1/messages", 200),
    ]


def test_codex_config_block_drives_the_responses_api(routed, db_path, tmp_path):
    out, _ = run_env("codex", "--port", str(routed.bound_port), "--route", "oai", "--model", "sim-1",
                     "--upstream", routed.upstreams[0], "--upstream", routed.upstreams[1])
    toml_text = out.split("~/.codex/config.toml:\n", 1)[1].split("\n\n- ", 1)[0]
    cfg = tomllib.loads("\n".join(line[2:] for line in toml_text.splitlines()))
    assert cfg["model_provider"] == "firsttoken" and cfg["model"] == "sim-1"
    prov = cfg["model_providers"]["firsttoken"]
    assert prov == {"name": "firsttoken", "base_url": routed.url + "/oai", "env_key": "OPENAI_API_KEY",
                    "wire_api": "responses"}
    # what Codex does with it: POST {base_url}/responses with the key from env_key
    code = f"""
import os, openai
c = openai.OpenAI(base_url={prov['base_url']!r}, api_key=os.environ[{prov['env_key']!r}], max_retries=0)
r = c.responses.create(model={cfg['model']!r}, input="hi")
print(r.output_text)
"""
    assert run_sdk(code, clean_env(OPENAI_API_KEY="sk-test-codex-0000000000000000")).strip()
    routed.flush()
    (row,) = rows(db_path)
    assert row["api"] == "openai.responses" and row["upstream_url"].endswith("/v1/responses") and row["status"] == 200


def test_registry_lets_env_find_the_running_proxy_whatever_its_database(routed, tmp_path, proxy_registry):
    db = tmp_path / "state" / "ft.db"
    path = E.write_state(routed)
    assert path.parent == proxy_registry == E.registry_dir()
    assert oct(path.stat().st_mode & 0o777) == "0o600" and oct(path.parent.stat().st_mode & 0o777) == "0o700"
    entry = json.loads(path.read_text())
    assert entry["port"] == routed.bound_port and entry["routes"] == routed.upstreams and entry["pid"] == os.getpid()
    # found with the proxy's database, another one, or none given
    for db_args in (["--db", str(routed.db)], ["--db", str(db)], []):
        env = parse_exports(run_env("openai", "--shell", *db_args)[0])
        assert env["OPENAI_BASE_URL"] == routed.url + "/oai", db_args
    env = parse_exports(run_env("claude-code", "--shell")[0])
    assert env["ANTHROPIC_BASE_URL"] == routed.url + "/anth"
    # a stale entry (dead pid) is ignored and removed; clear_state removes ours
    stale = proxy_registry / "4206969-1.json"
    stale.write_text(json.dumps({**entry, "pid": 2**22 + 12345, "port": 1}))
    assert [s["port"] for s in E.read_states(db)] == [routed.bound_port]
    assert not stale.exists()
    E.clear_state(routed)
    assert not path.exists()
    # nothing running: defaults, with a note on stderr (stdout stays eval-able)
    out, err = run_env("openai", "--shell", "--db", str(db))
    assert parse_exports(out) == {"OPENAI_BASE_URL": "http://127.0.0.1:8787/v1"}
    assert "no running proxy found" in err


def test_several_routes_need_a_choice_when_ambiguous(tmp_path):
    t = E.resolve_target(upstreams=["a=https://x.example/v1", "b=https://y.example"], states=[])
    with pytest.raises(E.EnvError, match="--route"):
        E.plan_for("openai", t, env={}, home=tmp_path)
    with pytest.raises(E.EnvError, match="no route named 'zz'"):
        E.plan_for("openai", t, route_name="zz", env={}, home=tmp_path)
    assert E.plan_for("openai", t, route_name="b", env={}, home=tmp_path).exports == [
        ("OPENAI_BASE_URL", "http://127.0.0.1:8787/b/v1")]
    r = CliRunner().invoke(E.env, ["openai", "--upstream", "a=https://x.example/v1", "--upstream", "b=https://y.example"])
    assert r.exit_code != 0 and "--route" in r.output


@pytest.mark.parametrize("upstream,base", [
    ("https://api.openai.com", "http://127.0.0.1:8787/v1"),
    ("https://api.openai.com/v1", "http://127.0.0.1:8787"),
    ("https://open.bigmodel.cn/api/paas/v4", "http://127.0.0.1:8787"),
    ("https://generativelanguage.googleapis.com/v1beta/openai", "http://127.0.0.1:8787"),
    ("https://gateway.example/api", "http://127.0.0.1:8787/v1"),
    ("ds=https://api.deepseek.com", "http://127.0.0.1:8787/ds/v1"),
])
def test_openai_base_url_rule(upstream, base, tmp_path):
    t = E.resolve_target(upstreams=[upstream], states=[])
    assert dict(E.plan_for("openai", t, env={"OPENAI_API_KEY": "k"}, home=tmp_path).exports)["OPENAI_BASE_URL"] == base


def test_anthropic_upstream_ending_in_v1_is_flagged(tmp_path):
    t = E.resolve_target(upstreams=["https://api.anthropic.com/v1"], states=[])
    plan = E.plan_for("claude-code", t, env={}, home=tmp_path)
    assert dict(plan.exports)["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:8787"
    assert any("/v1/v1/messages" in w and "--upstream https://api.anthropic.com " in w for w in plan.warnings)


def test_claude_code_settings_block_auth_and_conflict(tmp_path):
    home = tmp_path
    t = E.resolve_target(upstreams=["ds=https://api.deepseek.com/anthropic"], states=[], port=9000)
    plan = E.plan_for("claude-code", t, env={}, home=home, model="deepseek-chat")
    where, text = plan.blocks[0]
    assert "settings.json" in where
    block = json.loads(text)
    assert block == {"env": {"ANTHROPIC_BASE_URL": "http://127.0.0.1:9000/ds",
                             "ANTHROPIC_AUTH_TOKEN": "<your api.deepseek.com key>",
                             "ANTHROPIC_MODEL": "deepseek-chat"}}
    shell = E.render(plan, "shell")
    assert parse_exports(shell) == {"ANTHROPIC_BASE_URL": "http://127.0.0.1:9000/ds", "ANTHROPIC_MODEL": "deepseek-chat"}
    assert "# export ANTHROPIC_AUTH_TOKEN=" in shell  # a placeholder never becomes a real assignment
    assert not plan.warnings

    # Anthropic itself: no token placeholder; the auth conflict is explained
    t = E.resolve_target(upstreams=["https://api.anthropic.com"], states=[])
    assert E.plan_for("claude-code", t, env={}, home=home).warnings == []
    (home / ".claude").mkdir()
    (home / ".claude" / ".credentials.json").write_text("{}")
    plan = E.plan_for("claude-code", t, env={"ANTHROPIC_API_KEY": "sk-ant-xxxxxxxxxxxxxxxx"}, home=home)
    assert json.loads(plan.blocks[0][1]) == {"env": {"ANTHROPIC_BASE_URL": "http://127.0.0.1:8787"}}
    assert any(w.startswith("auth conflict") and "claude.ai login" in w for w in plan.warnings)
    (home / ".claude" / ".credentials.json").unlink()
    plan = E.plan_for("claude-code", t, env={"ANTHROPIC_API_KEY": "sk-ant-x", "ANTHROPIC_AUTH_TOKEN": "zqx-secret-tok"}, home=home)
    assert any("ANTHROPIC_AUTH_TOKEN" in w for w in plan.warnings)
    for secret in ("sk-ant-xxxxxxxxxxxxxxxx", "sk-ant-x", "zqx-secret-tok"):
        assert secret not in E.render(plan) and secret not in E.render(plan, "shell")


def test_powershell_and_cline_and_curl(tmp_path):
    t = E.resolve_target(upstreams=["https://api.openai.com"], states=[])
    ps = E.render(E.plan_for("openai", t, env={"OPENAI_API_KEY": "k"}, home=tmp_path), "powershell")
    assert '$env:OPENAI_BASE_URL = "http://127.0.0.1:8787/v1"' in ps.splitlines()
    assert all(line.startswith(("#", "$env:")) for line in ps.splitlines())
    cline = E.render(E.plan_for("cline", t, env={}, home=tmp_path))
    assert "OpenAI Compatible" in cline and "Base URL: http://127.0.0.1:8787/v1" in cline and "Anthropic" not in cline
    sh = E.render(E.plan_for("cline", t, env={}, home=tmp_path), "shell")
    assert parse_exports(sh) == {}  # nothing to eval, only comments
    t2 = E.resolve_target(upstreams=[], states=[])  # routes unknown: both APIs shown
    curl = E.plan_for("curl", t2, env={}, home=tmp_path)
    assert dict(curl.exports) == {"OPENAI_BASE_URL": "http://127.0.0.1:8787/v1",
                                  "ANTHROPIC_BASE_URL": "http://127.0.0.1:8787"}
    assert '"$ANTHROPIC_BASE_URL/v1/messages"' in curl.blocks[0][1]


def test_forward_settings(tmp_path):
    conf = tmp_path / "mitm"
    conf.mkdir()
    (conf / "mitmproxy-ca-cert.pem").write_text("-----BEGIN CERTIFICATE-----\nX\n-----END CERTIFICATE-----\n")
    t = E.Target("http://127.0.0.1:8080", [], "test", forward=True, confdir=str(conf))
    env = dict(E.plan_for("openai", t, env={}, home=tmp_path).exports)
    assert env["HTTPS_PROXY"] == "http://127.0.0.1:8080"
    assert env["SSL_CERT_FILE"] == str(conf / "firsttoken-ca-bundle.pem") and Path(env["SSL_CERT_FILE"]).exists()
    assert env["NO_PROXY"] == "127.0.0.1,localhost"
    cc = E.plan_for("claude-code", t, env={"NO_PROXY": "localhost"}, home=tmp_path)
    assert dict(cc.exports) == {"HTTPS_PROXY": "http://127.0.0.1:8080",
                                "NODE_EXTRA_CA_CERTS": str(conf / "mitmproxy-ca-cert.pem")}
    # a company HTTP_PROXY would carry an http:// base URL around firsttoken: it points at firsttoken too
    corp = E.plan_for("openai", t, env={"HTTP_PROXY": "http://corp:3128", "NO_PROXY": "localhost"}, home=tmp_path)
    assert dict(corp.exports)["HTTP_PROXY"] == "http://127.0.0.1:8080" and "HTTP_PROXY" in " ".join(corp.notes)
    assert "HTTP_PROXY" not in dict(E.plan_for("openai", t, env={}, home=tmp_path).exports)


def test_env_help_lists_every_client_of_the_registry():
    """issue 36 item 14: `env --help` left out gemini-cli and google-genai; its list is the registry's."""
    import subprocess
    import sys

    from firsttoken.cli.run.clients import registry

    r = subprocess.run([sys.executable, "-c", "from firsttoken.cli.main import cli; cli()", "env", "--help"],
                       capture_output=True, text=True, timeout=60, env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"})
    assert r.returncode == 0, r.stderr
    text = " ".join(r.stdout.split())
    for name in registry.client_names():
        assert name in text, (name, text)
    assert "gemini-cli" in text and "google-genai" in text
