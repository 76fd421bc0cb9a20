"""`firsttoken run` for Ollama's clients (issue 35 item 7): a Python child using the real PyPI ``ollama`` library
under `firsttoken run`, against the loopback Ollama of tests/ollama_upstream.py, with only the OLLAMA_HOST a user
has (or none); the recorded rows are checked against what the upstream and the child saw. Also: how OLLAMA_HOST
is read (the library's own parser is the oracle), the default it gets when unset, and that a loopback engine is
reached neither through the user's proxy nor through forward mode."""

from __future__ import annotations

import http.client
import json
import sys
import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from urllib.parse import urlsplit

import ollama
import pytest
from conftest import rows
from ollama._client import _parse_host
from ollama_upstream import REPLY, OllamaUpstream
from rawserver import LoopbackServer
from runkit import NODE_BIN, SIM_TEXT, base_env, find_client, ft_run, venv_bin

from firsttoken.addon import routing
from firsttoken.cli.env.clients import plan_for
from firsttoken.cli.env.target import Target
from firsttoken.cli.proxy.server import ProxyServer
from firsttoken.cli.proxy.state import clear_state, write_state
from firsttoken.cli.run import upstreams
from firsttoken.cli.run.clients import ollama as ollama_client
from firsttoken.cli.run.command import find_running

CHILD = """
import json, sys, time, ollama

t0 = time.perf_counter()
first, parts = None, []
for ch in ollama.chat(model="llama3.2", messages=[{"role": "user", "content": "What is the capital of France?"}],
                      stream=True):
    if ch.message.content and first is None:
        first = time.perf_counter()
    parts.append(ch.message.content or "")
end = time.perf_counter()
r = ollama.generate(model="llama3.2", prompt="Capital of France?", stream=False)
print(json.dumps({"text": "".join(parts), "t0": t0, "first": first, "end": end, "generated": r.response}))
"""


def child_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = base_env(tmp_path, **extra)
    env.pop("OLLAMA_HOST", None)
    env.update(extra)
    return env


@pytest.mark.parametrize("form", ["host:port", "url"])
def test_the_ollama_library_under_run_is_recorded(tmp_path, form):
    """OLLAMA_HOST as users write it (``127.0.0.1:PORT``, or a URL): run points it at the proxy, which forwards
    to it; the rows are Ollama's native API, with the model and TTFT within [upstream-seen, client-seen]. The
    user's HTTP_PROXY (a dead one) is used by neither leg: the child reaches the proxy on loopback directly, and
    the proxy reaches the loopback engine directly."""
    script = tmp_path / "app.py"
    script.write_text(CHILD)
    with OllamaUpstream() as up:
        host = up.url.split("://", 1)[1] if form == "host:port" else up.url + "/"
        env = child_env(tmp_path, OLLAMA_HOST=host, HTTP_PROXY="http://127.0.0.1:9", http_proxy="http://127.0.0.1:9")
        env.pop("NO_PROXY", None)
        db = tmp_path / "ft.db"
        r = ft_run(db, [sys.executable, str(script)], env)
        assert r.returncode == 0, r.stderr
        seen = json.loads(r.stdout)
        assert seen["text"] == "".join(REPLY) and seen["generated"] == "".join(REPLY)
        rs = sorted(rows(db), key=lambda x: x["started_at"] if "started_at" in x else x["id"])
        by_api = {x["api"]: x for x in rs}
        assert set(by_api) == {"ollama.chat", "ollama.generate"}, [x["api"] for x in rs]
        chat, gen = by_api["ollama.chat"], by_api["ollama.generate"]
        assert all(x["route"] == "ollama" and x["status"] == 200 and x["model"] == "llama3.2" for x in rs)
        assert chat["upstream_url"] == up.url + "/api/chat" and gen["upstream_url"] == up.url + "/api/generate"
        assert chat["stream"] == 1 and gen["stream"] == 0
        ex = next(e for e in up.log if e.path == "/api/chat")
        upstream_first = (ex.sent_at[0] - ex.received_at) * 1000
        client_first = (seen["first"] - seen["t0"]) * 1000
        assert upstream_first - 5 <= chat["ttft_ms"] <= client_first + 5, (upstream_first, chat["ttft_ms"], client_first)
        assert chat["engine"] == "ollama" and chat["engine_prompt_tokens"] and chat["engine_decode_ms"] is not None
        assert "via: base URLs in the environment (OLLAMA_HOST)" in r.stderr


