"""Through a real forward proxy from Debian (tinyproxy, Basic auth), started on a free port with its
own config and log: plain HTTP (absolute-form) and CONNECT + TLS, with and without credentials."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import openai
import pytest
from conftest import rows, start_proxy_process
from tls_upstream import TLSUpstream, make_ca_and_cert

from firsttoken.cli.loopback import free_port, wait_port

pytestmark = pytest.mark.slow

TINYPROXY = shutil.which("tinyproxy") or ("/usr/bin/tinyproxy" if Path("/usr/bin/tinyproxy").exists() else None)
PASSWORD = "Tiny-Pr0xy-Passw0rd"
KEY = "sk-test-123456789012345678901234"


@pytest.fixture
def tinyproxy(tmp_path):
    if TINYPROXY is None:
        if os.environ.get("CI"):
            pytest.fail("tinyproxy is not installed (apt-get install -y tinyproxy): CI must run this test")
        pytest.skip("tinyproxy is not installed")
    port = free_port()
    log = tmp_path / "tinyproxy.log"
    conf = tmp_path / "tinyproxy.conf"
    conf.write_text(f'Port {port}\nListen 127.0.0.1\nTimeout 60\nLogFile "{log}"\nLogLevel Info\nMaxClients 20\n'
                    f"BasicAuth alice {PASSWORD}\nAllow 127.0.0.1\n")
    p = subprocess.Popen([TINYPROXY, "-d", "-c", str(conf)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_port(port, p, timeout=15)
        p.port, p.log = port, log
        yield p
    finally:
        p.terminate()
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()


def chat(base_url: str) -> str:
    c = openai.OpenAI(base_url=base_url, api_key=KEY, max_retries=0, timeout=30)
    s = c.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}], stream=True)
    return "".join((ch.choices[0].delta.content or "") for ch in s if ch.choices)


def test_plain_and_tls_through_tinyproxy_with_and_without_credentials(sim, tinyproxy, tmp_path):
    ca, cert, key = make_ca_and_cert(tmp_path)
    db = tmp_path / "db" / "ft.db"
    db.parent.mkdir()
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
    env["NO_PROXY"] = "localhost"  # the upstreams are on 127.0.0.1: an explicit --upstream-proxy covers them
    with TLSUpstream(cert, key) as up:
        upstreams = ["--upstream", f"plain={sim.url}/v1", "--upstream", f"tls=https://127.0.0.1:{up.port}/v1",
                     "--upstream-ca", str(ca)]
        outs = []
        for creds in (f"alice:{PASSWORD}@", ""):
            proc, port = start_proxy_process(
                ["--db", str(db), "--upstream-proxy", f"http://{creds}127.0.0.1:{tinyproxy.port}", *upstreams], env=env)
            try:
                for route in ("plain", "tls"):
                    if creds:
                        assert chat(f"http://127.0.0.1:{port}/{route}")
                    else:
                        with pytest.raises(openai.APIStatusError) as e:
                            chat(f"http://127.0.0.1:{port}/{route}")
                        assert e.value.status_code in (407, 502)
            finally:
                proc.terminate()
                outs += list(proc.communicate(timeout=30))
    rs = rows(db)
    assert [(r["route"], r["status"]) for r in rs[:2]] == [("plain", 200), ("tls", 200)]
    assert all(r["egress_proxy"] == f"http://127.0.0.1:{tinyproxy.port}" for r in rs)
    import json

    assert [[f["code"] for f in json.loads(r["findings"]) if f["severity"] == "error"] for r in rs[2:]] == \
        [["egress.proxy_auth"]] * 2
    time.sleep(0.2)
    log = tinyproxy.log.read_text(errors="replace")
    assert f"CONNECT 127.0.0.1:{up.port}" in log
    assert f"POST http://127.0.0.1:{sim.port}/v1/chat/completions" in log
    for t in outs:
        assert PASSWORD not in t
    for f in db.parent.iterdir():
        assert PASSWORD.encode() not in f.read_bytes()
