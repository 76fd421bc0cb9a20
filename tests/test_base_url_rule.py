"""One base-URL rule (addon/routing.py): `firsttoken env`, the proxy's banner, the live header and
the diagnosis hints print the same base URL per client family, and that URL works with the real
openai/anthropic SDKs through a running proxy. Plus: one language decision (lang.resolve)."""

from __future__ import annotations

import io
import json
import os
import re
import signal
import subprocess
import sys
import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import anthropic
import openai
import pytest
from click.testing import CliRunner
from conftest import rows
from rawserver import LoopbackServer
from rich.console import Console

from firsttoken.addon import routing
from firsttoken.addon.diagnose.lang import resolve
from firsttoken.addon.routing import AmbiguousRoute, RouteError, client_base_url, parse_upstream, parse_upstreams, pick_route
from firsttoken.cli.env.command import env as env_command
from firsttoken.cli.labels import label
from firsttoken.cli.live.render import header_lines, scroll_entry
from firsttoken.cli.live.state import from_capture
from firsttoken.cli.loopback import free_port
from firsttoken.cli.proxy.command import banner
from firsttoken.cli.proxy.server import ProxyServer
from firsttoken.cli.proxy.state import read_states
from firsttoken.cli.terminal import PseudoTerminal

KEY = "sk-test-baseurl-0000000000000000000000"
MSG = [{"role": "user", "content": "Say hi."}]
ENV_OF = {"openai": "OPENAI_BASE_URL", "anthropic": "ANTHROPIC_BASE_URL"}
FT = str(Path(sys.executable).parent / "firsttoken")


# -- unit: the rule ----------------------------------------------------------------------------------------

P = "http://127.0.0.1:8787"


@pytest.mark.parametrize("spec,family,base", [
    ("https://api.openai.com", "openai", P + "/v1"),
    ("https://api.openai.com/v1", "openai", P),
    ("https://open.bigmodel.cn/api/paas/v4", "openai", P),
    ("https://generativelanguage.googleapis.com/v1beta/openai", "openai", P),
    ("https://gateway.example/api", "openai", P + "/v1"),
    ("ds=https://api.deepseek.com", "openai", P + "/ds/v1"),
    ("https://api.anthropic.com", "anthropic", P),
    ("https://api.anthropic.com/v1", "anthropic", P),  # never /v1 (and a warning, below)
    ("ant=https://api.deepseek.com/anthropic", "anthropic", P + "/ant"),
])
def test_client_base_url(spec, family, base):
    assert client_base_url(P, parse_upstream(spec), family) == base
    assert client_base_url(P + "/", parse_upstream(spec), family) == base  # a trailing slash changes nothing


def test_client_base_url_without_a_known_route():
    assert client_base_url(P, None, "openai") == P + "/v1"
    assert client_base_url(P, None, "anthropic") == P


def test_anthropic_warnings_for_a_versioned_upstream():
    assert routing.base_url_warnings(parse_upstream("https://api.anthropic.com"), "anthropic") == []
    assert routing.base_url_warnings(parse_upstream("https://api.openai.com/v1"), "openai") == []
    [w] = routing.base_url_warnings(parse_upstream("a=https://api.anthropic.com/v1"), "anthropic")
    assert "/v1/v1/messages" in w and "--upstream a=https://api.anthropic.com " in w
    [w] = routing.base_url_warnings(parse_upstream("https://open.bigmodel.cn/api/paas/v4"), "anthropic")
    assert "/api/paas/v4/v1/messages" in w


def test_pick_route_two_routes_and_ambiguity():
    two = parse_upstreams(["openai=http://127.0.0.1:9000/v1", "anthropic=http://127.0.0.1:9000"])
    assert pick_route(two, "openai").name == "openai"
    assert pick_route(two, "anthropic").name == "anthropic"
    assert client_base_url(P, pick_route(two, "openai"), "openai") == P + "/openai"
    assert client_base_url(P, pick_route(two, "anthropic"), "anthropic") == P + "/anthropic"
    # a default route serves OpenAI clients; a route that looks like Anthropic serves Anthropic clients
    mixed = parse_upstreams(["https://api.openai.com", "claude=https://api.anthropic.com"])
    assert pick_route(mixed, "openai").name is None and pick_route(mixed, "anthropic").name == "claude"
    # nothing stands out
    same = parse_upstreams(["a=https://x.example/v1", "b=https://y.example"])
    with pytest.raises(AmbiguousRoute, match="--route"):
        pick_route(same, "openai")
    with pytest.raises(AmbiguousRoute):
        pick_route(same, "anthropic")
    assert pick_route(same, "openai", "b").name == "b"
    with pytest.raises(RouteError, match="no route named 'zz'"):
        pick_route(same, "openai", "zz")
    assert pick_route(None, "openai") is None and pick_route([], "anthropic") is None
    [o, a] = routing.client_bases(P, same)
    assert o.url is None and a.url is None
    assert o.text == "OPENAI_BASE_URL: several routes fit (a, b); run `firsttoken env openai --route NAME`"
    assert "firsttoken env anthropic --route NAME" in a.text


