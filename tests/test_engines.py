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


# ------------------------------------------------------------------ the split in SQL, per group (stats)

LESS = "inferred: time to the first token less the engine's load and prefill"
SPLIT_ROWS = [  # every kind of row ttft_terms tells apart
    dict(first_token_ms=900.0, ttft_ms=950.0, engine_prefill_ms=700.0, engine_decode_ms=50.0, engine_decode_tokens=10,
         engine_queue_ms=120.0, engine_sources={"queue_ms": LESS, "prefill_ms": "llama.cpp timings.prompt_ms"}),
    dict(ttft_ms=500.0, engine_prefill_ms=300.0, engine_load_ms=100.0, engine_decode_ms=40.0, engine_decode_tokens=4,
         engine_sources={"prefill_ms": "ollama prompt_eval_duration", "load_ms": "ollama load_duration"}),
    dict(total_ms=2000.0, engine_prefill_ms=400.0, engine_decode_ms=1200.0, engine_decode_tokens=30, stream=0,
         engine_sources={"prefill_ms": "ollama prompt_eval_duration"}),
    dict(ttft_ms=1800.0, engine_queue_ms=1100.0, engine_prefill_ms=600.0,
         engine_sources={"queue_ms": "inferred: time to the first token less the route's fit",
                         "prefill_ms": "inferred: the route's fit for this prompt's prefill"}),
    dict(ttft_ms=100.0, engine_prefill_ms=300.0, engine_sources={}),  # terms longer than TTFT: the rest is 0
    dict(ttft_ms=80.0, engine_decode_ms=40.0, engine_decode_tokens=4),  # a decode alone: nothing to split
    dict(ttft_ms=80.0),  # no report at all
]


def _store_rows(db, rows):
    import json

    from conftest import add_request

    return [add_request(db, **{**r, "engine_sources": json.dumps(r.get("engine_sources") or {})}) for r in rows]


def test_the_sql_split_is_ttft_terms_on_every_kind_of_row(db):
    ids = _store_rows(db, SPLIT_ROWS)
    cols = ", ".join(f"{sql} AS {key}" for key, sql in engines.TERMS_SQL.items())
    flags = ", ".join(f"{sql} AS inferred_{key}" for key, sql in engines.INFERRED_SQL.items())
    for rid, kw in zip(ids, SPLIT_ROWS):
        got = dict(zip([*engines.TERMS_SQL, *(f"inferred_{k}" for k in engines.INFERRED_SQL)],
                       db.execute(f"SELECT {cols}, {flags} FROM requests WHERE id = ?", [rid]).fetchone()))
        want = {t.key: t for t in ttft_terms({**rec().__dict__, **kw})}
        for key in engines.TERMS_SQL:
            if key in want:
                assert got[key] is not None and abs(got[key] - want[key].ms) < 0.01, (kw, key, got, want)
            else:
                assert got[key] is None, (kw, key, got)
        for key in engines.INFERRED_SQL:
            if key in want:
                assert bool(got[f"inferred_{key}"]) == (want[key].how == "inferred"), (kw, key, got)


