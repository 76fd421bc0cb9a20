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
        self.anchors, self.ids = [], []

    def handle_starttag(self, tag, attrs):
        self.tags.add(tag)
        self.values += [v or "" for _, v in attrs]
        for k, v in attrs:
            if k == "href" and tag == "a" and re.fullmatch(r"#req-[\w.:-]+", v or ""):
                self.anchors.append(v[1:])  # a link to a section of the same page
            elif k in ("src", "href", "xlink:href", "action", "srcset", "poster", "data") or (v and "url(" in v):
                self.refs.append((tag, k, v))
            if k == "id":
                self.ids.append(v)
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
    assert c.refs == []  # no src= / href= / url(...) but links within the page: nothing to fetch
    assert c.anchors and set(c.anchors) <= set(c.ids)  # every id link has its details section
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
    assert page.count("<svg") == 4  # scatter + TTFT split + TTFB / gap percentiles
    assert "TTFT = TTFB + gap" in page
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


def test_dots_are_visible_and_titled(page):
    dots = re.findall(r'<circle cx="[\d.]+" cy="[\d.]+" r="([\d.]+)"><title>([^<]+)</title></circle>', page)
    assert len(dots) == page.count("<circle") > 100
    assert min(float(r) for r, _ in dots) >= 4
    rid, model, ttft, prompt = dots[0][1].split(" · ")
    assert re.fullmatch(r"[0-9a-f-]{20,}", rid) and model and ttft.startswith("TTFT ") and prompt.endswith("prompt tokens")
    assert 'fill-opacity="0.35"' not in page  # solid, not faint


def test_ids_link_to_details_and_do_not_wrap(page):
    i = page.index("Slowest")
    assert '<a class="id" href="#req-evil-1"' in page[i:]
    assert '<div class="req" id="req-evil-1">' in page
    assert "a.id{" in page and "white-space:nowrap" in page[page.index("a.id{"):page.index("a.id{") + 200]
    details = page[page.index('id="req-evil-1"'):]
    details = details[:details.index("</div></div>") + 12]
    assert "slowest by TTFT" in details and "auth.rejected" in details and "see https://example.com/docs" in details
    # failed requests are listed and linked too
    j = page.index("failed requests")
    first = re.search(r'href="#(req-[^"]+)"', page[j:]).group(1)
    assert f'id="{first}"' in page


def test_ttft_bars_are_split_into_ttfb_and_gap(page):
    i = page.index("TTFT = TTFB + gap")
    svg = page[i:page.index("</svg>", i)]
    ttfb = re.findall(r'fill="#1d4ed8"><title>(P\d+): TTFT ([^ ]+) = TTFB ([^ ]+) \+ gap ([^ ]+) ', svg)
    gap = re.findall(r'fill="#f59e0b"><title>', svg)
    assert len(ttfb) == len(gap) >= 2 and {q for q, *_ in ttfb} == {"P50", "P95"}


@pytest.mark.parametrize("args,says", [([], "has no requests yet"), (["--model", "no-such-model"], "no requests match --model")])
def test_nothing_to_report_is_an_error_and_writes_nothing(tmp_path, args, says):
    path = tmp_path / "empty.db"
    open_db(path).conn.close()  # a real, migrated, empty database
    if args:
        generate(path, 50, days=1, seed=1)
    out = tmp_path / "r.html"
    res = CliRunner().invoke(report, ["--db", str(path), "--html", str(out), *args])
    assert res.exit_code == 1
    assert says in " ".join(res.output.split()) and "no report written" in res.output
    assert not out.exists()
