"""CudaBackend.gpu_time measures launches on Iron's own arrays (which go to Iron's non-blocking stream), not only on
torch tensors (torch's current stream): its events, sleep and L2 flush go to the launches' stream. Before, events on
torch's stream beside Iron's measured nothing of them and the autotuner chose the model's kernels blindly (H200,
2026-12-03)."""

from __future__ import annotations

import time

import numpy as np
import pytest

import iron
from iron import Tensor, f32, program_id


@iron.kernel
def spin(x: Tensor[f32], out: Tensor[f32], rounds: int):
    i = program_id(0)
    v = x[i]
    for _ in range(rounds):
        v = v * 0.999 + 0.001
    out[i] = v


@pytest.mark.parametrize("kind", ["iron", "torch"])
def test_gpu_time_sees_the_launches(kind, rng):
    from iron.runtime import get_backend, unavailable_reason

    if unavailable_reason("cuda"):
        pytest.skip("needs CUDA")
    torch = pytest.importorskip("torch")
    be = get_backend("cuda")
    n, rounds = 1 << 16, 200_000
    xs = rng.standard_normal(n).astype(np.float32)
    if kind == "iron":
        x, out = iron.asarray(xs, backend="cuda"), iron.empty((n,), f32, backend="cuda")
    else:
        x, out = torch.from_numpy(xs).cuda(), torch.empty(n, device="cuda")
    spin[n](x, out, rounds, backend="cuda")
    iron.synchronize("cuda")
    torch.cuda.synchronize()
    start = time.perf_counter()
    spin[n](x, out, rounds, backend="cuda")
    iron.synchronize("cuda")
    torch.cuda.synchronize()
    wall = time.perf_counter() - start
    flushes = []
    flush = be.l2_flush()
    gpu = be.gpu_time(lambda: spin[n](x, out, rounds, backend="cuda"), 3, before=lambda: (flushes.append(1), flush()))
    assert 0.5 * wall <= gpu <= 1.5 * wall, (gpu, wall)  # a ms-long kernel: the events bracket it
    assert len(flushes) >= 3
    got = out.numpy() if kind == "iron" else out.cpu().numpy()
    assert np.abs(got - 1.0).max() < 1e-3  # 200k contractions toward 1 from N(0, 1) starts
