"""Prompt and output token counting, offline: the package's public names (the work is in its modules).

Pure and thread-safe (no mitmproxy, no SQLite; tiktoken releases the GIL): ``encodings`` picks and
loads an encoding, ``files`` finds its BPE file, ``count`` counts a request per API with ``shapes``
and ``images``, ``prefix`` fingerprints the stable prefix. What is counted: docs/record.md.
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
