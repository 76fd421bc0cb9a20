"""`firsttoken bench --concurrency … --workers N`: `firsttoken proxy --workers N` (N processes on one port, one of
them analysing and recording for all: cli/proxy/workers.py) alternated with one firsttoken process, on the same
upstream; the figures: docs/performance.md ("Worker processes").
"""

from __future__ import annotations

import contextlib
import subprocess
import threading
import time
from collections.abc import Iterator

import click

from firsttoken.cli.bench.timing import stop
from firsttoken.cli.proxy.workers import worker_pids

#: the line `firsttoken proxy` prints once every worker process accepts (cli/proxy/command.py)
READY = "processes accept connections"
START_S = 90.0


class Group:
    """A running `firsttoken proxy --workers N`: its pids (the analysing process first) once all accept."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.proc = proc
        self.ready = threading.Event()
        self.lines: list[str] = []
        # its stdout is read all along: one line per record, which would fill a pipe left unread
        threading.Thread(target=self._read, name="bench-workers-stdout", daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if len(self.lines) < 50:
                self.lines.append(line.rstrip())
            if READY in line:
                self.ready.set()

    def pids(self) -> tuple[int, ...]:
        return (self.proc.pid, *worker_pids(self.proc.pid))


@contextlib.contextmanager
def workers(argv: list[str], n: int) -> Iterator[Group]:
    """`firsttoken proxy` (``argv``) with ``--workers n`` for the length of a with-block: awaited until every one of
    its processes accepts, stopped with SIGINT after."""
    proc = subprocess.Popen([*argv, "--workers", str(n)], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, errors="replace")
    try:
        group = Group(proc)
        end = time.monotonic() + START_S
        while not group.ready.wait(0.2):
            if proc.poll() is not None or time.monotonic() > end:
                said = "\n".join(group.lines[-10:])
                raise click.ClickException(f"`firsttoken proxy --workers {n}` did not start its processes (exit code "
                                           f"{proc.poll()}); it said:\n{said}")
        if len(group.pids()) != n:
            raise click.ClickException(f"`firsttoken proxy --workers {n}` runs {len(group.pids())} processes")
        yield group
    finally:
        stop([proc])
