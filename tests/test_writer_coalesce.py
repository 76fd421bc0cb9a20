"""The writer keeps the partial rows of a request in flight in memory (merged) for up to
INFLIGHT_S, or until its final row: fewer upserts, the same database in the end."""

from __future__ import annotations

import random
import sqlite3
import time

import pytest
from conftest import dump_db, upsert_one_by_one

from firsttoken.addon.record import Record
from firsttoken.addon.store import writer as writer_mod
from firsttoken.addon.store.writer import Writer


class CountingConn:
    """Stands in for the writer's connection: counts the upserts into ``requests`` (one per
    row of an executemany) and the transactions."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self.upserts = 0
        self.transactions = 0

    def __getattr__(self, name):
        return getattr(self.conn, name)

    def __enter__(self):
        return self.conn.__enter__()

    def __exit__(self, *exc):
        self.transactions += 1
        return self.conn.__exit__(*exc)

    def execute(self, sql, params=()):
        self.upserts += sql.startswith("INSERT INTO requests")
        return self.conn.execute(sql, params)

    def executemany(self, sql, seq):
        seq = list(seq)
        if sql.startswith("INSERT INTO requests"):
            self.upserts += len(seq)
        return self.conn.executemany(sql, seq)


def counting(w: Writer) -> CountingConn:
    w.flush()  # the migrations' statements are done
    c = CountingConn(w.db.conn)
    w.db.conn = c
    return c


def request_rows(rid: str, i: int = 0) -> list[dict]:
    """What the proxy puts for one streamed request: start, peek, response headers, parse,
    phase, then the final row."""
    started = f"2026-01-01T00:00:{i % 60:02d}+00:00"
    rec = Record(id=rid, started_at=started, model="m-a", api="openai.chat", status=200, ttfb_ms=50.5,
                 ttft_ms=120.25, total_ms=900.0, state="done", phase="done", prompt_tokens_est=400,
                 tokenizer="cl100k_base", request_bytes=1800, stream=True,
                 event_offsets=[120.25, 135.5], findings=[{"code": "usage.missing", "severity": "info"}])
    return [
        {"id": rid, "started_at": started, "state": "in_flight", "phase": "connecting", "api": "openai.chat",
         "key_facts": [], "error": None},
        {"id": rid, "request_bytes": 1800, "model": "m-a", "stream": True},
        {"id": rid, "phase": "prefill", "status": 200, "content_type": "text/event-stream", "ttfb_ms": 50.5},
        {"id": rid, "model": "m-a", "prompt_tokens_est": 400, "tokenizer": "cl100k_base"},
        {"id": rid, "phase": "streaming"},
        rec.row(),
    ]


def test_a_request_whose_rows_span_many_gathers_costs_one_upsert(tmp_path, monkeypatch):
    """Rows 40 ms apart (two GATHER_S) used to cost one upsert each: now they wait for the final row."""
    monkeypatch.setattr(writer_mod, "INFLIGHT_S", 5.0, raising=False)  # every partial row waits for the final one
    w = Writer(str(tmp_path / "a.db"))
    c = counting(w)
    rows = request_rows("r1")
    for r in rows:
        w.put(r)
        time.sleep(2 * writer_mod.GATHER_S)
    w.flush()
    w.close()
    print(f"\n{len(rows)} rows over {len(rows) * 2 * writer_mod.GATHER_S:.2f} s: {c.upserts} upsert(s), "
          f"{c.transactions} transaction(s)")
    assert c.upserts == 1
    got = sqlite3.connect(tmp_path / "a.db").execute(
        "SELECT state, phase, status, ttfb_ms, tokenizer, request_bytes, model FROM requests").fetchall()
    assert got == [("done", "done", 200, 50.5, "cl100k_base", 1800, "m-a")]


def test_a_long_request_is_written_once_per_inflight_s_then_once_when_done(tmp_path, monkeypatch):
    monkeypatch.setattr(writer_mod, "INFLIGHT_S", 0.4, raising=False)
    w = Writer(str(tmp_path / "b.db"))
    c = counting(w)
    start, peek, heads, parse, phase, final = request_rows("r1")
    t0 = time.monotonic()
    for r in (start, peek, heads):  # 0..0.1 s: one upsert at ~0.4 s
        w.put(r)
        time.sleep(0.05)
    time.sleep(max(0.0, t0 + 0.8 - time.monotonic()))
    w.put(parse)  # 0.8 s: waits until 1.2 s ...
    w.put(phase)
    time.sleep(0.1)
    w.put(final)  # ... but the final row comes first and takes it along
    w.flush()
    w.close()
    assert c.upserts == 2, c.upserts


def test_a_partial_row_reaches_the_database_within_inflight_s_without_more_rows(tmp_path):
    """A long request's in-flight row must be visible to another process (`live --db`, the
    next proxy's crash recovery) soon, even when nothing else is put: the writer wakes for it."""
    w = Writer(str(tmp_path / "c.db"))
    try:
        w.flush()
        reader = sqlite3.connect(tmp_path / "c.db")
        t0 = time.monotonic()
        w.put(request_rows("long")[0])
        time.sleep(writer_mod.GATHER_S * 4)
        early = reader.execute("SELECT count(*) FROM requests").fetchone()[0]
        if time.monotonic() - t0 < writer_mod.INFLIGHT_S - writer_mod.GATHER_S * 2:
            assert early == 0, "the partial row was written at once, not merged with the request's next rows"
        # "never" (the regression: written only with the request's next rows, or at close) is told
        # apart from "a busy machine woke the writer late" by seconds, not by half a second
        while not reader.execute("SELECT count(*) FROM requests").fetchone()[0]:
            assert time.monotonic() - t0 < writer_mod.INFLIGHT_S + 3.0, "the in-flight row never reached the database"
            time.sleep(0.01)
        seen = time.monotonic() - t0
        print(f"\nin-flight row visible to another connection after {seen * 1000:.0f} ms (INFLIGHT_S "
              f"{writer_mod.INFLIGHT_S * 1000:.0f} ms)")
        assert seen >= writer_mod.INFLIGHT_S - writer_mod.GATHER_S * 2
        assert reader.execute("SELECT state, phase FROM requests").fetchall() == [("in_flight", "connecting")]
    finally:
        w.close()


