"""`firsttoken report --html`: one self-contained page that parses, links to nothing and escapes everything."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser

import pytest
from click.testing import CliRunner

from firsttoken.addon.store.db import open_db
from firsttoken.cli.bench.db import generate
from firsttoken.cli.report.command import report
from firsttoken.cli.report.html import nice_ticks

VOID = {"meta", "br", "img", "input", "link", "hr", "col", "area", "base", "wbr", "source", "track", "embed", "param"}
SVG_LEAVES = {"circle", "line", "rect", "path", "polyline"}


class Checker(HTMLParser):
    """Tags must nest and close; collects attributes that could fetch something."""

    def __init__(self):
        super().__init__()
        self.stack, self.errors, self.refs, self.tags, self.values = [], [], [], set(), []

    def handle_starttag(self, tag, attrs):
        self.tags.add(tag)
        self.values += [v or "" for _, v in attrs]
        for k, v in attrs:
            if k in ("src", "href", "xlink:href", "action", "srcset", "poster", "data") or (v and "url(" in v):
                self.refs.append((tag, k, v))
        if tag not in VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag, attrs):
        self.tags.add(tag)
        for k, v in attrs:
            if k in ("src", "href", "xlink:href") or (v and "url(" in v):
                self.refs.append((tag, k, v))

    def handle_endtag(self, tag):
        if tag in VOID:
            return
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> but open: {self.stack[-3:]}")
            return
        self.stack.pop()


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    d = tmp_path_factory.mktemp("report")
    path = d / "r.db"
    generate(path, 3000, days=3, seed=9)
    db = open_db(path)
    evil = [{"code": "auth.rejected", "severity": "error", "message": "<script>alert('x')</script> & more",
             "hint": "see https://example.com/docs"}]
    db["requests"].insert({"id": "evil-1", "started_at": "2026-11-29T10:00:00.000+00:00", "state": "done",
                           "model": "<img src=https://evil.example/x.png>", "status": 200, "ttft_ms": 99999.0,
                           "ttfb_ms": 10.0, "gap_ms": 99989.0, "conn_reused": 1, "prompt_tokens_est": 100,
                           "upstream": "https://api.openai.com", "findings": json.dumps(evil), "top_code": "auth.rejected"})
    db.conn.commit()
    out = d / "r.html"
    res = CliRunner().invoke(report, ["--db", str(path), "--html", str(out)])
    assert res.exit_code == 0, res.output
    return out.read_text(encoding="utf-8")


def test_report_is_self_contained(page):
    c = Checker()
    c.feed(page)
    c.close()
    assert c.errors == [] and c.stack == []
    assert c.refs == []  # no src= / href= / url(...) at all: nothing to fetch
    assert not [v for v in c.values if re.search(r"(?i)https?:|//", v)]  # URLs only ever appear as escaped text
    style = page[page.index("<style>"):page.index("</style>")]
    assert "url(" not in style and "http" not in style
    assert "@import" not in page and "<script" not in page and "<link" not in page
    assert page.startswith("<!DOCTYPE html>") and '<meta charset="utf-8"/>' in page


def test_report_has_the_charts_and_tables(page):
    c = Checker()
    c.feed(page)
    assert {"svg", "circle", "line", "rect", "table"} <= c.tags
    for heading in ("Per model", "TTFT against prompt tokens", "Percentiles", "Findings", "Slowest"):
        assert f">{heading}" in page
    assert page.count("<svg") == 4  # scatter + TTFB / TTFT / gap percentiles
    assert "rate.limited" in page and "latency.cold_connection" in page
    assert "ms/1k tokens" in page and "gpt-4o-mini" in page


def test_report_escapes_what_it_shows(page):
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt; &amp; more" in page
    assert "&lt;img src=https://evil.example/x.png&gt;" not in page or "<img" not in page
    assert "<img" not in page
    i = page.index("Slowest")
    assert "evil-1" in page[i:]  # the slowest request is listed first


def test_ticks():
    assert nice_ticks(0, 950) == [0, 200, 400, 600, 800, 1000]
    assert nice_ticks(0, 4.2, 4)[-1] >= 4.2
