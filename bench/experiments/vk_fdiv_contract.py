"""Issue 16: does NVIDIA's Vulkan driver lower OpFDiv more cheaply without the NoContraction decoration Iron puts on
every float add/sub/mul/div (emit.py's _EXACT_FLOAT_OPS)? On the H200 (2026-12-04, vk_silu_variants.py) the division
cost 131 of silu's 506 us over 2^28 bf16 elements. Vulkan only promises 2.5 ulp for OpFDiv (divisors in
[2^-126, 2^126]) either way, so an undecorated division would be within Iron's documented Vulkan precision if its
error stays there: this measures both, time and worst ulp against float64, for x / (1 + x x) and silu's
x / (1 + exp2(-x log2 e)) over 2^26 f32 elements. The undecorated kernels are compiled with the decoration set
patched, in a private compile cache (IRON_CACHE=0), so nothing cached elsewhere sees them.

    IRON_CACHE=0 python bench/experiments/vk_fdiv_contract.py [out.json]
"""

from __future__ import annotations

import json
import os
import sys
import time

import numpy as np

import iron
from iron import Tensor, constexpr, exp2, f32, program_id, static_range

N, REPS, PER = 1 << int(os.environ.get("VK_FDIV_LOG2N", "26")), 10, 8


def body(a: Tensor[f32], out: Tensor[f32], n: int, V: constexpr):
    i = program_id(0)
    for j in static_range(PER):
        k = i * PER + j
        if k < n:
            x = a[k]
            if V == 0:
                out[k] = x / (1.0 + x * x)
            else:
                out[k] = x / (1.0 + exp2(x * -1.4426950408889634))


def oracle(x: np.ndarray, v: int) -> np.ndarray:
    x = x.astype(np.float64)
    return (x / (1.0 + x * x) if v == 0 else x / (1.0 + np.exp2(x * -1.4426950408889634))).astype(np.float32)


def ulps(got: np.ndarray, want: np.ndarray) -> int:
    def ordered(v):
        i = v.view(np.int32).astype(np.int64)
        return np.where(i < 0, -(i & 0x7FFFFFFF), i)

    ok = np.isfinite(want)
    return int(np.abs(ordered(got[ok]) - ordered(want[ok])).max())


def run(kernel, a, out, host, v: int) -> dict:
    kernel[N // PER](a, out, N, v, backend="vulkan")
    iron.synchronize("vulkan")
    t0 = time.perf_counter()
    for _ in range(REPS):
        kernel[N // PER](a, out, N, v, backend="vulkan")
    iron.synchronize("vulkan")
    us = (time.perf_counter() - t0) / REPS * 1e6
    return {"us": us, "max_ulp": ulps(out.numpy(), oracle(host, v))}


def main(path: str | None) -> None:
    from iron.codegen.spirv import emit

    host = (np.random.default_rng(0).standard_normal(N) * 8).astype(np.float32)
    a = iron.asarray(host, backend="vulkan")
    out = iron.zeros(N, f32, backend="vulkan")
    rows = []
    decorated = iron.kernel(body)
    plain = iron.kernel(body)
    exact = emit._EXACT_FLOAT_OPS
    for v, name in ((0, "x / (1 + x x)"), (1, "silu")):
        rows.append({"op": name, "decorated": run(decorated, a, out, host, v)})
        emit._EXACT_FLOAT_OPS = exact - {"OpFDiv"}
        try:
            rows[-1]["undecorated"] = run(plain, a, out, host, v)
        finally:
            emit._EXACT_FLOAT_OPS = exact
        print(name, rows[-1], flush=True)
    if path:
        with open(path, "w") as f:
            json.dump({"n": N, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else None)
