"""The hops between firsttoken and the model, and what they do to the timings.

- ``looks_held(ttfb_ms, ttft_ms)`` / ``headers_held(rec, earlier)`` / ``route_holds(pairs)``: a hop that
  sends its response headers only with the model's first chunk (LiteLLM's proxy does), so TTFB
  contains the prefill and the gap is ~0.
- ``route_fit(points)``: the route's TTFT-vs-input fit (intercept = network + gateway + queue,
  slope = prefill), what stays true through such a hop.
"""

from firsttoken.addon.hops.held import Fit, fit_of_route, headers_held, looks_held, route_fit, route_holds

__all__ = ["Fit", "fit_of_route", "headers_held", "looks_held", "route_fit", "route_holds"]
