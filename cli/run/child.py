"""`firsttoken run`: the child runs on our terminal; the signals the terminal did not deliver to it
are passed on, its exit code is given back, and the private files it reads for the run are written
and removed. Terminal, signals, exit code, private directory: docs/run.md (The command keeps the terminal)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence

from firsttoken.cli.run.clients.base import ChildFile

#: the terminal sends these to its whole foreground process group, the child's and ours: forwarded
#: only when they came some other way (``kill -INT``, no terminal)
FROM_TERMINAL = (signal.SIGINT, signal.SIGQUIT, signal.SIGWINCH)
#: always forwarded: we catch them to outlive them (the records are written after the child exits)
ALWAYS = (signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2)


class ChildError(RuntimeError):
    pass


def _terminal_delivers() -> bool:
    """Whether the terminal's signals reach our process group (and so the child) by themselves."""
    for stream in (sys.stdin, sys.stdout, sys.stderr):
        try:
            fd = stream.fileno()
            if os.isatty(fd):
                return os.tcgetpgrp(fd) == os.getpgrp()
        except (OSError, ValueError, AttributeError):
            continue
    return False


def exit_code(returncode: int) -> int:
    """A child's exit status as a shell reports it: 128+N for death by signal N."""
    return 128 - returncode if returncode < 0 else returncode


def run_child(argv: list[str], env: Mapping[str, str], on_start: Callable[[], None] | None = None) -> int:
    """Run ``argv`` on our terminal with ``env``; return its exit code (128+N for a signal).
    ``on_start`` runs once the child runs (`run` starts its proxy there, beside the child)."""
    proc: subprocess.Popen | None = None
    pending: list[int] = []
    terminal = _terminal_delivers()

    def forward(signum, _frame) -> None:
        if signum in FROM_TERMINAL and terminal:
            return  # the terminal sent it to the whole foreground group: the child has it already
        if proc is None:
            pending.append(signum)
            return
        try:
            proc.send_signal(signum)
        except (ProcessLookupError, OSError):
            pass

    # Python-level handlers are reset to the default in the child at exec (ignored signals
    # would be inherited: that is why SIGINT is caught here, not ignored).
    old = {}
    for sig in FROM_TERMINAL + ALWAYS:
        try:
            old[sig] = signal.signal(sig, forward)
        except (ValueError, OSError):  # not the main thread, or not a signal on this platform
            pass
    try:
        try:
            proc = subprocess.Popen(argv, env=dict(env))
        except FileNotFoundError:
            raise ChildError(f"{argv[0]}: command not found (check the name, or give its full path)") from None
        except PermissionError:
            raise ChildError(f"{argv[0]}: permission denied (is it executable?)") from None
        except OSError as e:
            raise ChildError(f"{argv[0]}: could not start: {e}") from None
        for signum in pending:
            forward(signum, None)
        if on_start is not None:
            on_start()
        while True:
            try:
                return exit_code(proc.wait())
            except KeyboardInterrupt:  # a SIGINT that arrived before our handler
                continue
    finally:
        for sig, handler in old.items():
            try:
                signal.signal(sig, handler)
            except (ValueError, OSError, TypeError):
                pass


@contextlib.contextmanager
def child_files(files: Sequence[ChildFile]) -> Iterator[dict[str, str]]:
    """Write ``files`` to a private directory for the child; yield the variables that name them;
    remove the directory afterwards (whatever happened)."""
    with child_dir(files) as (env, _):
        yield env


@contextlib.contextmanager
def child_dir(files: Sequence[ChildFile]) -> Iterator[tuple[dict[str, str], str | None]]:
    """:func:`child_files`, also yielding the directory (None without files). A :class:`ChildFile`
    with ``link`` is a symbolic link to the user's own file (removed with the directory, never its
    target)."""
    if not files:
        yield {}, None
        return
    # a copy may hold a key the user's own config holds: 0700/0600, in $XDG_RUNTIME_DIR (memory-backed
    # on most Linux systems) when there is one, else $TMPDIR
    runtime = os.environ.get("XDG_RUNTIME_DIR") or ""
    parent = runtime if runtime and os.path.isdir(runtime) and os.access(runtime, os.W_OK) else None
    import shutil  # (here, not at the top: `run` starts its child before anything it does not need)
    import tempfile

    try:
        d = tempfile.mkdtemp(prefix="firsttoken-run-", dir=parent)
    except OSError as e:
        raise ChildError(f"could not create a private directory for the child's settings ({e}): "
                         "check that $TMPDIR is writable, or use `firsttoken run --forward`") from None
    try:
        env = {}
        try:
            for f in files:
                path = os.path.join(d, f.name)
                if f.link is not None:
                    os.symlink(f.link, path)
                    continue
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                with os.fdopen(fd, "w", encoding="utf-8") as out:
                    out.write(f.text)
                if f.env:
                    env[f.env] = path
        except OSError as e:
            raise ChildError(f"could not write the child's {f.name} in {d} ({e}): check the free space there, "
                             "or use `firsttoken run --forward`") from None
        yield env, d
    finally:
        shutil.rmtree(d, ignore_errors=True)
