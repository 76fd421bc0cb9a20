"""The store: migrations own the schema, one writer thread, partial upserts, no lost rows."""

from __future__ import annotations

import os
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import dump_db, upsert_one_by_one

from firsttoken.addon.record import FIELDS, Record
from firsttoken.addon.store import stats_queries as sq
from firsttoken.addon.store.db import StoreError, connect_reader, open_db
from firsttoken.addon.store.migrations import MIGRATIONS
from firsttoken.addon.store.writer import Writer
from firsttoken.cli.proxy.server import ProxyServer, ProxyStartError

FT = str(Path(sys.executable).parent / "firsttoken")


def test_migrations_create_every_record_column_and_are_idempotent(tmp_path):
    db = open_db(tmp_path / "a.db")
    cols = set(db["requests"].columns_dict)
    assert set(FIELDS) <= cols
    applied = [r[0] for r in db.execute("SELECT name FROM _migrations ORDER BY name")]
    assert applied == sorted(fn.__name__ for fn in MIGRATIONS)
    db.conn.close()
    db2 = open_db(tmp_path / "a.db")  # reopening applies nothing twice
    assert db2.execute("SELECT count(*) FROM _migrations").fetchone()[0] == len(MIGRATIONS)
    assert db2.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_processes_opening_one_new_database_at_once_all_start(tmp_path):
    """Two proxies started on one new database at the same moment (`bench --workers`, two terminals): each takes
    the write lock before a migration and looks again, so none fails on "table requests already exists" (which
    it then reported as "not a SQLite database")."""
    import time

    code = ("import sys, time; from firsttoken.addon.store.db import open_db\n"
            "t = float(sys.argv[2])\n"
            "time.sleep(max(0.0, t - time.time()))\n"
            "open_db(sys.argv[1]).conn.close()")
    for round_ in range(6):
        path = tmp_path / f"race{round_}.db"
        at = str(time.time() + 1.0)  # every process imported, then all open at once
        procs = [subprocess.Popen([sys.executable, "-c", code, str(path), at], stderr=subprocess.PIPE, text=True)
                 for _ in range(3)]
        errors = [p.communicate(timeout=60)[1] for p in procs]
        assert [p.returncode for p in procs] == [0, 0, 0], errors
        conn = sqlite3.connect(path)
        try:
            assert conn.execute("SELECT count(*) FROM _migrations").fetchone()[0] == len(MIGRATIONS)
        finally:
            conn.close()


def test_writer_upserts_partial_rows_and_keeps_good_rows_of_a_bad_batch(tmp_path):
    path = tmp_path / "w.db"
    w = Writer(str(path))
    rec = Record(id="r1", started_at="2026-01-01T00:00:00+00:00")
    w.put({"id": "r1", "started_at": rec.started_at, "state": "in_flight", "phase": "prefill"})
    w.put({"id": "r1", "phase": "streaming"})
    w.put({"id": "bad", "no_such_column": 1})  # must not take the other rows down with it
    w.flush()
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT state, phase, started_at FROM requests WHERE id = 'r1'").fetchone() == (
        "in_flight", "streaming", rec.started_at)
    rec.state, rec.phase, rec.status = "done", "done", 200
    rec.findings = [{"code": "x.y", "severity": "warn", "message": "m", "hint": "h"}]
    w.put(rec.row())
    w.flush()
    w.close()
    assert conn.execute("SELECT state, phase, status FROM requests WHERE id = 'r1'").fetchone() == ("done", "done", 200)
    assert conn.execute("SELECT code, severity FROM findings WHERE request_id = 'r1'").fetchall() == [("x.y", "warn")]
    assert w.failed == 1 and "no_such_column" in (w.last_error or "")


