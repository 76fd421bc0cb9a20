"""Running the live view: a refresh thread (≤ 4 Hz) around ``rich.live.Live``, off the proxy's event loop.

Each frame builds a ``LiveSnapshot``, renders it for the terminal's size and prints the requests
that finished (``push``: a queue put) into the scrollback. ``serve_with_live`` runs ``firsttoken
proxy`` with the view; ``live`` is ``firsttoken live``, attached to another proxy (its feed, or its DB).
"""

from __future__ import annotations

import asyncio
import logging
import os
import queue
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import click
from rich.console import Console, Group
from rich.control import Control
from rich.live import Live
from rich.live_render import LiveRender
from rich.segment import ControlType, Segment
from rich.text import Text

from firsttoken.addon.diagnose.lang import LANGS, resolve
from firsttoken.cli.live import render as view
from firsttoken.cli.live.db import session_start
from firsttoken.cli.live.state import DEFAULT_WINDOW, LiveSnapshot, Tally, from_capture, session_models, slim
from firsttoken.cli.options import PORT

log = logging.getLogger("firsttoken")

MAX_HZ = 4.0


class DiffRender(LiveRender):
    """rich's live area, redrawn line by line: a frame rewrites only the lines that changed
    (an elapsed timer, a counter), not the whole area. Only on the view's own thread and only
    while ``diff`` is set; a print into the scrollback (or from any other thread) erases and
    redraws the whole area as rich always does."""

    def __init__(self, renderable: Any, **kw: Any) -> None:
        super().__init__(renderable, **kw)
        self.diff = False
        self.owner: int | None = None
        self._prev: list[list[Segment]] | None = None
        self._prev_width: int | None = None

    def _diffing(self) -> bool:
        return self.diff and self.owner == threading.get_ident() and self._prev is not None

    def position_cursor(self) -> Control:
        if self._diffing() and self._shape is not None:
            _, height = self._shape
            return Control(ControlType.CARRIAGE_RETURN, *([(ControlType.CURSOR_UP, height - 1)] if height > 1 else []))
        self._prev = None  # the area is erased: the next drawing is complete
        return super().position_cursor()

    def __rich_console__(self, console: Any, options: Any):  # noqa: ANN201 - rich's protocol
        diff = self._diffing() and self._prev_width == options.max_width
        lines = console.render_lines(self.renderable, options, style=console.get_style(self.style), pad=False)
        lines = lines[: options.size.height]  # the view never draws more than the terminal's height
        self._shape = Segment.get_shape(lines)
        prev = self._prev or []
        erase = Control((ControlType.ERASE_IN_LINE, 2)).segment
        for i, line in enumerate(lines):
            if i:
                yield Segment.line()
            if diff and i < len(prev) and prev[i] == line:
                continue  # unchanged: the cursor only moves past it
            yield erase
            yield from line
        if diff and len(prev) > len(lines):  # a shorter frame: blank what is left of the old one
            extra = len(prev) - len(lines)
            for _ in range(extra):
                yield Segment.line()
                yield erase
            yield Control((ControlType.CURSOR_UP, extra)).segment
        self._prev, self._prev_width = lines, options.max_width


