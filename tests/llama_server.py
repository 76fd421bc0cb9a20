"""The real llama.cpp ``llama-server`` for tests: its cached binary (``.ci/llama-server`` builds it), a tiny
random-weight Llama GGUF made here (PyPI ``gguf``, a byte-level BPE trained by ``tokenizers`` on Python's
own sources; no model hub), and a server on a free loopback port (``LlamaServer``)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sysconfig
from pathlib import Path

import httpx
import pytest
from engine_process import EngineProcess

from firsttoken.cli.loopback import free_port

VERSION = "0.3.36"  # llama-cpp-python's sdist whose vendored llama.cpp .ci/llama-server builds
CACHE = Path(os.environ.get("FIRSTTOKEN_TEST_CACHE") or Path.home() / ".cache" / "firsttoken-tests")
#: the model: hidden 768 and 8 layers prefill ~2,000 tokens in ~2 s on 2 cores; the file's name hashes these
PARAMS = dict(vocab=4096, hidden=768, layers=8, heads=12, kv_heads=4, ff=2048, ctx=8192, seed=35,
              corpus_bytes=3_000_000, dtype="f16", std=0.02, format=1)
#: ChatML, the template llama-server's Jinja renders for /v1/chat/completions
CHAT_TEMPLATE = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
                 "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def binary() -> str | None:
    """The llama-server to run: ``$FIRSTTOKEN_LLAMA_SERVER``, else the one .ci/llama-server cached, else None."""
    given = os.environ.get("FIRSTTOKEN_LLAMA_SERVER")
    if given:
        return given if os.access(given, os.X_OK) else None
    cached = CACHE / f"llama-server-{VERSION}" / "llama-server"
    return str(cached) if os.access(cached, os.X_OK) else None


def require_binary() -> str:
    """The binary, or skip (a developer's machine) / fail (CI=true) saying how to get it."""
    exe = binary()
    if exe:
        return exe
    msg = (f"no llama-server: `bash .ci/llama-server` builds it into {CACHE}/llama-server-{VERSION}/ (~10 min on "
           "2 cores; .ci/run does it), or set FIRSTTOKEN_LLAMA_SERVER to a llama-server binary")
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(msg)
    pytest.skip(msg)


def _corpus(limit: int) -> list[str]:
    """Python's own standard library sources, in name order, up to ``limit`` bytes: local text to train on."""
    out, size = [], 0
    for p in sorted(Path(sysconfig.get_paths()["stdlib"]).glob("*.py")):
        text = p.read_text(encoding="utf-8", errors="replace")
        out.append(text)
        size += len(text)
        if size >= limit:
            break
    return out


def train_tokenizer(p: dict):
    """A byte-level BPE of ``p['vocab']`` tokens trained on local text (``tokenizers``' ByteLevelBPETokenizer;
    tests/vllm_server.py saves the same one as Hugging Face's tokenizer.json)."""
    from tokenizers import ByteLevelBPETokenizer

    tok = ByteLevelBPETokenizer()
    tok.train_from_iterator(_corpus(p["corpus_bytes"]), vocab_size=p["vocab"], min_frequency=2,
                            special_tokens=SPECIAL, show_progress=False)
    return tok


def _tokenizer(p: dict) -> tuple[list[str], list[int], list[str]]:
    """The test tokenizer as GGUF wants it: (tokens by id, their GGUF types, merges as 'a b')."""
    tok = train_tokenizer(p)
    vocab = tok.get_vocab()
    tokens = [""] * len(vocab)
    for t, i in vocab.items():
        tokens[i] = t
    assert all(tokens), "the trained vocabulary has gaps in its ids"
    types = [3 if t in SPECIAL else 1 for t in tokens]  # gguf.TokenType CONTROL / NORMAL
    merges = [m if isinstance(m, str) else " ".join(m) for m in json.loads(tok.to_str())["model"]["merges"]]
    return tokens, types, merges


def _write_gguf(path: Path, p: dict) -> None:
    import gguf
    import numpy as np

    tokens, types, merges = _tokenizer(p)
    n_vocab, d, ff = len(tokens), p["hidden"], p["ff"]
    head_dim = d // p["heads"]
    kv = head_dim * p["kv_heads"]
    rng = np.random.default_rng(p["seed"])
    dtype = np.float16 if p["dtype"] == "f16" else np.float32

    def w(*shape: int) -> np.ndarray:  # numpy (rows, cols) is GGUF's [cols, rows]
        return (rng.standard_normal(shape, dtype=np.float32) * p["std"]).astype(dtype)

    def ones(n: int) -> np.ndarray:
        return np.ones(n, dtype=np.float32)  # norms stay F32, as llama.cpp's converters write them

    wr = gguf.GGUFWriter(str(path), "llama")
    wr.add_name("firsttoken-test-random")
    wr.add_context_length(p["ctx"])
    wr.add_embedding_length(d)
    wr.add_block_count(p["layers"])
    wr.add_feed_forward_length(ff)
    wr.add_head_count(p["heads"])
    wr.add_head_count_kv(p["kv_heads"])
    wr.add_rope_dimension_count(head_dim)
    wr.add_rope_freq_base(10000.0)
    wr.add_layer_norm_rms_eps(1e-5)
    wr.add_vocab_size(n_vocab)
    wr.add_file_type(gguf.LlamaFileType.MOSTLY_F16 if p["dtype"] == "f16" else gguf.LlamaFileType.ALL_F32)
    wr.add_tokenizer_model("gpt2")
    wr.add_tokenizer_pre("gpt-2")
    wr.add_token_list(tokens)
    wr.add_token_types(types)
    wr.add_token_merges(merges)
    wr.add_bos_token_id(tokens.index("<|endoftext|>"))
    wr.add_eos_token_id(tokens.index("<|im_end|>"))
    wr.add_add_bos_token(False)
    wr.add_chat_template(CHAT_TEMPLATE)
    wr.add_tensor("token_embd.weight", w(n_vocab, d))
    for i in range(p["layers"]):
        b = f"blk.{i}."
        wr.add_tensor(b + "attn_norm.weight", ones(d))
        wr.add_tensor(b + "attn_q.weight", w(d, d))
        wr.add_tensor(b + "attn_k.weight", w(kv, d))
        wr.add_tensor(b + "attn_v.weight", w(kv, d))
        wr.add_tensor(b + "attn_output.weight", w(d, d))
        wr.add_tensor(b + "ffn_norm.weight", ones(d))
        wr.add_tensor(b + "ffn_gate.weight", w(ff, d))
        wr.add_tensor(b + "ffn_up.weight", w(ff, d))
        wr.add_tensor(b + "ffn_down.weight", w(d, ff))
    wr.add_tensor("output_norm.weight", ones(d))
    wr.add_tensor("output.weight", w(n_vocab, d))
    wr.write_header_to_file()
    wr.write_kv_data_to_file()
    wr.write_tensors_to_file()
    wr.close()


def model(tmpdir: Path | str, **changes) -> Path:
    """The test model's GGUF, made once and cached under CACHE by a hash of its parameters (``changes``
    override ``PARAMS``); ``tmpdir`` holds it while it is written."""
    p = {**PARAMS, **changes}
    key = hashlib.sha256(json.dumps(p, sort_keys=True).encode() + CHAT_TEMPLATE.encode()).hexdigest()[:16]
    path = CACHE / f"llama-random-{p['hidden']}x{p['layers']}-{key}.gguf"
    if path.exists():
        return path
    part = Path(tmpdir) / (path.name + ".part")
    _write_gguf(part, p)
    path.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(part, str(path) + ".part")
    os.replace(str(path) + ".part", path)  # whole or absent, also for another test process
    part.unlink()
    return path


class LlamaServer(EngineProcess):
    """``llama-server`` on 127.0.0.1 (a free port) while in a with-block: ``parallel`` slots sharing
    ``ctx_size`` tokens (each slot gets ctx_size / parallel), 2 threads, no web UI, never the network.
    ``.url``; ``.log_text()`` is its log (a failing assertion shows it)."""

    WHAT, START_S, POLL_S, STOP_S = "llama-server", 120.0, 0.1, 15.0

    def __init__(self, exe: str, model_path: Path | str, log_path: Path | str, *, parallel: int = 2,
                 ctx_size: int = 8192, threads: int = 2, extra: tuple[str, ...] = ()):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = Path(log_path)
        self.args = [exe, "-m", str(model_path), "--host", "127.0.0.1", "--port", str(self.port),
                     "--parallel", str(parallel), "--ctx-size", str(ctx_size), "--threads", str(threads),
                     "--threads-http", "8", "--no-webui", "--offline", "--metrics", "--slots", "--no-warmup",
                     "--log-timestamps", *extra]

    def count_tokens(self, text: str) -> int:
        """``text``'s tokens by this model, as llama-server's own /tokenize counts them."""
        return len(httpx.post(self.url + "/tokenize", json={"content": text}, timeout=30).json()["tokens"])

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("LLAMA_ARG_")}
        env["LD_LIBRARY_PATH"] = os.pathsep.join(filter(None, [str(Path(self.args[0]).parent),
                                                              env.get("LD_LIBRARY_PATH")]))
        return env
