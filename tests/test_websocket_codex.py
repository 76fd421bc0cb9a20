"""The real Codex (0.171, its built-in OpenAI provider) speaking Responses over a WebSocket, offline,
against tests/ws_upstream.py: through `firsttoken proxy` and through `firsttoken run` (issue 29 #1, #6).
One record per turn, TTFT inside the band, the transport Codex chose left as it was."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from conftest import FAST, rows
from test_run import FT, base_env, check_summary, find_cli

from firsttoken.cli.proxy.server import ProxyServer
from firsttoken.cli.simulate import SimConfig, SimServer
from tests.ws_upstream import WsUpstream

pytestmark = pytest.mark.slow  # the real Codex CLI

KEY = "sk-test-1234567890123456789012"
TEXT = "tok0 tok1 tok2 tok3 tok4"


def codex_exec(codex: str, env: dict, cwd: Path, *extra: str, via: list[str] | None = None, db=None):
    argv = [codex, "exec", "--skip-git-repo-check", *extra, "say hi"]
    if via is not None:
        argv = [FT, "run", "--db", str(db), "--", *argv]
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120, cwd=cwd, stdin=subprocess.DEVNULL)


def check_turns(up: WsUpstream, rs: list[dict]) -> None:
    """Every frame Codex sent is a record, and the answered one's TTFT is in the band."""
    assert up.upgrades and all(h.get("openai-beta", "").startswith("responses_websockets=") for h in up.upgrades)
    assert len(rs) == len(up.turns) >= 1, [(r["method"], r["status"]) for r in rs]
    assert all(r["transport"] == "websocket" and r["method"] == "WS" and r["api"] == "openai.responses" for r in rs)
    assert not [r for r in rs if r["ws_turn"] is None]  # no row for the upgrade
    generated = [(r, t) for r, t in zip(rs, up.turns) if t.first("response.output_text.delta")]
    assert generated
    for r, t in generated:
        up_ttft = (t.first("response.output_text.delta") - t.read_at) * 1000
        assert up_ttft - 2 <= r["ttft_ms"] <= up_ttft + 150, (up_ttft, r["ttft_ms"])
        assert r["usage_prompt_tokens"] == 42 and r["model"] and r["stream"] == 1 and r["stream_done"] == 1
        assert json.loads(r["ws_connection"])["headers"]["x-models-etag"] == "etag-123"
    assert len({r["conversation_id"] for r in rs}) == 1


def test_codex_builtin_provider_through_the_proxy(tmp_path):
    codex = find_cli("codex")
    env = base_env(tmp_path, OPENAI_API_KEY=KEY)
    db = tmp_path / "ft.db"
    with WsUpstream(ttft_ms=300, model_header="gpt-6.2-sol") as up, ProxyServer([up.url], str(db), port=0) as p:
        r = codex_exec(codex, env, tmp_path, "-c", f'openai_base_url="{p.url}/v1"')
        assert r.returncode == 0, r.stdout + r.stderr
        assert TEXT in r.stdout
        p.flush()
        check_turns(up, rows(db))


def test_codex_builtin_provider_through_run(tmp_path):
    """`run` keeps Codex on its built-in provider (`-c openai_base_url=`): it stays on the WebSocket."""
    codex = find_cli("codex")
    env = base_env(tmp_path, OPENAI_API_KEY=KEY)
    db = tmp_path / "ft.db"
    with WsUpstream(ttft_ms=300, model_header="gpt-6.2-sol") as up:
        conf = Path(env["HOME"]) / ".codex"
        conf.mkdir()
        (conf / "config.toml").write_text(f'openai_base_url = "{up.url}/v1"\n')
        r = codex_exec(codex, env, tmp_path, via=[], db=db)
        assert r.returncode == 0, r.stdout + r.stderr
        assert TEXT in r.stdout
        rs = rows(db)
        check_turns(up, rs)
    check_summary(r.stderr, rs)
    assert "via: codex -c openai_base_url" in r.stderr
    assert "proxy.saturated" not in r.stderr


def test_codex_falls_back_after_refused_upgrades(tmp_path):
    """A route that answers the upgrade 404 and serves HTTP + SSE (the simulator with --no-websocket):
    Codex tries the WebSocket several times, then falls back to HTTP. The tries are one finding each,
    not `path.not_found`, and the HTTP request adds them up with the fix."""
    codex = find_cli("codex")
    env = base_env(tmp_path, OPENAI_API_KEY=KEY)
    db = tmp_path / "ft.db"
    with SimServer(SimConfig(**FAST, websocket=False)) as sim, ProxyServer([sim.url], str(db), port=0) as p:
        r = codex_exec(codex, env, tmp_path, "-c", f'openai_base_url="{p.url}/v1"')
        assert r.returncode == 0, r.stdout + r.stderr
        p.flush()
        rs = rows(db)
    refused = [x for x in rs if x["transport"] == "websocket"]
    http = [x for x in rs if x["transport"] == "http" and x["api"] == "openai.responses"]
    assert len(refused) >= 2 and all(x["status"] == 404 and x["ws_turn"] is None for x in refused), rs
    assert http and all(x["status"] == 200 for x in http)
    codes = [{f["code"] for f in json.loads(x["findings"] or "[]")} for x in refused]
    assert all("ws.upgrade_refused" in c and "path.not_found" not in c for c in codes), codes
    fallback = [f for f in json.loads(http[0]["findings"] or "[]") if f["code"] == "ws.fallback"]
    assert fallback and fallback[0]["params"]["tries"] == len(refused), http[0]["findings"]
    assert "supports_websockets = false" in fallback[0]["hint"]
