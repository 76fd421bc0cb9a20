"""output.wrap's one line-break rule for what a user copies (issue 36 item 9): a command, URL or path
(marked ``output.whole`` or written in backticks) is never broken across lines while it fits a line of
its own; a longer one starts its own line, then breaks at its own spaces. Nothing is lost."""

from __future__ import annotations

import pytest
from rich.text import Text

from firsttoken.cli import output

CMD = "firsttoken logs --db /root/.local/share/firsttoken/demo.db"


def lines(t, width, indent=0, rest=None):
    return [ln.plain for ln in output.wrap(t, width, indent, rest)]


def words(ls):
    return " ".join(ls).split()


@pytest.mark.parametrize("width", range(60, 201, 7))
def test_a_marked_command_moves_down_whole(width):
    t = Text("Next: draws one request's timeline, and then ").append_text(output.whole(CMD)).append(
        " lists them all; for real traffic point your client at the proxy and read it again later.")
    got = lines(t, width)
    assert any(CMD in ln for ln in got), got
    assert all(len(ln) <= width for ln in got), got
    assert words(got) == t.plain.split()  # nothing lost, in order


@pytest.mark.parametrize("width", [40, 50, 59])
def test_a_command_longer_than_a_line_starts_its_own_then_breaks_at_its_spaces(width):
    t = Text("The demo recorded into a file: ").append_text(output.whole(CMD))
    got = lines(t, width)
    assert got[0] == "The demo recorded into a file:", got
    assert "/root/.local/share/firsttoken/demo.db" in got[-1] and all(len(ln) <= width for ln in got), got
    assert words(got) == t.plain.split()


def test_backticks_mark_a_command_too_and_indents_stay():
    t = "  → The fix for every hop is in the docs: `firsttoken docs gateways --lang en` and nowhere else."
    for width in range(6 + 37, 100):  # room for the command on a line of its own
        got = lines(t, width, 4, 6)
        assert any("`firsttoken docs gateways --lang en`" in ln for ln in got), (width, got)
        assert all(ln.startswith("      ") for ln in got[1:]), got
    # an unmarked sentence still breaks between any two words
    assert lines("firsttoken logs --db /tmp/x.db", 20) == ["firsttoken logs --db", "/tmp/x.db"]


def test_a_path_longer_than_any_line_still_folds_and_loses_nothing():
    path = "/very/long/" + "x" * 80 + "/demo.db"
    got = lines(Text("db: ").append_text(output.whole(path)), 30)
    assert "".join(got).replace(" ", "") == ("db:" + path)
    assert all(len(ln) <= 30 for ln in got)


def test_a_line_never_ends_in_a_separator():
    """live's header at any width: a ` · ` between counters starts the next line, never ends one."""
    t = "firsttoken  up 3m12s · 3,000 requests · 12 errors · 2 in flight · proxy lag 5 ms, cpu 30%"
    for width in range(20, 100):
        got = lines(t, width, 0, 2)
        assert not any(ln.rstrip().endswith("·") for ln in got), (width, got)
        assert words(got) == t.split()


@pytest.mark.parametrize("width", range(6, 40))
def test_a_long_name_breaks_after_its_separators(width):
    name = "accounts/fireworks/models/llama-v3p1-405b-instruct"
    got = [t.plain for t in output.fold_name(name, width)]
    assert "".join(got) == name and all(len(x) <= width for x in got), got
    # each line but the last ends at a separator unless no separator fits on it
    for x in got[:-1]:
        assert x[-1] in output.NAME_BREAKS or not any(c in output.NAME_BREAKS for c in x), (width, got)
