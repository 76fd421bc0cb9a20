"""The Cline CLI (npm `cline`) through firsttoken: how `firsttoken run` reads and redirects its
provider settings (unit tests), then the real binary against the simulator, offline, on loopback:
set up by hand with the `cline auth` command `firsttoken env cline` prints, and through
`firsttoken run -- cline …` (also while Cline's background hub runs).
"""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import time
from pathlib import Path

import pytest
from conftest import rows, start_proxy_process
from ollama_upstream import OllamaUpstream
from test_run import FT, SIM_TEXT, base_env, check_summary, find_cli, ft_run

from firsttoken.addon import routing
from firsttoken.cli.run.child import child_files
from firsttoken.cli.run.cline import parse_args
from firsttoken.cli.run.upstreams import ChildFile, PlanError, make_plan, redirect

pytestmark = pytest.mark.slow  # the real Cline CLI: the slow tier (`pytest -m slow`)

KEY = "sk-test-cline-5e1f0a9c3b7d2e4f6a8b"
ANT_KEY = "sk-ant-test-cline-7d2e4f6a8b5e1f0a9c3b"
PROMPT = "Say hi"  # (one word would be taken for a cline command)


def write_providers(path: Path, provider: str, **settings) -> Path:
    """A providers.json as `cline auth` writes it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"version": 1, "lastUsedProvider": provider, "modes": {}, "providers": {
        provider: {"settings": {"provider": provider, **settings}, "updatedAt": "2026-01-01T00:00:00.000Z",
                   "tokenSource": "manual"}}}, indent=2))
    return path


def user_settings(home: Path) -> Path:
    return home / ".cline" / "data" / "settings" / "providers.json"


# -- reading Cline's configuration ---------------------------------------------------------------

def test_parse_args():
    a = parse_args(["--json", "-P", "anthropic", "--config=/c", "Say hi", "--data-dir", "/d"])
    assert (a.provider, a.config_dir, a.data_dir, a.zen, a.command) == ("anthropic", "/c", "/d", False, None)
    assert parse_args(["--thinking", "high", "-z", "fix it"]).zen
    assert parse_args(["auth", "-p", "openai", "-b", "http://x"]).command == "auth"  # auth's -p is its provider
    assert parse_args(["auth", "-p", "openai"]).provider is None
    assert parse_args(["-m", "history", "Say hi"]).command is None  # an option's value is not a command
    assert parse_args(["--thinking", "Say hi"]).command is None


def test_where_cline_reads_its_provider_settings(tmp_path):
    """$CLINE_PROVIDER_SETTINGS_PATH, else $CLINE_DATA_DIR, else --config / $CLINE_DIR / ~/.cline."""
    home = tmp_path / "home"
    write_providers(user_settings(home), "openai-compatible", baseUrl="https://home.example.com/v1")
    write_providers(tmp_path / "cfg" / "data" / "settings" / "providers.json", "openai-compatible",
                    baseUrl="https://config.example.com/v1")
    write_providers(tmp_path / "cdir" / "data" / "settings" / "providers.json", "openai-compatible",
                    baseUrl="https://clinedir.example.com/v1")
    write_providers(tmp_path / "data" / "settings" / "providers.json", "openai-compatible",
                    baseUrl="https://datadir.example.com/v1")
    write_providers(tmp_path / "p.json", "openai-compatible", baseUrl="https://path.example.com/v1")

    def upstream(argv, **env):
        plan = make_plan(argv, env, home, tmp_path)
        assert plan.client == "cline" and plan.families == ("openai",)
        return plan.upstreams["openai"].url

    assert upstream(["cline", "Say hi"]) == "https://home.example.com/v1"
    assert upstream(["cline", "--config", "cfg", "Say hi"]) == "https://config.example.com/v1"
    assert upstream(["cline", "Say hi"], CLINE_DIR=str(tmp_path / "cdir")) == "https://clinedir.example.com/v1"
    assert upstream(["cline", "--config=cfg", "Say hi"], CLINE_DIR=str(tmp_path / "cdir")) == "https://config.example.com/v1"
    assert upstream(["cline", "--config", "cfg", "Say hi"], CLINE_DATA_DIR=str(tmp_path / "data")) \
        == "https://datadir.example.com/v1"
    assert upstream(["cline", "Say hi"], CLINE_DATA_DIR=str(tmp_path / "data"),
                    CLINE_PROVIDER_SETTINGS_PATH=str(tmp_path / "p.json")) == "https://path.example.com/v1"
    plan = make_plan(["cline", "Say hi"], {}, home, tmp_path)
    assert plan.upstreams["openai"].source == "~/.cline/data/settings/providers.json providers.openai-compatible.settings.baseUrl"


def test_which_provider_and_its_base_url(tmp_path):
    home = tmp_path / "home"
    path = write_providers(user_settings(home), "anthropic", baseUrl="https://gw.example.com/anthropic/v1", apiKey=ANT_KEY)
    plan = make_plan(["cline", "--json", "Say hi"], {}, home, tmp_path)
    # Cline's Anthropic base URL holds /v1 (it appends /messages): the upstream is the one Anthropic clients use
    assert plan.families == ("anthropic",) and plan.upstreams["anthropic"].url == "https://gw.example.com/anthropic"
    assert not plan.notes and not plan.forward_reason
    # -P picks another provider: its default base URL when its settings name none
    plan = make_plan(["cline", "-P", "openai-native", "-m", "gpt-5", "Say hi"], {}, home, tmp_path)
    assert plan.families == ("openai",) and plan.upstreams["openai"].url == "https://api.openai.com/v1"
    assert plan.upstreams["openai"].source == "Cline's default for openai-native"
    assert make_plan(["cline", "-P", "openai", "Say hi"], {}, home, tmp_path).cline.provider == "openai-compatible"
    # a provider whose base URL firsttoken does not know (Cline's own service): forward mode, said why
    plan = make_plan(["cline", "-P", "cline", "Say hi"], {}, home, tmp_path)
    assert plan.cline is None and "provider 'cline' has no base URL" in plan.forward_reason
    # any provider with a baseUrl in its settings is redirected
    write_providers(path, "litellm", baseUrl="http://127.0.0.1:4000/v1")
    assert make_plan(["cline", "Say hi"], {}, home, tmp_path).upstreams["openai"].url == "http://127.0.0.1:4000/v1"
    # an Anthropic base URL without a version: Cline calls …/messages; through the proxy it gets the rule's /v1
    write_providers(path, "anthropic", baseUrl="https://gw.example.com/anthropic")
    plan = make_plan(["cline", "Say hi"], {}, home, tmp_path)
    assert any("has no API version" in n and "/v1/messages" in n for n in plan.notes)



def test_the_ollama_provider_goes_to_its_server_s_root(tmp_path):
    """Cline's Ollama provider speaks Ollama's native API at the server's root (Cline drops a /v1 or /api and
    appends /api/chat; no baseUrl: http://localhost:11434): the route is that root, the copy's baseUrl the route's
    root too (no /v1), so the provider is recorded instead of reaching the engine through forward mode."""
    home = tmp_path / "home"
    path = write_providers(user_settings(home), "ollama", apiKey="none", model="llama3.2")  # as `cline auth -p ollama`
    plan = make_plan(["cline", "--json", "Say hi"], {}, home, tmp_path)
    assert plan.families == ("ollama",) and not plan.forward_reason
    assert plan.upstreams["ollama"].url == "http://localhost:11434"
    assert plan.upstreams["ollama"].source == "Cline's default for ollama"
    doc = json.loads(redirect(plan, "http://127.0.0.1:8787", plan.routes(), {}).files[0].text)
    assert doc["providers"]["ollama"]["settings"]["baseUrl"] == "http://127.0.0.1:8787/ollama"
    for written in ("http://10.0.0.5:11434/v1", "http://10.0.0.5:11434/api/", "http://10.0.0.5:11434"):
        write_providers(path, "ollama", model="llama3.2", baseUrl=written)
        plan = make_plan(["cline", "Say hi"], {}, home, tmp_path)
        assert plan.upstreams["ollama"].url == "http://10.0.0.5:11434", written

def test_what_cannot_be_redirected_is_said(tmp_path):
    home = tmp_path / "home"
    path = write_providers(user_settings(home), "openai-compatible", baseUrl="https://gw.example.com/v1")
    # a sandbox reads its own providers.json whatever CLINE_PROVIDER_SETTINGS_PATH says
    write_providers(tmp_path / "sb" / "settings" / "providers.json", "openai-compatible", baseUrl="https://sb.example.com/v1")
    plan = make_plan(["cline", "--data-dir", "sb", "Say hi"], {}, home, tmp_path)
    assert plan.upstreams["openai"].url == "https://sb.example.com/v1"
    assert plan.cline is None and "--data-dir sb is a sandbox" in plan.forward_reason
    assert "CLINE_SANDBOX=1" in make_plan(["cline", "Say hi"], {"CLINE_SANDBOX": "1"}, home, tmp_path).forward_reason
    # --zen hands the task to the hub: refused, with what to run instead
    with pytest.raises(PlanError, match="without --zen"):
        make_plan(["cline", "--zen", "Say hi"], {}, home, tmp_path)
    # a cline command is not a task: its settings are left alone (`cline auth` must write the user's file)
    plan = make_plan(["cline", "auth", "-p", "openai", "-k", KEY, "-m", "m", "-b", "http://x/v1"], {}, home, tmp_path)
    assert plan.cline is None and not plan.forward_reason and "is not a task" in plan.notes[0]
    assert redirect(plan, "http://127.0.0.1:8787", plan.routes(), {}).files == []
    # a file Cline would discard
    path.write_text('{"version": 1, "providers": {')
    with pytest.raises(PlanError, match="not valid JSON"):
        make_plan(["cline", "Say hi"], {}, home, tmp_path)


def test_the_copy_points_at_the_proxy_and_keeps_the_rest(tmp_path):
    home = tmp_path / "home"
    path = write_providers(user_settings(home), "anthropic", baseUrl="https://api.anthropic.com/v1", apiKey=ANT_KEY,
                           model="claude-sonnet-4-5")
    (path.parent / "models.json").write_text('{"version": 1, "providers": {}}')
    before = path.read_bytes()
    plan = make_plan(["npx", "cline", "--json", "Say hi"], {}, home, tmp_path)
    r = redirect(plan, "http://127.0.0.1:8787/_run/ab12cd34", plan.routes(), {})
    assert r.argv == plan.argv and r.env["CLINE_SESSION_BACKEND_MODE"] == "local"
    (prov, models) = r.files
    assert (prov.name, prov.env, models.name, models.env) == ("providers.json", "CLINE_PROVIDER_SETTINGS_PATH",
                                                              "models.json", None)
    doc = json.loads(prov.text)
    want = routing.client_base_url("http://127.0.0.1:8787/_run/ab12cd34", plan.routes()["anthropic"], "openai")
    assert want == "http://127.0.0.1:8787/_run/ab12cd34/anthropic/v1"
    assert doc["providers"]["anthropic"]["settings"] == {"provider": "anthropic", "baseUrl": want, "apiKey": ANT_KEY,
                                                         "model": "claude-sonnet-4-5"}
    assert doc["lastUsedProvider"] == "anthropic" and doc["version"] == 1
    assert models.text == '{"version": 1, "providers": {}}'
    assert path.read_bytes() == before
    # a provider chosen with -P that has no entry yet gets one (the schema wants updatedAt)
    plan = make_plan(["cline", "-P", "openai-native", "-m", "gpt-5", "Say hi"], {}, home, tmp_path)
    doc = json.loads(redirect(plan, "http://127.0.0.1:8787", plan.routes(), {}).files[0].text)
    entry = doc["providers"]["openai-native"]
    assert entry["settings"] == {"provider": "openai-native", "baseUrl": "http://127.0.0.1:8787/openai"}
    assert entry["updatedAt"].endswith("Z") and "anthropic" in doc["providers"]


def test_print_env_describes_the_copy_without_its_keys(tmp_path):
    env = base_env(tmp_path)
    write_providers(user_settings(Path(env["HOME"])), "openai-compatible", baseUrl="https://gw.example.com/v1",
                    apiKey=KEY, model="gpt-4o-mini")
    r = subprocess.run([FT, "run", "--print-env", "--db", str(tmp_path / "x.db"), "--", "cline", "--json", PROMPT],
                       env=env, capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    assert "export CLINE_SESSION_BACKEND_MODE=local" in r.stdout.splitlines()
    assert "CLINE_PROVIDER_SETTINGS_PATH" in r.stdout and "firsttoken env cline" in r.stdout
    assert KEY not in r.stdout + r.stderr
    assert not (tmp_path / "x.db").exists()


def test_child_files_are_private_and_removed(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    with child_files([ChildFile("providers.json", KEY, "CLINE_PROVIDER_SETTINGS_PATH"), ChildFile("models.json", "{}")]) as env:
        path = Path(env["CLINE_PROVIDER_SETTINGS_PATH"])
        assert list(env) == ["CLINE_PROVIDER_SETTINGS_PATH"] and path.read_text() == KEY
        assert path.parent.parent == tmp_path and (path.parent / "models.json").is_file()
        assert stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert not path.parent.exists()
    with pytest.raises(RuntimeError), child_files([ChildFile("p.json", "x", "V")]) as env:
        raise RuntimeError("the child failed")
    assert not Path(env["V"]).exists()
    with child_files([]) as env:
        assert env == {}


def test_firsttoken_env_cline_prints_the_cli_command_and_the_panel(tmp_path):
    """The CLI's base URL holds the version for both APIs (it appends /chat/completions or /messages);
    the VS Code panel's Anthropic one does not (its SDK appends /v1/messages). One rule computes both."""
    from firsttoken.cli.env.command import plan_for, render, resolve_target

    t = resolve_target(upstreams=["openai=https://api.openai.com/v1", "anthropic=https://api.anthropic.com"], states=[])
    text = render(plan_for("cline", t, model="gpt-4o-mini", env={}, home=tmp_path))
    assert 'cline auth -p openai-compatible -k "$OPENAI_API_KEY" -m gpt-4o-mini -b http://127.0.0.1:8787/openai' in text
    assert "cline auth -p anthropic -k \"$ANTHROPIC_API_KEY\" -m '<model id>'" in text  # not the OpenAI model
    assert '"baseUrl": "http://127.0.0.1:8787/anthropic/v1"' in text
    assert "Base URL: http://127.0.0.1:8787/anthropic   (no /v1)" in text and "Base URL: http://127.0.0.1:8787/openai" in text
    t = resolve_target(upstreams=["https://api.openai.com"], states=[])
    shell = render(plan_for("cline", t, env={"OPENAI_API_KEY": KEY}, home=tmp_path), "shell")
    assert all(line.startswith("#") for line in shell.splitlines()) and KEY not in shell
    assert "#   cline auth -p openai-compatible -k \"$OPENAI_API_KEY\" -m '<model id>' -b http://127.0.0.1:8787/v1" in shell


