"""TPOT counts the tokens after the first visible one: reasoning tokens come before TTFT and
must not be divided into the streaming time (real streams: DeepSeek reasoner 0.55 ms against
~9.9 ms per visible token when they were)."""

from __future__ import annotations

import time

import openai
import pytest
from conftest import one_row, sent_since, token_writes

from firsttoken.addon.record import visible_output_tokens
from firsttoken.cli.proxy.server import ProxyServer
from firsttoken.cli.simulate import SimConfig, SimServer


@pytest.mark.parametrize("completion,reasoning,estimate,want", [
    (100, 40, None, 60),  # OpenAI/DeepSeek/Groq: reasoning inside the completion count
    (1, 290, None, 1),  # xAI: reasoning counted apart
    (50, None, None, 50),
    (50, 0, None, 50),
    (None, None, 12, 12),  # no usage: our count of the visible text
    (None, 30, None, None),
])
def test_visible_output_tokens(completion, reasoning, estimate, want):
    assert visible_output_tokens(completion, reasoning, estimate) == want


def test_tpot_of_a_reasoning_model_is_its_visible_pace(db_path):
    cfg = SimConfig(ttfb_ms=20, prefill_base_ms=10, prefill_ms_per_1k_tokens=0, tpot_ms=25, output_tokens=20,
                    reasoning_tokens=60)
    with SimServer(cfg) as sim, ProxyServer([sim.url], str(db_path), port=0) as p:
        t0 = time.monotonic()
        c = openai.OpenAI(base_url=p.url + "/v1", api_key="sk-test", max_retries=0)
        stream = c.chat.completions.create(model="sim-reasoner", stream=True, stream_options={"include_usage": True},
                                           messages=[{"role": "user", "content": "think first"}])
        for _ in stream:
            pass
        row = one_row(p, db_path)
    assert row["usage_reasoning_tokens"] == 60 and row["usage_completion_tokens"] == 80
    assert row["first_token_ms"] < row["ttft_ms"]  # reasoning streamed before the first visible token
    # 20 visible tokens paced 25 ms apart: TPOT ≈ 25 ms (it was ≈ 6 ms with reasoning counted in).
    # Between the first visible token and the end as the simulator really sent them (its send log),
    # give or take the proxy's own recorded delay: a busy machine's lateness moves the bounds with it.
    sent = sent_since(sim, t0)
    visible = token_writes(sent)
    due_end = max(due for due, _, _ in sent.writes if due is not None)  # the last token's deadline
    at_end, delay = sent.writes[-1][1], row["proxy_delay_ms"] or 0  # when the answer's end went out
    assert [due for due, _ in visible][1:3] == [pytest.approx(visible[0][0] + 0.025 * i, abs=1e-6) for i in (1, 2)]
    lo = ((due_end - visible[0][1]) * 1000 - delay - 5) / 19
    hi = ((at_end - visible[0][0]) * 1000 + delay + 5) / 19
    assert lo <= row["tpot_ms"] <= hi, (lo, row["tpot_ms"], hi)
