"""What several commands share: the --db option, the request filters, the output and language
options, opening the DB for reading, errors.

``--json`` means the same thing in every command: JSON Lines (one object per line) for lists of
rows (``logs``, ``export``), one JSON document for summaries (``stats``, ``show``, ``baseline``).
"""

from __future__ import annotations

import errno
import os
import sys
from typing import TYPE_CHECKING, Any

import click

from firsttoken.addon.safe_text import clause

if TYPE_CHECKING:  # imported where used: `firsttoken run` starts its child before paying for them
    from rich.console import Console

    from firsttoken.addon.store.queries import Filters


# ---- ports ----------------------------------------------------------------------------------------
def port_problem(n: int, listen: bool = True) -> str | None:
    """What is wrong with ``n`` as a TCP port (None: nothing), with what to give instead: the one
    rule of every --port / --metrics-port (``listen``: 0 means any free port)."""
    lo = 0 if listen else 1
    if lo <= n <= 65535:
        return None
    return f"{n} is not a TCP port: give a number from {lo} to 65535" + (" (0 picks a free one)" if listen else "")


class Port(click.ParamType):
    """A port option, checked by ``port_problem`` when the command line is read (before any
    socket is opened); ``listen``: one the command listens on, where 0 picks a free port."""

    name = "port"

    def __init__(self, listen: bool = True) -> None:
        self.listen = listen

    def convert(self, value: Any, param, ctx) -> int:
        if isinstance(value, int) and not isinstance(value, bool):
            n = value
        else:
            try:
                n = int(str(value).strip(), 10)
            except ValueError:
                self.fail(f"{value!r} is not a port number: give a number from {0 if self.listen else 1} to 65535",
                          param, ctx)
        why = port_problem(n, self.listen)
        if why:
            self.fail(why, param, ctx)
        return n


#: a port a command listens on (0: any free port)
LISTEN_PORT = Port(listen=True)
#: the port of something to connect to (a running proxy)
PORT = Port(listen=False)


# ---- files written --------------------------------------------------------------------------------
_WRITE_ADVICE = {
    errno.ENOENT: "choose an existing folder (or create it first)",
    errno.ENOTDIR: "part of the path is a file, not a folder: choose an existing folder",
    errno.EISDIR: "that is a folder: give a file name",
    errno.EACCES: "choose a folder you may write to",
    errno.EPERM: "choose a folder you may write to",
    errno.EROFS: "that file system is read-only: choose another folder",
    errno.ENOSPC: "free disk space, or write elsewhere",
    errno.EDQUOT: "free disk space (you are over quota), or write elsewhere",
}


def cannot_write(path: str, e: OSError) -> str:
    """'cannot write PATH: <what the system said>; <what to do>'."""
    return f"cannot write {path}: {clause(e.strerror or e)}; {_WRITE_ADVICE.get(e.errno, 'choose another path')}"


def open_output(path: str, newline: str | None = None):
    """``path`` opened for writing (UTF-8 text); a path that cannot be written is a clear error
    (``cannot_write``), not a traceback."""
    try:
        return open(path, "w", encoding="utf-8", newline=newline)
    except OSError as e:
        fail(cannot_write(path, e))


# ---- the database and the filters ---------------------------------------------------------------
def db_option(fn):
    return click.option(
        "--db", "db_path", type=click.Path(dir_okay=False), default=None,
        help="SQLite file (default: per-user data dir; $FIRSTTOKEN_DB overrides; after `firsttoken demo`, "
             "while nothing is recorded there, reading commands read the demo's).",
    )(fn)


#: the request filters, by option name -> Filters field (one set for logs, stats, export, report, baseline)
FILTER_NAMES = ("model", "route", "api", "status", "code", "since", "until", "experiment", "slow_ttft", "run_id")


def filter_flags(filters: Filters | None) -> str:
    """The active filters as they are typed (``--model nosuch --run ab12``): the options of
    :func:`filter_options`, whose names are the fields' but for ``--run``."""
    import shlex

    names = {"run_id": "run"}
    return " ".join(f"--{names.get(k, k).replace('_', '-')} {shlex.quote(str(v))}"
                    for k, v in (filters.active() if filters else {}).items())


def filter_options(fn):
    """The request filters shared by logs / stats / export / report / baseline save."""
    opts = [
        click.option("--model", help="Models containing this text (any case), or a glob: 'gpt-4o*'."),
        click.option("--route", help="Only this route (the name of an upstream)."),
        click.option("--api", help="openai.chat, openai.responses, openai.completions, anthropic.messages, "
                                   "anthropic.vertex, anthropic.bedrock, bedrock.converse or gemini.generate."),
        click.option("--status", help="200, 4xx, or 'error' (status ≥ 400, no response or transport error, "
                                      "or an error finding such as an error event in a 200 stream)."),
        click.option("--code", help="Only requests with this finding code (`firsttoken diagnoses` lists them)."),
        click.option("--since", help="e.g. 30m, 2h, 7d, or an ISO time."),
        click.option("--until", help="e.g. 10m (ago) or an ISO time."),
        click.option("--experiment", help="Only requests tagged with this x-firsttoken-experiment."),
        click.option("--slow-ttft", type=float, help="Only requests with TTFT ≥ this many ms."),
        click.option("--run", "run_id", metavar="ID", help="Only the requests of one `firsttoken run` (its summary names the ID)."),
    ]
    for opt in reversed(opts):
        fn = opt(fn)
    return fn


