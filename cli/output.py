"""What the commands' output shares: number formats, the severity glyphs and colours, the one
"top finding" rendering, findings in the reader's language, the CSV / JSON Lines writer, and
the one column-fitting scheme (cells that do not fit wrap onto more lines; nothing is cut).
"""

from __future__ import annotations

import csv
import datetime as _dt
import json
import re
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from rich.cells import cell_len
from rich.style import Style
from rich.text import Text

from firsttoken.addon.safe_text import printable, printable_data, printable_json

#: how a finding's severity is coloured everywhere (logs, show, live, diagnoses)
SEVERITY_STYLE = {"error": "bold red", "warn": "yellow", "info": "cyan"}
#: the one glyph per severity (logs, live view, one-line output)
SEVERITY_MARK = {"error": "✖", "warn": "▲", "info": "•"}


# ---- findings ------------------------------------------------------------------------------------

def localize(findings: list[dict[str, Any]] | None, lang: str) -> list[dict[str, Any]]:
    """Stored findings (code + params) re-rendered in ``lang``: the reader's language, not the recorder's.
    One stored without params (a synthetic row, e.g. bench-db's) keeps its words: rendered, every value would be ?."""
    from firsttoken.addon.diagnose import render_finding

    return [render_finding(f, lang) if isinstance(f, dict) and f.get("code") and "params" in f else f
            for f in findings or []]


def api_name(api: str | None) -> str:
    """``openai.chat``, ``anthropic.messages``: an API as every view names it (``logs``, ``show``,
    ``live``, ``sessions``), the same name ``--api`` takes; ``other`` when the request matched no API."""
    return api or "other"


def more_findings_en(n: int) -> str:
    return f"(+{n} more)"


def request_cells(r: dict[str, Any]) -> dict[str, str]:
    """A finished request's table cells by column key: the one wording of `logs` and the live view."""
    return {
        "time": local_time(r.get("started_at")),
        "id": (r.get("id") or "")[:8],
        "route": r.get("route") or "–",
        "model": r.get("model") or "–",
        "api": api_name(r.get("api")),
        "st": status_text(r),
        "prompt": prompt_tokens(r),
        "ttfb": ms(r.get("ttfb_ms")),
        "ttft": ms(r.get("ttft_ms")),
        "gap": ms(r.get("gap_ms")),
        "tpot": ms(r.get("tpot_ms")),
        "out": output_tokens(r),
        "total": ms(r.get("total_ms")),
    }


def top_finding(r: dict[str, Any], hint: bool = True,
                more: Callable[[int], str] = more_findings_en) -> tuple[Text | None, Text | None]:
    """(``✖ code: message (+n more)``, ``→ hint``) of a row's top finding, styled; a failed request
    without findings shows its error. Findings are shown as stored: ``localize`` them first.
    ``more`` words the count of further findings (the live view's, in its language)."""
    r = printable_data(r)  # upstream-controlled text never reaches the terminal raw
    findings = r.get("findings") or []
    if findings:
        f = findings[0]
        sev = f.get("severity") or "info"
        msg = Text(f"{SEVERITY_MARK.get(sev, '•')} {f.get('code')}: {f.get('message') or ''}".rstrip(),
                   style=SEVERITY_STYLE.get(sev, ""))
        if len(findings) > 1:
            msg.append(" " + more(len(findings) - 1), style="dim")
        tip = Text(f"→ {f['hint']}", style="dim") if hint and f.get("hint") else None
        return msg, tip
    if r.get("error"):
        return Text(f"{SEVERITY_MARK['error']} {r['error']}", style="bold red"), None
    return None, None


def no_rows(db, flags: str, lang: str) -> str:
    """What a reading command says when no request matched: an empty database is told how to record
    one; a filtered one how many requests it holds, that none match, and what to try (the one wording
    of `logs` and `stats`); ``flags``: the filters as typed (``options.filter_flags``)."""
    from firsttoken.cli.labels import label

    total = db["requests"].count if db["requests"].exists() else 0
    if not total:
        return label(lang, "no_rows")
    return label(lang, "no_match", n=f"{total:,}", filters=flags)


