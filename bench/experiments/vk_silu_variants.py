"""Issue 16: where silu's time goes on a Vulkan GPU (the std silu row ran at 55 % of CUDA's on the H200 while exp ran
at 74 %). Four kernels over the same 2^26 f32 elements, each timed by the host around 20 launches then one wait
(GPU-bound at this size),
8 elements a thread (instruction-bound where the op is costly): exp alone,
silu as std writes it (x / (1 + exp2(-x log2 e))), the same with the division
replaced by a product (wrong values, timing only), and x * (1 / (1 + ...)). The gap between the second and third is
what OpFDiv costs on that driver.

    python bench/experiments/vk_silu_variants.py [backend] [out.json]
"""

from __future__ import annotations

import json
import sys
import time

import numpy as np

import iron
from iron import Tensor, exp, exp2, f32, program_id, static_range

PER = 8
N, REPS = 1 << int(__import__("os").environ.get("VK_SILU_LOG2N", "26")), 20


@iron.kernel
def k_exp(a: Tensor[f32], out: Tensor[f32], n: int):
    i = program_id(0)
    for j in static_range(PER):  # PER elements a thread, as the std unary kernel's vectors give it
        if i + j * (n // PER) < n:
            x = a[i + j * (n // PER)]
            out[i + j * (n // PER)] = exp(x)


@iron.kernel
def k_silu_div(a: Tensor[f32], out: Tensor[f32], n: int):
    i = program_id(0)
    for j in static_range(PER):  # PER elements a thread, as the std unary kernel's vectors give it
        if i + j * (n // PER) < n:
            x = a[i + j * (n // PER)]
            out[i + j * (n // PER)] = x / (1.0 + exp2(x * -1.4426950408889634))


@iron.kernel
def k_silu_mul(a: Tensor[f32], out: Tensor[f32], n: int):
    i = program_id(0)
    for j in static_range(PER):  # PER elements a thread, as the std unary kernel's vectors give it
        if i + j * (n // PER) < n:
            x = a[i + j * (n // PER)]
            out[i + j * (n // PER)] = x * (1.0 + exp2(x * -1.4426950408889634))


@iron.kernel
def k_silu_rcp(a: Tensor[f32], out: Tensor[f32], n: int):
    i = program_id(0)
    for j in static_range(PER):  # PER elements a thread, as the std unary kernel's vectors give it
        if i + j * (n // PER) < n:
            x = a[i + j * (n // PER)]
            out[i + j * (n // PER)] = x * (1.0 / (1.0 + exp2(x * -1.4426950408889634)))


def main(backend: str, path: str | None) -> None:
    a = iron.asarray(np.random.default_rng(0).standard_normal(N).astype(np.float32), backend=backend)
    out = iron.zeros(N, f32, backend=backend)
    rows = []
    for k in (k_exp, k_silu_div, k_silu_mul, k_silu_rcp):
        k[N // PER](a, out, N)
        iron.synchronize(backend)
        t0 = time.perf_counter()
        for _ in range(REPS):
            k[N // PER](a, out, N)
        iron.synchronize(backend)
        us = (time.perf_counter() - t0) / REPS * 1e6
        rows.append({"kernel": k.__name__ if hasattr(k, "__name__") else str(k), "us": us, "gb_s": 8 * N / us / 1e3})
        print(f"{backend} {rows[-1]['kernel']:12s} {us:9.1f} us  {rows[-1]['gb_s']:7.1f} GB/s", flush=True)
    if path:
        with open(path, "w") as f:
            json.dump({"backend": backend, "n": N, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "vulkan", sys.argv[2] if len(sys.argv) > 2 else None)
