"""Issue 15, bug B1: a barrier() after some threads of the group returned waits for the threads still running, on
every backend (CUDA's rule since sm_70; before, msl-cpu reported a divergent barrier while cpu and Vulkan ran it)."""

from __future__ import annotations

import numpy as np

from . import barrier_kernels as B


def test_returned_threads_are_not_waited_for(backend):
    out = np.full(64, -1, np.int32)
    B.uniform_add[64, 64](out, 40, backend=backend)
    assert (out[:40] == 7).all() and (out[40:] == -1).all(), out


def test_several_barriers_after_a_return(backend, rng):
    n = 50
    x = rng.standard_normal(128).astype(np.float32)
    out = np.full(128, np.nan, np.float32)
    B.two_barriers[128, 64](x, out, n, backend=backend)
    idx = np.arange(n)
    partner = idx ^ 1
    want = np.where(partner < n, x[np.minimum(partner, 127)].astype(np.float64) * 2.0, 0.0)
    np.testing.assert_array_equal(out[:n], want.astype(np.float32))
    assert np.isnan(out[n:]).all()
