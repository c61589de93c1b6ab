"""Kernels of the 64-bit and 8-bit dtypes (tracker issue 15: i64, u64, f64, i8, u8), run by
tests/frontend/test_wide_narrow_types.py on every backend and built by every compile-only target
(tests/backends/variants.py lists this module; the f64 kernels are refused by the Metal emitter, located)."""

from __future__ import annotations

import iron
from iron import Tensor, cast

#: outputs per element of ``i64_ops`` / ``u64_ops``
OPS64 = 16


@iron.kernel
def i64_ops(a: Tensor[iron.i64], b: Tensor[iron.i64], s: iron.i64, out: Tensor[iron.i64]):
    i = iron.program_id(0)
    x = a[i]
    y = b[i]
    o = OPS64 * i
    out[o] = x + y
    out[o + 1] = x - y
    out[o + 2] = x * y
    out[o + 3] = x // y
    out[o + 4] = x % y
    out[o + 5] = x << (y & 63)
    out[o + 6] = x >> y  # arithmetic; the count is taken mod 64
    out[o + 7] = (x & y) ^ (x | s)
    out[o + 8] = -x + ~y
    out[o + 9] = min(x, y) + 3 * max(x, s)
    out[o + 10] = abs(x)
    out[o + 11] = cast(x < y, iron.i64) + 2 * cast(x == s, iron.i64) + 4 * cast(x >= 0, iron.i64)
    out[o + 12] = x + 0x100000000  # a literal past 32 bits adapts to the i64
    out[o + 13] = x * 3 + i  # i32 meets i64: i64
    out[o + 14] = cast(x, iron.i32) + cast(cast(y, iron.u32), iron.i64)  # truncation, zero extension
    out[o + 15] = x + cast(i, iron.u32)  # i64 with u32: i64 (C's conversions)


@iron.kernel
def u64_ops(a: Tensor[iron.u64], b: Tensor[iron.u64], s: iron.u64, out: Tensor[iron.u64]):
    i = iron.program_id(0)
    x = a[i]
    y = b[i]
    o = OPS64 * i
    out[o] = x + y
    out[o + 1] = x - y
    out[o + 2] = x * y
    out[o + 3] = x // y
    out[o + 4] = x % y
    out[o + 5] = x << (y & 63)
    out[o + 6] = x >> y  # logical
    out[o + 7] = (x & y) ^ (x | s)
    out[o + 8] = -x + ~y
    out[o + 9] = min(x, y) + 3 * max(x, s)
    out[o + 10] = abs(x)
    out[o + 11] = cast(x < y, iron.u64) + 2 * cast(x == s, iron.u64)
    out[o + 12] = x + 0xFFFFFFFFFFFF  # a literal past 32 bits adapts to the u64
    out[o + 13] = x + cast(cast(x, iron.i64), iron.u64)
    out[o + 14] = cast(x, iron.u32) + 0  # truncation
    out[o + 15] = x + cast(-1 - i, iron.i64)  # i64 with u64: u64 (C's conversions), wrapping


@iron.kernel
def int64_casts(a: Tensor[iron.i64], f: Tensor[iron.f32], w: Tensor[iron.i32], ints: Tensor[iron.i64],
                uints: Tensor[iron.u64], floats: Tensor[iron.f32]):
    i = iron.program_id(0)
    ints[3 * i] = cast(f[i], iron.i64)  # truncates, saturates, NaN -> 0
    ints[3 * i + 1] = w[i]  # sign extension (an implicit conversion on store)
    ints[3 * i + 2] = cast(cast(w[i], iron.u32), iron.i64)  # zero extension
    uints[2 * i] = cast(f[i], iron.u64)
    uints[2 * i + 1] = cast(a[i], iron.u64)
    floats[2 * i] = cast(a[i], iron.f32)  # rounds once
    floats[2 * i + 1] = cast(cast(a[i], iron.u64), iron.f32)


@iron.kernel
def index64(a: Tensor[iron.f32], idx: Tensor[iron.i64], uidx: Tensor[iron.u64], base: iron.i64,
            out: Tensor[iron.f32]):
    i = iron.program_id(0)
    j = idx[i]
    out[2 * i] = a[j]  # a 64-bit index: how a kernel reaches past 2^31 elements
    out[2 * i + 1] = a[uidx[i] + 0] + a[base + i]


