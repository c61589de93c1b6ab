"""transformers as the model bench rows' peer (iron/model/bench_rows.py): the eager model in the bench's process, and
``torch.compile``-d transformers in a child process.

The compiled peer runs in a child (``python -m iron.model.hf_peer``) because it can kill its process: on the H200
(torch 2.11, transformers 5.17, 2026-12-03) the documented fast decode (a static cache, ``mode="reduce-overhead"``)
died of SIGSEGV inside Inductor's CUDA-graph trees on the second decode row, taking the bench with it; the issue's
own run of it raised "accessing tensor output of CUDAGraphs that has been overwritten". A peer that crashes, raises or
runs past ``IRON_BENCH_PEER_TIMEOUT`` seconds (default 600) is reported under the table and the bench goes on.
The child gets the weights as a ``torch.save`` file (mmap-loaded) and answers one JSON line on stdout.
"""

from __future__ import annotations

import atexit
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

import numpy as np

from ..harness.measure import median_wall

_HF: dict[int, Any] = {}  # hidden size -> the eager model (one per process)
_SAVED: dict[int, str] = {}  # hidden size -> the weights file given to children


def torch_state(tensors: dict) -> dict:
    """bf16 NumPy tensors (ml_dtypes) as torch bf16 tensors on the host, by the same names."""
    import torch

    return {k: torch.from_numpy(np.ascontiguousarray(v).view(np.int16)).view(torch.bfloat16)
            for k, v in tensors.items()}


def hf_model(cfg: dict, state: dict) -> Any:
    """transformers' LlamaForCausalLM (bf16, sdpa) on CUDA with ``state`` as its weights (one per process)."""
    import torch
    from transformers import LlamaConfig as HFConfig
    from transformers import LlamaForCausalLM

    key = cfg["hidden_size"]
    if key not in _HF:
        fields = {k: v for k, v in cfg.items() if k != "model_type"}
        config = HFConfig(**fields, attn_implementation="sdpa", bos_token_id=None, eos_token_id=None,
                          pad_token_id=None)
        with torch.device("cuda"):
            model = to_dtype_keeping_rope(LlamaForCausalLM(config), torch.bfloat16).eval()
        missing, unexpected = model.load_state_dict(state, strict=False)
        missing = [k for k in missing if not (k == "lm_head.weight" and cfg.get("tie_word_embeddings"))]
        if missing or unexpected:  # a weight left at its random init would make a wrong reference, silently
            raise ValueError(f"transformers' model did not take every weight: missing {missing[:4]}, unexpected "
                             f"{unexpected[:4]}")
        model.tie_weights()
        _HF[key] = model
    return _HF[key]


def to_dtype_keeping_rope(model: Any, dtype: Any) -> Any:
    """``model.to(dtype)`` with the rotary embeddings' ``inv_freq`` buffers kept in float32, as ``from_pretrained(...,
    dtype=...)`` leaves them. ``Module.to`` casts every floating buffer: a bf16 ``inv_freq`` is off by up to 2^-9 of
    itself, so the angle at position p is off by p * 2^-9 * inv_freq -- radians by position 2048. That made the 1B
    bench rows' transformers reference 0.14 (512 tokens) and 0.52 (2048) off Iron's prefill on the H200 (2026-12-03,
    bench/experiments/prefill_check.py), with transformers bf16 and its f32 copy agreeing: both had the bad table."""
    import torch

    kept = {name: buf.detach().to(torch.float32).clone() for name, buf in model.named_buffers()
            if name.rsplit(".", 1)[-1] in ("inv_freq", "original_inv_freq")}
    model.to(dtype)
    for name, buf in kept.items():
        owner, _, leaf = name.rpartition(".")
        model.get_submodule(owner)._buffers[leaf] = buf
    return model


