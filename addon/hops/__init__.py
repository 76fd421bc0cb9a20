"""The hops between firsttoken and the model: who answered, and what they do to the timings.

``who_answered`` / ``name_hop``: the hop's headers and name; ``buffer_shape``: a stream a hop
buffered; ``looks_held`` / ``headers_held`` / ``route_holds`` / ``route_fit``: a hop that holds its
headers until the first token; ``fix_code``: each hop's own fix. See docs/gateways.md.
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