def test_record_route_rebuilds_the_route():
    r = routing.record_route("ds", "https://api.deepseek.com/v1")
    assert (r.name, r.host, r.prefix, r.mount) == ("ds", "api.deepseek.com", "/v1", "/ds")
    assert routing.record_route("default", "http://127.0.0.1:9000/api/paas/v4").mount == ""
    assert routing.record_route("x", None) is None and routing.record_route("x", "not a url") is None


# -- end to end: every command agrees, and the URL works ------------------------------------------------------

class VersionedUpstream(LoopbackServer):
    """An OpenAI-compatible upstream under a versioned prefix that is not /v1 (like
    https://open.bigmodel.cn/api/paas/v4): 200 for POST /api/paas/v4/chat/completions, 404 elsewhere."""

    PREFIX = "/api/paas/v4"

    def __init__(self) -> None:
        self.paths: list[str] = []
        outer = self

        class H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_POST(self):
                n = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(n) or b"{}")
                outer.paths.append(self.path)
                if self.path == outer.PREFIX + "/chat/completions":
                    status, doc = 200, {
                        "id": "chatcmpl-v4", "object": "chat.completion", "created": int(time.time()),
                        "model": body.get("model"),
                        "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"},
                                     "finish_reason": "stop"}],
                        "usage": {"prompt_tokens": 9, "completion_tokens": 1, "total_tokens": 10}}
                else:
                    status, doc = 404, {"error": {"message": f"Unknown path {self.path}",
                                                  "type": "invalid_request_error", "code": "not_found"}}
                data = json.dumps(doc).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.serve(H)


@pytest.fixture(scope="module")
def v4():
    with VersionedUpstream() as u:
        yield u


# case -> (upstream specs, {family: (right base path on the proxy, a wrong one)}, families the upstream serves)
CASES = {
    "root": (lambda sim, v4: [sim.url],
             {"openai": ("/v1", "/v1/v1"), "anthropic": ("", "/v1")}, ("openai", "anthropic")),
    "v4": (lambda sim, v4: [v4.url + VersionedUpstream.PREFIX],
           {"openai": ("", "/v1"), "anthropic": ("", "/v1")}, ("openai",)),
    "two": (lambda sim, v4: [f"openai={sim.url}/v1", f"anthropic={sim.url}"],
            {"openai": ("/openai", "/openai/v1"), "anthropic": ("/anthropic", "/anthropic/v1")},
            ("openai", "anthropic")),
}


def _pairs(text: str) -> dict[str, str]:
    """{OPENAI_BASE_URL: url, ANTHROPIC_BASE_URL: url} named in a text."""
    return {k: v.rstrip(".,;)") for k, v in re.findall(r"((?:OPENAI|ANTHROPIC)_BASE_URL)=(\S+)", text)}


def _env_says(port: int, upstreams: list[str], client: str) -> dict[str, str]:
    args = [client, "--shell", "--port", str(port)]
    for u in upstreams:
        args += ["--upstream", u]
    r = CliRunner().invoke(env_command, args)
    assert r.exit_code == 0, r.output
    return {k: v.strip("'") for k, v in re.findall(r"^export (\w+)=(\S+)$", r.stdout, re.M)}


def _banner_says(p: ProxyServer) -> dict[str, str]:
    c = Console(file=io.StringIO(), width=400, color_system=None)
    banner(p, c)
    return _pairs("\n".join(ln for ln in c.file.getvalue().splitlines() if "warning" not in ln))


