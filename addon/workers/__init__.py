"""Several proxy processes behind one port (``firsttoken proxy --workers N``): workers forward and stamp, one
process analyses and records. Worker side: :class:`Relay`; analysing side: :class:`Hub`."""

from firsttoken.addon.workers.hub import WORKER_GONE_ERROR, Hub
from firsttoken.addon.workers.relay import Relay, RelayLog

__all__ = ["WORKER_GONE_ERROR", "Hub", "Relay", "RelayLog"]
