"""The live view: pure rendering of snapshots, the snapshot builders, and the real CLI under a pty."""

from __future__ import annotations

import io
import json
import os
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time

import httpx
import pytest
from conftest import rows
from rich.cells import cell_len
from rich.console import Console

from firsttoken.addon.record import Record
from firsttoken.addon.store.db import open_db
from firsttoken.cli import output
from firsttoken.cli.live.data import conversation_text
from firsttoken.cli.live.render import render, scroll_entry, sparkline, summary
from firsttoken.cli.live.state import DbSource, FlightView, LiveSnapshot, Tally, connect_ro, from_capture, iso, model_stats
from firsttoken.cli.loopback import free_port
from firsttoken.cli.proxy.server import ProxyServer
from firsttoken.cli.simulate import SimConfig, SimServer
from firsttoken.cli.terminal import PseudoTerminal

PREFILL = "waiting for first token (prefill)"
HINT = "Check that OPENAI_API_KEY belongs to this upstream."


# -- fixtures: snapshots ------------------------------------------------------------------------
def done_row(i=0, **kw):
    r = dict(
        id=f"req{i:05d}abcdef", started_at="2026-11-29T20:08:52.123+00:00", state="done", route="default",
        upstream="https://api.example.com", model="gpt-4o-mini", api="openai.chat", status=200, error=None,
        client_aborted=False, usage_prompt_tokens=None, prompt_tokens_est=1234, tokens_exact=False,
        usage_completion_tokens=57, output_tokens_est=None, ttfb_ms=61.2, ttft_ms=1523.4, gap_ms=1462.2,
        tpot_ms=5.1, total_ms=1811.0, findings=[], top_code=None, top_severity=None, stream=True,
    )
    r.update(kw)
    return r


def auth_error_row(i=99):
    f = dict(severity="error", code="auth_invalid_key",
             message="The upstream rejected the API key (401).", hint=HINT)
    return done_row(i, status=401, ttft_ms=None, gap_ms=None, tpot_ms=None, usage_completion_tokens=None,
                    ttfb_ms=12.5, total_ms=13.0, findings=[f], top_code=f["code"], top_severity="error")


def snapshot(**kw) -> LiveSnapshot:
    recent = kw.pop("recent", [done_row(0), done_row(1, model="claude-sonnet-4-5", api="anthropic.messages", ttft_ms=800.0), auth_error_row()])
    s = LiveSnapshot(
        routes=[("http://127.0.0.1:8787", "https://api.example.com/v1")],
        base_url="OPENAI_BASE_URL=http://127.0.0.1:8787  ANTHROPIC_BASE_URL=http://127.0.0.1:8787",
        db_path="/home/someone/.local/share/firsttoken/firsttoken.db",
        uptime_s=192.0, requests=len(recent), errors=1,
        in_flight=[
            FlightView(id="inflight01", elapsed_s=1.234, phase="prefill", route="default", model="gpt-4o-mini",
                       api="openai.chat", ttfb_ms=60.0, prompt_tokens_est=4500),
            FlightView(id="inflight02", elapsed_s=3.5, phase="streaming", route="default", model="gpt-4o-mini",
                       api="openai.chat", ttfb_ms=58.0, tokens=42, tok_per_s=35.2),
        ],
        recent=recent,
        models=model_stats(recent),
    )
    for k, v in kw.items():
        setattr(s, k, v)
    return s


def screen(renderable, width: int, **console_kw) -> str:
    c = Console(file=io.StringIO(), width=width, color_system=None, **console_kw)
    c.print(renderable)
    return c.file.getvalue()


def assert_fits(text: str, width: int) -> None:
    too_long = [ln for ln in text.splitlines() if cell_len(ln) > width]
    assert not too_long, f"lines wider than {width}: {too_long}"


# -- rendering -------------------------------------------------------------------------------------
def test_running_request_shows_phase_and_elapsed():
    out = screen(render(snapshot(), 100, "en"), 100)
    line = next(ln for ln in out.splitlines() if PREFILL in ln)
    assert "1.2s" in line and "gpt-4o-mini" in line
    streaming = next(ln for ln in out.splitlines() if "streaming" in ln)
    assert "3.5s" in streaming and "42" in streaming and "35.2" in streaming  # tokens so far, tokens/s
    assert "2 in flight" in out


def test_finished_request_numbers():
    out = screen(render(snapshot(recent=[done_row(0)]), 160, "en"), 160)
    line = next(ln for ln in out.splitlines() if ln.startswith("20:08:52") or "req00000" in ln)
    for text in ("200", "~1,234", "61.2ms", "1.52s", "1.46s", "5.1ms", "57", "1.81s", "ok"):
        assert text in line, (text, line)


def test_error_shows_its_finding_and_hint():
    for width in (80, 160):
        out = screen(render(snapshot(), width, "en"), width)
        flat = " ".join(out.split())
        assert "auth_invalid_key: The upstream rejected the API key (401)." in flat
        assert "→ " + HINT in flat
        row = next(ln for ln in out.splitlines() if " 401 " in ln)
        hint_line = next(ln for ln in out.splitlines() if "→ Check" in ln)
        assert out.splitlines().index(hint_line) > out.splitlines().index(row)  # its own (second) line


