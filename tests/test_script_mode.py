"""Script mode: the real `mitmdump -s <firsttoken script-path>` in front of the simulator."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from conftest import rows

from firsttoken.addon import script as ft_script
from firsttoken.cli.loopback import free_port

MITMDUMP = Path(sys.executable).parent / ("mitmdump.exe" if os.name == "nt" else "mitmdump")
pytestmark = [pytest.mark.slow, pytest.mark.skipif(not MITMDUMP.exists(), reason=f"no mitmdump next to {sys.executable}")]

CHAT = {"model": "sim-1", "messages": [{"role": "user", "content": "hello"}], "stream": True,
        "stream_options": {"include_usage": True}}




class Mitmdump:
    """mitmdump on a free port (it cannot report a port-0 choice), stopped with SIGINT like Ctrl-C."""

    def __init__(self, tmp: Path, script: str, *args: str) -> None:
        self.tmp, self.script, self.args = tmp, script, args
        self.proc: subprocess.Popen | None = None
        self.port = 0
        self.log = tmp / "mitmdump.log"

    def __enter__(self) -> Mitmdump:
        for _attempt in range(3):
            self.port = free_port()
            cmd = [str(MITMDUMP), "-s", self.script, "--listen-host", "127.0.0.1", "--listen-port", str(self.port),
                   "--set", f"confdir={self.tmp / 'mitm'}", *self.args]
            env = {k: v for k, v in os.environ.items() if k != "FIRSTTOKEN_DB"}
            self.proc = subprocess.Popen(cmd, stdout=self.log.open("ab"), stderr=subprocess.STDOUT, env=env)
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and self.proc.poll() is None:
                try:
                    socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                    return self
                except OSError:
                    time.sleep(0.1)
            self._stop()
        raise RuntimeError(f"mitmdump did not start:\n{self.log.read_text()[-3000:]}")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _stop(self) -> int | None:
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else None
        self.proc.send_signal(signal.SIGINT if os.name != "nt" else signal.CTRL_C_EVENT)
        try:
            return self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait(5)

    def __exit__(self, *exc) -> None:
        self._stop()


def test_script_path_is_the_addon_module():
    assert Path(ft_script.__file__).name == "script.py"
    assert any(type(a).__name__ == "Capture" for a in ft_script.addons)


def test_mitmdump_reverse_mode_records(sim, tmp_path, db_path):
    # docs/clients.md shows this command
    with Mitmdump(tmp_path, ft_script.__file__, "--mode", f"reverse:{sim.url}",
                  "--set", f"firsttoken_db={db_path}") as m:
        with httpx.stream("POST", m.url + "/v1/chat/completions", json=CHAT, timeout=20,
                          headers={"authorization": "Bearer sk-script-mode-0000000000000000"}) as r:
            assert r.status_code == 200
            body = b"".join(r.iter_raw())
        assert b"[DONE]" in body
    (row,) = rows(db_path)  # mitmdump wrote every pending record on shutdown
    assert row["state"] == "done" and row["status"] == 200 and row["api"] == "openai.chat"
    assert row["route"] == "default" and row["upstream"] == f"http://127.0.0.1:{sim.port}"
    assert row["model"] == "sim-1" and row["events"] == sim.config.output_tokens
    assert row["ttfb_ms"] > 0 and row["ttft_ms"] >= row["ttfb_ms"] and row["key_fingerprint"] == "sk-…0000"


def test_mitmdump_with_firsttoken_upstream_routes(sim, tmp_path, db_path):
    with Mitmdump(tmp_path, ft_script.__file__, "--mode", f"reverse:{sim.url}",
                  "--set", f"firsttoken_db={db_path}",
                  "--set", f"firsttoken_upstream=sim={sim.url}/v1",
                  "--set", f"firsttoken_upstream=anth={sim.url}") as m:
        r1 = httpx.post(m.url + "/sim/chat/completions", json=CHAT, timeout=20)
        r2 = httpx.post(m.url + "/anth/v1/messages", timeout=20,
                        json={"model": "claude-sim", "max_tokens": 20, "messages": [{"role": "user", "content": "hi"}]})
        r3 = httpx.post(m.url + "/elsewhere/v1/chat/completions", json=CHAT, timeout=20)
        assert (r1.status_code, r2.status_code, r3.status_code) == (200, 200, 404)
        assert "no route" in r3.text
    rs = {r["route"]: r for r in rows(db_path)}
    assert set(rs) == {"sim", "anth", None}
    assert rs["sim"]["upstream_url"] == f"http://127.0.0.1:{sim.port}/v1/chat/completions"
    assert rs["anth"]["api"] == "anthropic.messages" and rs["anth"]["status"] == 200


def test_mitmdump_serves_metrics(sim, tmp_path, db_path):
    """The metrics addon in script mode (what script.py holds once the lead adds it)."""
    script = tmp_path / "ft_metrics_script.py"
    script.write_text("from firsttoken.addon.capture import Capture\n"
                      "from firsttoken.addon.metrics import MetricsAddon\n"
                      "capture = Capture()\n"
                      "addons = [capture, MetricsAddon(capture)]\n")
    mport = free_port()
    with Mitmdump(tmp_path, str(script), "--mode", f"reverse:{sim.url}", "--set", f"firsttoken_db={db_path}",
                  "--set", f"firsttoken_metrics_port={mport}") as m:
        assert httpx.post(m.url + "/v1/chat/completions", json=CHAT, timeout=20).status_code == 200
        deadline = time.monotonic() + 10
        text = ""
        while time.monotonic() < deadline:
            text = httpx.get(f"http://127.0.0.1:{mport}/metrics", timeout=5).text
            if 'gen_ai_client_operation_duration_seconds_count{' in text:
                break
            time.sleep(0.1)
    from prometheus_client.parser import text_string_to_metric_families

    fams = {f.name: f for f in text_string_to_metric_families(text)}
    (count,) = [s for s in fams["gen_ai_client_operation_duration_seconds"].samples if s.name.endswith("_count")]
    assert count.value == 1 and count.labels["gen_ai_request_model"] == "sim-1"
    assert count.labels["gen_ai_provider_name"] == "openai" and count.labels["server_port"] == str(sim.port)