# -- the real Cline CLI --------------------------------------------------------------------------

def cline_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """A clean environment (own HOME) in which Cline stays on loopback: no feature-flag lookups
    (E2E_TEST, data.cline.bot), no telemetry (telemetryOptOut, otel.cline.bot), no update check."""
    env = base_env(tmp_path, E2E_TEST="true", CLINE_NO_AUTO_UPDATE="1", XDG_RUNTIME_DIR=str(tmp_path / "runtime"),
                   **extra)
    (tmp_path / "runtime").mkdir(mode=0o700, exist_ok=True)
    settings = Path(env["HOME"]) / ".cline" / "data" / "settings"
    settings.mkdir(parents=True, exist_ok=True)
    (settings / "global-settings.json").write_text(json.dumps({"telemetryOptOut": True, "autoUpdateEnabled": False}))
    (tmp_path / "work").mkdir(exist_ok=True)
    return env


def cline_auth(cline: str, env: dict[str, str], *args: str) -> None:
    r = subprocess.run([cline, "auth", *args], env=env, capture_output=True, text=True, timeout=60,
                       stdin=subprocess.DEVNULL)
    assert r.returncode == 0 and "Provider configured" in r.stdout, r.stdout + r.stderr


def run_cline(cline: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([cline, "--json", PROMPT], env=env, capture_output=True, text=True, timeout=90,
                          stdin=subprocess.DEVNULL, cwd=cwd)


def answer(stdout: str) -> dict:
    """The run_result event of `cline --json` (NDJSON)."""
    events = [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]
    done = [e for e in events if e.get("type") == "run_result"]
    assert done, stdout[-2000:]
    return done[-1]


def files_holding(secret: str, *roots: Path) -> list[Path]:
    out = []
    for root in roots:
        for p in [root] if root.is_file() else (root.rglob("*") if root.is_dir() else []):
            if p.is_file() and secret.encode() in p.read_bytes():
                out.append(p)
    return out


def proxy_files(tmp_path: Path, env: dict[str, str]) -> list[Path]:
    """Everything the proxy (and `firsttoken run`) writes: the database, the registry of running
    proxies, mitmproxy's confdir, the private directory of the child's files."""
    return [*tmp_path.glob("ft.db*"), Path(os.environ["FIRSTTOKEN_STATE_DIR"]), Path(env["HOME"]) / ".mitmproxy",
            tmp_path / "runtime"]


def snapshot(path: Path) -> tuple[bytes, int]:
    return path.read_bytes(), path.stat().st_mtime_ns


def test_cline_with_the_base_url_firsttoken_env_prints(sim, tmp_path):
    """By hand: `firsttoken proxy`, then the `cline auth` command `firsttoken env cline` prints for it."""
    cline = find_cli("cline")
    env = cline_env(tmp_path, OPENAI_API_KEY=KEY, CLINE_SESSION_BACKEND_MODE="local",  # (no hub daemon left behind)
                    PATH=f"{Path(cline).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    db = tmp_path / "ft.db"
    p, port = start_proxy_process(["--upstream", sim.url + "/v1", "--db", str(db)], env=env)
    try:
        shown = subprocess.run([FT, "env", "cline", "--model", "gpt-4o-mini"], env=env, capture_output=True, text=True,
                               timeout=30)
        (auth,) = [x.strip() for x in shown.stdout.splitlines() if x.strip().startswith("cline auth")]
        assert auth == f'cline auth -p openai-compatible -k "$OPENAI_API_KEY" -m gpt-4o-mini -b http://127.0.0.1:{port}'
        r = subprocess.run(["bash", "-c", auth], env=env, capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stdout + r.stderr
        settings = json.loads(user_settings(Path(env["HOME"])).read_text())
        assert settings["providers"]["openai-compatible"]["settings"]["baseUrl"] == f"http://127.0.0.1:{port}"
        r = run_cline(cline, env, tmp_path / "work")
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
        assert answer(r.stdout)["finishReason"] == "completed" and SIM_TEXT in r.stdout
    finally:
        p.send_signal(signal.SIGINT)
        p.communicate(timeout=30)
    rs = rows(db)
    assert len(rs) == 1, rs
    x = rs[0]
    assert (x["api"], x["model"], x["path"], x["upstream_url"], x["status"], x["stream"]) == (
        "openai.chat", "gpt-4o-mini", "/chat/completions", sim.url + "/v1/chat/completions", 200, 1)
    assert x["ttft_ms"] is not None and x["ttfb_ms"] < x["ttft_ms"] and x["usage_completion_tokens"] > 0
    assert files_holding(KEY, *proxy_files(tmp_path, env)) == []


PROVIDERS = {  # provider: (its base URL at the simulator, model, the API and path through `firsttoken run`)
    "openai-compatible": ("/v1", "gpt-4o-mini", "openai.chat", "/openai/chat/completions", "/v1/chat/completions"),
    "openai-native": ("/v1", "gpt-5", "openai.responses", "/openai/responses", "/v1/responses"),
    "anthropic": ("/v1", "claude-sonnet-4-5", "anthropic.messages", "/anthropic/v1/messages", "/v1/messages"),
}


def configure(cline: str, env: dict[str, str], sim_url: str, provider: str) -> Path:
    """The user's own Cline setup, pointing straight at the simulator (their "real" upstream)."""
    suffix, model = PROVIDERS[provider][:2]
    key = ANT_KEY if provider == "anthropic" else KEY
    if provider == "anthropic":  # `cline auth` takes no -b for it: the base URL goes into the file
        cline_auth(cline, env, "-p", provider, "-k", key, "-m", model)
        path = user_settings(Path(env["HOME"]))
        doc = json.loads(path.read_text())
        doc["providers"]["anthropic"]["settings"]["baseUrl"] = sim_url + suffix
        path.write_text(json.dumps(doc, indent=2))
    else:
        cline_auth(cline, env, "-p", provider, "-k", key, "-m", model, "-b", sim_url + suffix)
    return user_settings(Path(env["HOME"]))


def check_run(sim, tmp_path: Path, env: dict[str, str], provider: str, r: subprocess.CompletedProcess) -> None:
    _, model, api, path, upstream_path = PROVIDERS[provider]
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    assert answer(r.stdout)["finishReason"] == "completed" and SIM_TEXT in r.stdout
    rs = rows(tmp_path / "ft.db")
    assert len(rs) == 1, rs
    x = rs[0]
    assert (x["api"], x["model"], x["path"], x["upstream_url"], x["status"], x["stream"]) == (
        api, model, path, sim.url + upstream_path, 200, 1)
    assert x["ttft_ms"] is not None and x["ttfb_ms"] < x["ttft_ms"]
    check_summary(r.stderr, rs)
    assert "via: CLINE_PROVIDER_SETTINGS_PATH = a copy of ~/.cline/data/settings/providers.json" in r.stderr
    key = ANT_KEY if provider == "anthropic" else KEY
    assert files_holding(key, *proxy_files(tmp_path, env)) == []
    assert list((tmp_path / "runtime").iterdir()) == []  # the child's private settings copy is gone


@pytest.mark.parametrize("provider", list(PROVIDERS))
def test_firsttoken_run_cline(sim, tmp_path, provider):
    """`firsttoken run -- cline --json …` records the run; the user's providers.json is left as it was."""
    cline = find_cli("cline")
    env = cline_env(tmp_path)
    settings = configure(cline, env, sim.url, provider)
    before = snapshot(settings)
    t0 = time.monotonic()
    r = ft_run(tmp_path / "ft.db", [cline, "--json", PROMPT], env, timeout=120, cwd=tmp_path / "work")
    check_run(sim, tmp_path, env, provider, r)
    assert snapshot(settings) == before
    assert time.monotonic() - t0 < 120


def hub_pid(env: dict[str, str], timeout: float) -> int | None:
    """The pid of the Cline hub daemon started in this test's HOME, once its discovery record is written."""
    record = Path(env["HOME"]) / ".cline" / "data" / "locks" / "hub" / "production.json"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            pid = int(json.loads(record.read_text())["pid"])
            if b"--cline-hub-daemon" in Path(f"/proc/{pid}/cmdline").read_bytes():
                return pid
        except (OSError, ValueError, KeyError, TypeError):
            pass
        time.sleep(0.2)
    return None


def test_firsttoken_run_cline_while_its_hub_runs(sim, tmp_path):
    """A plain `cline` run starts Cline's background hub, and later runs hand their task to it (with
    the hub's environment): `firsttoken run` keeps its task in the CLI's process, so it is recorded."""
    cline = find_cli("cline")
    env = cline_env(tmp_path)
    settings = configure(cline, env, sim.url, "openai-compatible")
    pid = None
    try:
        first = run_cline(cline, env, tmp_path / "work")
        assert first.returncode == 0, first.stdout[-2000:] + first.stderr[-2000:]
        pid = hub_pid(env, timeout=30)
        assert pid, "Cline started no hub daemon"
        second = run_cline(cline, env, tmp_path / "work")
        assert second.returncode == 0
        log = (Path(env["HOME"]) / ".cline" / "data" / "logs" / "cline.log").read_text()
        assert "Using discovered local hub runtime host" in log  # the hub takes plain runs' tasks
        before = snapshot(settings)
        r = ft_run(tmp_path / "ft.db", [cline, "--json", PROMPT], env, timeout=120, cwd=tmp_path / "work")
        check_run(sim, tmp_path, env, "openai-compatible", r)
        assert snapshot(settings) == before
    finally:
        pid = pid or hub_pid(env, timeout=3)
        if pid:  # the daemon this test started
            os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and Path(f"/proc/{pid}").exists():
                time.sleep(0.1)


def test_firsttoken_run_cline_with_its_ollama_provider(tmp_path):
    """The real Cline, its Ollama provider pointed at a loopback Ollama: `firsttoken run` records its native
    /api/chat through the route to that server, and the user's providers.json is left as it was."""
    cline = find_cli("cline")
    env = cline_env(tmp_path)
    with OllamaUpstream() as o:
        settings = write_providers(user_settings(Path(env["HOME"])), "ollama", apiKey="none", model="llama3.2",
                                   baseUrl=o.url)
        before = snapshot(settings)
        r = ft_run(tmp_path / "ft.db", [cline, "--json", PROMPT], env, timeout=120, cwd=tmp_path / "work")
        chats = [e for e in o.log if e.path == "/api/chat"]
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    assert answer(r.stdout)["model"] == {"id": "llama3.2", "provider": "ollama"}
    # (the loopback Ollama answers a request with tools by calling one Cline does not have: Cline stops there)
    rs = rows(tmp_path / "ft.db", "where api = 'ollama.chat'")
    assert rs and len(rs) == len(chats), (rs, [e.path for e in o.log])
    assert all(x["usage_completion_tokens"] and x["engine"] == "ollama" for x in rs)
    assert all((x["api"], x["route"], x["path"], x["upstream_url"], x["status"], x["model"]) ==
               ("ollama.chat", "ollama", "/ollama/api/chat", o.url + "/api/chat", 200, "llama3.2") for x in rs), rs
    assert "via: CLINE_PROVIDER_SETTINGS_PATH = a copy of ~/.cline/data/settings/providers.json" in r.stderr
    assert snapshot(settings) == before
