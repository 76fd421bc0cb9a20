"""Through the REAL llama.cpp ``llama-server`` (tests/llama_server.py: built by .ci/llama-server, a tiny
random-weight Llama made by the test): the engine's own report reaches the record as llama-server sent it
to the client (streamed and whole), a repeated prompt is that slot's cache hit, TTFT lies between what the
engine says it spent and what the client saw, and a prompt over the per-slot context is llama-server's own
error. The openai SDK drives it through the proxy in-process, as a user's client would."""

from __future__ import annotations

import json
import threading

import httpx
import openai
import pytest
from click.testing import CliRunner
from conftest import findings, has, rows
from engine_chat import Seen, chat, row, sized
from llama_server import LlamaServer, model, require_binary

from firsttoken.cli.proxy.server import ProxyServer
from firsttoken.cli.show import show

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

SLOT_CTX = 4096  # per slot: --ctx-size 8192 shared by --parallel 2


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    exe = require_binary()
    tmp = tmp_path_factory.mktemp("llama")
    with LlamaServer(exe, model(tmp), tmp / "llama-server.log", parallel=2, ctx_size=2 * SLOT_CTX) as server:
        yield server


@pytest.fixture
def proxied(llama, tmp_path):
    """(llama-server, the proxy in front of it, its database, an openai client through the proxy)."""
    db = tmp_path / "ft.db"
    with ProxyServer([llama.url], str(db), port=0) as proxy:
        client = openai.OpenAI(base_url=proxy.url + "/v1", api_key="sk-no-key-llama-0000", max_retries=0, timeout=300)
        yield llama, proxy, db, client


def in_order(words: list[str], text: list[str]) -> bool:
    """Every one of ``words`` in ``text``, in this order (others between them)."""
    it = iter(text)
    return all(any(w == t for t in it) for w in words)


def assert_engine_columns(r: dict, timings: dict) -> None:
    """The row's engine columns are llama-server's `timings` for this exchange, as the client got them."""
    assert r["engine"] == "llama.cpp", r
    assert r["engine_prompt_tokens"] == timings["prompt_n"] + timings["cache_n"]
    assert r["engine_cached_tokens"] == timings["cache_n"]
    assert r["engine_decode_tokens"] == timings["predicted_n"]
    assert r["engine_prefill_ms"] == pytest.approx(timings["prompt_ms"], abs=0.001)
    assert r["engine_decode_ms"] == pytest.approx(timings["predicted_ms"], abs=0.001)
    reported = {"prefill_ms": "llama.cpp timings.prompt_ms", "decode_ms": "llama.cpp timings.predicted_ms",
                "decode_tokens": "llama.cpp timings.predicted_n", "cached_tokens": "llama.cpp timings.cache_n",
                "prompt_tokens": "llama.cpp timings.prompt_n + cache_n"}
    sources = json.loads(r["engine_sources"])
    assert {k: sources.get(k) for k in reported} == reported, sources
    # llama.cpp reports no queue and no load: a value there is the proxy's inference, labelled so
    for name in ("queue_ms", "load_ms"):
        assert r["engine_" + name] is None or sources[name].startswith("inferred: "), (name, sources)


@pytest.mark.parametrize("usage", [False, True], ids=["timings-on-last-choice", "timings-on-usage-chunk"])
def test_streamed_chat_records_llama_servers_timings(proxied, usage):
    llama, proxy, db, client = proxied
    seen = chat(client, sized(llama, 300, f"stream {usage}"), "s", stream=True, usage=usage)
    assert seen.final is not None and seen.t_first is not None, vars(seen)
    r = row(proxy, db, "s")
    timings = seen.final["timings"]
    assert_engine_columns(r, timings)
    assert r["server"] == "llama.cpp" == seen.headers["server"] and r["status"] == 200
    if usage:
        assert seen.final["usage"]["prompt_tokens"] == r["usage_prompt_tokens"] == r["engine_prompt_tokens"]
    # TTFT: at least the prefill llama-server says it spent, at most what the client waited (both clocks
    # start before the proxy's t0 would allow it to be less, and end after the first token left the engine)
    assert timings["prompt_ms"] <= r["ttft_ms"] <= seen.t_first * 1000, (timings, r["ttft_ms"], seen.t_first)
    assert r["ttfb_ms"] <= seen.t_headers * 1000


def test_whole_chat_records_llama_servers_timings(proxied):
    llama, proxy, db, client = proxied
    seen = chat(client, sized(llama, 300, "whole"), "w", stream=False)
    assert seen.body is not None and seen.body.get("timings"), vars(seen)
    r = row(proxy, db, "w")
    assert_engine_columns(r, seen.body["timings"])
    assert r["usage_prompt_tokens"] == seen.body["usage"]["prompt_tokens"] == r["engine_prompt_tokens"]
    # the whole body comes after prefill and decode: the proxy's last byte is after both, the client's after that
    t = seen.body["timings"]
    assert t["prompt_ms"] + t["predicted_ms"] <= r["total_ms"] <= seen.t_headers * 1000, (t, r["total_ms"])


