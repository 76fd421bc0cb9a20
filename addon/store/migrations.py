"""The schema, as a list of migrations: one small function per change.

A migration is never edited after it lands; a new change is a new function appended
below. ``migrate`` applies the ones a database has not seen yet, in order, and notes each
in ``_migrations``.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable

import sqlite_utils

MIGRATIONS: list[Callable[[sqlite_utils.Database], None]] = []


def migration(fn: Callable[[sqlite_utils.Database], None]):
    MIGRATIONS.append(fn)
    return fn


def migrate(db: sqlite_utils.Database) -> list[str]:
    """Apply pending migrations; returns the names applied."""
    db.execute(
        "CREATE TABLE IF NOT EXISTS _migrations (name TEXT PRIMARY KEY, applied_at TEXT)"
    )
    done = {r[0] for r in db.execute("SELECT name FROM _migrations").fetchall()}
    applied = []
    for fn in MIGRATIONS:
        if fn.__name__ in done:
            continue
        # The write lock first, then look again: two proxies opening one new database at once (`bench --workers`,
        # two terminals) would otherwise both apply m001, and the second fail on "table requests already exists".
        db.conn.execute("BEGIN IMMEDIATE")  # waits for the other writer (busy_timeout), whose commit it then sees
        with db.conn:
            if db.execute("SELECT 1 FROM _migrations WHERE name = ?", [fn.__name__]).fetchone():
                continue  # the other process applied it meanwhile
            fn(db)
            db.execute(
                "INSERT INTO _migrations (name, applied_at) VALUES (?, ?)",
                [fn.__name__, _dt.datetime.now(_dt.UTC).isoformat()],
            )
        applied.append(fn.__name__)
    return applied


@migration
def m001_requests(db: sqlite_utils.Database) -> None:
    cols = {
        "id": str, "started_at": str, "state": str, "phase": str,
        "route": str, "upstream": str, "method": str, "path": str, "upstream_url": str,
        "api": str, "model": str, "stream": int, "max_tokens": int, "experiment": str,
        "status": int, "content_type": str, "content_encoding": str, "upstream_request_id": str,
        "connect_ms": float, "conn_reused": int, "ttfb_ms": float, "first_byte_ms": float,
        "first_token_ms": float, "ttft_ms": float, "gap_ms": float, "total_ms": float,
        "itl_p50_ms": float, "itl_p95_ms": float, "itl_max_ms": float, "tpot_ms": float,
        "events": int, "event_offsets": str, "sse_comments": int,
        "usage_prompt_tokens": int, "usage_completion_tokens": int, "usage_cached_tokens": int,
        "usage_cache_creation_tokens": int, "usage_reasoning_tokens": int,
        "output_chars": int, "reasoning_chars": int, "finish_reason": str, "stream_done": int,
        "upstream_error": str, "upstream_error_type": str, "no_choices": str,
        "malformed_events": int, "malformed_sample": str,
        "error": str, "client_aborted": int, "request_bytes": int, "response_bytes": int,
        "key_header": str, "key_fingerprint": str, "key_scheme": str, "key_length": int,
        "key_facts": str,
        "request_error": str, "tokenizer": str, "tokens_exact": int, "prompt_tokens_est": int,
        "system_tokens": int, "tools_tokens": int, "last_user_tokens": int, "messages": int,
        "images": int, "output_tokens_est": int, "usage_ratio": float,
        "prefix_hash": str, "prefix_tokens": int, "prefix_seen_before": int,
        "findings": str, "top_code": str, "top_severity": str,
        "request_body": str, "response_body": str,
    }
    t = db["requests"]
    t.create(cols, pk="id")
    t.create_index(["started_at"])
    t.create_index(["model", "started_at"])
    t.create_index(["state"])
    t.create_index(["prefix_hash"])


@migration
def m002_findings(db: sqlite_utils.Database) -> None:
    t = db["findings"]
    t.create({"request_id": str, "code": str, "severity": str}, pk=("request_id", "code"))
    t.create_index(["code"])


@migration
def m003_calibration(db: sqlite_utils.Database) -> None:
    t = db["requests"]
    t.add_column("calibration_factor", float)
    t.add_column("prompt_tokens_calibrated", int)


@migration
def m004_stats_indexes(db: sqlite_utils.Database) -> None:
    """Indexes for `firsttoken stats`: percentiles by walking (model, metric) in order.

    The connection columns make them covering for the warm/cold split; the TTFT one also
    carries the prompt sizes (report's scatter). A small partial index holds the errors (its
    WHERE must match stats_queries verbatim); another the rows tagged with an experiment.
    """
    for col in ("ttfb_ms", "ttft_ms", "gap_ms", "tpot_ms", "itl_p50_ms", "total_ms"):
        extra = ", usage_prompt_tokens, prompt_tokens_est" if col == "ttft_ms" else ""
        db.execute(f"CREATE INDEX IF NOT EXISTS idx_requests_stats_{col} "
                   f"ON requests (model, {col}, conn_reused, connect_ms{extra}) WHERE {col} IS NOT NULL")
    db.execute("CREATE INDEX IF NOT EXISTS idx_requests_stats_errors ON requests (model, top_code, status, state, error) "
               "WHERE state = 'done' AND (status IS NULL OR status >= 400 OR error IS NOT NULL)")
    db.execute("CREATE INDEX IF NOT EXISTS idx_requests_experiment ON requests (experiment, started_at) "
               "WHERE experiment IS NOT NULL")


@migration
def m005_baselines(db: sqlite_utils.Database) -> None:
    """`firsttoken baseline save`: P50/P95 of TTFB, TTFT and gap per model under a name."""
    db["baselines"].create(
        {
            "name": str, "model": str, "created_at": str, "source": str, "n": int,
            "ttfb_p50": float, "ttfb_p95": float, "ttft_p50": float, "ttft_p95": float,
            "gap_p50": float, "gap_p95": float, "prompt_tokens_p50": float, "max_tokens_p50": float,
            "api": str,
        },
        pk=("name", "model"),
    )


# Per model and connection kind (cold = a new TCP/TLS connection), running totals of what
# `stats` needs besides percentiles: row counts, non-null counts per latency column, and the
# sums of the least-squares fit TTFT ~ prompt tokens. Triggers kept them exact on every
# insert, update and delete, until m022 dropped them (`stats` counts with plain queries).
_TOTAL_COLS = ("ttfb_ms", "ttft_ms", "gap_ms", "tpot_ms", "itl_p50_ms", "total_ms")


#: what m006 counted as an error (m011 switched to the store's one rule, ``queries.error_sql``)
_M006_ERROR = "({r}.state IS 'done' AND ({r}.status IS NULL OR {r}.status >= 400 OR {r}.error IS NOT NULL))"


def _totals_values(r: str, sign: str, error: str = _M006_ERROR, streamed: str | None = None) -> tuple[str, str]:
    """The totals' INSERT for row ``r``; ``streamed`` (m021 on): the latency counts and the fit
    count streamed rows only, and ``n_whole`` the non-streamed ones with a total."""
    x = f"coalesce({r}.usage_prompt_tokens, {r}.prompt_tokens_est)"
    s = streamed.format(r=r) if streamed else None
    f = f"({r}.ttft_ms IS NOT NULL AND {x} IS NOT NULL" + (f" AND {s})" if s else ")")
    counts = {f"n_{c}": f"{sign}({r}.{c} IS NOT NULL" + (f" AND {s})" if s else ")") for c in _TOTAL_COLS}
    if s:
        counts["n_whole"] = f"{sign}({r}.total_ms IS NOT NULL AND NOT {s})"  # (a NULL stream is not streamed)
    vals = {
        "model": f"coalesce({r}.model, '')",
        "cold": f"coalesce({r}.conn_reused = 0 AND {r}.connect_ms IS NOT NULL, 0)",
        "n": f"{sign}1",
        "n_in_flight": f"{sign}({r}.state IS 'in_flight')",
        "n_errors": f"{sign}{error.format(r=r)}",
        **counts,
        "fit_n": f"{sign}{f}",
        "fit_sx": f"{sign}(CASE WHEN {f} THEN {x} ELSE 0 END)",
        "fit_sy": f"{sign}(CASE WHEN {f} THEN {r}.ttft_ms ELSE 0 END)",
        "fit_sxy": f"{sign}(CASE WHEN {f} THEN {x} * {r}.ttft_ms ELSE 0 END)",
        "fit_sxx": f"{sign}(CASE WHEN {f} THEN {x} * {x} * 1.0 ELSE 0 END)",
        "fit_syy": f"{sign}(CASE WHEN {f} THEN {r}.ttft_ms * {r}.ttft_ms ELSE 0 END)",
    }
    cols = ", ".join(vals)
    upd = ", ".join(f"{k} = {k} + excluded.{k}" for k in vals if k not in ("model", "cold"))
    return (f"INSERT INTO stats_totals ({cols}) VALUES ({', '.join(vals.values())}) "
            f"ON CONFLICT (model, cold) DO UPDATE SET {upd};"), cols


@migration
def m006_stats_totals(db: sqlite_utils.Database) -> None:
    ints = ["n", "n_in_flight", "n_errors"] + [f"n_{c}" for c in _TOTAL_COLS] + ["fit_n"]
    reals = ["fit_sx", "fit_sy", "fit_sxy", "fit_sxx", "fit_syy"]
    db.execute("CREATE TABLE stats_totals (model TEXT NOT NULL, cold INTEGER NOT NULL, "
               + ", ".join(f"{c} INTEGER NOT NULL DEFAULT 0" for c in ints) + ", "
               + ", ".join(f"{c} REAL NOT NULL DEFAULT 0" for c in reals) + ", PRIMARY KEY (model, cold))")
    add_new, _ = _totals_values("NEW", "+")
    remove_old, _ = _totals_values("OLD", "-")
    watched = ", ".join(["model", "state", "status", "error", "conn_reused", "connect_ms", *_TOTAL_COLS,
                         "usage_prompt_tokens", "prompt_tokens_est"])
    db.execute(f"CREATE TRIGGER stats_totals_insert AFTER INSERT ON requests BEGIN {add_new} END")
    db.execute(f"CREATE TRIGGER stats_totals_delete AFTER DELETE ON requests BEGIN {remove_old} END")
    db.execute(f"CREATE TRIGGER stats_totals_update AFTER UPDATE OF {watched} ON requests BEGIN {remove_old} {add_new} END")
    rebuild_stats_totals(db)


def rebuild_stats_totals(db: sqlite_utils.Database, error: str | None = None, streamed: str | None = None) -> None:
    """Recompute stats_totals from the requests table (the migrations; bulk loads), counting
    errors and the streamed population as the triggers in place do (or by ``error``/``streamed``)."""
    done = {r[0] for r in db.execute("SELECT name FROM _migrations").fetchall()}
    if error is None:
        error = _current_error(done)
    if streamed is None:
        streamed = _current_streamed(done)
    db.execute("DELETE FROM stats_totals")
    sel = _totals_values("r", "", error, streamed)[0]
    cols = sel[sel.index("(") + 1: sel.index(")")]
    values = sel[sel.index("VALUES (") + 8: sel.index(") ON CONFLICT")]
    exprs = [v.strip() for v in _split_top(values)]
    names = [c.strip() for c in cols.split(",")]
    agg = ", ".join(e if n in ("model", "cold") else f"total({e})" for n, e in zip(names, exprs))
    db.execute(f"INSERT INTO stats_totals ({cols}) SELECT {agg} FROM requests r GROUP BY 1, 2")


def _split_top(text: str) -> list[str]:
    """Split a comma list at depth 0 (the VALUES of _totals_values)."""
    out, depth, cur = [], 0, ""
    for ch in text:
        depth += ch == "("
        depth -= ch == ")"
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    return out + [cur]


@migration
def m007_retry_after(db: sqlite_utils.Database) -> None:
    db["requests"].add_column("retry_after", float)


@migration
def m008_fault_columns(db: sqlite_utils.Database) -> None:
    # which proxy process owns an in-flight row: a restarted proxy closes the rows of a dead one
    db["requests"].add_column("proxy_pid", int)
    # SSE events too large for the proxy to analyse (a limit of ours, not malformed upstream data)
    db["requests"].add_column("oversize_events", int, not_null_default=0)
    db.execute("CREATE INDEX IF NOT EXISTS idx_requests_state ON requests(state) WHERE state = 'in_flight'")


@migration
def m009_proxy_load(db: sqlite_utils.Database) -> None:
    """What the proxy's own load did to each request (issue 13): its added delay, its event
    loop's lag when the request arrived, and its CPU use meanwhile."""
    for col in ("proxy_delay_ms", "proxy_lag_ms", "proxy_cpu"):
        db["requests"].add_column(col, float)


