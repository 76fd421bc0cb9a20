"""addon/engines' pure parts: the engines' reports read into one meaning, inferred values labelled, and the
TTFT split into the engine's terms (the real engines drive them end to end: test_llama_server, test_ollama)."""

from __future__ import annotations

from types import SimpleNamespace

from firsttoken.addon import engines
from firsttoken.addon.engines import EngineReport, infer, infer_wait, is_inferred, read_headers, ttft_terms


def test_tgi_headers_give_the_queue_and_counts_but_no_split():
    # a real TGI 1.4.3 whole answer's headers (huggingface_hub's cassette): its time per token is the inference
    # time over the tokens, prefill included, so it splits nothing
    report = EngineReport()
    read_headers({"x-queue-time": "3", "x-inference-time": "707", "x-time-per-token": "35", "x-prompt-tokens": "47",
                  "x-generated-tokens": "20", "x-compute-time": "0.71081148"}, report)
    cols = report.columns()
    assert cols["engine"] == "tgi"
    assert (cols["engine_queue_ms"], cols["engine_prompt_tokens"], cols["engine_decode_tokens"]) == (3.0, 47, 20)
    assert cols["engine_prefill_ms"] is None and cols["engine_decode_ms"] is None


def test_a_report_keeps_only_sane_numbers():
    r = EngineReport()
    for bad in (float("nan"), -1.0, 1e13, "12", True):
        r.set("prefill_ms", bad, "x")
    assert not r
    r.set("prefill_ms", 1_500_000_000, "ollama prompt_eval_duration", scale=1e-6)
    assert r.columns()["engine_prefill_ms"] == 1500.0 and r.sources["prefill_ms"] == "ollama prompt_eval_duration"


def rec(**kw):
    base = dict(engine_queue_ms=None, engine_load_ms=None, engine_prefill_ms=None, engine_decode_ms=None,
                engine_decode_tokens=None, engine_sources={}, first_token_ms=None, ttft_ms=None, total_ms=None,
                status=200, connect_ms=None, conn_reused=True)
    return SimpleNamespace(**{**base, **kw})


def test_the_wait_is_ttft_less_the_engines_terms_and_a_new_connections_connect():
    r = rec(engine_prefill_ms=1200.0, engine_load_ms=300.0, first_token_ms=4000.0, connect_ms=20.0, conn_reused=False)
    infer_wait(r)
    assert r.engine_queue_ms == 2480.0 and is_inferred(r, "queue_ms") and not is_inferred(r, "prefill_ms")
    infer(r, "queue_ms", 1.0, "again")  # a value already there is kept
    assert r.engine_queue_ms == 2480.0


def test_ttft_terms_in_order_rest_first_inferred_labelled():
    r = rec(engine_prefill_ms=1200.0, engine_queue_ms=2000.0, first_token_ms=3500.0, engine_decode_ms=500.0,
            engine_decode_tokens=25, engine_sources={"queue_ms": engines.INFERRED + "the route's fit",
                                                     "prefill_ms": "llama.cpp timings.prompt_ms"})
    terms = ttft_terms(r)
    assert [t.key for t in terms] == ["rest", "wait", "prefill", "first_decode"]
    rest, wait, prefill, first = terms
    assert rest.ms == 3500.0 - 2000.0 - 1200.0 - 20.0 and rest.how == "measured" and rest.start_ms == 0
    assert wait.how == "inferred" and prefill.how == "reported" and first.ms == 20.0
    assert prefill.start_ms == rest.ms + wait.ms and first.start_ms == prefill.start_ms + prefill.ms
    # a whole answer: its decode, up to its end; nothing reported: no terms
    whole = ttft_terms(rec(engine_prefill_ms=100.0, engine_decode_ms=400.0, total_ms=600.0))
    assert [(t.key, t.ms) for t in whole] == [("rest", 100.0), ("prefill", 100.0), ("decode", 400.0)]
    assert ttft_terms(rec(ttft_ms=100.0)) == []


def test_a_loopback_gateway_is_not_an_engine():
    local = "http://127.0.0.1:4000"
    assert engines.is_engine_side(SimpleNamespace(engine=None, upstream=local, hop=None))
    # a LiteLLM proxy on loopback in front of a cloud: its queue and its cache are not an engine's
    assert not engines.is_engine_side(SimpleNamespace(engine=None, upstream=local, hop="litellm"))
    assert engines.is_engine_side(SimpleNamespace(engine="vllm", upstream="https://gpu.example.com", hop=None))
    assert not engines.is_engine_side(SimpleNamespace(engine=None, upstream="https://api.openai.com", hop=None))
