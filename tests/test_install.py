"""firsttoken in its own environment, beside an app's on the newest SDKs (issue 36 item 7): on Python 3.11
mitmproxy 11 pins h11<=0.14 while the newest openai needs h11>=0.16, so the two cannot share a venv without a
broken requirement. README's way: firsttoken in its own venv, `firsttoken run` wrapping the app's
interpreter. This installs the newest SDKs from the registry into a venv of their own and checks it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import rows
from runkit import FT, base_env, ft_run

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

APP = """
import openai, anthropic, sys
from google import genai  # imported: the three SDKs side by side in the app's venv
c = openai.OpenAI(max_retries=0)
s = c.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}], stream=True,
                              stream_options={"include_usage": True})
print("".join(ch.choices[0].delta.content or "" for ch in s if ch.choices))
print("openai", openai.__version__, file=sys.stderr)
"""


def test_an_app_on_the_newest_sdks_in_its_own_venv_is_wrapped_by_run(sim, tmp_path):
    app = tmp_path / "app-venv"
    subprocess.run([sys.executable, "-m", "venv", str(app)], check=True, timeout=120)
    py = str(app / "bin" / "python")
    subprocess.run([py, "-m", "pip", "install", "-q", "-U", "pip"], check=True, timeout=300)
    got = subprocess.run([py, "-m", "pip", "install", "-q", "--disable-pip-version-check", "openai", "anthropic",
                          "google-genai"], capture_output=True, text=True, timeout=600)
    assert got.returncode == 0, got.stderr[-3000:]
    versions = json.loads(subprocess.run([py, "-c", "import json, importlib.metadata as m; print(json.dumps("
                                          "{p: m.version(p) for p in ('openai', 'h11')}))"],
                                         capture_output=True, text=True, check=True).stdout)
    # firsttoken's own environment keeps every requirement whole
    check = subprocess.run([str(Path(FT).parent / "python"), "-m", "pip", "check"], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    script = tmp_path / "app.py"
    script.write_text(APP)
    db = tmp_path / "ft.db"
    r = ft_run(db, [py, str(script)], base_env(tmp_path, OPENAI_BASE_URL=sim.url + "/v1", OPENAI_API_KEY="sk-test-" + "x" * 24))
    assert r.returncode == 0, r.stderr
    rs = rows(db)
    assert len(rs) == 1 and rs[0]["status"] == 200 and rs[0]["ttft_ms"] is not None, rs
    assert f"openai {versions['openai']}" in r.stderr, (versions, r.stderr)
    print(versions)