# ---- rows as CSV or JSON Lines -------------------------------------------------------------------
#: the one wording of the rule below, for the commands' --help
CSV_RULE = "CSV is exact in a file or a pipe; on a terminal its control characters are shown as escapes (\\x1b)."
DATA_RULE = "JSON writes control characters as \\u escapes (the exact values). " + CSV_RULE


def is_terminal(out) -> bool:
    try:
        return bool(out.isatty())
    except (AttributeError, ValueError):  # no isatty, or closed
        return False


def write_rows(rows: Iterable[dict[str, Any]], fmt: str, out=None, terminal: bool | None = None) -> int:
    """``fmt`` 'json': JSON Lines, one object per row; 'csv': a header line, then one line per row
    (list/dict columns as JSON text). Streams; returns the number of rows written.

    CSV and JSON are data: a file or a pipe gets the exact values. JSON always writes control
    characters as JSON escapes (``printable_json``: the same values, safe anywhere). CSV has no
    escapes of its own, so on a terminal (``terminal``; default: whether ``out`` is one) its
    values' control characters are shown as ``\\x1b`` (``printable``; line breaks kept)."""
    out = out or sys.stdout
    terminal = is_terminal(out) if terminal is None else terminal
    n = 0
    writer = None
    for r in rows:
        if fmt == "json":
            out.write(printable_json(r, default=str) + "\n")
        else:
            if writer is None:
                writer = csv.DictWriter(out, fieldnames=list(r))
                writer.writeheader()
            row = {k: json.dumps(v, ensure_ascii=False) if isinstance(v, (list, dict)) else v for k, v in r.items()}
            writer.writerow(printable_data(row, keep_newlines=True) if terminal else row)
        n += 1
    return n


# ---- the column-fitting scheme -------------------------------------------------------------------
GAP = 2


@dataclass(frozen=True)
class Col:
    key: str
    header: str
    prio: int  # higher: kept longer as the terminal narrows; >= REQUIRED: always shown
    right: bool = False


REQUIRED = 100


def fit_columns(cols: list[Col], rows: list[dict[str, Any]], width: int) -> list[tuple[Col, int]]:
    """The columns to show in ``width`` and each one's width. Optional columns are dropped, most
    important kept; a required column too wide for what is left gets narrower, and its cells
    wrap (``table_lines``): a character is never cut."""
    nat = {c.key: max([cell_len(c.header)] + [cell_len(str(r.get(c.key) or "")) for r in rows]) for c in cols}
    need = {c.key: nat[c.key] for c in cols if c.prio >= REQUIRED}
    used = sum(need.values()) + GAP * max(0, len(need) - 1)
    for c in sorted((c for c in cols if c.prio < REQUIRED), key=lambda c: -c.prio):
        if used + GAP + nat[c.key] <= width:
            need[c.key] = nat[c.key]
            used += GAP + nat[c.key]
    over = used - width
    while over > 0:  # narrow the widest column, down to its header (or 4 cells)
        key = max(need, key=lambda k: need[k])
        floor = max(4, min(cell_len(next(c.header for c in cols if c.key == key)), need[key]))
        if need[key] <= floor:
            break
        cut = min(over, need[key] - floor)
        need[key] -= cut
        over -= cut
    return [(c, need[c.key]) for c in cols if c.key in need]


#: in text with wide (CJK) characters: a run of narrow ones (code such as `"stream": true`) at
#: most this many cells long keeps its spaces unbroken
GLUED_CELLS = 20
#: a line never starts with these (closing punctuation) nor ends with the opening ones
_NO_LINE_START = frozenset("，。、；：？！）」』》】〉”’,.;:!?)]}%")
_NO_LINE_END = frozenset("（「『《【〈“‘([{→")
#: units never split (a number's unit stays on the number's line: `0.0 毫秒`)
_UNITS = ("毫秒", "分钟", "小时", "字节")


