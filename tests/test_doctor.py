"""`firsttoken doctor`: every trap rebuilt in a fake home / cwd / environment, plus one CLI run."""

from __future__ import annotations

import json
import os
import re
import socket
import ssl
from pathlib import Path

import pytest
from click.testing import CliRunner
from tls_upstream import TLSUpstream, make_ca_and_cert

from firsttoken.addon.routing import parse_upstreams
from firsttoken.cli.doctor import checks as dc
from firsttoken.cli.doctor.command import doctor
from firsttoken.cli.loopback import free_port

SECRET = "sk-proj-DOCTORSECRET0123456789abcdefWXYZ"




@pytest.fixture
def listener():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(16)
    yield s.getsockname()[1]
    s.close()


@pytest.fixture
def home(tmp_path) -> Path:
    h = tmp_path / "home"
    h.mkdir()
    return h


@pytest.fixture
def cwd(tmp_path) -> Path:
    c = tmp_path / "project"
    c.mkdir()
    return c


def ctx(env, home, cwd, **kw) -> dc.Context:
    kw.setdefault("proxy_url", f"http://127.0.0.1:{free_port()}")
    kw.setdefault("network", False)
    return dc.Context(env=env, home=home, cwd=cwd, net=dc.Net(1.0), **kw)


def by_id(checks, prefix) -> list[dc.Check]:
    return [c for c in checks if c.id.startswith(prefix)]


def one(checks, prefix) -> dc.Check:
    found = by_id(checks, prefix)
    assert len(found) == 1, [c.id for c in checks]
    return found[0]


# -- proxy variables ----------------------------------------------------------------------------

def test_dead_local_proxy_fails(home, cwd, listener):
    dead = free_port()
    env = {"HTTPS_PROXY": f"http://127.0.0.1:{dead}", "all_proxy": f"socks5://localhost:{listener}",
           "NO_PROXY": "127.0.0.1,localhost"}
    checks = dc.check_proxy_vars(ctx(env, home, cwd))
    c = one(checks, "proxy_env.HTTPS_PROXY")
    assert c.status == dc.FAIL and c.title.startswith("local proxy failed") and "unset HTTPS_PROXY" in c.fix
    assert one(checks, "proxy_env.all_proxy").status == dc.PASS  # something listens there
    assert one(checks, "proxy_env.no_proxy").status == dc.PASS


@pytest.mark.parametrize("no_proxy,covered", [
    ("", False),
    ("example.com", False),
    ("127.0.0.1", False),  # localhost still uncovered
    ("127.0.0.1,localhost", True),
    ("localhost, 127.0.0.0/8", True),
    ("*", True),
    ("127.0.0.1:8787,localhost:8787", True),
])
def test_proxy_var_capturing_firsttoken(home, cwd, no_proxy, covered):
    env = {"HTTP_PROXY": "http://user:pa55word@proxy.corp.example:3128", "NO_PROXY": no_proxy}
    checks = dc.check_proxy_vars(ctx(env, home, cwd, proxy_url="http://127.0.0.1:8787"))
    c = one(checks, "proxy_env.no_proxy")
    assert c.status == (dc.PASS if covered else dc.WARN)
    var = one(checks, "proxy_env.HTTP_PROXY")
    assert var.status == dc.PASS and "pa55word" not in var.detail and "user:***@" in var.detail


def test_https_proxy_alone_does_not_capture_plain_http(home, cwd):
    checks = dc.check_proxy_vars(ctx({"HTTPS_PROXY": "http://proxy.corp.example:3128"}, home, cwd))
    assert not by_id(checks, "proxy_env.no_proxy")


def test_proxy_var_with_quotes_and_pointing_at_firsttoken(home, cwd):
    checks = dc.check_proxy_vars(ctx({"http_proxy": '"http://127.0.0.1:7890"'}, home, cwd))
    assert one(checks, "proxy_env.http_proxy").status == dc.FAIL
    c = ctx({"HTTPS_PROXY": "http://localhost:8787"}, home, cwd, proxy_url="http://127.0.0.1:8787")
    assert one(dc.check_proxy_vars(c), "proxy_env.HTTPS_PROXY").status == dc.WARN  # reverse proxy as HTTPS_PROXY
    c.forward = True
    assert one(dc.check_proxy_vars(c), "proxy_env.HTTPS_PROXY").status == dc.PASS