def test_width_80_drops_columns_160_shows_them_inline():
    narrow = screen(render(snapshot(), 80, "en"), 80)
    wide = screen(render(snapshot(), 160, "en"), 160)
    assert_fits(narrow, 80)
    assert_fits(wide, 160)
    recent_header = lambda s: next(ln for ln in s.splitlines() if ln.startswith("time"))  # noqa: E731
    assert "TPOT" not in recent_header(narrow) and "finding" not in recent_header(narrow)
    assert "TPOT" in recent_header(wide) and "finding" in recent_header(wide)
    assert any(" 401 " in ln and "auth_invalid_key" in ln for ln in wide.splitlines())  # inline at 160
    assert not any(" 401 " in ln and "auth_invalid_key" in ln for ln in narrow.splitlines())  # under the row at 80
    # The important numbers survive at 80 columns.
    for text in ("1.52s", "61.2ms", PREFILL):
        assert text in narrow


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_no_line_wider_than_the_terminal(lang):
    long = done_row(5, model="an-extremely-long-model-name-from-a-gateway-2026-11-29-preview", route="a-route-name-that-is-long")
    s = snapshot(recent=[done_row(0), long, auth_error_row()])
    s.routes.append(("http://127.0.0.1:8787/a-route-name-that-is-long", "https://" + "very-long-host." * 8 + "example.com/v1"))
    for width in range(80, 201, 7):
        out = screen(render(s, width, lang), width)
        assert_fits(out, width)
        assert_fits(screen(scroll_entry(long, width, lang), width), width)
        assert_fits(screen(scroll_entry(auth_error_row(), width, lang), width), width)
        assert_fits(screen(summary(s.models, width, lang), width), width)


def test_zh_labels():
    out = screen(render(snapshot(), 120, "zh"), 120)
    assert "等待首个 token（预填充）" in out and "最近完成" in out and "进行中" in out
    assert "auth_invalid_key" in out  # finding text comes from the record


def test_no_color_respected():
    s = snapshot()
    c = Console(file=io.StringIO(), width=120, force_terminal=True, color_system="truecolor", _environ={"NO_COLOR": "1"})
    c.print(render(s, 120, "en"))
    assert not re.search(r"\x1b\[[0-9;]*3[0-8][;m]", c.file.getvalue())  # no foreground colours
    c = Console(file=io.StringIO(), width=120, force_terminal=True, color_system="truecolor", _environ={})
    c.print(render(s, 120, "en"))
    assert re.search(r"\x1b\[[0-9;]*3[0-8][;m]", c.file.getvalue())  # (colours exist without NO_COLOR)


def test_height_limits_the_live_area():
    many = [done_row(i) for i in range(30)] + [auth_error_row()]
    out = screen(render(snapshot(recent=many), 100, "en", height=24, max_recent=30), 100)
    assert len(out.splitlines()) <= 24
    assert "auth_invalid_key" in out  # the newest rows are the ones kept


def test_sparkline_and_model_stats():
    assert sparkline([]) == ""
    assert sparkline([1, 1, 1]) == "▄▄▄"
    assert sparkline([0, 50, 100]) == "▁▅█"
    rs = [done_row(i, ttft_ms=float(100 + i)) for i in range(100)]
    [m] = model_stats(rs, window=50)
    assert m.n == 50 and m.ttft_p50 == pytest.approx(174.5) and len(m.ttft_series) == 50


def test_the_summary_on_exit_is_the_stores_by_the_stats_engine(db):
    """A session of streamed answers, one non-streamed answer, a 401 and a readiness probe: the summary's
    counts and percentiles are exactly `stats --since`'s (the probe is no model call, the non-streamed
    answer is not in the streamed TTFB), and the live counters hold two integers, not the session."""
    from conftest import add_request, db_file

    from firsttoken.addon.store import stats_queries as sq
    from firsttoken.addon.store.queries import Filters
    from firsttoken.cli.live.runner import print_summary
    from firsttoken.cli.live.state import session_models

    add_request(db, started_at="2026-01-01T00:00:00.000+00:00", ttfb_ms=9999.0, ttft_ms=9999.0)  # before the session
    since = "2026-12-03T00:00:00.000+00:00"
    for i in range(6):
        add_request(db, ttfb_ms=60.0 + i, ttft_ms=300.0 + 10 * i, gap_ms=240.0 + 9 * i)
    add_request(db, stream=0, ttfb_ms=569.0, total_ms=570.0)
    add_request(db, status=401, ttfb_ms=12.5, total_ms=13.0, error="auth")
    add_request(db, model=None, api="other", method="GET", path="/", status=404, ttfb_ms=1.0)
    s = session_models(db_file(db), since)
    want = sq.compute(db, Filters(since=since), by="model", qs=(50, 95), fit=False)["groups"][0]
    [m] = s.models
    assert (m.model, m.n, m.errors) == ("gpt-4o-mini", want["count"], want["errors"]) == ("gpt-4o-mini", 8, 1)
    assert (m.ttfb_p50, m.ttfb_p95) == (want["ttfb_ms"]["p50"], want["ttfb_ms"]["p95"]) and m.ttfb_p95 < 70
    assert (m.ttft_p50, m.gap_p95) == (want["ttft_ms"]["p50"], want["gap_ms"]["p95"])
    assert (s.requests, s.errors, s.other) == (8, 1, 1)
    t = Tally()
    for i in range(3):
        t.add(done_row(i))
    assert (t.requests, t.errors) == (3, 0) and vars(t).keys() == {"_lock", "requests", "errors"}
    con = Console(width=100, record=True, file=io.StringIO())
    print_summary(con, t, db_file(db), "en", since=since)
    out = con.export_text()
    assert "firsttoken stopped · 8 requests · 1 error (and 1 that is no model call" in " ".join(out.split()), out
    assert "this session" in out and "gpt-4o-mini" in out and "TTFB p95" in out
    # a store that cannot be read: the live counters, and a line saying so
    con = Console(width=100, record=True, file=io.StringIO())
    print_summary(con, t, "/nonexistent/dir/x.db", "en", since=since)
    said = " ".join(con.export_text().split())
    assert "3 requests · 0 errors" in said and "could not be read for a summary" in said, said


