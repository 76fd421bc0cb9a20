"""`firsttoken run -- CLIENT` with the real clients it has adapters for (cli/run/clients/), each set up
the way its own docs say (a flag, a config file or the environment) against a simulator that logs where
every request arrived, with a decoy simulator where a wrong guess would go. Per client: every request
that arrived is recorded, every one reached the configured upstream (none the decoy), no warning
appears, and the user's own files are unchanged. All offline: telemetry and update checks off.

The clients are installed by .ci/run: npm (opencode-ai, @qwen-code/qwen-code, @continuedev/cli,
@kilocode/cli) into .ci/node; pip (aider-chat, llm, kimi-cli) each into its own venv (.ci/aider, .ci/llm,
.ci/kimi); CLIENT_PREFIX and CLIENT_VENVS try other installs (tests/runkit.py). With CI set, a missing
one fails its test.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from conftest import FAST, rows
from ollama_upstream import REPLY, OllamaUpstream
from runkit import KEY, NODE_BIN, SIM_TEXT, base_env, find_client, ft_run, snapshot, venv_bin

from firsttoken.cli.simulate.config import SimConfig
from firsttoken.cli.simulate.server import SimServer

pytestmark = pytest.mark.slow

@pytest.fixture
def servers():
    with SimServer(SimConfig(**FAST)) as upstream, SimServer(SimConfig(**FAST)) as decoy:
        yield upstream, decoy


def check(r, db, upstream: SimServer, decoy: SimServer, *, tolerated: tuple[str, ...] = ()) -> list[dict]:
    """Every request that arrived is recorded and reached the configured upstream; no warning."""
    assert r.returncode == 0, r.stdout + r.stderr
    assert SIM_TEXT in r.stdout, r.stdout + r.stderr
    assert decoy.arrivals == [], decoy.arrivals
    rs = rows(db)
    llm_calls = [a for a in upstream.arrivals if a.method == "POST"]
    assert llm_calls and len(rs) == len(upstream.arrivals), (upstream.arrivals, [x["path"] for x in rs])
    assert all(x["upstream_url"].startswith(upstream.url + "/") and x["status"] == 200 for x in rs), rs
    found = {code for _, code in re.findall(r"^  (warn|error) ([\w.]+)", r.stderr, re.M)}
    if "proxy.saturated" in found:  # this machine's load (2 cores, many processes), measured and said as such:
        found -= {"proxy.saturated", "stream.buffered"}  # starved, the proxy and simulator deliver late bursts
    assert found - set(tolerated) == set(), r.stderr
    return rs


# -- aider (pip aider-chat, in .ci/aider) ----------------------------------------------------------

def aider_env(tmp_path):
    env = base_env(tmp_path, LITELLM_LOCAL_MODEL_COST_MAP="True")
    caches = Path(env["HOME"]) / ".aider" / "caches"  # aider's model-price cache, fresh: it fetches nothing
    caches.mkdir(parents=True)
    (caches / "model_prices_and_context_window.json").write_text("{}")
    return env


AIDER_ARGS = ["--message", "Say hi", "--no-git", "--yes-always", "--no-check-update", "--analytics-disable",
              "--no-show-model-warnings", "--no-pretty", "--model", "openai/gpt-4o-mini"]


@pytest.mark.parametrize("how", ["flag", "config"])
def test_aider(servers, tmp_path, how):
    """The issue's case: aider with --openai-api-base (or openai-api-base in .aider.conf.yml) and no
    OPENAI_BASE_URL; litellm reads OPENAI_BASE_URL first, so setting it by guess sent aider elsewhere."""
    upstream, decoy = servers
    aider = find_client("aider", venv_bin("aider"))
    env = aider_env(tmp_path)
    argv = [aider, *AIDER_ARGS, "--openai-api-key", KEY]
    conf = tmp_path / ".aider.conf.yml"
    if how == "flag":
        argv += ["--openai-api-base", f"{upstream.url}/v1"]
    else:
        conf.write_text(f"openai-api-base: {upstream.url}/v1\n")
    before = snapshot(conf)
    db = tmp_path / "ft.db"
    r = ft_run(db, argv, env, timeout=180, cwd=tmp_path)
    check(r, db, upstream, decoy)
    assert "via: aider --set-env OPENAI_BASE_URL" in r.stderr
    assert snapshot(conf) == before


# -- llm (pip llm, in .ci/llm) ---------------------------------------------------------------------

@pytest.mark.parametrize("how", ["default dir", "LLM_USER_PATH"])
def test_llm(servers, tmp_path, how):
    upstream, decoy = servers
    llm = find_client("llm", venv_bin("llm"))
    env = base_env(tmp_path)
    d = Path(env["HOME"]) / ".config" / "io.datasette.llm"
    if how == "LLM_USER_PATH":
        d = tmp_path / "llm-dir"
        env["LLM_USER_PATH"] = str(d)
    d.mkdir(parents=True)
    (d / "extra-openai-models.yaml").write_text(f"- model_id: local\n  model_name: gpt-4o-mini\n"
                                                f"  api_base: \"{upstream.url}/v1\"\n")
    db = tmp_path / "ft.db"
    before = snapshot(d / "extra-openai-models.yaml")
    r = ft_run(db, [llm, "-m", "local", "Say hi"], env, timeout=120, cwd=tmp_path)
    check(r, db, upstream, decoy)
    assert "via: LLM_USER_PATH = a private directory" in r.stderr
    assert snapshot(d / "extra-openai-models.yaml") == before
    assert sorted(p.name for p in d.iterdir()) == ["extra-openai-models.yaml", "logs.db"]  # llm logged where it does


# -- Qwen Code (npm @qwen-code/qwen-code, in .ci/node) ---------------------------------------------

QWEN_QUIET = {"privacy": {"usageStatisticsEnabled": False}, "telemetry": {"enabled": False}}


@pytest.mark.parametrize("how", ["settings.json", "flag"])
def test_qwen_code(servers, tmp_path, how):
    """modelProviders' baseUrl in ~/.qwen/settings.json (which beats OPENAI_BASE_URL, set to the decoy), or
    --openai-base-url (which beats it too)."""
    upstream, decoy = servers
    qwen = find_client("qwen", NODE_BIN)
    env = base_env(tmp_path, OPENAI_BASE_URL=f"{decoy.url}/v1", LOCAL_KEY=KEY, OPENAI_API_KEY=KEY)
    settings = Path(env["HOME"]) / ".qwen" / "settings.json"
    settings.parent.mkdir()
    doc = {**QWEN_QUIET, "security": {"auth": {"selectedType": "openai"}}, "model": {"name": "gpt-4o-mini"}}
    argv = [qwen, "-p", "Say hi"]
    if how == "settings.json":
        doc["modelProviders"] = {"openai": [{"id": "gpt-4o-mini", "name": "local", "baseUrl": f"{upstream.url}/v1",
                                             "envKey": "LOCAL_KEY"}]}
    else:
        argv += ["--openai-base-url", f"{upstream.url}/v1"]
    settings.write_text(json.dumps(doc, indent=2))
    db = tmp_path / "ft.db"
    r = ft_run(db, argv, env, timeout=180, cwd=tmp_path)
    # Qwen's memory call after each answer is a side call (its own system prompt): never a turn, never a cache.miss
    rs = check(r, db, upstream, decoy)
    assert not any(x["request_kind"] == "main" and (x["turn"] or 0) > 1 for x in rs), rs
    after = json.loads(settings.read_text())
    after.pop("$version", None)  # Qwen Code's own settings migration (it writes this without firsttoken too)
    assert after == doc


# -- opencode (npm opencode-ai, in .ci/node) -------------------------------------------------------

OPENCODE_QUIET = {"OPENCODE_DISABLE_MODELS_FETCH": "1", "OPENCODE_DISABLE_AUTOUPDATE": "1",
                  "OPENCODE_DISABLE_LSP_DOWNLOAD": "1", "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1"}


@pytest.mark.parametrize("how", ["global", "OPENCODE_CONFIG"])
def test_opencode(servers, tmp_path, how):
    upstream, decoy = servers
    opencode = find_client("opencode", NODE_BIN)
    env = base_env(tmp_path, OPENAI_BASE_URL=f"{decoy.url}/v1", **OPENCODE_QUIET)
    conf = {"$schema": "https://opencode.ai/config.json", "autoupdate": False, "share": "disabled",
            "model": "local/gpt-4o-mini",
            "provider": {"local": {"npm": "@ai-sdk/openai-compatible", "name": "Local",
                                   "options": {"baseURL": f"{upstream.url}/v1", "apiKey": KEY},
                                   "models": {"gpt-4o-mini": {"name": "gpt-4o-mini"}}}}}
    path = Path(env["HOME"]) / ".config" / "opencode" / "opencode.json"
    if how == "OPENCODE_CONFIG":
        path = tmp_path / "my-opencode.json"
        env["OPENCODE_CONFIG"] = str(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(conf, indent=2))
    before = snapshot(path)
    db = tmp_path / "ft.db"
    r = ft_run(db, [opencode, "run", "Say hi"], env, timeout=180, cwd=tmp_path)
    check(r, db, upstream, decoy)
    assert "via: OPENCODE_CONFIG_CONTENT" in r.stderr
    assert snapshot(path) == before


def test_opencode_with_its_ollama_recipe(tmp_path):
    """opencode's documented Ollama set-up, an @ai-sdk/openai-compatible provider at the server's /v1: each
    request is recorded through the route to that Ollama, and reached it at /v1/chat/completions."""
    opencode = find_client("opencode", NODE_BIN)
    env = base_env(tmp_path, **OPENCODE_QUIET)
    with OllamaUpstream() as o:
        conf = {"$schema": "https://opencode.ai/config.json", "autoupdate": False, "share": "disabled",
                "model": "ollama/llama3.2",
                "provider": {"ollama": {"npm": "@ai-sdk/openai-compatible", "name": "Ollama (local)",
                                        "options": {"baseURL": f"{o.url}/v1"},
                                        "models": {"llama3.2": {"name": "Llama 3.2"}}}}}
        path = Path(env["HOME"]) / ".config" / "opencode" / "opencode.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(conf, indent=2))
        before = snapshot(path)
        db = tmp_path / "ft.db"
        r = ft_run(db, [opencode, "run", "Say hi"], env, timeout=180, cwd=tmp_path)
        arrived = [e.path for e in o.log]
    assert r.returncode == 0, r.stdout + r.stderr
    rs = rows(db)
    assert "/v1/chat/completions" in arrived and len(rs) == len(arrived), (arrived, [x["path"] for x in rs])
    chat = [x for x in rs if x["upstream_url"] == o.url + "/v1/chat/completions"]
    assert chat and all(x["status"] == 200 and x["model"] == "llama3.2" for x in chat), rs
    assert "via: OPENCODE_CONFIG_CONTENT" in r.stderr
    assert snapshot(path) == before

# -- Continue's cn (npm @continuedev/cli, in .ci/node) ---------------------------------------------

@pytest.mark.parametrize("how", ["~/.continue", "--config"])
def test_continue_cn(servers, tmp_path, how):
    upstream, decoy = servers
    cn = find_client("cn", NODE_BIN)
    env = base_env(tmp_path, OPENAI_BASE_URL=f"{decoy.url}/v1", CONTINUE_CLI_ENABLE_TELEMETRY="0",
                   CONTINUE_METRICS_ENABLED="0")
    yaml = (f"name: local\nversion: 1.0.0\nschema: v1\nmodels:\n  - name: local\n    provider: openai\n"
            f"    model: gpt-4o-mini\n    apiBase: {upstream.url}/v1/\n    apiKey: {KEY}\n    roles: [chat]\n")
    path = Path(env["HOME"]) / ".continue" / "config.yaml"
    argv = [cn, "-p", "Say hi"]
    if how == "--config":
        path = tmp_path / "cn.yaml"
        argv += ["--config", str(path)]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml)
    before = snapshot(path)
    db = tmp_path / "ft.db"
    r = ft_run(db, argv, env, timeout=180, cwd=tmp_path)
    check(r, db, upstream, decoy)
    assert "via: cn --config = a private copy" in r.stderr
    assert snapshot(path) == before


@pytest.mark.parametrize("api_base", ["{url}", "{url}/v1/", None])
def test_continue_cn_with_an_ollama_model(tmp_path, api_base):
    """A `provider: ollama` model (cn speaks Ollama's OpenAI-compatible /v1 to it), with its apiBase as users
    write it or none (Ollama's default port): each request is recorded through the route to that server, and
    reached it at /v1/chat/completions."""
    cn = find_client("cn", NODE_BIN)
    try:
        o = OllamaUpstream() if api_base else OllamaUpstream(port=11434)
    except OSError:
        pytest.skip("port 11434 is taken on this machine")
    env = base_env(tmp_path, CONTINUE_CLI_ENABLE_TELEMETRY="0", CONTINUE_METRICS_ENABLED="0")
    with o:
        base = f"    apiBase: {api_base.format(url=o.url)}\n" if api_base else ""
        path = Path(env["HOME"]) / ".continue" / "config.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("name: local\nversion: 1.0.0\nschema: v1\nmodels:\n  - name: local\n    provider: ollama\n"
                        f"    model: llama3.2\n{base}    roles: [chat]\n")
        before = snapshot(path)
        db = tmp_path / "ft.db"
        r = ft_run(db, [cn, "-p", "Say hi"], env, timeout=180, cwd=tmp_path)
        arrived = [e.path for e in o.log]
    assert r.returncode == 0, r.stdout + r.stderr
    assert "".join(REPLY) in r.stdout, r.stdout + r.stderr
    rs = rows(db)
    assert "/v1/chat/completions" in arrived and len(rs) == len(arrived), (arrived, [x["path"] for x in rs])
    server = o.url if api_base else "http://localhost:11434"  # (cn's default names localhost)
    chat = [x for x in rs if x["upstream_url"] == server + "/v1/chat/completions"]
    assert chat and all(x["route"] == "ollama" and x["path"] == "/ollama/v1/chat/completions" and x["status"] == 200
                        for x in chat), rs
    assert "via: cn --config = a private copy" in r.stderr
    assert snapshot(path) == before

# -- Kilo CLI (npm @kilocode/cli, in .ci/node) -----------------------------------------------------

KILO_QUIET = {"KILO_DISABLE_MODELS_FETCH": "1", "KILO_DISABLE_AUTOUPDATE": "1", "KILO_DISABLE_LSP_DOWNLOAD": "1",
              "KILO_DISABLE_DEFAULT_PLUGINS": "1", "KILO_DISABLE_SESSION_INGEST": "1", "KILO_DISABLE_CLAUDE_CODE": "1"}


@pytest.mark.parametrize("how", ["~/.config/kilo", "KILO_CONFIG"])
def test_kilo(servers, tmp_path, how):
    """A provider's baseURL in Kilo's global kilo.json (or the file KILO_CONFIG names); opencode's own
    config (which Kilo never reads) and OPENAI_BASE_URL name the decoy. The key stays in the user's file
    and the environment: nothing else on disk holds it."""
    upstream, decoy = servers
    kilo = find_client("kilo", NODE_BIN)
    env = base_env(tmp_path, OPENAI_BASE_URL=f"{decoy.url}/v1", **KILO_QUIET)
    conf = {"model": "local/gpt-4o-mini", "autoupdate": False, "share": "disabled",
            "provider": {"local": {"npm": "@ai-sdk/openai-compatible", "name": "Local",
                                   "options": {"baseURL": f"{upstream.url}/v1", "apiKey": KEY},
                                   "models": {"gpt-4o-mini": {"name": "gpt-4o-mini"}}}}}
    path = Path(env["HOME"]) / ".config" / "kilo" / "kilo.json"
    if how == "KILO_CONFIG":
        path = tmp_path / "my-kilo.json"
        env["KILO_CONFIG"] = str(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(conf, indent=2))
    opencode = Path(env["HOME"]) / ".config" / "opencode" / "opencode.json"  # opencode's file: Kilo never reads it
    opencode.parent.mkdir(parents=True)
    opencode.write_text(json.dumps({"provider": {"local": {"options": {"baseURL": f"{decoy.url}/v1"}}}}))
    before = snapshot(opencode)
    db = tmp_path / "ft.db"
    work = tmp_path / "work"
    work.mkdir()
    r = ft_run(db, [kilo, "run", "Say hi"], env, timeout=180, cwd=work)
    check(r, db, upstream, decoy)
    assert "via: KILO_CONFIG_CONTENT" in r.stderr
    assert snapshot(opencode) == before
    after = json.loads(path.read_text())
    # Kilo's own migrations (it writes these without firsttoken too): a $schema, and bash allowed as before
    after.pop("$schema", None)
    if after.get("permission") == {"bash": "allow"}:
        after.pop("permission")
    assert after == conf
    assert [p for p in tmp_path.rglob("*") if p.is_file() and p != path and KEY.encode() in p.read_bytes()] == []


# -- Kimi CLI (pip kimi-cli, in .ci/kimi, made with Python 3.13) ----------------------------------

@pytest.mark.parametrize("how", ["config.toml", "KIMI_BASE_URL"])
def test_kimi(servers, tmp_path, how):
    """An openai_legacy provider's base_url in ~/.kimi/config.toml (OPENAI_BASE_URL, which would beat it,
    unset), or a kimi-type provider whose config names the decoy, beaten by KIMI_BASE_URL."""
    upstream, decoy = servers
    kimi = find_client("kimi", venv_bin("kimi"))
    env = base_env(tmp_path, KIMI_CLI_NO_AUTO_UPDATE="1", KIMI_DISABLE_TELEMETRY="1")
    kind, base = ("openai_legacy", upstream.url) if how == "config.toml" else ("kimi", decoy.url)
    if how == "KIMI_BASE_URL":
        env["KIMI_BASE_URL"] = f"{upstream.url}/v1"
    conf = Path(env["HOME"]) / ".kimi" / "config.toml"
    conf.parent.mkdir()
    conf.write_text(f'default_model = "local"\n\n[providers.gw]\ntype = "{kind}"\nbase_url = "{base}/v1"\n'
                    f'api_key = "{KEY}"\n\n[models.local]\nprovider = "gw"\nmodel = "gpt-4o-mini"\n'
                    'max_context_size = 128000\n')
    before = snapshot(conf)
    db = tmp_path / "ft.db"
    r = ft_run(db, [kimi, "--print", "--final-message-only", "-p", "Say hi"], env, timeout=180, cwd=tmp_path)
    check(r, db, upstream, decoy)
    assert f"via: {'OPENAI_BASE_URL' if how == 'config.toml' else 'KIMI_BASE_URL'} (it beats" in r.stderr
    assert snapshot(conf) == before
    assert [p for p in tmp_path.rglob("*") if p.is_file() and p != conf and KEY.encode() in p.read_bytes()] == []
