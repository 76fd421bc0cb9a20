"""`firsttoken run -- CMD`: run a client through firsttoken with zero configuration, then summarise.
Its upstreams (cli/run/upstreams.py), a running proxy joined or one started beside it
(cli/run/startup.py), CMD on our terminal (cli/run/child.py), the summary (cli/run/summary.py) and
CMD's exit code as ours. How and why: docs/run.md."""

from __future__ import annotations

import os
import shlex
import socket
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

import click

from firsttoken.addon import routing
from firsttoken.addon.routing import Route
from firsttoken.cli.options import db_option, fail, resolve_db
from firsttoken.cli.run.child import ChildError, child_dir, run_child
from firsttoken.cli.run.clients import registry
from firsttoken.cli.run.startup import EarlyProxy
from firsttoken.cli.run.upstreams import (
    Plan,
    PlanError,
    Redirect,
    cannot_record,
    export_lines,
    forward_env,
    home_dir,
    make_plan,
    redirect,
    serves,
    settings_lines,
)

DEFAULT_PROXY_URL = "http://127.0.0.1:8787"


@click.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--print-env", is_flag=True, help="Print what would be set (shell export lines) and exit.")
@db_option
@click.option("--forward", "force_forward", is_flag=True,
              help="Record through HTTPS_PROXY + mitmproxy's CA instead of pointing the base URLs at the proxy.")
@click.option("--join/--no-join", default=True, show_default=True,
              help="Use a `firsttoken proxy` already running for the same upstreams when there is one (with --db: only one writing that database).")
@click.option("--save-bodies", is_flag=True, help="Store request/response bodies (redacted, capped at 256 KB).")
@click.option("--lang", type=click.Choice(["en", "zh"]), default=None, help="Language of findings (default: locale).")
@click.option("--upstream-proxy", default=None, metavar="URL",
              help="firsttoken's own upstream leg goes through this HTTP proxy (default: HTTPS_PROXY / HTTP_PROXY / "
                   "ALL_PROXY and NO_PROXY, as the client would).")
@click.option("--no-upstream-proxy", is_flag=True, help="firsttoken's own upstream leg connects directly.")
@click.option("--upstream-ca", default=None, metavar="FILE",
              help="A PEM file of CAs to trust for the upstream's TLS (a private CA, a company's TLS-inspecting "
                   "proxy), besides the system store, SSL_CERT_FILE and REQUESTS_CA_BUNDLE.")
