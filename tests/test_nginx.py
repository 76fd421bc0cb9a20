"""Behind a real nginx (Debian's, as users run it): client -> firsttoken -> nginx -> a local upstream that
streams tokens with known timing (the simulator: 32 tokens 25 ms apart after ~110 ms).

Each test writes its own nginx.conf into its own folder (pid, logs and temp paths inside it), listens
on a free port and runs its own instance in the foreground (`nginx -p DIR -c CONF -g 'daemon off;'`).
The upstream connection is nginx's default (HTTP/1.0, no `proxy_http_version`): with it, nginx's default
`proxy_buffering on` holds the stream in 4 KB buffers and sends the headers with the first one, so the
client never waits *after* the headers. Every buffering configuration must be reported as buffering
with nginx named and nginx's own fix, never as network or prefill; `proxy_buffering off` stays silent.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner

from firsttoken.addon.diagnose import CATALOG
from firsttoken.cli.loopback import free_port, wait_port
from firsttoken.cli.main import cli
from firsttoken.cli.proxy.server import ProxyServer
from firsttoken.cli.simulate import SimConfig, SimServer

pytestmark = pytest.mark.slow

TOKENS = 32
SIM = dict(ttfb_ms=30, prefill_base_ms=80, prefill_ms_per_1k_tokens=10, tpot_ms=25, output_tokens=TOKENS)

#: name -> the lines added to nginx's `location` (besides proxy_pass)
CONFIGS = {
    "default": "",
    "gzip": "gzip on; gzip_types text/event-stream; gzip_min_length 0; gzip_proxied any;",
    "large_buffers": "proxy_buffers 8 64k;",
    "postpone_output_0": "postpone_output 0;",
    "buffering_off": "proxy_buffering off;",
    # a second control: buffering on, but HTTP/1.1 (chunked) to the upstream: nginx 1.22 passed each
    # chunk on as it came, so nothing was held and nothing may be reported
    "http11": 'proxy_http_version 1.1; proxy_set_header Connection "";',
}


def nginx_binary() -> str:
    found = shutil.which("nginx") or next((p for p in ("/usr/sbin/nginx",) if Path(p).exists()), None)
    if found:
        return found
    msg = "nginx is not installed: `apt-get install -y nginx-light` (.ci/run does it)"
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(msg)
    pytest.skip(msg)


@pytest.fixture(scope="module")
def upstream():
    with SimServer(SimConfig(**SIM)) as s:
        yield s


class Nginx:
    """One nginx of our own, in front of ``upstream_url``, with ``extra`` in its location."""

    def __init__(self, binary: str, folder: Path, upstream_url: str, extra: str) -> None:
        self.dir = folder
        (folder / "tmp").mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        d = folder
        user = "user root root;" if os.geteuid() == 0 else ""  # workers may then write the temp folders
        conf = f"""{user}
