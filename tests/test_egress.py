"""Behind an egress proxy (issue 22): firsttoken's upstream leg goes the way the user's clients go.

The upstream is named ``upstream.test``, which only the in-test proxy (tests/egress_proxy.py) can
resolve: a connection that did not go through it fails. Real clients (the openai SDK, httpx) talk
to a real `firsttoken proxy` / `firsttoken run` / `run --forward`.
"""

from __future__ import annotations

import os
import ssl
import subprocess
import sys
from pathlib import Path

import httpx
import openai
import pytest
from conftest import rows, start_proxy_process
from egress_proxy import EgressProxy
from tls_upstream import TLSUpstream, make_ca_and_cert

from firsttoken.cli.loopback import free_port
from firsttoken.cli.proxy.server import ProxyServer, ProxyStartError

FT = str(Path(sys.executable).parent / "firsttoken")
PASSWORD = "Hunter2-Pr0xy-S3cret"  # must never reach the database, a log or a terminal
KEY = "sk-test-123456789012345678901234"
HOSTS = {"upstream.test": "127.0.0.1"}


def sim_port(sim) -> int:
    return int(sim.url.rsplit(":", 1)[1].split("/")[0])


def chat(base_url: str, **kw) -> str:
    c = openai.OpenAI(base_url=base_url, api_key=KEY, max_retries=0, timeout=30, **kw)
    s = c.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}], stream=True)
    return "".join((ch.choices[0].delta.content or "") for ch in s if ch.choices)


def codes(row) -> list[str]:
    """The error findings' codes (a warning such as proxy.saturated on a loaded machine is not the point)."""
    import json

    return [f["code"] for f in json.loads(row["findings"] or "[]") if f["severity"] == "error"]


