"""Checkpoint weights: ``*.safetensors`` read into NumPy, checked against the config, then uploaded as device arrays.

Reading. The ``safetensors`` package is used when it is installed (with ``ml_dtypes`` imported first, so NumPy
knows ``bfloat16``); it is not one of Iron's dependencies, so without it a small reader here does the same: the format
is an 8-byte little-endian header length, a JSON header mapping each name to its dtype, shape and byte offsets, then
the raw little-endian tensors. The reader maps the file (``np.memmap``) rather than reading it, so a checkpoint of
many GB costs no copy before the upload. Sharded checkpoints (``model-00001-of-00004.safetensors`` ...) are read through
``model.safetensors.index.json``. F32, F16 and BF16 tensors are read; anything else is refused.

Upload. Weights become device arrays of one dtype (the checkpoint's, or the one asked for: a host-side cast at load,
bf16 -> f32 exact). To halve the launches of a decode step, q/k/v are stored as one (q + 2 kv, hidden) matrix and
gate/up as one (2 * intermediate, hidden) matrix: a decode step runs one GEMV over each, and a prefill runs its GEMMs
over row ranges of them (contiguous views, no copy). Biases (Qwen2's q/k/v; any other the checkpoint holds) are
uploaded beside the matrix they belong to.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np

from ..runtime.device_array import Array, asarray
from .config import LlamaConfig, ModelError
from .quantized import QuantWeight, quantize_weight

__all__ = ["LayerWeights", "ModelWeights", "read_checkpoint", "read_safetensors", "upload_weights"]

_NUMPY = {"F32": np.dtype("<f4"), "F16": np.dtype("<f2"), "BF16": np.dtype(ml_dtypes.bfloat16)}
#: the device dtypes a model runs in, by name, and their NumPy types
DTYPES = {"f32": np.dtype(np.float32), "f16": np.dtype(np.float16), "bf16": np.dtype(ml_dtypes.bfloat16)}
_FROM_NUMPY = {v: k for k, v in DTYPES.items()}


def read_safetensors(path: str | Path) -> dict[str, np.ndarray]:
    """Every tensor of one .safetensors file as a NumPy array (bf16 as ``ml_dtypes.bfloat16``)."""
    path = Path(path)
    try:
        from safetensors import safe_open
    except ImportError:
        return _read_mapped(path)
    with safe_open(str(path), framework="numpy") as f:  # ml_dtypes is imported: NumPy knows "bfloat16"
        return {name: f.get_tensor(name) for name in f.keys()}


def _read_mapped(path: Path) -> dict[str, np.ndarray]:
    """The format read by hand (see the module docstring), over a read-only memory map of the file."""
    with path.open("rb") as f:
        head = f.read(8)
        if len(head) != 8:
            raise ModelError(f"{path}: not a safetensors file (shorter than its 8-byte header length)")
        (length,) = struct.unpack("<Q", head)
        try:
            header = json.loads(f.read(length))
        except ValueError as e:
            raise ModelError(f"{path}: not a safetensors file (its header is not JSON: {e})") from None
    raw = np.memmap(path, dtype=np.uint8, mode="r")
    start = 8 + length
    tensors = {}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        kind = meta.get("dtype")
        if kind not in _NUMPY:
            raise ModelError(f"{path}: tensor {name} is {kind}; Iron loads F32, F16 and BF16 weights")
        begin, end = meta["data_offsets"]
        tensors[name] = raw[start + begin:start + end].view(_NUMPY[kind]).reshape(meta["shape"])
    return tensors


def checkpoint_files(folder: str | Path) -> list[Path]:
    """The safetensors files of a checkpoint: the shards ``model.safetensors.index.json`` lists, else
    ``model.safetensors``, else every ``*.safetensors`` (a folder may also hold another export, e.g. Mistral's
    ``consolidated.safetensors``, whose names differ)."""
    folder = Path(folder)
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        try:
            names = sorted(set(json.loads(index.read_text())["weight_map"].values()))
        except (OSError, ValueError, KeyError) as e:
            raise ModelError(f"{index}: cannot read its weight_map ({e})") from None
        missing = [n for n in names if not (folder / n).is_file()]
        if missing:
            raise ModelError(f"{index} lists {', '.join(missing)}, which {folder} does not hold")
        return [folder / n for n in names]
    if (folder / "model.safetensors").is_file():
        return [folder / "model.safetensors"]
    return sorted(folder.glob("*.safetensors"))


def read_checkpoint(folder: str | Path) -> dict[str, np.ndarray]:
    """The tensors of a checkpoint folder (``checkpoint_files``), by name."""
    files = checkpoint_files(folder)
    if not files:
        raise ModelError(f"{folder}: no *.safetensors file (Iron loads safetensors checkpoints, not .bin/.pth)")
    tensors: dict[str, np.ndarray] = {}
    for path in files:
        tensors.update(read_safetensors(path))
    return tensors


def checkpoint_dtype(tensors: dict[str, np.ndarray]) -> str:
    """The dtype a model runs in by default: its matrices' (the widest, if they are mixed)."""
    kinds = {_FROM_NUMPY.get(a.dtype) for name, a in tensors.items() if a.ndim == 2}
    for name in ("f32", "f16", "bf16"):
        if name in kinds:
            return name
    raise ModelError("the checkpoint holds no F32, F16 or BF16 matrix")


@dataclass
class LayerWeights:
    """One decoder layer's device arrays (biases None where the checkpoint has none)."""

    input_norm: Array
    post_norm: Array
    qkv: Array | QuantWeight  # (q + 2 kv, hidden): rows of q_proj, then k_proj, then v_proj
    qkv_bias: Array | None
    o: Array | QuantWeight
    o_bias: Array | None
    gate_up: Array | QuantWeight  # (2 * intermediate, hidden): rows of gate_proj, then up_proj
    gate_up_bias: Array | None
    down: Array | QuantWeight
    down_bias: Array | None


