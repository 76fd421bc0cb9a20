"""The column specs of the live view's tables, in its language (the words are ``cli.labels``).

The column specs of its tables are ``output.Col`` lists (the one column-fitting scheme) with
a nominal row each.
"""

from __future__ import annotations

from firsttoken.cli.labels import label
from firsttoken.cli.output import REQUIRED, Col

PHASES = ("connecting", "waiting_headers", "prefill", "waiting_body", "streaming")


def phase_label(phase: str | None, lang: str) -> str:
    return label(lang, f"phase.{phase or 'connecting'}")


# -- columns ----------------------------------------------------------------------------------
# Each table: its columns (``output.Col``: priority, REQUIRED ones always shown) and a nominal
# row (a typical widest cell) from which ``layout.stable_columns`` picks the columns for a width.
R = REQUIRED
MS = "1234ms"  # output.ms() is at most 6 cells below 100 s


def recent_cols(lang: str, routes: bool = False) -> tuple[list[Col], dict[str, str]]:
    """Finished requests: the id always (for `firsttoken show ID`), the route only with several routes."""
    L = lambda k: label(lang, f"col.{k}")  # noqa: E731
    cols = [
        Col("time", L("time"), 70), Col("id", L("id"), R), Col("route", L("route"), 75),
        Col("model", L("model"), R), Col("api", L("api"), 20), Col("st", L("st"), R, True),
        Col("prompt", L("prompt"), 55, True), Col("ttfb", L("ttfb"), 80, True), Col("ttft", L("ttft"), R, True),
        Col("gap", L("gap"), 65, True), Col("tpot", L("tpot"), 40, True), Col("out", L("out"), 45, True),
        Col("total", L("total"), 60, True),
    ]
    if not routes:
        cols = [c for c in cols if c.key != "route"]
    nominal = dict(time="00:00:00", id="12345678", route="route-name", model="m" * 20, api="ant.messages",
                   st="aborted", prompt="~12,345", ttfb=MS, ttft=MS, gap=MS, tpot=MS, out="~1,234", total=MS)
    return cols, nominal


def flight_cols(lang: str, routes: bool = False) -> tuple[list[Col], dict[str, str]]:
    L = lambda k: label(lang, f"col.{k}")  # noqa: E731
    cols = [
        Col("elapsed", L("elapsed"), R, True), Col("id", L("id"), 50), Col("route", L("route"), 75),
        Col("model", L("model"), R), Col("api", L("api"), 20), Col("phase", L("phase"), R),
        Col("ttfb", L("ttfb"), 60, True), Col("prompt", L("prompt"), 45, True), Col("tok", L("tok"), 90, True),
        Col("rate", L("rate"), 70, True),
    ]
    if not routes:
        cols = [c for c in cols if c.key != "route"]
    phase = max((label(lang, f"phase.{p}") for p in PHASES), key=len)
    nominal = dict(elapsed="59m59s", id="12345678", route="route-name", model="m" * 20, api="ant.messages",
                   phase=phase, ttfb=MS, prompt="~12,345", tok="12,345", rate="123.4")
    return cols, nominal


def model_cols(lang: str, trend: bool) -> tuple[list[Col], dict[str, str]]:
    L = lambda k: label(lang, f"col.{k}")  # noqa: E731
    cols = [
        Col("model", L("model"), R), Col("n", L("n"), 90, True), Col("err", L("err"), 80, True),
        Col("ttfb50", L("ttfb50"), 75, True), Col("ttfb95", L("ttfb95"), 50, True),
        Col("ttft50", L("ttft50"), R, True), Col("ttft95", L("ttft95"), 85, True),
        Col("gap50", L("gap50"), 70, True), Col("gap95", L("gap95"), 40, True),
    ]
    if trend:
        cols.append(Col("trend", L("trend"), 60))
    nominal = dict(model="m" * 20, n="1,234", err="1,234", ttfb50=MS, ttfb95=MS, ttft50=MS, ttft95=MS,
                   gap50=MS, gap95=MS, trend="▁" * 16)
    return cols, nominal
