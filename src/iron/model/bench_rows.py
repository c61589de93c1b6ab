"""``iron bench --filter model/`` (issue 19): a Llama-family model on Iron, beside transformers where it is installed.

Rows (shape: "tokens x hidden" for prefill, "sequences x hidden" for decode; the hidden size picks the model):

- ``model/llama/prefill``: a prompt of T tokens through ``Llama.prefill`` to its first token (argmax), batch 1;
- ``model/llama/decode``: one greedy decode step of every sequence: batch 1 as ``generate`` runs it (a recorded step
  replayed on CUDA and Vulkan), batch B by ``BatchDecoder``. The time is per step: per token of each sequence.

GPU shapes have hidden 2048: the Llama-3.2-1B shape (16 layers, 32/8 heads of 64, intermediate 8192, vocabulary
128256, tied embeddings, llama3 RoPE). Host shapes use a toy model of the same architecture (hidden 64), so that the
interpreter runs a row in seconds. The weights are random (seeded, std 0.02 as transformers initialises, bf16),
made in the run: nothing is downloaded or committed.

Timing is wall-clock with the device waited for (``iron.synchronize``; transformers ``torch.cuda.synchronize``): a
model row is what its caller waits for, host work included. Median of the bench's repeats after a warm-up. GB/s
counts the weights read once per forward (the decode roofline), GFLOP/s 2 x parameters x tokens (+ attention).

Peers, where torch and transformers are installed and CUDA is present: transformers' ``LlamaForCausalLM`` with the
same weights, bf16, ``sdpa``: eager (the Ref column) and under ``torch.compile`` (the "compiled" columns; decode as
transformers documents it: a static cache and ``mode="reduce-overhead"``; ``IRON_BENCH_COMPILE=0`` skips it), the
compiled one in a child process (iron/model/hf_peer.py says why).
transformers decodes through ``generate``: a step's time is (generate of N + 1 tokens - generate of 1) / N. A
peer that fails says why under the table. The prefill row's check: Iron's logits at the last position against
transformers' (max |diff| / max |ref| < 0.05, tests/models' bf16 tolerance); without transformers it is unchecked.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from ..harness.registry import bench
from ..runtime.device_array import asarray, synchronize
from ..std.reductions import launch_argmax
from .batch import BatchDecoder
from .config import LlamaConfig
from .decode_graph import DecodeGraph, graphs_apply
from .hf_peer import compiled, generate_step, hf_model, median_wall, prefill_time, torch_state
from .llama import Llama, slot_array
from .weights import upload_weights

__all__ = ["MODELS", "model_for", "random_weights"]

_ROPE = {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 32.0, "low_freq_factor": 1.0,
         "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}
_COMMON = dict(model_type="llama", hidden_act="silu", rms_norm_eps=1e-5, tie_word_embeddings=True,
               max_position_embeddings=131072, rope_parameters=_ROPE)
#: hidden size -> a transformers-style config
MODELS = {
    2048: dict(_COMMON, vocab_size=128256, hidden_size=2048, intermediate_size=8192, num_hidden_layers=16,
               num_attention_heads=32, num_key_value_heads=8, head_dim=64),
    64: dict(_COMMON, vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
             num_attention_heads=4, num_key_value_heads=2, head_dim=16),
}
PROMPT = 32  # the decode rows' prompt length
TOLERANCE = 0.05  # the prefill check, bf16
_HELD: dict[tuple[str, int], tuple[Llama, dict]] = {}  # (backend, hidden) -> the model and its weights (one worker)


def random_weights(cfg: dict, seed: int = 0) -> dict[str, np.ndarray]:
    """A checkpoint's tensors by transformers' names: bf16 matrices of std 0.02, norm weights near 1."""
    import ml_dtypes

    rng = np.random.default_rng(seed)
    h, inter = cfg["hidden_size"], cfg["intermediate_size"]
    q, kv = cfg["num_attention_heads"] * cfg["head_dim"], cfg["num_key_value_heads"] * cfg["head_dim"]

    def mat(rows: int, cols: int) -> np.ndarray:
        return (rng.standard_normal((rows, cols), dtype=np.float32) * 0.02).astype(ml_dtypes.bfloat16)

    def norm() -> np.ndarray:
        return (1.0 + 0.02 * rng.standard_normal(h, dtype=np.float32)).astype(ml_dtypes.bfloat16)

    out = {"model.embed_tokens.weight": mat(cfg["vocab_size"], h), "model.norm.weight": norm()}
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        shapes = {"self_attn.q_proj": (q, h), "self_attn.k_proj": (kv, h), "self_attn.v_proj": (kv, h),
                  "self_attn.o_proj": (h, q), "mlp.gate_proj": (inter, h), "mlp.up_proj": (inter, h),
                  "mlp.down_proj": (h, inter)}
        out.update({f"{p}{name}.weight": mat(*shape) for name, shape in shapes.items()})
        out[p + "input_layernorm.weight"], out[p + "post_attention_layernorm.weight"] = norm(), norm()
    return out


def model_for(backend: str, hidden: int) -> tuple[Llama, dict]:
    """The row's model on ``backend`` and its host weights, made once per process."""
    key = (backend, hidden)
    if key not in _HELD:
        cfg = MODELS[hidden]
        tensors = random_weights(cfg)
        config = LlamaConfig.from_dict(cfg, "model/llama")
        _HELD[key] = (Llama(config, upload_weights(config, tensors, "bf16", backend), backend), tensors)
    return _HELD[key]


