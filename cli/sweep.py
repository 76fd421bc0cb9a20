"""`firsttoken sweep`: the field guides' experiment, automated.

Vary the input (or output) length, send each point round-robin through the proxy, tagged, and
summarise the rows the proxy recorded: medians per point and the TTFT-vs-input fit. Prompts are exactly
N tokens by firsttoken's counter and unique from their first token (no prefix cache serves one from
another; a cache hit the engine reports anyway is said). See docs/stats.md ("firsttoken sweep")."""

from __future__ import annotations

import csv
import datetime as _dt
import http.client
import json
import os
import random
import secrets
import sys
import time
import urllib.parse
from typing import Any

import click

from firsttoken.addon import tokens
from firsttoken.addon.plan import EXPERIMENT_HEADER
from firsttoken.addon.store import queries
from firsttoken.addon.store import stats_queries as sq
from firsttoken.addon.store.queries import Filters
from firsttoken.cli import output
from firsttoken.cli.options import db_option
from firsttoken.cli.output import plural

APIS = ("openai.chat", "anthropic.messages")
INSTRUCTION = "Write a long, detailed story inspired by the words below. Keep writing until you are stopped.\n\n"
_WORDS = ("river stone market lantern orchard signal harbor meadow copper winter engine quiet garden "
          "thunder paper violet canyon silver ladder island morning forest window letter bridge candle "
          "planet shadow valley marble feather rocket spiral cotton anchor glacier velvet circus").split()


class SweepError(RuntimeError):
    pass


def guess_api(base_url: str, model: str) -> str:
    if "anthropic" in base_url.lower() or model.lower().startswith("claude"):
        return "anthropic.messages"
    return "openai.chat"


#: cached prompt tokens a request may report without being a cache hit: every prompt shares its chat
#: template's start (llama.cpp reports those few tokens as cached), never more than a few dozen tokens
CACHE_HIT_MIN_TOKENS = 64


def _filler(n_words: int, seed: int | str = 7) -> str:
    rnd = random.Random(seed)
    return " ".join(rnd.choice(_WORDS) for _ in range(n_words))


def request_body(api: str, model: str, text: str, max_tokens: int) -> dict[str, Any]:
    msgs = [{"role": "user", "content": text}]
    if api == "anthropic.messages":
        return {"model": model, "max_tokens": max_tokens, "messages": msgs, "stream": True}
    body: dict[str, Any] = {"model": model, "messages": msgs, "stream": True, "stream_options": {"include_usage": True}}
    # OpenAI's reasoning models refuse max_tokens
    field = "max_completion_tokens" if model.split("/")[-1].startswith(("o1", "o3", "o4", "gpt-5")) else "max_tokens"
    body[field] = max_tokens
    return body


def build_prompt(api: str, model: str, n_tokens: int, max_tokens: int, tag: str = "",
                 nonce: str | None = None) -> dict[str, Any]:
    """A request body whose prompt is exactly n_tokens by addon.tokens.count_request.

    The prompt starts with ``nonce`` (random unless given) and its filler words are drawn from it: two
    prompts differ from their first token on, so a prefix cache (llama.cpp's slot cache, vLLM's prefix
    caching, Ollama's, OpenAI's) cannot serve any of one from another, and TTFT measures the prefill."""
    enc, _ = tokens.load_encoding(tokens.encoding_for_model(model)[0])
    if not nonce:  # the fewest tokens of 8 draws: a hex nonce takes 1 to 6, and a small size must not hang on the draw
        nonce = min((secrets.token_hex(4) for _ in range(8)), key=lambda s: len(enc.encode_ordinary(s)))
    head = f"{nonce} " + (f"[{tag}] " if tag else "") + INSTRUCTION

    def count(text: str) -> int:
        return tokens.count_request(api, request_body(api, model, text, max_tokens), model).prompt_tokens_est or 0

    floor = count(head.rstrip())
    if n_tokens < floor:
        raise SweepError(f"{n_tokens} input tokens is below this request's fixed overhead ({floor} tokens): use a larger size")
    ids = enc.encode_ordinary(_filler(n_tokens + 64, seed=nonce))
    k = max(0, n_tokens - floor)
    seen: set[int] = set()
    for _ in range(40):
        text = head + enc.decode(ids[:k]) if k else head.rstrip()
        got = count(text)
        if got == n_tokens:
            return request_body(api, model, text, max_tokens)
        seen.add(k)
        k = max(0, k + (n_tokens - got))
        if k in seen:  # oscillating around a merge: nudge
            k = max(0, k + (1 if got < n_tokens else -1))
            while k in seen and k < len(ids):
                k += 1
    raise SweepError(f"could not build a prompt of exactly {n_tokens} tokens")