def _cjk_breaks(plain: str, start: int, end: int) -> set[int] | None:
    """Where a line may break in ``plain[start:end]`` when it has wide (CJK) characters: before
    ``j`` between two wide characters or after wide closing punctuation (never before closing
    nor after opening punctuation, nor inside a unit); at a space between a wide character and
    a narrow one, unless it joins a number to its unit or follows ``→``; at a space inside a
    narrow run only when the run is longer than ``GLUED_CELLS`` (short code stays whole).
    None: no wide characters, so lines break at spaces only (the English rule)."""
    seg = plain[start:end]
    if seg.isascii():
        return None
    wide = [cell_len(c) == 2 for c in seg]
    if not any(wide):
        return None
    n = len(seg)
    ok: set[int] = set()
    for k in range(1, n):
        if seg[k] in _NO_LINE_START or seg[k - 1] in _NO_LINE_END or seg[k - 1:k + 1] in _UNITS:
            continue
        # between two wide characters, or after wide punctuation that may end a line (，。：；）)
        if wide[k - 1] and (wide[k] or seg[k - 1] in _NO_LINE_START) and seg[k] != " ":
            ok.add(start + k)
    k = 0
    while k < n:
        if wide[k] or seg[k] == "\n":
            k += 1
            continue
        e = k
        while e < n and not wide[e] and seg[e] != "\n":
            e += 1
        long_run = cell_len(seg[k:e]) > GLUED_CELLS
        for m in range(k, e):
            if seg[m] != " " or (m > 0 and seg[m - 1] == " "):
                continue
            before = seg[m - 1] if m > 0 else ""
            after_wide = m + 1 < n and wide[m + 1]
            if (m == k and m > 0 and wide[m - 1]) or (m == e - 1 and after_wide):  # between wide and narrow
                if not (before.isdigit() and after_wide) and before not in _NO_LINE_END:
                    ok.add(start + m)
            elif long_run and m > k and not (before == ":" and seg[m - 2:m - 1] == '"'):
                ok.add(start + m)  # never inside JSON's `"key": value`
        k = e
    return ok


#: what a user copies, marked in a Text: a command, URL or path that ``wrap`` keeps on one line
WHOLE = Style(bold=True, meta={"whole": True})
_BACKTICKED = re.compile(r"`[^`\n]+`")


def whole(text: str, style: str | Style | None = None) -> Text:
    """``text`` (a command, URL, path) as a Text that ``wrap`` never breaks while it fits on a line of its
    own: bold, or ``style`` added to the mark."""
    st = WHOLE if style is None else Style.combine([Style.parse(style) if isinstance(style, str) else style,
                                                     Style(meta={"whole": True})])
    return Text(text, style=st)


def whole_spans(text: Text) -> list[tuple[int, int]]:
    """The runs of ``text`` that must stay on one line: those marked ``whole`` and those in backticks
    (messages write commands so: `firsttoken docs gateways`)."""
    runs = [(m.start(), m.end()) for m in _BACKTICKED.finditer(text.plain)]
    for sp in text.spans:
        st = sp.style
        if isinstance(st, Style) and st.meta.get("whole"):
            runs.append((sp.start, sp.end))
    return sorted(runs)


def wrap_spans(plain: str, room, start: int = 0, end: int | None = None,
               keep: list[tuple[int, int]] | tuple = ()) -> list[tuple[int, int]]:
    """Where to break ``plain[start:end]`` into lines: ``room(i)`` cells for line ``i``. Breaks
    at a space when one is on the line (the space becomes the break), else folds the word;
    ``\n`` always breaks. Text with wide (CJK) characters breaks between them instead, keeping
    code and a number with its unit whole (``_cjk_breaks``). A run in ``keep`` (a command, URL,
    path) is never broken: it moves to the next line; one longer than a line breaks at its own
    spaces (a path longer than a line folds). Every other character is in exactly one span: nothing is dropped."""
    end = len(plain) if end is None else end
    cjk = _cjk_breaks(plain, start, end)

    def splits(j: int, cap: int, line_start: int) -> bool:
        """A break at j would cut a kept run that fits a line of its own, or one that does not but has
        not started its own line yet (it moves down first, then breaks at its spaces)."""
        return any(a < j < b and (a > line_start or cell_len(plain[a:b]) <= cap) for a, b in keep)

    def _after_dot(j: int) -> bool:  # a line never ends in a separator (` · `): it starts the next line
        return j > 0 and plain[j - 1] == "·"

    spans: list[tuple[int, int]] = []
    i = start
    while i < end:
        if spans:  # a line never starts with the space it was broken at
            while i < end and plain[i] == " ":
                i += 1
            if i >= end:
                break
        cap = max(1, room(len(spans)))
        j, w, brk = i, 0, None
        while j < end and plain[j] != "\n":
            cw = cell_len(plain[j])
            if w + cw > cap and j > i:
                if (plain[j] == " " and not _after_dot(j) if cjk is None else j in cjk) and not splits(j, cap, i):
                    brk = j  # the break right here is allowed (a space just past the line's end)
                break
            if ((plain[j] == " " and not _after_dot(j)) if cjk is None else (j in cjk and j > i)) and not splits(j, cap, i):
                brk = j
            w += cw
            j += 1
        # the line is full: break at the last space no kept run holds (a run longer than a line folds)
        if j < end and plain[j] != "\n" and brk is not None and brk > i:
            j = brk
        spans.append((i, j))
        i = j + 1 if j < end and plain[j] == "\n" else j
    return spans or [(start, start)]


