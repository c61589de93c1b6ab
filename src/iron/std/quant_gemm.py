"""Dequantizing GEMM (prefill): Y (M, N) = X (M, K) W^T for a 4-bit or 8-bit affine group-wise quantized W (N, K)
(layout: ``quant``), sums in f32, Y in X's dtype. K must be a multiple of GROUP (so of 32).

``gemm_q`` (f16/bf16, matrix fragments): a group of WM x WN SIMD groups computes a BM x BN tile of Y, each SIMD group
a (BM / WM) x (BN / WN) warp tile of ``frag_acc(MT, NT)``. Per step of BK = 32 along K (inside one quantization
group, since GROUP is a multiple of 32) the group stages the X tile (BM x 32, 16-byte loads, zeros past M) in shared
memory and dequantizes the W tile: each thread takes one u32 word of a row (BITS words per row and step), unpacks its
32 / BITS elements, computes s * q + b in f32 with the row's group scale and bias, rounds to T (as torch's
dequantize-then-matmul does) and writes them with one vector store, rows stored N-major (B^T for ``frag_b``). Then
BK / 16 rounds of ``frag_a``/``frag_b``/``mma``; the store masks the edges. mma.sync on NVIDIA, the scalar fallback
elsewhere. Not yet: asynchronous multi-stage pipelining of X and the words (loads are synchronous, one stage).

``gemm_q_simt`` (f32, and any T): the same tiling on plain FMAs, each of 256 threads owning a 4 x 4 block of a
64 x 64 tile, the weights dequantized to f32 in shared memory (no rounding).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..frontend import kernel
from ..harness.registry import InputGen, bench, test_kernel
from ..lang import (
    DTypeVar,
    T,
    Tensor,
    barrier,
    bf16,
    cast,
    constexpr,
    f16,
    f32,
    frag_a,
    frag_acc,
    frag_b,
    frag_store,
    group_id,
    group_size,
    local_array,
    local_id,
    mma,
    shared,
    simd_group,
    static_range,
    u32,
    vload,
    vstore,
)
from ..runtime import get_backend
from . import quant as Q
from .softmax import dtype_label

H = DTypeVar("H", (f16, bf16))
#: iron build's defaults
BITS = 4
GROUP = 64
BM = 64
BN = 64
WM = 2
WN = 2
BK = 32
LD = BK + 8  # padded shared rows


@kernel
def gemm_q(X: Tensor[H], w: Tensor[u32], scales: Tensor[H], biases: Tensor[H], Y: Tensor[H], M: int, N: int,
           K: int, BITS: constexpr, GROUP: constexpr, BM: constexpr, BN: constexpr, WM: constexpr, WN: constexpr):
    """Y = X W^T; launch (ceil(N / BN) * G, ceil(M / BM)) threads in groups of (G, 1), G = WM * WN * simd_size()."""
    MT = BM // WM // 16
    NT = BN // WN // 16
    PER = 32 // BITS
    MASK = (1 << BITS) - 1
    sa = shared(H, BM * LD)
    sb = shared(H, BN * LD)
    tid = local_id(0)
    nthreads = group_size(0)
    warp = simd_group()
    wm = warp // WN
    wn = warp % WN
    m0 = group_id(1) * BM
    n0 = group_id(0) * BN
    wrow = K // PER
    grow = K // GROUP
    acc = frag_acc(MT, NT)
    for k0 in range(0, K, BK):
        for v in range(tid, BM * (BK // 8), nthreads):
            r = v // (BK // 8)
            c = (v % (BK // 8)) * 8
            if m0 + r < M:
                vstore(sa, r * LD + c, vload(X, (m0 + r) * K + k0 + c, 8))
            else:
                for e in static_range(8):
                    sa[r * LD + c + e] = 0.0
        for v in range(tid, BN * BITS, nthreads):  # BITS words per row per step of 32
            r = v // BITS
            i = v % BITS
            n = min(n0 + r, N - 1)  # rows past N repeat the last (never stored)
            word = w[n * wrow + k0 // PER + i]
            g = n * grow + k0 // GROUP
            s = cast(scales[g], f32)
            b = cast(biases[g], f32)
            vals = local_array(H, PER)
            for j in static_range(PER):
                vals[j] = s * cast((word >> (BITS * j)) & MASK, f32) + b
            vstore(sb, r * LD + i * PER, vals)
        barrier()
        for kk in static_range(BK // 16):
            a = frag_a(sa, (wm * MT * 16) * LD + kk * 16, LD, False, MT)
            bf = frag_b(sb, (wn * NT * 16) * LD + kk * 16, LD, True, NT)
            acc = mma(a, bf, acc)
        barrier()
    r0 = m0 + wm * MT * 16
    col = n0 + wn * NT * 16
    if r0 < M and col < N:
        frag_store(Y, r0 * N + col, N, acc, M - r0, N - col)


@kernel
def gemm_q_simt(X: Tensor[T], w: Tensor[u32], scales: Tensor[T], biases: Tensor[T], Y: Tensor[T], M: int, N: int,
                K: int, BITS: constexpr, GROUP: constexpr):
    """Y = X W^T on FMAs: a 64 x 64 tile per group of 256 threads, 4 x 4 outputs per thread; launch
    (ceil(N / 64) * 256, ceil(M / 64)) threads in groups of (256, 1)."""
    PER = 32 // BITS
    MASK = (1 << BITS) - 1
    sa = shared(f32, 64 * 33)  # X tile, k fastest, padded
    sb = shared(f32, 64 * 33)  # dequantized W tile, k fastest
    tid = local_id(0)
    tm = tid // 16
    tn = tid % 16
    m0 = group_id(1) * 64
    n0 = group_id(0) * 64
    wrow = K // PER
    grow = K // GROUP
    acc = local_array(f32, 16)
    for e in static_range(16):
        acc[e] = 0.0
    for k0 in range(0, K, 32):
        for v in range(tid, 64 * 32, 256):
            r = v // 32
            c = v % 32
            sa[r * 33 + c] = X[min(m0 + r, M - 1) * K + k0 + c]
        for v in range(tid, 64 * BITS, 256):
            r = v // BITS
            i = v % BITS
            n = min(n0 + r, N - 1)
            word = w[n * wrow + k0 // PER + i]
            g = n * grow + k0 // GROUP
            for j in static_range(PER):
                sb[r * 33 + i * PER + j] = scales[g] * cast((word >> (BITS * j)) & MASK, f32) + biases[g]
        barrier()
        for kk in range(32):
            for a in static_range(4):
                xa = sa[(tm + 16 * a) * 33 + kk]
                for b in static_range(4):
                    acc[a * 4 + b] += xa * sb[(tn + 16 * b) * 33 + kk]
        barrier()
    for a in static_range(4):
        for b in static_range(4):
            if m0 + tm + 16 * a < M and n0 + tn + 16 * b < N:
                Y[(m0 + tm + 16 * a) * N + n0 + tn + 16 * b] = acc[a * 4 + b]


#: (BM, BN, WM, WN) of gemm_q
CONFIG = (64, 64, 2, 2)


def launch_gemm_q(x: Any, w: Any, scales: Any, biases: Any, y: Any, bits: int, group: int,
                  backend: str | None = None) -> None:
    """y (M, N) = x (M, K) @ dequantize(w, scales, biases)^T: matrix fragments for f16/bf16, FMAs for f32."""
    m, k = x.shape
    n = w.shape[0]
    if bits not in Q.BITS or group not in Q.GROUPS or k % group or tuple(w.shape) != (n, k * bits // 32) \
            or tuple(scales.shape) != (n, k // group):
        raise ValueError(f"gemm_q: bits {bits}, group {group}, x {tuple(x.shape)}, packed {tuple(w.shape)}, "
                         f"scales {tuple(scales.shape)} do not fit")
    name = backend or get_backend(None).name
    if dtype_label(x) == "f32":
        gemm_q_simt[(-(-n // 64) * 256, -(-m // 64)), (256, 1)](x, w, scales, biases, y, m, n, k, bits, group,
                                                                backend=backend)
        return
    bm, bn, wm, wn = CONFIG
    g = wm * wn * get_backend(name).simd_width()
    gemm_q[(-(-n // bn) * g, -(-m // bm)), (g, 1)](x, w, scales, biases, y, m, n, k, bits, group, bm, bn, wm, wn,
                                                   backend=backend)


class _Variant:
    """``gemm_q`` registered once per bit width."""

    def __init__(self, bits: int):
        self.fn = gemm_q.fn
        self.kernel = gemm_q
        self.bits = bits

    def __repr__(self) -> str:
        return f"<iron kernel gemm_q ({self.bits}-bit)>"


def _setup(gen: InputGen, bits: int, group: int) -> dict[str, np.ndarray]:
    m, n, k = gen.shape
    w, s, b = Q.quantize(Q.random_weight(gen.rng, n, k), bits, group, gen.dtype)
    return {"x": gen.random(shape=(m, k)), "w": w, "scales": s, "biases": b, "y": gen.poisoned(shape=(m, n))}


def oracle(d: dict, bits: int, group: int) -> np.ndarray:
    """float64: X times the dequantized weights, transposed."""
    return d["x"].astype(np.float64) @ Q.dequantize(d["w"], d["scales"], d["biases"], bits, group).T


def _torch_mm(d: dict, bits: int, group: int):
    """torch's dequantize-then-matmul: W dequantized to T, then ``torch.matmul(x, W.T)``."""
    import torch

    return torch.matmul(d["x"], Q.torch_dequantize(d["w"], d["scales"], d["biases"], bits, group).T,
                        out=d["ref_out"])


