"""Embedding mitmproxy: the firsttoken proxy as an object (for the CLI, the demo and tests).

mitmproxy runs without its own terminal output (its warnings land in ``self.messages``; start-up
errors become a plain ``ProxyStartError``). Stopping drains the requests in flight; how, and what
a second signal does: docs/faults.md (Ctrl-C / SIGTERM).
"""

from __future__ import annotations

import asyncio
import collections
import logging
import os
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

from firsttoken.addon import addons, routing
from firsttoken.addon import forward as fwd
from firsttoken.addon.capture import Capture
from firsttoken.addon.metrics import MetricsAddon
from firsttoken.addon.otel import OtelAddon
from firsttoken.addon.safe_text import clause

#: seconds requests in flight get to finish when the proxy is stopped (``--drain-seconds``)
DRAIN_SECONDS = 5.0


class ProxyStartError(RuntimeError):
    pass


def _quiet_cancelled(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """The loop's exception handler: drop what stopping mid-request leaves behind, report the rest.

    When the loop ends, asyncio cancels the connections still open; Python 3.11's
    ``StreamReaderProtocol`` callback then calls ``task.exception()`` on the cancelled
    connection task, which raises ``CancelledError`` into the loop's exception handler (the
    two tracebacks Ctrl-C used to print). A cancelled task at shutdown is expected, never news."""
    if isinstance(context.get("exception"), asyncio.CancelledError):
        return
    logging.getLogger("firsttoken").error("firsttoken: unhandled error in the proxy loop: %s",
                                          context.get("message") or context.get("exception"))


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records: collections.deque[logging.LogRecord] = collections.deque(maxlen=200)

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


#: the mitmproxy addons a firsttoken proxy runs: the proxy itself, TLS, the address guard
#: (block_global), h2c refusal and Alt-Svc rewriting; in forward mode also mitm.it (the page
#: clients get mitmproxy's CA from). Not the interactive tools (playback, map/modify, save,
#: cut, export, sticky cookies...): no option of `firsttoken proxy` reaches them, and
#: mitmproxy asks every addon about every hook of every flow, which under load costs ~0.4 ms
#: of CPU per request (see `bench`).
MITMPROXY_ADDONS = ("Core", "Block", "DisableH2C", "Proxyserver", "NextLayer", "TlsConfig", "UpdateAltSvc")
FORWARD_MODE_ADDONS = ("Onboarding",)


#: listening sockets handed to mitmproxy, by (host, port): see :func:`hand_over`
_HANDED: dict[tuple[str, int], Any] = {}


def hand_over(sock: Any) -> None:
    """Make mitmproxy serve on ``sock``, a TCP socket already bound and listening (`run` opens
    the port before importing mitmproxy, so its child starts at once and its first connection
    waits in the listen queue rather than being refused). mitmproxy has no option for a socket it
    did not open: its server instances open theirs in ``listen(host, port)``; that method is
    wrapped, once, to take the handed socket for that address and call the original otherwise."""
    from mitmproxy.proxy import mode_servers

    cls = mode_servers.AsyncioServerInstance
    if not getattr(cls.listen, "firsttoken_hand_over", False):
        original = cls.listen

        async def listen(self, host, port):
            handed = _HANDED.pop((host, port), None)
            if handed is None or self.mode.transport_protocol not in ("tcp", "both"):
                return await original(self, host, port)
            # TCP only: the client speaks plain HTTP to this loopback port (an https reverse mode
            # would also open UDP for HTTP/3, which no client of `run` uses)
            return [await asyncio.start_server(self.handle_stream, sock=handed)]

        listen.firsttoken_hand_over = True
        cls.listen = listen
    host, port = sock.getsockname()[:2]
    _HANDED[(host, port)] = sock


def mitmproxy_addons(defaults: list[Any], forward_mode: bool = False) -> list[Any]:
    """The addons of mitmproxy's ``default_addons()`` that firsttoken uses (MITMPROXY_ADDONS)."""
    names = MITMPROXY_ADDONS + (FORWARD_MODE_ADDONS if forward_mode else ())
    return [a for a in defaults if type(a).__name__ in names]


class ProxyServer:
    def __init__(
        self,
        upstreams: list[str],
        db: str,
        host: str = "127.0.0.1",
        port: int = 8787,
        *,
        save_bodies: bool = False,
        insecure_upstream: bool = False,
        warn_prompt_tokens: int = 0,
        stall_ms: int = 1000,
        lang: str = "",
        extra_options: dict[str, Any] | None = None,
        addon: Any = None,
        forward_mode: bool = False,
        host_match: list[str] | tuple[str, ...] = (),
        metrics_port: int | None = None,
        metrics_host: str = "127.0.0.1",
        otlp_endpoint: str | None = None,
        drain_seconds: float = DRAIN_SECONDS,
        otlp_metrics_endpoint: str | None = None,
        sock: Any = None,
        upstream_proxy: str | None = None,
        no_upstream_proxy: bool = False,
        upstream_ca: str | None = None,
        workers: int = 1,
        relay: tuple[Any, int, int] | None = None,
    ) -> None:
        """``sock``: a loopback TCP socket already listening (on ``host``:``port``) to serve on
        instead of opening one (`run` opens it before this slow start-up: :func:`hand_over`).

        ``workers``: processes accepting on the port (cli/proxy/workers.py); this one also analyses and records.
        ``relay``: this process is such a worker: (its connection to the analysing process, its index, that
        process's pid)."""
        #: what a worker process is started with (``worker_spec``): the same proxy, minus the exporters
        self._spec = dict(upstreams=list(upstreams), db=str(db), host=host, save_bodies=save_bodies,
                          insecure_upstream=insecure_upstream, warn_prompt_tokens=warn_prompt_tokens,
                          stall_ms=stall_ms, lang=lang, extra_options=dict(extra_options or {}),
                          forward_mode=forward_mode, host_match=list(host_match), drain_seconds=drain_seconds,
                          upstream_proxy=upstream_proxy, no_upstream_proxy=no_upstream_proxy, upstream_ca=upstream_ca)
        self.workers = max(1, int(workers))
        if self.workers > 1 and addon is not None:
            raise ValueError("workers > 1 runs firsttoken's own addons")
        self.routes = routing.parse_upstreams(upstreams)  # raises RouteError with a clear message
        if forward_mode and self.routes:
            raise routing.RouteError("--forward records whichever LLM host the client asks for: drop --upstream "
                                     "(or drop --forward to run in front of that upstream)")
        if not forward_mode and not self.routes:
            raise routing.RouteError("no upstream given: pass --upstream https://your-llm-endpoint/…")
        self.forward_mode = forward_mode
        self.upstreams = list(upstreams)
        self.db = str(db)
        self.sock = sock
        if sock is not None:
            host, port = sock.getsockname()[:2]
        self.host = host
        self.port = port
        self.options: dict[str, Any] = dict(
            listen_host=host,
            listen_port=port,
            mode=([f"reverse:{self.routes[0].scheme}://{self.routes[0].host}:{self.routes[0].port}"]
                  if self.routes else ["regular"]),
            connection_strategy="lazy",
            ssl_insecure=insecure_upstream,
            firsttoken_db=self.db,
            firsttoken_upstream=self.upstreams,
            firsttoken_save_bodies=save_bodies,
            firsttoken_warn_prompt_tokens=warn_prompt_tokens,
            firsttoken_stall_ms=stall_ms,
            firsttoken_lang=lang,
        )
        if forward_mode:
            self.options.update(fwd.mitmproxy_options(host_match))  # HostMatchError is a RouteError
        if metrics_port is not None:
            self.options.update(firsttoken_metrics_port=metrics_port, firsttoken_metrics_host=metrics_host)
        if otlp_endpoint:
            self.options.update(firsttoken_otlp_endpoint=otlp_endpoint)
        if otlp_metrics_endpoint:
            self.options.update(firsttoken_otlp_metrics_endpoint=otlp_metrics_endpoint)
        # the way out (addon/egress): set only when given, so that mitmproxy's defaults stay
        if upstream_proxy:
            self.options.update(firsttoken_upstream_proxy=upstream_proxy)
        if no_upstream_proxy:
            self.options.update(firsttoken_no_upstream_proxy=True)
        if upstream_ca:
            self.options.update(firsttoken_upstream_ca=upstream_ca)
        if addon is not None:  # another addon instead of firsttoken's (benchmarks: bare mitmproxy)
            self.addons: list[Any] = [addon]
            self.options = {k: v for k, v in self.options.items() if not k.startswith("firsttoken_")}
        elif relay is not None:  # a worker: it forwards and stamps; the analysing process exports
            self.addons = [a for a in addons() if not isinstance(a, (MetricsAddon, OtelAddon))]
        else:
            self.addons = addons()
        self.capture = next((a for a in self.addons if isinstance(a, Capture)), addon)
        self.relay = relay
        #: the worker processes (``workers`` > 1), once started, by index - 1
        self.worker_procs: list[Any] = []
        self.stopped_workers = False
        self._spawned: dict[int, float] = {}  # worker index -> when it was last started (time.monotonic)
        if relay is not None:
            self.capture.relay_conn, self.capture.worker_index, self.capture.owner_pid = relay
            self.capture.relay_on_stop = self.drain
        elif self.workers > 1:
            from firsttoken.addon.workers import Hub

            self.capture.worker_index = 0
            self.capture.hub = Hub(self.capture)
        self.metrics = next((a for a in self.addons if isinstance(a, MetricsAddon)), None)
        self.otel = next((a for a in self.addons if isinstance(a, OtelAddon)), None)
        #: the live feed `firsttoken live` reads (cli/proxy/feed.py), when `firsttoken proxy` serves one
        self.live_feed: Any = None
        self.options.update(extra_options or {})
        self.master = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.bound_port: int | None = None
        self._log = _Collect()
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._start_error: BaseException | None = None
        self.on_listen: list[Callable[[ProxyServer], None]] = []  # called once listening
        if self.workers > 1:
            self.on_listen.append(self._spawn_workers)
        #: called just before the port opens (mitmproxy and the addons are set up): startup work
        #: done here keeps no client waiting
        self.before_listen: list[Callable[[ProxyServer], None]] = []
        self.drain_seconds = max(0.0, float(drain_seconds))
        #: called on the loop when stopping begins, with (requests in flight, seconds they get)
        self.on_drain: list[Callable[[int, float], None]] = []
        self.draining = False
        self._drain_task: asyncio.Task | None = None

    def egress(self) -> list[tuple[str, Any]]:
        """(what, egress Decision) for each upstream (forward mode: for https and http hosts): which
        way firsttoken's own connections leave, for the banner."""
        from firsttoken.addon.egress.addon import Egress

        eg = getattr(self.capture, "egress", None)
        if not isinstance(eg, Egress):
            return []
        if self.routes:
            return [(r.url, eg.decide(r.scheme, r.host, r.port)) for r in self.routes]
        return [(f"{s}:// hosts", eg.decide(s, "api.openai.com", 443 if s == "https" else 80)) for s in ("https", "http")]

    def egress_shown(self, d: Any) -> bool:
        """Whether the banner names this way out: a proxy, or direct while proxy settings exist."""
        from firsttoken.addon.egress import PROXY_VARS

        eg = getattr(self.capture, "egress", None)
        return (not d.direct or bool(eg and (eg.explicit or eg.disabled))
                or any((os.environ.get(v) or "").strip() for v in PROXY_VARS))

    @property
    def url(self) -> str:
        host = "127.0.0.1" if self.host in ("0.0.0.0", "", "::") else self.host
        return f"http://{host}:{self.bound_port}"

    # -- running -------------------------------------------------------------------
    async def serve(self, on_ready: Callable[[ProxyServer], None] | None = None, handle_signals: bool = False) -> None:
        """Run until shutdown() (or a signal, with handle_signals)."""
        from mitmproxy import addons as mitm_addons
        from mitmproxy import options as mitm_options
        from mitmproxy.master import Master

        self.loop = asyncio.get_running_loop()
        if self.workers > 1 and self.sock is None:  # one socket for every process: opened here, inherited by them
            from firsttoken.cli.proxy.workers import listening_socket

            self._check_port()
            self.sock = listening_socket(self.host or "127.0.0.1", self.port)
            # mitmproxy asks for the socket by the address it is bound to (``localhost`` is 127.0.0.1 there)
            self.host, self.port = self.sock.getsockname()[:2]
            self.options.update(listen_host=self.host, listen_port=self.port)
        # mitmproxy installs its own handler while it runs and puts this one back after; the
        # connections it leaves are cancelled after that, when asyncio.run() ends.
        self.loop.set_exception_handler(_quiet_cancelled)
        if self.sock is None:
            self._check_port()
        if isinstance(self.capture, Capture) and self.relay is None:
            self._check_db()
        for name in ("mitmproxy", "firsttoken", "opentelemetry"):
            logging.getLogger(name).addHandler(self._log)
            logging.getLogger(name).propagate = False
        opts = mitm_options.Options()
        master = Master(opts, event_loop=self.loop)
        master.addons.add(*mitmproxy_addons(mitm_addons.default_addons(), self.forward_mode))
        master.addons.add(*self.addons)
        try:
            opts.update(**self.options)
        except Exception as e:
            raise ProxyStartError(f"firsttoken could not configure the proxy: {e}") from None
        self.master = master
        if self.sock is not None:
            hand_over(self.sock)
        try:
            await self._run(master, on_ready, handle_signals)
        finally:
            if self.worker_procs:
                from firsttoken.cli.proxy.workers import reap

                reap(self.worker_procs)
            for name in ("mitmproxy", "firsttoken", "opentelemetry"):
                logging.getLogger(name).removeHandler(self._log)

    async def _run(self, master, on_ready, handle_signals: bool) -> None:
        for fn in self.before_listen:
            fn(self)
        task = asyncio.create_task(master.run())
        ps = master.addons.get("proxyserver")
        for _ in range(1000):
            if ps.listen_addrs() or task.done():
                break
            await asyncio.sleep(0.01)
        addrs = ps.listen_addrs()
        if not addrs:
            errors = [r.getMessage() for r in self._log.records if r.levelno >= logging.ERROR]
            master.shutdown()
            try:
                await asyncio.wait_for(task, 5)
            except Exception:
                pass
            why = errors[-1] if errors else "unknown reason"
            raise ProxyStartError(
                f"firsttoken could not listen on {self.host}:{self.port}: {clause(why)}. "
                "Is another proxy already running there? Pick another port with --port."
            )
        self.bound_port = addrs[0][1]
        for fn in self.on_listen:
            fn(self)
        if handle_signals:
            for sig in (signal.SIGINT, signal.SIGTERM):
                try:
                    self.loop.add_signal_handler(sig, self._on_signal)
                except (NotImplementedError, RuntimeError):
                    pass
        if on_ready:
            on_ready(self)
        await task

    # -- worker processes (``workers`` > 1) ------------------------------------------------
    def _spawn_workers(self, _server: ProxyServer | None = None) -> None:
        from firsttoken.cli.proxy.workers import spawn

        self._spawned = {i: time.monotonic() for i in range(1, self.workers)}
        self.capture.hub.on_worker_end.append(self._worker_ended)
        self.worker_procs = spawn(self)

    def _worker_ended(self, index: int, _left: int) -> None:
        """A hub thread: worker ``index``'s link ended. Unless the proxy stops, start it again on the loop."""
        if not self.draining and self.loop is not None:
            try:
                self.loop.call_soon_threadsafe(self._respawn, index)
            except RuntimeError:  # the loop has ended
                pass

    def _respawn(self, index: int) -> None:
        from firsttoken.cli.proxy.workers import RESPAWN_MIN_S, spawn_one

        if self.draining or self.master is None or self.stopped_workers:
            return
        log = logging.getLogger("firsttoken")
        old = self.worker_procs[index - 1]
        if old.poll() is None:
            old.kill()  # its link broke but it runs: it can no longer hand anything over, so it must not accept
        old.wait()
        if time.monotonic() - self._spawned.get(index, 0.0) < RESPAWN_MIN_S:
            log.error("firsttoken: worker %d ended within %.0f s of its start; it is not started again (the other "
                      "processes serve the port; restart the proxy to get it back)", index, RESPAWN_MIN_S)
            return
        self._spawned[index] = time.monotonic()
        try:
            self.worker_procs[index - 1] = spawn_one(self, index)
        except OSError as e:
            log.error("firsttoken: worker %d could not be started again: %s", index, e)
            return
        log.warning("firsttoken: worker %d ended; a new one was started in its place", index)

    def worker_spec(self) -> dict[str, Any]:
        """What a worker process builds its ProxyServer from (sent over its link, never on a command line)."""
        return {**self._spec, "host": self.host, "port": self.port}

    def workers_ready(self, timeout: float = 60.0) -> bool:
        """Wait until every worker process listens (the analysing process serves from the start)."""
        hub = getattr(self.capture, "hub", None)
        return hub.ready(timeout) if hub is not None else True

    def _workers_alive(self) -> bool:
        return any(p.poll() is None for p in self.worker_procs)

    def _check_port(self) -> None:
        """Fail at once, in firsttoken's words, when the port is taken (mitmproxy would log its
        own advice about its --mode flag and keep the caller waiting)."""
        from firsttoken.cli.options import port_problem

        why = port_problem(self.port) if isinstance(self.port, int) else None
        if why:  # socket.bind would raise OverflowError
            raise ProxyStartError(f"--port {why}.")
        if not self.port:
            return
        import errno
        import socket

        family = socket.AF_INET6 if ":" in (self.host or "") else socket.AF_INET
        with socket.socket(family, socket.SOCK_STREAM) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as asyncio's server does
            try:
                s.bind((self.host or "127.0.0.1", self.port))
            except OSError as e:
                if e.errno == errno.EADDRINUSE:
                    raise ProxyStartError(
                        f"port {self.port} on {self.host} is already in use{self._who_listens()}. Stop that "
                        f"process, or start firsttoken on another port with --port (--port 0 picks a free one)."
                    ) from None
                if e.errno == errno.EACCES:
                    raise ProxyStartError(
                        f"firsttoken may not listen on port {self.port} (ports below 1024 need root): "
                        "use a port above 1024 with --port.") from None
                raise ProxyStartError(f"firsttoken cannot listen on {self.host}:{self.port}: {clause(e.strerror or e)}. "
                                      "Check --host and --port.") from None

    def _who_listens(self) -> str:
        """', by a firsttoken proxy (pid N, database D)' when the registry of running proxies says so."""
        try:
            from firsttoken.cli.proxy.state import read_states

            for st in read_states(self.db):
                if st.get("port") == self.port:
                    return f" by a firsttoken proxy (pid {st.get('pid')}, database {st.get('db')})"
        except Exception:
            pass
        return ""

    def _check_db(self) -> None:
        """Fail before listening when the database cannot be written (and migrate it now)."""
        from firsttoken.addon.store.db import StoreError, open_db

        try:
            open_db(self.db).conn.close()
        except StoreError as e:  # a file that is not firsttoken's: its message says what to do
            raise ProxyStartError(str(e)) from None
        except Exception as e:
            raise ProxyStartError(
                f"firsttoken cannot write its database {self.db}: {clause(e)}. "
                "Pass a writable file with --db (or set FIRSTTOKEN_DB)."
            ) from None

    def shutdown(self) -> None:
        """Stop now: requests in flight are cut (thread-safe)."""
        self._cut_workers()
        if self.master is not None:
            self.master.shutdown()

    def _cut_workers(self) -> None:
        self.stopped_workers = True  # none is started again from now on
        hub = getattr(self.capture, "hub", None)
        if hub is not None:
            hub.stop(0.0)  # they record what they cut, then end; Capture.done waits for their last hand-overs

    def drain(self, seconds: float | None = None) -> None:
        """Stop gracefully (thread-safe): refuse new connections, give requests in flight up to
        ``seconds`` (default ``drain_seconds``) to finish, then cut the rest. A second call cuts at once."""
        if self.loop is not None:
            self.loop.call_soon_threadsafe(self._begin_drain, seconds)

    def _on_signal(self) -> None:
        self._begin_drain(None)

    def _begin_drain(self, seconds: float | None) -> None:
        if self.master is None:
            return
        if self.draining:  # the second Ctrl-C: cut what is still running, the workers' too
            self._cut_workers()
            self.master.shutdown()
            return
        self.draining = True
        seconds = self.drain_seconds if seconds is None else max(0.0, float(seconds))
        self._drain_task = asyncio.ensure_future(self._drain(seconds))

    def in_flight(self) -> int:
        """Requests the proxy is still forwarding (its workers' too, as far as they have handed them over)."""
        count = getattr(self.capture, "in_flight", None)
        return count() if count is not None else len(getattr(self.capture, "flights", None) or ())

    async def _drain(self, seconds: float) -> None:
        master = self.master
        try:
            if isinstance(self.capture, Capture):
                self.capture.draining = True  # responses say `connection: close` from now on
            # Close the listening sockets only: asyncio.Server.close() leaves accepted
            # connections running, so requests in flight go on while new clients are refused.
            ps = master.addons.get("proxyserver")
            await ps.servers.update([])
            hub = getattr(self.capture, "hub", None)
            if hub is not None:
                hub.stop(seconds)  # the workers close the port too, and drain as this process does
            n = self.in_flight()
            for fn in list(self.on_drain):
                try:
                    fn(n, seconds)
                except Exception:  # noqa: BLE001 - a message is never a reason not to stop
                    pass
            deadline = self.loop.time() + seconds
            while (self.in_flight() or self._workers_alive()) and self.loop.time() < deadline:
                await asyncio.sleep(0.02)
            if self._workers_alive():
                self._cut_workers()
                cut = self.loop.time() + 5.0  # they record what they cut and end
                while self._workers_alive() and self.loop.time() < cut:
                    await asyncio.sleep(0.02)
        finally:
            master.shutdown()  # Capture.done() cuts (and records) whatever is still running

    @property
    def metrics_url(self) -> str | None:
        return self.metrics.url if self.metrics is not None else None

    @property
    def otlp_endpoint(self) -> str | None:
        """Where OTLP metrics go (None: off)."""
        return self.otel.endpoint if self.otel is not None else None

    @property
    def otlp_traces_endpoint(self) -> str | None:
        """Where OTLP trace spans go (None: off)."""
        return self.otel.traces_endpoint if self.otel is not None else None

    @property
    def messages(self) -> list[str]:
        return [r.getMessage() for r in self._log.records]

    # -- in a background thread (tests, demo) -------------------------------------------
    def start(self, timeout: float = 60.0) -> ProxyServer:
        """Start in a thread; return once it listens. ``timeout``: a busy laptop took over 15 s to
        start mitmproxy (the wait ends as soon as it listens)."""
        def run() -> None:
            try:
                asyncio.run(self.serve(on_ready=lambda _: self._ready.set()))
            except BaseException as e:  # noqa: BLE001 - reported to the starting thread
                self._start_error = e
                self._ready.set()

        self._thread = threading.Thread(target=run, name="firsttoken-proxy", daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout):
            raise ProxyStartError("firsttoken proxy did not start within %.0f s" % timeout)
        if self._start_error is not None:
            raise self._start_error
        return self

    def stop(self, timeout: float = 30.0) -> None:
        self._cut_workers()
        if self.loop is not None and self.master is not None and not self.stopped:
            try:
                self.loop.call_soon_threadsafe(self.master.shutdown)
            except RuntimeError:  # it ended meanwhile (a drain)
                pass
        if self._thread is not None:
            self._thread.join(timeout)

    @property
    def stopped(self) -> bool:
        """Whether the proxy's thread has ended: every record written, the database closed."""
        return self._thread is None or not self._thread.is_alive()

    def flush(self, timeout: float = 10.0, settle: float = 2.0) -> None:
        """Wait until every request so far is in the database.

        A client can finish reading a response a moment before the proxy's own response hook
        has run, so first wait for requests still in flight: ``settle`` seconds of the proxy's
        own event loop (a loop starved on a busy machine runs its hooks late, and its seconds
        pass slower), at most ``timeout`` seconds in all."""
        flights = getattr(self.capture, "flights", None)
        watch = getattr(self.capture, "loadwatch", None)
        start = time.monotonic()
        ticks0 = watch.ticks if watch is not None else 0
        while flights and time.monotonic() - start < timeout:
            if watch is not None and watch.ticks:
                if (watch.ticks - ticks0) * watch.interval >= settle:
                    break
            elif time.monotonic() - start >= settle:  # no loop clock (the watch never ran): wall time
                break
            time.sleep(0.005)
        hub = getattr(self.capture, "hub", None)
        if hub is not None:  # what the workers forwarded so far, handed over
            hub.sync(timeout, settle)
        if getattr(self.capture, "analyzer", None) is not None:
            self.capture.analyzer.flush(timeout)

    def __enter__(self) -> ProxyServer:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()