def wrap(text: Text | str, width: int, indent: int = 0, rest: int | None = None) -> list[Text]:
    """``text`` as lines no wider than ``width``: the first indented by ``indent``, the others by
    ``rest`` (default: the same). Words move down; a command, URL or path (``whole_spans``) moves
    down whole; a word longer than a line folds; no character but the spaces at the breaks is dropped."""
    t = text if isinstance(text, Text) else Text(text)
    rest = indent if rest is None else rest
    out = []
    for a, b in wrap_spans(t.plain, lambda i: width - (indent if i == 0 else rest), keep=whole_spans(t)):
        line = Text(" " * (indent if not out else rest), no_wrap=True)
        piece = t[a:b]
        piece.rstrip()
        line.append_text(piece)
        out.append(line)
    return out


class Wrapped:
    """A Text that rich lays out (in a table cell, say) by this module's line-break rule: Chinese
    breaks between characters, while code and a number with its unit stay whole (``wrap``)."""

    def __init__(self, text: Text | str) -> None:
        self.text = text if isinstance(text, Text) else Text(text)

    def __rich_measure__(self, console: Any, options: Any) -> Any:
        from rich.measure import Measurement

        widest = max([cell_len(ln) for ln in self.text.plain.split("\n")] + [1])
        return Measurement(min(widest, 10), widest)

    def __rich_console__(self, console: Any, options: Any) -> Any:
        yield from wrap(self.text, max(1, options.max_width))


#: where a name (a model, a route) may break when it is wider than its column: after one of these
NAME_BREAKS = "/-.:_@"


def fold_name(name: Text | str, width: int) -> list[Text]:
    """A name wider than ``width`` as lines of it, each broken after a separator (``NAME_BREAKS``:
    ``accounts/fireworks/`` · ``models/…``) where one is on the line, else folded; nothing is lost."""
    t = name if isinstance(name, Text) else Text(name)
    plain, out, i = t.plain, [], 0
    width = max(1, width)
    while i < len(plain):
        j, w = i, 0
        while j < len(plain) and w + cell_len(plain[j]) <= width:
            w += cell_len(plain[j])
            j += 1
        j = max(j, i + 1)
        if j < len(plain):
            cut = max((k + 1 for k in range(i, j) if plain[k] in NAME_BREAKS), default=None)
            if cut is not None and cut > i:
                j = cut
        out.append(t[i:j])
        i = j
    return out or [t]


def say(console: Any, text: Text | str, indent: int = 0, rest: int | None = None) -> None:
    """Print ``text`` wrapped to the console's width by ``wrap`` (a command, URL or path moves down
    whole, never broken across lines): the one way a message longer than a line is printed."""
    t = text if isinstance(text, Text) else Text(text)
    for ln in wrap(t, max(indent + 8, console.width), indent, rest):
        console.print(ln, soft_wrap=True, highlight=False)


def _fold(s: str, w: int) -> list[str]:
    if " " not in s and cell_len(s) > w:  # one name (a model, a path): broken after its separators
        return [t.plain for t in fold_name(s, w)]
    return [s[a:b].rstrip() for a, b in wrap_spans(s, lambda i: w)]