def _register(bits: int, group: int = 64) -> None:
    target = _Variant(bits)
    bench(f"std/quant/gemm_q{bits}", setup=lambda gen: _setup(gen, bits, group), output="y",
          launch=lambda d, be: launch_gemm_q(d["x"], d["w"], d["scales"], d["biases"], d["y"], bits, group, be),
          references={"numpy": lambda d: oracle(d, bits, group).astype(d["x"].dtype),
                      "torch": lambda d: _torch_mm(d, bits, group), "mlx": "mlx.core.quantized_matmul"},
          bytes_moved=lambda shape, itemsize: shape[1] * shape[2] * bits // 8 + (shape[0] * shape[2]
                                                                               + shape[0] * shape[1]) * itemsize,
          flops=lambda shape: 2 * shape[0] * shape[1] * shape[2],
          device_shapes=[(512, 4096, 4096), (2048, 14336, 4096), (4096, 16384, 16384)])(target)
    # |Y| ~ |X| (rows of W of norm ~1); f16/bf16: each dequantized weight and the output rounded to T
    test_kernel(oracle=lambda d: oracle(d, bits, group), domain="signed", shapes=[(33, 70, 128), (5, 16, 256)],
                tolerance={"f32": (1e-5, 1e-5), "f16": (4e-3, 2e-3), "bf16": (3e-2, 1.6e-2)})(target)


_register(4)
_register(8)
