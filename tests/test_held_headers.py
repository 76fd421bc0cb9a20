"""Headers held until the first token (addon/hops/held.py) and the latency rules around it, on recorded
timings: the route's own history, the TTFT-vs-input fit, per-band baselines, `compare`'s verdict and `show`.

The timings are of the kind recorded through LiteLLM 1.108 in tests/test_litellm.py: LiteLLM sends its
headers with the upstream's first chunk (TTFB ≈ TTFT), the simulator behind it sends them 30 ms in.
"""

from __future__ import annotations

import collections
import io
import subprocess
import sys

import pytest
from rich.console import Console

from firsttoken.addon.diagnose import DiagnosisInput, diagnose
from firsttoken.addon.hops import RouteWindows, fit_of_route, headers_held, looks_held, route_fit, route_holds
from firsttoken.addon.record import Record
from firsttoken.cli import show
from firsttoken.cli.compare import added_ttft, paired_deltas, verdict

GW = dict(route="litellm", upstream="http://127.0.0.1:4000", upstream_url="http://127.0.0.1:4000/v1/chat/completions")
DIRECT = dict(route="direct", upstream="http://127.0.0.1:9000", upstream_url="http://127.0.0.1:9000/v1/chat/completions")
#: (prompt tokens, ttfb, ttft) through LiteLLM: 10 ms + 60 ms per 1k of prefill inside the TTFB
THROUGH = [(200, 86.1, 86.9), (2000, 193.5, 194.0), (6000, 438.2, 438.8), (200, 81.0, 81.6),
           (2000, 197.7, 198.9), (6000, 431.0, 431.4), (200, 90.4, 91.0), (2000, 190.2, 190.6)]
#: the same prompts sent directly: headers at ~31 ms, the prefill after them
DIRECT_T = [(200, 31.2, 53.9), (2000, 31.0, 162.1), (6000, 32.5, 402.0), (200, 30.8, 52.7),
            (2000, 31.9, 160.3), (6000, 31.4, 405.5)]


def rec(i: int, tokens: int, ttfb: float, ttft: float, where=GW, **kw) -> Record:
    base = dict(id=f"r{i}", started_at="2026-01-01T00:00:00.000+00:00", state="done", phase="done", method="POST",
                path="/v1/chat/completions", api="openai.chat", model="gpt-4o-mini", stream=True, status=200,
                content_type="text/event-stream", conn_reused=True, ttfb_ms=ttfb, first_byte_ms=ttfb,
                first_token_ms=ttft, ttft_ms=ttft, gap_ms=round(ttft - ttfb, 3), total_ms=ttft + 20,
                events=6, event_offsets=[ttft + 2 * k for k in range(6)], stream_done=True, finish_reason="stop",
                prompt_tokens_est=tokens, system_tokens=0, tools_tokens=0, last_user_tokens=tokens, messages=1,
                key_header="authorization", key_fingerprint="sk-…abcd", key_scheme="Bearer", key_length=40,
                **where)
    base.update(kw)
    return Record(**base)


def history(spec=THROUGH, where=GW, start=0) -> list[Record]:
    out = []
    for i, (n, b, t) in enumerate(spec):
        r = rec(start + i, n, b, t, where)
        r.headers_held = headers_held(r, out)
        out.append(r)
    return out


def ctx(recent):
    return DiagnosisInput(recent=collections.deque(recent, maxlen=500))


def codes(findings):
    return [f["code"] for f in findings]


# -- detection ---------------------------------------------------------------------------------------

def test_one_stream_tells_only_when_its_ttft_is_long_enough():
    assert looks_held(86.1, 86.9) is True
    assert looks_held(223.0, 252.4) is True  # LiteLLM's own work on its first chunks: under 15% of TTFT
    assert looks_held(1000.0, 1060.0) is False  # ... but never over 50 ms: that is a prefill
    assert looks_held(31.2, 53.9) is False  # a gap after the headers: they came early
    assert looks_held(20.0, 21.0) is None  # too short a TTFT to tell anything
    assert looks_held(None, 80.0) is None and looks_held(30.0, None) is None


