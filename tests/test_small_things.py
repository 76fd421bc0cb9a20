"""Issue 24, item 8: small things a person saw (each reproduced first)."""

from __future__ import annotations

import re

import pytest
from click.testing import CliRunner
from conftest import add_request, db_file

from firsttoken.addon.store import stats_queries as sq


def add(db, **kw) -> str:
    return add_request(db, **{"model": "claude-sonnet-4-5", "api": "anthropic.messages", **kw})


def test_show_never_prints_a_negative_duration(db):
    """`show` printed "took -0.0ms": a connect measured a hair longer than the TTFB it is part of."""
    from firsttoken.cli.show import show

    rid = add(db, connect_ms=50.04, conn_reused=0, ttfb_ms=50.0, ttft_ms=120.0, gap_ms=70.0, total_ms=200.0)
    out = CliRunner(env={"COLUMNS": "120"}).invoke(show, [rid[:8], "--db", db_file(db)]).output
    assert "TTFB (headers)" in out and not re.search(r"-\d+(\.\d+)?ms", out), out


@pytest.mark.parametrize("n", [1, 2])
def test_counts_agree_with_their_nouns(n):
    """"all 1 prompts", "only 1 requests"."""
    fit = sq.fit_from_sums(n, 500.0 * n, 100.0 * n, 50000.0 * n, 250000.0 * n, 10000.0 * n)
    text = fit["ttft_fit_warning"]
    assert f"only {n} request{'s' if n > 1 else ''} " in text and "all 1 prompts" not in text


def test_baseline_skip_message_counts_one_request(db):
    from firsttoken.cli.baseline import baseline

    add(db, model="solo", ttfb_ms=10.0, ttft_ms=20.0, gap_ms=10.0, usage_prompt_tokens=100)
    try:
        runner = CliRunner(mix_stderr=False)  # click < 8.2
    except TypeError:
        runner = CliRunner()  # click >= 8.2 keeps stderr apart
    r = runner.invoke(baseline, ["save", "b1", "--db", db_file(db)])
    assert "only 1 request with a TTFT" in r.stderr and "1 requests" not in r.stderr


def test_stats_at_80_columns_keeps_names_and_codes_whole(db):
    """`stats` at 80 columns broke names mid-word ("claude-sonnet / -4-5", "path.double_v / 1")."""
    from firsttoken.cli.stats import stats

    for i in range(30):
        add(db, usage_prompt_tokens=100 + 300 * i, ttfb_ms=40.0 + i, ttft_ms=140.0 + 0.3 * (100 + 300 * i),
            gap_ms=100.0, total_ms=900.0)
    for _ in range(3):
        add(db, status=404, top_code="path.double_v1", top_severity="error", ttfb_ms=20.0)
        add(db, model="gpt-4o-mini", status=429, top_code="upstream.server_error", top_severity="error", ttfb_ms=20.0)
    out = CliRunner(env={"COLUMNS": "80"}).invoke(stats, ["--db", db_file(db)]).output
    assert max(len(ln) for ln in out.splitlines()) <= 80
    summary = out.split("Latency percentiles")[0]
    for word in ("claude-sonnet-4-5", "path.double_v1", "upstream.server_error", "gpt-4o-mini"):
        assert re.search(rf"(^|\s){re.escape(word)}(\s|$)", summary, re.M), f"{word} broken:\n{out}"


def test_baseline_save_at_80_columns_keeps_model_and_date_whole(db):
    from firsttoken.cli.baseline import baseline

    for i in range(6):
        add(db, ttfb_ms=40.0 + i, ttft_ms=140.0 + i, gap_ms=100.0, usage_prompt_tokens=1000, max_tokens=1024)
    r = CliRunner(env={"COLUMNS": "80"}).invoke(baseline, ["save", "nightly", "--db", db_file(db)])
    assert r.exit_code == 0, r.output
    assert max(len(ln) for ln in r.output.splitlines()) <= 80
    assert re.search(r"\bclaude-sonnet-4-5\b", r.output) and re.search(r"\b\d{4}-\d\d-\d\d\b", r.output), r.output
    assert "streamed requests" in r.output


def test_simulator_curl_examples_ask_for_usage_and_work(sim):
    """The simulator's curl examples lacked stream_options, so every copied curl got usage.missing:
    each streaming OpenAI example (the banner's, the docs') asks for the usage chunk, and the
    banner's, run as printed, gets it (and fits 80 columns)."""
    import shutil
    import subprocess
    from pathlib import Path

    from firsttoken.cli.simulate.command import curl_examples, describe

    docs = Path(__file__).resolve().parent.parent / "docs"
    pages = [*docs.glob("*.md"), docs.parent / "README.md", docs.parent / "CONTRIBUTING.md"]
    texts = [p.read_text(encoding="utf-8") for p in pages]
    blocks = [b for t in texts for b in t.split("```")[1::2] if "curl" in b]
    blocks += [m for t in texts for m in re.findall(r"`(curl [^`\n]+)`", t)]  # README's table of the ways in
    blocks += curl_examples(sim)
    openai = [b for b in blocks if "chat/completions" in b and re.search(r'"stream":\s*true', b)]
    assert len(openai) >= 2 and all("stream_options" in b and "include_usage" in b for b in openai), openai
    assert max(len(ln) for ln in describe(sim).splitlines()) <= 80
    if shutil.which("curl"):
        out = subprocess.run(["bash", "-c", curl_examples(sim)[0].replace("curl -N", "curl -sS -N --noproxy '*'")],
                             capture_output=True, text=True, timeout=60).stdout
        assert '"usage":{"prompt_tokens"' in out.replace(" ", "")


def test_simulate_help_lists_its_faults_and_the_banner_fits_80_columns():
    import subprocess
    import sys
    from pathlib import Path

    from firsttoken.cli.simulate.config import FAULTS

    exe = str(Path(sys.executable).parent / "firsttoken")
    out = subprocess.run([exe, "simulate", "--help"], capture_output=True, text=True, timeout=60,
                         env={"COLUMNS": "80", "PATH": "/usr/bin:/bin"}).stdout
    for name in FAULTS:
        assert name in out, f"--help does not name the fault {name}"
    assert max(len(ln) for ln in out.splitlines()) <= 80


def test_saturated_on_a_busy_machine_says_the_machine_was_busy():
    """proxy.saturated on a first demo on a busy machine read as "this proxy is slow": with the
    machine's load per core at 1 or more, the verdict says the machine was busy, in both languages."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from test_diagnose_rules import _run

    late = dict(proxy_delay_ms=180.0, proxy_lag_ms=150.0, proxy_cpu=0.9)
    for load, variant in ((3.7, "machine"), (0.3, "busy"), (None, "busy")):
        f = next(x for x in _run(dict(late, machine_load=load)) if x["code"] == "proxy.saturated")
        assert f["params"]["variant"] == variant
        if variant == "machine":
            assert "machine was busy" in f["message"] and "3.7 per core" in f["message"] and "CPU-bound" not in f["message"]
            zh = next(x for x in _run(dict(late, machine_load=load), lang_="zh") if x["code"] == "proxy.saturated")
            assert "本机当时很忙" in zh["message"]
        else:
            assert "CPU-bound" in f["message"]