def test_no_proxy_matching():
    assert dc.no_proxy_covers(".example.com", "api.example.com")
    assert dc.no_proxy_covers("*.example.com", "api.example.com")
    assert not dc.no_proxy_covers("example.com", "badexample.com")
    assert dc.no_proxy_covers("::1", "[::1]")
    assert dc.no_proxy_covers("10.0.0.0/8", "10.2.3.4") and not dc.no_proxy_covers("10.0.0.0/8", "11.0.0.1")
    assert not dc.no_proxy_covers("localhost:9000", "localhost", 8787)


# -- keys ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("value,fact", [
    (SECRET + "\n", "newline"),
    (SECRET + " ", "trailing_whitespace"),
    (" " + SECRET, "leading_whitespace"),
    (f'"{SECRET}"', "quoted"),
    ("", "empty"),
    ("$OPENAI_KEY", "unexpanded_variable"),
    (SECRET[:10] + "\u2014" + SECRET[10:], "non_ascii"),
    (SECRET[:10] + " " + SECRET[10:], "inner_whitespace"),
])
def test_broken_keys_fail_and_show_only_a_fingerprint(home, cwd, value, fact):
    checks = dc.check_keys(ctx({"OPENAI_API_KEY": value}, home, cwd))
    c = one(checks, "key.OPENAI_API_KEY")
    assert c.status == dc.FAIL and fact in c.detail
    blob = json.dumps([x.as_dict() for x in checks])
    assert SECRET[8:-4] not in blob
    if fact != "empty" and value.strip().startswith("sk"):
        assert "sk-proj-…WXYZ" in c.detail


def test_key_sanity_warnings(home, cwd):
    env = {"OPENAI_API_KEY": "sk-ant-api03-" + "a" * 40, "ANTHROPIC_API_KEY": SECRET,
           "ANTHROPIC_AUTH_TOKEN": "sk-ant-api03-" + "b" * 40, "MY_KEY": "  x  "}
    checks = dc.check_keys(ctx(env, home, cwd, env_keys=("MY_KEY", "MISSING_KEY")))
    assert one(checks, "key.OPENAI_API_KEY").status == dc.WARN
    assert one(checks, "key.ANTHROPIC_API_KEY").status == dc.WARN
    assert one(checks, "key.ANTHROPIC_AUTH_TOKEN").status == dc.WARN
    assert one(checks, "key.MY_KEY").status == dc.FAIL
    assert one(checks, "key.MISSING_KEY").status == dc.WARN
    assert one(checks, "key.anthropic_both").status == dc.WARN


def test_claude_auth_conflict(home, cwd):
    (home / ".claude").mkdir()
    (home / ".claude" / ".credentials.json").write_text("{}")
    checks = dc.check_keys(ctx({"ANTHROPIC_API_KEY": "sk-ant-api03-" + "c" * 40}, home, cwd))
    assert one(checks, "key.claude_auth_conflict").status == dc.WARN
    assert one(checks, "key.ANTHROPIC_API_KEY").status == dc.PASS
    assert not by_id(dc.check_keys(ctx({}, home, cwd)), "key.claude_auth_conflict")


# -- base URLs ----------------------------------------------------------------------------------