@dataclass
class ModelWeights:
    embed: Array  # (vocab, hidden)
    layers: list[LayerWeights]
    norm: Array
    lm_head: Array  # the embedding table itself when the embeddings are tied
    dtype: str


class _Reader:
    """Takes tensors by name, checking shapes and casting to the model dtype; reports the ones never taken."""

    def __init__(self, tensors: dict[str, np.ndarray], dtype: np.dtype, where: str):
        self.tensors, self.dtype, self.where, self.used = tensors, dtype, where, set()

    def get(self, name: str, shape: tuple[int, ...]) -> np.ndarray:
        if name not in self.tensors:
            raise ModelError(f"{self.where}: no tensor {name}")
        return self.optional(name, shape)

    def optional(self, name: str, shape: tuple[int, ...]) -> np.ndarray | None:
        a = self.tensors.get(name)
        if a is None:
            return None
        if tuple(a.shape) != shape:
            raise ModelError(f"{self.where}: {name} has shape {tuple(a.shape)}; the config implies {shape}")
        self.used.add(name)
        return np.ascontiguousarray(a, dtype=self.dtype) if a.dtype != self.dtype else np.ascontiguousarray(a)


def upload_weights(config: LlamaConfig, tensors: dict[str, np.ndarray], dtype: str | None = None,
                   backend: str | None = None, where: str = "checkpoint", bits: int | None = None,
                   group: int = 64) -> ModelWeights:
    """The checkpoint's tensors as device arrays of ``dtype`` (default: the checkpoint's own) on ``backend``; with
    ``bits`` (4 or 8) the layers' projections quantized group-wise (``quantized.py``)."""
    dtype = dtype or checkpoint_dtype(tensors)
    if dtype not in DTYPES:
        raise ModelError(f"dtype {dtype!r}: a model runs in f32, f16 or bf16")
    r = _Reader(tensors, DTYPES[dtype], where)
    c = config
    h, inter = c.hidden_size, c.intermediate_size

    def up(a: np.ndarray | None) -> Array | None:
        return None if a is None else asarray(a, backend=backend)

    def proj(a: np.ndarray, name: str) -> Array | QuantWeight:
        return up(a) if bits is None else quantize_weight(a, bits, group, r.dtype, backend, f"{where}: {name}")

    embed = r.get("model.embed_tokens.weight", (c.vocab_size, h))
    layers = []
    for i in range(c.num_layers):
        p = f"model.layers.{i}."
        attn, mlp = p + "self_attn.", p + "mlp."
        sizes = {"q_proj": c.q_size, "k_proj": c.kv_size, "v_proj": c.kv_size}
        qkv = [r.get(f"{attn}{n}.weight", (rows, h)) for n, rows in sizes.items()]
        qkv_b = [r.optional(f"{attn}{n}.bias", (rows,)) for n, rows in sizes.items()]
        gate_up = [r.get(f"{mlp}{n}.weight", (inter, h)) for n in ("gate_proj", "up_proj")]
        gate_up_b = [r.optional(f"{mlp}{n}.bias", (inter,)) for n in ("gate_proj", "up_proj")]
        layers.append(LayerWeights(
            input_norm=up(r.get(p + "input_layernorm.weight", (h,))),
            post_norm=up(r.get(p + "post_attention_layernorm.weight", (h,))),
            qkv=proj(np.concatenate(qkv), attn + "q/k/v_proj"),
            qkv_bias=up(_fused_bias(qkv_b, list(sizes.values()), r.dtype)),
            o=proj(r.get(attn + "o_proj.weight", (h, c.q_size)), attn + "o_proj"),
            o_bias=up(r.optional(attn + "o_proj.bias", (h,))),
            gate_up=proj(np.concatenate(gate_up), mlp + "gate/up_proj"),
            gate_up_bias=up(_fused_bias(gate_up_b, [inter, inter], r.dtype)),
            down=proj(r.get(mlp + "down_proj.weight", (h, inter)), mlp + "down_proj"),
            down_bias=up(r.optional(mlp + "down_proj.bias", (h,)))))
    embed_dev = up(embed)
    head = r.optional("lm_head.weight", (c.vocab_size, h))
    if head is None and not c.tie_word_embeddings:
        raise ModelError(f"{where}: no lm_head.weight, and tie_word_embeddings is false")
    weights = ModelWeights(embed=embed_dev, layers=layers, norm=up(r.get("model.norm.weight", (h,))),
                           lm_head=embed_dev if head is None else up(head), dtype=dtype)
    _check_all_used(tensors, r.used, where)
    return weights


def _fused_bias(parts: list[np.ndarray | None], sizes: list[int], dtype: np.dtype) -> np.ndarray | None:
    """The biases of a fused matrix, part after part; zeros stand in for a part without one (None if none has)."""
    if all(p is None for p in parts):
        return None
    return np.concatenate([p if p is not None else np.zeros(n, dtype) for p, n in zip(parts, sizes)])


def _check_all_used(tensors: dict[str, Any], used: set[str], where: str) -> None:
    """A tensor the runner would ignore means a feature it does not know: refuse rather than compute wrongly.
    (RoPE's cached ``inv_freq`` buffers, which some exports keep, are recomputed from the config.)"""
    left = sorted(n for n in tensors if n not in used and not n.endswith("rotary_emb.inv_freq"))
    if left:
        more = f" and {len(left) - 5} more" if len(left) > 5 else ""
        raise ModelError(f"{where}: tensors Iron does not know how to use: {', '.join(left[:5])}{more}")
