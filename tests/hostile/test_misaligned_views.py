"""Issue 17: a view that starts off a 16-byte boundary, passed to a kernel that moves 16-byte vectors, must give the
right answer on every backend (docs/dsl.md: buffers start 16-byte aligned; docs/arrays.md: views work on every
backend). msl-cpu ran NumPy views in place and died of SIGSEGV on the model's aligned vector loads (found by the
gated GEMV's test: ``x[n:]`` of a 13-element half); it now runs them through an aligned copy, as Vulkan does."""

from __future__ import annotations

import numpy as np
import pytest

import iron
from iron import Tensor, program_id, vload, vstore

N = 64  # elements a launch moves: 16 threads x 4


@iron.kernel
def scale4(x: Tensor[iron.f32], out: Tensor[iron.f32], s: float):
    """out[4i .. 4i + 3] = s * x[4i .. 4i + 3], one 16-byte load and store a thread."""
    i = program_id(0) * 4
    v = vload(x, i, 4)
    o = iron.local_array(iron.f32, 4)
    for j in iron.static_range(4):
        o[j] = v[j] * s
    vstore(out, i, o)


@pytest.mark.parametrize("shift", [1, 2, 3])
def test_numpy_views_off_the_boundary(backend, rng, shift):
    src = rng.standard_normal(N + 8).astype(np.float32)
    dst = np.full(N + 8, np.nan, np.float32)
    x, out = src[shift:shift + N], dst[shift + 1:shift + 1 + N]  # both misaligned, by different amounts
    scale4[N // 4](x, out, 1.5)
    np.testing.assert_array_equal(out, src[shift:shift + N] * np.float32(1.5))
    assert np.isnan(dst[:shift + 1]).all() and np.isnan(dst[shift + 1 + N:]).all()  # nothing outside the view


@pytest.mark.parametrize("shift", [1, 3])
def test_array_views_off_the_boundary(backend, rng, shift):
    host = rng.standard_normal(N + 8).astype(np.float32)
    x = iron.asarray(host, backend=backend)[shift:shift + N]
    out_base = iron.asarray(np.full(N + 8, np.nan, np.float32), backend=backend)
    scale4[N // 4](x, out_base[shift:shift + N], -2.0, backend=backend)
    got = out_base.numpy()
    np.testing.assert_array_equal(got[shift:shift + N], host[shift:shift + N] * np.float32(-2.0))
    assert np.isnan(got[:shift]).all() and np.isnan(got[shift + N:]).all()
