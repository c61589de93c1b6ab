"""Matrix-vector product y = A x: several rows per group, 16-byte accesses, x read once per group for all its rows.

Design (the way memory-bound GEMV kernels are written in CUDA and MLX): a group of ``BLOCK`` threads owns ``ROWS``
consecutive rows. Each step, a thread loads ``UNROLL`` vectors of ``VEC`` elements of x (16 bytes: 8 x f16/bf16,
4 x f32) and the same columns of each of its ``ROWS`` rows of A, all into register arrays before any arithmetic (so
``UNROLL * (ROWS + 1)`` 16-byte loads are in flight per thread), and accumulates ``ROWS`` f32 dot products. The
``ROWS`` sums are reduced with ``simd_sum`` and a shared combine of one slot per SIMD group. Adjacent threads read
adjacent 16-byte vectors (coalesced). Rows whose length is not a multiple of 16 bytes of elements use ``VEC = 1``
(scalar accesses); the last group's missing rows re-read the last row and store nothing.

sm_90 SASS (NVRTC, bf16, 2048 columns): the ``if v < nvec`` around step u = 1's loads keeps them behind the branch,
after step 0's arithmetic, so ``ROWS + 1`` loads are in flight per thread, not ``UNROLL * (ROWS + 1)``;
std/gemv_warp's kernel, timed beside this one on CUDA, issues its loads without a branch between them.

Expected on an H200 (bf16, not measured here): 16384^2 runs 4096 groups of 256 threads, 4 rows each, 10 x 16-byte
loads in flight per thread, A streamed once and x from L1/L2: near the ~4.1 TB/s torch reaches (target >= 4050 GB/s).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import numpy as np

from ..frontend import kernel
from ..frontend.autotune import table_for, tune
from ..harness.registry import InputGen, bench, test_kernel
from ..lang import (
    T,
    Tensor,
    barrier,
    cast,
    constexpr,
    f32,
    group_id,
    local_array,
    local_id,
    shared,
    simd_group,
    simd_lane,
    simd_size,
    simd_sum,
    static_range,
    vload,
)
from ..runtime import get_backend
from .elementwise import SILU, unary_op
from .gemv_warp import glu_code, launch_gemv_warp, warp_constexprs
from .softmax import dtype_label

#: the default variant (``iron build``, the compile tests): valid for every dtype
BLOCK = 256
VEC = 4
ROWS = 4
UNROLL = 2
GLU = 0


@kernel
def gemv(a: Tensor[T], x: Tensor[T], y: Tensor[T], nrows: int, ncols: int, BLOCK: constexpr, VEC: constexpr,
         ROWS: constexpr, UNROLL: constexpr, GLU: constexpr):
    """y[r] = sum_c a[r, c] * x[c] for a row-major (nrows, ncols) matrix, ncols a multiple of VEC; launch
    ceil(nrows / ROWS) * BLOCK threads in groups of BLOCK. Sums in f32. GLU = 1: x holds 2 ncols values (gate, up)
    and the vector is silu(gate) * up rounded to T, as std/elementwise swiglu would have stored it (SwiGLU fused
    into the down projection of a decode step: one launch and one round trip less); GLU = 2 the same with swiglu's
    f16/bf16 silu (``fast_exp2``: elementwise's FAST), so the fused and unfused paths agree bit for bit."""
    tid = local_id(0)
    row0 = group_id(0) * ROWS
    nvec = ncols // VEC
    acc = local_array(f32, ROWS)
    for r in static_range(ROWS):
        acc[r] = 0.0
    xs = local_array(f32, UNROLL * VEC)
    av = local_array(T, UNROLL * ROWS * VEC)
    for v0 in range(tid, nvec, BLOCK * UNROLL):
        for u in static_range(UNROLL):
            v = v0 + u * BLOCK
            if v < nvec:
                if GLU:
                    gv = vload(x, v * VEC, VEC)
                    uv = vload(x, ncols + v * VEC, VEC)
                    for j in static_range(VEC):
                        xs[u * VEC + j] = cast(unary_op(cast(gv[j], f32), SILU, GLU == 2) * cast(uv[j], f32), T)
                else:
                    xv = vload(x, v * VEC, VEC)
                    for j in static_range(VEC):
                        xs[u * VEC + j] = xv[j]
                for r in static_range(ROWS):
                    # rows past the end re-read the last row (in bounds, never stored)
                    ar = vload(a, min(row0 + r, nrows - 1) * ncols + v * VEC, VEC)
                    for j in static_range(VEC):
                        av[(u * ROWS + r) * VEC + j] = ar[j]
            else:
                for j in static_range(VEC):
                    xs[u * VEC + j] = 0.0
                for j in static_range(ROWS * VEC):
                    av[u * ROWS * VEC + j] = 0.0
        for u in static_range(UNROLL):
            for r in static_range(ROWS):
                for j in static_range(VEC):
                    acc[r] += av[(u * ROWS + r) * VEC + j] * xs[u * VEC + j]
    # one slot per (row, SIMD group); simd_size() is only known at run time, so BLOCK slots per row
    partial = shared(f32, ROWS * BLOCK)
    for r in static_range(ROWS):
        s = simd_sum(acc[r])
        if simd_lane() == 0:
            partial[r * BLOCK + simd_group()] = s
    barrier()
    if simd_group() == 0:
        for r in static_range(ROWS):
            t = 0.0
            for i in range(simd_lane(), (BLOCK + simd_size() - 1) // simd_size(), simd_size()):
                t += partial[r * BLOCK + i]
            t = simd_sum(t)
            if simd_lane() == 0 and row0 + r < nrows:
                y[row0 + r] = t


def _pow2(n: int) -> int:
    return 1 << max(0, (int(n) - 1).bit_length())


def plan_gemv(nrows: int, ncols: int, itemsize: int) -> tuple[int, int, int, int]:
    """(BLOCK, VEC, ROWS, UNROLL) for a (nrows, ncols) matrix: 16-byte vectors when every row allows them; a group
    wide enough for one row's vectors in UNROLL steps (64..256 threads); 4 rows per group once there are enough rows
    to keep every SM busy, fewer below."""
    wide = 16 // itemsize
    vec = wide if ncols % wide == 0 else 1
    block = min(max(_pow2(-(-ncols // (vec * UNROLL))), 64), 256)
    rows = 4 if nrows >= 2048 else 2 if nrows >= 512 else 1
    return block, vec, rows, UNROLL


#: (BLOCK, ROWS, UNROLL) that autotuning times on a GPU backend beside plan_gemv's choice (the first); elsewhere
#: plan_gemv's alone. More rows per group share each x vector; more unrolling puts more loads in flight.
GEMV_TUNING = {"cuda": [(128, 4, 2), (256, 8, 1), (128, 8, 2), (64, 8, 4), (256, 2, 4), (128, 2, 4)]}
#: (WARPS, R, K, BPW) of std/gemv_warp's SIMD-group kernel timed beside them: WARPS SIMD groups a group, R rows per
#: SIMD group, K vectors per lane and row in flight (capped at what a row needs), BPW blocks of rows per SIMD group.
#: sm_90, bf16: up to R * K = 16 loads of A ptxas issues as one batch (13-16 of them); R = 4, K = 8 (ptxas trickles
#: its 32) and R = 8, K = 2 are there for the long rows (down) and the GLU, whose gating a block's rows share.
GEMV_WARP_TUNING = {"cuda": [(4, 1, 8, 1), (4, 2, 8, 1), (4, 2, 8, 4), (2, 2, 8, 1), (4, 4, 4, 1), (4, 4, 8, 1),
                             (4, 8, 2, 1)]}


#: glu_out's configuration where launch_gemv does not time any (every backend but CUDA): one gate row and its up
#: row per SIMD group, four SIMD groups a group, K capped at what a row needs
GLU_OUT_DEFAULT = (4, 2, 8, 1)


@lru_cache(maxsize=256)  # asked at every launch (a decode step launches seven GEMVs)
def gemv_configs(backend: str, nrows: int, ncols: int, itemsize: int, glu_out: bool = False) -> tuple[dict, ...]:
    """The configurations ``launch_gemv`` times on ``backend`` for a (nrows, ncols) matrix, plan_gemv's first: the
    group kernel's {BLOCK, ROWS, UNROLL}, then the SIMD-group kernel's {WARPS, R, K, BPW} (K capped at what a row
    needs at the backend's SIMD width, duplicates dropped). ``glu_out``: the SIMD-group kernel's alone, those with
    an even R (GLU_OUT_DEFAULT where the backend times none). Shared between calls: do not modify."""
    configs = []
    if not glu_out:
        block, vec, rows, unroll = plan_gemv(nrows, ncols, itemsize)
        configs.append({"BLOCK": block, "ROWS": rows, "UNROLL": unroll})
        configs += [{"BLOCK": b, "ROWS": r, "UNROLL": u} for b, r, u in (table_for(GEMV_TUNING, backend) or [])
                    if (b, r, u) != (block, rows, unroll) and (vec == 1 or b * vec * u <= max(ncols, vec))]
    warp = [c for c in (table_for(GEMV_WARP_TUNING, backend) or []) if not glu_out or c[1] % 2 == 0]
    if glu_out and not warp:
        warp = [GLU_OUT_DEFAULT]
    if warp:
        width = get_backend(backend).simd_width()
        seen = set()
        for w, r, k, bpw in warp:
            cfg = {"WARPS": w, "R": r, "K": warp_constexprs(ncols, itemsize, width, r, k)[2], "BPW": bpw}
            if tuple(cfg.values()) not in seen:
                seen.add(tuple(cfg.values()))
                configs.append(cfg)
    return tuple(configs)


def launch_config(cfg: dict, a: Any, x: Any, y: Any, backend: str | None = None, glu: bool = False,
                  glu_out: bool = False) -> tuple[int, int, int, int]:
    """y = a @ x (``glu``: a @ (silu(gate) * up); ``glu_out``: silu(gate) * up of a @ x's halves) by one of
    ``gemv_configs``' configurations, without tuning; returns what ``launch_gemv`` does."""
    nrows, ncols = a.shape
    if "WARPS" in cfg:
        block, vec, r, _ = launch_gemv_warp(a, x, y, backend, glu, cfg["WARPS"], cfg["R"], cfg["K"], cfg["BPW"],
                                            glu_out)
        return block, vec, r, 0
    if glu_out:
        raise ValueError("gemv: glu_out runs on std/gemv_warp's kernel only (a configuration with WARPS)")
    vec = plan_gemv(nrows, ncols, a.dtype.itemsize)[1]
    groups = -(-nrows // cfg["ROWS"])
    gemv[groups * cfg["BLOCK"], cfg["BLOCK"]](a, x, y, nrows, ncols, cfg["BLOCK"], vec, cfg["ROWS"], cfg["UNROLL"],
                                              glu_code(glu, a), backend=backend)
    return cfg["BLOCK"], vec, cfg["ROWS"], cfg["UNROLL"]


def launch_gemv(a: Any, x: Any, y: Any, backend: str | None = None, glu: bool = False, glu_out: bool = False
                ) -> tuple[int, int, int, int]:
    """y = a @ x for a C-contiguous (nrows, ncols) matrix; returns the constexprs it ran: (BLOCK, VEC, ROWS, UNROLL)
    of the group kernel, or (group threads, VEC, rows per SIMD group, 0) where std/gemv_warp's kernel ran (its sums
    depend on VEC and the SIMD width only). ``glu``: x is (gate, up), 2 ncols values, and y = a @ (silu(gate) * up)
    (the gated vector rounded to a's dtype). ``glu_out``: a's rows are the gate rows then as many up rows (nrows
    even), and y (nrows / 2 values) = silu(g) * u of g, u = a @ x's two halves, each rounded to a's dtype: what
    std/elementwise swiglu_rows stores from the plain GEMV's output (std/gemv_warp's kernel only)."""
    nrows, ncols = a.shape
    if glu and glu_out:
        raise ValueError("gemv: glu (gating x) and glu_out (gating y) do not combine")
    be = backend or get_backend(None).name
    configs = gemv_configs(be, nrows, ncols, a.dtype.itemsize, glu_out)
    name = "std/gemv_glu" if glu else "std/gemv_glu_out" if glu_out else "std/gemv"
    # cold: timed as a decode step streams weights, from memory, not L2
    cfg = tune(name, configs, lambda c: launch_config(c, a, x, y, backend, glu, glu_out), backend=be,
               dtype=dtype_label(a), key=(nrows, ncols), cold=True)
    return launch_config(cfg, a, x, y, backend, glu, glu_out)


def _setup(gen: InputGen) -> dict[str, np.ndarray]:
    rows, ncols = gen.shape
    return {"a": gen.random(), "x": gen.random(shape=(ncols,)), "y": gen.poisoned(shape=(rows,))}


def _launch(d, backend: str) -> None:
    launch_gemv(d["a"], d["x"], d["y"], backend)


def _oracle(d) -> np.ndarray:
    return d["a"].astype(np.float64) @ d["x"].astype(np.float64)


def _reference(d) -> np.ndarray:
    return (d["a"].astype(np.float32) @ d["x"].astype(np.float32)).astype(d["a"].dtype)


bench("std/gemv/gemv", setup=_setup, launch=_launch, output="y",
      references={"numpy": _reference, "torch": lambda d: __import__("torch").mv(d["a"], d["x"], out=d["ref_out"]),
                  "mlx": "mlx.core.matmul"},
      bytes_moved=lambda shape, itemsize: (shape[0] * shape[1] + shape[0] + shape[1]) * itemsize,
      flops=lambda shape: 2 * shape[0] * shape[1],
      device_shapes=[(4096, 4096), (8192, 8192), (16384, 16384), (128256, 4096)])(gemv)
# inputs are N(0,1): each output is a sum of ncols terms, |y| ~ sqrt(ncols), so the f32 summation error is absolute
# at ~ ncols * 2^-24 * sqrt(ncols)-ish; f16/bf16 add the output rounding (relative)
test_kernel(oracle=_oracle, domain="signed", shapes=[(256, 1024), (1024, 1024), (37, 300)],
            tolerance={"f32": (2e-4, 1e-5), "f16": (2e-4, 1e-3), "bf16": (2e-4, 7.9e-3)})(gemv)