@pytest.mark.parametrize("var,value,status,words", [
    ("OPENAI_BASE_URL", "http://127.0.0.1:8787/v1", dc.PASS, "points at firsttoken"),
    ("OPENAI_BASE_URL", "https://api.openai.com/v1", dc.PASS, "straight to api.openai.com"),
    ("OPENAI_BASE_URL", "http://127.0.0.1:8787/v1/v1", dc.FAIL, "/v1 twice"),
    ("OPENAI_BASE_URL", "https://relay.example/v1/chat/completions", dc.FAIL, "ends in /chat/completions"),
    ("OPENAI_BASE_URL", "http://localhost:8787/v1/responses", dc.FAIL, "ends in /responses"),
    ("OPENAI_BASE_URL", "https://127.0.0.1:8787/v1", dc.FAIL, "https:// to firsttoken"),
    ("OPENAI_BASE_URL", "127.0.0.1:8787/v1", dc.FAIL, "not an http(s) URL"),
    ("OPENAI_BASE_URL", "http://127.0.0.1:8787/v1\n", dc.FAIL, "line break"),
    ("ANTHROPIC_BASE_URL", "http://127.0.0.1:8787", dc.PASS, "points at firsttoken"),
    ("ANTHROPIC_BASE_URL", "http://127.0.0.1:8787/v1", dc.FAIL, "ends in /v1"),
    ("ANTHROPIC_BASE_URL", "https://api.anthropic.com/v1/messages", dc.FAIL, "ends in /messages"),
    ("ANTHROPIC_BASE_URL", "https://localhost:8787", dc.FAIL, "https:// to firsttoken"),
])
def test_env_base_urls(home, cwd, var, value, status, words):
    c = one(dc.check_env_base_urls(ctx({var: value}, home, cwd, proxy_url="http://127.0.0.1:8787")), f"base_url.environment.{var}")
    assert c.status == status and words in c.title, c
    if status == dc.FAIL and "line break" not in words and "not an" not in words:
        assert c.fix.startswith("use ")


def test_fixes_are_the_right_urls(home, cwd):
    c = ctx({}, home, cwd, proxy_url="http://127.0.0.1:8787")
    assert dc.check_base_url("X", "https://api.anthropic.com/v1/messages", "anthropic", c).fix == "use https://api.anthropic.com"
    assert dc.check_base_url("X", "https://h.example/v1/chat/completions/", "openai", c).fix == "use https://h.example/v1"
    assert dc.check_base_url("X", "http://127.0.0.1:8787/v1/v1", "openai", c).fix == "use http://127.0.0.1:8787/v1"
    assert dc.check_base_url("X", "https://127.0.0.1:8787", "anthropic", c).fix == "use http://127.0.0.1:8787"


def test_base_urls_against_the_running_proxys_routes(home, cwd):
    routes = parse_upstreams(["oai=https://api.openai.com/v1", "anth=https://api.anthropic.com", "https://x.example"])
    c = ctx({}, home, cwd, proxy_url="http://127.0.0.1:8787", routes=routes)
    chk = lambda url, kind: dc.check_base_url("U", url, kind, c)  # noqa: E731
    assert chk("http://127.0.0.1:8787/oai", "openai").status == dc.PASS
    assert "lacks /v1" not in chk("http://127.0.0.1:8787/oai", "openai").title
    bad = chk("http://127.0.0.1:8787/oai/v1", "openai")  # /v1 from the route + /v1 from the client
    assert bad.status == dc.FAIL and "twice" in bad.title
    assert chk("http://127.0.0.1:8787", "openai").status == dc.FAIL  # default route has no /v1 in its path
    assert chk("http://127.0.0.1:8787", "openai").title.endswith("lacks /v1")
    assert chk("http://127.0.0.1:8787/anth", "anthropic").status == dc.PASS
    c.routes = parse_upstreams(["anth=https://api.anthropic.com/v1"])
    assert chk("http://127.0.0.1:8787/anth", "anthropic").status == dc.FAIL
    assert chk("http://127.0.0.1:8787/nowhere", "anthropic").title.endswith("matches no route of the running proxy")


def test_legacy_openai_api_base(home, cwd):
    checks = dc.check_env_base_urls(ctx({"OPENAI_API_BASE": "http://127.0.0.1:8787/v1"}, home, cwd))
    c = one(checks, "base_url.openai_api_base")
    assert c.status == dc.WARN and c.fix == "export OPENAI_BASE_URL=http://127.0.0.1:8787/v1"
    same = {"OPENAI_API_BASE": "https://a.example/v1", "OPENAI_BASE_URL": "https://a.example/v1/"}
    assert not by_id(dc.check_env_base_urls(ctx(same, home, cwd)), "base_url.openai_api_base")


# -- Claude Code settings and Codex config ------------------------------------------------------------

