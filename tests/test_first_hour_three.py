"""Issue 36: a newcomer's first hour, third pass (items 2, 5), each reproduced first."""

from __future__ import annotations

from click.testing import CliRunner
from conftest import add_request, db_file

add = add_request


# ---- 2. one count per view, numbers with separators, the estimate labelled once ----------------------
def test_show_prints_token_counts_with_separators_and_one_tilde(db):
    """`last user turn 96006` and `estimate ~    ~96,009` for a 96k prompt the server counted."""
    from firsttoken.cli.show import show

    rid = add(db, prompt_tokens_est=96009, output_tokens_est=12, usage_prompt_tokens=96006,
              usage_completion_tokens=12, tokenizer="o200k_base", tokens_exact=0,
              last_user_tokens=96006, system_tokens=1234, messages=2)
    out = CliRunner(env={"COLUMNS": "120"}).invoke(show, [rid[:8], "--db", db_file(db)]).output
    assert "96006" not in out and "96,006" in out, out
    assert "1,234" in out, out
    assert "~96,009" in out, out
    assert "~    ~" not in out and "estimate ~" not in out, out  # the tilde is the number's, said once


def test_logs_shows_the_servers_prompt_count(db):
    from firsttoken.cli.logs import logs

    add(db, prompt_tokens_est=96009, usage_prompt_tokens=96006, tokens_exact=0)
    out = CliRunner(env={"COLUMNS": "160"}).invoke(logs, ["--db", db_file(db)]).output
    assert "96,006" in out and "96,009" not in out, out


# ---- 5. one name per API in every view ------------------------------------------------------------
def test_logs_and_show_name_the_api_alike_and_as_api_takes_it(db):
    """`logs` said `oai.chat`, `show` said `openai.chat`; `--api` takes `openai.chat`."""
    from firsttoken.cli.logs import logs
    from firsttoken.cli.show import show

    rid = add(db, api="anthropic.messages", model="claude-x")
    run = CliRunner(env={"COLUMNS": "160"})
    shown = run.invoke(show, [rid[:8], "--db", db_file(db)]).output
    listed = run.invoke(logs, ["--db", db_file(db), "--api", "anthropic.messages"]).output
    for out in (shown, listed):
        assert "anthropic.messages" in out and "ant.messages" not in out.replace("anthropic.messages", ""), out