def make_filters(kw: dict[str, Any]) -> Filters:
    """Filters from the options' values (checked: an unknown --code or --status is an error)."""
    from firsttoken.addon.diagnose import finding_codes
    from firsttoken.addon.store.queries import Filters

    f = Filters(**{k: kw.get(k) for k in FILTER_NAMES})
    try:
        f.validate(finding_codes())
    except ValueError as e:
        raise click.UsageError(str(e)) from None
    return f


def cold_option(fn):
    return click.option(
        "--include-cold/--exclude-cold", "include_cold", default=None,
        help="Requests that opened a new TCP/TLS connection (cold) count by default (the openai SDK and curl "
             "open one for most requests); their connect time is its own figure. --exclude-cold leaves them out "
             "of latency figures.",
    )(fn)


def json_option(kind: str):
    """``--json``: 'rows' -> JSON Lines, one object per row; 'summary' -> one JSON document."""
    text = ("JSON Lines: one object per row (all columns)." if kind == "rows"
            else "One JSON document (everything shown, and more).")
    return click.option("--json", "as_json", is_flag=True, help=text)


def lang_option(fn):
    return click.option(
        "--lang", type=click.Choice(["en", "zh"]), default=None,
        help="Language of findings (default: $FIRSTTOKEN_LANG, else the locale).",
    )(fn)


def resolve_lang(lang: str | None) -> str:
    from firsttoken.addon.diagnose.lang import resolve

    return resolve(lang)


def resolve_db(db_path: str | None) -> str:
    from firsttoken.addon.store.db import default_db_path

    return str(db_path or default_db_path())


def demo_db() -> str | None:
    """The database the latest `firsttoken demo` recorded into (its note in the state directory, else
    demo.db beside the default database, where a bare demo writes), if it is still there."""
    from firsttoken.addon.store.db import default_db_path
    from firsttoken.cli.proxy.state import recorded_demo

    for p in (recorded_demo(), str(default_db_path().with_name("demo.db"))):
        if p and os.path.isfile(p):
            return p
    return None


def reading_db(db_path: str | None) -> str:
    """THE database a reading command reads: --db, else $FIRSTTOKEN_DB, else the default one; while
    nothing has recorded there yet, the one the demo recorded into (README's first command is the
    demo: its `logs` must not answer "no database"), said on stderr. Writers use ``resolve_db``."""
    from firsttoken.addon.store.db import default_db_path

    if db_path or os.environ.get("FIRSTTOKEN_DB"):
        return resolve_db(db_path)
    default = default_db_path()
    demo = None if default.exists() else demo_db()
    if demo is None:
        return str(default)
    ctx = click.get_current_context(silent=True)
    meta = ctx.meta if ctx is not None else {}
    if meta.get("firsttoken.demo_noted") != demo:  # once per command, however often it asks
        meta["firsttoken.demo_noted"] = demo
        from firsttoken.cli.labels import label

        console(stderr=True).print(label(_lang(), "db.demo_note", db=str(default), demo=demo), markup=False,
                                   soft_wrap=not sys.stderr.isatty())
    return demo


def _lang() -> str:
    """The running command's --lang (else the environment's or the locale's language)."""
    ctx = click.get_current_context(silent=True)
    return resolve_lang((ctx.params.get("lang") if ctx is not None else None) or None)


def command_words() -> str:
    """The command being run, as typed: ``firsttoken baseline check``."""
    names, ctx = [], click.get_current_context(silent=True)
    while ctx is not None and ctx.parent is not None:
        names.append(ctx.info_name)
        ctx = ctx.parent
    return " ".join(["firsttoken", *reversed(names)])


def missing_db(path: str) -> str:
    """No database at ``path``: what to run, and, after a demo, the exact command that reads the
    database it recorded into (in the command's language)."""
    import shlex
    from pathlib import Path

    from firsttoken.addon.store.db import missing_message
    from firsttoken.cli.labels import label

    lang = _lang()
    p = Path(path).expanduser()
    text = missing_message(p) if lang == "en" else label(lang, "db.missing", path=str(p))
    demo = demo_db()
    if demo and os.path.realpath(demo) != os.path.realpath(p):
        text += label(lang, "db.missing_demo", demo=demo, cmd=f"{command_words()} --db {shlex.quote(demo)}")
    return text


def reader(db_path: str | None):
    """The database ``reading_db`` names, read-only: never created or migrated; a missing or foreign
    file is a clear error."""
    from firsttoken.addon.store.db import StoreError, open_reader

    path = reading_db(db_path)
    try:
        return open_reader(path)
    except FileNotFoundError:
        fail(missing_db(path))
    except StoreError as e:
        fail(str(e))


def console(stderr: bool = False) -> Console:
    from rich.console import Console

    return Console(stderr=stderr, highlight=False, soft_wrap=False)


def fail(message: str, code: int = 1):
    # on a terminal: wrapped between words (a path or command stays whole unless wider than the
    # terminal); into a pipe or file: one logical line, however long
    from rich.console import Console
    from rich.text import Text

    from firsttoken.cli.output import wrap

    err = Console(stderr=True, highlight=False)
    text = Text.assemble(("error:", "bold red"), " ", message)
    for line in wrap(text, err.width, 0, 2) if err.is_terminal else [text]:
        err.print(line, soft_wrap=True)
    sys.exit(code)
