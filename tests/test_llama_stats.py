"""`firsttoken stats` against the REAL llama.cpp ``llama-server`` (tests/llama_server.py): the engine's own
prefill line, fitted from the `timings` the client itself received, stands beside TTFT's fit, and the split
of TTFT into the engine's terms is there per model and per route, as a user reads it."""

from __future__ import annotations

import json
import re

import pytest
from click.testing import CliRunner
from test_llama_server import chat, llama, proxied, sized  # noqa: F401  (the module's fixtures)

from firsttoken.cli.stats import SLOPE_AGREES, stats

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def line(points: list[tuple[float, float]]) -> float:
    """The least-squares slope of y on x, ms per 1k."""
    n = len(points)
    mx, my = sum(x for x, _ in points) / n, sum(y for _, y in points) / n
    return 1000 * sum((x - mx) * (y - my) for x, y in points) / sum((x - mx) ** 2 for x, _ in points)


def test_stats_sets_the_engines_own_prefill_beside_ttfts_fit(proxied):  # noqa: F811
    server, proxy, db, client = proxied
    own = []
    for i, n in enumerate((200, 600, 1000, 1400, 1800, 2200)):  # one at a time: TTFT is prefill, not a queue
        seen = chat(client, sized(server, n, f"stats {i}"), "st", stream=True, usage=True, max_tokens=2)
        t = seen.final["timings"]
        own.append((t["prompt_n"], t["prompt_ms"]))
    proxy.flush()
    runner = CliRunner(env={"COLUMNS": "100"})
    res = runner.invoke(stats, ["--db", str(db), "--json"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    g = json.loads(res.output)["groups"][0]
    e = g["engine"]
    # the engine's line is the one the client's own copy of its timings gives
    assert e["engines"] == ["llama.cpp"] and e["prefill_fit"]["n"] == 6
    assert e["prefill_fit"]["slope_ms_per_1k"] == pytest.approx(line(own), rel=0.001)
    assert e["terms"]["prefill"]["n"] == 6 and "inferred" not in e["terms"]["prefill"] or \
        e["terms"]["prefill"]["inferred"] == 0
    # sent one at a time, TTFT grows with the prompt as the engine's prefill does (the field guide's claim)
    ratio = g["ttft_slope_ms_per_1k"] / e["prefill_fit"]["slope_ms_per_1k"]
    assert SLOPE_AGREES[0] <= ratio <= SLOPE_AGREES[1], (ratio, g)
    for cols in ("60", "80", "120"):  # as a user reads it, at any width: nothing lost, no line too wide
        out = CliRunner(env={"COLUMNS": cols}).invoke(stats, ["--db", str(db), "--by", "route"],
                                                      catch_exceptions=False).output
        flat = " ".join(out.split())
        assert "The engine's own clock" in flat and re.search(r"\bprefill[ │]+6[ │]", flat), out
        assert f"its own prefill: {e['prefill_fit']['slope_ms_per_1k']:,.0f} ms per 1k tokens it prefilled" in flat, out
        assert "as the engine's prefill does" in flat, out
        assert all(len(x) <= int(cols) for x in out.splitlines()), out
        print(out)
