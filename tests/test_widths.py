"""Nothing a person is told to read or copy is lost at any terminal width.

Every table and view runs as the real CLI on a pseudo-terminal of 60 to 200 columns, against
the database `firsttoken demo` makes and one made by real SDK traffic with long values (a
Fireworks-style model path, an upstream with a path prefix, a doubled /v1, a reasoning model,
an Anthropic thinking stream). Each finding message and hint, URL, request id and model must
still be on the screen: wrapped is fine (compared with whitespace removed, or continuing in the
same column of the next lines), lost is not. The one deliberate elision: tables show 8
characters of a request id, which `firsttoken show` takes as a prefix.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
import time

import anthropic
import httpx
import openai
import pytest

from firsttoken.cli.output import localize
from firsttoken.cli.proxy.server import ProxyServer
from firsttoken.cli.simulate import SimConfig, SimServer
from firsttoken.cli.terminal import PseudoTerminal

pytestmark = pytest.mark.slow  # every view under a real pty at widths 60-200: the slow tier (`pytest -m slow`)

WIDTHS = (60, 72, 80, 100, 120, 130, 140, 160, 200)
FEW = (60, 100, 140, 200)
CLI = [sys.executable, "-c", "from firsttoken.cli.main import cli; cli()"]
ENV = dict(os.environ, LC_ALL="C.UTF-8", PYTHONIOENCODING="utf-8", FIRSTTOKEN_LANG="en")
LONG_MODEL = "accounts/fireworks/models/llama-v3p1-405b-instruct"
PREFIX = "/gateway/tenants/acme-research-lab/openai-compatible"
KEY = "sk-test-widths-000000000000000000000000"


# -- reading a screen ------------------------------------------------------------------------------
def flat(s: str) -> str:
    return re.sub(r"\s+", "", s)


def in_column(text: str, want: str) -> bool:
    """``want`` (no spaces) wrapped inside one table column: it starts at some column of a line
    and continues at the same column on the lines below."""
    lines = text.split("\n")
    for i, ln in enumerate(lines):
        c = ln.find(want[0])
        while c >= 0:
            rest, k = want, i
            while k < len(lines) and rest:
                seg = lines[k][c:]
                n = 0
                while n < len(rest) and n < len(seg) and seg[n] == rest[n]:
                    n += 1
                if n == 0:
                    break
                rest, k = rest[n:], k + 1
            if not rest:
                return True
            c = ln.find(want[0], c + 1)
    return False


def present(text: str, want: str) -> bool:
    w = flat(want)
    return w in flat(text) or (" " not in want.strip() and in_column(text, w))


def missing(text: str, wants: list[str]) -> list[str]:
    return [w for w in dict.fromkeys(wants) if w and not present(text, w)]


def terminal_rows(text: str, cols: int) -> list[str]:
    """``text`` as a terminal of ``cols`` columns shows it: a line longer than the terminal goes on
    in the next row, cut wherever the edge falls (in the middle of a word)."""
    from rich.cells import cell_len

    rows = []
    for ln in text.split("\n"):
        row, w = "", 0
        for ch in ln:
            cw = cell_len(ch)
            if w + cw > cols:
                rows.append(row)
                row, w = "", 0
            row, w = row + ch, w + cw
        rows.append(row)
    return rows


def broken_words(text: str, cols: int, wants: list[str]) -> list[str]:
    """The words of ``wants`` (split at spaces) that are not whole on a ``cols``-column screen: each
    word short enough to fit on a line must be one word of some row, not "configur" / "ed"."""
    from rich.cells import cell_len

    words = {w for row in terminal_rows(text, cols) for w in row.replace("│", " ").split()}
    return [w for want in wants for w in dict.fromkeys((want or "").split())
            if cell_len(w) <= cols // 2 and w not in words]


def screen(argv: list[str], cols: int, rows: int = 400, env: dict | None = None) -> str:
    """The command's output on a cols x rows terminal, once it has exited."""
    t = PseudoTerminal(cols, rows)
    try:
        t.spawn(CLI + argv, env=env or ENV)
        t.proc.wait(90)
        n = -1
        while n != t.bytes:  # what is still in the pty's buffer
            n = t.bytes
            time.sleep(0.05)
        return t.text()
    finally:
        t.close()