@migration
def m010_run_id(db: sqlite_utils.Database) -> None:
    """The `firsttoken run` a request belonged to (`logs --run ID`, the run's summary)."""
    db["requests"].add_column("run_id", str)
    db.execute("CREATE INDEX IF NOT EXISTS idx_requests_run_id ON requests (run_id, started_at) WHERE run_id IS NOT NULL")


#: the error rule as m011 wrote it into the triggers and the index (frozen, like the migration:
#: a later change of ``queries.error_sql`` needs a new migration; m013 changed it)
M011_ERROR = ("({r}.state IS 'done' AND ({r}.status IS NULL OR {r}.status >= 400 OR {r}.error IS NOT NULL "
               "OR {r}.top_severity IS 'error'))")
M011_ERROR_BARE = ("(state IS 'done' AND (status IS NULL OR status >= 400 OR error IS NOT NULL "
                    "OR top_severity IS 'error'))")
#: ... and as m013 wrote it: a client that hung up is not a failed request (its finding says so)
M013_ERROR = ("({r}.state IS 'done' AND (coalesce({r}.status, 0) >= 400 OR {r}.top_severity IS 'error' OR "
              "({r}.client_aborted IS NOT 1 AND ({r}.status IS NULL OR {r}.error IS NOT NULL))))")
