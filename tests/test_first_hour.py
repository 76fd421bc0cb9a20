"""Issue 31: a newcomer's first hour (items 2, 3, 4, 5, 7, 11), each reproduced first."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
from click.testing import CliRunner
from conftest import add_request, db_file

from firsttoken.addon.store.db import open_db

add = add_request


# ---- 5. no negative zero ----------------------------------------------------------------------------
def test_durations_never_show_a_negative_zero():
    from firsttoken.cli.output import ms

    assert [ms(v) for v in (-0.0, -0.04, 0.0, 0.04)] == ["0.0ms"] * 4
    assert ms(-12.0) == "-12.0ms" and ms(-150.0) == "-150ms" and ms(-1500.0) == "-1.50s"  # sized by magnitude
    assert ms(99.96) == "100ms" and ms(999.6) == "1.00s" and ms(9999.4) == "10.0s"  # never "100.0ms", "10.00s"


def test_show_of_a_buffered_stream_has_no_negative_zero(db):
    """`stream ×32 … 573ms -0.0ms`: the last chunk's offset a hair past the total."""
    from firsttoken.cli.show import show

    rid = add(db, connect_ms=0.7, conn_reused=0, ttfb_ms=72.9, ttft_ms=573.2, gap_ms=500.3, total_ms=573.17,
              events=32, event_offsets="[573.2]",
              findings='[{"code": "stream.buffered", "severity": "warn", "params": {"variant": "tail_at_once"}}]')
    out = CliRunner(env={"COLUMNS": "120"}).invoke(show, [rid[:8], "--db", db_file(db)]).output
    assert "stream ×32" in out and "-0.0" not in out, out


# ---- 11. `firsttoken --help`: grouped, every summary whole -------------------------------------------
def test_help_groups_the_commands_and_cuts_no_summary():
    from test_widths import broken_words, missing

    from firsttoken.cli.main import SECTIONS, cli

    titles = [t for t, _ in SECTIONS]
    assert titles[0] == "Start here" and {"demo", "run", "proxy"} == {n for n, _ in SECTIONS[0][1]}
    listed = [n for _, rows in SECTIONS for n, _ in rows]
    assert sorted(listed) == sorted(cli.list_commands(None)), "every command has one place in the help"
    advanced = {n for n, _ in SECTIONS[-1][1]}
    assert {"bench", "bench-db", "bench-live", "script-path"} <= advanced
    for cols in (60, 200):  # (every width 60-200 on a real pty: test_widths, the slow tier)
        out = subprocess.run([sys.executable, "-c", "from firsttoken.cli.main import cli; cli()", "--help"],
                             env=dict(os.environ, COLUMNS=str(cols)), capture_output=True, text=True, timeout=60).stdout
        assert "..." not in out.split("\n", 1)[1] and all(len(ln) <= cols for ln in out.splitlines()), out
        at = [out.index(f"\n{t}:\n") for t in titles]
        assert at == sorted(at), out  # in the order a newcomer meets them
        summaries = [text for _, rows in SECTIONS for _, text in rows]
        assert not missing(out, listed + summaries), (cols, missing(out, listed + summaries))
        assert not broken_words(out, cols, summaries), (cols, broken_words(out, cols, summaries))