# -- snapshot builders ------------------------------------------------------------------------------
def test_from_capture_snapshot_dict():
    now = 1000.0
    snap = {
        "now": now,
        "in_flight": [
            {"id": "a1", "t0": now - 2.0, "phase": "streaming", "route": "default", "model": "m", "api": "openai.chat",
             "path": "/v1/chat/completions", "status": 200, "prompt_tokens_est": 10, "headers_at": now - 1.9,
             "first_token_at": now - 1.0, "first_visible_at": now - 1.0, "events": 20, "output_chars": 80},
            {"id": "b2", "t0": now - 0.5, "phase": "prefill", "route": "default", "model": "m", "api": "openai.chat",
             "path": "/v1/chat/completions", "status": 200, "prompt_tokens_est": 10, "headers_at": now - 0.45,
             "first_token_at": None, "first_visible_at": None, "events": 0, "output_chars": 0},
        ],
        "recent": [Record(id=f"r{i}", started_at="2026-01-01T00:00:00+00:00", model="m", status=200,
                          ttfb_ms=50.0, ttft_ms=100.0 + i, gap_ms=50.0 + i, state="done", stream=True) for i in range(5)],
        "routes": [], "db_path": "/tmp/x.db", "started": 500.0,
    }
    s = from_capture(snap, listen_url="http://127.0.0.1:1", wall_now=560.0)
    assert s.uptime_s == pytest.approx(60.0)
    assert [f.id for f in s.in_flight] == ["a1", "b2"]  # oldest first
    a, b = s.in_flight
    assert a.elapsed_s == pytest.approx(2.0) and a.tokens == 20 and a.tok_per_s == pytest.approx(20.0)
    assert a.ttfb_ms == pytest.approx(100.0)
    assert b.phase == "prefill" and b.tokens is None and b.tok_per_s is None
    assert s.requests == 5 and s.models[0].ttft_p50 == pytest.approx(102.0)


def test_from_a_running_proxy(tmp_path):
    """In process: a request in its prefill shows as such, then as finished with its numbers."""
    with SimServer(SimConfig(ttfb_ms=20, prefill_base_ms=800, prefill_ms_per_1k_tokens=0, tpot_ms=5, output_tokens=5)) as sim, \
            ProxyServer([sim.url], str(tmp_path / "ft.db"), port=0) as p:
        tally = Tally()
        p.capture.listeners.append(tally.add)
        t = threading.Thread(target=lambda: httpx.post(p.url + "/v1/chat/completions", timeout=30, json={
            "model": "gpt-4o-mini", "stream": True, "messages": [{"role": "user", "content": "hi"}]}))
        t.start()
        deadline = time.time() + 10
        while time.time() < deadline:
            s = from_capture(p.capture, listen_url=p.url, tally=tally)
            # the model shows once the body is parsed (off the event loop, just after the headers)
            if s.in_flight and s.in_flight[0].phase == "prefill" and s.in_flight[0].model:
                break
            time.sleep(0.02)
        assert s.in_flight[0].phase == "prefill" and s.in_flight[0].model == "gpt-4o-mini"
        assert PREFILL in screen(render(s, 120, "en"), 120)
        t.join()
        p.flush()
        s = from_capture(p.capture, listen_url=p.url, tally=tally)
        assert not s.in_flight and s.requests == 1 and s.recent[-1]["ttft_ms"] >= 800
        assert s.routes == [(p.url, sim.url)] and s.base_url.startswith(f"OPENAI_BASE_URL={p.url}/v1")
        # the proxy's own load is measured while it runs, and shown in the header
        assert s.load is not None and s.load["lag_max_ms"] is not None and s.load["lag_max_ms"] < 1000
        assert "proxy: lag " in screen(render(s, 160, "en"), 160)


def test_db_source_reads_in_flight_and_finished_rows_read_only(tmp_path):
    path = tmp_path / "ft.db"
    with pytest.raises(FileNotFoundError):
        connect_ro(path)
    db = open_db(path)
    old = iso(time.time() - 30)
    db["requests"].insert(dict(done_row(1), started_at=old, findings=json.dumps([])), pk="id")
    started = iso(time.time() - 2.0)
    db["requests"].insert(dict(id="live1", started_at=started, state="in_flight", phase="prefill", model="m1",
                               route="default", upstream="https://up.example"), pk="id")
    db.conn.commit()

    src = DbSource(path)
    assert src.poll() == []  # history: shown, not reported as new
    s = src.snapshot()
    assert s.attached and [f.id for f in s.in_flight] == ["live1"]
    assert s.in_flight[0].phase == "prefill" and 1.5 < s.in_flight[0].elapsed_s < 10
    assert s.recent[-1]["id"] == done_row(1)["id"] and s.requests == 0
    assert PREFILL in screen(render(s, 100, "en"), 100)

    db["requests"].update("live1", dict(done_row(2), id="live1", started_at=started, findings=json.dumps([])))
    db.conn.commit()
    new = src.poll()
    assert [r["id"] for r in new] == ["live1"] and src.poll() == []  # reported once
    s = src.snapshot()
    assert not s.in_flight and s.requests == 1 and s.recent[-1]["ttft_ms"] == 1523.4
    with pytest.raises(sqlite3.OperationalError, match="readonly"):
        src.conn.execute("DELETE FROM requests")  # the connection cannot write
    src.close()
    db.conn.close()