def test_a_route_holds_when_it_does_so_repeatedly():
    assert route_holds(THROUGH[:2]) is None  # too few
    assert route_holds(THROUGH) is True
    assert route_holds(DIRECT_T) is False
    # one odd stream in five does not turn it
    assert route_holds(THROUGH[:4] + [(200, 30.0, 90.0)]) is True
    # short prompts behind a slow network look the same (big TTFB, small gap): no prompt large enough
    # to show a prefill inside the TTFB, so it cannot tell
    far = [(200, 300.0 + i, 330.0 + i) for i in range(6)]
    assert route_holds(far) is None
    r = rec(99, 200, 900.0, 930.0, DIRECT)
    r.headers_held = headers_held(r, [rec(i, n, b, t, DIRECT) for i, (n, b, t) in enumerate(far)])
    assert r.headers_held is None


def test_the_record_says_held_from_the_route_or_from_a_large_prompt():
    through = history()
    assert through[0].headers_held is None  # a small first prompt: not known yet
    assert through[1].headers_held is True  # 2,000 tokens with no gap: the prefill went into the TTFB
    assert all(r.headers_held is True for r in through[1:])
    small_first = history([THROUGH[0], THROUGH[3], THROUGH[1], (200, 88.0, 88.4)])
    assert [r.headers_held for r in small_first] == [None, None, True, True]  # the route did it three times
    assert all(r.headers_held is False for r in history(DIRECT_T, DIRECT))
    # a 40k-token prompt whose first token came with the headers: its prefill cannot have taken no time
    big = rec(99, 40_000, 2420.0, 2421.0)
    assert headers_held(big, []) is True
    # another route's history does not count for this one
    small = rec(98, 200, 86.0, 86.5, DIRECT)
    assert headers_held(small, history()) is None


def test_the_analysis_threads_route_windows_answer_as_the_records_do():
    """The analysis thread keeps each route's recent streams as they finish (RouteWindows) rather
    than scanning its 500 records per request: the same answer, routes interleaved."""
    windows, seen = RouteWindows(), []
    spec = [(n, b, t, GW) for n, b, t in THROUGH] + [(n, b, t, DIRECT) for n, b, t in DIRECT_T]
    spec = [x for pair in zip(spec[:len(THROUGH)], spec[len(THROUGH):] + spec[:2]) for x in pair]
    answers = []
    for i, (n, b, t, where) in enumerate(spec * 3):
        r = rec(i, n, b, t, where)
        r.headers_held = headers_held(r, windows)
        assert r.headers_held == headers_held(r, seen), i
        answers.append(r.headers_held)
        seen.append(r)
        windows.add(r)
    assert True in answers and False in answers and None in answers  # every kind of answer was compared


def test_the_fit_recovers_what_a_held_ttfb_hides():
    fit = route_fit([(n, t) for n, _, t in THROUGH])
    assert fit is not None and fit.n == len(THROUGH)
    assert fit.slope_ms_per_1k == pytest.approx(60, rel=0.15) and fit.intercept_ms == pytest.approx(75, abs=15)
    assert fit.prefill_ms(40_000) == pytest.approx(2400, rel=0.15)
    assert route_fit([(n, t) for n, _, t in THROUGH[:4]]) is None  # too few
    assert route_fit([(200, 80.0 + i) for i in range(8)]) is None  # one size: no slope
    assert route_fit([(n, 500.0 - n / 10) for n, _, _ in THROUGH]) is None  # falling: noise, not prefill
    # the route's fit leaves out other routes, other models and the record itself
    big = rec(99, 40_000, 2420.0, 2421.0)
    mixed = history() + history(DIRECT_T, DIRECT, start=50) + [rec(70 + i, 6000, 5000.0, 5000.0, model="other")
                                                               for i in range(6)]
    assert fit_of_route(big, mixed) == route_fit([(n, t) for n, _, t in THROUGH])


def test_streams_on_new_connections_count_less_their_connect():
    """A client that opens a connection per request (the SDKs through a proxy) still gets a route fit: each
    new connection's TTFT counts less its connect, so the fit is the one of the same streams on a warm one."""
    fresh = [rec(i, n, b + 40, t + 40, conn_reused=False, connect_ms=40.0) for i, (n, b, t) in enumerate(THROUGH)]
    big = rec(99, 40_000, 2420.0, 2421.0)
    assert fit_of_route(big, fresh) == route_fit([(n, t) for n, _, t in THROUGH]) != fit_of_route(
        big, [rec(i, n, b + 40, t + 40) for i, (n, b, t) in enumerate(THROUGH)])