def test_unset_ollama_host_is_ollamas_default_when_the_command_is_redirected(tmp_path):
    """A command redirected for another variable gets OLLAMA_HOST too, forwarding to Ollama's default (where its
    clients go with it unset); a running proxy without that route is joined all the same, OLLAMA_HOST then left
    unset."""
    env = {"OPENAI_BASE_URL": "http://127.0.0.1:9/v1"}
    plan = upstreams.make_plan(["python", "app.py"], env, tmp_path, tmp_path)
    up = plan.upstreams["ollama"]
    assert (up.family, up.url, up.implied) == ("ollama", "http://127.0.0.1:11434", True)
    r = upstreams.redirect(plan, "http://127.0.0.1:5000", plan.routes(), env)
    assert r.env == {"OPENAI_BASE_URL": "http://127.0.0.1:5000/openai", "OLLAMA_HOST": "http://127.0.0.1:5000/ollama"}
    db = tmp_path / "ft.db"
    with ProxyServer(["openai=http://127.0.0.1:9/v1"], str(db), port=0) as p:
        write_state(p)
        try:
            found = find_running(plan, str(db))
            assert found is not None and found[0] == p.url
            joined = upstreams.redirect(plan, found[0], found[1], env)
            assert joined.env == {"OPENAI_BASE_URL": p.url + "/openai"}
        finally:
            clear_state(p)


def test_forward_mode_leaves_ollama_host_unset_and_says_so(tmp_path):
    """Nothing set: forward mode, which cannot carry a loopback engine (NO_PROXY keeps 127.0.0.1 direct), so
    OLLAMA_HOST is not invented there: the unset note says how to record an Ollama client."""
    plan = upstreams.make_plan(["python", "app.py"], {}, tmp_path, tmp_path)
    assert plan.forward_reason and not plan.cannot and "ollama" not in plan.upstreams
    (note,) = [t for t, url in plan.unset if url == ollama_client.DEFAULT]
    assert "OLLAMA_HOST=127.0.0.1:11434" in note
    env = upstreams.forward_env("http://127.0.0.1:8080", tmp_path / "ca.pem", tmp_path / "b.pem", {})
    assert "127.0.0.1" in env["NO_PROXY"] and "OLLAMA_HOST" not in env


def test_the_ollama_cli_and_its_server(tmp_path):
    plan = upstreams.make_plan(["ollama", "run", "llama3.2", "hi"], {"OLLAMA_HOST": "0.0.0.0:7000"}, tmp_path, tmp_path)
    assert plan.client == "ollama" and plan.upstreams["ollama"].url == "http://0.0.0.0:7000"
    r = upstreams.redirect(plan, "http://127.0.0.1:5000", plan.routes(), {})
    assert r.env == {"OLLAMA_HOST": "http://127.0.0.1:5000/ollama"} and r.argv == plan.argv
    served = upstreams.make_plan(["ollama", "serve"], {}, tmp_path, tmp_path)
    assert served.cannot and "listens" in served.cannot and not served.upstreams


@pytest.mark.parametrize("value", ["", "1.2.3.4", ":56789", "1.2.3.4:56789", "http://1.2.3.4", "https://1.2.3.4:56789",
                                   "example.com/path", "example.com:56789/path/", "[::1]", "[::1]:5/p", "http://[::1]",
                                   "0.0.0.0", "http://127.0.0.1:9/x/"])
def test_ollama_host_is_read_as_the_ollama_library_reads_it(value):
    assert ollama_client.host_url(value) == _parse_host(value)


# -- Codex's local providers (--oss) -------------------------------------------------------------