M013_ERROR_BARE = ("(state IS 'done' AND (coalesce(status, 0) >= 400 OR top_severity IS 'error' OR "
                   "(client_aborted IS NOT 1 AND (status IS NULL OR error IS NOT NULL))))")
#: the error rule each migration put in place, oldest first (rebuild_stats_totals counts with the newest applied)
_ERROR_RULES = (("m006_stats_totals", _M006_ERROR), ("m011_error_rule", M011_ERROR), ("m013_cancels_are_not_errors", M013_ERROR))


def _current_error(done: set[str]) -> str:
    return next(rule for name, rule in reversed(_ERROR_RULES) if name in done or name == "m006_stats_totals")


def _install_error_rule(db: sqlite_utils.Database, err: str, bare: str, watched_extra: tuple[str, ...] = (),
                        streamed: str | None = None) -> None:
    """Re-create the totals' triggers and the errors index with an error rule, and recount
    (with the streamed population once m021 is in place, or ``streamed`` when it installs it)."""
    done = {r[0] for r in db.execute("SELECT name FROM _migrations").fetchall()}
    streamed = streamed or _current_streamed(done)
    add_new, _ = _totals_values("NEW", "+", err, streamed)
    remove_old, _ = _totals_values("OLD", "-", err, streamed)
    watched = ", ".join(["model", "state", "status", "error", "top_severity", "conn_reused", "connect_ms",
                         *_TOTAL_COLS, "usage_prompt_tokens", "prompt_tokens_est", *watched_extra,
                         *(("stream",) if streamed else ())])
    for name in ("stats_totals_insert", "stats_totals_delete", "stats_totals_update"):
        db.execute(f"DROP TRIGGER IF EXISTS {name}")
    db.execute(f"CREATE TRIGGER stats_totals_insert AFTER INSERT ON requests BEGIN {add_new} END")
    db.execute(f"CREATE TRIGGER stats_totals_delete AFTER DELETE ON requests BEGIN {remove_old} END")
    db.execute(f"CREATE TRIGGER stats_totals_update AFTER UPDATE OF {watched} ON requests BEGIN {remove_old} {add_new} END")
    db.execute("DROP INDEX IF EXISTS idx_requests_stats_errors")
    cols = ", ".join(["model", "top_code", "status", "state", "error", "top_severity", *watched_extra])
    db.execute(f"CREATE INDEX idx_requests_stats_errors ON requests ({cols}) WHERE {bare}")
    rebuild_stats_totals(db, err, streamed)


