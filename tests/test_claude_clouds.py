"""Claude Code on Bedrock and on Vertex AI: what `run`, `env` and `doctor` make of its set-up
(CLAUDE_CODE_USE_BEDROCK / _VERTEX, the base URL, region, project and SKIP_*_AUTH variables), and,
in the slow tier, the real Claude Code against a loopback Bedrock / Vertex through `firsttoken run`
and `firsttoken proxy`: the same requests reach the same server as without firsttoken."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest
from cloud_upstream import CloudUpstream
from conftest import rows, start_proxy_process
from test_run import base_env, check_summary, find_cli, ft_run

from firsttoken.cli.doctor import checks as dc
from firsttoken.cli.env import clients as E
from firsttoken.cli.env.target import resolve_target
from firsttoken.cli.run.upstreams import make_plan

BEDROCK = {"CLAUDE_CODE_USE_BEDROCK": "1", "AWS_REGION": "eu-west-1"}
VERTEX = {"CLAUDE_CODE_USE_VERTEX": "1", "CLOUD_ML_REGION": "europe-west1", "ANTHROPIC_VERTEX_PROJECT_ID": "p"}


def plan(env: dict, tmp_path: Path):
    return make_plan(["claude", "-p", "hi"], env, tmp_path, tmp_path, managed=(tmp_path / "none.json",))


def test_run_plans_bedrock_and_vertex(tmp_path):
    p = plan(BEDROCK, tmp_path)  # SigV4: the host is signed, so only forward mode keeps it right
    assert p.upstreams["bedrock"].url == "https://bedrock-runtime.eu-west-1.amazonaws.com"
    assert p.forward_reason and "SigV4" in p.forward_reason
    p = plan({**BEDROCK, "CLAUDE_CODE_SKIP_BEDROCK_AUTH": "1", "ANTHROPIC_BEDROCK_BASE_URL": "https://gw.example/bedrock"},
             tmp_path)
    assert (p.upstreams["bedrock"].url, p.forward_reason) == ("https://gw.example/bedrock", None)
    assert plan({**BEDROCK, "AWS_BEARER_TOKEN_BEDROCK": "ABSK-example"}, tmp_path).forward_reason is None
    p = plan(VERTEX, tmp_path)  # an OAuth bearer token: not bound to the host
    assert (p.upstreams["vertex"].url, p.forward_reason) == ("https://europe-west1-aiplatform.googleapis.com/v1", None)
    assert plan({**VERTEX, "CLOUD_ML_REGION": "global"}, tmp_path).upstreams["vertex"].url == \
        "https://aiplatform.googleapis.com/v1"
    assert "VERTEX_REGION_CLAUDE_4_5_SONNET" in plan({**VERTEX, "VERTEX_REGION_CLAUDE_4_5_SONNET": "us-east5"},
                                                     tmp_path).forward_reason
    assert not any("v1" in n for n in p.notes)  # Vertex's /v1 is the client's own: no base-URL warning
    # set in settings.json, as Claude Code reads it
    (tmp_path / ".claude").mkdir()
    (tmp_path / ".claude" / "settings.json").write_text(json.dumps({"env": {**VERTEX, "CLAUDE_CODE_USE_VERTEX": "true"}}))
    assert "vertex" in plan({}, tmp_path).upstreams


def test_run_redirects_each_through_its_own_variable(tmp_path):
    from firsttoken.cli.run.upstreams import redirect

    for env, var, base in ((VERTEX, "ANTHROPIC_VERTEX_BASE_URL", "http://127.0.0.1:9/vertex"),
                           ({**BEDROCK, "CLAUDE_CODE_SKIP_BEDROCK_AUTH": "1"}, "ANTHROPIC_BEDROCK_BASE_URL",
                            "http://127.0.0.1:9/bedrock")):
        p = plan(env, tmp_path)
        r = redirect(p, "http://127.0.0.1:9", p.routes(), env)
        i = r.argv.index("--settings")
        assert json.loads(r.argv[i + 1]) == {"env": {var: base}}


def test_env_prints_the_cloud_base_url(tmp_path):
    t = resolve_target(upstreams=["https://bedrock-runtime.us-east-1.amazonaws.com"], states=[])
    p = E.plan_for("claude-code", t, env=BEDROCK, home=tmp_path)
    assert p.exports == [("ANTHROPIC_BEDROCK_BASE_URL", "http://127.0.0.1:8787")]
    assert any("SigV4" in w and "CLAUDE_CODE_SKIP_BEDROCK_AUTH=1" in w and "--forward" in w for w in p.warnings)
    t = resolve_target(upstreams=["https://us-east5-aiplatform.googleapis.com/v1"], states=[])
    p = E.plan_for("claude-code", t, env=VERTEX, home=tmp_path)
    assert p.exports == [("ANTHROPIC_VERTEX_BASE_URL", "http://127.0.0.1:8787")] and not p.warnings


def test_doctor_says_sigv4_cannot_go_through_a_reverse_proxy(tmp_path):
    def checks(env):
        c = dc.Context(env=env, home=tmp_path, cwd=tmp_path, net=dc.Net(1.0), proxy_url="http://127.0.0.1:8787")
        return {x.id: x for x in dc.check_env_base_urls(c)}

    got = checks({**BEDROCK, "ANTHROPIC_BEDROCK_BASE_URL": "http://127.0.0.1:8787"})
    assert got["base_url.environment.ANTHROPIC_BEDROCK_BASE_URL"].status == dc.PASS
    bad = got["base_url.bedrock_sigv4"]
    assert bad.status == dc.FAIL and "--forward" in bad.fix and "CLAUDE_CODE_SKIP_BEDROCK_AUTH=1" in bad.fix
    assert "base_url.bedrock_sigv4" not in checks({**BEDROCK, "ANTHROPIC_BEDROCK_BASE_URL": "http://127.0.0.1:8787",
                                                   "CLAUDE_CODE_SKIP_BEDROCK_AUTH": "1"})
    v = checks({**VERTEX, "ANTHROPIC_VERTEX_BASE_URL": "http://127.0.0.1:8787"})
    assert v["base_url.environment.ANTHROPIC_VERTEX_BASE_URL"].status == dc.PASS


# -- the real Claude Code (slow) ---------------------------------------------------------------------

def cloud_env(tmp_path: Path, kind: str, base: str) -> dict:
    env = {k: v for k, v in base_env(tmp_path, DISABLE_TELEMETRY="1", CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
                                     DISABLE_AUTOUPDATER="1").items() if not k.startswith(("AWS_", "CLOUD_ML", "GOOGLE_"))}
    if kind == "bedrock":
        env.update(CLAUDE_CODE_USE_BEDROCK="1", CLAUDE_CODE_SKIP_BEDROCK_AUTH="1", ANTHROPIC_BEDROCK_BASE_URL=base,
                   AWS_REGION="us-east-1")
    else:
        env.update(CLAUDE_CODE_USE_VERTEX="1", CLAUDE_CODE_SKIP_VERTEX_AUTH="1", ANTHROPIC_VERTEX_BASE_URL=base + "/v1",
                   CLOUD_ML_REGION="us-east5", ANTHROPIC_VERTEX_PROJECT_ID="my-project")
    return env


API = {"bedrock": "anthropic.bedrock", "vertex": "anthropic.vertex"}


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["bedrock", "vertex"])
def test_claude_code_through_run(tmp_path, kind):
    claude = find_cli("claude")
    with CloudUpstream(gap=0.01, first_after=0.05) as up:
        env = cloud_env(tmp_path, kind, up.url)
        alone = subprocess.run([claude, "-p", "hi"], env=env, capture_output=True, text=True, timeout=120,
                               cwd=tmp_path, stdin=subprocess.DEVNULL)
        assert alone.returncode == 0 and "Hello!" in alone.stdout, alone.stdout + alone.stderr
        without = [e["path"] for e in up.log]
        up.log.clear()
        db = tmp_path / "ft.db"
        r = ft_run(db, [claude, "-p", "hi"], env, timeout=120, cwd=tmp_path)
        assert r.returncode == 0 and "Hello!" in r.stdout, r.stdout + r.stderr
        through = [e["path"] for e in up.log]
    assert through == without  # the same requests reached the same server
    rs = rows(db)
    assert rs and all(x["upstream"].startswith(up.url) for x in rs)
    main = [x for x in rs if x["api"] == API[kind]]
    assert main and all(x["status"] == 200 and x["stream"] == 1 and x["ttfb_ms"] < x["ttft_ms"] for x in main)
    assert all(x["model"] and x["usage_completion_tokens"] == 7 for x in main)
    check_summary(r.stderr, rs)
    assert f"ANTHROPIC_{kind.upper()}_BASE_URL" in r.stderr


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["bedrock", "vertex"])
def test_claude_code_through_proxy(tmp_path, kind):
    claude = find_cli("claude")
    db = tmp_path / "ft.db"
    with CloudUpstream(gap=0.01, first_after=0.05) as up:
        p, port = start_proxy_process(["--db", str(db), "--upstream", up.url])
        try:
            env = cloud_env(tmp_path, kind, f"http://127.0.0.1:{port}")
            t0 = time.monotonic()
            r = subprocess.run([claude, "-p", "hi"], env=env, capture_output=True, text=True, timeout=120,
                               cwd=tmp_path, stdin=subprocess.DEVNULL)
            assert r.returncode == 0 and "Hello!" in r.stdout, r.stdout + r.stderr
            assert time.monotonic() - t0 < 120
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and not [x for x in rows(db) if x["state"] == "done"]:
                time.sleep(0.2)
        finally:
            p.terminate()
            p.wait(30)
    main = [x for x in rows(db) if x["api"] == API[kind]]
    assert main and all(x["status"] == 200 and x["ttft_ms"] is not None and x["stream_done"] == 1 for x in main)
    if kind == "bedrock":
        assert all(x["content_type"] == "application/vnd.amazon.eventstream" for x in main)
        assert all("amazon-bedrock-invocationmetrics.firstbytelatency" in json.loads(x["hop_headers"]) for x in main)


def test_doctor_reads_the_cloud_base_urls_in_claude_settings(tmp_path):
    c = dc.Context(env={}, home=tmp_path, cwd=tmp_path, net=dc.Net(1.0), proxy_url="http://127.0.0.1:8787")
    got = {x.id: x for x in dc.check_claude_code(c, [("~/.claude/settings.json",
                                                       {"ANTHROPIC_VERTEX_BASE_URL": "https://127.0.0.1:8787"})])}
    bad = got["base_url.~/.claude/settings.json.ANTHROPIC_VERTEX_BASE_URL"]
    assert bad.status == dc.FAIL and "https:// to firsttoken" in bad.title
