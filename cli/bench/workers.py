"""`firsttoken bench --concurrency … --workers N`: N firsttoken proxies, each a process of its own, sharing one port
through ``SO_REUSEPORT`` and recording into one database, alternated with one proxy (issue 37's experiment; its
figures and what a real ``--workers`` needs: docs/performance.md, 2026-12-07). ``python -m
firsttoken.cli.bench.workers PORT UPSTREAM DB`` runs one worker: it prints ``ready`` once it listens, stops on SIGINT.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import subprocess
import sys
from collections.abc import Iterator

import click

from firsttoken.cli.bench.timing import stop

HOST = "127.0.0.1"


def reuse_port_socket(port: int, host: str = HOST) -> socket.socket:
    """A listening TCP socket on ``host:port`` that other sockets of this user may share (``SO_REUSEPORT``)."""
    if not hasattr(socket, "SO_REUSEPORT"):
        raise click.ClickException("--workers needs SO_REUSEPORT (Linux, BSD, macOS); this system has none")
    from firsttoken.cli.proxy.workers import listening_socket

    return listening_socket(host, port, reuse_port=True)


@contextlib.contextmanager
def workers(n: int, port: int, upstream: str, db: str) -> Iterator[list[subprocess.Popen]]:
    """N worker processes serving ``port`` for the length of a with-block: each awaited until it listens,
    stopped with SIGINT after."""
    argv = [sys.executable, "-m", "firsttoken.cli.bench.workers", str(port), upstream, db]
    procs: list[subprocess.Popen] = []
    try:
        for _ in range(n):
            procs.append(subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                          stderr=subprocess.DEVNULL, text=True))
        for p in procs:
            line = p.stdout.readline() if p.stdout else ""  # blocks until the worker listens or exits
            if line.strip() != "ready":
                raise click.ClickException(f"a proxy worker did not start (exit code {p.poll()}): "
                                           f"run `{' '.join(argv)}` to see why")
        yield procs
    finally:
        stop(procs)


def main(argv: list[str]) -> int:
    from firsttoken.cli.proxy.server import ProxyServer

    port, upstream, db = int(argv[0]), argv[1], argv[2]
    server = ProxyServer([upstream], db, sock=reuse_port_socket(port))

    def ready(_server: ProxyServer) -> None:
        print("ready", flush=True)

    asyncio.run(server.serve(on_ready=ready, handle_signals=True))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
