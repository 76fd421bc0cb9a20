"""The hops between firsttoken and the model: who answered, and what they do to the timings.

- ``who_answered(headers)``: the response's ``Server``, ``Via`` and allow-listed gateway/provider
  headers (bounded, capped, never a credential), as the record keeps them; ``pick_hop_headers``
  (on the event loop) and ``clean_hop_headers`` (off it) are its two halves.
- ``name_hop(server, via, headers)``: the hop that answered (``Hop(kind, name)``), e.g. "nginx/1.22.1".
- ``buffer_shape(offsets, ttfb_ms, ...)``: the facts of a stream a hop buffered, from its token times.
- ``fix_code(kind)`` / ``HOP_LABELS``: each hop's own fix for buffering, in English and Chinese.
- ``looks_held`` / ``headers_held`` / ``route_holds``: a hop that sends its response headers only with
  the model's first chunk (LiteLLM's proxy does), so TTFB contains the prefill and the gap is ~0;
  ``route_fit``: the route's TTFT-vs-input fit, what stays true through such a hop.
"""

from firsttoken.addon.hops.fixes import HOP_LABELS, fix_code
from firsttoken.addon.hops.headers import clean as clean_hop_headers
from firsttoken.addon.hops.headers import pick as pick_hop_headers
from firsttoken.addon.hops.headers import who_answered
from firsttoken.addon.hops.held import Fit, RouteWindows, fit_of_route, headers_held, looks_held, route_fit, route_holds
from firsttoken.addon.hops.names import PASS_THROUGH, Hop, name_hop
from firsttoken.addon.hops.reported import Reported, reported_timings
from firsttoken.addon.hops.shape import buffer_shape, clumps

__all__ = ["HOP_LABELS", "PASS_THROUGH", "Fit", "Hop", "buffer_shape", "clean_hop_headers", "clumps", "fit_of_route",
           "Reported", "RouteWindows", "fix_code", "headers_held", "looks_held", "name_hop", "pick_hop_headers", "reported_timings", "route_fit", "route_holds",
           "who_answered"]