def test_claude_settings_files(home, cwd):
    port = free_port()  # nothing listens there (a user's proxy may well be on 8787)
    (home / ".claude").mkdir()
    (home / ".claude" / "settings.json").write_text(json.dumps(
        {"env": {"ANTHROPIC_BASE_URL": f"http://127.0.0.1:{port}/v1", "ANTHROPIC_AUTH_TOKEN": SECRET + "\n"}}))
    (cwd / ".claude").mkdir()
    (cwd / ".claude" / "settings.json").write_text('{"env": {"ANTHROPIC_BASE_URL": "http://127.0.0.1:%d",}}' % port)
    (cwd / ".claude" / "settings.local.json").write_text(json.dumps({"env": {"ANTHROPIC_MODEL": 3}}))
    c = ctx({}, home, cwd, proxy_url=f"http://127.0.0.1:{port}")
    checks = dc.run_checks(c)
    url = one(checks, "base_url.~/.claude/settings.json")
    assert url.status == dc.FAIL and "ends in /v1" in url.title and "settings.json" in url.title
    assert one(checks, "claude../.claude/settings.json").status == dc.FAIL  # trailing comma
    assert one(checks, "claude../.claude/settings.local.json.env_types").status == dc.WARN
    tok = one(checks, "key.~/.claude/settings.json.ANTHROPIC_AUTH_TOKEN")
    assert tok.status == dc.FAIL and "line break" in tok.title
    assert SECRET[8:-4] not in json.dumps([x.as_dict() for x in checks])
    # a base URL points at the proxy and nothing listens: that is a failure, not a warning
    assert one(checks, "proxy.listening").status == dc.FAIL


def write_codex(home: Path, text: str) -> None:
    (home / ".codex").mkdir(exist_ok=True)
    (home / ".codex" / "config.toml").write_text(text)


def test_codex_config_traps(home, cwd):
    write_codex(home, """
[model_providers.firsttoken]
name = "firsttoken"
base_url = "http://127.0.0.1:8787/v1/chat/completions"
env_key = "FT_KEY"
wire_api = "chat"
model_provider = "firsttoken"
""")
    checks = dc.check_codex(ctx({}, home, cwd, proxy_url="http://127.0.0.1:8787"))
    assert one(checks, "codex.firsttoken.misplaced").status == dc.FAIL
    assert one(checks, "base_url.~/.codex/config.toml").status == dc.FAIL
    assert one(checks, "codex.firsttoken.wire_api").status == dc.WARN
    assert not by_id(checks, "codex.firsttoken.env_key")  # provider not selected (model_provider is misplaced)

    write_codex(home, 'model_provider = "ghost"\n[model_providers.firsttoken]\nname = "x"\n')
    assert one(dc.check_codex(ctx({}, home, cwd)), "codex.model_provider").status == dc.FAIL

    write_codex(home, 'model_provider = "firsttoken"\n[model_providers.firsttoken]\nname = "x"\n'
                      'base_url = "http://127.0.0.1:8787/v1"\nenv_key = "FT_KEY"\nwire_api = "responses"\n')
    c = ctx({}, home, cwd, proxy_url="http://127.0.0.1:8787")
    assert one(dc.check_codex(c), "codex.firsttoken.env_key").status == dc.FAIL
    c.env = {"FT_KEY": SECRET + " "}
    assert one(dc.check_codex(c), "key.FT_KEY").status == dc.FAIL
    c.env = {"FT_KEY": SECRET}
    got = dc.check_codex(c)
    assert {x.status for x in got} == {dc.PASS} and one(got, "key.FT_KEY") and one(got, "base_url.~/.codex")

    write_codex(home, "model_provider = \n")
    assert one(dc.check_codex(ctx({}, home, cwd)), "codex.parse").status == dc.FAIL
    # CODEX_HOME moves the file
    other = home / "elsewhere"
    other.mkdir()
    (other / "config.toml").write_text('model_provider = "openai"\n')
    assert one(dc.check_codex(ctx({"CODEX_HOME": str(other)}, home, cwd)), "codex.ok").status == dc.PASS


# -- the proxy, the upstreams, the installation ---------------------------------------------------------

def test_proxy_listening(home, cwd, listener):
    assert dc.check_proxy(ctx({}, home, cwd, proxy_url=f"http://127.0.0.1:{listener}"), []).status == dc.PASS
    assert dc.check_proxy(ctx({}, home, cwd), []).status == dc.WARN
    assert dc.check_proxy(ctx({}, home, cwd, proxy_url="https://127.0.0.1:1"), []).status == dc.FAIL


