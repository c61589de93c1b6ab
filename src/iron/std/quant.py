"""Quantized weights (issue 18): 4-bit and 8-bit affine group-wise quantization on the host, MLX's layout.

A weight matrix W of N output rows by K inputs is quantized per row in groups of ``group`` (32, 64 or 128)
consecutive K elements. Each group has a scale s and a bias b (stored in f16, bf16 or f32) and each element an
integer q in [0, 2^bits - 1] with w ~ s * q + b (MLX's ``mode="affine"``):

- s = (max - min) / (2^bits - 1), b = min over the group, both rounded once to the storage dtype; q is then
  round((w - b) / s) clipped to [0, 2^bits - 1], computed from the *rounded* s and b, so that the dequantized value
  s * q + b is within s / 2 of w wherever w lies in [b, b + s (2^bits - 1)]. (MLX additionally shifts the grid so
  that the larger-magnitude end is exact; any such choice dequantizes through the same formula and kernels.)
- q is packed little end first into u32 words: 32 / bits consecutive elements per word, element j of a word at bits
  bits*j .. bits*j + bits - 1 (4-bit: 8 per word, element j at bits 4j..4j+3; 8-bit: 4 per word). So the packed W is
  (N, K * bits / 32) u32 and the scales and biases are (N, K / group), row-major: MLX's ``quantize`` output.

``dequantize`` gives W in float64 (the oracles' weights: s and b as stored, q exactly). K must be a multiple of
``group``. The kernels are in ``quant_gemv`` (decode: y = W x) and ``quant_gemm`` (prefill: Y = X W^T).
"""

from __future__ import annotations

from typing import Any

import numpy as np

BITS = (4, 8)
GROUPS = (32, 64, 128)


def _check(bits: int, group: int, k: int) -> None:
    if bits not in BITS:
        raise ValueError(f"bits must be one of {BITS}, not {bits}")
    if group not in GROUPS:
        raise ValueError(f"group must be one of {GROUPS}, not {group}")
    if k % group:
        raise ValueError(f"K = {k} is not a multiple of the group size {group}")


def quantize(w: np.ndarray, bits: int = 4, group: int = 64, dtype: Any = np.float16
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(packed u32 (N, K*bits/32), scales (N, K/group), biases (N, K/group)) of a 2-D weight, scales and biases in
    ``dtype`` (a NumPy dtype: float16, float32 or ml_dtypes' bfloat16)."""
    w = np.asarray(w, dtype=np.float64)
    n, k = w.shape
    _check(bits, group, k)
    qmax = (1 << bits) - 1
    g = w.reshape(n, k // group, group)
    lo, hi = g.min(axis=-1), g.max(axis=-1)
    scales = np.maximum((hi - lo) / qmax, 1e-7).astype(dtype)
    biases = lo.astype(dtype)
    s = scales.astype(np.float64)[..., None]
    b = biases.astype(np.float64)[..., None]
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.where(s > 0, np.rint((g - b) / np.where(s > 0, s, 1.0)), 0.0)
    q = np.clip(q, 0, qmax).astype(np.uint64).reshape(n, k)
    return pack(q, bits), scales, biases


def pack(q: np.ndarray, bits: int) -> np.ndarray:
    """Integers q (N, K) in [0, 2^bits) to u32 words (N, K*bits/32): element j of each word at bits bits*j."""
    per = 32 // bits
    n, k = q.shape
    q = np.asarray(q, dtype=np.uint64).reshape(n, k // per, per)
    shifts = (np.arange(per, dtype=np.uint64) * np.uint64(bits))[None, None, :]
    return np.bitwise_or.reduce(q << shifts, axis=-1).astype(np.uint32)


def unpack(packed: np.ndarray, bits: int) -> np.ndarray:
    """The integers (N, K) of packed u32 words (the inverse of ``pack``), as int64."""
    per = 32 // bits
    words = np.asarray(packed, dtype=np.uint32).astype(np.int64)
    shifts = np.arange(per, dtype=np.int64) * bits
    q = (words[..., None] >> shifts) & ((1 << bits) - 1)
    return q.reshape(words.shape[0], words.shape[1] * per)


def dequantize(packed: np.ndarray, scales: np.ndarray, biases: np.ndarray, bits: int, group: int) -> np.ndarray:
    """W (N, K) in float64: s * q + b with each element's group scale and bias as stored."""
    q = unpack(packed, bits).astype(np.float64)
    n, k = q.shape
    _check(bits, group, k)
    s = np.repeat(np.asarray(scales).astype(np.float64), group, axis=1)
    b = np.repeat(np.asarray(biases).astype(np.float64), group, axis=1)
    return s * q + b


def torch_dequantize(packed: Any, scales: Any, biases: Any, bits: int, group: int) -> Any:
    """The torch peer's first step: W (N, K) in the scales' dtype, from device tensors (u32 viewed as i32: the
    arithmetic shift is masked, so the sign bit does no harm)."""
    import torch

    per = 32 // bits
    words = packed.view(torch.int32)
    shifts = torch.arange(per, device=words.device, dtype=torch.int32) * bits
    q = ((words.unsqueeze(-1) >> shifts) & ((1 << bits) - 1)).reshape(words.shape[0], -1)
    s = scales.repeat_interleave(group, dim=1)
    b = biases.repeat_interleave(group, dim=1)
    return (q.to(scales.dtype) * s + b).to(scales.dtype)


def random_weight(rng: np.random.Generator, n: int, k: int) -> np.ndarray:
    """A (N, K) float64 weight scaled like a trained layer's (rows of norm ~1), so that W x stays O(|x|)."""
    return rng.standard_normal((n, k)) / np.sqrt(k)
