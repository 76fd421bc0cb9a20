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
    """Forward (marks flows forward mode passes on), Egress (the way out: upstream proxy, CAs),
    Capture (records), then the exporters
    (after Capture: its ``done`` drains the last records into them)."""
    from firsttoken.addon.capture import Capture
    from firsttoken.addon.egress.addon import Egress
    from firsttoken.addon.forward import Forward
    from firsttoken.addon.metrics import MetricsAddon
    from firsttoken.addon.otel import OtelAddon
    from firsttoken.addon.reconnect import Reconnect

    capture = Capture()
    capture.egress = Egress()  # asked by Capture once a request is routed
    metrics = MetricsAddon(capture)
    return [Reconnect(), Forward(), capture.egress, capture, metrics, OtelAddon(capture, metrics.metrics)]