# -- diagnosis ------------------------------------------------------------------------------------------

def test_a_40k_prompt_through_a_held_route_is_prefill_not_network():
    big = rec(99, 40_000, 2420.0, 2421.0)
    earlier = history()
    big.headers_held = headers_held(big, earlier)
    f = diagnose(big, ctx(earlier))
    assert "latency.network" not in codes(f)
    held = next(x for x in f if x["code"] == "latency.headers_held")
    assert held["params"]["variant"] == "fit" and held["params"]["prefill_ms"] == pytest.approx(2400, rel=0.15)
    assert "the TTFB/prefill split is not visible through this hop" in held["message"]
    pre = next(x for x in f if x["code"] == "latency.prefill")
    assert pre["params"]["variant"] == "fit" and pre["params"]["route"] == "litellm"
    # without the field (a record before m016) the same TTFB would have been called network
    big.headers_held = None
    assert "latency.network" in codes(diagnose(big, ctx([])))


def test_a_slow_path_before_a_held_hop_is_still_network_by_the_fit():
    """1.5 s before the model on every request (a far region behind the gateway): TTFT less the
    prefill the fit predicts is what counts, not the TTFB that holds the prefill."""
    slow = [(n, b + 1500.0, t + 1500.0) for n, b, t in THROUGH]
    earlier = history(slow)
    r = rec(99, 2000, 1700.0, 1700.5)
    r.headers_held = headers_held(r, earlier)
    f = diagnose(r, ctx(earlier))
    net = next(x for x in f if x["code"] == "latency.network")
    assert net["params"]["variant"] == "fit" and net["params"]["before_ms"] == pytest.approx(1580, abs=60)
    assert "came before the model" in net["message"]


def test_held_without_a_fit_still_says_so_and_not_network():
    big = rec(99, 40_000, 2420.0, 2421.0)
    big.headers_held = True
    f = diagnose(big, ctx([]))
    assert "latency.network" not in codes(f) and "latency.prefill" not in codes(f)
    held = next(x for x in f if x["code"] == "latency.headers_held")
    assert held["params"]["variant"] == "nofit" and "firsttoken sweep" in held["hint"]


def test_baselines_are_per_route_and_prompt_size_band():
    slow = dict(ttfb_ms=700.0, first_token_ms=760.0, ttft_ms=760.0, gap_ms=60.0)
    same = [rec(i, 200, 100.0 + i, 160.0 + i, DIRECT) for i in range(6)]
    r = rec(99, 200, 0, 0, DIRECT, **slow)
    assert "latency.network" in codes(diagnose(r, ctx(same)))
    # the same history on another route, or with 40k-token prompts against 200-token ones: no verdict
    assert "latency.network" not in codes(diagnose(rec(99, 200, 0, 0, GW, **slow), ctx(same)))
    assert "latency.network" not in codes(diagnose(rec(99, 40_000, 0, 0, DIRECT, **slow), ctx(same)))
    # ... also through the plain-list path (no deque window)
    c = DiagnosisInput(recent=list(same))
    assert "latency.network" not in codes(diagnose(rec(99, 40_000, 0, 0, DIRECT, **slow), c))
    assert "latency.network" in codes(diagnose(rec(99, 200, 0, 0, DIRECT, **slow), c))


# -- compare and show --------------------------------------------------------------------------------------

def _route(ttfb, gap, ttft, slope, intercept):
    return {"ttfb_ms": {"p50": ttfb}, "gap_ms": {"p50": gap}, "ttft_ms": {"p50": ttft},
            "ttft_slope_ms_per_1k": slope, "ttft_slope_se_ms_per_1k": 1.0, "ttft_intercept_ms": intercept}


