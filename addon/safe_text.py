"""Text from requests and responses, made safe for a terminal: shown, never obeyed.

An upstream controls error messages, model names and bodies; :func:`printable` turns their
control characters into visible escapes, :func:`printable_json` into JSON escapes that decode
to the same text. See docs/faults.md (escape sequences from an upstream).
"""

from __future__ import annotations

import json
import re
from typing import Any

#: C0 (except \n, handled by the caller's choice), DEL, C1, and the bidi/line controls
_CONTROL = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_NEWLINE = re.compile("\n")


def _escape(m: re.Match[str]) -> str:
    c = m.group(0)
    o = ord(c)
    return f"\\x{o:02x}" if o < 0x100 else f"\\u{o:04x}"


def printable(text: Any, keep_newlines: bool = False) -> Any:
    """``text`` with every control character shown as an escape (``\\x1b``); ``\\n`` kept
    only when ``keep_newlines``. Non-strings are returned unchanged."""
    if not isinstance(text, str):
        return text
    out = _CONTROL.sub(_escape, text)
    if not keep_newlines and "\n" in out:
        out = _NEWLINE.sub("\\\\n", out)
    return out


def printable_data(value: Any, keep_newlines: bool = False) -> Any:
    """A copy of a row (dicts, lists) with :func:`printable` applied to every string in it."""
    if isinstance(value, str):
        return printable(value, keep_newlines)
    if isinstance(value, dict):
        return {k: printable_data(v, keep_newlines) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [printable_data(v, keep_newlines) for v in value]
    return value


def _json_escape(m: re.Match[str]) -> str:
    return f"\\u{ord(m.group(0)):04x}"


def printable_json(value: Any, **dumps: Any) -> str:
    """``json.dumps(value, ensure_ascii=False, **dumps)`` with every control character written
    as a JSON escape: json.dumps escapes C0 itself but leaves DEL, C1 (``0x9b`` is a CSI), the
    line separators and the bidi controls raw. Valid JSON, exact values, readable CJK, and
    nothing a terminal obeys (nor a line splitter splits on)."""
    return _CONTROL.sub(_json_escape, json.dumps(value, ensure_ascii=False, **dumps))


def clause(message: Any) -> str:
    """An exception's or a library's message made ready for more of our sentence: trimmed and
    without its closing full stop, so ``f"...: {clause(e)}. Do this"`` has one period whether
    the message ended with one (mitmproxy's, OverflowError's do) or not (OSError's). An
    ellipsis is left as it is."""
    s = str(message).strip()
    if s.endswith(("。", ".")) and not s.endswith(".."):
        s = s[:-1].rstrip()
    return s