worker_processes 1;
pid {d}/nginx.pid;
error_log {d}/error.log warn;
events {{ worker_connections 64; }}
http {{
    access_log off;
    client_body_temp_path {d}/tmp/body;
    proxy_temp_path {d}/tmp/proxy;
    fastcgi_temp_path {d}/tmp/fastcgi;
    uwsgi_temp_path {d}/tmp/uwsgi;
    scgi_temp_path {d}/tmp/scgi;
    server {{
        listen 127.0.0.1:{self.port};
        location / {{
            proxy_pass {upstream_url};
            {extra}
        }}
    }}
}}
"""
        (d / "nginx.conf").write_text(conf)
        self.proc = subprocess.Popen(
            [binary, "-p", str(d), "-e", str(d / "error.log"), "-c", str(d / "nginx.conf"), "-g", "daemon off;"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            wait_port(self.port, self.proc, timeout=15)
        except Exception:
            self.stop()
            raise AssertionError(f"nginx did not start: {self.errors()}") from None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def errors(self) -> str:
        log = self.dir / "error.log"
        return log.read_text(errors="replace")[-2000:] if log.exists() else ""

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def through_nginx(tmp_path: Path, upstream: SimServer, extra: str, tokens: int = TOKENS) -> tuple[dict, Path]:
    """One streamed chat request, client -> firsttoken -> nginx -> upstream; its record and the database."""
    ng = Nginx(nginx_binary(), tmp_path / "nginx", upstream.url, extra)
    db = tmp_path / "ft.db"
    try:
        with ProxyServer([ng.url], str(db), port=0) as proxy:
            body = {"model": "gpt-4o-mini", "stream": True, "max_tokens": tokens,
                    "stream_options": {"include_usage": True},
                    "messages": [{"role": "user", "content": "Say something."}]}
            with httpx.stream("POST", proxy.url + "/v1/chat/completions", json=body, timeout=20,
                              headers={"authorization": "Bearer sk-test-nginx-0123456789abcdef"}) as r:
                assert r.status_code == 200, r.read()
                got = b"".join(r.iter_raw())
            assert got  # the client got the stream (bytes unchanged is test_capture's business)
            proxy.flush()
    finally:
        ng.stop()
    conn = sqlite3.connect(str(db))
    conn.row_factory = sqlite3.Row
    try:
        rows = [dict(x) for x in conn.execute("SELECT * FROM requests")]
    finally:
        conn.close()
    assert len(rows) == 1
    return rows[0], db


def findings(row: dict) -> list[dict]:
    fs = json.loads(row["findings"] or "[]")
    assert all(f["code"] in CATALOG for f in fs)
    return fs


def _codes(row: dict) -> list[str]:
    return [f["code"] for f in findings(row)]


def _describe(row: dict) -> str:
    return (f"ttfb {row['ttfb_ms']} ttft {row['ttft_ms']} events {row['events']} offsets {row['event_offsets']} "
            f"findings {[(f['code'], f['message']) for f in findings(row)]}")


@pytest.mark.parametrize("config", ["default", "gzip", "large_buffers", "postpone_output_0"])
def test_buffering_nginx_is_named_with_its_fix(tmp_path, upstream, config):
    row, db = through_nginx(tmp_path, upstream, CONFIGS[config])
    assert row["server"].startswith("nginx/") and row["hop"] == row["server"], row["server"]
    b = next((f for f in findings(row) if f["code"] == "stream.buffered"), None)
    assert b is not None, _describe(row)
    assert b["severity"] == "warn" and b["params"]["hop_kind"] == "nginx"
    assert b["message"].startswith(f"{row['server']} held this stream"), b["message"]
    assert "proxy_buffering off" in b["hint"] and "X-Accel-Buffering: no" in b["hint"] and "gzip_types" in b["hint"]
    # its TTFB and gap are nginx's delay: neither a network nor a prefill verdict, and no stall
    assert not {"latency.network", "latency.prefill", "stream.stall"} & set(_codes(row)), _describe(row)
    if config == "postpone_output_0":  # the headers came early; the wait after them was nginx's
        assert b["params"]["variant"] in ("bursts", "tail") and b["params"]["wait_ms"] >= 100, _describe(row)
    else:  # nginx sent its headers with its first buffer
        assert b["params"]["variant"] == "with_headers", _describe(row)
    shown = CliRunner(env={"FIRSTTOKEN_LANG": "en", "COLUMNS": "160"}).invoke(
        cli, ["show", row["id"][:8], "--db", str(db)], catch_exceptions=False).output
    assert f"answered by {row['server']}" in shown and "gap (prefill)" not in shown
    assert "gap (buffered)" in shown and "held this stream" in shown


def test_short_answer_through_default_nginx_comes_whole_with_the_headers(tmp_path, upstream):
    row, _ = through_nginx(tmp_path, upstream, CONFIGS["default"], tokens=8)
    b = next((f for f in findings(row) if f["code"] == "stream.buffered"), None)
    assert b is not None and b["params"]["variant"] == "with_headers", _describe(row)
    assert b["params"]["held_events"] == row["events"] >= 8


@pytest.mark.parametrize("config", ["buffering_off", "http11"])
def test_nginx_that_does_not_hold_the_stream_stays_silent(tmp_path, upstream, config):
    row, db = through_nginx(tmp_path, upstream, CONFIGS[config])
    assert row["server"].startswith("nginx/") and row["events"] >= TOKENS
    bad = [(f["code"], f["message"]) for f in findings(row)
           if f["severity"] in ("error", "warn") and f["code"] != "proxy.saturated"]
    assert not bad, _describe(row)
    assert row["itl_p50_ms"] > 5, _describe(row)  # tokens as the model made them, 25 ms apart
    shown = CliRunner(env={"FIRSTTOKEN_LANG": "en", "COLUMNS": "160"}).invoke(
        cli, ["show", row["id"][:8], "--db", str(db)], catch_exceptions=False).output
    assert "gap (prefill)" in shown and "buffered" not in shown
