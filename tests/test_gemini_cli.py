"""The real Gemini CLI (npm @google/gemini-cli, installed in .ci/gemini by .ci/run), offline against a
loopback Gemini API: through `firsttoken run -- gemini -p …` and through `firsttoken proxy` with
GOOGLE_GEMINI_BASE_URL, every request it sent is recorded as gemini.generate, none reached the decoy its
.env file names, its key never reaches the database and its settings are left as they were."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest
from conftest import rows, start_proxy_process
from gemini_upstream import GEMINI_TEXT, GeminiUpstream
from runkit import GEMINI_BIN, base_env, find_client, ft_run, snapshot

pytestmark = pytest.mark.slow

KEY = "AIzaSyD-test-key-0000000000000000000wxyz"
QUIET = {"privacy": {"usageStatisticsEnabled": False}, "telemetry": {"enabled": False},
         "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False}}


def gemini_env(tmp_path: Path, upstream: GeminiUpstream, decoy: GeminiUpstream) -> tuple[dict[str, str], Path]:
    """Set up as Gemini CLI's docs say: auth type gemini-api-key in ~/.gemini/settings.json, GEMINI_API_KEY and
    GOOGLE_GEMINI_BASE_URL in the environment; the project's .gemini/.env names a decoy (the environment wins)."""
    env = {k: v for k, v in base_env(tmp_path).items() if not k.startswith(("GEMINI_", "GOOGLE_"))}
    env.update(GEMINI_API_KEY=KEY, GOOGLE_GEMINI_BASE_URL=upstream.url, GEMINI_CLI_TRUST_WORKSPACE="true")
    settings = Path(env["HOME"]) / ".gemini" / "settings.json"
    settings.parent.mkdir(parents=True)
    settings.write_text(json.dumps({**QUIET, "security": {"auth": {"selectedType": "gemini-api-key"}}}, indent=2))
    work = tmp_path / "work"
    (work / ".gemini").mkdir(parents=True)
    (work / ".gemini" / ".env").write_text(f"GOOGLE_GEMINI_BASE_URL={decoy.url}\n")
    return env, work


def check(out: str, db: Path, upstream: GeminiUpstream, decoy: GeminiUpstream) -> list[dict]:
    assert GEMINI_TEXT in out, out
    assert decoy.arrivals == [], decoy.arrivals
    rs = rows(db)
    assert upstream.arrivals and len(rs) == len(upstream.arrivals), (upstream.arrivals, [r["path"] for r in rs])
    assert all(r["upstream_url"].startswith(upstream.url + "/") and r["status"] == 200 for r in rs), rs
    assert all(r["api"] == "gemini.generate" and r["model"] for r in rs), [(r["api"], r["path"]) for r in rs]
    assert all(r["key_header"] == "x-goog-api-key" and r["key_fingerprint"] == "AIz…wxyz" for r in rs)
    streamed = [r for r in rs if r["stream"] == 1]
    assert streamed and all(r["ttft_ms"] and r["usage_prompt_tokens"] == 40 and r["prompt_tokens_est"] for r in streamed)
    for f in db.parent.glob(db.name + "*"):
        assert KEY.encode() not in f.read_bytes(), f"the key reached {f.name}"
    return rs


def test_gemini_cli_through_run(tmp_path):
    gemini = find_client("gemini", GEMINI_BIN)
    with GeminiUpstream() as upstream, GeminiUpstream() as decoy:
        env, work = gemini_env(tmp_path, upstream, decoy)
        mine = (Path(env["HOME"]) / ".gemini" / "settings.json", work / ".gemini" / ".env")  # (it keeps history beside)
        before = snapshot(*mine)
        # the differential: without firsttoken, where do its requests go?
        alone = subprocess.run([gemini, "-p", "Say hi"], env=env, capture_output=True, text=True, timeout=180,
                               cwd=work, stdin=subprocess.DEVNULL)
        assert alone.returncode == 0 and GEMINI_TEXT in alone.stdout, alone.stdout + alone.stderr
        went = sorted((m, path) for m, path, _ in upstream.arrivals)
        assert went and decoy.arrivals == []
        upstream.arrivals.clear()
        db = tmp_path / "ft.db"
        r = ft_run(db, [gemini, "-p", "Say hi"], env, timeout=180, cwd=work)
        assert r.returncode == 0, r.stdout + r.stderr
        check(r.stdout, db, upstream, decoy)
        assert sorted((m, path) for m, path, _ in upstream.arrivals) == went  # the same requests, the same server
        assert "via: GOOGLE_GEMINI_BASE_URL → the proxy" in r.stderr, r.stderr
        found = {code for _, code in re.findall(r"^  (warn|error) ([\w.]+)", r.stderr, re.M)}
        assert found - {"proxy.saturated", "stream.buffered"} == set(), r.stderr  # (this machine's load aside)
        assert snapshot(*mine) == before


