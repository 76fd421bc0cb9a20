"""Real servers on loopback: the simulated upstream and the proxy, both on port 0."""

from __future__ import annotations

import itertools
import json
import os
import pathlib
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from firsttoken.addon.diagnose import CATALOG
from firsttoken.cli.loopback import NotListening, free_port, wait_port
from firsttoken.cli.proxy.server import ProxyServer
from firsttoken.cli.simulate import SimConfig, SimServer

# Tests must never reach a user's real database or the network.
os.environ.pop("FIRSTTOKEN_DB", None)
for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
    os.environ.pop(var, None)
os.environ["NO_PROXY"] = "127.0.0.1,localhost"

FAST = dict(ttfb_ms=30, prefill_base_ms=20, prefill_ms_per_1k_tokens=10, tpot_ms=5, output_tokens=12, reasoning_tokens=4)


@pytest.fixture(autouse=True)
def proxy_registry(tmp_path_factory, monkeypatch):
    """Each test gets its own registry of running proxies (never the user's, never another test's)."""
    d = tmp_path_factory.mktemp("state")
    monkeypatch.setenv("FIRSTTOKEN_STATE_DIR", str(d))
    return d / "proxies"


@pytest.fixture(scope="session")
def sim():
    with SimServer(SimConfig(**FAST)) as s:
        yield s


@pytest.fixture
def db_path(tmp_path) -> pathlib.Path:
    return tmp_path / "ft.db"


_ADDED = itertools.count(1)


def add_request(db, **kw) -> str:
    """Insert one finished row (a streamed 200 from gpt-4o-mini on the default route unless ``kw`` says
    otherwise, each a second after the one before) into an open store and commit; its id."""
    n = next(_ADDED)
    row = {"id": f"t{n:07d}-0000-0000-0000-000000000000",
           "started_at": f"2026-12-03T{10 + n // 3600 % 10:02d}:{n // 60 % 60:02d}:{n % 60:02d}.000+00:00",
           "state": "done", "model": "gpt-4o-mini", "route": "default", "api": "openai.chat",
           "status": 200, "conn_reused": 1, "stream": 1, **kw}
    db["requests"].insert(row, alter=False)
    db.conn.commit()
    return row["id"]


@pytest.fixture
def db(tmp_path):
    """An empty store of the current schema, open."""
    from firsttoken.addon.store.db import open_db
    return open_db(tmp_path / "t.db")


def db_file(db) -> str:
    """The file an open store lives in (for a command's --db)."""
    return db.execute("PRAGMA database_list").fetchone()[2]


@pytest.fixture
def proxy(sim, db_path):
    """A proxy in front of the session's simulator, one fresh DB per test."""
    p = ProxyServer([sim.url], str(db_path), port=0)
    p.start()
    yield p
    p.stop()


def rows(db_path, where: str = "", params=()) -> list[dict]:
    conn = sqlite3.connect(str(db_path))
    conn.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in conn.execute(f"SELECT * FROM requests {where} ORDER BY started_at", params)]
    finally:
        conn.close()


def one_row(proxy: ProxyServer, db_path) -> dict:
    proxy.flush()
    rs = rows(db_path)
    assert len(rs) == 1, f"expected one row, got {len(rs)}"
    return rs[0]


#: two simulated upstreams behind one proxy: the same prefill, the gateway adds 100 ms of TTFB
ROUTE_SIMS = {"direct": dict(ttfb_ms=30, prefill_base_ms=10, prefill_ms_per_1k_tokens=250, tpot_ms=2, output_tokens=4),
              "gateway": dict(ttfb_ms=130, prefill_base_ms=10, prefill_ms_per_1k_tokens=250, tpot_ms=2, output_tokens=4)}
ROUTE_SIZES = (50, 200, 350, 500)  # repetitions of a 6-token phrase in the system prompt


@pytest.fixture(scope="session")
def two_route_db(tmp_path_factory):
    """A database of requests through two named routes of one proxy, tagged experiment ``ab``:
    per route and size, a first request (cache miss) and its repeat with a new question as long as
    the system prompt (the simulator's prompt cache reports the repeated system prompt as cached:
    about half the prompt), streamed with the openai SDK. Both fits stand well clear of "no fit"
    (R² 0.7 over all tokens, ~1 over uncached ones, where a repeat of the whole prompt gave 0.21
    over all tokens: a busy machine's delays pushed that under the 0.1 a fit line needs)."""
    import openai

    path = tmp_path_factory.mktemp("routes") / "routes.db"
    with SimServer(SimConfig(**ROUTE_SIMS["direct"], prompt_cache=True)) as direct, \
            SimServer(SimConfig(**ROUTE_SIMS["gateway"], prompt_cache=True)) as gateway, \
            ProxyServer([f"direct={direct.url}", f"gateway={gateway.url}"], str(path), port=0) as proxy:
        clients = {name: openai.OpenAI(base_url=f"{proxy.url}/{name}/v1", api_key="sk-test-00000000000000000000000",
                                       max_retries=0) for name in ROUTE_SIMS}
        for size in ROUTE_SIZES:
            system = f"size {size}. " + "Rules of the house apply. " * size
            for question in ("hi", f"again {size}: " + "Tell me more about those rules. " * size):
                # the first misses the cache, the repeat hits it for its system prompt
                for client in clients.values():  # interleaved, so drift hits both routes alike
                    for _ in client.chat.completions.create(
                            model="sim-1", stream=True, stream_options={"include_usage": True},
                            messages=[{"role": "system", "content": system}, {"role": "user", "content": question}],
                            extra_headers={"x-firsttoken-experiment": "ab"}):
                        pass
        proxy.flush()
    return path