def test_repeated_prompt_is_the_slots_cache_hit(proxied):
    llama, proxy, db, client = proxied
    prompt = sized(llama, 1500, "repeat")
    first = chat(client, prompt, "r1", stream=True)
    second = chat(client, prompt, "r2", stream=True)
    r1, r2 = row(proxy, db, "r1"), row(proxy, db, "r2")
    assert_engine_columns(r1, first.final["timings"])
    assert_engine_columns(r2, second.final["timings"])
    assert r1["engine_prompt_tokens"] >= 1400 and r1["engine_cached_tokens"] <= 0.05 * r1["engine_prompt_tokens"], r1
    # the second time the slot had it all but the last token (which it evaluates again to sample from)
    assert r2["engine_prompt_tokens"] == r1["engine_prompt_tokens"]
    assert r2["engine_cached_tokens"] >= r2["engine_prompt_tokens"] - 8, r2
    for seen, r in ((first, r1), (second, r2)):
        t = seen.final["timings"]
        assert t["prompt_ms"] <= r["ttft_ms"] <= seen.t_first * 1000, (t, r["ttft_ms"], seen.t_first)
    # the hit is shown as the slot's own, with llama-server's advice, never a cloud's caching rules
    hit = has(r2, "engine.cache_hit", "info")
    assert hit["params"]["cached_tokens"] == r2["engine_cached_tokens"] and "per slot" in hit["hint"], hit
    assert "engine.cache_hit" not in [x["code"] for x in findings(r1)]
    for r in (r1, r2):
        for f in findings(r):
            assert "OpenAI" not in f["hint"] and "cache_control" not in f["hint"], f


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_prompt_over_the_slot_context_is_llama_servers_error(proxied, stream):
    llama, proxy, db, client = proxied
    seen = chat(client, sized(llama, SLOT_CTX + 1000, f"too long {stream}"), "ctx", stream=stream)
    assert isinstance(seen.error, openai.BadRequestError), vars(seen)
    err = seen.error.response.json()["error"]
    assert err["type"] == "exceed_context_size_error" and err["n_ctx"] == SLOT_CTX, err
    assert err["n_prompt_tokens"] > SLOT_CTX
    r = row(proxy, db, "ctx")
    assert r["status"] == 400 and r["server"] == "llama.cpp" and r["engine"] == "llama.cpp", r
    assert r["upstream_error_type"] == "exceed_context_size_error"
    assert r["upstream_error"] == err["message"], r["upstream_error"]
    assert f"exceeds the available context size ({SLOT_CTX} tokens)" in r["upstream_error"]
    # llama-server's fix: the context is per slot
    f = has(r, "request.context_length", "error", variant="engine")
    assert f["params"]["limit"] == SLOT_CTX and f["params"]["server_tokens"] == err["n_prompt_tokens"], f["params"]
    assert "--ctx-size" in f["hint"] and "--parallel" in f["hint"], f["hint"]