def table_lines(chosen: list[tuple[Col, int]], row: dict[str, Any], styles: dict[str, str] | None = None,
                bold: bool = False) -> list[Text]:
    """One row as one or more lines: a cell wider than its column wraps within it."""
    styles = styles or {}
    cells = [_fold(str(row.get(c.key) if row.get(c.key) is not None else ""), w) for c, w in chosen]
    lines = []
    for i in range(max(len(c) for c in cells) if cells else 0):
        t = Text(style="bold" if bold else "", no_wrap=True)
        for j, ((c, w), parts) in enumerate(zip(chosen, cells)):
            if j:
                t.append(" " * GAP)
            part = parts[i] if i < len(parts) else ""
            pad = " " * max(0, w - cell_len(part))
            if c.right:
                t.append(pad)
                t.append(part, style=styles.get(c.key, ""))
            else:
                t.append(part, style=styles.get(c.key, ""))
                t.append(pad)
        t.rstrip()
        lines.append(t)
    return lines


def indented(text: Text, width: int, indent: int) -> list[Text]:
    """``text`` wrapped to ``width`` with every line indented by ``indent`` (see ``wrap``)."""
    return wrap(text, max(indent + 8, width), indent)


def ms(v: float | None) -> str:
    """A duration in milliseconds as every view shows it (``0.4ms``, ``573ms``, ``1.20s``, ``12.3s``):
    the one home of that format. Sized by its magnitude (a negative difference reads like a positive
    one), and never a negative zero: a value that rounds to zero is ``0.0ms``, whatever its sign."""
    if v is None:
        return "–"
    a = abs(v)  # the thresholds are where the rounded figure would need the next format (99.96 -> 100ms)
    if a >= 9_995:
        text = f"{v / 1000:.1f}s"
    elif a >= 999.5:
        text = f"{v / 1000:.2f}s"
    elif a >= 99.95:
        text = f"{v:.0f}ms"
    else:
        text = f"{v:.1f}ms"
    return text[1:] if text.startswith("-") and not any(c in "123456789" for c in text) else text


def num(v: int | float | None, est: bool = False) -> str:
    if v is None:
        return "–"
    return f"~{v:,}" if est else f"{v:,}"


def local_time(iso: str | None) -> str:
    if not iso:
        return "–"
    try:
        t = _dt.datetime.fromisoformat(iso).astimezone()
    except ValueError:
        return iso
    return t.strftime("%H:%M:%S")


def status_text(row: dict) -> str:
    if row.get("state") == "in_flight":
        return "…"
    if row.get("client_aborted"):
        return "aborted"
    if row.get("status") is None:
        return "ERR"
    return str(row["status"])


def prompt_tokens(row: dict) -> str:
    """Server-reported prompt tokens when present, else our estimate marked with ~."""
    if row.get("usage_prompt_tokens") is not None:
        return num(row["usage_prompt_tokens"])
    return num(row.get("prompt_tokens_est"), est=not row.get("tokens_exact"))


def output_tokens(row: dict) -> str:
    if row.get("usage_completion_tokens") is not None:
        return num(row["usage_completion_tokens"])
    return num(row.get("output_tokens_est"), est=True)


# ---- One plain line per finished request (non-TTY output, `--no-live`, CI logs).

def line(r: dict[str, Any]) -> str:
    """One plain line for a finished request (a row, or any dict with the row's keys). Only the
    text it shows goes through ``printable`` (not the whole row: that costs more than the rest)."""
    p = printable  # upstream-controlled text never reaches the terminal raw
    parts = [
        local_time(p(r.get("started_at"))),
        p(r["id"])[:8],
        p(r.get("route")) or "-",
        p(r.get("model")) or "-",
        p(status_text(r)),
        f"TTFB {ms(r.get('ttfb_ms'))}",
        f"TTFT {ms(r.get('ttft_ms'))}",
        f"gap {ms(r.get('gap_ms'))}",
        f"total {ms(r.get('total_ms'))}",
        f"prompt {prompt_tokens(r)}",
        f"out {output_tokens(r)}",
    ]
    findings = r.get("findings") or []
    if findings:
        f = findings[0]
        parts.append(f"| {p(f['severity'])} {p(f['code'])}: {p(f['message'])}")
        if f.get("hint"):
            parts.append(f"→ {p(f['hint'])}")
    return " ".join(parts)


def plural(n: int, word: str, words: str | None = None) -> str:
    """'1 warning', '2 warnings' (``words`` for an irregular plural)."""
    return f"{n:,} {word if n == 1 else (words or word + 's')}"