def db_rows(path) -> list[dict]:
    conn = sqlite3.connect(str(path))
    conn.row_factory = sqlite3.Row
    try:
        out = [dict(r) for r in conn.execute("SELECT * FROM requests ORDER BY started_at")]
    finally:
        conn.close()
    for r in out:
        r["findings"] = localize(json.loads(r["findings"] or "[]"), "en")
    return out


def top(r: dict) -> list[str]:
    f = (r["findings"] or [{}])[0]
    return [f.get("message") or "", f.get("hint") or ""]


# -- the databases -----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def demo_db(tmp_path_factory):
    path = tmp_path_factory.mktemp("demo") / "demo.db"
    subprocess.run(CLI + ["demo", "--db", str(path)], env=ENV, check=True, capture_output=True, timeout=120)
    return path


@pytest.fixture(scope="module")
def traffic(tmp_path_factory):
    """A proxy (kept running: env and doctor find it) in front of an upstream with a path prefix."""
    path = tmp_path_factory.mktemp("traffic") / "traffic.db"
    cfg = SimConfig(ttfb_ms=20, prefill_base_ms=30, prefill_ms_per_1k_tokens=0, tpot_ms=3, output_tokens=8,
                    reasoning_tokens=12, prefix=PREFIX)
    with SimServer(cfg) as sim, ProxyServer([sim.url + PREFIX], str(path), port=0) as p:
        oai = openai.OpenAI(base_url=p.url + "/v1", api_key=KEY, max_retries=0)
        msgs = [{"role": "user", "content": "Say hi."}]
        for _chunk in oai.chat.completions.create(model=LONG_MODEL, messages=msgs, stream=True,
                                                 stream_options={"include_usage": True}):
            pass
        for _chunk in oai.chat.completions.create(model=LONG_MODEL, messages=msgs, stream=True):
            pass  # no usage asked for: a finding with a hint
        for _chunk in oai.chat.completions.create(model="deepseek-reasoner", messages=msgs, stream=True,
                                                 stream_options={"include_usage": True}):
            pass
        doubled = openai.OpenAI(base_url=p.url + "/v1/v1", api_key=KEY, max_retries=0)
        with pytest.raises(openai.NotFoundError):
            doubled.chat.completions.create(model=LONG_MODEL, messages=msgs)
        ant = anthropic.Anthropic(base_url=p.url, api_key=KEY, max_retries=0)
        with ant.messages.stream(model="claude-sonnet-4-5", max_tokens=2048, messages=msgs,
                                 thinking={"type": "enabled", "budget_tokens": 1024}) as s:
            for _ in s:
                pass
        p.flush()
        yield {"db": path, "proxy": p, "sim": sim}


# -- the tables ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("which", ["demo", "traffic"])
def test_logs_loses_nothing_at_any_width(which, demo_db, traffic):
    db = demo_db if which == "demo" else traffic["db"]
    rs = db_rows(db)
    assert any(r["findings"] for r in rs)
    for cols in WIDTHS:
        out = screen(["logs", "--db", str(db)], cols)
        for r in rs:
            lost = missing(out, [r["id"][:8], r["model"] or "–", *top(r)])
            assert not lost, f"logs at {cols} columns lost {lost}:\n{out}"