def test_db_source_shows_the_active_conversation(tmp_path):
    """`live --db` reads the active conversation from the database: the same line as the view
    inside the proxy, following a new turn as it finishes."""
    import openai

    path = tmp_path / "ft.db"
    with SimServer(SimConfig(ttfb_ms=10, prefill_base_ms=5, prefill_ms_per_1k_tokens=0, tpot_ms=1, output_tokens=4,
                             prompt_cache=True)) as sim, ProxyServer([sim.url], str(path), port=0) as p:
        client = openai.OpenAI(base_url=p.url + "/v1", api_key="sk-test-00000000000000000000000", max_retries=0)
        src = DbSource(path)
        src.poll()
        assert src.snapshot().conversation is None  # nothing recorded yet
        msgs = [{"role": "system", "content": "You read files. " * 50}, {"role": "user", "content": "What is in a.txt?"}]
        for question in ("And b.txt?", "And c.txt?"):
            answer = client.chat.completions.create(model="gpt-4o-mini", messages=msgs)
            msgs += [{"role": "assistant", "content": answer.choices[0].message.content}, {"role": "user", "content": question}]
        p.flush()
        src.poll()
        facts = src.snapshot().conversation
        assert facts == from_capture(p.capture, listen_url=p.url).conversation  # one rule, both sources
        line = conversation_text(facts, "en")
        cid = rows(path)[-1]["conversation_id"]
        assert cid and line.startswith("latest conversation: turn 2 (the user's prompts so far), 2 requests")
        assert re.search(r", [1-9]\d*% of its prompt tokens from the cache;", line)  # the system prompt's repeat
        # the line's command works as printed: it shows that conversation turn by turn
        cmd = re.search(r"`firsttoken session ([0-9a-f]+)`", line).group(1)
        from click.testing import CliRunner

        from firsttoken.cli.sessions import session
        shown = CliRunner().invoke(session, ["--db", str(path), cmd], catch_exceptions=False)
        assert shown.exit_code == 0 and cid in shown.output, shown.output

        client.chat.completions.create(model="gpt-4o-mini", messages=msgs)  # the user's next turn
        p.flush()
        assert src.poll()
        s = src.snapshot()
        assert conversation_text(s.conversation, "en").startswith("latest conversation: turn 3 (the user's prompts so far), 3 requests")
        def flat(t: str) -> str:  # wrapped on the screen (an indent on each further line)
            return "".join(t.split())

        assert flat(conversation_text(s.conversation, "en")) in flat(screen(render(s, 120, "en"), 120))
        zh = conversation_text(s.conversation, "zh")
        assert zh.startswith("最近的会话：第 3 轮（用户到目前为止的提问），3 个请求") and "缓存" in zh and cid[:8] in zh
        assert flat(zh) in flat(screen(render(s, 120, "zh"), 120))
        src.close()


# -- the real CLI under a pseudo-terminal ----------------------------------------------------------------
class Pty(PseudoTerminal):
    """A command on a pseudo-terminal; ``text()`` is everything it printed, escape codes removed."""

    def __init__(self, argv: list[str], cols: int = 120, rows_: int = 40) -> None:
        super().__init__(cols, rows_)
        self.spawn(argv, env=dict(os.environ, LC_ALL="C.UTF-8", PYTHONIOENCODING="utf-8"))


CLI = [sys.executable, "-c", "from firsttoken.cli.main import cli; cli()"]
# `live` is registered in cli/main.py by the lead; adding it again is a no-op once it is.
CLI_LIVE = [sys.executable, "-c", "from firsttoken.cli.main import cli; from firsttoken.cli.live.runner import live; "
            "cli.add_command(live); cli()"]
SLOW_PREFILL = SimConfig(ttfb_ms=40, prefill_base_ms=1500, prefill_ms_per_1k_tokens=0, tpot_ms=20, output_tokens=20)


def _stream(url: str, seen: dict) -> None:
    body = {"model": "gpt-4o-mini", "stream": True, "stream_options": {"include_usage": True},
            "messages": [{"role": "user", "content": "Say hi."}]}
    with httpx.stream("POST", url + "/v1/chat/completions", json=body, timeout=30,
                      headers={"authorization": "Bearer sk-test-live-0000000000000000000000"}) as r:
        for chunk in r.iter_raw():
            if "first_token" not in seen and b'"content":"' in chunk.replace(b'": "', b'":"'):
                seen["first_token"] = time.time()
    seen["done"] = time.time()


def _lines_with(text: str, needle: str) -> list[str]:
    return [ln for ln in text.split("\n") if needle in ln]