def test_compare_pairs_twins_and_names_the_held_route():
    a = [{"prompt_tokens": n, "ttft_ms": t} for n, _, t in DIRECT_T]
    b = [{"prompt_tokens": n, "ttft_ms": t} for n, _, t in THROUGH[:6]]
    d = paired_deltas(a, b)
    assert len(d) == 6 and d[0] == pytest.approx(86.9 - 53.9)
    # the routes name the model differently (other token counts): the sizes pair by rank
    b2 = [dict(x, prompt_tokens=x["prompt_tokens"] + 3) for x in b]
    assert sorted(paired_deltas(a, b2)) == sorted(d)
    added = added_ttft(d)
    assert added["pairs"] == 6 and added["p25_ms"] <= added["added_ms"] <= added["p75_ms"]
    v = verdict("direct", "litellm", _route(31, 130, 160, 60, 41), _route(194, 0.5, 194, 61, 75), added,
                {"direct": False, "litellm": True})
    assert v["headers_held"] == ["litellm"] and v["ttft"] == "adds" and v["prefill"] == "same"
    assert "route litellm adds" in v["text"] and "to TTFT over direct" in v["text"]
    assert "route litellm holds its response headers" in v["text"] and "of TTFB over" not in v["text"]
    assert v["intercept_delta_ms"] == pytest.approx(34)
    # one input size through a held route: where it went cannot be told, prefill neither
    one = verdict("direct", "litellm", _route(31, 130, 160, None, None), _route(194, 0.5, 194, None, None), added,
                  {"direct": False, "litellm": True})
    assert one["ttfb"] == "unknown" and one["prefill"] == "unknown" and "several --inputs" in one["text"]
    # neither route holds: the bisection by TTFB and gap stands
    plain = verdict("direct", "gateway", _route(31, 130, 160, 60, 41), _route(131, 130, 260, 60, 141),
                    added_ttft([100.0] * 6), {"direct": False, "gateway": False})
    assert "route gateway adds 100 ms of TTFB over direct" in plain["text"] and plain["ttfb"] == "adds"


@pytest.mark.parametrize("width", [60, 100, 200])
def test_show_says_the_split_is_not_visible(width):
    big = rec(99, 40_000, 2420.0, 2421.0)
    big.headers_held = True
    row = big.row()
    row["findings"] = []
    buf = io.StringIO()
    Console(file=buf, width=width, color_system=None).print(show.render(row, width=width))
    out = buf.getvalue()
    assert max(len(line) for line in out.splitlines()) <= width
    flat = " ".join(out.split())
    assert "the TTFB/prefill split is not visible through this hop" in flat
    assert "TTFB+prefill" in flat and "gap (prefill)" not in flat


@pytest.mark.parametrize("module", ["firsttoken.addon.hops", "firsttoken.addon.hops.held", "firsttoken.cli.compare",
                                    "firsttoken.addon.diagnose.thresholds"])
def test_each_module_imports_first(module):
    """hops reads diagnose's thresholds and diagnose asks hops: whichever a fresh process imports first works."""
    r = subprocess.run([sys.executable, "-c", f"import {module}"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr


def test_a_prompt_cache_hit_is_not_held_headers():
    """Issue 31: a repeat the server read from its prompt cache prefills in no time, so its first token
    comes with the headers; with 2,117 prompt tokens that looked like a hop holding them, and the
    TTFT-vs-prompt fit (which leaves held headers out) lost the cache hits it fits uncached tokens on.
    Only the tokens still to prefill count."""
    hit = rec(1, 2117, 52.0, 60.0, DIRECT, usage_prompt_tokens=2117, usage_cached_tokens=1800)
    assert headers_held(hit) is None
    assert headers_held(rec(2, 2117, 52.0, 60.0, DIRECT)) is True  # the same timings without a cache read
    assert headers_held(rec(3, 2600, 52.0, 60.0, DIRECT, usage_prompt_tokens=2600, usage_cached_tokens=512)) is True
    # a route of cache hits does not make the route hold its headers either
    windows = RouteWindows()
    for i in range(6):
        windows.add(rec(10 + i, 2117, 52.0, 60.0, DIRECT, usage_prompt_tokens=2117, usage_cached_tokens=1800))
    assert windows.holds(rec(20, 200, 52.0, 60.0, DIRECT)) is None