def test_help_imports_no_command():
    code = ("import sys; from firsttoken.cli.main import cli\ntry: cli(['--help'])\nexcept SystemExit: pass\n"
            "print(sorted(m for m in sys.modules if m.startswith(('firsttoken.cli.', 'mitmproxy', 'rich'))),"
            " file=sys.stderr)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert "Start here:" in r.stdout and r.stderr.strip() == "['firsttoken.cli.main']", r.stderr


# ---- 3. one name per client, the program's name accepted ------------------------------------------------
def _env(*args):
    from firsttoken.cli.main import cli

    return CliRunner(env={"COLUMNS": "200"}).invoke(cli, ["env", *args, "--port", "8787"])


def test_env_takes_the_program_name_as_run_and_readme_do():
    r = _env("claude")
    assert r.exit_code == 0, r.output
    assert r.output == _env("claude-code").output and "ANTHROPIC_BASE_URL=http://127.0.0.1:8787" in r.output
    assert _env("qwen").output.startswith("firsttoken env qwen-code:")
    bad = _env("vim")
    assert bad.exit_code == 2 and "claude-code (claude)" in bad.output and "firsttoken run -- PROGRAM" in bad.output


def test_one_name_per_client_in_env_run_and_the_docs():
    from pathlib import Path

    from firsttoken.cli.env.clients import CLIENTS
    from firsttoken.cli.run.clients.registry import ADAPTERS, client_name, client_names, client_of

    assert CLIENTS == client_names()
    for a in ADAPTERS:  # run finds a client by its program; env takes the program, the name and the package
        for word in (a.name, *a.programs, *a.packages):
            assert client_name(word) == a.name, word
        for program in a.programs:
            assert client_of([program])[0].name == a.name
        r = _env(a.programs[0])
        assert r.exit_code == 0 and r.output.startswith(f"firsttoken env {a.name}:"), r.output
    root = Path(__file__).resolve().parent.parent
    said = {m for f in [root / "README.md", *sorted((root / "docs").glob("*.md"))]
            for m in re.findall(r"firsttoken env ([a-z][\w-]*)", f.read_text(encoding="utf-8"))}
    assert said and all(client_name(w) for w in said), said


# ---- 4. doctor: whole words, and a guessed upstream is not the user's typo ---------------------------------
def test_doctor_never_blames_a_guessed_upstream_on_a_typo():
    from firsttoken.cli.doctor import checks as dc

    net = dc.Net(2.0)
    guessed = dc.probe_upstream(net, "https", "doctor-guess.invalid", 443, env={}, severity=dc.WARN)
    typed = dc.probe_upstream(net, "https", "doctor-typed.invalid", 443, env={}, severity=dc.FAIL)
    assert "DNS lookup failed" in guessed.title and "DNS lookup failed" in typed.title
    assert "typo" not in guessed.fix and "check the network" in guessed.fix, guessed.fix
    assert "doctor-typed.invalid for typos" in typed.fix  # a host the user gave may well be mistyped


def test_doctor_wraps_between_words():
    from test_widths import broken_words

    from firsttoken.cli.doctor import checks as dc
    from firsttoken.cli.doctor.command import render

    long = ("a check whose detail is long enough to need several lines, with words such as configured and "
            "needs a proxy that a terminal would cut in two at its edge")
    checks = [dc.Check("x.y", "keys", dc.WARN, "configured " * 12, long, "fix it: " + long)]
    for cols in (60, 80, 100, 137, 200):
        from rich.console import Console

        out = Console(width=cols, record=True, highlight=False, soft_wrap=True, file=open(os.devnull, "w"))
        render(checks, out)
        text = out.export_text()
        assert all(len(ln) <= cols for ln in text.splitlines()), text
        assert not broken_words(text, cols, [c.title for c in checks] + [long]), text
        assert "      fix: fix it:" in text


# ---- 7. unrelated requests are not a conversation -------------------------------------------------------
def test_a_short_prompt_sent_again_after_a_failure_is_not_a_retry():
    """The demo's five "Say hi." (one with a bad key, one to /v1/v1) were one conversation: each
    joined the last as a "retry" of a failed request."""
    from firsttoken.addon.conversations import ConversationIndex, prompt_parts

    def place(idx, body, t, model="gpt-4o-mini", failed=False):
        a = idx.assign(route="default", family="openai", model=model, path="/v1/chat/completions",
                       parts=prompt_parts("openai.chat", body), t0=t)
        idx.ended(a.conversation, t + 0.1, failed=failed)
        return a.conversation_id

    idx = ConversationIndex()
    hi = {"messages": [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Say hi."}]}
    ids = [place(idx, hi, 1.0, failed=True), place(idx, hi, 1.2, failed=True), place(idx, hi, 1.4)]
    assert len(set(ids)) == 3, ids
    # what a conversation owns, sent again after it failed, is a retry: a history, tools, a real question
    loop = {"messages": [{"role": "user", "content": "Fix the failing test in src/app.py"},
                         {"role": "assistant", "content": "Reading it."}, {"role": "user", "content": "go on"}]}
    asked = {"messages": [{"role": "user", "content": "Why is the sky blue? Answer in two lines."}]}
    tools = {"messages": [{"role": "user", "content": "hi"}], "tools": [{"type": "function", "function": {"name": "read"}}]}
    for body in (loop, asked, tools):
        first = place(idx, body, 10.0, failed=True)
        assert place(idx, body, 11.0) == first, body
        # the same prompt to another model after a failure: another request, not a side call of it
        again = place(idx, body, 12.0, failed=True)
        assert place(idx, body, 13.0, model="gpt-4.1") != again


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_show_says_its_terms_in_plain_words(db, lang):
    """"calibrated ~15 (×0.8333 learned for this model)", "prefix 8 tokens, sent 8× before"."""
    from firsttoken.cli.labels import label
    from firsttoken.cli.show import show

    rid = add(db, ttfb_ms=70.0, ttft_ms=110.0, gap_ms=40.0, total_ms=600.0, tpot_ms=15.0, prompt_tokens_est=18,
              prompt_tokens_calibrated=15, calibration_factor=0.8333333, usage_ratio=0.8333333,
              prefix_hash="abc", prefix_tokens=8, prefix_seen_before=8, tokenizer="cl100k_base", tokens_exact=0)
    out = " ".join(CliRunner(env={"COLUMNS": "200"}).invoke(show, [rid[:8], "--db", db_file(db), "--lang", lang]).output.split())
    assert "0.8333" not in out and "learned" not in out and "8× before" not in out, out
    assert "0.83" in out
    for key in ("calibrated", "prefix", "ratio", "ttfb", "gap", "tpot"):  # each term shown is explained
        assert " ".join(label(lang, f"show.legend.{key}").split()) in out, (key, out)
    assert label(lang, "show.legend.itl") not in out  # (no ITL on this row: not explained either)
    side = label(lang, "conv.side", n=1)  # the live view's conversation line
    assert side.strip() not in ("(1 side)", "") and ("client" in side or "客户端" in side)


# ---- 2. after the demo, the reading commands find its database ----------------------------------------
def _home(tmp) -> dict[str, str | None]:
    return {"XDG_DATA_HOME": f"{tmp}/data", "FIRSTTOKEN_STATE_DIR": f"{tmp}/state", "FIRSTTOKEN_LANG": "en",
            "FIRSTTOKEN_DB": None, "COLUMNS": "200"}


def _ft(env, *args, cwd=None):
    """The command in this process, as a person types it (stderr apart)."""
    from firsttoken.cli.main import cli

    old = os.getcwd()
    os.chdir(cwd or old)
    try:
        r = CliRunner(env=env).invoke(cli, list(args))
    finally:
        os.chdir(old)
    r.said = " ".join(r.stderr.split())
    return r


@pytest.fixture(scope="module")
def after_demo(tmp_path_factory):
    """README's first command, `firsttoken demo`, as a newcomer runs it: no --db, no FIRSTTOKEN_DB."""
    tmp = str(tmp_path_factory.mktemp("newcomer"))
    env = _home(tmp)
    r = _ft(env, "demo")
    assert r.exit_code == 0, r.output
    default = f"{tmp}/data/firsttoken/firsttoken.db"
    demo = f"{tmp}/data/firsttoken/demo.db"
    assert os.path.isfile(demo) and not os.path.exists(default)
    return {"tmp": tmp, "env": env, "demo": demo, "default": default}


def test_reading_commands_after_the_demo_read_its_database(after_demo, monkeypatch):
    env, demo = after_demo["env"], after_demo["demo"]
    logs = _ft(env, "logs")
    assert logs.exit_code == 0 and "gpt-4o-mini" in logs.stdout and "no database" not in logs.said, logs.output
    assert f"reading the demo's database {demo}" in logs.said and after_demo["default"] in logs.said, logs.said
    stats = _ft(env, "stats", "--json")
    assert stats.exit_code == 0 and "gpt-4o-mini" in stats.stdout and "demo" in stats.said  # the note: stderr only
    zh = _ft(env, "logs", "--lang", "zh")
    assert zh.exit_code == 0 and "正在读取演示的数据库" in zh.said, zh.said
    from firsttoken.cli.live.runner import pick_db

    for k, v in env.items():
        monkeypatch.setenv(k, v) if v is not None else monkeypatch.delenv(k, raising=False)
    assert pick_db(None, None) == demo  # `live` too, when no proxy runs


def test_a_missing_database_names_the_demos_with_the_exact_command(after_demo):
    env, demo = after_demo["env"], after_demo["demo"]
    for args, cmd in ((["logs"], "firsttoken logs"), (["baseline", "check", "x"], "firsttoken baseline check")):
        r = _ft(dict(env, FIRSTTOKEN_DB=f"{after_demo['tmp']}/elsewhere.db"), *args)
        assert r.exit_code == 1 and "no database at" in r.said and f"`{cmd} --db {demo}`" in r.said, r.said
    r = _ft(env, "show", "--db", f"{after_demo['tmp']}/nope.db", "--lang", "zh")
    assert r.exit_code == 1 and "没有数据库" in r.said and f"演示记录在 {demo}：`firsttoken show --db {demo}`" in r.said, r.said


def test_the_demo_remembers_a_db_it_was_given_and_the_proxys_database_wins(tmp_path):
    env = _home(tmp_path)
    (tmp_path / "work").mkdir()
    r = _ft(env, "demo", "--db", "demo.db", cwd=tmp_path / "work")  # README's walkthrough: a relative path
    assert r.exit_code == 0, r.output
    logs = _ft(env, "logs", "--json")
    assert logs.exit_code == 0 and str(tmp_path / "work" / "demo.db") in logs.said, logs.said
    default = tmp_path / "data" / "firsttoken" / "firsttoken.db"
    open_db(default).conn.close()  # once the proxy has recorded where it records, that is what is read
    logs = _ft(env, "logs", "--json")
    assert logs.exit_code == 0 and logs.stdout == "" and "demo" not in logs.said, logs.said


def test_the_reports_show_lines_carry_its_database(after_demo, tmp_path):
    page = tmp_path / "r.html"
    r = _ft(after_demo["env"], "report", "--html", str(page))
    assert r.exit_code == 0, r.output
    shows = re.findall(r"firsttoken show [^<]*", page.read_text(encoding="utf-8"))
    assert shows and all(s.endswith(f" --db {after_demo['demo']}") for s in shows), shows


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_findings_never_show_a_negative_zero(lang):
    """A figure a hair below zero, rounded by its template (``{itl_max_ms:,.0f}``), is 0, not -0."""
    from firsttoken.addon.diagnose.engine import render

    msg, hint = render("stream.stall", {"variant": "at", "itl_max_ms": -0.2, "stall_ms": 3000, "at_event": 3,
                                        "at_ms": -0.04}, lang)
    assert not re.search(r"(?<![\w.-])-0(?![\d.])", msg + hint) and "3,000" in msg, msg
