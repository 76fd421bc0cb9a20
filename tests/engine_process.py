"""A model server the tests start (llama-server, vLLM): its own process group on a free loopback port,
healthy or failing with its log, stopped (then killed) on exit. Subclasses give ``args``, ``url``,
``log_path``, ``env()`` and their timings."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import httpx


class EngineProcess:
    WHAT = "the engine"
    START_S = 120.0  # until /health answers 200
    POLL_S = 0.1
    STOP_S = 15.0  # after SIGTERM, before SIGKILL
    proc: subprocess.Popen | None = None

    def env(self) -> dict[str, str]:
        return dict(os.environ)

    def log_text(self, tail: int = 6000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-tail:]
        except OSError:
            return ""

    def __enter__(self):
        with self.log_path.open("wb") as log:
            self.proc = subprocess.Popen(self.args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         env=self.env(), start_new_session=True)
        try:
            deadline = time.monotonic() + self.START_S
            while True:
                assert self.proc.poll() is None, f"{self.WHAT} exited ({self.proc.returncode}):\n{self.log_text()}"
                try:
                    if httpx.get(self.url + "/health", timeout=2).status_code == 200:
                        return self
                except httpx.HTTPError:
                    pass
                assert time.monotonic() < deadline, f"{self.WHAT} not healthy within {self.START_S:.0f} s:\n{self.log_text()}"
                time.sleep(self.POLL_S)
        except BaseException:
            self._stop(kill=True)
            raise

    def __exit__(self, *exc) -> None:
        self._stop(kill=exc[0] is not None)

    def _stop(self, kill: bool) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, signal.SIGKILL if kill else signal.SIGTERM)
        try:
            self.proc.wait(self.STOP_S)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(5)