@iron.kernel
def narrow_ops(a: Tensor[iron.i8], b: Tensor[iron.u8], f: Tensor[iron.f32], o8: Tensor[iron.i8],
               ou8: Tensor[iron.u8], o32: Tensor[iron.i32]):
    i = iron.program_id(0)
    x = a[i]  # an i32 in -128..127
    y = b[i]  # an i32 in 0..255
    o8[2 * i] = x * 3 + y  # stores wrap to 8 bits
    o8[2 * i + 1] = cast(f[i], iron.i8)  # float -> i32 (saturating), then wrapped
    ou8[2 * i] = y + 1
    ou8[2 * i + 1] = b[i]
    ou8[2 * i + 1] += x  # += on an 8-bit element: loaded as i32, stored wrapped
    o32[4 * i] = x + y
    o32[4 * i + 1] = cast(y * 7, iron.u8) + 1000 * cast(y * 7, iron.i8)
    o32[4 * i + 2] = cast(x, iron.u8) - iron.u8(x * 2)
    o32[4 * i + 3] = x * y  # no 8-bit overflow: the values are i32


@iron.kernel
def narrow_shared(a: Tensor[iron.u8], b: Tensor[iron.i8], w: Tensor[iron.i64], out: Tensor[iron.u8],
                  out_i: Tensor[iron.i8], out_w: Tensor[iron.i64]):
    # 8-bit shared and local arrays (SPIR-V holds them in 32-bit words, as it does half arrays) and a 64-bit one
    tile = iron.shared(iron.u8, 64)
    tile_i = iron.shared(iron.i8, 64)
    tile_w = iron.shared(iron.i64, 64)
    regs = iron.local_array(iron.u8, 2)
    i = iron.program_id(0)
    j = iron.local_id(0)
    tile[j] = a[i] + 7
    tile_i[j] = b[i] - 1
    tile_w[j] = w[i] * 3
    regs[0] = a[i] * 2
    regs[1] = regs[0] + 200
    iron.barrier()
    out[i] = tile[63 - j] + regs[1]
    out_i[i] = tile_i[63 - j] * 2
    out_w[i] = tile_w[63 - j] + tile_w[j]


@iron.kernel
def f64_ops(a: Tensor[iron.f64], b: Tensor[iron.f64], s: iron.f64, out: Tensor[iron.f64], low: Tensor[iron.f32],
            ints: Tensor[iron.i64]):
    i = iron.program_id(0)
    x = a[i]
    y = b[i]
    o = 12 * i
    out[o] = x + y * s
    out[o + 1] = x - y
    out[o + 2] = x / y
    out[o + 3] = iron.sqrt(abs(x))
    out[o + 4] = iron.floor(x) + iron.ceil(y)
    out[o + 5] = min(x, y) - max(x, s)
    out[o + 6] = iron.fma(x, y, s)
    out[o + 7] = x * 0.1  # the literal is the double nearest 0.1
    out[o + 8] = x // y
    out[o + 9] = cast(x > y, iron.f64) + cast(i, iron.f64)
    out[o + 10] = cast(cast(x, iron.f32), iron.f64)  # rounds to f32 once, back exactly
    out[o + 11] = -x
    low[i] = x  # an implicit conversion on store: rounds once
    ints[i] = cast(x * 1e10, iron.i64)  # truncates and saturates


@iron.kernel
def f64_accumulate(a: Tensor[iron.f32], n: int, out: Tensor[iron.f64]):
    # the f64 accumulator of tracker issue 15: sum f32 inputs in double precision
    i = iron.program_id(0)
    acc: iron.f64 = 0.0
    for j in range(n):
        acc += a[i * n + j]
    out[i] = acc


@iron.kernel
def i64_accumulate(a: Tensor[iron.i64], n: int, out: Tensor[iron.i64]):
    # `acc = 0` given i64 values in the loop is an i64 variable from the start (variables.widen_to_64)
    i = iron.program_id(0)
    acc = 0
    for j in range(n):
        acc += a[i * n + j]
    out[i] = acc


@iron.kernel
def atomic_add64(v: Tensor[iron.i64], u: Tensor[iron.u64], t: Tensor[iron.i64], tu: Tensor[iron.u64],
                 old: Tensor[iron.i64], oldu: Tensor[iron.u64], sums: Tensor[iron.i64]):
    # atomic_add on i64/u64 buffers and a shared array (wrapping); Metal has no 64-bit atomic add: refused there
    i = iron.program_id(0)
    j = iron.local_id(0)
    old[i] = iron.atomic_add(t, i % 4, v[i])
    oldu[i] = iron.atomic_add(tu, i % 4, u[i])
    s = iron.shared(iron.i64, 4)
    if j < 4:
        s[j] = j
    iron.barrier()
    iron.atomic_add(s, i % 4, v[i])
    iron.barrier()
    if j < 4:
        sums[iron.group_id(0) * 4 + j] = s[j]