def test_show_loses_nothing_at_any_width(traffic):
    rs = db_rows(traffic["db"])
    assert any(r["model"] == LONG_MODEL and r["path"].startswith("/v1/v1") for r in rs)
    for r in rs:
        wants = [r["id"], r["model"], r["upstream_url"], r["upstream_request_id"], r["path"]]
        wants += [t for f in r["findings"] for t in (f.get("message"), f.get("hint"))]
        for cols in WIDTHS if r["path"].startswith("/v1/v1") else FEW:
            out = screen(["show", r["id"][:8], "--db", str(traffic["db"])], cols)
            lost = missing(out, wants)
            assert not lost, f"show at {cols} columns lost {lost}:\n{out}"
            findings = out[out.index("findings\n"):] if "findings\n" in out else ""
            findings = findings.split("\nwords\n")[0]  # (the legend of terms follows the findings)
            assert all(ln.startswith("  ") for ln in findings.split("\n")[1:] if ln.strip()), findings


@pytest.mark.parametrize("which", ["demo", "traffic"])
def test_stats_loses_nothing_at_any_width(which, demo_db, traffic):
    db = demo_db if which == "demo" else traffic["db"]
    models = sorted({r["model"] for r in db_rows(db) if r["model"]})
    for cols in WIDTHS if which == "traffic" else FEW:
        out = screen(["stats", "--db", str(db)], cols)
        lost = missing(out, models)
        assert not lost, f"stats at {cols} columns lost {lost}:\n{out}"


VERY_LONG_MODEL = "accounts/fireworks/models/" + "very-long-model-name-" * 7 + "instruct-v2"
LONG_EXPERIMENT = "exp-" + "z" * 150


@pytest.fixture(scope="module")
def long_names(tmp_path_factory):
    """Requests whose model names and experiment tag are longer than any column can hold."""
    path = tmp_path_factory.mktemp("long") / "long.db"
    cfg = SimConfig(ttfb_ms=20, prefill_base_ms=10, prefill_ms_per_1k_tokens=0, tpot_ms=2, output_tokens=4)
    with SimServer(cfg) as sim, ProxyServer([sim.url], str(path), port=0) as p:
        for model in (LONG_MODEL, VERY_LONG_MODEL, "claude-sonnet-4-5-20250929"):
            for _ in range(2):
                r = httpx.post(p.url + "/v1/chat/completions", timeout=30,
                               headers={"x-firsttoken-experiment": LONG_EXPERIMENT},
                               json={"model": model, "stream": True, "messages": [{"role": "user", "content": "hi"}]})
                assert r.status_code == 200
        p.flush()
    return path


def _rows_whole(section: str, figures: list[list[str]]) -> list[list[str]]:
    """The percentile rows (metric, n, P50...) that are not on one line of ``section``, whole."""
    lines = [ln.replace("│", " ").replace("┃", " ").split() for ln in section.split("\n")]
    return [f for f in figures if not any(ln[-len(f):] == f for ln in lines if len(ln) >= len(f))]


@pytest.mark.parametrize("by", ["model", "experiment"])
def test_stats_tables_wrap_long_names_and_never_cut_a_number(long_names, by):
    from firsttoken.addon.store.stats_queries import METRICS
    from firsttoken.cli.labels import label
    from firsttoken.cli.output import ms

    LABELS = {name: label("en", f"metric.{name}") for name, _ in METRICS}

    res = json.loads(subprocess.run(CLI + ["stats", "--json", "--by", by, "--db", str(long_names)], env=ENV,
                                    capture_output=True, text=True, timeout=60, check=True).stdout)
    names = [g["group"] for g in res["groups"]]
    qs = [k for k in res["groups"][0]["ttft_ms"] if k != "n"]
    figures = [[*LABELS[m].split(), f"{g[m + '_ms']['n']:,}", *[ms(g[m + "_ms"].get(q)) for q in qs]]
               for g in res["groups"] for m in LABELS if g.get(m + "_ms") is not None
               and (g[m + "_ms"]["n"] or m != "whole")]  # (no non-streamed requests: no whole* row)
    for cols in (60, 80, 120, 200):
        out = screen(["stats", "--plot", "--by", by, "--db", str(long_names)], cols)
        assert "…" not in out, f"stats at {cols} columns cut a cell:\n{out}"
        summary, rest = out.split("Latency percentiles", 1)
        pct, bars = rest.split("TTFB, gap and TTFT, each on its own", 1)
        for what, part in (("summary", summary), ("percentiles", pct), ("plot", bars)):
            lost = missing(part, names)
            assert not lost, f"stats {what} at {cols} columns lost {lost}:\n{out}"
        cut = _rows_whole(pct, figures)
        assert not cut, f"stats at {cols} columns wrapped or cut the figures {cut}:\n{out}"