@migration
def m011_error_rule(db: sqlite_utils.Database) -> None:
    """One definition of an error everywhere (``queries.error_sql``): an error-severity finding
    (an error event inside a 200 stream) now counts too. Re-create the totals' triggers and the
    errors index with it, and recount."""
    _install_error_rule(db, M011_ERROR, M011_ERROR_BARE)


@migration
def m012_conversations(db: sqlite_utils.Database) -> None:
    """Conversations and turns (``firsttoken sessions`` / ``session ID``)."""
    db["requests"].add_column("conversation_id", str)
    db["requests"].add_column("turn", int)
    db["requests"].add_column("request_kind", str)
    db["requests"].add_column("client_gap_ms", float)
    db.execute("CREATE INDEX IF NOT EXISTS idx_requests_conversation ON requests (conversation_id, started_at) "
               "WHERE conversation_id IS NOT NULL")


@migration
def m013_cancels_are_not_errors(db: sqlite_utils.Database) -> None:
    """A client that hung up (a cancel, its own timeout) is no longer counted as a failed request:
    its ``client.aborted`` finding says what happened, and a stall that made it give up has its own
    (``stream.stall``). And how long an abnormally ended request had been silent before its end."""
    db["requests"].add_column("end_silence_ms", float)
    _install_error_rule(db, M013_ERROR, M013_ERROR_BARE, ("client_aborted",))