def test_flush_read_and_close_write_the_waiting_partial_rows(tmp_path, monkeypatch):
    monkeypatch.setattr(writer_mod, "INFLIGHT_S", 60.0, raising=False)
    path = tmp_path / "d.db"
    w = Writer(str(path))
    reader = sqlite3.connect(path)
    w.put({"id": "a", "started_at": "2026-01-01T00:00:00+00:00", "state": "in_flight", "phase": "connecting"})
    w.flush()
    assert reader.execute("SELECT id, phase FROM requests").fetchall() == [("a", "connecting")]
    w.put({"id": "a", "phase": "streaming"})
    assert w.read(lambda db: db.execute("SELECT phase FROM requests").fetchall()) == [("streaming",)]
    w.put({"id": "b", "started_at": "2026-01-01T00:00:01+00:00", "state": "in_flight", "phase": "prefill"})
    w.close()
    assert reader.execute("SELECT id, phase FROM requests ORDER BY id").fetchall() == [("a", "streaming"), ("b", "prefill")]


def _random_rows(rng: random.Random, n_ids: int) -> list[dict]:
    """Rows of ``n_ids`` requests, interleaved at random (each request's own rows in order):
    partial rows of random columns, a final row, sometimes partial rows after it, sometimes a
    second final row (as crash recovery writes). Numbers are binary fractions, so the running
    statistics come out exactly equal however many times they were added and taken away."""
    models = ["m-a", "m-b", None]
    per_id = []
    for i in range(n_ids):
        rid = f"r{i:03d}"
        seq = [{"id": rid, "started_at": f"2026-01-01T00:{i // 60:02d}:{i % 60:02d}+00:00", "state": "in_flight",
                "phase": "connecting", "api": "openai.chat", "model": rng.choice(models)}]
        for _ in range(rng.randrange(0, 6)):
            kind = rng.randrange(5)
            if kind == 0:
                seq.append({"id": rid, "phase": rng.choice(["prefill", "streaming", "waiting_body"])})
            elif kind == 1:
                seq.append({"id": rid, "model": rng.choice(models), "request_bytes": rng.randrange(100, 5000)})
            elif kind == 2:
                seq.append({"id": rid, "phase": "prefill", "status": rng.choice([200, 429, 500]),
                            "ttfb_ms": rng.randrange(1, 400) / 4})
            elif kind == 3:
                seq.append({"id": rid, "prompt_tokens_est": rng.randrange(10, 900), "conn_reused": rng.random() < 0.5,
                            "connect_ms": rng.choice([None, 12.5])})
            else:
                seq.append({"id": rid, "findings": [{"code": rng.choice(["a.b", "c.d"]), "severity": "warn"}]})
        if rng.random() < 0.85:
            rec = Record(id=rid, started_at=seq[0]["started_at"], state="done", phase="done", model=rng.choice(models),
                         api="openai.chat", status=rng.choice([200, 200, 429]), ttft_ms=rng.randrange(10, 2000) / 8,
                         usage_prompt_tokens=rng.choice([None, rng.randrange(10, 900)]), error=rng.choice([None, "boom"]),
                         event_offsets=[rng.randrange(0, 800) / 2 for _ in range(rng.randrange(0, 4))],
                         findings=[{"code": "usage.missing", "severity": "info"}] if rng.random() < 0.5 else [])
            seq.append(rec.row())
            for _ in range(rng.randrange(0, 3)):  # late partial rows: applied after the final one
                seq.append({"id": rid, "phase": rng.choice(["streaming", "done"]), "request_bytes": rng.randrange(1, 99)})
            if rng.random() < 0.1:
                seq.append({"id": rid, "state": "done", "phase": "done", "error": "interrupted",
                            "findings": [{"code": "proxy.interrupted", "severity": "warn"}], "top_code": "proxy.interrupted"})
        per_id.append(seq)
    out = []
    while per_id:
        k = rng.randrange(len(per_id))
        out.append(per_id[k].pop(0))
        if not per_id[k]:
            per_id.pop(k)
    return out