class Client:
    """One keep-alive HTTP connection (stdlib http.client), so the proxy reuses its upstream connection."""

    def __init__(self, base_url: str, api: str, key: str | None, timeout: float = 120.0) -> None:
        u = urllib.parse.urlsplit(base_url.rstrip("/"))
        if u.scheme not in ("http", "https") or not u.hostname:
            raise SweepError(f"--base-url {base_url!r}: give an http(s) URL, e.g. http://127.0.0.1:8787/v1")
        self.scheme, self.host, self.port = u.scheme, u.hostname, u.port
        prefix = u.path.rstrip("/")
        if api == "anthropic.messages":
            self.path = prefix + ("/messages" if prefix.endswith("/v1") else "/v1/messages")
        else:
            self.path = prefix + "/chat/completions"
        self.api, self.key, self.timeout = api, key, timeout
        self.conn: http.client.HTTPConnection | None = None

    def _connect(self) -> http.client.HTTPConnection:
        cls = http.client.HTTPSConnection if self.scheme == "https" else http.client.HTTPConnection
        return cls(self.host, self.port, timeout=self.timeout)

    def send(self, body: dict[str, Any], experiment: str) -> tuple[int, bytes]:
        headers = {"content-type": "application/json", "accept": "text/event-stream", EXPERIMENT_HEADER: experiment}
        if self.api == "anthropic.messages":
            headers["anthropic-version"] = "2023-06-01"
            if self.key:
                headers["x-api-key"] = self.key
        elif self.key:
            headers["authorization"] = f"Bearer {self.key}"
        data = json.dumps(body).encode()
        for attempt in (0, 1):
            if self.conn is None:
                self.conn = self._connect()
            try:
                self.conn.request("POST", self.path, body=data, headers=headers)
                resp = self.conn.getresponse()
                head = b""
                while chunk := resp.read(65536):
                    if len(head) < 4096:
                        head += chunk[: 4096 - len(head)]
                if resp.will_close:
                    self.close()
                return resp.status, head
            except (ConnectionError, http.client.RemoteDisconnected, http.client.CannotSendRequest) as e:
                self.close()
                if attempt:
                    raise SweepError(f"connection to {self.host}:{self.port} failed: {e}") from None
            except OSError as e:
                self.close()
                raise SweepError(f"cannot reach {self.host}:{self.port}: {e}") from None
        raise AssertionError("unreachable")

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None


def error_text(status: int, head: bytes, key: str | None) -> str:
    text = head.decode("utf-8", "replace")
    try:
        err = json.loads(text).get("error")
        text = err.get("message") if isinstance(err, dict) else str(err)
    except (ValueError, AttributeError):
        pass
    if key:
        text = text.replace(key, "***")
    return f"HTTP {status}: {(text or '').strip()[:300]}"


def wait_for_rows(db_path: str, experiment: str, expected: int, timeout: float, prefix: bool = False) -> int:
    """Poll the proxy's database until `expected` finished rows of the experiment are there (it
    writes them asynchronously)."""
    from firsttoken.addon.store.db import StoreError, open_reader
    from firsttoken.addon.store.queries import count_finished

    deadline = time.monotonic() + timeout
    n = 0
    while True:
        try:
            db = open_reader(db_path)
            n = count_finished(db, experiment, prefix=prefix)
            db.conn.close()
        except (FileNotFoundError, StoreError):
            n = 0
        if n >= expected or time.monotonic() > deadline:
            return n
        time.sleep(0.1)


def new_tag(mode: str, now: _dt.datetime | None = None) -> str:
    """The default experiment tag: the time to the second plus randomness, so that two sweeps
    started in the same second never share (and mix) their rows."""
    return f"sweep-{mode}-{(now or _dt.datetime.now()).strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(3)}"


class Interrupted(Exception):
    """Ctrl-C during the sweep; ``counts`` are what `run` returns, for the requests that finished."""

    def __init__(self, counts: dict[str, Any]) -> None:
        super().__init__("interrupted")
        self.counts = counts