def _params(cfg: dict) -> int:
    h, inter, layers = cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"]
    q, kv = cfg["num_attention_heads"] * cfg["head_dim"], cfg["num_key_value_heads"] * cfg["head_dim"]
    return cfg["vocab_size"] * h + layers * (h * (q + 2 * kv) + q * h + 3 * h * inter + 2 * h) + h


def _bytes(shape: tuple[int, ...], itemsize: int) -> int:
    return _params(MODELS[shape[1]]) * itemsize


def _prefill_flops(shape: tuple[int, ...]) -> int:
    cfg, t = MODELS[shape[1]], shape[0]
    head = cfg["vocab_size"] * cfg["hidden_size"]  # the LM head runs on the last position only
    linear = 2 * (_params(cfg) - head) * t + 2 * head
    attention = 2 * t * t * cfg["num_attention_heads"] * cfg["head_dim"] * cfg["num_hidden_layers"]  # causal: 4 / 2
    return linear + attention


def _decode_flops(shape: tuple[int, ...]) -> int:
    return 2 * _params(MODELS[shape[1]]) * shape[0]


def _prefill(backend: str, dname: str, shape: tuple[int, ...], seed: int, options: dict) -> dict:
    tokens, hidden = shape
    m, tensors = model_for(backend, hidden)
    prompt = np.random.default_rng(seed).integers(0, m.config.vocab_size, tokens).astype(np.int32)
    ids = asarray(prompt, backend=backend)
    first = asarray(slot_array(np.zeros(1)), backend=backend)
    logits = []

    def once() -> None:
        m.reset(tokens)
        logits[:] = [m.prefill(ids)]
        launch_argmax(logits[0], first[0:1], backend)
        synchronize(backend)

    iron_s = median_wall(once, options.get("repeats", 5), warmup=2)
    peers = _Peers(MODELS[hidden], tensors)
    ref = peers.prefill(prompt, options.get("repeats", 5))
    ok, err = True, float("nan")
    if ref is not None:
        got = logits[0].numpy().astype(np.float64).reshape(-1)
        err = float(np.abs(got - ref).max() / np.abs(ref).max())
        ok = err < TOLERANCE
    failure = None if ok else f"last-position logits differ from transformers' by {err:.3g} (max |ref|-relative)"
    return peers.answer(iron_s, ok, err, failure)