def test_json_columns_read_back_as_what_was_put_whatever_the_values(tmp_path):
    # orjson writes list/dict columns; what it refuses (a lone surrogate, an integer beyond 64
    # bits) the standard library writes; no value loses its row
    import json as _json_mod
    from decimal import Decimal

    path = tmp_path / "j.db"
    w = Writer(str(path))
    cases = {
        "plain": {"a": [1, 2.5, None, True], "é": "ü 👋"},
        "huge": {"n": 2 ** 70},
        "odd": {"d": Decimal("1.5"), 3: "int key"},
        "surrogate": {"s": "x\udcff"},
    }
    for rid, facts in cases.items():
        w.put({"id": rid, "started_at": "2026-01-01T00:00:00+00:00", "state": "done", "key_facts": facts})
    w.flush()
    w.close()
    got = dict(sqlite3.connect(path).execute("SELECT id, key_facts FROM requests").fetchall())
    assert w.failed == 0 and set(got) == set(cases)
    assert _json_mod.loads(got["plain"]) == cases["plain"]
    assert _json_mod.loads(got["huge"]) == {"n": 2 ** 70}
    assert _json_mod.loads(got["odd"]) == {"d": "1.5", "3": "int key"}
    assert _json_mod.loads(got["surrogate"]) == {"s": "x\ufffd"}  # stored with U+FFFD, as a header byte is


def _schema(db) -> list[tuple]:
    return db.execute("SELECT type, name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' ORDER BY name").fetchall()


def test_bulk_load_ends_as_if_the_rows_were_written_one_by_one(tmp_path):
    """Into an empty database BulkLoad takes the indexes off and rebuilds them; into one that has
    rows it keeps them. Both end the same: schema, rows, and what `stats` makes of them."""
    from firsttoken.cli.bench.db import generate

    generate(tmp_path / "empty.db", 2000, seed=5)  # the fast path: indexes off, rebuilt
    kept = open_db(tmp_path / "kept.db")
    kept["requests"].insert({"id": "first", "started_at": "2026-01-01T00:00:00+00:00", "state": "done",
                             "model": "m-first", "ttft_ms": 10.0, "conn_reused": 1})
    kept.conn.commit()
    generate(tmp_path / "kept.db", 2000, seed=5)  # not empty: every index stays on
    kept = open_db(tmp_path / "kept.db")
    kept.execute("DELETE FROM requests WHERE id = 'first'")
    kept.conn.commit()
    bulk = open_db(tmp_path / "empty.db", write=False)
    assert _schema(bulk) == _schema(kept) and any(t == "index" for t, _, _ in _schema(bulk))
    stats = [sq.compute(db)["groups"] for db in (bulk, kept)]
    assert stats[0] == stats[1] and len(stats[0]) == 5
    assert bulk.execute("SELECT count(*) FROM findings").fetchone() == kept.execute("SELECT count(*) FROM findings").fetchone()


def test_a_batch_merged_per_request_leaves_what_row_by_row_upserts_leave(tmp_path):
    """The writer merges a batch's rows per request and writes equal column sets together: the
    requests and their findings must equal one upsert per row."""
    rows = []
    for i in range(30):
        rid = f"r{i:02d}"
        rows.append({"id": rid, "started_at": f"2026-01-01T00:00:{i:02d}+00:00", "state": "in_flight",
                     "phase": "connecting", "model": None, "api": "openai.chat"})
    for i in range(30):
        rid = f"r{i:02d}"
        rows.append({"id": rid, "model": "m-a" if i % 3 else "m-b", "request_bytes": 100 + i})
        rows.append({"id": rid, "phase": "prefill", "status": 200 if i % 5 else 429, "ttfb_ms": 10.0 + i})
        rows.append({"id": rid, "phase": "streaming"})
        if i % 4 == 0:  # findings written twice: the second list replaces the first
            rows.append({"id": rid, "findings": [{"code": "a.b", "severity": "warn"}]})
    for i in range(0, 30, 2):
        rec = Record(id=f"r{i:02d}", started_at=f"2026-01-01T00:00:{i:02d}+00:00", state="done", phase="done",
                     model="m-a", api="openai.chat", status=200, ttfb_ms=12.5, ttft_ms=40.0 + i,
                     findings=[{"code": "usage.missing", "severity": "info"}] if i % 3 else [])
        rows.append(rec.row())
    upsert_one_by_one(tmp_path / "one.db", rows)
    w = Writer(str(tmp_path / "batched.db"))
    for r in rows:
        w.put(r)
    w.flush()
    w.close()
    assert w.written and not w.failed
    batched = dump_db(tmp_path / "batched.db")
    assert batched == dump_db(tmp_path / "one.db")
    assert len(batched[0]) == 30 and batched[1]
    assert rows[0] == {"id": "r00", "started_at": "2026-01-01T00:00:00+00:00", "state": "in_flight",
                       "phase": "connecting", "model": None, "api": "openai.chat"}  # the caller's dicts untouched