@migration
def m014_sse_foreign_lines(db: sqlite_utils.Database) -> None:
    """Lines of an event-stream body that are no SSE field: an error page or a JSON body sent as
    ``text/event-stream`` (``stream.not_sse``, variant ``body``)."""
    db["requests"].add_column("sse_foreign_lines", int, not_null_default=0)


@migration
def m015_who_answered(db: sqlite_utils.Database) -> None:
    """Who answered (``addon/hops``): the response's ``Server`` and ``Via``, the allow-listed
    gateway and provider headers (JSON), and the hop they name; ``show`` prints them and
    ``stream.buffered`` names that hop and gives its own fix."""
    t = db["requests"]
    t.add_column("server", str)
    t.add_column("via", str)
    t.add_column("hop_headers", str)
    t.add_column("hop", str)


@migration
def m016_headers_held(db: sqlite_utils.Database) -> None:
    """Whether a stream's response headers came only with its first token (a hop such as
    LiteLLM's proxy holds them): its TTFB then contains the prefill (``latency.headers_held``)."""
    db["requests"].add_column("headers_held", int)


@migration
def m017_egress_proxy(db: sqlite_utils.Database) -> None:
    """The egress proxy a request's upstream connection went through (issue 22): NULL when direct."""
    db["requests"].add_column("egress_proxy", str)


#: the columns of the readable ``findings`` table (m018), in the writer's insert order
FINDING_COLUMNS = ("request_id", "code", "severity", "position", "message", "hint", "params")