def test_demo_closing_table_loses_nothing(tmp_path):
    for cols in (60, 140):  # 140: where the issue saw OPENAI_BASE_URL=htt / ://127.0.0.1:51425/
        db = tmp_path / f"demo{cols}.db"
        out = screen(["demo", "--db", str(db)], cols)
        rs = db_rows(db)
        wants = [str(db)] + [t for r in rs for t in (r["id"][:8], r["model"], *top(r))]
        lost = missing(out, wants)
        assert not lost, f"demo at {cols} columns lost {lost}:\n{out}"
        assert re.search(r"firsttokenshow[0-9a-f]{8}--db", flat(out))


def test_diagnoses_catalog_loses_nothing():
    from firsttoken.cli.diagnoses import entries, hint_text

    cat = entries("en")
    for cols in WIDTHS:
        out = screen(["diagnoses", "--lang", "en"], cols, rows=2000)
        lost = missing(out, [t for e in cat for t in (e["code"], e["title"], hint_text(e["code"], "en"))])
        assert not lost, f"diagnoses at {cols} columns lost {lost[:5]}"


def test_help_loses_nothing_and_keeps_words_whole():
    from firsttoken.cli.main import SECTIONS

    wants = [t for title, rows in SECTIONS for t in (f"{title}:", *[x for row in rows for x in row])]
    for cols in WIDTHS:
        out = screen(["--help"], cols)
        lost = missing(out, wants)
        assert not lost, f"--help at {cols} columns lost {lost}:\n{out}"
        broken = broken_words(out, cols, wants)
        assert not broken, f"--help at {cols} columns broke {broken}:\n{out}"


@pytest.mark.parametrize("argv", [["tokenizers"], ["logs", "--db", "/nonexistent/firsttoken-widths/x.db"]])
def test_prose_keeps_words_whole(argv):
    """tokenizers' hints and an error message: what a 1000-column terminal shows on one line, a
    narrow one shows wrapped between words (the terminal left to cut them: issue 31)."""
    wide = screen(argv, 1000)
    wants = [ln for ln in wide.splitlines() if ln.strip()]
    prose = wants[next((i for i, ln in enumerate(wants) if ln.startswith("tiktoken cache")), 0):]
    assert prose
    for cols in WIDTHS:
        out = screen(argv, cols)
        assert not missing(out, prose), f"{argv[0]} at {cols} columns lost {missing(out, prose)}:\n{out}"
        broken = broken_words(out, cols, wants)  # every word, the table's too, whole (and there)
        assert not broken, f"{argv[0]} at {cols} columns broke {broken}:\n{out}"