class LocalServer(LoopbackServer):
    """What Codex's Ollama support asks of a local server before its first turn (``/api/tags``, ``/api/version``),
    answered here as Ollama does; the Responses API and the rest from the simulator behind (the loopback Ollama
    has no /v1/responses). ``paths``: every request, as received."""

    def __init__(self, behind: str, models: tuple[str, ...] = ("sim-1",)):
        self.paths: list[str] = []
        outer = self

        class H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def _json(self, obj):
                body = json.dumps(obj).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json; charset=utf-8")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _pass(self):
                outer.paths.append(f"{self.command} {self.path}")
                if self.path == "/api/tags":
                    return self._json({"models": [{"name": m, "model": m} for m in models]})
                if self.path == "/api/version":
                    return self._json({"version": "0.13.5"})
                n = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(n) if n else None
                u = urlsplit(behind)
                c = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
                c.request(self.command, self.path, body=body,
                          headers={k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")})
                r = c.getresponse()
                self.send_response(r.status)
                for k, v in r.getheaders():
                    if k.lower() not in ("transfer-encoding", "connection", "content-length"):
                        self.send_header(k, v)
                self.send_header("transfer-encoding", "chunked")
                self.end_headers()
                while chunk := r.read1(65536):
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                    self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")
                c.close()

            do_GET = do_POST = _pass

        self.serve(H)


@pytest.mark.slow  # a real agent CLI: the slow tier
@pytest.mark.parametrize("style", ["--oss --local-provider", "oss_provider", "model_provider", "CODEX_OSS_PORT"])
def test_codex_oss_goes_through_the_proxy(sim, tmp_path, style):
    """The real Codex (0.171, .ci/run's pin) on its built-in ollama provider, chosen each way a user does (--oss with
    --local-provider or config.toml's oss_provider; model_provider = "ollama"), at the server CODEX_OSS_BASE_URL or
    CODEX_OSS_PORT names: run sets CODEX_OSS_BASE_URL to the proxy (Codex lets nothing else move its built-in local
    providers), so its server checks and its Responses calls are all recorded, to the user's server."""
    codex = find_client("codex", NODE_BIN)
    with LocalServer(sim.url) as local:
        env = child_env(tmp_path, **({"CODEX_OSS_PORT": local.url.rsplit(":", 1)[1]} if style == "CODEX_OSS_PORT"
                                     else {"CODEX_OSS_BASE_URL": local.url + "/v1"}))
        conf = Path(env["HOME"]) / ".codex"
        conf.mkdir(parents=True)
        toml = {"oss_provider": 'oss_provider = "ollama"\n', "model_provider": 'model_provider = "ollama"\n'}
        (conf / "config.toml").write_text(toml.get(style, ""))
        flags = {"oss_provider": ["--oss"], "model_provider": []}.get(style, ["--oss", "--local-provider", "ollama"])
        db = tmp_path / "ft.db"
        r = ft_run(db, [codex, "exec", "--skip-git-repo-check", *flags, "-m", "sim-1", "hi"], env, timeout=120,
                   cwd=tmp_path)
        assert r.returncode == 0, r.stdout + r.stderr
        assert SIM_TEXT in r.stdout
        rs = rows(db)
        assert rs and {x["route"] for x in rs} == {"ollama"}
        # 0.171 with --oss: GET /v1/models, /api/version, /api/tags (the model is there: no /api/pull), then POST
        # /v1/responses; on model_provider alone, the Responses calls only
        paths = {urlsplit(x["upstream_url"]).path for x in rs}
        assert paths >= ({"/api/tags", "/v1/responses"} if flags else {"/v1/responses"}), paths
        assert all(urlsplit(x["upstream_url"]).port == urlsplit(local.url).port for x in rs)
        assert len(rs) == len(local.paths)  # every request Codex made reached the server through the proxy
        resp = [x for x in rs if x["api"] == "openai.responses"]
        assert resp and all(x["status"] == 200 and x["model"] == "sim-1" for x in resp)
        assert "via: CODEX_OSS_BASE_URL=" in r.stderr


def test_codex_local_providers_default_server_and_what_run_cannot_tell(tmp_path):
    """With no CODEX_OSS_BASE_URL, Codex's own default: http://localhost:CODEX_OSS_PORT (else the provider's port)/v1,
    the provider from --local-provider, oss_provider or model_provider; `--oss` naming none: Codex asks which, so
    run says so before starting anything."""
    def plan(argv, env=None, toml=None):
        (tmp_path / ".codex").mkdir(exist_ok=True)
        (tmp_path / ".codex" / "config.toml").write_text(toml or "")
        return upstreams.make_plan(argv, env or {}, tmp_path, tmp_path)

    p = plan(["codex", "exec", "--oss", "--local-provider", "lmstudio", "hi"])
    assert [(n, u.url) for n, u in p.upstreams.items()] == [("lmstudio", "http://localhost:1234")]
    assert upstreams.redirect(p, "http://127.0.0.1:5000", p.routes(), {}).env == {
        "CODEX_OSS_BASE_URL": "http://127.0.0.1:5000/lmstudio/v1"}
    p = plan(["codex", "--oss", "exec", "hi"], {"CODEX_OSS_PORT": "4321"}, 'oss_provider = "ollama"\n')
    assert [(n, u.url) for n, u in p.upstreams.items()] == [("ollama", "http://localhost:4321")]
    p = plan(["codex", "exec", "hi"], toml='model_provider = "ollama"\n')
    assert [(n, u.url) for n, u in p.upstreams.items()] == [("ollama", "http://localhost:11434")] and not p.cannot
    p = plan(["codex", "--oss", "exec", "hi"])
    assert p.cannot and "--local-provider" in p.cannot


# -- `firsttoken env ollama` ---------------------------------------------------------------------

def test_env_ollama_prints_what_the_library_reads(tmp_path, monkeypatch):
    """`env ollama` for a proxy with an Ollama route beside an OpenAI one: OLLAMA_HOST at the route, no /v1; the
    real ollama library, given nothing but that variable, is recorded there. --forward says it cannot carry it."""
    with OllamaUpstream() as up, ProxyServer([f"ollama={up.url}", "openai=https://api.openai.com/v1"],
                                             str(tmp_path / "ft.db"), port=0) as proxy:
        routes = routing.parse_upstreams([f"ollama={up.url}", "openai=https://api.openai.com/v1"])
        plan = plan_for("ollama", Target(proxy.url, routes, "test"), env={})
        assert plan.exports == [("OLLAMA_HOST", f"{proxy.url}/ollama")] and not plan.warnings
        monkeypatch.setenv("OLLAMA_HOST", plan.exports[0][1])
        assert ollama.Client().chat(model="llama3.2", messages=[{"role": "user", "content": "hi"}]).message.content
        for _ in range(100):
            proxy.flush()
            rs = rows(tmp_path / "ft.db", "WHERE state = 'done'")
            if rs:
                break
            time.sleep(0.05)
        assert [(x["api"], x["route"], x["upstream_url"]) for x in rs] == [("ollama.chat", "ollama", up.url + "/api/chat")]
    forward = plan_for("ollama", Target("http://127.0.0.1:8080", None, "test", forward=True, confdir=str(tmp_path)),
                       env={})
    assert any("forward mode does not carry" in w for w in forward.warnings)


# -- aider's Ollama models -----------------------------------------------------------------------

@pytest.mark.slow  # a real agent CLI (pip aider-chat, in .ci/aider): the slow tier
def test_aider_ollama_chat_goes_through_the_proxy(tmp_path):
    """aider 0.86.2 (.ci/run's pin) on an ``ollama_chat/`` model with the OLLAMA_API_BASE a user sets: run adds
    --set-env OLLAMA_API_BASE=<route>, so litellm's calls to the Ollama (/api/show, /api/chat) are recorded there."""
    aider = find_client("aider", venv_bin("aider"))
    with OllamaUpstream() as up:
        env = child_env(tmp_path, LITELLM_LOCAL_MODEL_COST_MAP="True", OLLAMA_API_BASE=up.url)
        caches = Path(env["HOME"]) / ".aider" / "caches"  # aider's model-price cache, fresh: it fetches nothing
        caches.mkdir(parents=True)
        (caches / "model_prices_and_context_window.json").write_text("{}")
        db = tmp_path / "ft.db"
        r = ft_run(db, [aider, "--message", "Say hi", "--no-git", "--yes-always", "--no-check-update",
                        "--analytics-disable", "--no-show-model-warnings", "--no-pretty", "--model",
                        "ollama_chat/llama3.2"], env, timeout=180, cwd=tmp_path)
        assert r.returncode == 0, r.stdout + r.stderr
        assert "".join(REPLY) in r.stdout
        rs = rows(db)
        assert rs and len(rs) == len(up.log)  # every request aider made reached the Ollama through the proxy
        assert all(x["route"] == "ollama" and x["upstream_url"].startswith(up.url + "/api/") for x in rs)
        chat = [x for x in rs if x["api"] == "ollama.chat"]
        assert chat and all(x["status"] == 200 and x["model"] == "llama3.2" for x in chat)
        assert chat[0]["ttft_ms"] is not None and chat[0]["engine"] == "ollama"
        assert "--set-env OLLAMA_API_BASE=" in r.stderr


def test_a_run_that_sent_nothing_gives_no_advice_about_the_implied_ollama_route(tmp_path):
    """The default OLLAMA_HOST route is run's own addition: when nothing came through, the advice is about the
    variables the user set, not about an Ollama nobody asked for."""
    script = tmp_path / "noop.py"
    script.write_text("print('nothing')\n")
    env = child_env(tmp_path, OPENAI_BASE_URL="http://127.0.0.1:9/v1")
    r = ft_run(tmp_path / "ft.db", [sys.executable, str(script)], env)
    assert r.returncode == 0 and "sent no request through firsttoken" in r.stderr, r.stderr
    assert "http://127.0.0.1:9/v1" in r.stderr and "11434" not in r.stderr