@migration
def m018_readable_findings(db: sqlite_utils.Database) -> None:
    """The ``findings`` table a person can read (`firsttoken browse`, any SQLite tool): each
    finding's message and hint (in the language the proxy recorded them in), its params as JSON,
    its place in the request's list (0 = the top one), and a foreign key to ``requests`` so that
    a finding links to its request and a request to its findings. SQLite cannot add a foreign key
    to a table, so the table is made anew and filled from ``requests.findings`` (the JSON list
    the proxy always wrote); rows only the old table had (a bulk load's) are kept as they were."""
    db.execute("""CREATE TABLE findings_m018 (
        request_id TEXT NOT NULL REFERENCES requests(id),
        code TEXT NOT NULL,
        severity TEXT,
        position INTEGER,
        message TEXT,
        hint TEXT,
        params TEXT,
        PRIMARY KEY (request_id, code))""")
    db.execute("""INSERT OR IGNORE INTO findings_m018 (request_id, code, severity, position, message, hint, params)
        SELECT r.id, json_extract(j.value, '$.code'), json_extract(j.value, '$.severity'), CAST(j.key AS INTEGER),
               json_extract(j.value, '$.message'), json_extract(j.value, '$.hint'),
               CASE WHEN json_type(j.value, '$.params') IN ('object', 'array') THEN json_extract(j.value, '$.params') END
        FROM requests r, json_each(r.findings) j
        WHERE r.findings IS NOT NULL AND json_valid(r.findings) AND json_type(r.findings) = 'array'
          AND json_type(j.value) = 'object' AND json_type(j.value, '$.code') = 'text'""")
    db.execute("INSERT OR IGNORE INTO findings_m018 (request_id, code, severity) "
               "SELECT request_id, code, severity FROM findings WHERE code IS NOT NULL")
    db.execute("DROP TABLE findings")
    db.execute("ALTER TABLE findings_m018 RENAME TO findings")
    db.execute("CREATE INDEX idx_findings_code ON findings (code, severity)")
    db.execute("CREATE INDEX idx_findings_severity ON findings (severity)")


@migration
def m020_proxy_start_wait(db: sqlite_utils.Database) -> None:
    """How much of a request's wait before the proxy read it (``proxy_lag_ms``) fell while the
    proxy was still starting: `firsttoken run` starts its child beside the proxy, on a port that
    already listens, so a fast client's first request can wait for the proxy's start-up."""
    db["requests"].add_column("proxy_start_wait_ms", float)


#: the streamed population as m021 wrote it into the totals' triggers and the stats indexes (frozen:
#: ``queries.streamed_sql`` must stay equal to it, a test checks; a change needs a new migration)
M021_STREAMED = "({r}.stream IS 1)"
M021_STREAMED_BARE = "(stream IS 1)"
M021_NOT_STREAMED_BARE = "(stream IS NOT 1)"


def _current_streamed(done: set[str]) -> str | None:
    return M021_STREAMED if "m021_streamed_population" in done else None


@migration
def m021_streamed_population(db: sqlite_utils.Database) -> None:
    """Latency figures over one population (issue 24): a non-streamed answer's headers come after
    the whole answer, so TTFB, gap, TTFT, TPOT, ITL and total count streamed requests only; the
    non-streamed ones get their own figure, the time to the whole answer (``n_whole``, index
    ``idx_requests_stats_whole``). The stats indexes become partial on the rule, the totals'
    triggers count by it (with the error rule in place), and the totals are recounted."""
    db.execute("ALTER TABLE stats_totals ADD COLUMN n_whole INTEGER NOT NULL DEFAULT 0")
    # proxy.saturated's third cause: the machine itself was busy (load average per core)
    db["requests"].add_column("machine_load", float)
    for col in _TOTAL_COLS:
        extra = ", usage_prompt_tokens, prompt_tokens_est" if col == "ttft_ms" else ""
        db.execute(f"DROP INDEX IF EXISTS idx_requests_stats_{col}")
        db.execute(f"CREATE INDEX idx_requests_stats_{col} ON requests (model, {col}, conn_reused, connect_ms{extra}, stream) "
                   f"WHERE {col} IS NOT NULL AND {M021_STREAMED_BARE}")
    db.execute("CREATE INDEX idx_requests_stats_whole ON requests (model, total_ms, conn_reused, connect_ms, stream) "
               f"WHERE total_ms IS NOT NULL AND {M021_NOT_STREAMED_BARE}")
    done = {r[0] for r in db.execute("SELECT name FROM _migrations").fetchall()}
    err = _current_error(done)
    bare = {M011_ERROR: M011_ERROR_BARE, M013_ERROR: M013_ERROR_BARE}.get(err, M013_ERROR_BARE)
    _install_error_rule(db, err, bare, ("client_aborted",), streamed=M021_STREAMED)