@pytest.fixture
def clean_env(monkeypatch):
    for v in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy", "no_proxy"):
        monkeypatch.delenv(v, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    return monkeypatch


@pytest.fixture
def tls_up(tmp_path):
    ca, cert, key = make_ca_and_cert(tmp_path, names=("upstream.test", "localhost"), ca_cn="Corp Inspect CA")
    with TLSUpstream(cert, key) as up:
        up.ca = ca
        yield up


def test_plain_http_through_http_proxy_with_credentials(sim, db_path, clean_env):
    with EgressProxy(HOSTS, auth=("alice", PASSWORD)) as ep:
        clean_env.setenv("HTTP_PROXY", f"http://alice:{PASSWORD}@127.0.0.1:{ep.port}")
        with ProxyServer([f"http://upstream.test:{sim_port(sim)}/v1"], str(db_path), port=0) as p:
            assert chat(p.url)
            p.flush()
    (row,) = rows(db_path)
    assert row["status"] == 200 and row["egress_proxy"] == f"http://127.0.0.1:{ep.port}" and not row["error"]
    # absolute-form, as proxies take plain HTTP (not CONNECT), with Basic credentials
    (method, target, auth) = ep.log[0]
    assert method == "POST" and target == f"http://upstream.test:{sim_port(sim)}/v1/chat/completions"
    assert auth and auth.startswith("Basic ")


def test_tls_through_connect_with_credentials_and_a_private_ca(tls_up, db_path, clean_env):
    with EgressProxy(HOSTS, auth=("alice", PASSWORD)) as ep:
        clean_env.setenv("HTTPS_PROXY", f"http://alice:{PASSWORD}@127.0.0.1:{ep.port}")
        url = f"https://upstream.test:{tls_up.port}/v1"
        # the CA is unknown: the record names the issuer and the option to trust it
        with ProxyServer([url], str(db_path), port=0) as p:
            with pytest.raises(openai.APIStatusError):
                chat(p.url)
            p.flush()
        (bad,) = rows(db_path)
        assert "issued by CN=Corp Inspect CA" in bad["error"] and codes(bad) == ["upstream.unreachable"]
        import json

        from firsttoken.addon.diagnose import render_finding

        f = render_finding(json.loads(bad["findings"])[0], "en")
        assert "Corp Inspect CA" in f["message"] and "--upstream-ca" in f["hint"]
        # trusted through SSL_CERT_FILE, as the user's clients trust it
        clean_env.setenv("SSL_CERT_FILE", str(tls_up.ca))
        with ProxyServer([url], str(db_path), port=0) as p:
            assert "tok0" in chat(p.url)
            p.flush()
    good = rows(db_path)[-1]
    assert good["status"] == 200 and good["egress_proxy"] == f"http://127.0.0.1:{ep.port}"
    assert [m for m, _, _ in ep.log] == ["CONNECT", "CONNECT"]
    assert all(t == f"upstream.test:{tls_up.port}" and a and a.startswith("Basic ") for _, t, a in ep.log)


def test_no_proxy_and_no_upstream_proxy_go_direct(sim, db_path, clean_env):
    with EgressProxy({"127.0.0.1": "127.0.0.1"}) as ep:
        # an explicit --upstream-proxy applies to loopback too; NO_PROXY still exempts a host
        clean_env.setenv("NO_PROXY", "localhost")
        with ProxyServer([sim.url + "/v1"], str(db_path), port=0, upstream_proxy=ep.url) as p:
            assert chat(p.url)
            p.flush()
        assert len(ep.log) == 1
        clean_env.setenv("NO_PROXY", f"localhost,127.0.0.0/8:{sim_port(sim)}")
        with ProxyServer([sim.url + "/v1"], str(db_path), port=0, upstream_proxy=ep.url) as p:
            assert chat(p.url)
            p.flush()
        clean_env.setenv("NO_PROXY", "localhost,127.0.0.1")  # (for the test's own client)
        clean_env.setenv("HTTP_PROXY", ep.url)
        with ProxyServer([f"http://upstream.test:{sim_port(sim)}/v1"], str(db_path), port=0,
                         no_upstream_proxy=True) as p:
            with pytest.raises(openai.APIStatusError):
                chat(p.url)  # direct: upstream.test resolves nowhere but in the proxy
            p.flush()
        assert len(ep.log) == 1  # neither of the last two went through it
    a, b, c = rows(db_path)
    assert a["egress_proxy"] == ep.url and b["egress_proxy"] is None and c["egress_proxy"] is None
    assert codes(c) == ["upstream.unreachable"]


@pytest.mark.slow  # (several proxies or processes: seconds)
def test_proxy_down_refusing_or_asking_for_credentials_is_named(sim, tls_up, db_path, clean_env):
    dead = free_port()
    clean_env.setenv("HTTPS_PROXY", f"http://127.0.0.1:{dead}")
    clean_env.setenv("HTTP_PROXY", f"http://127.0.0.1:{dead}")
    with ProxyServer([f"tls=https://upstream.test:{tls_up.port}/v1", f"plain=http://upstream.test:{sim_port(sim)}/v1"],
                     str(db_path), port=0) as p:
        for route in ("tls", "plain"):
            with pytest.raises(openai.APIStatusError):
                chat(f"{p.url}/{route}")
        p.flush()
    with EgressProxy(HOSTS, auth=("alice", PASSWORD)) as ep:
        clean_env.setenv("HTTPS_PROXY", ep.url)  # no credentials in the URL
        clean_env.setenv("HTTP_PROXY", ep.url)
        with ProxyServer([f"tls=https://upstream.test:{tls_up.port}/v1", f"plain=http://upstream.test:{sim_port(sim)}/v1",
                          "gone=https://nowhere.test/v1"], str(db_path), port=0) as p:
            for route in ("tls", "plain"):
                with pytest.raises(openai.APIStatusError):
                    chat(f"{p.url}/{route}")
            p.flush()
        clean_env.setenv("HTTPS_PROXY", f"http://alice:{PASSWORD}@127.0.0.1:{ep.port}")
        with ProxyServer(["gone=https://nowhere.test/v1"], str(db_path), port=0) as p:
            with pytest.raises(openai.APIStatusError):
                chat(f"{p.url}/gone")  # the proxy cannot resolve it: its own 502
            p.flush()
    found = [(r["route"], codes(r)) for r in rows(db_path)]
    assert found == [("tls", ["egress.proxy_down"]), ("plain", ["egress.proxy_down"]),
                     ("tls", ["egress.proxy_auth"]), ("plain", ["egress.proxy_auth"]),
                     ("gone", ["egress.proxy_upstream"])], found


def test_socks_is_refused_at_start_with_the_http_alternative(sim, db_path, clean_env):
    clean_env.setenv("ALL_PROXY", "socks5://127.0.0.1:7890")
    with pytest.raises(ProxyStartError) as e:
        with ProxyServer(["https://api.openai.com/v1"], str(db_path), port=0):
            pass
    assert "SOCKS" in str(e.value) and "--upstream-proxy http://127.0.0.1:7890" in str(e.value)
    r = subprocess.run([FT, "proxy", "--no-live", "--port", "0", "--db", str(db_path), "--upstream",
                        "https://api.openai.com/v1"], capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "http://127.0.0.1:7890" in r.stderr + r.stdout


def _no_password_anywhere(db_dir: Path, *texts: str) -> None:
    for t in texts:
        assert PASSWORD not in t
    for f in db_dir.iterdir():
        if f.is_file():
            assert PASSWORD.encode() not in f.read_bytes(), f


@pytest.mark.slow  # (several proxies or processes: seconds)
def test_cli_proxy_with_credentials_leaves_no_password(sim, tls_up, tmp_path, clean_env):
    with EgressProxy(HOSTS, auth=("alice", PASSWORD)) as ep:
        env = dict(os.environ, HTTPS_PROXY=f"http://alice:{PASSWORD}@127.0.0.1:{ep.port}")
        db = tmp_path / "db" / "ft.db"
        db.parent.mkdir()
        proc, port = start_proxy_process(["--db", str(db), "--upstream-ca", str(tls_up.ca),
                                          "--upstream", f"https://upstream.test:{tls_up.port}/v1"], env=env)
        try:
            assert "tok0" in chat(f"http://127.0.0.1:{port}")
            r = httpx.get(f"http://127.0.0.1:{port}/models", timeout=10)
            assert r.status_code == 200
        finally:
            proc.terminate()
            out, err = proc.communicate(timeout=30)
    assert f"via http://127.0.0.1:{ep.port}" in out and "HTTPS_PROXY" in out  # the banner says the way
    _no_password_anywhere(db.parent, out, err)
    assert [x["status"] for x in rows(db)] == [200, 200]


@pytest.mark.slow  # (several proxies or processes: seconds)
def test_run_and_run_forward_through_the_users_proxy(sim, tmp_path, clean_env):
    script = tmp_path / "child.py"
    script.write_text("import openai, sys\n"
                      "c = openai.OpenAI(max_retries=0, timeout=30)\n"
                      "s = c.chat.completions.create(model='gpt-4o-mini', messages=[{'role': 'user', 'content': 'hi'}],"
                      " stream=True)\n"
                      "print(''.join((x.choices[0].delta.content or '') for x in s if x.choices))\n")
    with EgressProxy(HOSTS, auth=("alice", PASSWORD)) as ep:
        home = tmp_path / "home"
        home.mkdir()
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ANTHROPIC_", "FIRSTTOKEN_DB"))}
        env.update(HOME=str(home), PYTHONUNBUFFERED="1", NO_PROXY="localhost", OPENAI_API_KEY=KEY,
                   OPENAI_BASE_URL=f"http://upstream.test:{sim_port(sim)}/v1",
                   HTTP_PROXY=f"http://alice:{PASSWORD}@127.0.0.1:{ep.port}")
        # the app alone works through the proxy
        direct = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=60)
        assert direct.returncode == 0 and direct.stdout.strip(), direct.stderr
        outs = [direct.stdout]
        for extra in ([], ["--forward"]):
            db = tmp_path / f"run{len(extra)}" / "ft.db"
            db.parent.mkdir()
            r = subprocess.run([FT, "run", "--db", str(db), *extra, "--", sys.executable, str(script)], env=env,
                               capture_output=True, text=True, timeout=90, stdin=subprocess.DEVNULL)
            assert r.returncode == 0, r.stderr
            assert r.stdout == direct.stdout
            (row,) = rows(db)
            assert row["status"] == 200 and row["egress_proxy"] == f"http://127.0.0.1:{ep.port}", row
            assert f"upstream leg via http://127.0.0.1:{ep.port}" in r.stderr
            _no_password_anywhere(db.parent, r.stdout, r.stderr)
            outs.append(r.stdout)
    assert len(ep.log) == 3 and all(m == "POST" and a for m, _, a in ep.log)


@pytest.mark.slow
def test_run_and_run_forward_over_tls_through_a_proxy_without_credentials(tls_up, tmp_path, clean_env):
    """The issue's own case: an https provider reached only through the company proxy (CONNECT), its
    certificate from the company's CA; `run` trusts it with --upstream-ca, and says so when it does not."""
    script = tmp_path / "child.py"
    script.write_text("import openai\n"
                      "c = openai.OpenAI(max_retries=0, timeout=30)\n"
                      "s = c.chat.completions.create(model='gpt-4o-mini', messages=[{'role': 'user', 'content': 'hi'}],"
                      " stream=True)\n"
                      "print(''.join((x.choices[0].delta.content or '') for x in s if x.choices))\n")
    home = tmp_path / "home"
    home.mkdir()
    with EgressProxy(HOSTS) as ep:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ANTHROPIC_", "FIRSTTOKEN_DB"))}
        env.update(HOME=str(home), PYTHONUNBUFFERED="1", OPENAI_API_KEY=KEY,
                   OPENAI_BASE_URL=f"https://upstream.test:{tls_up.port}/v1", HTTPS_PROXY=ep.url)
        direct = subprocess.run([sys.executable, str(script)], env={**env, "SSL_CERT_FILE": str(tls_up.ca)},
                                capture_output=True, text=True, timeout=60)
        assert direct.returncode == 0 and direct.stdout.strip(), direct.stderr
        # without the CA: the child fails, and the record names the issuer and the option of `run`
        db = tmp_path / "no-ca" / "ft.db"
        db.parent.mkdir()
        r = subprocess.run([FT, "run", "--db", str(db), "--", sys.executable, str(script)], env=env,
                           capture_output=True, text=True, timeout=90, stdin=subprocess.DEVNULL)
        assert r.returncode != 0
        (bad,) = rows(db)
        assert "Corp Inspect CA" in bad["error"] and "firsttoken run" in bad["findings"], bad
        for extra in ([], ["--forward"]):
            db = tmp_path / f"run{len(extra)}" / "ft.db"
            db.parent.mkdir()
            r = subprocess.run([FT, "run", "--db", str(db), "--upstream-ca", str(tls_up.ca), *extra, "--",
                                sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=90,
                               stdin=subprocess.DEVNULL)
            assert r.returncode == 0 and r.stdout == direct.stdout, r.stderr
            (row,) = rows(db)
            assert row["status"] == 200 and row["egress_proxy"] == ep.url and row["ttft_ms"], row
    assert [m for m, _, _ in ep.log] == ["CONNECT"] * 4, ep.log
    assert all(t == f"upstream.test:{tls_up.port}" and not a for _, t, a in ep.log)
    r = subprocess.run([FT, "run", "--upstream-ca", str(tmp_path / "nope.pem"), "--", "true"], env=env,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "no such file" in r.stderr


def test_forward_mode_tunnels_other_hosts_through_the_users_proxy(tls_up, sim, db_path, clean_env):
    """Hosts forward mode does not record are tunnelled untouched, and through the egress proxy too."""
    with EgressProxy(HOSTS) as ep:
        clean_env.setenv("HTTPS_PROXY", ep.url)
        clean_env.setenv("HTTP_PROXY", ep.url)
        with ProxyServer([], str(db_path), port=0, forward_mode=True) as p:
            verify = ssl.create_default_context(cafile=str(tls_up.ca))
            with httpx.Client(proxy=p.url, verify=verify, trust_env=False, timeout=20) as c:
                assert c.get(f"https://upstream.test:{tls_up.port}/models").json() == {"ok": True}
                assert c.get(f"http://upstream.test:{sim_port(sim)}/v1/models").status_code == 200
            p.flush()
    assert [(m, t) for m, t, _ in ep.log] == [("CONNECT", f"upstream.test:{tls_up.port}"),
                                              ("GET", f"http://upstream.test:{sim_port(sim)}/v1/models")]
    assert rows(db_path) == []  # not LLM hosts: not recorded


@pytest.mark.slow  # (several proxies or processes: seconds)
def test_doctor_probes_through_the_proxy_and_fails_when_that_way_is_broken(tls_up, tmp_path, clean_env):
    import json

    url = f"https://upstream.test:{tls_up.port}/v1"
    home = tmp_path / "home"
    home.mkdir()

    def doctor(proxy_url: str) -> tuple[int, dict]:
        env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
        env.update(HOME=str(home), HTTPS_PROXY=proxy_url, NO_PROXY="127.0.0.1,localhost", SSL_CERT_FILE=str(tls_up.ca))
        r = subprocess.run([FT, "doctor", "--json", "--upstream", url, "--db", str(tmp_path / "d.db")], env=env,
                           capture_output=True, text=True, timeout=60)
        assert PASSWORD not in r.stdout + r.stderr
        checks = {c["id"]: c for c in json.loads(r.stdout)["checks"]}
        return r.returncode, checks[f"upstream.upstream.test:{tls_up.port}"]

    with EgressProxy(HOSTS, auth=("alice", PASSWORD)) as ep:
        code, ok = doctor(f"http://alice:{PASSWORD}@127.0.0.1:{ep.port}")
        assert code == 0 and ok["status"] == "pass" and f"via http://127.0.0.1:{ep.port}" in ok["title"] and "TLS" in ok["detail"], ok
        code, auth = doctor(f"http://127.0.0.1:{ep.port}")
        assert code == 1 and auth["status"] == "fail" and "credentials" in auth["title"] and "USER:PASSWORD" in auth["fix"]
    code, down = doctor(f"http://127.0.0.1:{free_port()}")
    assert code == 1 and down["status"] == "fail" and "cannot be reached" in down["title"] and "NO_PROXY" in down["fix"]


def test_env_says_the_way_and_never_the_password(tmp_path):
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
    env.update(HOME=str(tmp_path), HTTPS_PROXY=f"http://alice:{PASSWORD}@127.0.0.1:7890", NO_PROXY="127.0.0.1,localhost",
               OPENAI_API_KEY=KEY)
    r = subprocess.run([FT, "env", "openai", "--upstream", "https://api.openai.com/v1"], env=env, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    text = " ".join(r.stdout.split())
    assert "firsttoken reaches https://api.openai.com/v1 via http://127.0.0.1:7890" in text and "(HTTPS_PROXY)" in text
    assert PASSWORD not in r.stdout + r.stderr
    env["ALL_PROXY"], env["HTTPS_PROXY"] = "socks5://127.0.0.1:7890", ""
    r = subprocess.run([FT, "env", "openai", "--upstream", "https://api.openai.com/v1"], env=env, capture_output=True,
                       text=True, timeout=60)
    assert "SOCKS" in r.stdout and "http://127.0.0.1:7890" in r.stdout


@pytest.mark.slow  # (mitmdump in its own process)
def test_mitmdump_upstream_mode_keeps_its_own_proxy(sim, tmp_path):
    """mitmdump --mode upstream:URL with firsttoken's script: mitmproxy's mode decides, the record names it."""
    from firsttoken.cli.loopback import wait_port

    script = subprocess.check_output([FT, "script-path"], text=True).strip()
    db = tmp_path / "up.db"
    with EgressProxy(HOSTS) as ep:
        port = free_port()
        env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
        p = subprocess.Popen([str(Path(sys.executable).parent / "mitmdump"), "-q", "-s", script, "--mode",
                              f"upstream:{ep.url}", "--listen-port", str(port), "--set", f"firsttoken_db={db}"],
                             env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            wait_port(port, p, timeout=30)
            r = httpx.post(f"http://upstream.test:{sim_port(sim)}/v1/chat/completions", proxy=f"http://127.0.0.1:{port}",
                           json={"model": "m", "messages": [{"role": "user", "content": "hi"}]}, timeout=20,
                           trust_env=False)
            assert r.status_code == 200
        finally:
            p.terminate()
            p.communicate(timeout=30)
    assert [m for m, _, _ in ep.log] == ["POST"]
    assert [(x["status"], x["egress_proxy"]) for x in rows(db)] == [(200, ep.url)]