# -- whose database: readers and writers ask one rule -------------------------------------------------

def _foreign(path) -> tuple[bytes, int]:
    """Someone else's SQLite file (a `users` table, rollback journal, 0644): its bytes and mode."""
    c = sqlite3.connect(path)
    c.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
    c.execute("INSERT INTO users (name) VALUES ('alice')")
    c.commit()
    c.close()
    os.chmod(path, 0o644)
    return path.read_bytes(), stat.S_IMODE(path.stat().st_mode)


def _untouched(path, before: tuple[bytes, int]) -> None:
    assert (path.read_bytes(), stat.S_IMODE(path.stat().st_mode)) == before
    assert sorted(f.name for f in path.parent.iterdir() if f.name.startswith(path.name)) == [path.name]
    c = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)
    assert c.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    assert [r[0] for r in c.execute("SELECT name FROM sqlite_master WHERE type = 'table'")] == ["users"]
    c.close()


def test_writers_refuse_a_sqlite_file_that_is_not_firsttokens_before_changing_it(sim, tmp_path):
    app = tmp_path / "app.db"
    before = _foreign(app)
    with pytest.raises(StoreError) as e:
        open_db(app)
    assert str(e.value) == (f"{app} is a SQLite database that is not firsttoken's (tables: users); firsttoken left "
                            "it untouched: pass another --db path (a new file is fine), or the file `firsttoken proxy` writes")
    _untouched(app, before)
    with pytest.raises(StoreError, match="not firsttoken's \\(tables: users\\); firsttoken left it untouched"):
        connect_reader(app)  # the readers' verdict is the same rule's
    with pytest.raises(ProxyStartError, match="not firsttoken's") as e:
        ProxyServer([sim.url], str(app), port=0).start()
    assert "cannot write" not in str(e.value)
    # `firsttoken proxy` as a user runs it: one plain sentence, no traceback, the file as it was
    r = subprocess.run([FT, "proxy", "--no-live", "--port", "0", "--upstream", sim.url, "--db", str(app)],
                       capture_output=True, text=True, timeout=60)
    err = " ".join(r.stderr.split())
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    assert "not firsttoken's (tables: users); firsttoken left it untouched: pass another --db path" in err, err
    r = subprocess.run([FT, "demo", "--db", str(app)], capture_output=True, text=True, timeout=120)
    assert r.returncode != 0 and "not firsttoken's" in r.stderr and "Traceback" not in r.stderr, r.stderr
    _untouched(app, before)
    # a file that is not SQLite at all is not even chmodded
    notes = tmp_path / "notes.db"
    notes.write_text("not a database\n" * 100)
    os.chmod(notes, 0o644)
    with pytest.raises(StoreError, match="not a SQLite database"):
        open_db(notes)
    assert stat.S_IMODE(notes.stat().st_mode) == 0o644 and notes.read_text().startswith("not a database")


def test_writers_take_a_new_path_an_empty_file_and_their_own_database(tmp_path):
    empty = tmp_path / "empty.db"
    empty.touch()
    blank = tmp_path / "blank.db"  # a SQLite file with no tables yet
    c = sqlite3.connect(blank)
    c.execute("PRAGMA user_version = 1")
    c.close()
    for p in (tmp_path / "new.db", empty, blank):
        open_db(p).conn.close()
        open_db(p).conn.close()  # and again: now it is firsttoken's
        connect_reader(p).close()
    # the first migration cut short (the list of migrations made, nothing in it): still firsttoken's to finish
    half = tmp_path / "half.db"
    c = sqlite3.connect(half)
    c.execute("CREATE TABLE _migrations (name TEXT PRIMARY KEY, applied_at TEXT)")
    c.close()
    db = open_db(half)
    assert db.execute("SELECT count(*) FROM _migrations").fetchone()[0] == len(MIGRATIONS)
    db.conn.close()
    # a reader has nothing to read in a database no writer has made yet, and says so
    nothing = tmp_path / "nothing.db"
    nothing.touch()
    with pytest.raises(StoreError, match="empty SQLite database"):
        connect_reader(nothing)
    assert nothing.read_bytes() == b""
