"""Issue 16: where silu's time goes on a Vulkan GPU (on the H200 the std silu row ran at 54 % of CUDA's while exp ran
at 74 %, with the same tuning). Kernels built like std's ``unary`` (``load_lanes``/``store_lanes``: 16-byte vectors of
bf16, EPT elements a thread, f32 arithmetic) over the same 2^28 elements, the variant given as a constexpr:

0 exp(x) · 1 silu as std writes it, x / (1 + exp2(-x log2 e)) · 2 the same with the division made a product (wrong
values, timing only) · 3 x * (1 / (1 + ...)) · 4 the division alone, x / (1 + x x) · 5 relu (memory only) ·
6 silu with no OpFDiv: e = exp(-|x|) in (0, 1], d = 1 + e in (1, 2], 1/d from rsqrt(d)^2 and one Newton step, the
quotient corrected once (within about an ulp; d never overflows, so no special case) · 7 the same without the
Newton steps (x rsqrt(d)^2: timing only); then std's own rows (``launch_unary``: exp, silu, sigmoid, relu).

Timing (host clock around REPS launches and one wait, after WARM launches; GPU-bound at this size): every row is timed
in turn, ROUNDS times, keeping each row's best, before any read-back. Session 22's first form timed 10 launches right
after a 512 MB read-back and gave relu 984 us beside exp's 460 on NVIDIA's driver: not a kernel's time.

The gap between 1 and 2 is what OpFDiv costs on that driver; 4 against 5 the division without the exp. VK_SILU_IEEE=0
builds the modules without SignedZeroInfNanPreserve (with IRON_CACHE=0), to see whether the mode makes the driver's
OpFDiv slow; VK_SILU_NATIVE_EXP=1 builds the variants with ``fast_exp``/``fast_exp2`` (GLSL Exp/Exp2 on Vulkan, the
driver's own, 3 + 2|x| ulp promised) instead of ``exp``/``exp2`` (precise_exp.py's sequence), to see what that
sequence costs (std's rows take ``fast_exp`` for bf16 since session 22 either way). Each variant's largest difference
from float64 silu (in bf16 ulps of the result) is printed.

    python bench/experiments/vk_silu_variants.py [backend] [out.json]      (VK_SILU_LOG2N: 28 by default)
"""

from __future__ import annotations

import json
import os
import sys
import time

import numpy as np

import iron
from iron import (
    Tensor,
    abs,
    constexpr,
    exp,
    exp2,
    f32,
    fast_exp,
    fast_exp2,
    fma,
    local_array,
    rsqrt,
    static_range,
    where,
)
from iron.lang import T
from iron.std.elementwise import load_lanes, store_lanes

N, VEC, PER = 1 << int(os.environ.get("VK_SILU_LOG2N", "28")), 8, 2
WARM, REPS, ROUNDS = 5, 30, 2
FX = int(os.environ.get("VK_SILU_NATIVE_EXP", "0") == "1")
NAMES = ("exp", "silu (x / d)", "x * d (no division)", "x * (1 / d)", "x / (1 + x x)", "relu",
         "silu by rsqrt + Newton", "silu by rsqrt alone")


@iron.func
def ex(x, FX, TWO):
    """exp(x) (exp2(x) when TWO is 1), by fast_exp / fast_exp2 when FX is 1."""
    r = 0.0
    if FX == 1:
        r = fast_exp2(x) if TWO == 1 else fast_exp(x)
    else:
        r = exp2(x) if TWO == 1 else exp(x)
    return r


@iron.kernel
def variant(a: Tensor[T], out: Tensor[T], n: int, V: constexpr, VEC: constexpr, PER: constexpr, FX: constexpr):
    vals = local_array(f32, PER * VEC)
    load_lanes(a, vals, n, VEC, PER)
    for i in static_range(PER * VEC):
        x = vals[i]
        if V == 0:
            vals[i] = ex(x, FX, 0)
        elif V == 1:
            vals[i] = x / (1.0 + ex(x * -1.4426950408889634, FX, 1))
        elif V == 2:
            vals[i] = x * (1.0 + ex(x * -1.4426950408889634, FX, 1))
        elif V == 3:
            vals[i] = x * (1.0 / (1.0 + ex(x * -1.4426950408889634, FX, 1)))
        elif V == 4:
            vals[i] = x / (1.0 + x * x)
        elif V >= 6:
            e = ex(abs(x) * -1.4426950408889634, FX, 1)
            d = 1.0 + e
            r0 = rsqrt(d)
            r = r0 * r0
            num = where(x >= 0.0, x, x * e)
            if V == 6:
                r = fma(r, fma(-d, r, 1.0), r)
                q = num * r
                vals[i] = fma(fma(-d, q, num), r, q)
            else:
                vals[i] = num * r
        else:
            vals[i] = max(x, 0.0)
    store_lanes(out, vals, n, VEC, PER, T)


def time_once(launch, backend: str, reps: int) -> float:
    """Microseconds a launch, from the host around ``reps`` launches and one wait, after WARM launches."""
    for _ in range(WARM):
        launch()
    iron.synchronize(backend)
    t0 = time.perf_counter()
    for _ in range(reps):
        launch()
    iron.synchronize(backend)
    return (time.perf_counter() - t0) / reps * 1e6


def launches(a, out, backend: str) -> list:
    """(name, launch, checked) for every variant, then std's launch_unary rows (exp, silu, sigmoid, relu)."""
    from iron.std.elementwise import launch_unary

    threads = N // (VEC * PER)
    rows = [(name, (lambda v=v: variant[threads](a, out, N, v, VEC, PER, FX)), v in (1, 3, 6))
            for v, name in enumerate(NAMES)]
    rows += [(f"std {op}", (lambda op=op: launch_unary(op, a, out, backend)), op == "silu")
             for op in ("exp", "silu", "sigmoid", "relu")]
    return rows


def main(backend: str, path: str | None) -> None:
    import ml_dtypes

    if os.environ.get("VK_SILU_IEEE") == "0":
        from iron.codegen.spirv import emit as spirv_emit

        spirv_emit.IEEE_SPECIALS = False
    host = (np.random.default_rng(0).standard_normal(N) * 8).astype(ml_dtypes.bfloat16)
    xs = host.astype(np.float64)
    want = xs / (1.0 + np.exp(-xs))
    ulp = np.spacing(np.abs(want).astype(ml_dtypes.bfloat16).astype(np.float32)).astype(np.float64) * 65536
    a = iron.asarray(host, backend=backend)
    out = iron.empty(N, iron.bf16, backend=backend)
    table = launches(a, out, backend)
    best = {name: float("inf") for name, _, _ in table}
    for _ in range(ROUNDS):  # every variant timed in turn, ROUNDS times, before any read-back; the best kept
        for name, launch, _ in table:
            best[name] = min(best[name], time_once(launch, backend, REPS))
    rows = []
    for name, launch, checked in table:
        err = None
        if checked:
            launch()
            got = out.numpy().astype(np.float64)
            err = float(np.max(np.abs(got - want) / np.maximum(ulp, 1e-45)))
        us = best[name]
        rows.append({"variant": name, "us": us, "gb_s": 4 * N / us / 1e3, "max_err_bf16_ulp": err})
        print(f"{backend} {name:24s} {us:9.1f} us  {rows[-1]['gb_s']:7.1f} GB/s  err {err} bf16 ulp", flush=True)
    if path:
        with open(path, "w") as f:
            json.dump({"backend": backend, "n": N, "vec": VEC, "per": PER, "rounds": ROUNDS, "reps": REPS,
                       "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "vulkan", sys.argv[2] if len(sys.argv) > 2 else None)
