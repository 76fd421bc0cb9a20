"""The wait before the engine began, where it did not report one: TTFT less what the engine says it
spent (its load and prefill), or, for an engine that reports no times (vLLM), less the prefill the
route's fit predicts while others were in flight. Both labelled inferred. docs/record.md ("Engine")."""

from __future__ import annotations

from typing import Any

from firsttoken.addon.engines.report import infer


def _before_first_token(rec: Any) -> float | None:
    """When the engine's first token of any kind reached the proxy (a whole answer: its end)."""
    if rec.first_token_ms is not None:
        return rec.first_token_ms
    if rec.ttft_ms is not None:
        return rec.ttft_ms
    return None


def _connect(rec: Any) -> float:
    return (rec.connect_ms or 0.0) if rec.conn_reused is False else 0.0


def infer_wait(rec: Any) -> None:
    """``engine_queue_ms`` from the engine's own prefill (llama.cpp, Ollama): what came before it."""
    if rec.engine_queue_ms is not None or rec.engine_prefill_ms is None or rec.status != 200:
        return
    load = rec.engine_load_ms or 0.0
    first = _before_first_token(rec)
    if first is not None:
        spent, how = load + rec.engine_prefill_ms, "time to the first token less the engine's load and prefill"
    elif rec.total_ms is not None and rec.engine_decode_ms is not None:
        first = rec.total_ms
        spent = load + rec.engine_prefill_ms + rec.engine_decode_ms
        how = "the whole answer less the engine's load, prefill and decode"
    else:
        return
    infer(rec, "queue_ms", max(0.0, first - spent - _connect(rec)), how)


def infer_wait_from_fit(rec: Any, fit: Any, others: int) -> None:
    """``engine_queue_ms`` for an engine that reports no times, while ``others`` requests were in flight to
    it: TTFT less the route's fit for this prompt (its intercept is the network and the engine's fixed cost)."""
    if rec.engine_queue_ms is not None or rec.engine_prefill_ms is not None or fit is None or others < 1:
        return
    first = _before_first_token(rec)
    # the fit is over firsttoken's own estimates (hops.fit_of_route): apply it to the same count, never to the
    # server's (a tokenizer that counts 0.75 as many would make the predicted prefill a third too long)
    tokens = rec.prompt_tokens_est
    if first is None or not tokens or rec.status != 200:
        return
    expected = max(0.0, fit.intercept_ms) + fit.prefill_ms(tokens)
    infer(rec, "queue_ms", max(0.0, first - expected - _connect(rec)),
          f"time to the first token less the route's fit for {tokens:,} prompt tokens ({fit.n} requests), "
          f"with {others} other request(s) in flight to the engine")
    infer(rec, "prefill_ms", min(first, fit.prefill_ms(tokens)), "the route's fit for this prompt's prefill")