def test_doctor_and_env_lose_nothing(traffic):
    db = str(traffic["db"])
    doc = json.loads(subprocess.run(CLI + ["doctor", "--offline", "--json", "--db", db], env=ENV,
                                    capture_output=True, text=True, timeout=60).stdout)
    wants = [t for c in doc["checks"] for t in (c.get("title"), c.get("fix"))]
    plan = subprocess.run(CLI + ["env", "openai", "--db", db], env=dict(ENV, COLUMNS="1000"), capture_output=True,
                          text=True, timeout=60).stdout
    assert "OPENAI_BASE_URL" in plan
    notes = [ln for ln in plan.splitlines() if ln.startswith("- ")]
    assert notes
    for cols in WIDTHS:
        out = screen(["doctor", "--offline", "--db", db], cols)
        lost = missing(out, wants)
        assert not lost, f"doctor at {cols} columns lost {lost}:\n{out}"
        broken = broken_words(out, cols, wants)  # "configur" / "ed" at 100 columns (issue 31)
        assert not broken, f"doctor at {cols} columns broke {broken}:\n{out}"
        out = screen(["env", "openai", "--db", db], cols)
        lost = missing(out, [ln for ln in plan.splitlines() if ln.strip()])
        assert not lost, f"env at {cols} columns lost {lost}:\n{out}"
        broken = broken_words(out, cols, notes)
        assert not broken, f"env at {cols} columns broke {broken}:\n{out}"


# -- the live view -----------------------------------------------------------------------------------------
def test_live_attached_loses_nothing(traffic):
    db = str(traffic["db"])
    rs = db_rows(db)
    for cols in FEW:
        t = PseudoTerminal(cols, 60)
        try:
            t.spawn(CLI + ["live", "--db", db], env=ENV)
            t.wait_for(re.escape(rs[-1]["id"][:8]), timeout=30)  # the newest finished request, with its id
            time.sleep(0.3)
            t.interrupt()
            out = t.text()
        finally:
            t.close()
        live = out[: out.rindex("firsttoken live detached")]
        # the proxy that wrote this database has stopped: the view says so and shows no routes
        assert "no proxy is running on this database" in " ".join(live.split())
        wants = [db] + [x for r in rs for x in (r["id"][:8], r["model"])]
        lost = missing(live, wants)
        assert not lost, f"live at {cols} columns lost {lost}:\n{live}"


def test_proxy_live_view_loses_nothing(tmp_path):
    cfg = SimConfig(ttfb_ms=10, prefill_base_ms=10, tpot_ms=2, output_tokens=5, prefix=PREFIX)
    with SimServer(cfg) as sim:
        for cols in (60, 130):
            from firsttoken.cli.loopback import free_port

            port, db = free_port(), tmp_path / f"p{cols}.db"
            t = PseudoTerminal(cols, 40)
            try:
                t.spawn(CLI + ["proxy", "-u", sim.url + PREFIX, "--port", str(port), "--db", str(db)], env=ENV)
                t.wait_for("OPENAI_BASE_URL", timeout=30)
                url = f"http://127.0.0.1:{port}"
                httpx.post(url + "/v1/v1/chat/completions", timeout=30, headers={"authorization": f"Bearer {KEY}"},
                           json={"model": LONG_MODEL, "messages": [{"role": "user", "content": "hi"}]})
                t.wait_for("1 request", timeout=30)
                time.sleep(0.5)
                assert t.interrupt() == 0
                out = t.text()
            finally:
                t.close()
            [r] = db_rows(db)
            wants = [sim.url + PREFIX, f"OPENAI_BASE_URL={url}/v1", str(db), r["id"][:8], LONG_MODEL, *top(r)]
            lost = missing(out, wants)
            assert not lost, f"proxy view at {cols} columns lost {lost}:\n{out}"