@click.argument("cmd", nargs=-1, type=click.UNPROCESSED, required=True, metavar="-- CMD [ARGS]...")
def run(cmd, print_env, db_path, force_forward, join, save_bodies, lang, upstream_proxy, no_upstream_proxy, upstream_ca):
    """Run CMD with every LLM request it makes going through firsttoken; summarise when it exits.

    \b
      firsttoken run -- claude                     interactive Claude Code
      firsttoken run -- claude -p "fix the tests"  one-shot
      firsttoken run -- codex exec "…"
      firsttoken run -- cline --json "…"           the Cline CLI
      firsttoken run -- aider --openai-api-base …  opencode, qwen, llm, cn, kilo, kimi: as you run them
      firsttoken run -- python my_app.py           anything using the openai / anthropic SDKs

    The upstreams are the ones CMD would have used, read by its adapter in the client's own precedence (Claude Code, Codex,
    Cline, opencode, Qwen Code, aider, llm, Continue's cn, Kilo, Kimi CLI; see docs/run.md). Any other command gets only the
    base-URL variables it already has (ANTHROPIC_BASE_URL, OPENAI_BASE_URL): with none, it runs in forward mode. A request
    never goes to a host CMD would not have used. firsttoken prints nothing while CMD runs and exits with CMD's exit code.
    """
    env = dict(os.environ)
    try:
        plan = make_plan(list(cmd), env, home_dir(env), Path.cwd())
    except PlanError as e:
        fail(str(e), 2)
    db = resolve_db(db_path)
    forward_reason = "--forward" if force_forward else plan.forward_reason
    if plan.cannot and not force_forward:  # said before anything starts: nothing would be recorded
        for line in cannot_record(plan):
            click.echo(("# " + line) if print_env else line, err=not print_env)
        if print_env:
            return
        sys.exit(2)
    if print_env:
        for line in _print_env(plan, db, forward_reason, env, join, any_db=db_path is None):
            click.echo(line)
        return
    run_id = os.urandom(4).hex()  # (the secrets module costs an import before the child starts)
    if upstream_ca:  # said now: the proxy starts beside the child, too late to refuse
        from firsttoken.addon.egress.trust import TrustError, check_extra

        try:
            check_extra(upstream_ca)
        except TrustError as e:
            fail(str(e), 2)
    egress = {"upstream_proxy": upstream_proxy, "no_upstream_proxy": no_upstream_proxy, "upstream_ca": upstream_ca}
    # a joined proxy goes its own way out and trusts its own CAs: with an explicit choice, start our own
    join = join and not (upstream_proxy or no_upstream_proxy or upstream_ca)
    server, joined, r = _start(plan, db, run_id, forward_reason, env, join, save_bodies, lang, any_db=db_path is None,
                               egress=egress)
    if joined:
        db = joined[1]  # the joined proxy records into its own database
    early = server if isinstance(server, EarlyProxy) else None
    try:
        with child_dir(r.files) as (file_env, d):
            def place(v: str) -> str:
                return v.replace(r.dir_placeholder, d) if d else v

            child_env = {**env, **{k: place(v) for k, v in r.env.items()}, **file_env, "FIRSTTOKEN_RUN_ID": run_id}
            code = run_child([place(a) for a in r.argv], child_env, on_start=early.start if early is not None else None)
    except ChildError as e:
        if early is not None:
            early.close()
        else:
            _stop(server)
        fail(str(e), 127)
    if early is not None and early.unused():  # the command exited having sent the proxy nothing: no wait
        server = early = None  # (its start thread is left to the process's exit: nothing of it is written)
    if early is not None:  # its proxy started beside the child (cli/run/startup.py)
        try:
            server = early.wait()
        except Exception as e:  # noqa: BLE001 - said at once on stderr; the child's exit code stays ours
            click.echo(f"firsttoken run {run_id}: nothing was recorded: the proxy could not start ({e}). "
                       "Fix that and run again, or run the command without firsttoken.", err=True)
            sys.exit(code)
    _stop(server)
    from firsttoken.cli.run.summary import mode_notes, no_request_advice, render, summarize  # after the child: nothing waits

    rows = _rows(db, run_id, settle=5.0 if joined else 0.0)
    own_db = os.path.realpath(db) != os.path.realpath(resolve_db(None))
    more = f"firsttoken logs --run {run_id}" + (f" --db {shlex.quote(db)}" if db_path or own_db else "")
    via = r.how + (f" — {forward_reason}" if forward_reason and forward_reason != "--forward" else "")
    via += f"; proxy {joined[0]}" if joined else ""
    advice = [] if rows else no_request_advice(list(cmd), plan.client, {f: u.url for f, u in plan.upstreams.items()
                                                                          if f in plan.families and not u.implied},
                                               forward_used=bool(forward_reason), home=home_dir(env), env=env)
    summary = summarize(run_id, rows, _figures(db, run_id) if rows else None)
    _name_key_source(summary, plan)
    for line in render(summary, more, via=via, notes=mode_notes(plan, forward_reason, recorded=bool(rows)),
                       advice=advice):
        click.echo(line, err=True)
    sys.stdout.flush()
    sys.stderr.flush()
    if server is None or server.stopped:
        # Everything is written and closed: skip the interpreter's teardown of mitmproxy and the
        # tokenizer (a second and more of wall time on a busy machine, after the command is done).
        os._exit(code)
    sys.exit(code)


def _name_key_source(summary, plan: Plan) -> None:
    """An ``auth.rejected`` fix says where this client keeps its key (its adapter knows)."""
    if not plan.key_source:
        return
    title = registry.by_name(plan.client).title
    for f in summary.findings:
        if f.code == "auth.rejected":
            f.hint = (f"{f.hint} " if f.hint else "") + f"{title} takes its key from {plan.key_source}: fix it there."


