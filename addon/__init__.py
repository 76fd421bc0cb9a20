"""firsttoken inside mitmproxy.

:func:`addons` is the one list of firsttoken's mitmproxy addons, in the order they must run;
the embedded proxy (``firsttoken proxy``) and ``mitmdump -s "$(firsttoken script-path)"`` both
load exactly this list. Imports happen on call, so that reading the store (``firsttoken logs``)
never pays for importing mitmproxy.
"""

from __future__ import annotations

from typing import Any

__all__ = ["addons"]


def addons() -> list[Any]:
    """Forward (marks flows forward mode passes on), Capture (records), then the exporters
    (after Capture: its ``done`` drains the last records into them)."""
    from firsttoken.addon.capture import Capture
    from firsttoken.addon.forward import Forward
    from firsttoken.addon.metrics import MetricsAddon
    from firsttoken.addon.otel import OtelAddon

    capture = Capture()
    metrics = MetricsAddon(capture)
    return [Forward(), capture, metrics, OtelAddon(capture, metrics.metrics)]
