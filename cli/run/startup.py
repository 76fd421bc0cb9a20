"""`firsttoken run`: the child starts at once; the proxy starts behind a port already open
(:class:`EarlyProxy`), in a thread, serving on that very socket (cli/proxy/server.hand_over).
Why, what the first request's record says, and a proxy that cannot start: docs/run.md (The command
starts at once)."""

from __future__ import annotations

import select
import socket
import sys
import threading
from collections.abc import Callable
from typing import Any

#: how long, after the child exits, `run` waits for a proxy that is still starting
START_TIMEOUT_S = 60.0


class EarlyProxy:
    """A listening loopback socket now; the proxy serving on it later (:meth:`start`)."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            self.sock.bind((host, 0))
            self.sock.listen(socket.SOMAXCONN)
        except OSError:
            self.sock.close()
            raise
        self.port: int = self.sock.getsockname()[1]
        self.url = f"http://{host}:{self.port}"
        self.server: Any = None
        #: builds the proxy on the socket (called in the start thread)
        self.make: Callable[[socket.socket], Any] | None = None
        self.error: BaseException | None = None
        self._done = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Build (``self.make(sock)``) and start the proxy in a thread; returns at once."""
        def run() -> None:
            try:
                server = self.make(self.sock)
                server.start(START_TIMEOUT_S)
                self.server = server
            except BaseException as e:  # noqa: BLE001 - reported by wait(), and at once on stderr
                self.error = e
                self.sock.close()  # the child's connections are refused, not left waiting
                try:
                    sys.stderr.write(f"\nfirsttoken run: the proxy could not start, so the command's requests are "
                                     f"refused: {e}\n")
                    sys.stderr.flush()
                except (OSError, ValueError):
                    pass
            finally:
                self._done.set()

        self._thread = threading.Thread(target=run, name="firsttoken-run-start", daemon=True)
        self._thread.start()

    def wait(self, timeout: float = START_TIMEOUT_S) -> Any:
        """The started proxy; raises what stopped it from starting (or TimeoutError)."""
        if self._thread is None:
            self.sock.close()
            raise RuntimeError("the proxy was never started (the command did not run)")
        if not self._done.wait(timeout):
            raise TimeoutError(f"the proxy did not start within {timeout:.0f} s")
        if self.error is not None:
            raise self.error
        return self.server

    def unused(self) -> bool:
        """True when the proxy is still starting and no connection ever reached its socket (none waits
        in the listen queue): the command sent it nothing, so there is nothing to wait for or record."""
        if self._done.is_set() or self._thread is None:
            return False
        try:
            pending, _, _ = select.select([self.sock], [], [], 0)
        except (OSError, ValueError):  # handed over and closed meanwhile: the proxy owns it now
            return False
        return not pending and not self._done.is_set()

    def close(self) -> None:
        """Close the socket if no proxy took it (the child could not be started)."""
        if self._thread is None:
            self.sock.close()