def _decode(backend: str, dname: str, shape: tuple[int, ...], seed: int, options: dict) -> dict:
    batch, hidden = shape
    m, tensors = model_for(backend, hidden)
    rng = np.random.default_rng(seed)
    prompts = [rng.integers(0, m.config.vocab_size, PROMPT).tolist() for _ in range(batch)]
    repeats = options.get("repeats", 5)
    steps, warm = (32, 3) if hidden >= 1024 else (2, 1)
    total = 1 + warm + steps * repeats
    if batch == 1:
        m.reset(PROMPT + total + 1)
        history = asarray(slot_array(np.zeros(total, np.int64)), backend=backend)
        run = DecodeGraph(m, history, PROMPT, capture=graphs_apply(m))
        run.first(m.prefill(prompts[0]))
    else:
        run = BatchDecoder(m, prompts, total)
        run.prefill()
    state = {"left": warm}

    def block() -> None:  # the warm-up is one call of `warm` steps, each timed call `steps` steps
        for _ in range(state["left"]):
            run.step()
        synchronize(backend)
        state["left"] = steps

    iron_s = median_wall(block, repeats, warmup=1) / steps
    peers = _Peers(MODELS[hidden], tensors)
    peers.decode(prompts, repeats)
    return peers.answer(iron_s, True, float("nan"), None, graph=run.capture)


class _Peers:
    """transformers on the same weights (CUDA with torch and transformers), timed like Iron's row; a peer that
    cannot run records why."""

    def __init__(self, cfg: dict, tensors: dict):
        self.cfg, self.tensors = cfg, tensors
        self.times: dict[str, float] = {}
        self.errors: dict[str, str] = {}
        self.model = None
        try:
            import torch
            import transformers  # noqa: F401
        except ImportError as e:
            self.errors["torch"] = f"not installed ({e.name})"
            return
        if not torch.cuda.is_available():
            self.errors["torch"] = "not installed (no CUDA device for torch)"
            return
        self.model = hf_model(cfg, torch_state(tensors))

    def _guard(self, family: str, fn) -> Any:
        try:
            return fn()
        except Exception as e:  # noqa: BLE001 - a failing peer is reported beside the row
            self.errors[family] = f"raised {type(e).__name__}: {str(e)[:300]}"
            return None

    def prefill(self, prompt: np.ndarray, repeats: int) -> np.ndarray | None:
        if self.model is None:
            return None
        import torch

        ids = prompt.tolist()
        self.times["torch"] = self._guard("torch", lambda: prefill_time(self.model, ids, repeats))
        with torch.no_grad():
            logits = self.model(torch.tensor([ids], device="cuda"), logits_to_keep=1).logits[0, -1]
        self._compiled("prefill", ids, repeats)
        return logits.double().cpu().numpy()

    def decode(self, prompts: list[list[int]], repeats: int) -> None:
        if self.model is None:
            return
        self.times["torch"] = self._guard("torch", lambda: generate_step(self.model, prompts, repeats, {}))
        self._compiled("decode", prompts, repeats)

    def _compiled(self, kind: str, payload: list, repeats: int) -> None:
        if os.environ.get("IRON_BENCH_COMPILE", "1") == "0":
            return
        self.times["compile"], why = compiled(self.cfg, self.tensors, kind, payload, repeats)
        if why:
            self.errors["compile"] = why

    def answer(self, iron_s: float, ok: bool, err: float, failure: str | None, **config: Any) -> dict:
        refs = {k: v for k, v in self.times.items() if v is not None}
        return {"iron_s": iron_s, "ref_s": refs.get("torch"), "refs": refs, "ref_errors": dict(self.errors),
                "timing": "wall-clock, device waited for", "input_copies": 1, "ok": ok, "max_abs": err,
                "failure": failure, "stats": None, "config": config or None}


bench("model/llama/prefill", row=_prefill, shapes=[(24, 64)], device_shapes=[(512, 2048), (2048, 2048)],
      dtypes=("bf16",), bytes_moved=_bytes, flops=_prefill_flops,
      references={"compile": "transformers under torch.compile"})(_prefill)
bench("model/llama/decode", row=_decode, shapes=[(1, 64), (4, 64)], device_shapes=[(1, 2048), (8, 2048)],
      dtypes=("bf16",), bytes_moved=_bytes, flops=_decode_flops,
      references={"compile": "transformers under torch.compile"})(_decode)