def test_gemini_cli_through_a_running_proxy(tmp_path):
    """`firsttoken proxy --upstream <Gemini API>` and GOOGLE_GEMINI_BASE_URL set to it (what `env gemini-cli` prints)."""
    gemini = find_client("gemini", GEMINI_BIN)
    with GeminiUpstream() as upstream, GeminiUpstream() as decoy:
        env, work = gemini_env(tmp_path, upstream, decoy)
        db = tmp_path / "ft.db"
        p, port = start_proxy_process(["--db", str(db), "--upstream", upstream.url],
                                      env={**os.environ, "FIRSTTOKEN_STATE_DIR": env.get("FIRSTTOKEN_STATE_DIR", "")})
        try:
            env["GOOGLE_GEMINI_BASE_URL"] = f"http://127.0.0.1:{port}"
            r = subprocess.run([gemini, "-p", "Say hi"], env=env, capture_output=True, text=True, timeout=180,
                               cwd=work, stdin=subprocess.DEVNULL)
            assert r.returncode == 0, r.stdout + r.stderr
        finally:
            p.terminate()
            p.wait(30)
        check(r.stdout, db, upstream, decoy)


APP = """
import os, sys
from google import genai
client = genai.Client(api_key=os.environ["GEMINI_API_KEY"])  # the base URL: GOOGLE_GEMINI_BASE_URL, as the SDK reads it
print("".join(c.text or "" for c in client.models.generate_content_stream(model="gemini-2.5-flash", contents="hi")))
"""


def test_a_google_genai_app_through_run(tmp_path):
    """Any other command: the GOOGLE_GEMINI_BASE_URL it already has goes to the proxy, which forwards to it."""
    import sys

    with GeminiUpstream() as upstream, GeminiUpstream() as decoy:
        env = {k: v for k, v in base_env(tmp_path).items() if not k.startswith(("GEMINI_", "GOOGLE_"))}
        env.update(GEMINI_API_KEY=KEY, GOOGLE_GEMINI_BASE_URL=upstream.url)
        (tmp_path / "app.py").write_text(APP)
        db = tmp_path / "ft.db"
        r = ft_run(db, [sys.executable, "app.py"], env, timeout=120, cwd=tmp_path)
        assert r.returncode == 0, r.stdout + r.stderr
        [row] = check(r.stdout, db, upstream, decoy)
        assert row["stream"] == 1 and row["model"] == "gemini-2.5-flash"
        assert "via: base URLs in the environment (GOOGLE_GEMINI_BASE_URL, OLLAMA_HOST)" in r.stderr, r.stderr


def test_why_run_uses_forward_mode_when_the_key_alone_chose_the_auth_type(tmp_path):
    """With GEMINI_API_KEY alone (no auth type in any settings.json), 0.61 refuses `gemini -p` once
    GOOGLE_GEMINI_BASE_URL is set ("gateway"); a system settings file that would keep gemini-api-key is read
    only when root owns it and its directories. So `run` leaves the variable alone and uses forward mode."""
    from firsttoken.cli.run.upstreams import make_plan

    gemini = find_client("gemini", GEMINI_BIN)
    with GeminiUpstream() as upstream:
        env = {k: v for k, v in base_env(tmp_path).items() if not k.startswith(("GEMINI_", "GOOGLE_"))}
        env.update(GEMINI_API_KEY=KEY, GEMINI_CLI_TRUST_WORKSPACE="true",
                   GEMINI_CLI_SYSTEM_SETTINGS_PATH=str(tmp_path / "etc" / "settings.json"))
        home, work = Path(env["HOME"]), tmp_path / "work"
        (home / ".gemini").mkdir(parents=True)
        (home / ".gemini" / "settings.json").write_text(json.dumps(QUIET))
        work.mkdir()
        assert make_plan([gemini, "-p", "Say hi"], env, home, work).forward_reason
        refused = subprocess.run([gemini, "-p", "Say hi"], env={**env, "GOOGLE_GEMINI_BASE_URL": upstream.url},
                                 capture_output=True, text=True, timeout=180, cwd=work, stdin=subprocess.DEVNULL)
        assert refused.returncode != 0 and "Invalid auth method" in refused.stderr, refused.stderr
        assert upstream.arrivals == []
        defaults = tmp_path / "system-defaults.json"  # what a private copy would be: the CLI skips it
        defaults.write_text(json.dumps({"security": {"auth": {"selectedType": "gemini-api-key"}}}))
        skipped = subprocess.run([gemini, "-p", "Say hi"], capture_output=True, text=True, timeout=180, cwd=work,
                                 env={**env, "GOOGLE_GEMINI_BASE_URL": upstream.url,
                                      "GEMINI_CLI_SYSTEM_DEFAULTS_PATH": str(defaults)}, stdin=subprocess.DEVNULL)
        if os.geteuid() != 0 or str(tmp_path).startswith("/tmp"):
            assert skipped.returncode != 0 and "Skipping system defaults file" in skipped.stderr, skipped.stderr
