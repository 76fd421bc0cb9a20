"""Real servers on loopback: the simulated upstream and the proxy, both on port 0."""

from __future__ import annotations

import os
import pathlib
import sqlite3

import pytest

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
