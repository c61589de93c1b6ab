"""Kernels of the integer bit builtins (issue 15 point 3), run by tests/frontend/test_int_ops.py on every backend and
built by every compile-only target (tests/backends/variants.py lists this module)."""

from __future__ import annotations

import iron
from iron import Tensor


@iron.kernel
def int_bits_i32(a: Tensor[iron.i32], b: Tensor[iron.i32], hi: Tensor[iron.i32], pc: Tensor[iron.i32],
                 lz: Tensor[iron.i32], tz: Tensor[iron.i32], folded: Tensor[iron.i32]):
    i = iron.program_id(0)
    x = a[i]
    hi[i] = iron.umulhi(x, b[i])
    pc[i] = iron.popcount(x)
    lz[i] = iron.clz(x)
    tz[i] = iron.ctz(x + 0)
    if i == 0:  # constant operands fold at compile time, to the same values
        folded[0] = iron.clz(0) + 100 * iron.ctz(0)
        folded[1] = iron.popcount(-1) + 100 * iron.umulhi(-7, 1 << 30)


@iron.kernel
def int_bits_u32(a: Tensor[iron.u32], b: Tensor[iron.u32], hi: Tensor[iron.u32], pc: Tensor[iron.u32],
                 lz: Tensor[iron.u32], tz: Tensor[iron.u32]):
    i = iron.program_id(0)
    x = a[i]
    hi[i] = iron.umulhi(x, b[i])
    pc[i] = iron.popcount(x)
    lz[i] = iron.clz(x)
    tz[i] = iron.ctz(x)


@iron.kernel
def bitcasts(x: Tensor[iron.f32], u: Tensor[iron.u32], as_i: Tensor[iron.i32], as_u: Tensor[iron.u32],
             as_f: Tensor[iron.f32], flipped: Tensor[iron.f32]):
    i = iron.program_id(0)
    as_i[i] = iron.bitcast(x[i], iron.i32)
    as_u[i] = iron.bitcast(as_i[i], iron.u32)
    as_f[i] = iron.bitcast(u[i], iron.f32)
    flipped[i] = iron.bitcast(iron.bitcast(x[i], iron.u32) ^ 0x80000000, iron.f32)  # -x by its sign bit


@iron.kernel
def dot4(a: Tensor[iron.i32], b: Tensor[iron.u32], c: Tensor[iron.i32], out: Tensor[iron.i32],
         folded: Tensor[iron.i32]):
    """dp4a on i32 and u32 operands (the u32's bits), and folded at compile time."""
    i = iron.program_id(0)
    out[i] = iron.dp4a(a[i], b[i], c[i])
    if i == 0:
        folded[0] = iron.dp4a(0x7F80FF01, -1, 10)  # 127, -128, -1, 1 times -1 each: 1 + 10
        folded[1] = iron.dp4a(0x01020304, 0xFFFFFFFF, 2147483647)  # -10 + INT_MAX (no wrap)
        folded[2] = iron.dp4a(0x80808080, 0x80808080, 2147483647)  # 4 * 16384 past INT_MAX: wraps