# -- show for reasoning models (issue 11 #13) -----------------------------------------------------------------
def test_show_splits_prefill_from_reasoning(traffic):
    from firsttoken.cli.output import ms

    rs = db_rows(traffic["db"])
    thinking = [r for r in rs if r["model"] in ("deepseek-reasoner", "claude-sonnet-4-5")]
    assert len(thinking) == 2
    for r in thinking:  # the openai SDK's reasoning_content stream and an Anthropic thinking stream
        assert r["first_token_ms"] is not None and r["ttfb_ms"] <= r["first_token_ms"] < r["ttft_ms"], r
        out = screen(["show", r["id"], "--db", str(traffic["db"])], 100)
        assert "starts at" in out and "gap (prefill)" not in out
        prefill = next(ln for ln in out.splitlines() if ln.startswith("prefill "))
        reasoning = next(ln for ln in out.splitlines() if ln.startswith("reasoning "))
        # prefill: headers → first token of any kind; reasoning: first token → first visible token
        assert prefill.split()[-2:] == [ms(r["ttfb_ms"]), ms(r["first_token_ms"] - r["ttfb_ms"])], prefill
        assert reasoning.split()[-2:] == [ms(r["first_token_ms"]), ms(r["ttft_ms"] - r["first_token_ms"])], reasoning
        assert prefill.index("░") < reasoning.index("▓")  # one after the other, not on top of each other
        assert prefill.rstrip("░ ").rfind("░") <= reasoning.index("▓")
    plain = next(r for r in rs if r["model"] == LONG_MODEL and r["ttft_ms"])
    out = screen(["show", plain["id"], "--db", str(traffic["db"])], 100)
    gap = next(ln for ln in out.splitlines() if ln.startswith("gap (prefill)"))
    assert gap.split()[-2:] == [ms(plain["ttfb_ms"]), ms(plain["ttft_ms"] - plain["ttfb_ms"])]
    assert not any(ln.startswith("reasoning ") for ln in out.splitlines())


# -- one language per view (issue 24 #7) ----------------------------------------------------------------------
def zh_rows(path) -> list[dict]:
    rs = db_rows(path)
    for r in rs:
        r["findings"] = localize(r["findings"], "zh")
    return rs


def english_left(out: str, view: str) -> list[str]:
    """The view's English labels still on a Chinese screen (those that differ from their Chinese)."""
    from firsttoken.cli.labels import LABELS

    prefixes = {"logs": ("col.", "more_findings"), "show": ("show.", "sev."),
                "stats": ("col.", "stats.", "metric.", "fitnote."), "live": ("col.", "conv.", "sec_", "none_", "phase.")}[view]
    left = []
    for key, en in LABELS["en"].items():
        if not key.startswith(prefixes) or en == LABELS["zh"].get(key) or len(en) < 4:
            continue
        words = re.split(r"\{[^}]*\}", en)  # the fixed words around the values
        for w in words:
            w = w.strip(" ()·:;,~")
            if w.startswith("`"):  # a command in backticks is the same in every language
                continue
            if len(w) >= 4 and re.search(r"(?<![\w/.\"=-])" + re.escape(w) + r"(?![\w/.\"=(-])", out):  # not in a path or code
                left.append(f"{key}: {w}")
    return left


def broken_inside(out: str) -> list[str]:
    """Lines that end where a Chinese line must not break: an arrow alone, a number cut from its unit,
    code cut in two (`"stream":` / `true`)."""
    lines = [ln.strip() for ln in out.split("\n")]
    bad = [ln for ln in lines if ln == "→"]
    for a, b in zip(lines, lines[1:]):
        if re.search(r"\d$", a) and b.startswith(("毫秒", "秒", "个", "次")):
            bad.append(f"{a} / {b}")
        if re.search(r'"\w+":$', a) or (a.endswith("毫") and b.startswith("秒")):
            bad.append(f"{a} / {b}")
    return bad