@migration
def m022_stats_without_totals(db: sqlite_utils.Database) -> None:
    """`stats` counts with plain queries (issue 25): the running totals, their triggers and the errors
    index go, each a copy of the error rule in SQL (``queries.error_sql`` is its one home). Two partial
    indexes take their place in the default view: connect times (the ``connect`` metric, cold requests)
    and TTFT beside cached tokens (the uncached fit)."""
    for name in ("stats_totals_insert", "stats_totals_delete", "stats_totals_update"):
        db.execute(f"DROP TRIGGER IF EXISTS {name}")
    db.execute("DROP TABLE IF EXISTS stats_totals")
    db.execute("DROP INDEX IF EXISTS idx_requests_stats_errors")
    db.execute("CREATE INDEX idx_requests_stats_connect ON requests (model, connect_ms, conn_reused) "
               "WHERE connect_ms IS NOT NULL")
    db.execute("CREATE INDEX idx_requests_stats_cached ON requests (model, ttft_ms, usage_prompt_tokens, "
               "usage_cached_tokens, conn_reused, connect_ms, stream) WHERE usage_cached_tokens IS NOT NULL")


@migration
def m023_websocket_turns(db: sqlite_utils.Database) -> None:
    """Responses over WebSocket (issue 29): each ``response.create`` frame is a record of its own,
    carried by ``transport`` 'websocket' (every earlier row was HTTP), with the connection it rode
    (the upgrade's id, its turn there, the set-up: connect, 101, response headers) and the close
    that hit it."""
    t = db["requests"]
    t.add_column("transport", str, not_null_default="http")
    t.add_column("ws_connection_id", str)
    t.add_column("ws_turn", int)
    t.add_column("ws_connection", str)
    t.add_column("ws_close_code", int)
    t.add_column("ws_close_reason", str)
    t.add_column("ws_closed_by", str)
    t.add_column("ws_binary_frames", int, not_null_default=0)
    db.execute("CREATE INDEX idx_requests_ws_connection ON requests (ws_connection_id) WHERE ws_connection_id IS NOT NULL")


@migration
def m024_frame_error(db: sqlite_utils.Database) -> None:
    """Why a binary event stream (Bedrock's ``application/vnd.amazon.eventstream``) could not be
    decoded past some frame: a bad CRC, an impossible length, malformed headers, or an unfinished
    last frame (``stream.corrupt_frame``). The bytes were forwarded unchanged all the same."""
    db["requests"].add_column("frame_error", str)


#: the findings m026 read as "this TTFT is not prefill" (frozen: ``diagnose.NOT_PREFILL`` is the rule
#: for new rows; a change there needs a new migration to refill older ones)
M026_NOT_PREFILL = ("stream.buffered", "latency.headers_held", "proxy.saturated", "latency.network",
                    "latency.cold_connection")


