"""A pseudo-terminal of a given size, with a thread that reads whatever is drawn on it.

What a person sees is tested as they see it: the live view, ``logs`` and ``demo`` run on a
real pty (``PseudoTerminal(cols, rows).spawn(argv)``), and ``text()`` is the screen output
with escape codes removed. ``bench-live`` uses the same terminal with ``keep=False``: it only
counts the bytes, like a fast terminal that draws and forgets.
"""

from __future__ import annotations

import fcntl
import os
import pty
import re
import signal
import struct
import subprocess
import termios
import threading
import time

#: CSI sequences, charset selections and keypad modes: what ``text()`` removes
ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[()][0-9A-Za-z]|\x1b[=>]")

#: variables that would override what the program detects from the terminal itself
TERMINAL_OVERRIDES = ("NO_COLOR", "FORCE_COLOR", "TTY_COMPATIBLE", "COLUMNS", "LINES")


def terminal_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a program on the terminal: no size or colour overrides, a real TERM."""
    env = dict(os.environ if base is None else base)
    for k in TERMINAL_OVERRIDES:
        env.pop(k, None)
    env["TERM"] = env.get("TERM") or "xterm-256color"
    return env


class PseudoTerminal:
    def __init__(self, cols: int = 120, rows: int = 40, *, keep: bool = True) -> None:
        self.master, self.slave = pty.openpty()
        fcntl.ioctl(self.slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        self.cols, self.rows = cols, rows
        self.keep = keep
        self.bytes = 0
        self.buf = bytearray()
        self.proc: subprocess.Popen | None = None
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while True:
            try:
                data = os.read(self.master, 65536)
            except OSError:
                return
            if not data:
                return
            with self._lock:
                self.bytes += len(data)
                if self.keep:
                    self.buf += data

    def spawn(self, argv: list[str], env: dict[str, str] | None = None) -> subprocess.Popen:
        """Run ``argv`` with this terminal as its stdin, stdout and stderr (a session of its own)."""
        self.proc = subprocess.Popen(argv, stdin=self.slave, stdout=self.slave, stderr=self.slave,
                                     env=terminal_env(env), close_fds=True, start_new_session=True)
        return self.proc

    def text(self) -> str:
        """Everything printed so far, escape codes and carriage returns removed."""
        with self._lock:
            raw = bytes(self.buf)
        return ANSI.sub("", raw.decode("utf-8", "replace")).replace("\r", "")

    def wait_for(self, pattern: str, timeout: float = 20.0) -> str:
        deadline = time.time() + timeout
        while time.time() < deadline:
            t = self.text()
            if re.search(pattern, t):
                return t
            if self.proc is not None and self.proc.poll() is not None:
                break
            time.sleep(0.02)
        code = self.proc.poll() if self.proc else None
        raise AssertionError(f"{pattern!r} not on screen (exit {code}):\n{self.text()[-3000:]}")

    def wait_exit(self, timeout: float = 30.0) -> int:
        assert self.proc is not None
        try:
            return self.proc.wait(timeout)
        finally:
            time.sleep(0.2)  # let the reader take the last bytes
            self._reader.join(2)

    def interrupt(self, timeout: float = 30.0) -> int:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGINT)
        return self.wait_exit(timeout)

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)
        for fd in (self.slave, self.master):
            try:
                os.close(fd)
            except OSError:
                pass