def run(client: Client, api: str, model: str, points: list[tuple[int, int]], runs: int, warmup: int,
        experiment: str, db_path: str, wait: float, progress=None, on_request=None) -> dict[str, Any]:
    """Send every point (input tokens, max tokens) warmup + runs times; returns counts.

    ``on_request(n_in, n_out, is_warmup)`` is called before each request, ``progress()`` after it.
    Ctrl-C raises `Interrupted` with the counts of the requests that completed."""
    plan = [(p, True) for p in points for _ in range(warmup)] + [(p, False) for _ in range(runs) for p in points]
    c: dict[str, Any] = {"sent": 0, "errors": 0, "first_error": None, "planned": len(plan), "done": 0}
    checked = False
    try:
        for i, ((n_in, n_out), is_warmup) in enumerate(plan):
            if on_request:
                on_request(n_in, n_out, is_warmup)
            body = build_prompt(api, model, n_in, n_out, tag=f"{experiment} #{i}")
            status, head = client.send(body, f"{experiment}/warmup" if is_warmup else experiment)
            c["done"] += 1
            if status >= 400:
                c["errors"] += 1
                c["first_error"] = c["first_error"] or error_text(status, head, client.key)
                if i == 0:
                    raise SweepError(f"the first request failed with {c['first_error']}")
            if not is_warmup:
                c["sent"] += 1
            if not checked:  # the proxy must be recording this experiment, or nothing will come back
                checked = True
                if wait_for_rows(db_path, experiment, 1, wait, prefix=True) == 0:
                    raise SweepError(
                        f"nothing was recorded in {db_path} for experiment {experiment!r}: point --base-url at a running "
                        "`firsttoken proxy` (e.g. http://127.0.0.1:8787/v1) and --db at that proxy's database")
            if progress:
                progress()
        c["recorded"] = wait_for_rows(db_path, experiment, c["sent"], wait)
    except KeyboardInterrupt:
        client.close()  # the request in flight is cut off; the proxy records it as such
        raise Interrupted(c) from None
    return c


SWEEP_METRICS = (("ttft", "ttft_ms"), ("ttfb", "ttfb_ms"), ("gap", "gap_ms"), ("total", "total_ms"),
                 ("tpot", "tpot_ms"), ("server_prompt", "usage_prompt_tokens"), ("server_output", "usage_completion_tokens"),
                 ("est_output", "output_tokens_est"))


def summarize(db, experiment: str, mode: str) -> dict[str, Any]:
    """The guides' table from the recorded rows: one line per point, plus the TTFT fit."""
    f = Filters(experiment=experiment)
    key = "prompt_tokens_est" if mode == "inputs" else "max_tokens"
    res = sq.compute(db, f, group_expr=key, metrics=SWEEP_METRICS, qs=(50, 95), fit=False)
    points = []
    for g in res["groups"]:
        if g["group"] is None or not g["ttft_ms"]["n"]:
            continue
        points.append({
            "input_tokens" if mode == "inputs" else "max_tokens": g["group"], "n": g["ttft_ms"]["n"],
            "ttft_p50": g["ttft_ms"]["p50"], "ttfb_p50": g["ttfb_ms"]["p50"], "gap_p50": g["gap_ms"]["p50"],
            "ttft_p95": g["ttft_ms"]["p95"], "total_p50": g["total_ms"]["p50"], "tpot_p50": g["tpot_ms"]["p50"],
            "server_prompt_tokens": g["server_prompt"]["p50"], "server_output_tokens": g["server_output"]["p50"],
            "counted_output_tokens": g["est_output"]["p50"], "errors": g["errors"],
        })
    whole = sq.compute(db, f, group_expr="experiment", metrics=(), fit=True)
    fit = {k: v for k, v in (whole["groups"][0] if whole["groups"] else {}).items() if k.startswith(("ttft_", "prompt_tokens"))}
    out = {"experiment": experiment, "mode": mode, "points": points, "fit": fit,
           "cache": cache_check(queries.cached_prompt_tokens(db, experiment))}
    if mode == "outputs" and points:
        meds = [p["ttft_p50"] for p in points if p["ttft_p50"] is not None]
        mean = sum(meds) / len(meds)
        out["ttft_spread"] = round((max(meds) - min(meds)) / mean, 4) if mean else None
        out["output_check"] = output_check(points)
    return out


