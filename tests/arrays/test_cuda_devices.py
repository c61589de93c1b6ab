"""CUDA multi-device rule (issue 16, point 5): an array on another GPU than the backend's is refused with a located
LaunchError (a fast launcher, left by a launch that passed that check, declines tensors of another device and
hands them to the full path), never launched with a pointer of another device.

One GPU is enough to test it: the backend is told it launches on device 1 (its ``device_id`` patched), so the
tensors of device 0 are "elsewhere". Skips without torch or a CUDA device (CI)."""

from __future__ import annotations

import numpy as np
import pytest

import iron
from iron import Tensor, f32, program_id


@iron.kernel
def twice(x: Tensor[f32], out: Tensor[f32], n: int):
    i = program_id(0)
    if i < n:
        out[i] = 2.0 * x[i]


@pytest.fixture
def cuda_torch():
    torch = pytest.importorskip("torch")
    from iron.runtime import get_backend, unavailable_reason

    if unavailable_reason("cuda") or not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    return torch, get_backend("cuda")


class _Elsewhere:
    """The backend's device seen as ordinal 1 (every other attribute the real one's)."""

    def __init__(self, real):
        self._real = real
        self.device_id = real.device_id + 1

    def __getattr__(self, name):
        return getattr(self._real, name)


class _Interface:
    """A bare __cuda_array_interface__ producer over a torch tensor's memory (no ``device`` attribute)."""

    def __init__(self, t):
        self.__cuda_array_interface__ = t.__cuda_array_interface__


def test_tensor_on_another_device_is_refused(cuda_torch, rng, monkeypatch):
    torch, be = cuda_torch
    n = 257
    xs = torch.tensor(rng.standard_normal(n).astype(np.float32), device="cuda")
    out = torch.full((n,), float("nan"), device="cuda")
    real = be.device()
    monkeypatch.setattr(be, "device", lambda: _Elsewhere(real))
    with pytest.raises(iron.LaunchError, match="is on CUDA device 0, but the cuda backend launches on device 1"):
        twice[n](xs, out, n, backend="cuda")
    with pytest.raises(iron.LaunchError, match="on CUDA device 0; the cuda backend runs on device 1"):
        iron.from_dlpack(xs)  # wrapping refuses it already (H200, 2026-12-01)
    cai = _Interface(xs)  # another __cuda_array_interface__ producer: the driver says where its pointer lives
    with pytest.raises(iron.LaunchError, match="is on CUDA device 0, but the cuda backend launches on device 1"):
        twice[n](cai, out, n, backend="cuda")
    assert np.isnan(out.cpu().numpy()).all()  # nothing ran
    monkeypatch.undo()  # the backend's own device again: the same tensors launch
    twice[n](xs, out, n, backend="cuda")
    torch.cuda.synchronize()
    np.testing.assert_allclose(out.cpu().numpy(), 2.0 * xs.cpu().numpy().astype(np.float64), rtol=1e-6)
