"""The hops between firsttoken and the model: who answered, and what their stream's shape says.

- ``who_answered(headers)``: the response's ``Server``, ``Via`` and allow-listed gateway/provider
  headers (bounded, capped, never a credential), as the record keeps them; ``pick_hop_headers``
  (on the event loop) and ``clean_hop_headers`` (off it) are its two halves.
- ``name_hop(server, via, headers)``: the hop that answered (``Hop(kind, name)``), e.g. "nginx/1.22.1".
- ``buffer_shape(offsets, ttfb_ms, ...)``: the facts of a stream a hop buffered, from its token times.
- ``fix_code(kind)`` / ``HOP_LABELS``: each hop's own fix for buffering, in English and Chinese.
"""

from firsttoken.addon.hops.fixes import HOP_LABELS, fix_code
from firsttoken.addon.hops.headers import clean as clean_hop_headers
from firsttoken.addon.hops.headers import pick as pick_hop_headers
from firsttoken.addon.hops.headers import who_answered
from firsttoken.addon.hops.names import PASS_THROUGH, Hop, name_hop
from firsttoken.addon.hops.shape import buffer_shape, clumps

__all__ = ["HOP_LABELS", "PASS_THROUGH", "Hop", "buffer_shape", "clean_hop_headers", "clumps", "fix_code", "name_hop", "pick_hop_headers",
           "who_answered"]