def test_stats_split_per_group_with_the_engines_own_prefill_line(db):
    from conftest import add_request

    from firsttoken.addon.store import stats_queries as sq
    from firsttoken.addon.store.queries import Filters

    assert sq.engine_split(db) == {}  # a store no engine reported on
    tokens = [400, 900, 1500, 2200, 3000, 3900]
    for i, n in enumerate(tokens):  # prefill ms = 30 + 0.8 per token, TTFT 50 ms more; every other one half cached
        cached = n // 2 if i % 2 else 0
        prefill = 30 + 0.8 * (n - cached)
        add_request(db, model="tiny", route="local", engine="llama.cpp", ttft_ms=prefill + 50, first_token_ms=prefill + 50,
                    usage_prompt_tokens=n, prompt_tokens_est=n, engine_prompt_tokens=n, engine_cached_tokens=cached,
                    engine_prefill_ms=prefill, engine_queue_ms=50.0,
                    engine_sources=f'{{"queue_ms": "{LESS}", "prefill_ms": "llama.cpp timings.prompt_ms"}}')
    # an inferred prefill is the route's fit again: not in the engine's own line; a 500 is not split
    add_request(db, model="tiny", route="local", ttft_ms=9000.0, usage_prompt_tokens=100, engine_queue_ms=8000.0,
                engine_prefill_ms=5000.0, engine_prompt_tokens=100,
                engine_sources='{"queue_ms": "inferred: fit", "prefill_ms": "inferred: fit"}')
    add_request(db, model="tiny", route="local", engine="llama.cpp", status=500, ttft_ms=1.0, engine_prefill_ms=1.0)
    add_request(db, model="gpt-4o-mini", ttft_ms=300.0)
    split = sq.engine_split(db)
    assert set(split) == {"tiny"}
    e = split["tiny"]
    assert e["n"] == 7 and e["engines"] == ["llama.cpp"]
    assert e["prefill_fit"]["n"] == 6 and abs(e["prefill_fit"]["slope_ms_per_1k"] - 800) < 0.01
    assert abs(e["prefill_fit"]["intercept_ms"] - 30) < 0.01
    assert e["cache"] == {"requests": 7, "hits": 3, "cached_tokens": sum(n // 2 for n in tokens[1::2]),
                          "prompt_tokens": sum(tokens) + 100}
    assert e["terms"]["wait"]["n"] == 7 and e["terms"]["wait"]["inferred"] == 7
    assert e["terms"]["prefill"]["inferred"] == 1 and e["terms"]["rest"]["p50"] == 0.0
    # the same per route, and narrowed by the filters as every figure of stats is
    assert set(sq.engine_split(db, group="route")) == {"local"}
    assert sq.engine_split(db, Filters(model="gpt-4o-mini")) == {}
    res = sq.compute(db, by="model", engine=True)
    assert [g.get("engine") is not None for g in res["groups"]] == [True, False]
    # a store without engine rows answers from the partial index, not by reading every row
    plan = db.execute(f"EXPLAIN QUERY PLAN SELECT 1 FROM requests WHERE {engines.ENGINE_ROWS_SQL} LIMIT 1").fetchall()
    assert "idx_requests_engine" in str(plan), plan


def test_stats_reads_the_two_slopes_together(db):
    from firsttoken.addon.store import stats_queries as sq
    from firsttoken.cli.stats import SLOPE_AGREES, engine_reading, render

    for factor, said in ((1.0, "as the engine's prefill does"), (2.0, "2.0x as fast"), (0.5, "only 0.5x as fast")):
        db.execute("DELETE FROM requests")
        for n in (500, 1000, 2000, 3000, 4000, 5000):
            add = 0.9 * n  # the engine's own prefill per token; TTFT grows `factor` times as fast
            from conftest import add_request
            add_request(db, model="m", engine="ollama", ttft_ms=20 + factor * add, usage_prompt_tokens=n,
                        engine_prompt_tokens=n, engine_prefill_ms=add, engine_sources="{}")
        g = sq.compute(db, engine=True)["groups"][0]
        ratio = g["ttft_slope_ms_per_1k"] / g["engine"]["prefill_fit"]["slope_ms_per_1k"]
        assert abs(ratio - factor) < 0.01 and (SLOPE_AGREES[0] <= ratio <= SLOPE_AGREES[1]) == (factor == 1.0)
        reading = engine_reading(g)
        assert "its own prefill: 900 ms per 1k tokens it prefilled" in reading and said in reading, reading
        from rich.console import Console

        con = Console(width=80, record=True, file=open("/dev/null", "w"))
        con.print(render(sq.compute(db, engine=True), width=80))
        flat = " ".join(con.export_text().split())
        assert "The engine's own clock" in flat and "m on Ollama:" in flat and said in flat, flat