@pytest.mark.slow  # real processes and paced requests: seconds
def test_proxy_live_view_in_a_terminal(tmp_path):
    db = tmp_path / "live.db"
    port = free_port()
    with SimServer(SLOW_PREFILL) as sim:
        term = Pty(CLI + ["proxy", "-u", sim.url, "--port", str(port), "--db", str(db), "--lang", "en"], cols=120)
        try:
            term.wait_for(rf"http://127\.0\.0\.1:{port}\s+→\s+{re.escape(sim.url)}")
            term.wait_for(r"OPENAI_BASE_URL=")
            seen: dict = {}
            client = threading.Thread(target=_stream, args=(f"http://127.0.0.1:{port}", seen))
            client.start()
            # The model shows once the request body is parsed (off the event loop, a frame later).
            screen_ = term.wait_for("gpt-4o-mini.*" + re.escape(PREFILL), timeout=10)
            assert "first_token" not in seen, "the phase must show while the upstream is still in prefill"
            row = [ln for ln in _lines_with(screen_, PREFILL) if "gpt-4o-mini" in ln][-1]
            assert re.search(r"\b\d+\.\ds\b", row)  # elapsed timer
            # The elapsed timer moves while we wait.
            time.sleep(0.8)
            later = [re.search(r"(\d+\.\d)s", ln).group(1) for ln in _lines_with(term.text(), PREFILL) if re.search(r"(\d+\.\d)s", ln)]
            assert len(set(later)) >= 2
            client.join(30)
            assert "first_token" in seen and "done" in seen
            term.wait_for(r"1 request · 0 errors", timeout=10)
            rc = term.interrupt()
            final = term.text()
        finally:
            term.close()
    assert rc == 0, final[-2000:]
    [r] = rows(db)
    assert r["state"] == "done" and r["model"] == "gpt-4o-mini" and r["ttft_ms"] >= 1500
    # The finished numbers: in the scrollback line and the live table.
    done_lines = [ln for ln in final.split("\n") if "gpt-4o-mini" in ln and output.ms(r["ttft_ms"]) in ln]
    assert done_lines, final[-3000:]
    assert any(output.ms(r["ttfb_ms"]) in ln and "200" in ln for ln in done_lines)
    # Ctrl-C: a clean stop and the per-model summary.
    assert "firsttoken stopped · 1 request · 0 errors" in final
    tail = final[final.rindex("firsttoken stopped"):]
    assert "per model · this session" in tail and "TTFT p95" in tail
    assert any(ln.startswith("gpt-4o-mini") and output.ms(r["ttft_ms"]) in ln for ln in tail.split("\n"))


@pytest.mark.slow  # real processes and paced requests: seconds
def test_live_command_follows_a_database_being_written(tmp_path):
    db = tmp_path / "follow.db"
    with SimServer(SLOW_PREFILL) as sim, ProxyServer([sim.url], str(db), port=0) as p:
        term = Pty(CLI_LIVE + ["live", "--db", str(db), "--lang", "en", "--interval", "0.2"], cols=100)
        try:
            term.wait_for(r"firsttoken\s+attached")
            assert "(read-only)" in term.text()
            seen: dict = {}
            client = threading.Thread(target=_stream, args=(p.url, seen))
            client.start()
            screen_ = term.wait_for(re.escape(PREFILL), timeout=10)
            assert "first_token" not in seen
            assert re.search(r"\d+\.\ds", _lines_with(screen_, PREFILL)[-1])
            client.join(30)
            p.flush()
            term.wait_for(r"since then: 1 request", timeout=10)
            rc = term.interrupt()
            final = term.text()
        finally:
            term.close()
    assert rc == 0, final[-2000:]
    [r] = rows(db)
    assert any("gpt-4o-mini" in ln and output.ms(r["ttft_ms"]) in ln for ln in final.split("\n"))
    assert "per model · this session" in final[final.rindex("firsttoken live detached"):]