class TrustingNet(dc.Net):
    def __init__(self, ca: Path, timeout: float = 2.0) -> None:
        super().__init__(timeout)
        self.ca = ca

    def tls(self, sock, host):
        c = ssl.create_default_context(cafile=str(self.ca))
        with c.wrap_socket(sock, server_hostname=host) as s:
            return s.version()


class NoDNS(dc.Net):
    def resolve(self, host, port):
        raise OSError(-2, "Name or service not known")


def test_upstream_probes(home, cwd, tmp_path, sim):
    ca, cert, key = make_ca_and_cert(tmp_path)
    with TLSUpstream(cert, key) as up:
        c = ctx({}, home, cwd, upstreams=(f"tls=https://localhost:{up.port}", f"sim={sim.url}/v1"), network=True)
        checks = {x.id: x for x in dc.check_upstreams(c, [])}
        # the system trust store does not know our test CA: a configured upstream firsttoken could not
        # reach fails doctor, with the fix
        untrusted = checks[f"upstream.localhost:{up.port}"]
        assert untrusted.status == dc.FAIL and "not trusted" in untrusted.title and "--upstream-ca" in untrusted.fix
        plain = checks[f"upstream.127.0.0.1:{sim.port}"]
        assert plain.status == dc.PASS and "DNS" in plain.detail and "TCP" in plain.detail
        c.net = TrustingNet(ca)
        ok = {x.id: x for x in dc.check_upstreams(c, [])}[f"upstream.localhost:{up.port}"]
        assert ok.status == dc.PASS and "TLS" in ok.detail
    # offline: never an exception; the likely upstreams when nothing is configured only warn (a guess)
    c = ctx({}, home, cwd, network=True)
    c.net = NoDNS(1.0)
    offline = dc.check_upstreams(c, [])
    assert [x.id for x in offline] == ["upstream.api.openai.com:443", "upstream.api.anthropic.com:443"]
    assert all(x.status == dc.WARN and "DNS lookup failed" in x.title and "likely" in x.detail for x in offline)
    # ... and a configured one whose name does not resolve fails, naming the host to check
    c = ctx({}, home, cwd, upstreams=("https://api.typo.example",), network=True)
    c.net = NoDNS(1.0)
    (typo,) = dc.check_upstreams(c, [])
    assert typo.status == dc.FAIL and "api.typo.example" in typo.fix
    # a refused TCP connect to a configured upstream fails, with a fix
    c = ctx({}, home, cwd, upstreams=(f"http://127.0.0.1:{free_port()}",), network=True)
    (refused,) = dc.check_upstreams(c, [])
    assert refused.status == dc.FAIL and "refused" in refused.detail and refused.fix


def test_configured_upstreams_from_env_and_settings(home, cwd):
    env = {"OPENAI_BASE_URL": "https://relay.example/v1", "ANTHROPIC_BASE_URL": "http://127.0.0.1:8787"}
    c = ctx(env, home, cwd, proxy_url="http://127.0.0.1:8787",
            routes=parse_upstreams(["https://api.deepseek.com"]))
    assert dc.configured_upstreams(c, [("s", {"ANTHROPIC_BASE_URL": "https://gw.example:8443"})]) == [
        ("https", "api.deepseek.com", 443), ("https", "relay.example", 443), ("https", "gw.example", 8443)]


def test_installation_checks(tmp_path, home, cwd):
    ok = {c.id: c for c in dc.check_tokenizers()}
    assert ok["tokenizers.cl100k_base"].status == dc.PASS
    assert ok["tokenizers.o200k_base"].status in (dc.PASS, dc.WARN)
    assert dc.check_mitmproxy().status == dc.PASS
    assert dc.check_db(ctx({}, home, cwd, db_path=str(tmp_path / "a" / "b" / "ft.db"))).status == dc.PASS
    d = tmp_path / "dir.db"
    d.mkdir()
    assert dc.check_db(ctx({}, home, cwd, db_path=str(d))).status == dc.FAIL
    from firsttoken.addon.store.db import open_db

    open_db(tmp_path / "real.db").conn.close()
    assert dc.check_db(ctx({}, home, cwd, db_path=str(tmp_path / "real.db"))).title.startswith("database is writable")
    assert dc.resolve_db_path(ctx({"FIRSTTOKEN_DB": str(tmp_path / "env.db")}, home, cwd)) == tmp_path / "env.db"
    if os.geteuid() != 0:  # root may write anywhere
        ro = tmp_path / "ro"
        ro.mkdir()
        ro.chmod(0o500)
        assert dc.check_db(ctx({}, home, cwd, db_path=str(ro / "x" / "ft.db"))).status == dc.FAIL