@pytest.mark.parametrize("slots", [2, 4])
def test_four_long_prompts_at_once(tmp_path, slots):
    """Four distinct ~1,500-token prompts at once on 2 and on 4 slots: what each client saw (headers, first
    token, its longest pause) against llama-server's own report; every row holds that report, and its TTFT
    lies between the engine's prefill and the client's TTFT. Prints the table (`-s`) for the verdicts' work."""
    exe = require_binary()
    db = tmp_path / "ft.db"
    with LlamaServer(exe, model(tmp_path), tmp_path / "llama-server.log", parallel=slots, ctx_size=slots * 2048) as llama, \
            ProxyServer([llama.url], str(db), port=0) as proxy:
        client = openai.OpenAI(base_url=proxy.url + "/v1", api_key="sk-no-key-llama-0000", max_retries=0, timeout=600)
        chat(client, "warm up", "warm", stream=True, max_tokens=1)  # the proxy's and the SDK's first-use costs
        prompts = [sized(llama, 1500, f"concurrent {slots} {i}") for i in range(4)]
        seen: dict[int, Seen] = {}
        barrier = threading.Barrier(4)

        def one(i: int) -> None:
            barrier.wait()
            seen[i] = chat(client, prompts[i], f"c{i}", stream=True, max_tokens=24)

        threads = [threading.Thread(target=one, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(600)
        assert len(seen) == 4 and all(s.final for s in seen.values()), (seen, llama.log_text())
        print(f"\n{slots} slots: client TTFB, TTFT, longest pause (s); llama-server's timings (ms); the row's (ms)\n"
              "req  TTFB    TTFT  max gap prompt_n cache_n prompt_ms pred_n pred_ms | ttfb   ttft  lag delay top_code")
        for i in sorted(seen, key=lambda i: seen[i].t_first):
            s, r = seen[i], row(proxy, db, f"c{i}")
            t = s.final["timings"]
            print(f"c{i} {s.t_headers:6.2f} {s.t_first:7.2f} {max(s.gaps, default=0):7.2f} {t['prompt_n']:7d} "
                  f"{t['cache_n']:7d} {t['prompt_ms']:9.0f} {t['predicted_n']:6d} {t['predicted_ms']:7.0f} | "
                  f"{r['ttfb_ms']:6.0f} {r['ttft_ms']:6.0f} {r['proxy_lag_ms'] or 0:4.0f} {r['proxy_delay_ms'] or 0:5.0f} "
                  f"{' '.join(x['code'] for x in findings(r))}")
            assert_engine_columns(r, t)
            assert t["prompt_ms"] <= r["ttft_ms"] <= s.t_first * 1000, (i, t, r["ttft_ms"], s.t_first)
        # the verdicts, checked against what llama-server itself reported for the same request
        for i, s in seen.items():
            r, t = row(proxy, db, f"c{i}"), s.final["timings"]
            codes = [x["code"] for x in findings(r)]
            # a loopback engine's queue is never "the network", its paused decode never the client's stall
            assert "latency.network" not in codes and "stream.stall" not in codes, (i, codes)
            # what came before llama-server began evaluating the prompt: its first token of any kind less its prefill
            # (and less a new connection's connect: that is the network's)
            connect = (r["connect_ms"] or 0) if r["conn_reused"] == 0 else 0
            waited = (r["first_token_ms"] or r["ttft_ms"]) - t["prompt_ms"] - connect
            if waited >= 1000 and waited >= 0.3 * r["ttft_ms"]:
                q = has(r, "engine.queued", "warn", variant="prefill")
                assert q["params"]["wait_ms"] == pytest.approx(waited, abs=1.5), (q["params"], waited)
                assert "--parallel" in q["hint"] and "llama.cpp" in q["message"], q
            longest = max(s.gaps, default=0) * 1000
            if longest > 1500:  # well above the 1 s stall threshold, while the others' prompts were being evaluated
                p = has(r, "engine.decode_paused", "warn")
                assert "--batch-size" in p["hint"] and p["params"]["others"] >= 1, p
                assert p["params"]["paused_ms"] == pytest.approx(r["itl_max_ms"], abs=1.0)
        queued = [row(proxy, db, f"c{i}") for i in seen]
        queued = [r for r in queued if "engine.queued" in [x["code"] for x in findings(r)]]
        assert queued
        # `show` splits the TTFT into llama-server's terms: its prefill reported, the wait before it inferred
        r = queued[0]
        for cols in ("60", "200"):
            out = CliRunner(env={"COLUMNS": cols}).invoke(show, [r["id"], "--db", str(db)]).output
            flat = " ".join(out.split())
            assert "engine: llama.cpp" in flat, out
            # a phase name may wrap at 60 columns (its bar and figures between its words): every word, in order
            for name in ("wait for engine (inferred)", "network, proxy",
                         f"prefill {r['engine_prompt_tokens']:,} tok ({r['engine_cached_tokens']:,} cached)"):
                assert name in flat if cols == "200" else in_order(name.split(), flat.split()), (name, out)


def test_sweep_prompts_are_not_served_from_the_slot_cache(proxied):
    """`firsttoken sweep` through the proxy against llama-server: every prompt is unique from its first
    token, so no slot serves any of it from an earlier prompt's cache (each point is sent 3 times, and
    each slot holds a prompt sent before). llama-server's cache_n is at most the chat template's head
    ('<|im_start|>user\n'), which every prompt shares, and a token or two where two random nonces happen
    to begin alike; prompts that began with the sweep's tag would share it too. The fit measures prefill."""
    from firsttoken.cli.sweep import sweep

    llama, proxy, db, _ = proxied
    head = len(httpx.post(llama.url + "/tokenize", json={"content": "<|im_start|>user\n", "parse_special": True},
                          timeout=30).json()["tokens"])
    res = CliRunner(env={"COLUMNS": "200", "OPENAI_API_KEY": "sk-no-key-llama-0000"}).invoke(
        sweep, ["--base-url", proxy.url + "/v1", "--model", "random", "--inputs", "300,600,900", "--max-tokens", "2",
                "--runs", "2", "--warmup", "1", "--db", str(db)], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    proxy.flush()
    rs = rows(db, "WHERE experiment LIKE 'sweep-inputs-%' AND state = 'done'")
    # llama-server closes each kept-alive connection after a streamed response: the proxy answers every
    # request anyway (addon/reconnect.py), so all 9 points are 200s
    assert len(rs) == 9 and all(r["status"] == 200 and r["engine"] == "llama.cpp" for r in rs), \
        [(r["status"], r["error"]) for r in rs]
    assert all(r["engine_prompt_tokens"] >= 250 for r in rs), [r["engine_prompt_tokens"] for r in rs]
    cached = [r["engine_cached_tokens"] for r in rs]
    assert all(c is not None and c <= head + 2 for c in cached), (head, cached)
    said = " ".join(res.output.split())
    assert "TTFT ≈" in said and "cache hits" not in said, res.output