def test_not_a_terminal_prints_plain_lines(tmp_path):
    """Piped stdout (or --no-live): one plain line per request, no live area."""
    db = tmp_path / "plain.db"
    port = free_port()
    with SimServer(SimConfig(ttfb_ms=10, prefill_base_ms=10, tpot_ms=2, output_tokens=5)) as sim:
        proc = subprocess.Popen(CLI + ["proxy", "-u", sim.url, "--port", str(port), "--db", str(db)],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        try:
            deadline = time.time() + 60  # a busy machine starts a proxy slowly; the loop ends once it listens
            while time.time() < deadline:
                try:
                    socket.create_connection(("127.0.0.1", port), 0.2).close()
                    break
                except OSError:
                    time.sleep(0.05)
            _stream(f"http://127.0.0.1:{port}", {})
            deadline = time.time() + 10
            while time.time() < deadline and not rows(db, "WHERE state = 'done'"):
                time.sleep(0.05)
            time.sleep(0.3)
            proc.send_signal(signal.SIGINT)
            out, _ = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
    text = out.decode()
    assert "\x1b[" not in text and PREFILL not in text
    assert re.search(r"gpt-4o-mini 200 TTFB \S+ TTFT \S+", text), text
    assert "firsttoken stopped" in text


def test_header_shows_the_proxys_own_load():
    idle = screen(render(snapshot(load={"lag_ms": 1.0, "lag_max_ms": 3.2, "cpu": 0.04}), 160, "en"), 160)
    assert "proxy: lag 3 ms, CPU 4%" in idle
    busy = snapshot(load={"lag_ms": 180.0, "lag_max_ms": 240.0, "cpu": 0.99})
    assert "代理：延迟 240 毫秒，CPU 99%" in screen(render(busy, 160, "zh"), 160)
    assert "proxy:" not in screen(render(snapshot(), 160, "en"), 160)  # attached to a DB: not known
    for width in (60, 80):
        assert_fits(screen(render(busy, width, "en"), width), width)


# -- columns, height and frames (issue 11 #10) -------------------------------------------------------------
def _flights(n: int) -> list[FlightView]:
    return [FlightView(id=f"fl{i:06d}xyz", elapsed_s=0.5 + i, phase=("prefill", "streaming")[i % 2], model="gpt-4o-mini",
                       api="openai.chat", tokens=i or None, tok_per_s=2.0 if i else None) for i in range(n)]


def _header(out: str, first: str) -> str:
    return next(ln for ln in out.splitlines() if ln.split() and ln.split()[0] == first)


def test_finished_rows_show_their_id_at_every_width():
    s = snapshot()
    for width in range(60, 201, 10):
        out = screen(render(s, width, "en"), width)
        head = [ln for ln in out.splitlines() if " id " in f" {ln} " and "model" in ln and "st" in ln.split()]
        assert head, out
        for r in s.recent:
            assert r["id"][:8] in out, (width, out)


def test_columns_depend_on_the_width_only():
    for width in (60, 80, 100, 120, 160):
        outs = [screen(render(snapshot(in_flight=_flights(n)), width, "en", height=60), width) for n in (1, 4, 21)]
        assert len({_header(o, "elapsed") for o in outs}) == 1, width  # in flight: same columns
        recent = {next(ln for ln in o.splitlines() if "model" in ln and ln.split()[0] in ("time", "id")) for o in outs}
        assert len(recent) == 1, (width, recent)


def test_route_column_only_with_several_routes():
    one = screen(render(snapshot(), 160, "en"), 160)
    assert "route" not in _header(one, "time")
    s = snapshot()
    s.routes.append(("http://127.0.0.1:8787/b", "https://b.example.com"))
    assert "route" in _header(screen(render(s, 160, "en"), 160), "time")


def test_in_flight_and_finished_share_the_height():
    recent = [done_row(i) for i in range(8)] + [auth_error_row()]
    s = snapshot(recent=recent, in_flight=_flights(21))
    out = screen(render(s, 80, "en", height=29), 80)  # an 80x30 terminal, one line for the prompt
    assert len(out.splitlines()) <= 29
    finished = out[out.index("recently finished"):]
    assert sum(1 for r in recent if r["id"][:8] in finished) >= 2, out  # rows, not an empty header
    assert sum(1 for f in s.in_flight if seconds_text(f.elapsed_s) in out) >= 3, out
    assert "more" in out  # what is not shown is counted


def seconds_text(s: float) -> str:
    from firsttoken.cli.live.layout import seconds

    return seconds(s)


def test_frames_skip_when_unchanged_and_redraw_only_changed_lines():
    from firsttoken.cli.live.runner import SYNC_BEGIN, SYNC_END, LiveRunner

    buf = io.StringIO()
    con = Console(file=buf, width=120, height=40, force_terminal=True, color_system="truecolor")
    s = snapshot(in_flight=[])
    runner = LiveRunner(lambda: s, console=con, hz=4)

    def until(cond) -> None:  # the runner's own pace, however busy the machine: no sleeps to guess
        deadline = time.monotonic() + 30
        while not cond() and time.monotonic() < deadline:
            time.sleep(0.01)

    runner.start()
    until(lambda: runner.skipped >= 3)  # frames of the same picture
    assert runner.frames == 1 and runner.skipped >= 3
    first = len(buf.getvalue())
    s.in_flight = _flights(1)  # a timer appears: a few lines change
    until(lambda: runner.frames >= 2)
    s.in_flight[0].elapsed_s += 1.0
    until(lambda: runner.frames >= 3)
    runner.stop()
    text = buf.getvalue()
    assert runner.frames >= 3
    assert text.count(SYNC_BEGIN) == text.count(SYNC_END) >= 3
    frames = [f.split(SYNC_END)[0] for f in text[first:].split(SYNC_BEGIN)[1:]]
    # the last timer tick rewrites the changed line(s) only, not the whole area
    assert len(frames[-1]) < first / 3, (len(frames[-1]), first)


def test_plain_line_escapes_what_it_shows_from_the_record_itself():
    """`proxy --no-live` prints ``line(vars(rec))`` (no row copy): the same line as from the row,
    with upstream-controlled text escaped, never obeyed."""
    from firsttoken.addon.safe_text import printable_data

    rec = Record(id="ab\x1b]0;x\x07cdefgh", started_at="2026-01-01T00:00:00+00:00", state="done", phase="done",
                 route="r\x1b[2J", model="gpt\r-4o", status=500, ttfb_ms=12.0, ttft_ms=None, total_ms=30.0,
                 event_offsets=[1.0, 2.0], findings=[{"code": "upstream.error", "severity": "error",
                                                      "message": "boom\x1b[31m\nred", "hint": "fix\u202eit"}])
    text = output.line(vars(rec))
    assert text == output.line(rec.row())
    assert "\x1b" not in text and "\r" not in text and "\n" not in text and "\u202e" not in text
    assert "\\x1b[31m" in text and "gpt\\x0d-4o" in text and "\\u202e" in text
    # the old way (escape the whole row first, then format) gives the same line
    assert text == output.line(printable_data(rec.row()))  # printable is idempotent: this is the old line


# -- `firsttoken live` reads what the proxy knows: its live feed ---------------------------------------


def _served(p: ProxyServer):
    """``p`` with the live feed `firsttoken proxy` gives it, registered as that command registers."""
    from firsttoken.cli.proxy.feed import LiveFeed
    from firsttoken.cli.proxy.state import write_state

    p.live_feed = LiveFeed()
    p.live_feed.start(p)
    write_state(p)
    return p.live_feed


def _read(entry: dict, query: str = "", **headers) -> httpx.Response:
    return httpx.get(entry["url"] + query, timeout=5, headers={"authorization": f"Bearer {entry['token']}", **headers})


def _token(text: str) -> bytes:
    return ('data: {"id":"c1","object":"chat.completion.chunk","model":"gpt-4o-mini","choices":[{"index":0,'
            '"delta":{"content":"%s"},"finish_reason":null}]}\n\n' % text).encode()


def _flight(entry: dict, want, timeout: float = 30.0) -> dict:
    """The first in-flight request the feed shows for which ``want(flight)`` holds (reads until then)."""
    deadline = time.monotonic() + timeout
    seen = []
    while time.monotonic() < deadline:
        doc = _read(entry, "?since=0").json()
        seen += [(f["phase"], f["tokens"]) for f in doc["in_flight"]]
        for f in doc["in_flight"]:
            if want(f):
                return f
        time.sleep(0.02)
    raise AssertionError(f"the feed never showed it: {seen[-20:]}")


def test_the_proxy_serves_what_it_knows_on_loopback_only(tmp_path, proxy_registry):
    """The feed: registered owner-only, refuses a foreign Host, a missing token and other paths;
    a request shows each phase while the upstream is in it (the upstream moves on only when the
    test says), its exact token count, then it is finished. No clock in any assertion."""
    from rawserver import GatedUpstream

    from firsttoken.cli.proxy.state import proxy_for_db

    db = tmp_path / "ft.db"
    up = GatedUpstream([_token(w) for w in ("One", " two", " three", " four", " five")],
                       [_token(" six"), b"data: [DONE]\n\n"])
    with up, ProxyServer([up.url], str(db), port=0) as p:
        feed = _served(p)
        st = proxy_for_db(db)
        entry = st["live"]
        assert entry["url"].startswith("http://127.0.0.1:") and entry["port"] == feed.port != p.bound_port
        [path] = list(proxy_registry.glob("*.json"))
        assert path.stat().st_mode & 0o777 == 0o600 and proxy_registry.stat().st_mode & 0o777 == 0o700
        assert _read(entry, Host="attacker.example").status_code == 403  # DNS rebinding: refused
        assert _read(entry, Host=f"localhost:{entry['port']}").status_code == 200
        assert httpx.get(entry["url"], timeout=5).status_code == 401  # no token
        assert _read(dict(entry, token="x" * 32)).status_code == 401
        assert _read(dict(entry, url=entry["url"].replace("/live", "/other"))).status_code == 404
        assert httpx.post(entry["url"], timeout=5, headers={"authorization": f"Bearer {entry['token']}"}).status_code == 405

        seen: dict = {}
        client = threading.Thread(target=_stream, args=(p.url, seen))
        client.start()
        try:
            # the body is parsed off the loop, the upstream connection opened: then it waits
            f = _flight(entry, lambda f: f["model"] == "gpt-4o-mini" and f["phase"] != "connecting")
            assert f["phase"] == "waiting_headers" and f["ttfb_ms"] is None  # the upstream holds its headers
            up.headers.set()
            f = _flight(entry, lambda f: f["phase"] != "waiting_headers")
            assert f["phase"] == "prefill" and f["ttfb_ms"] > 0 and f["tokens"] is None  # headers in, no token
            up.tokens.set()
            f = _flight(entry, lambda f: f["phase"] == "streaming" and (f["tokens"] or 0) >= 5)
            assert f["tokens"] == 5  # what the proxy has seen: the five sent so far, not "–"
            doc = _read(entry, "?since=0").json()
            assert doc["seq"] == 0 and doc["done"] == []
        finally:
            up.headers.set(), up.tokens.set(), up.end.set()
            client.join(30)
        p.flush()
        deadline = time.monotonic() + 30
        while (doc := _read(entry, "?since=0").json())["in_flight"] and time.monotonic() < deadline:
            time.sleep(0.02)
    assert "done" in seen and not doc["in_flight"]
    assert doc["seq"] == 1 and [r["id"] for r in doc["done"]] == [rows(db)[0]["id"]]
    assert doc["done"][0]["ttft_ms"] == pytest.approx(rows(db)[0]["ttft_ms"])
    text = json.dumps(doc)
    assert "sk-test-live" not in text and "authorization" not in text.lower()  # no key, no header in the feed


def test_follow_reads_the_feed_and_falls_back_to_the_database(tmp_path):
    """`live`'s source: the proxy's feed while it serves one; its database when it is gone (and
    the header says which)."""
    from firsttoken.cli.live.feed import FeedSource, Follow
    from firsttoken.cli.proxy.state import clear_state

    db = tmp_path / "ft.db"
    with SimServer(SimConfig(ttfb_ms=10, prefill_base_ms=10, tpot_ms=2, output_tokens=5)) as sim, \
            ProxyServer([sim.url], str(db), port=0) as p:
        _stream(p.url, {})  # history: before `live` started
        p.flush()
        feed = _served(p)
        src = Follow(str(db))
        assert isinstance(src.src, FeedSource)
        s = src.snapshot()
        assert s.source == {"kind": "proxy", "url": p.url, "pid": os.getpid()} and s.requests == 0 and len(s.recent) == 0
        head = screen(render(s, 120, "en"), 120)
        assert f"from: the running proxy, as it knows it ({p.url}, pid {os.getpid()})" in head
        assert "来源: 正在运行的代理" in screen(render(s, 120, "zh"), 120)
        _stream(p.url, {})
        p.flush()
        new = src.poll()
        assert len(new) == 1 and src.poll() == [] and src.snapshot().requests == 1  # reported once
        feed.close()
        clear_state(p)
    assert src.poll() == []  # the feed is gone: the database takes over
    s = src.snapshot()
    assert s.source == {"kind": "db"} and s.requests == 1 and len(s.recent) == 2
    assert "from: the database, as its rows are written" in screen(render(s, 120, "en"), 120)
    src.close()


WAITING_HEADERS = "waiting for headers"
#: a slow upstream: 3 s before its headers, 3 s of prefill, then a token every 200 ms (phases
#: seconds wide: a view 4 frames a second shows each, however busy the machine)
SLOW_UPSTREAM = SimConfig(ttfb_ms=3000, prefill_base_ms=3000, prefill_ms_per_1k_tokens=0, tpot_ms=200, output_tokens=30)


def _stream_timed(url: str, seen: dict) -> None:
    """Stream one answer, noting when its headers came and when each token reached this client."""
    body = {"model": "gpt-4o-mini", "stream": True, "messages": [{"role": "user", "content": "Say hi."}]}
    seen["tokens"] = []
    with httpx.stream("POST", url + "/v1/chat/completions", json=body, timeout=30,
                      headers={"authorization": "Bearer sk-test-live-0000000000000000000000"}) as r:
        seen["headers"] = time.monotonic()
        for line in r.iter_lines():
            if '"content":"' in line.replace('": "', '":"') and '"content":""' not in line.replace('": "', '":"'):
                seen["tokens"].append(time.monotonic())
    seen["done"] = time.monotonic()


def _streaming_tokens(text: str) -> int | None:
    """The token count of the newest drawing of the streaming request's row (its last two cells
    are the tokens and the rate)."""
    for ln in reversed(text.split("\n")):
        if "gpt-4o-mini" in ln and " streaming " in ln:
            cells = ln.split()
            if re.fullmatch(r"[\d,]+", cells[-2]):
                return int(cells[-2].replace(",", ""))
    return None


@pytest.mark.slow  # a real proxy process, `live` under a pty and a 12 s answer
def test_live_in_a_second_terminal_shows_what_the_proxy_knows(tmp_path, proxy_registry):
    """`firsttoken proxy` in one terminal, `firsttoken live` in another, as a person runs them: the
    second shows the request in flight with the phase and the token count the proxy knows, not
    what the database was last told (which had no tokens and lagged the phase by its writes)."""
    from conftest import start_proxy_process

    db = tmp_path / "second.db"
    with SimServer(SLOW_UPSTREAM) as sim:
        proc, port = start_proxy_process(["-u", sim.url, "--db", str(db)])
        term = Pty(CLI + ["live", "--db", str(db), "--lang", "en"], cols=140)
        try:
            term.wait_for(r"from: the running proxy, as it knows it \(http://127\.0\.0\.1:%d" % port)
            [entry] = [json.loads(p.read_text()) for p in proxy_registry.glob("*.json")]
            seen: dict = {}
            client = threading.Thread(target=_stream_timed, args=(f"http://127.0.0.1:{port}", seen))
            client.start()
            # the upstream's TTFB (3 s): the proxy waits for its headers, and `live` says so
            term.wait_for("gpt-4o-mini.*" + WAITING_HEADERS, timeout=10)
            assert "headers" not in seen, "shown while the upstream still held its headers"
            # its prefill (3 s): headers in, no token yet
            term.wait_for("gpt-4o-mini.*" + re.escape(PREFILL), timeout=10)
            assert "headers" in seen and not seen["tokens"], "shown while the upstream was in its prefill"
            # streaming: the count of tokens so far, as the proxy knows it
            deadline = time.monotonic() + 10
            n = None
            while time.monotonic() < deadline and (n is None or n < 5):
                n = _streaming_tokens(term.text())
                time.sleep(0.05)
            at = time.monotonic()
            knows = _read(entry["live"]).json()["in_flight"]  # what the proxy knows right after
            assert n is not None and n >= 5, term.text()[-3000:]
            assert knows and n <= knows[0]["tokens"]  # never ahead of the proxy
            # and not behind what this client had received 2 s earlier (it redraws 4 times a second)
            assert n >= sum(1 for t in seen["tokens"] if t <= at - 2.0), (n, [round(t - at, 2) for t in seen["tokens"]])
            client.join(30)
            term.wait_for(r"since then: 1 request", timeout=10)
            rc = term.interrupt()
            final = term.text()
        finally:
            term.close()
            proc.send_signal(signal.SIGINT)
            proc.communicate(timeout=30)
    assert rc == 0, final[-2000:]
    [r] = rows(db)
    assert any("gpt-4o-mini" in ln and output.ms(r["ttft_ms"]) in ln for ln in final.split("\n"))
    assert "firsttoken live detached" in final