def _hint_says(p: ProxyServer, db_path, family: str, wrong_base: str) -> tuple[str, dict]:
    """Send a request to a wrong base URL; the base URL its finding's hint names."""
    before = {r["id"] for r in rows(db_path)}
    if family == "openai":
        client = openai.OpenAI(base_url=wrong_base, api_key=KEY, max_retries=0, timeout=20)
        with pytest.raises(openai.NotFoundError):
            client.chat.completions.create(model="gpt-4o-mini", messages=MSG)
    else:
        client = anthropic.Anthropic(base_url=wrong_base, api_key=KEY, max_retries=0, timeout=20)
        with pytest.raises(anthropic.NotFoundError):
            client.messages.create(model="claude-sonnet-4-5", max_tokens=16, messages=MSG)
    p.flush()
    [row] = [r for r in rows(db_path) if r["id"] not in before]
    fs = [f for f in json.loads(row["findings"] or "[]") if ENV_OF[family] + "=" in (f.get("hint") or "")]
    assert fs, (row["status"], row["upstream_url"], row["findings"])
    return _pairs(fs[0]["hint"])[ENV_OF[family]], fs[0]


def _sdk_works(p: ProxyServer, db_path, family: str, base: str) -> dict:
    before = {r["id"] for r in rows(db_path)}
    if family == "openai":
        out = openai.OpenAI(base_url=base, api_key=KEY, max_retries=0, timeout=20).chat.completions.create(
            model="gpt-4o-mini", messages=MSG)
        assert out.choices[0].message.content
    else:
        out = anthropic.Anthropic(base_url=base, api_key=KEY, max_retries=0, timeout=20).messages.create(
            model="claude-sonnet-4-5", max_tokens=16, messages=MSG)
        assert out.content[0].text
    p.flush()
    [row] = [r for r in rows(db_path) if r["id"] not in before]
    assert row["status"] == 200, row
    return row


@pytest.mark.parametrize("case", list(CASES))
def test_every_command_prints_the_same_working_base_url(case, sim, v4, db_path):
    make, expected, served = CASES[case]
    upstreams = make(sim, v4)
    with ProxyServer(upstreams, str(db_path), port=0) as p:
        port = int(p.url.rsplit(":", 1)[1])
        said = {
            "env": {**_env_says(port, upstreams, "openai"), **_env_says(port, upstreams, "claude-code")},
            "banner": _banner_says(p),
            "live": _pairs(from_capture(p.capture, listen_url=p.url).base_url or ""),
        }
        said["hint"] = {}
        for family in ("openai", "anthropic"):
            said["hint"][ENV_OF[family]], _ = _hint_says(p, db_path, family, p.url + expected[family][1])
        for family, (right, _) in expected.items():
            want = p.url + right
            got = {where: s.get(ENV_OF[family]) for where, s in said.items()}
            assert set(got.values()) == {want}, (family, got)
        for family in served:
            row = _sdk_works(p, db_path, family, p.url + expected[family][0])
            path = row["upstream_url"].split("//", 1)[1].split("/", 1)[1]
            assert "/v1/v1" not in "/" + path and "/v4/v1" not in "/" + path, row["upstream_url"]
    if case == "v4":
        assert v4.paths[-1] == "/api/paas/v4/chat/completions"


