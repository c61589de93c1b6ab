"""An independent float64 NumPy forward pass of the Llama family (Llama 2 and 3, Mistral, Qwen2): the oracle for
Iron's model runner, written from the models' definitions, and checked against transformers' recorded outputs in
tests/models/test_refs_data.py.

It reads a transformers checkpoint folder (config.json and model.safetensors) with NumPy alone: no torch, and no
safetensors package (the format is an 8-byte little-endian header length, a JSON header of name -> dtype, shape and
byte offsets, then the raw little-endian tensors). bfloat16 weights widen exactly to float32, then to float64.

Conventions that a port must match (they are transformers', i.e. those of HF-layout checkpoints):
- RoPE rotates the two *halves* of each head (x[:d/2], x[d/2:]), not interleaved pairs; cos/sin repeat the d/2
  frequencies twice; positions count from 0.
- Llama 3 RoPE scaling rescales each inverse frequency by its wavelength against original_max_position_embeddings:
  kept below old/high_freq_factor, divided by `factor` above old/low_freq_factor, blended in between.
- RMSNorm is weight * x / sqrt(mean(x^2) + eps) (no mean subtraction, weight applied after normalising).
- GQA: query head h reads key/value head h // (heads / kv_heads).
- The MLP is down(silu(gate(x)) * up(x)); the attention scale is head_dim ** -0.5.
- Qwen2 has biases on q, k and v (not o); Llama's `attention_bias` puts them on all four; a bias is used wherever
  the checkpoint holds one.
- With tie_word_embeddings the logits use the embedding matrix, and the checkpoint has no lm_head.weight.
- transformers 5 keeps rope_theta and the scaling in `rope_parameters`; older files have `rope_theta` and
  `rope_scaling` (whose type key may be `type`): both are read.
"""

from __future__ import annotations

import json
import math
import struct
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

_DTYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "I64": "<i8", "I32": "<i4", "I16": "<i2", "I8": "i1",
           "U8": "u1", "BOOL": "?"}


def read_safetensors(path: str | Path) -> dict[str, np.ndarray]:
    """Every tensor of a .safetensors file, as NumPy arrays (bfloat16 widened to float32)."""
    raw = Path(path).read_bytes()
    (length,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + length])
    data = memoryview(raw)[8 + length:]
    tensors = {}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        start, end = meta["data_offsets"]
        if meta["dtype"] == "BF16":
            array = (np.frombuffer(data[start:end], "<u2").astype(np.uint32) << 16).view(np.float32)
        elif meta["dtype"] in _DTYPES:
            array = np.frombuffer(data[start:end], _DTYPES[meta["dtype"]])
        else:
            raise ValueError(f"{path}: tensor {name} has unsupported dtype {meta['dtype']}")
        tensors[name] = array.reshape(meta["shape"])
    return tensors


@dataclass(frozen=True)
class Config:
    vocab_size: int
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    rms_norm_eps: float
    tie_word_embeddings: bool
    rope: dict = field(default_factory=dict)  # rope_type, rope_theta and the scaling parameters

    @classmethod
    def from_json(cls, cfg: dict) -> Config:
        if cfg.get("model_type") not in ("llama", "mistral", "qwen2"):
            raise NotImplementedError(f"model_type {cfg.get('model_type')!r}")
        if cfg.get("hidden_act", "silu") != "silu":
            raise NotImplementedError(f"hidden_act {cfg['hidden_act']!r}")
        if cfg.get("sliding_window") is not None and cfg.get("use_sliding_window", True):
            raise NotImplementedError("sliding-window attention")
        heads = cfg["num_attention_heads"]
        return cls(
            vocab_size=cfg["vocab_size"], hidden_size=cfg["hidden_size"], num_layers=cfg["num_hidden_layers"],
            num_heads=heads, num_kv_heads=cfg.get("num_key_value_heads") or heads,
            head_dim=cfg.get("head_dim") or cfg["hidden_size"] // heads, rms_norm_eps=cfg["rms_norm_eps"],
            tie_word_embeddings=cfg.get("tie_word_embeddings", False), rope=_rope_parameters(cfg))


def _rope_parameters(cfg: dict) -> dict:
    rope = dict(cfg.get("rope_parameters") or cfg.get("rope_scaling") or {})
    rope.setdefault("rope_type", rope.pop("type", "default"))
    rope.setdefault("rope_theta", cfg.get("rope_theta", 10000.0))
    if rope.get("partial_rotary_factor", 1.0) != 1.0:
        raise NotImplementedError("partial rotary embeddings")
    if rope["rope_type"] not in ("default", "llama3"):
        raise NotImplementedError(f"rope_type {rope['rope_type']!r}")
    return rope


@dataclass
class Model:
    config: Config
    weights: dict[str, np.ndarray]  # float64, transformers' names

    @classmethod
    def load(cls, folder: str | Path) -> Model:
        folder = Path(folder)
        config = Config.from_json(json.loads((folder / "config.json").read_text()))
        weights = {k: v.astype(np.float64) for k, v in read_safetensors(folder / "model.safetensors").items()}
        if "lm_head.weight" not in weights:
            if not config.tie_word_embeddings:
                raise ValueError(f"{folder}: no lm_head.weight and tie_word_embeddings is false")
            weights["lm_head.weight"] = weights["model.embed_tokens.weight"]
        return cls(config, weights)


