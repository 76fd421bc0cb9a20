"""One worker process of `firsttoken proxy --workers N` (cli/proxy/workers.py starts it).

``python -m firsttoken.cli.proxy.worker HUB_FD LISTEN_FD INDEX OWNER_PID``: it reads what to serve from its
connection to the hub (never from its command line: an upstream proxy's password would show in ``ps``), serves on
the inherited socket, hands every exchange to the hub (addon/workers/relay.py) and stops when the hub says so, or
when the hub's process is gone.
"""

from __future__ import annotations

import asyncio
import logging
import os
import pickle
import socket
import sys
import time
from multiprocessing.connection import Connection


def main(argv: list[str]) -> int:
    from firsttoken.addon.analyzer import die_with
    from firsttoken.addon.workers import RelayLog
    from firsttoken.cli.proxy.server import ProxyServer

    hub_fd, listen_fd, index, owner = (int(a) for a in argv[:4])
    die_with(owner)  # SIGTERM (a drain) when the hub's process ends, even by kill -9
    conn = Connection(hub_fd)
    try:
        kind, spec = pickle.loads(conn.recv_bytes())
    except (EOFError, OSError):
        return 1
    try:
        server = ProxyServer(**spec, sock=socket.socket(fileno=listen_fd), relay=(conn, index, owner))
    except Exception as e:  # noqa: BLE001 - said to the hub, which logs it
        _tell(conn, f"worker {index} could not start: {e}")
        return 1
    from firsttoken.cli.proxy.command import freeze_startup_objects

    server.before_listen.append(freeze_startup_objects)  # as the analysing process does (`firsttoken proxy`)

    async def hello(s: ProxyServer) -> None:
        end = time.monotonic() + 10
        while s.capture.analyzer is None and time.monotonic() < end:  # the relay opens in the `running` hook
            await asyncio.sleep(0.01)
        relay = s.capture.analyzer
        if relay is None:
            _tell(conn, f"worker {index} could not open its link to the analysing process")
            s.shutdown()
            return
        for name in ("mitmproxy", "firsttoken"):
            logging.getLogger(name).addHandler(RelayLog(relay))
        relay.send("hello", os.getpid())

    tasks = []

    def ready(s: ProxyServer) -> None:
        tasks.append(asyncio.ensure_future(hello(s)))  # (a reference: the loop keeps only weak ones)

    try:
        asyncio.run(server.serve(on_ready=ready, handle_signals=True))
    except Exception as e:  # noqa: BLE001
        _tell(conn, f"worker {index} stopped: {e}")
        return 1
    return 0


def _tell(conn: Connection, message: str) -> None:
    try:
        conn.send_bytes(pickle.dumps([("log", logging.ERROR, message)], pickle.HIGHEST_PROTOCOL))
    except OSError:
        pass


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