def test_two_routes_banner_of_the_real_command(sim, tmp_path):
    """`firsttoken proxy --no-live -u openai=…/v1 -u anthropic=…`: the README's example, as a user runs it."""
    port = free_port()
    proc = subprocess.Popen([FT, "proxy", "--no-live", "--port", str(port), "--db", str(tmp_path / "b.db"),
                             "-u", f"openai={sim.url}/v1", "-u", f"anthropic={sim.url}"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 20
        while time.time() < deadline and not read_states() and proc.poll() is None:
            time.sleep(0.05)
        time.sleep(0.2)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert _pairs(out) == {"OPENAI_BASE_URL": f"http://127.0.0.1:{port}/openai",
                           "ANTHROPIC_BASE_URL": f"http://127.0.0.1:{port}/anthropic"}, out
    base = f"http://127.0.0.1:{port}"
    assert f"ANTHROPIC_BASE_URL={base}/openai" not in out


def test_ambiguous_routes_say_which_command_to_run(sim, db_path):
    upstreams = [f"a={sim.url}", f"b={sim.url}/v1"]
    with ProxyServer(upstreams, str(db_path), port=0) as p:
        c = Console(file=io.StringIO(), width=400, color_system=None)
        banner(p, c)
        text = c.file.getvalue()
        live = from_capture(p.capture, listen_url=p.url).base_url
        port = p.url.rsplit(":", 1)[1]
    for fam in ("openai", "anthropic"):
        line = f"{ENV_OF[fam]}: several routes fit (a, b); run `firsttoken env {fam} --route NAME`"
        assert line in text and line in live
    assert "BASE_URL=" not in text and "BASE_URL=" not in live
    r = CliRunner().invoke(env_command, ["openai", "--port", port, "-u", upstreams[0], "-u", upstreams[1]])
    assert r.exit_code != 0 and "--route" in r.output
    r = CliRunner().invoke(env_command, ["openai", "--shell", "--port", port, "--route", "b",
                                         "-u", upstreams[0], "-u", upstreams[1]])
    assert f"export OPENAI_BASE_URL=http://127.0.0.1:{port}/b" in r.stdout


def test_no_route_body_names_the_proxy_not_the_upstream(sim, db_path):
    import httpx

    with ProxyServer([f"oai={sim.url}", f"ant={sim.url}"], str(db_path), port=0) as p:
        r = httpx.post(p.url + "/nowhere/v1/chat/completions", json={"model": "m", "messages": MSG}, timeout=10)
    assert r.status_code == 404
    msg = r.json()["error"]["message"]
    assert f"Set your client's base URL to {p.url}/<route>" in msg
    assert sim.url not in msg


# -- language: one decision ---------------------------------------------------------------------------------

def test_resolve_order(monkeypatch):
    env = {"FIRSTTOKEN_LANG": "zh", "LANG": "en_US.UTF-8"}
    assert resolve(None, env) == "zh"
    assert resolve("en", env) == "en"
    assert resolve(None, {"LANG": "zh_CN.UTF-8"}) == "zh"
    assert resolve(None, {"LANG": "en_US.UTF-8"}) == "en"


def test_labels_and_findings_share_the_resolved_language(sim, db_path, monkeypatch):
    """FIRSTTOKEN_LANG=zh with an English locale: findings and labels are both Chinese; --lang en wins."""
    for var in ("LC_ALL", "LC_MESSAGES", "LANGUAGE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("LANG", "en_US.UTF-8")
    monkeypatch.setenv("FIRSTTOKEN_LANG", "zh")
    for setting, want in ((None, "zh"), ("en", "en")):
        lang = resolve(setting)
        assert lang == want
        db = db_path.with_name(f"{want}.db")
        with ProxyServer([sim.url], str(db), port=0, lang=lang) as p:
            with pytest.raises(openai.NotFoundError):
                openai.OpenAI(base_url=p.url + "/v1/v1", api_key=KEY, max_retries=0).chat.completions.create(
                    model="gpt-4o-mini", messages=MSG)
            p.flush()
            snap = from_capture(p.capture, listen_url=p.url)
        c = Console(file=io.StringIO(), width=160, color_system=None)
        for line in header_lines(snap, 160, lang):
            c.print(line)
        c.print(scroll_entry(snap.recent[-1], 160, lang))
        screen = c.file.getvalue()
        assert f"{label(lang, 'base')}: " in screen
        if want == "zh":
            assert "客户端 base URL" in screen and "出现了两次" in screen, screen
            assert "appears twice" not in screen
        else:
            assert "base URL:" in screen and "appears twice" in screen and "出现" not in screen, screen


def test_proxy_live_view_labels_follow_firsttoken_lang(sim, tmp_path):
    """The real `firsttoken proxy` on a terminal: its labels and its findings in one language."""
    env = {k: v for k, v in os.environ.items() if k not in ("LC_ALL", "LC_MESSAGES", "LANGUAGE")}
    env.update(FIRSTTOKEN_LANG="zh", LANG="en_US.UTF-8", PYTHONIOENCODING="utf-8")
    port = free_port()
    term = PseudoTerminal(140, 40)
    term.spawn([FT, "proxy", "-u", sim.url, "--port", str(port), "--db", str(tmp_path / "zh.db")], env=env)
    try:
        term.wait_for(r"客户端 base URL")
        with pytest.raises(openai.NotFoundError):
            openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1/v1", api_key=KEY, max_retries=0).chat.completions.create(
                model="gpt-4o-mini", messages=MSG)
        term.wait_for(r"出现了两次", timeout=15)
        assert term.interrupt() == 0
    finally:
        term.close()