def rope_inv_freq(config: Config) -> np.ndarray:
    """The head_dim/2 inverse frequencies, with Llama 3 scaling where the config asks for it."""
    rope, dim = config.rope, config.head_dim
    inv = 1.0 / rope["rope_theta"] ** (np.arange(0, dim, 2, dtype=np.float64) / dim)
    if rope["rope_type"] != "llama3":
        return inv
    factor, low, high = rope["factor"], rope["low_freq_factor"], rope["high_freq_factor"]
    old_len = rope["original_max_position_embeddings"]
    wavelen = 2 * math.pi / inv
    smooth = (old_len / wavelen - low) / (high - low)
    blended = (1 - smooth) * inv / factor + smooth * inv
    return np.where(wavelen < old_len / high, inv, np.where(wavelen > old_len / low, inv / factor, blended))


def rms_norm(x: np.ndarray, weight: np.ndarray, eps: float) -> np.ndarray:
    return weight * (x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps))


def _linear(weights: dict, name: str, x: np.ndarray) -> np.ndarray:
    y = x @ weights[name + ".weight"].T
    bias = weights.get(name + ".bias")
    return y if bias is None else y + bias


def _rotate(x: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
    """RoPE on (heads, T, head_dim), rotating the two halves of each head."""
    half = x.shape[-1] // 2
    rotated = np.concatenate([-x[..., half:], x[..., :half]], axis=-1)
    return x * cos + rotated * sin


def attention(model: Model, layer: int, h: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
    """Causal grouped-query self-attention of one layer over the whole sequence h (T, hidden)."""
    c, w, p = model.config, model.weights, f"model.layers.{layer}.self_attn."
    t = h.shape[0]
    q = _linear(w, p + "q_proj", h).reshape(t, c.num_heads, c.head_dim).transpose(1, 0, 2)
    k = _linear(w, p + "k_proj", h).reshape(t, c.num_kv_heads, c.head_dim).transpose(1, 0, 2)
    v = _linear(w, p + "v_proj", h).reshape(t, c.num_kv_heads, c.head_dim).transpose(1, 0, 2)
    q, k = _rotate(q, cos, sin), _rotate(k, cos, sin)
    group = c.num_heads // c.num_kv_heads
    k, v = np.repeat(k, group, axis=0), np.repeat(v, group, axis=0)  # head h reads kv head h // group
    scores = q @ k.transpose(0, 2, 1) * c.head_dim**-0.5
    scores = np.where(np.tril(np.ones((t, t), dtype=bool)), scores, -np.inf)
    probs = np.exp(scores - scores.max(axis=-1, keepdims=True))
    probs /= probs.sum(axis=-1, keepdims=True)
    out = (probs @ v).transpose(1, 0, 2).reshape(t, c.num_heads * c.head_dim)
    return _linear(w, p + "o_proj", out)


def mlp(model: Model, layer: int, h: np.ndarray) -> np.ndarray:
    w, p = model.weights, f"model.layers.{layer}.mlp."
    gate = _linear(w, p + "gate_proj", h)
    return _linear(w, p + "down_proj", gate / (1.0 + np.exp(-gate)) * _linear(w, p + "up_proj", h))


def forward(model: Model, ids) -> np.ndarray:
    """Logits (T, vocab) for the token ids at positions 0..T-1, float64."""
    c, w = model.config, model.weights
    ids = np.asarray(ids, dtype=np.int64)
    x = w["model.embed_tokens.weight"][ids]
    freqs = np.arange(len(ids), dtype=np.float64)[:, None] * rope_inv_freq(c)[None, :]
    cos, sin = np.cos(np.concatenate([freqs, freqs], -1)), np.sin(np.concatenate([freqs, freqs], -1))
    for i in range(c.num_layers):
        p = f"model.layers.{i}."
        x = x + attention(model, i, rms_norm(x, w[p + "input_layernorm.weight"], c.rms_norm_eps), cos, sin)
        x = x + mlp(model, i, rms_norm(x, w[p + "post_attention_layernorm.weight"], c.rms_norm_eps))
    x = rms_norm(x, w["model.norm.weight"], c.rms_norm_eps)
    return x @ w["lm_head.weight"].T


def greedy(model: Model, prompt, steps: int) -> tuple[list[int], np.ndarray]:
    """Greedy continuation of `steps` tokens and, per step, the logits it was taken from (steps, vocab).

    Recomputes the whole sequence each step (no KV cache): a different schedule from transformers' decode loop."""
    ids, rows = list(prompt), []
    for _ in range(steps):
        logits = forward(model, ids)[-1]
        rows.append(logits)
        ids.append(int(np.argmax(logits)))
    return ids[len(prompt):], np.stack(rows)
