"""Quantized projection weights for the model runner (issue 19): 4- or 8-bit affine group-wise (``iron.std.quant``,
MLX's layout), quantized on the host at load and multiplied by the library's dequantizing kernels — ``std/quant_gemv``
for one token (decode), ``std/quant_gemm`` for a prompt (prefill).

The four projections of every layer (q/k/v fused, o, gate/up fused, down) are quantized; the embedding table, the
norms and the LM head stay in the model dtype (the head reads the embedding table when they are tied, and the
embedding gather reads whole rows). Scales and biases are stored in the model dtype, so the kernels' f32 arithmetic
sees them as the host rounded them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..runtime.device_array import Array, asarray
from ..std import quant
from ..std.quant_gemm import launch_gemm_q
from ..std.quant_gemv import launch_gemv_q
from .config import ModelError

__all__ = ["QuantWeight", "parse_quantize", "quantize_weight", "quant_linear"]

#: the spellings of ``Llama.load(quantize=...)`` and ``iron generate --quantize``
SPELLINGS = {"q4": 4, "q8": 8, "4": 4, "8": 8}


@dataclass
class QuantWeight:
    """An (N, K) weight as device arrays: ``packed`` u32 (N, K * bits / 32), ``scales`` and ``biases`` (N, K /
    group) in the model dtype. ``w[a:b]`` is rows a..b-1 as views (the runner slices fused matrices that way)."""

    packed: Array
    scales: Array
    biases: Array
    bits: int
    group: int

    @property
    def shape(self) -> tuple[int, int]:
        return self.packed.shape[0], self.packed.shape[1] * 32 // self.bits

    def __getitem__(self, rows: slice) -> QuantWeight:
        return QuantWeight(self.packed[rows], self.scales[rows], self.biases[rows], self.bits, self.group)


def parse_quantize(value: Any) -> int | None:
    """The bit width of ``quantize=`` (None, 4, 8, "q4", "q8")."""
    if value is None:
        return None
    bits = SPELLINGS.get(str(value).lower())
    if bits is None:
        raise ModelError(f"quantize={value!r}: choose q4 or q8 (4- or 8-bit affine, group-wise)")
    return bits


def quantize_weight(w: np.ndarray, bits: int, group: int, dtype: np.dtype, backend: str | None, name: str
                    ) -> QuantWeight:
    """``w`` (N, K) quantized on the host and uploaded; a K that ``group`` does not divide is refused by name."""
    if group not in quant.GROUPS:
        raise ModelError(f"group size {group}: choose one of {', '.join(map(str, quant.GROUPS))}")
    if w.shape[1] % group:
        raise ModelError(f"{name}: {w.shape[1]} input features are not a whole number of groups of {group}; "
                         "choose a group size that divides it (32, 64 or 128)")
    packed, scales, biases = quant.quantize(w, bits, group, dtype)
    return QuantWeight(asarray(packed, backend=backend), asarray(scales, backend=backend),
                       asarray(biases, backend=backend), bits, group)


def quant_linear(x: Array, w: QuantWeight, y: Array, backend: str) -> None:
    """y (T, N) = x (T, K) @ W^T for a quantized W: a GEMV for one row, else a GEMM."""
    if x.shape[0] == 1:
        launch_gemv_q(w.packed, w.scales, w.biases, x.reshape(-1), y.reshape(-1), w.bits, w.group, backend)
    else:
        launch_gemm_q(x, w.packed, w.scales, w.biases, y, w.bits, w.group, backend)
