"""Programmatic dependent launch on the GPU (``IRON_CUDA_PDL=1``; skipped without a CUDA device, or on one older than
sm_90): 200 dependent launches -- each reads, from other groups, what the launch before it wrote -- give NumPy's
answer through every launch path (the full path, the generated-Python launcher on iron Arrays, the compiled
launcher on torch tensors), and the same chain captured with ``iron.graph`` and replayed twice does too. The CPU side
(the emitted instructions, the launch attribute) is ``test_pdl.py``."""

from __future__ import annotations

import numpy as np
import pytest

import iron
from iron import Tensor, kernel, program_id

N, STEPS = 1 << 20, 200  # 4096 groups of 256: several waves on an H200, so a grid that ran early would read stale data


@kernel
def mix(src: Tensor[iron.i32], dst: Tensor[iron.i32], n: int, step: int):
    i = program_id(0)
    dst[i] = src[n - 1 - i] * 3 + i + step


@pytest.fixture
def cuda_pdl(monkeypatch):
    """The CUDA backend with IRON_CUDA_PDL=1 (set before this module's kernel is first launched)."""
    from iron.codegen.cfamily.cuda import pdl_capable
    from iron.runtime import get_backend, unavailable_reason

    why = unavailable_reason("cuda")
    if why:
        pytest.skip(f"cuda unavailable: {why}")
    be = get_backend("cuda")
    be.device()
    if not pdl_capable(be.arch):
        pytest.skip(f"programmatic dependent launch needs sm_90+, the device is {be.arch}")
    monkeypatch.setenv("IRON_CUDA_PDL", "1")
    assert be.emitted(mix.variant(None)).pdl
    return be


def _numpy_chain(a: np.ndarray, rounds: int = 1) -> np.ndarray:
    """What ``rounds`` times STEPS launches of ``mix`` leave in the buffer the last one wrote (i32 wraps)."""
    idx = np.arange(a.size, dtype=np.int64)
    x = a.astype(np.int64)
    for _ in range(rounds):
        for s in range(STEPS):
            x = (x[::-1] * 3 + idx + s + 2**31) % 2**32 - 2**31
    return x.astype(np.int32)


def _chain(a, b):
    for s in range(STEPS):
        src, dst = (a, b) if s % 2 == 0 else (b, a)
        mix[N](src, dst, N, s)
    return a if STEPS % 2 == 0 else b  # the last launch's dst


def _start() -> np.ndarray:
    return np.random.default_rng(0).integers(-1000, 1000, N).astype(np.int32)


@pytest.mark.parametrize("path", ["full", "python", "compiled"])
def test_200_dependent_launches_match_numpy(cuda_pdl, path, monkeypatch):
    start = _start()
    if path == "full":
        monkeypatch.setenv("IRON_CUDA_FAST", "0")
    if path == "compiled":
        torch = pytest.importorskip("torch")
        a = torch.from_numpy(start.copy()).cuda()
        b = torch.zeros_like(a)
        out = _chain(a, b)
        torch.cuda.synchronize()
        got = out.cpu().numpy()
    else:
        a, b = iron.asarray(start.copy(), backend="cuda"), iron.zeros((N,), iron.i32, backend="cuda")
        got = _chain(a, b).numpy()
    np.testing.assert_array_equal(got, _numpy_chain(start))


def test_200_dependent_launches_in_a_graph_match_numpy(cuda_pdl):
    start = _start()
    a, b = iron.asarray(start.copy(), backend="cuda"), iron.zeros((N,), iron.i32, backend="cuda")
    mix[N](a, b, N, 0)  # compiled and loaded before the capture (a is left as it was)
    iron.synchronize("cuda")
    with iron.graph("cuda") as g:
        out = _chain(a, b)
    g.launch()
    np.testing.assert_array_equal(out.numpy(), _numpy_chain(start))
    g.launch()  # a replay continues from what the last one left
    np.testing.assert_array_equal(out.numpy(), _numpy_chain(start, rounds=2))