# -- the command --------------------------------------------------------------------------------

def test_cli_json_and_exit_codes(home, cwd, tmp_path, monkeypatch, listener):
    monkeypatch.chdir(cwd)
    base = {"HOME": str(home), "USERPROFILE": str(home), "FIRSTTOKEN_DB": None, "NO_PROXY": "127.0.0.1,localhost"}
    for v in dc.PROXY_VARS + dc.KEY_VARS + tuple(dc.BASE_URL_VARS):
        base[v] = None
    args = ["--json", "--offline", "--proxy", f"http://127.0.0.1:{listener}", "--db", str(tmp_path / "ft.db")]
    r = CliRunner().invoke(doctor, args, env=base)
    doc = json.loads(r.stdout)
    assert r.exit_code == 0, doc
    assert doc["ok"] is True and doc["summary"]["fail"] == 0
    assert {c["id"] for c in doc["checks"]} >= {"proxy.listening", "db", "mitmproxy", "tokenizers.cl100k_base"}

    bad = dict(base, OPENAI_API_KEY=f"'{SECRET}'", HTTPS_PROXY=f"http://127.0.0.1:{free_port()}",
               OPENAI_BASE_URL=f"http://127.0.0.1:{listener}/v1/v1")
    r = CliRunner().invoke(doctor, args + ["--env-key", "NOPE_KEY"], env=bad)
    doc = json.loads(r.stdout)
    assert r.exit_code == 1 and doc["ok"] is False
    failed = {c["id"] for c in doc["checks"] if c["status"] == "fail"}
    assert {"key.OPENAI_API_KEY", "proxy_env.HTTPS_PROXY", "base_url.environment.OPENAI_BASE_URL"} <= failed
    assert SECRET[8:-4] not in r.output
    assert any(c["id"] == "key.NOPE_KEY" and c["status"] == "warn" for c in doc["checks"])

    r = CliRunner().invoke(doctor, args[1:], env=bad)  # the human form
    assert r.exit_code == 1
    assert "local proxy failed" in r.stdout and "fix:" in r.stdout and SECRET[8:-4] not in r.stdout
    summary = r.stdout.strip().splitlines()[-1]
    assert re.fullmatch(r"\d+ ok, (1 warning|(0|[2-9]|\d\d+) warnings), \d+ failed", summary), summary


def test_forward_mode_ca_and_state(home, cwd, tmp_path, listener):
    from firsttoken.cli.doctor.command import build_context

    c = ctx({}, home, cwd, forward=True, confdir=str(tmp_path / "mitm"))
    assert dc.check_forward_ca(c).status == dc.FAIL
    (tmp_path / "mitm").mkdir()
    (tmp_path / "mitm" / "mitmproxy-ca-cert.pem").write_text("x")
    assert dc.check_forward_ca(c).status == dc.PASS
    # the state file of a running proxy gives doctor its URL, routes and mode
    db = tmp_path / "st" / "ft.db"
    db.parent.mkdir()
    from firsttoken.cli.proxy.state import registry_dir

    registry_dir().mkdir(parents=True, exist_ok=True)
    (registry_dir() / f"{os.getpid()}-{listener}.json").write_text(json.dumps({
        "pid": os.getpid(), "url": f"http://127.0.0.1:{listener}", "port": listener, "forward": False,
        "db": str(tmp_path / "elsewhere.db"), "routes": ["oai=https://api.openai.com/v1"], "confdir": None}))
    b = build_context(proxy_url=None, env_keys=(), db_path=str(db), upstreams=(), offline=True, timeout=1,
                      env={"OPENAI_BASE_URL": f"http://127.0.0.1:{listener}/oai/v1"}, home=home, cwd=cwd)
    assert b.proxy_url == f"http://127.0.0.1:{listener}" and [r.name for r in b.routes] == ["oai"]
    checks = dc.run_checks(b)
    assert one(checks, "proxy.listening").status == dc.PASS
    assert one(checks, "base_url.environment.OPENAI_BASE_URL").status == dc.FAIL  # /v1 twice through route oai