class LiveRunner:
    """Owns the terminal while it runs: one thread renders, prints and (optionally) polls.

    ``build`` returns the snapshot to draw; ``poll`` (optional, called every
    ``poll_interval`` s on the same thread) returns rows that finished since its last call.
    """

    def __init__(
        self,
        build: Callable[[], LiveSnapshot],
        *,
        console: Console | None = None,
        lang: str = "en",
        hz: float = MAX_HZ,
        poll: Callable[[], list[dict[str, Any]]] | None = None,
        poll_interval: float = 0.5,
        transient: bool = True,
    ) -> None:
        self.build = build
        self.console = console or Console(highlight=False)
        self.lang = lang
        self.period = 1.0 / min(max(hz, 0.1), MAX_HZ)
        self.poll = poll
        self.poll_interval = poll_interval
        self.transient = transient
        self._q: queue.SimpleQueue = queue.SimpleQueue()
        self._stop = threading.Event()
        self._started = threading.Event()
        self._thread: threading.Thread | None = None
        self.busy_s = 0.0  # time spent building + rendering frames
        self._last_key: Any = None
        self._render: DiffRender | None = None
        self.error: str | None = None
        self.frames = 0  # frames drawn
        self.skipped = 0  # frames not drawn: the picture had not changed

    # -- from other threads ------------------------------------------------------------------
    def push(self, record: Any) -> None:
        """A request finished (any thread): it goes into the scrollback on the next frame."""
        self._q.put(record)

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="firsttoken-live", daemon=True)
            self._thread.start()
            self._started.wait(5)

    def stop(self, timeout: float = 10.0) -> None:
        """Print what is still queued, draw a last frame, give the terminal back."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    # -- the thread -------------------------------------------------------------------------------
    def _run(self) -> None:
        live = Live(console=self.console, auto_refresh=False, transient=self.transient,
                    redirect_stdout=True, redirect_stderr=True, vertical_overflow="crop")
        render = None
        if isinstance(getattr(live, "_live_render", None), LiveRender):  # rich's one live area, diffed
            render = live._live_render = DiffRender(live._live_render.renderable, vertical_overflow="crop")
            render.owner = threading.get_ident()
        self._render = render
        try:
            live.start()
        finally:
            self._started.set()
        next_poll = 0.0
        try:
            while True:
                t0 = time.perf_counter()
                if self.poll is not None and t0 >= next_poll:
                    for row in self._safe(self.poll) or []:
                        self._q.put(row)
                    next_poll = t0 + self.poll_interval
                self._frame(live)
                self.busy_s += time.perf_counter() - t0
                if self._stop.wait(max(0.05, self.period - (time.perf_counter() - t0))):
                    break
            if self.poll is not None:
                for row in self._safe(self.poll) or []:
                    self._q.put(row)
            self._frame(live)
        finally:
            live.stop()

    def _safe(self, fn: Callable[[], Any]) -> Any:
        try:
            return fn()
        except Exception as e:  # a bad frame must not take the proxy down
            if self.error is None:
                log.exception("firsttoken: live view failed")
            self.error = f"{type(e).__name__}: {e}"
            return None

    def _frame(self, live: Live) -> None:
        """Print what finished into the scrollback and redraw the live area — only when the
        drawing changed, and as one synchronized update (``SYNC_BEGIN`` … ``SYNC_END``: the
        terminal shows the whole frame at once instead of erasing and rewriting line by line;
        terminals without the mode ignore it)."""
        width, height = self.console.size
        done = []
        while True:
            try:
                done.append(self._q.get_nowait())
            except queue.Empty:
                break
        entries = []
        for i, r in enumerate(done):
            entries.append(self._safe(lambda r=r: view.scroll_entry(slim(r), width, self.lang)))
            if i % 8 == 7:
                time.sleep(0)  # hand the GIL to the proxy's loop if it is waiting
        body: Any = None
        snap = self._safe(self.build)
        if snap is not None:
            time.sleep(0)
            body = self._safe(lambda: view.render(snap, width, self.lang, height=max(5, height - 1)))
            time.sleep(0)
        if body is None:
            body = Text(f"firsttoken: live view error ({self.error}); traffic is unaffected", style="red")
        key = (width, height, drawing_key(body))
        if not done and key == self._last_key:
            self.skipped += 1
            return  # the same picture: nothing to write
        self._last_key = key
        self.frames += 1
        self._write(SYNC_BEGIN)
        try:
            if done:
                live.console.print(Group(*[e for e in entries if e is not None]))
            if self._render is not None:
                self._render.diff = True
            live.update(body, refresh=True)
        finally:
            if self._render is not None:
                self._render.diff = False
            self._write(SYNC_END)

    def _write(self, code: str) -> None:
        if self.console.is_terminal and not self.console.is_dumb_terminal:
            f = self.console.file
            f.write(code)
            f.flush()


#: synchronized output (DEC mode 2026): the terminal holds the screen until the frame is complete
SYNC_BEGIN, SYNC_END = "\x1b[?2026h", "\x1b[?2026l"


def drawing_key(body: Any) -> Any:
    """What a frame looks like (text and styles of its lines): equal keys draw the same screen."""
    if isinstance(body, Group):
        return tuple(drawing_key(r) for r in body.renderables)
    if isinstance(body, Text):
        return (body.plain, str(body.style), tuple(body.spans))
    return id(body)


def stop_line(requests: int, errors: int, db: str | None, lang: str, attached: bool = False,
              proxy_running: bool = True, other: int = 0) -> Text:
    zh = lang == "zh"
    if attached and not proxy_running:
        head = "firsttoken live 已退出（该数据库没有正在运行的代理）" if zh else \
            "firsttoken live detached (no proxy is running on this database)"
    elif attached:
        head = "firsttoken live 已退出（代理仍在运行）" if zh else "firsttoken live detached (the proxy keeps running)"
    else:
        head = "firsttoken 已停止" if zh else "firsttoken stopped"
    t = Text(head, style="bold")
    t.append(f" · {view.counted(requests, 'requests', lang)} · {view.counted(errors, 'errors', lang)}")
    if other:  # probes, model lists: recorded, and left out of the figures as `stats` leaves them out
        t.append(f"（另有 {other:,} 个非模型调用的请求，如探测、模型列表）" if zh else
                 f" (and {other:,} that {'is' if other == 1 else 'are'} no model call: probes, model lists)")
    if db:
        t.append(f" · {'所有记录在' if zh else 'every record is in'} {db}")
    return t


# -- firsttoken proxy -------------------------------------------------------------------------------
def serve_with_live(server: Any, console: Console, lang: str, *, window: int = DEFAULT_WINDOW) -> Tally:
    """Run ``server`` (a ProxyServer) until Ctrl-C/SIGTERM with the live view; print the summary.

    Raises what ``server.serve`` raises (ProxyStartError) after giving the terminal back.
    """
    tally = Tally()
    since = session_start()
    cache: dict[str, Any] = {}
    runner = LiveRunner(
        lambda: from_capture(server.capture, listen_url=server.url, tally=tally, window=window, cache=cache),
        console=console, lang=lang,
    )

    def on_record(rec: Any) -> None:  # analyzer thread: count and queue, nothing more
        tally.add(rec)
        runner.push(rec)

    notices: list[str] = []  # an OTLP endpoint refused a signal: said after the view gives the terminal back
    if getattr(server, "otel", None) is not None:
        server.otel.notices.append(notices.append)
    server.capture.listeners.append(on_record)
    try:
        # Ctrl-C / SIGTERM → master.shutdown on the loop: in-flight requests are closed as
        # records, the analyzer and writer drain, then serve() returns.
        asyncio.run(server.serve(on_ready=lambda s: runner.start(), handle_signals=True))
    except KeyboardInterrupt:  # before the signal handlers were installed
        pass
    finally:
        runner.stop()
        if on_record in server.capture.listeners:
            server.capture.listeners.remove(on_record)
    print_summary(console, tally, server.db, lang, since=since)
    for msg in notices:
        console.print(f"firsttoken: {msg}", markup=False, soft_wrap=True, style="yellow")
    return tally


def print_summary(console: Console, tally: Tally | None, db: str | None, lang: str, attached: bool = False,
                  proxy_running: bool = True, since: str | None = None) -> None:
    """The stop line and the per-model table, both from the store (``session_models``: the figures
    `firsttoken stats --since` gives for the session); the live counters only if it cannot be read."""
    from firsttoken.cli import output

    session = session_models(db, since) if db and since else None
    if session is not None:
        line = stop_line(session.requests, session.errors, db, lang, attached, proxy_running, session.other)
    else:
        line = stop_line(tally.requests if tally else 0, tally.errors if tally else 0, db, lang, attached, proxy_running)
        if db:
            line.append("（数据库读不出来，无法汇总；firsttoken doctor 会说明原因）" if lang == "zh" else
                        " (the database could not be read for a summary: firsttoken doctor says why)", style="yellow")
    # wrapped by the one rule (a Chinese line keeps its numbers with their words)
    for ln in output.wrap(line, console.width):
        console.print(ln)
    if session is not None:
        console.print(view.summary(session.models, console.width, lang))


# -- firsttoken live ----------------------------------------------------------------------------------
def attach(db_path: str, lang: str, *, window: int = DEFAULT_WINDOW, interval: float | None = None,
           console: Console | None = None) -> None:
    """Follow a proxy running elsewhere until Ctrl-C: its live feed while it serves one, else its
    database (read-only); ``feed.Follow`` picks and switches."""
    from firsttoken.cli import output
    from firsttoken.cli.live.feed import Follow

    console = console or Console(highlight=False)
    since = session_start()
    src = Follow(db_path, window=window, interval=interval)

    def on_term(*_: Any) -> None:
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGTERM, on_term) if threading.current_thread() is threading.main_thread() else None
    try:
        if sys.stdout.isatty() and console.is_terminal:
            runner = LiveRunner(src.snapshot, console=console, lang=lang, poll=src.poll, poll_interval=src.poll_interval)
            runner.start()
            try:
                while runner.alive:
                    time.sleep(0.2)
            except KeyboardInterrupt:
                pass
            finally:
                runner.stop()
        else:  # piped: one plain line per finished request, like `tail -f`
            try:
                while True:
                    for row in src.poll():
                        console.print(output.line(row), soft_wrap=True, highlight=False, markup=False)
                    time.sleep(src.poll_interval)
            except KeyboardInterrupt:
                pass
    finally:
        if old is not None:
            signal.signal(signal.SIGTERM, old)
        src.close()
    from firsttoken.cli.proxy.state import proxy_for_db

    print_summary(console, src.tally, db_path, lang, attached=True, proxy_running=proxy_for_db(db_path) is not None,
                  since=since)


def pick_db(db_path: str | None, port: int | None) -> str:
    """The database to follow: --db; else the running proxy on --port; else the only running proxy's;
    else the default one (FIRSTTOKEN_DB or the per-user data directory)."""
    from firsttoken.cli.options import fail, reading_db, resolve_db
    from firsttoken.cli.proxy.state import read_states

    if db_path and port is None:
        return resolve_db(db_path)
    running = [st for st in read_states() if st.get("db")]
    if port is not None:
        hit = [st for st in running if st.get("port") == port]
        if not hit:
            ports = ", ".join(str(st.get("port")) for st in running) or "none"
            fail(f"no firsttoken proxy is running on port {port} (running: {ports}). Start one with "
                 f"`firsttoken proxy --port {port}`, or pick one of the running ports.")
        if db_path and os.path.realpath(resolve_db(db_path)) != os.path.realpath(str(hit[-1]["db"])):
            fail(f"the proxy on port {port} writes {hit[-1]['db']}, not {db_path}: drop --db or --port")
        return str(hit[-1]["db"])
    dbs = {str(st["db"]) for st in running}
    return dbs.pop() if len(dbs) == 1 else reading_db(None)


@click.command("live")
@click.option("--db", "db_path", type=click.Path(dir_okay=False), default=None,
              help="The database the proxy writes (default: per-user data dir; $FIRSTTOKEN_DB overrides).")
@click.option("--lang", type=click.Choice(LANGS), default=None,
              help="Language of the labels (default: $FIRSTTOKEN_LANG, else the locale, else en).")
@click.option("--window", type=int, default=DEFAULT_WINDOW, show_default=True,
              help="Finished requests per model the rolling P50/P95 cover.")
@click.option("--interval", type=float, default=None,
              help="Seconds between reads (default: 0.25 from a running proxy's live feed, 0.5 from a database).")
@click.option("--port", "-p", type=PORT, default=None,
              help="Follow the running proxy listening on this port (whatever its database).")
def live(db_path, lang, window, interval, port):
    """Watch a proxy running elsewhere (another terminal, a service), read-only.

    Which one: --db, else the running proxy on --port, else the only running proxy, else the
    default database. A running proxy's view comes from the proxy itself (its live feed on
    127.0.0.1: phases and token counts as it knows them); with no proxy running, from the
    database. The header says which.

    Shows requests in flight with their phase, elapsed time and tokens so far, requests as they
    finish, and per-model P50/P95 of TTFB, TTFT and the prefill gap. Ctrl-C prints a per-model summary.
    """
    from firsttoken.cli.options import fail, missing_db

    path = pick_db(db_path, port)
    try:
        attach(path, resolve(lang), window=max(1, window),
               interval=None if interval is None else max(0.1, interval))
    except FileNotFoundError:
        fail(missing_db(path))
