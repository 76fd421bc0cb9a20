"""`firsttoken run`'s summary (issue 23, item 4): advice that can help, and `~` on estimates.

One rule (cli/run/summary.no_request_advice) decides what a zero-request run suggests: --forward
only when it was not used and can help (HTTPS to a host off this machine); for a plain-HTTP or
loopback upstream (vLLM, Ollama, a LiteLLM proxy) the client's own base URL; for Claude Code in a
HOME where it never ran, what its first-run check did and what to do.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from firsttoken.cli.run.summary import forward_can_help, no_request_advice, render, summarize

FT = str(Path(sys.executable).parent / "firsttoken")


def _text(lines):
    return "\n".join(lines)


def test_forward_is_suggested_only_where_it_can_help(tmp_path):
    https = no_request_advice(["python", "app.py"], "other", {"openai": "https://api.openai.com/v1"}, False, tmp_path)
    assert "run --forward -- python app.py" in _text(https)
    for url in ("http://127.0.0.1:8000/v1", "http://localhost:11434/v1", "http://litellm.internal:4000",
                "https://localhost:8443/v1"):
        adv = _text(no_request_advice(["aider"], "other", {"openai": url}, False, tmp_path))
        assert "--forward" not in adv, url
        assert f"firsttoken proxy --upstream {url}" in adv and "base URL" in adv
    used = _text(no_request_advice(["python", "app.py"], "other", {"openai": "https://api.openai.com/v1"}, True, tmp_path))
    assert "run --forward" not in used and "forward mode" in used
    assert forward_can_help("https://api.anthropic.com") and not forward_can_help("http://10.0.0.5:8000/v1")


def test_after_forward_mode_a_local_endpoint_in_an_unknown_variable_is_named_as_the_cause(tmp_path):
    """Issue 36 item 13: a client that went to a loopback or plain-HTTP endpoint set in a variable run does not
    know sent nothing through forward mode. The summary says that is why (NO_PROXY, plain http), names the
    variable and what to do; proxy variables and https endpoints off this machine are not candidates."""
    env = {"MY_LLM_URL": "http://127.0.0.1:8000/v1", "HTTPS_PROXY": "http://127.0.0.1:8080",
           "NO_PROXY": "127.0.0.1,localhost", "OTHER_API": "https://api.example.com/v1", "HOME": "/root"}
    adv = " ".join(_text(no_request_advice(["python", "app.py"], "other", {}, True, tmp_path, env=env)).split())
    assert "points MY_LLM_URL at http://127.0.0.1:8000/v1" in adv and "NO_PROXY holds this machine" in adv, adv
    assert "`firsttoken proxy --upstream http://127.0.0.1:8000/v1`" in adv and "may not honour" not in adv
    assert "HTTPS_PROXY at" not in adv and "OTHER_API" not in adv
    plain = " ".join(_text(no_request_advice(["python", "app.py"], "other", {}, True, tmp_path,
                                             env={"OTHER_API": "https://api.example.com/v1"})).split())
    assert "may not honour HTTPS_PROXY" in plain  # nothing local in the environment: the old, general cause


def test_claude_code_first_run_says_what_happened(tmp_path):
    adv = _text(no_request_advice(["claude"], "claude-code", {"anthropic": "https://api.anthropic.com"}, False, tmp_path))
    assert "first-run check goes straight to api.anthropic.com" in adv and "claude -p" in adv
    one_shot = _text(no_request_advice(["claude", "-p", "hi"], "claude-code", {"anthropic": "https://api.anthropic.com"},
                                       False, tmp_path))
    assert "first-run" not in one_shot  # `claude -p` does no first-run setup: that is not what happened
    (tmp_path / ".claude.json").write_text(json.dumps({"hasCompletedOnboarding": True}))
    adv = _text(no_request_advice(["claude"], "claude-code", {"anthropic": "https://api.anthropic.com"}, False, tmp_path))
    assert "first-run" not in adv and "--forward" in adv


def test_estimated_output_tokens_show_a_tilde():
    est = {"state": "done", "status": 200, "model": "m", "usage_prompt_tokens": None, "prompt_tokens_est": 10,
           "usage_completion_tokens": None, "output_tokens_est": 32}
    assert "· ~32 out" in _text(render(summarize("r1", [est]), "more"))
    reported = dict(est, usage_prompt_tokens=11, usage_completion_tokens=30)
    line = _text(render(summarize("r1", [reported]), "more"))
    assert "· 30 out" in line and "~" not in line


def _zero_run(tmp_path, *extra, **env_extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ANTHROPIC_", "FIRSTTOKEN_RUN"))}
    env.update(HOME=str(tmp_path), **env_extra)
    return subprocess.run([FT, "run", "--no-join", "--db", str(tmp_path / "ft.db"), *extra, "--", sys.executable,
                           "-c", "pass"], env=env, capture_output=True, text=True, timeout=120)


def test_a_loopback_upstream_gets_the_base_url_advice_not_forward(tmp_path):
    r = _zero_run(tmp_path, OPENAI_BASE_URL="http://127.0.0.1:8000/v1", ANTHROPIC_BASE_URL="http://127.0.0.1:4000")
    assert r.returncode == 0, r.stderr
    assert "sent no request through firsttoken" in r.stderr
    assert "--forward" not in r.stderr
    assert "firsttoken proxy --upstream http://127.0.0.1:" in r.stderr


def test_no_forward_advice_after_forward(tmp_path):
    r = _zero_run(tmp_path, "--forward")
    assert r.returncode == 0, r.stderr
    assert "sent no request through firsttoken" in r.stderr
    assert "run --forward" not in r.stderr and "Even in forward mode" in r.stderr


def test_forward_mode_never_suggests_itself(tmp_path):
    """Issue 29 item 8: with HTTP(S)_PROXY set and one base-URL variable, `run --forward` said the other was
    not set and suggested `--forward`. One rule (summary.mode_notes) decides, for the summary and
    --print-env alike: in forward mode no note suggests it; redirected, a note suggests it where it helps."""
    proxies = {"HTTP_PROXY": "http://127.0.0.1:9", "HTTPS_PROXY": "http://127.0.0.1:9", "NO_PROXY": "127.0.0.1"}
    r = _zero_run(tmp_path, "--forward", OPENAI_BASE_URL="https://gw.example.com/v1", **proxies)
    assert r.returncode == 0, r.stderr
    assert "--forward" not in r.stderr and "ANTHROPIC_BASE_URL is not set" not in r.stderr
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ANTHROPIC_", "FIRSTTOKEN_RUN"))}
    env.update(HOME=str(tmp_path), OPENAI_BASE_URL="https://gw.example.com/v1", **proxies)
    for extra, suggested in ((["--forward"], False), ([], True)):
        printed = subprocess.run([FT, "run", "--print-env", "--db", str(tmp_path / "x.db"), *extra, "--", "python",
                                  "app.py"], env=env, capture_output=True, text=True, timeout=30)
        assert printed.returncode == 0, printed.stderr
        assert ("run --forward" in printed.stdout) is suggested, printed.stdout
        assert ("ANTHROPIC_BASE_URL is not set" in printed.stdout) is suggested, printed.stdout


def test_mode_notes_is_the_one_rule(tmp_path):
    from firsttoken.cli.run.summary import mode_notes
    from firsttoken.cli.run.upstreams import make_plan

    plan = make_plan(["python", "app.py"], {"OPENAI_BASE_URL": "http://127.0.0.1:9/v1"}, tmp_path, tmp_path)
    [note] = mode_notes(plan, None)
    assert note.startswith("ANTHROPIC_BASE_URL is not set") and note.endswith("records them through HTTPS_PROXY")
    assert mode_notes(plan, "--forward") == []
    assert mode_notes(plan, None, recorded=True) == []  # a run that recorded its calls: no word on the unset one
    plan.unrecorded.append(("a provider at http://10.0.0.5:8000/v1 is not recorded", "http://10.0.0.5:8000/v1"))
    assert "--forward" not in mode_notes(plan, None)[-1]
    assert mode_notes(plan, "--forward") == ["a provider at http://10.0.0.5:8000/v1 is not recorded (forward mode "
                                             "cannot carry http://10.0.0.5:8000/v1 either: plain HTTP or this machine)"]