@migration
def m026_ttft_outlier(db: sqlite_utils.Database) -> None:
    """The TTFT-vs-prompt fit leaves out what is not prefill (issue 31): ``ttft_outlier`` names the
    finding that says so (a buffered stream, held headers with no route fit to split them, the
    proxy's own delay, a slow network, a cold connection), filled in from ``findings`` for older
    rows; the TTFT indexes carry it so that the default view's fit still reads an index only."""
    db["requests"].add_column("ttft_outlier", str)
    codes = ", ".join(f"'{c}'" for c in M026_NOT_PREFILL)
    db.execute(f"""UPDATE requests SET ttft_outlier = (
        SELECT f.code FROM findings f WHERE f.request_id = requests.id AND f.code IN ({codes})
          AND NOT (f.code = 'latency.headers_held' AND coalesce(json_extract(CASE WHEN json_valid(f.params)
                   THEN f.params END, '$.variant'), '') = 'fit')
        ORDER BY f.position LIMIT 1)
        WHERE id IN (SELECT request_id FROM findings WHERE code IN ({codes}))""")
    db.execute("DROP INDEX IF EXISTS idx_requests_stats_ttft_ms")
    db.execute("CREATE INDEX idx_requests_stats_ttft_ms ON requests (model, ttft_ms, conn_reused, connect_ms, "
               f"usage_prompt_tokens, prompt_tokens_est, stream, ttft_outlier) WHERE ttft_ms IS NOT NULL AND {M021_STREAMED_BARE}")
    db.execute("DROP INDEX IF EXISTS idx_requests_stats_cached")
    db.execute("CREATE INDEX idx_requests_stats_cached ON requests (model, ttft_ms, usage_prompt_tokens, "
               "usage_cached_tokens, conn_reused, connect_ms, stream, ttft_outlier) WHERE usage_cached_tokens IS NOT NULL")


@migration
def m027_engine_report(db: sqlite_utils.Database) -> None:
    """The model server's own report of an exchange (issue 35): which engine answered (llama.cpp,
    Ollama, vLLM, TGI, SGLang) and what it says it spent waiting, loading, prefilling and decoding,
    with its prompt count and cache hits; ``engine_sources`` (JSON) names where each value came from."""
    t = db["requests"]
    t.add_column("engine", str)
    for name in ("engine_queue_ms", "engine_load_ms", "engine_prefill_ms", "engine_decode_ms"):
        t.add_column(name, float)
    for name in ("engine_prompt_tokens", "engine_cached_tokens", "engine_decode_tokens"):
        t.add_column(name, int)
    t.add_column("engine_sources", str)


@migration
def m028_whole_answered(db: sqlite_utils.Database) -> None:
    """The time to the whole answer is over the non-streamed model calls that got one
    (``stats_queries.ANSWERED_NOT_STREAMED``: a 401 or a 404 is no answer, a probe is no model call);
    its index holds the columns that rule reads, so `stats` still answers from it alone."""
    db.execute("DROP INDEX IF EXISTS idx_requests_stats_whole")
    db.execute("CREATE INDEX idx_requests_stats_whole ON requests (model, total_ms, conn_reused, connect_ms, stream, "
               f"status, error, api, method) WHERE total_ms IS NOT NULL AND {M021_NOT_STREAMED_BARE}")


@migration
def m029_num_ctx(db: sqlite_utils.Database) -> None:
    """The context window a request asked the engine for (Ollama's ``options.num_ctx``): what a prompt
    longer than it is silently cut to (``request.truncated``)."""
    db["requests"].add_column("num_ctx", int)


@migration
def m030_engine_rows(db: sqlite_utils.Database) -> None:
    """The rows an engine reported on, by group: `stats` splits their TTFT into the engine's terms, and a
    database with none (a cloud API's) answers that from this index at once, not from a scan of every row."""
    # the WHERE is split.ENGINE_ROWS_SQL as it was written then (a query must name it word for word)
    db.execute("CREATE INDEX idx_requests_engine ON requests (model, engine) WHERE (engine IS NOT NULL OR "
               "engine_queue_ms IS NOT NULL OR engine_load_ms IS NOT NULL OR engine_prefill_ms IS NOT NULL)")


@migration
def m031_proxy_worker(db: sqlite_utils.Database) -> None:
    """Which process of a `firsttoken proxy --workers N` forwarded a request (0: the one that analyses and records;
    NULL: a proxy of one process): a worker that was late, or ended, is found by it."""
    db["requests"].add_column("proxy_worker", int)