def test_doctor_and_the_auth_finding_word_a_key_fact_the_same_way(home, cwd):
    """One wording per key fact: what doctor says of $OPENAI_API_KEY is what the finding says
    of the key the proxy saw."""
    from firsttoken.addon.diagnose import DiagnosisInput, diagnose
    from firsttoken.addon.record import Record
    from firsttoken.addon.secrets import key_fact_text

    key = "sk-proj-" + "k" * 40 + "\n"
    check = one(dc.check_keys(ctx({"OPENAI_API_KEY": key}, home, cwd)), "key.OPENAI_API_KEY")
    words = key_fact_text("newline")
    assert words in check.title
    rec = Record(id="r", started_at="2026-01-01T00:00:00+00:00", status=401, api="openai.chat", key_header="authorization", key_fingerprint="sk-…kkkk",
                 key_scheme="Bearer", key_length=len(key), key_facts=["newline"], upstream="https://api.openai.com",
                 upstream_url="https://api.openai.com/v1/chat/completions", path="/v1/chat/completions")
    (f,) = [f for f in diagnose(rec, DiagnosisInput()) if f["code"] == "auth.whitespace"]
    assert words in f["message"]


def test_loopback_base_url_where_nothing_listens_fails_and_names_the_running_proxy(home, cwd, tmp_path, monkeypatch,
                                                                                    listener):
    """Issue 24: OPENAI_BASE_URL=http://127.0.0.1:8788/v1 (a typo for the proxy's port; the SDK fails)
    gave "✓ goes straight to 127.0.0.1", "offline? a firewall?", "0 failed", exit 0."""
    from firsttoken.cli.proxy.state import registry_dir

    monkeypatch.chdir(cwd)
    dead = free_port()
    env = {"HOME": str(home), "USERPROFILE": str(home), "FIRSTTOKEN_DB": None, "NO_PROXY": "127.0.0.1,localhost"}
    for v in dc.PROXY_VARS + dc.KEY_VARS + tuple(dc.BASE_URL_VARS):
        env[v] = None
    env["OPENAI_BASE_URL"] = f"http://127.0.0.1:{dead}/v1"
    args = ["--db", str(tmp_path / "ft.db")]

    r = CliRunner().invoke(doctor, args, env=env)  # no proxy runs
    assert r.exit_code == 1, r.output
    assert f"nothing listens on 127.0.0.1:{dead}" in r.stdout and "goes straight" not in r.stdout
    assert "no firsttoken proxy runs now" in r.stdout
    assert f"127.0.0.1:{dead}: TCP connect" not in r.stdout and "a firewall?" not in r.stdout  # not an upstream

    registry_dir().mkdir(parents=True, exist_ok=True)  # a proxy runs on `listener` (its state file)
    (registry_dir() / f"{os.getpid()}-{listener}.json").write_text(json.dumps({
        "pid": os.getpid(), "url": f"http://127.0.0.1:{listener}", "port": listener, "forward": False,
        "db": str(tmp_path / "ft.db"), "routes": ["https://api.openai.com"], "confdir": None}))
    r = CliRunner().invoke(doctor, args + ["--json", "--offline"], env=env)
    doc = json.loads(r.stdout)
    assert r.exit_code == 1 and doc["ok"] is False
    c = next(c for c in doc["checks"] if c["id"] == "base_url.environment.OPENAI_BASE_URL")
    assert c["status"] == "fail" and f"port {listener}" in c["fix"] and f"use http://127.0.0.1:{listener}/v1" in c["fix"]

    env["OPENAI_BASE_URL"] = f"http://127.0.0.1:{listener}/v1"  # fixed: it passes
    doc = json.loads(CliRunner().invoke(doctor, args + ["--json", "--offline"], env=env).stdout)
    c = next(c for c in doc["checks"] if c["id"] == "base_url.environment.OPENAI_BASE_URL")
    assert c["status"] == "pass"