def prefill_time(model: Any, prompt: list[int], repeats: int) -> float:
    """Seconds from a prompt to its first token (the last position's logits, argmax), median of repeats."""
    import torch

    ids = torch.tensor([prompt], dtype=torch.int64, device="cuda")

    def once() -> None:
        with torch.no_grad():
            model(ids, logits_to_keep=1).logits[0, -1].argmax()
        torch.cuda.synchronize()

    return median_wall(once, repeats, warmup=2)


def generate_step(model: Any, prompts: list[list[int]], repeats: int, extra: dict, steps: int = 32) -> float:
    """Seconds per decode step of ``model.generate``: (N + 1 new tokens - 1 new token) / N, median of repeats."""
    import torch

    ids = torch.tensor(prompts, device="cuda")

    def gen(n: int) -> float:
        torch.cuda.synchronize()
        start = time.perf_counter()
        with torch.no_grad():
            model.generate(ids, max_new_tokens=n, min_new_tokens=n, do_sample=False, pad_token_id=0, **extra)
        torch.cuda.synchronize()
        return time.perf_counter() - start

    gen(4)
    return statistics.median((gen(steps + 1) - gen(1)) / steps for _ in range(repeats))


def compiled(cfg: dict, tensors: dict, kind: str, payload: list, repeats: int) -> tuple[float | None, str | None]:
    """(seconds, None) of transformers under ``torch.compile`` for a ``kind`` ("prefill": payload a prompt;
    "decode": payload the prompts) measured in a child process, or (None, why) when it crashed, raised or hung."""
    key = cfg["hidden_size"]
    if key not in _SAVED:
        import torch

        handle, path = tempfile.mkstemp(prefix="iron-hf-", suffix=".pt")
        os.close(handle)
        atexit.register(os.unlink, path)
        torch.save(torch_state(tensors), path)
        _SAVED[key] = path
    job = json.dumps({"cfg": cfg, "weights": _SAVED[key], "kind": kind, "payload": payload, "repeats": repeats})
    limit = float(os.environ.get("IRON_BENCH_PEER_TIMEOUT", "600"))
    try:
        done = subprocess.run([sys.executable, "-m", "iron.model.hf_peer"], input=job, capture_output=True,
                              text=True, timeout=limit, env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    except subprocess.TimeoutExpired:
        return None, f"ran past {limit:g} s in its child process (IRON_BENCH_PEER_TIMEOUT)"
    return _answer(done.returncode, done.stdout, done.stderr)


def _answer(code: int, stdout: str, stderr: str) -> tuple[float | None, str | None]:
    lines = [ln for ln in stdout.splitlines() if ln.startswith("{")]
    if code == 0 and lines:
        got = json.loads(lines[-1])
        return got.get("s"), got.get("error")
    if code < 0:
        name = signal.Signals(-code).name if -code in signal.Signals._value2member_map_ else str(-code)
        return None, f"its child process died of {name} (inside torch; the bench went on)"
    tail = stderr.strip().splitlines()[-1:] or ["no output"]
    return None, f"its child process exited with status {code}: {tail[0][:300]}"


def _child() -> None:
    """Read a job from stdin, time it, print {"s": seconds} or {"error": why}."""
    import torch

    job = json.loads(sys.stdin.read())
    model = hf_model(job["cfg"], torch.load(job["weights"], mmap=True))
    try:
        if job["kind"] == "prefill":
            model = torch.compile(model)
            s = prefill_time(model, job["payload"], job["repeats"])
        else:  # transformers' documented fast decode: a static cache, the forward compiled with CUDA graphs
            model.forward = torch.compile(model.forward, mode="reduce-overhead", fullgraph=True)
            s = generate_step(model, job["payload"], job["repeats"], {"cache_implementation": "static"})
        print(json.dumps({"s": s}))
    except Exception as e:  # noqa: BLE001 - the peer's failure is the answer
        print(json.dumps({"error": f"raised {type(e).__name__}: {str(e)[:300]}"}))


if __name__ == "__main__":
    _child()
