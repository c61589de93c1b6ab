"""Spine speed figures for issue #2 (host CPU; not a test): front-end + passes cold, cached-launch overhead, and
the interpreter on exp over 1M f32 and a 1024x1024 row softmax. Run: .venv/bin/python scripts/spine_speed.py"""

from __future__ import annotations

import statistics
import time

import numpy as np

import iron
from iron import T, Tensor, exp, kernel, program_id
from iron.std.softmax import softmax


@kernel
def iron_exp(a: Tensor[T], out: Tensor[T]):
    idx = program_id(0)
    out[idx] = exp(a[idx])


def median_time(fn, repeats: int) -> float:
    fn()
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


def main() -> None:
    t0 = time.perf_counter()
    iron_exp.variant(iron.f32)
    print(f"front-end + passes, exp f32, cold:        {1e3 * (time.perf_counter() - t0):7.2f} ms  (target <= 20 ms)")

    small, so = np.ones(1, np.float32), np.empty(1, np.float32)
    launches = 5000
    total = median_time(lambda: [iron_exp[1](small, so, backend="cpu") for _ in range(launches)], 3) / launches
    import iron.runtime.cpu as cpu

    run = cpu.CpuBackend.launch
    cpu.CpuBackend.launch = lambda *a, **k: None
    try:
        host = median_time(lambda: [iron_exp[1](small, so, backend="cpu") for _ in range(launches)], 3) / launches
    finally:
        cpu.CpuBackend.launch = run
    print(f"cached launch, host overhead before the backend: {1e6 * host:6.1f} us (target <= 50 us)")
    print(f"cached launch incl. interpreting a 1-thread exp: {1e6 * total:6.1f} us")

    a = np.random.default_rng().standard_normal(1 << 20).astype(np.float32)
    out = np.full_like(a, np.nan)
    s = median_time(lambda: iron_exp[a.size](a, out, backend="cpu"), 5)
    assert np.allclose(out, np.exp(a.astype(np.float64)), rtol=1e-6)
    print(f"interpreter, exp over 1M f32:             {s:7.3f} s   (target <= 0.5 s)")

    x = np.random.default_rng().standard_normal((1024, 1024)).astype(np.float32)
    y = np.full_like(x, np.nan)
    s = median_time(lambda: softmax[1024 * 256, 256](x, y, 1024, 256, backend="cpu"), 3)
    e = np.exp(x - x.max(1, keepdims=True))
    assert np.allclose(y, e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-7)
    print(f"interpreter, 1024x1024 row softmax:       {s:7.3f} s   (target <= 3 s)")


if __name__ == "__main__":
    main()