def cache_check(rows: list[tuple[int | None, int]]) -> dict[str, Any] | None:
    """Did the engine serve part of the sweep's prompts from a cache? ``rows`` are (prompt tokens, cached
    tokens) of the measured requests that reported a cached count; a hit is CACHE_HIT_MIN_TOKENS or more.
    None when no request reported a cached count."""
    if not rows:
        return None
    hits = sorted(rows, key=lambda r: r[1] / r[0] if r[0] else 0)
    hits = [r for r in hits if r[1] >= CACHE_HIT_MIN_TOKENS]
    out: dict[str, Any] = {"reported": len(rows), "hits": len(hits), "max_cached_tokens": max(c for _, c in rows)}
    if hits:
        p, c = hits[len(hits) // 2]
        out.update(median_cached_tokens=c, median_prompt_tokens=p)
    return out


def output_check(points: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Did the answers actually get longer as max_tokens grew? An `--outputs` sweep whose every
    point produced the same number of tokens measured nothing about the output length: the
    upstream ignored max_tokens, or the model stopped on its own below the smallest cap.

    Output lengths are the server's usage figures, else firsttoken's own count."""
    caps = [p["max_tokens"] for p in points]
    outs = [p["server_output_tokens"] if p["server_output_tokens"] is not None else p.get("counted_output_tokens")
            for p in points]
    if len(points) < 2 or any(o is None for o in outs) or max(caps) == min(caps):
        return None
    lo, hi = min(outs), max(outs)
    unchanged = hi - lo <= max(1.0, 0.1 * hi)
    reason = None
    if unchanged:
        # above the smallest cap: the cap was not applied; below it: the answer simply ended there
        reason = "ignored" if hi > min(caps) + 1 else "short"
    return {"unchanged": unchanged, "output_tokens": [_int(o) for o in outs], "reason": reason}


def parse_ints(text: str | None, name: str) -> list[int]:
    try:
        vals = [int(x) for x in (text or "").replace(" ", "").split(",") if x]
    except ValueError:
        raise click.BadParameter("give whole numbers separated by commas, e.g. 200,500,1000", param_hint=name) from None
    if not vals or min(vals) <= 0:
        raise click.BadParameter("give positive whole numbers separated by commas", param_hint=name)
    return vals


def print_summary(con, s: dict[str, Any], partial: bool = False) -> None:
    from rich.table import Table

    inputs = s["mode"] == "inputs"
    title = f"sweep {s['experiment']} (medians over the runs; warm-up runs dropped)"
    if partial:
        title = f"sweep {s['experiment']}, interrupted: the points measured so far (medians; warm-up runs dropped)"
    t = Table(title=title, header_style="bold", title_justify="left")
    cols = (["input tokens", "server tokens"] if inputs else ["max tokens", "output tokens"]) + \
        ["n", "TTFT P50", "TTFB P50", "gap P50", "TTFT P95"] + ([] if inputs else ["total P50", "TPOT P50"])
    for c in cols:
        t.add_column(c, justify="right")
    for p in s["points"]:
        row = [f"{p['input_tokens']:,}", output.num(_int(p["server_prompt_tokens"]))] if inputs else \
            [f"{p['max_tokens']:,}", output.num(_int(p["server_output_tokens"]))]
        row += [str(p["n"]), output.ms(p["ttft_p50"]), output.ms(p["ttfb_p50"]), output.ms(p["gap_p50"]), output.ms(p["ttft_p95"])]
        if not inputs:
            row += [output.ms(p["total_p50"]), output.ms(p["tpot_p50"])]
        t.add_row(*row)
    con.print(t)
    fit = s["fit"]
    if inputs and fit.get("ttft_slope_ms_per_1k") is not None:
        con.print(f"TTFT ≈ {fit['ttft_intercept_ms']:.0f} ms + [bold]{fit['ttft_slope_ms_per_1k']:.0f} ms per 1k input tokens[/] "
                  f"(least squares over {fit['ttft_fit_n']} requests, R² {fit['ttft_fit_r2']:.3f}): every 1,000 more "
                  "input tokens cost that much prefill before the first token.")
    elif inputs:
        con.print(f"[yellow]no slope:[/] {fit.get('ttft_fit_warning') or 'no data'}")
    if fit.get("ttft_fit_warning") and fit.get("ttft_slope_ms_per_1k") is not None:
        con.print(f"[yellow]⚠ {fit['ttft_fit_warning']}[/]")
    cache = s.get("cache")
    if cache and cache["hits"]:
        share = f" of {cache['median_prompt_tokens']:,}" if cache.get("median_prompt_tokens") else ""
        con.print(f"[yellow]⚠ the engine reported cache hits:[/] {cache['hits']} of {cache['reported']} measured requests "
                  f"had part of their prompt served from its cache (the middle one {cache['median_cached_tokens']:,}"
                  f"{share} prompt tokens). Every prompt this sweep sent differed from its first token on, so no "
                  "prefix cache could have matched: the engine's cache is keyed on something else (a gateway's "
                  "response cache, chunk reuse such as llama.cpp's --cache-reuse, a system prompt it adds in front). "
                  "Those requests skipped part of their prefill, so the TTFT figures and the slope above are too low. "
                  "Turn that cache off while sweeping (llama.cpp: no --cache-reuse; vLLM: --no-enable-prefix-caching) "
                  f"and run the sweep again; `firsttoken logs --experiment {s['experiment']}` shows the rows.")
    check = s.get("output_check")
    if not inputs and check and check["unchanged"]:
        n = check["output_tokens"][0]
        caps = [p["max_tokens"] for p in s["points"]]
        why = (f"the upstream ignored max_tokens (it answered {n:,} tokens even when capped at {min(caps):,})"
               if check["reason"] == "ignored" else
               f"every answer ended on its own after ~{n:,} tokens, below the smallest cap ({min(caps):,})")
        con.print(f"[yellow]⚠ the output length did not change:[/] every step produced ~{n:,} output tokens although "
                  f"max_tokens went from {min(caps):,} to {max(caps):,}: {why}. This sweep says nothing about how the "
                  "output length affects timing. Check that the upstream (or a gateway in front of it) honours "
                  "max_tokens, and that the model writes long answers; with caps below "
                  f"{n:,} tokens (e.g. --outputs {max(1, n // 4)},{max(2, n // 2)},{n}) the answers must get shorter.")
        if s.get("ttft_spread") is not None:
            con.print(f"TTFT medians vary by {s['ttft_spread'] * 100:.0f}% across the steps (all of the same length).")
    elif not inputs and s.get("ttft_spread") is not None:
        flat = s["ttft_spread"] < 0.2
        con.print(f"TTFT medians vary by {s['ttft_spread'] * 100:.0f}% across output lengths: "
                  + ("flat, as expected: the output length does not enter TTFT, only the total time."
                     if flat else "not flat: the server may schedule long answers differently, or the network is noisy."))


def write_csv(path: str | None, summary: dict[str, Any]) -> None:
    from firsttoken.cli.options import open_output

    if not path:
        return
    with open_output(path, newline="") as fh:
        if summary["points"]:
            w = csv.DictWriter(fh, fieldnames=list(summary["points"][0]))
            w.writeheader()
            w.writerows(summary["points"])


def interrupted(counts: dict[str, Any], experiment: str, mode: str, db_path: str, as_json: bool,
                csv_path: str | None = None) -> None:
    """Ctrl-C: show the table of what finished, say the rows are kept and how to see them; exit 130."""
    from firsttoken.addon.store.db import StoreError, open_reader
    from firsttoken.cli.options import console

    err = console(stderr=True)
    try:
        # the proxy writes asynchronously: give the finished requests a moment to land
        wait_for_rows(db_path, experiment, counts["sent"], 3.0)
        db = open_reader(db_path)
        summary = summarize(db, experiment, mode)
        db.conn.close()
    except (FileNotFoundError, StoreError, KeyboardInterrupt):
        summary = {"experiment": experiment, "mode": mode, "points": [], "fit": {}}
    summary.update(interrupted=True, **{k: counts[k] for k in ("sent", "errors", "done", "planned")})
    write_csv(csv_path, summary)
    err.print(f"[yellow]interrupted[/] after {counts['done']} of {counts['planned']} requests "
              f"({plural(counts['sent'], 'measured request')} finished).")
    if as_json:
        click.echo(json.dumps(summary, indent=2, default=str))
    elif summary["points"]:
        print_summary(console(), summary, partial=True)
    else:
        err.print("No measured request had finished yet: there is no table to show.")
    err.print(f"The finished rows are kept in {db_path}, tagged {experiment!r} (warm-ups: {experiment + '/warmup'!r}): "
              f"see them with `firsttoken logs --experiment {experiment}`; "
              f"`firsttoken stats --experiment {experiment}` summarises them. Run the sweep again to measure every point.")
    sys.stdout.flush()
    sys.exit(130)


def _int(v):
    return None if v is None else int(round(v))


@click.command("sweep")
@click.option("--base-url", required=True, help="The proxy's URL as a client would use it, e.g. http://127.0.0.1:8787/v1.")
@click.option("--model", required=True)
@click.option("--api", type=click.Choice(APIS), default=None, help="Request shape (default: from the URL / model name).")
@click.option("--key-env", default=None, help="Env var with the API key (default OPENAI_API_KEY / ANTHROPIC_API_KEY).")
@click.option("--inputs", help="Input sizes in tokens, e.g. 200,500,1000,2000,4000 (output fixed by --max-tokens).")
@click.option("--max-tokens", type=int, default=50, show_default=True, help="Output cap while varying the input.")
@click.option("--outputs", help="max_tokens values, e.g. 50,200,500 (input fixed by --input).")
@click.option("--input", "input_tokens", type=int, default=200, show_default=True, help="Input size while varying the output.")
@click.option("--runs", type=int, default=5, show_default=True, help="Measured requests per point.")
@click.option("--warmup", type=int, default=1, show_default=True, help="Requests per point sent first and dropped.")
@click.option("--experiment", help="Tag for the rows (default: sweep-inputs-YYYYmmdd-HHMMSS-RANDOM).")
@click.option("--csv", "csv_path", type=click.Path(dir_okay=False), help="Also write the table to this CSV file.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@click.option("--timeout", type=float, default=300.0, show_default=True, help="Seconds per request.")
@click.option("--wait", type=float, default=15.0, show_default=True, help="Seconds to wait for the proxy to record rows.")
@db_option
def sweep(base_url, model, api, key_env, inputs, max_tokens, outputs, input_tokens, runs, warmup, experiment,
          csv_path, as_json, timeout, wait, db_path):
    """Measure how TTFT grows with input length (or stays flat with output length), through the proxy."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    from firsttoken.addon.store.db import open_db
    from firsttoken.cli.options import console, fail, resolve_db

    if inputs and outputs:
        raise click.UsageError("give --inputs or --outputs, not both")
    mode = "outputs" if outputs else "inputs"
    points = [(n, max_tokens) for n in parse_ints(inputs or "200,500,1000,2000,4000", "--inputs")] if mode == "inputs" \
        else [(input_tokens, m) for m in parse_ints(outputs, "--outputs")]
    if runs < 1 or warmup < 0:
        raise click.UsageError("--runs must be at least 1 and --warmup at least 0")
    api = api or guess_api(base_url, model)
    key_env = key_env or ("ANTHROPIC_API_KEY" if api == "anthropic.messages" else "OPENAI_API_KEY")
    key = os.environ.get(key_env) or None
    err = console(stderr=True)
    if key is None:
        err.print(f"[yellow]note:[/] ${key_env} is not set: sending requests without an API key")
    experiment = experiment or new_tag(mode)
    path = resolve_db(db_path)
    try:
        for n, m in points[:1] + points[-1:]:
            build_prompt(api, model, n, m)  # fail on an impossible size before sending anything
        client = Client(base_url, api, key, timeout)
        total = len(points) * (runs + warmup)
        with Progress(TextColumn(f"[bold]{experiment}[/]"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      TextColumn("ETA"), TimeRemainingColumn(), TextColumn("{task.description}"),
                      console=err, transient=True) as bar:
            task = bar.add_task("", total=total)

            def now_sending(n_in, n_out, is_warmup):
                bar.update(task, description=f"{'warm-up · ' if is_warmup else ''}input {n_in:,} tok · max_tokens {n_out:,}")

            info = run(client, api, model, points, runs, warmup, experiment, path, wait,
                       lambda: bar.advance(task), now_sending)
        client.close()
    except SweepError as e:
        fail(str(e))
    except Interrupted as e:
        interrupted(e.counts, experiment, mode, path, as_json, csv_path)
    except KeyboardInterrupt:  # before the first request
        interrupted({"sent": 0, "errors": 0, "done": 0, "planned": len(points) * (runs + warmup)},
                    experiment, mode, path, as_json, csv_path)
    if info["recorded"] < info["sent"]:
        err.print(f"[yellow]warning:[/] the proxy recorded {info['recorded']} of {info['sent']} measured requests within {wait:.0f} s")
    if info["errors"]:
        err.print(f"[yellow]warning:[/] {info['errors']} request(s) failed; the first: {info['first_error']}")
    summary = summarize(open_db(path, write=False), experiment, mode)
    summary.update(model=model, api=api, runs=runs, warmup=warmup, **{k: info[k] for k in ("sent", "recorded", "errors")})
    write_csv(csv_path, summary)
    if as_json:
        click.echo(json.dumps(summary, indent=2, default=str))
    else:
        print_summary(console(), summary)
        console().print(f"[dim]rows tagged {experiment!r}: firsttoken logs --experiment {experiment} · "
                        f"firsttoken baseline save NAME --experiment {experiment}[/]")
    sys.stdout.flush()