@pytest.mark.parametrize("seed", range(6))
def test_random_interleavings_end_as_one_upsert_per_row_in_put_order(tmp_path, monkeypatch, seed):
    """Requests interleaved at random, put with random pauses (so rows wait, fall due, meet
    their final row in the same batch or a later one), with flushes and reads between: the
    requests and their findings equal one upsert per row."""
    rng = random.Random(seed)
    monkeypatch.setattr(writer_mod, "INFLIGHT_S", rng.choice([0.005, 0.03, 0.08]), raising=False)
    rows = _random_rows(rng, 40)
    upsert_one_by_one(tmp_path / "one.db", rows)
    w = Writer(str(tmp_path / "deferred.db"))
    c = counting(w)
    for r in rows:
        w.put(r)
        x = rng.random()
        if x < 0.15:
            time.sleep(rng.choice([0.002, 0.01, 0.04]))
        elif x < 0.17:
            w.flush()
        elif x < 0.19:
            w.read(lambda db: db.execute("SELECT count(*) FROM requests").fetchone())
    w.close()
    assert not w.failed and not w.pending
    deferred = dump_db(tmp_path / "deferred.db")
    assert deferred == dump_db(tmp_path / "one.db")
    assert len(deferred[0]) == 40 and deferred[1]
    print(f"\nseed {seed}: {len(rows)} rows, {c.upserts} upserts in {c.transactions} transactions")
    assert c.upserts < len(rows)


def test_rows_waiting_while_the_disk_is_full_are_kept_and_written_in_order(tmp_path, monkeypatch):
    """Deferred partial rows that fall due while writes fail join the rows kept in memory;
    once the database can be written, it ends as if every row had been upserted in order."""
    monkeypatch.setattr(writer_mod, "INFLIGHT_S", 0.02, raising=False)
    monkeypatch.setattr(writer_mod, "RETRY_S", 0.05)
    rng = random.Random(7)
    rows = _random_rows(rng, 30)
    for r in rows:  # bodies large enough that the rows need new pages
        if r.get("state") == "done":
            r["request_body"] = "x" * 6000
    upsert_one_by_one(tmp_path / "one.db", rows)
    path = tmp_path / "full.db"
    w = Writer(str(path))
    try:
        w.read(lambda db: db.execute("PRAGMA max_page_count = 1"))  # every page is used: SQLITE_FULL
        for i, r in enumerate(rows):
            w.put(r)
            if i % 10 == 0:
                time.sleep(0.03)  # some partial rows fall due meanwhile
        deadline = time.monotonic() + 5
        while w.health()["ok"] and time.monotonic() < deadline:
            time.sleep(0.01)
        w.flush()
        h = w.health()
        assert not h["ok"] and h["pending"] >= 1 and not w.dropped
        w.read(lambda db: db.execute("PRAGMA max_page_count = 1073741823"))
        deadline = time.monotonic() + 5
        while not w.health()["ok"] and time.monotonic() < deadline:
            time.sleep(0.01)
        w.flush()
        assert w.health()["ok"] and not w.pending
    finally:
        w.close()
    assert dump_db(path) == dump_db(tmp_path / "one.db")