def _start(plan: Plan, db: str, run_id: str, forward_reason: str | None, env, join: bool, save_bodies: bool,
           lang: str | None, any_db: bool = False, egress: dict | None = None):
    """(our ProxyServer, or an EarlyProxy whose proxy starts with the child, or None; the joined
    proxy's (URL, database) or None; how the child is redirected)."""
    if not forward_reason and join:
        found = find_running(plan, db, any_db=any_db)
        if found is not None:
            url, routes, proxy_db = found
            r = redirect(plan, f"{url}/_run/{run_id}", routes, env)
            return None, (url, proxy_db), r
    if not forward_reason and not plan.upstreams:  # nothing to redirect (e.g. `cline auth`): no proxy
        return None, None, Redirect(list(plan.argv), {}, "nothing redirected")
    opts = {"firsttoken_run_id": run_id}
    egress = egress or {}
    if not forward_reason:
        # the child starts now, on a port already listening; the proxy behind it starts beside it
        specs = plan.route_specs()
        try:
            routing.parse_upstreams(specs)
            early = EarlyProxy()
        except routing.RouteError as e:
            fail(str(e))
        except OSError as e:
            fail(f"firsttoken run could not listen on a free port of 127.0.0.1 ({e}): check that the loopback "
                 "interface is up, or start `firsttoken proxy` yourself and point the client at it")

        def make(sock):  # in the start thread: importing mitmproxy is the slow part
            from firsttoken.cli.proxy.server import ProxyServer
            from firsttoken.cli.run import summary  # noqa: F401 - (rich) loaded while the child runs, not after

            return ProxyServer(specs, db, save_bodies=save_bodies, lang=lang or "", extra_options=opts, sock=sock,
                               **egress)

        early.make = make
        r = redirect(plan, early.url, plan.routes(), env)
        r.how += _egress_note([(u.scheme, u.host, u.port) for u in routing.parse_upstreams(specs)], egress)
        return early, None, r
    from firsttoken.addon import forward as fwd
    from firsttoken.cli.proxy.server import ProxyServer, ProxyStartError

    try:
        server = ProxyServer([], db, port=0, forward_mode=True, save_bodies=save_bodies, lang=lang or "",
                             extra_options=opts, host_match=_plan_hosts(plan), **egress)
        server.start()
    except (routing.RouteError, ProxyStartError) as e:
        fail(str(e))
    confdir = server.options.get("confdir")
    ca = fwd.ca_cert_path(confdir)
    bundle = ca.parent / "firsttoken-ca-bundle.pem"
    try:
        fwd.combined_ca_bundle(bundle, confdir)
    except OSError as e:
        server.stop()
        fail(f"could not write the CA bundle {bundle} for forward mode: {e}")
    how = f"forward mode: HTTPS_PROXY and HTTP_PROXY={server.url} and mitmproxy's CA ({ca})"
    how += _egress_note([("https", "api.openai.com", 443), ("http", "api.openai.com", 80)], egress)
    return server, None, Redirect(list(plan.argv), forward_env(server.url, ca, bundle, env), how)


def _plan_hosts(plan: Plan) -> list[str]:
    """The hosts the child's base URLs name (host:port): forward mode records them too, not only the
    well-known LLM API hosts (a gateway or company endpoint the child was configured with)."""
    try:
        return sorted({f"{r.host}:{r.port}" for r in plan.routes().values() if ":" not in r.host})
    except PlanError:
        return []


def _egress_note(targets: list[tuple[str, str, int]], egress: dict) -> str:
    """How firsttoken's own upstream leg leaves for these (scheme, host, port): through the user's
    proxy, when one applies (the rule the proxy itself follows, addon/egress/rules.py)."""
    from firsttoken.addon.egress import rules

    ways = {}
    for scheme, host, port in targets:
        try:
            d = rules.decide(scheme, host, port, os.environ, explicit=egress.get("upstream_proxy"),
                             disabled=bool(egress.get("no_upstream_proxy")))
        except rules.EgressError as e:
            fail(str(e))
        if d.proxy is not None:
            ways[d.proxy.url] = d.reason
    return "".join(f"; upstream leg via {url} ({why})" for url, why in ways.items())


def _stop(server) -> None:
    if server is not None:
        server.flush()
        server.stop()


def find_running(plan: Plan, db: str, any_db: bool = False) -> tuple[str, dict[str, Route], str] | None:
    """(url, routes, database) of a running reverse proxy (the per-user registry) with a route to every
    upstream the client uses, writing ``db`` — or, with ``any_db`` (no --db given), any database,
    one writing ``db`` first."""
    from firsttoken.cli.proxy.state import read_states, state_routes

    want = {name: up for name, up in plan.upstreams.items() if not up.implied}
    for st in reversed(read_states(db)):  # those writing ``db`` come last: tried first
        proxy_db = str(st.get("db") or "")
        if st.get("forward") or not proxy_db or (not any_db and os.path.realpath(proxy_db) != os.path.realpath(db)):
            continue
        routes = state_routes(st) or []
        got = {name: next((x for x in routes if serves(x, up)), None) for name, up in want.items()}
        if routes and want and all(got.values()) and _listening(str(st.get("url") or "")):
            return str(st["url"]).rstrip("/"), got, proxy_db
    return None