def start_proxy_process(args: list[str], **popen) -> tuple[subprocess.Popen, int]:
    """`firsttoken proxy --no-live` as a user runs it (its own process, a free port), once it listens."""
    port = free_port()
    p = subprocess.Popen([str(Path(sys.executable).parent / "firsttoken"), "proxy", "--no-live", "--port", str(port),
                          *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen)
    try:
        wait_port(port, p, timeout=30)
    except NotListening:
        if p.poll() is not None:
            raise AssertionError(p.communicate()[1]) from None
        p.kill()
        raise AssertionError("proxy did not listen") from None
    wait_registered(port, p, (popen.get("env") or os.environ).get("FIRSTTOKEN_STATE_DIR"))
    return p, port


def r2_floor(points: list[tuple[float, float]], slope_per_1k: float) -> float:
    """The least R² a least-squares line through ``points`` (tokens, ms) can have, given that the
    upstream's plan is ``slope_per_1k`` ms per 1k tokens: least squares minimises the residuals
    over every line, so they are at most those of the planned line moved by the points' mean
    excess over it. Whatever delays a busy machine added show in that excess (and lower the
    floor); an idle machine's points sit on the line (a floor near 1). A fit that took the wrong
    tokens, or the wrong requests, falls below it."""
    ys = [y for _, y in points]
    ex = [y - slope_per_1k * x / 1000 for x, y in points]
    my, me = sum(ys) / len(ys), sum(ex) / len(ex)
    ss_tot = sum((y - my) ** 2 for y in ys)
    return 1 - sum((e - me) ** 2 for e in ex) / ss_tot


def sent_since(sim: SimServer, t0: float):
    """The simulator's send log of the one streamed answer it began after ``t0`` (time.monotonic)."""
    [sent] = [s for s in list(sim.sent) if s.arrival >= t0]
    return sent


def token_writes(sent) -> list[tuple[float, float]]:
    """(deadline, written) of each visible chat token in a send log entry (``SimServer.sent``): what
    the upstream planned and did, to bound a timing measured on a machine too busy to keep time."""
    return [(due, at) for due, at, data in sent.writes if b'"content":"' in data and b'"content":""' not in data]


def wait_registered(port: int, p: subprocess.Popen, state_dir: str | None, timeout: float = 30) -> None:
    """Until the proxy's registry entry is written: it registers just after its port opens (a
    busy machine can run a command such as `firsttoken env` in between, which would not find it)."""
    if not state_dir:
        return
    import time

    deadline = time.monotonic() + timeout
    while not list((Path(state_dir) / "proxies").glob(f"*-{port}.json")):
        if p.poll() is not None:
            raise AssertionError(p.communicate()[1])
        if time.monotonic() > deadline:
            p.kill()
            raise AssertionError(f"the proxy on port {port} never registered in {state_dir}")
        time.sleep(0.01)


def dump_db(path) -> tuple[list, list]:
    """Every request and finding of a database: for comparing two."""
    conn = sqlite3.connect(path)
    try:
        return (conn.execute("SELECT * FROM requests ORDER BY id").fetchall(),
                conn.execute("SELECT * FROM findings ORDER BY request_id, code").fetchall())
    finally:
        conn.close()


def percentile_of(values: list[float], q: float) -> float:
    """The percentile definition on a plain list (``record.percentile``), for checking what the
    SQL walks of ``stats_queries`` return."""
    from firsttoken.addon.record import percentile

    return percentile(sorted(values), q)


def upsert_one_by_one(path, rows) -> None:
    """The writer's reference: one upsert per row, in put order, each its own transaction."""
    from firsttoken.addon.store.db import open_db
    from firsttoken.addon.store.writer import Writer

    db = open_db(path)
    w = Writer.__new__(Writer)  # its SQL only: no thread
    w._cols, w._checked = None, set()
    for r in rows:
        with db.conn:
            w._apply(db, [r])  # a batch of one row: nothing to merge
    db.conn.close()


def findings(row: dict) -> list[dict]:
    fs = json.loads(row["findings"] or "[]")
    unknown = [f["code"] for f in fs if f["code"] not in CATALOG]
    assert not unknown, f"codes missing from the catalog: {unknown}"
    return fs


def has(row: dict, code: str, severity: str | None = None, variant: str | None = None) -> dict:
    """The finding ``code`` of a row; fails if it is missing or another error code is present."""
    fs = findings(row)
    got = [(f["code"], f["severity"]) for f in fs]
    match = [f for f in fs if f["code"] == code]
    assert match, f"{code} not in {got} (status {row['status']}, error {row['error']!r})"
    others = [f["code"] for f in fs if f["severity"] == "error" and f["code"] != code]
    assert not others, f"unrelated errors {others} next to {code}"
    f = match[0]
    if severity:
        assert f["severity"] == severity, got
    if variant:
        assert f["params"].get("variant") == variant, f["params"]
    assert f["message"] and f["hint"]
    return f