@pytest.mark.parametrize("which", ["demo", "traffic"])
def test_logs_show_stats_are_wholly_chinese_at_any_width(which, demo_db, traffic):
    db = demo_db if which == "demo" else traffic["db"]
    env = dict(ENV, FIRSTTOKEN_LANG="en")  # --lang wins over the environment
    rs = zh_rows(db)
    shown = [r for r in rs if r["findings"]][:3]
    assert shown
    for cols in WIDTHS if which == "demo" else FEW:
        out = screen(["logs", "--lang", "zh", "--db", str(db)], cols, env=env)
        assert "模型" in out and "状态" in out, out
        lost = missing(out, [x for r in rs for x in (r["id"][:8], *top(r))])
        assert not lost, f"logs --lang zh at {cols} columns lost {lost}:\n{out}"
        assert not english_left(out, "logs"), f"logs --lang zh at {cols}: {english_left(out, 'logs')}\n{out}"
        assert not broken_inside(out), f"logs --lang zh at {cols}: {broken_inside(out)}\n{out}"

        for r in shown:
            out = screen(["show", r["id"][:8], "--lang", "zh", "--db", str(db)], cols, env=env)
            assert "阶段" in out and "诊断" in out, out
            lost = missing(out, [r["id"], *[t for f in r["findings"] for t in (f.get("message"), f.get("hint"))]])
            assert not lost, f"show --lang zh at {cols} columns lost {lost}:\n{out}"
            assert not english_left(out, "show"), f"show --lang zh at {cols}: {english_left(out, 'show')}\n{out}"
            assert not broken_inside(out), f"show --lang zh at {cols}: {broken_inside(out)}\n{out}"

        out = screen(["stats", "--plot", "--lang", "zh", "--db", str(db)], cols, env=env)
        assert "延迟百分位" in out, out
        lost = missing(out, sorted({r["model"] for r in rs if r["model"]}))
        assert not lost, f"stats --lang zh at {cols} columns lost {lost}:\n{out}"
        assert not english_left(out, "stats"), f"stats --lang zh at {cols}: {english_left(out, 'stats')}\n{out}"
        assert not broken_inside(out), f"stats --lang zh at {cols}: {broken_inside(out)}\n{out}"
    # and English stays English
    out = screen(["logs", "--db", str(db)], 120)
    assert "时间" not in out and "time" in out


def test_live_view_is_wholly_chinese(traffic):
    db = str(traffic["db"])
    rs = zh_rows(db)
    for cols in FEW:
        t = PseudoTerminal(cols, 60)
        try:
            t.spawn(CLI + ["live", "--lang", "zh", "--db", db], env=ENV)
            t.wait_for(re.escape(rs[-1]["id"][:8]), timeout=30)
            time.sleep(0.3)
            t.interrupt()
            out = t.text()
        finally:
            t.close()
        assert "会话" in out and "第 1 轮" in out, out  # the conversation line
        assert "进行中" in out and "最近完成" in out, out
        lost = missing(out, [x for r in rs for x in (r["id"][:8], r["model"])])
        assert not lost, f"live --lang zh at {cols} columns lost {lost}:\n{out}"
        assert not english_left(out, "live"), f"live --lang zh at {cols}: {english_left(out, 'live')}\n{out}"
        assert not broken_inside(out), f"live --lang zh at {cols}: {broken_inside(out)}\n{out}"


def test_chinese_hint_keeps_its_arrow_code_and_numbers_whole():
    from firsttoken.cli.output import wrap

    hint = ("→ 发送 \"stream\": true（openai：stream=True；anthropic：client.messages.stream(...)），即可边生成边接收 token。"
            "客户端在 1,234 毫秒后放弃，此时 0.0 毫秒还没有返回响应头。")
    for cols in range(60, 201, 10):
        lines = [ln.plain for ln in wrap(hint, cols, 8, 10)]
        assert "".join(ln.strip() for ln in lines) == re.sub(r"(?<=[^\x00-\x7f]) (?=[^\x00-\x7f])", "", hint).replace(" ", "") \
            or flat("".join(lines)) == flat(hint), lines
        assert all(len(ln) <= cols for ln in lines)
        assert not broken_inside("\n".join(lines)), lines
        assert lines[0].strip() != "→" and '"stream": true' in "\n".join(lines), lines
        if cols >= 160:
            assert len(lines) <= 2, lines  # the arrow is not left alone at 160 columns
    english = "→ Add stream_options and retry the request with a longer timeout please " * 3
    assert [ln.plain for ln in wrap(english, 60, 2, 4)][0].startswith("  → Add stream_options")
