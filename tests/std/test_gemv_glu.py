"""std/gemv's GLU variant (SwiGLU fused into the down projection of a decode step): y = a @ (silu(gate) * up) with
the gated vector rounded to the dtype, against float64 on every backend, and bit-identical to the unfused pair it
replaces (std/elementwise swiglu, then std/gemv) when both ran the same configuration."""

from __future__ import annotations

import numpy as np
import pytest

from iron.ir import types as t
from iron.std.elementwise import launch_swiglu
from iron.std.gemv import launch_gemv

U_IN = {"f32": 2.0 ** -21, "f16": 2.0 ** -10, "bf16": 2.0 ** -7}  # one unit of the gated value (f32: a few ulp)
U_OUT = {"f32": 0.0, "f16": 2.0 ** -11, "bf16": 2.0 ** -8}  # y's rounding


@pytest.mark.parametrize("shape", [(256, 1024), (37, 300), (5, 13)])
def test_gated_gemv(backend, dtype, rng, shape):
    rows, ncols = shape
    np_dtype = t.SCALAR_TYPES[dtype].np_dtype
    a = rng.standard_normal(shape).astype(np_dtype)
    x = rng.standard_normal(2 * ncols).astype(np_dtype)
    y = np.full(rows, np.nan, np_dtype)
    ran = launch_gemv(a, x, y, backend, glu=True)
    g, u = x[:ncols].astype(np.float64), x[ncols:].astype(np.float64)
    gated = (g / (1.0 + np.exp(-g)) * u).astype(np_dtype).astype(np.float64)  # rounded once, as swiglu stores it
    want = a.astype(np.float64) @ gated
    # the kernel's f32 silu may round the gated value the other way (one unit of the dtype per term), the f32 sum
    # adds n units of 2^-24, and y's own rounding one half unit
    size = np.abs(a.astype(np.float64)) @ np.abs(gated)
    bound = size * (U_IN[dtype] + ncols * 2.0 ** -24) + U_OUT[dtype] * np.abs(want)
    assert (np.abs(y.astype(np.float64) - want) <= bound).all()
    act = np.full(ncols, np.nan, np_dtype)
    launch_swiglu(x[:ncols], x[ncols:], act, backend)
    y2 = np.full(rows, np.nan, np_dtype)
    if launch_gemv(a, act, y2, backend) == ran:
        np.testing.assert_array_equal(y, y2)
    else:
        assert (np.abs(y.astype(np.float64) - y2) <= 2 * bound).all()