def _listening(url: str) -> bool:
    u = urlsplit(url)
    try:
        socket.create_connection((u.hostname or "127.0.0.1", u.port or 80), timeout=0.5).close()
        return True
    except (OSError, ValueError):
        return False


def _rows(db: str, run_id: str, settle: float) -> list[dict]:
    """The run's records, oldest first. A joined proxy writes them on its own: wait (up to
    ``settle`` s) until none is in flight and their number holds still."""
    from firsttoken.addon.store import queries
    from firsttoken.addon.store.db import open_db

    deadline, last = time.monotonic() + settle, None
    while True:
        try:
            rows = queries.recent(open_db(db, write=False), queries.Filters(run_id=run_id), limit=None)
        except FileNotFoundError:
            rows = []
        state = (len(rows), sum(1 for r in rows if r.get("state") == "in_flight"))
        if time.monotonic() >= deadline or (state == last and state[1] == 0):
            return list(reversed(rows))
        last = state
        time.sleep(0.25)


def _figures(db: str, run_id: str) -> dict | None:
    """The run's figures from the stats engine (what `firsttoken stats --run ID` prints)."""
    from firsttoken.addon.store import queries
    from firsttoken.addon.store import stats_queries as sq
    from firsttoken.addon.store.db import open_db

    try:
        return sq.overall(open_db(db, write=False), queries.Filters(run_id=run_id))
    except FileNotFoundError:
        return None


#: the URL of a proxy of run's own in `--print-env`'s account (its port is only chosen when the run starts)
OWN_PROXY_SAMPLE = "http://127.0.0.1:65535"


def _print_env(plan: Plan, db: str, forward_reason: str | None, env, join: bool, any_db: bool = False) -> list[str]:
    from firsttoken.cli.run.summary import mode_notes

    if forward_reason:
        from firsttoken.addon import forward as fwd
        from firsttoken.cli.proxy.state import read_states

        fw = [s for s in read_states(db) if s.get("forward")]
        url = str(fw[-1]["url"]) if fw else "http://127.0.0.1:8080"
        ca = fwd.ca_cert_path(fw[-1].get("confdir") if fw else None)
        note = [f"forward mode ({forward_reason})"]
        if not fw:
            note.append("no forward proxy runs: start one with `firsttoken proxy --forward` (it creates the CA)")
        r = Redirect(list(plan.argv), forward_env(url, ca, ca.parent / "firsttoken-ca-bundle.pem", env), "")
        return export_lines(plan, r, note, mode_notes(plan, forward_reason))
    found = find_running(plan, db, any_db=any_db) if join else None
    if found is not None:  # exactly what the run sets: the joined proxy's run path, with a run id of its own
        url, routes, _ = found
        run_id = os.urandom(4).hex()
        r = redirect(plan, f"{url}/_run/{run_id}", routes, env)
        r.env["FIRSTTOKEN_RUN_ID"] = run_id
        note = [f"the firsttoken proxy at {url} serves these upstreams; `firsttoken run` sets exactly these lines, "
                f"and what they record is run {run_id}: `firsttoken logs --run {run_id}`"]
        return export_lines(plan, r, note, mode_notes(plan, None))
    # no proxy runs: the run starts its own on a port free when it starts, which no line printed now can name
    port = "<port>"
    own = redirect(plan, OWN_PROXY_SAMPLE, plan.routes(), env)
    said = settings_lines(own, OWN_PROXY_SAMPLE, "http://127.0.0.1:" + port)
    note = ["no firsttoken proxy runs for these upstreams, so `firsttoken run` starts its own on a free port of "
            f"127.0.0.1 and sets, for that run ({port}: the port, chosen when it starts):", *said,
            "  FIRSTTOKEN_RUN_ID=<the run's id, printed in its summary>",
            "to set these yourself instead, start a proxy first, then paste the lines below:",
            "  firsttoken proxy " + " ".join(f"--upstream {shlex.quote(s)}" for s in plan.route_specs())]
    return export_lines(plan, redirect(plan, DEFAULT_PROXY_URL, plan.routes(), env), note, mode_notes(plan, None))
