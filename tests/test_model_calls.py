"""Traffic that is no model call (a readiness probe, a model list, a HEAD) is recorded for what it is and left out
of model statistics and error rates, while a client's real wrong path (a POST without /v1) is still an error; the
time to the whole answer counts answered requests only (issue 36: `stats`, `run`'s summary, the report)."""

from __future__ import annotations

import httpx
import openai
from conftest import rows

from firsttoken.addon.store import queries
from firsttoken.addon.store import stats_queries as sq
from firsttoken.addon.store.db import open_db


def test_probes_are_recorded_but_not_model_calls(proxy, db_path):
    with httpx.Client(base_url=proxy.url, timeout=10) as h:
        h.get("/")
        h.get("/v1/models")
        h.head("/")
        h.post("/chat/completions", json={"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]})
    c = openai.OpenAI(base_url=proxy.url + "/v1", api_key="sk-test-0000000000000000", max_retries=0)
    assert c.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}]).choices
    proxy.flush()
    rs = rows(db_path)
    assert len(rs) == 5  # every request is recorded
    calls = [r for r in rs if queries.is_model_call(r)]
    assert sorted(r["path"] for r in calls) == ["/chat/completions", "/v1/chat/completions"]
    db = open_db(str(db_path), write=False)
    o = sq.overall(db)
    assert o["count"] == 2 and o["not_model_calls"] == 3
    # the wrong path is an error; the probes are not, whatever they were answered
    assert o["errors"] == sum(1 for r in calls if queries.is_error(r)) == 1
    assert not any(queries.is_error(r) for r in rs if not queries.is_model_call(r))
    # the whole-answer figure is over the one answered non-streamed call, not the 404
    assert o["whole_ms"]["n"] == 1
