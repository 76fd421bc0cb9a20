"""`firsttoken proxy --workers N`: N processes accept on one listening socket; the first one (this process) also
analyses and records what every process forwarded (addon/workers; why, and the figures: docs/performance.md).
How many, the socket they share, starting and reaping them; one worker process itself: cli/proxy/worker.py.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

#: at most this many processes by default (each costs ~60 MB; the analysing one is shared)
DEFAULT_MAX = 8


def default_workers(cores: int | None = None) -> int:
    """How many processes ``--workers auto`` runs: half the cores, at most DEFAULT_MAX, at least one. Half, because
    the clients, a local engine and the tokenizer share the machine. Not the default (one process is): on two cores
    a second process paid only from ~200 concurrent streams (docs/performance.md, "Worker processes")."""
    n = cores if cores is not None else (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                                         else os.cpu_count() or 1)
    return max(1, min(DEFAULT_MAX, n // 2))


def parse_workers(value: str | int | None) -> int:
    """``--workers``: a number ≥ 1, or ``auto`` (:func:`default_workers`). Raises ValueError with what to pass."""
    if value is None or str(value).strip().lower() == "auto":
        return default_workers()
    try:
        n = int(str(value).strip())
    except ValueError:
        raise ValueError(f"--workers takes a number of processes (1, 2, …) or auto, not {value!r}") from None
    if not 1 <= n <= 64:
        raise ValueError(f"--workers {n}: pass 1 to 64 processes (or auto: {default_workers()} on this machine)")
    return n


def listening_socket(host: str, port: int, reuse_port: bool = False) -> socket.socket:
    """The one TCP socket every process accepts on (one accept queue: a process busy forwarding accepts less).
    ``reuse_port``: other sockets may bind the same port (``SO_REUSEPORT``: several independent proxies)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    s = socket.socket(family, socket.SOCK_STREAM)
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT if reuse_port else socket.SO_REUSEADDR, 1)
        s.bind((host, port))
        s.listen(socket.SOMAXCONN)
    except OSError:
        s.close()
        raise
    s.set_inheritable(True)
    return s


#: the module a worker process runs (its command line: ``python -m WORKER_MODULE …``)
WORKER_MODULE = "firsttoken.cli.proxy.worker"


def worker_pids(pid: int) -> list[int]:
    """The worker processes a `firsttoken proxy` (``pid``) runs now, by their command line (Linux /proc; none
    elsewhere)."""
    kids: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            kids += [int(k) for k in (task / "children").read_text().split()]
        except (OSError, ValueError):
            pass
    out = []
    for k in sorted(set(kids)):
        try:
            argv = Path(f"/proc/{k}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if WORKER_MODULE.encode() in argv:
            out.append(k)
    return out


def spawn(server: Any) -> list[subprocess.Popen]:
    """Start ``server.workers - 1`` worker processes on ``server.sock``, each linked to ``server.capture.hub``."""
    return [spawn_one(server, index) for index in range(1, server.workers)]


def spawn_one(server: Any, index: int) -> subprocess.Popen:
    """Start worker ``index`` (again, after one ended): its link to the hub first, then the process."""
    ours, theirs = socket.socketpair()
    argv = [sys.executable, "-m", WORKER_MODULE, str(theirs.fileno()), str(server.sock.fileno()),
            str(index), str(os.getpid())]
    try:
        p = subprocess.Popen(argv, pass_fds=(theirs.fileno(), server.sock.fileno()), stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    except OSError:
        ours.close()
        raise
    finally:
        theirs.close()
    link = server.capture.hub.attach(index, Connection(ours.detach()))
    link.send("spec", server.worker_spec())
    return p


#: a worker that ends is started again unless it ended this soon after its last start (it cannot start)
RESPAWN_MIN_S = 10.0


def reap(procs: list[subprocess.Popen], timeout: float = 10.0) -> None:
    """Wait for the workers to end (they were asked to stop); kill what is left after ``timeout``."""
    end = time.monotonic() + timeout
    for p in procs:
        try:
            p.wait(max(0.0, end - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
