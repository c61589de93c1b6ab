"""Kernels whose shared arrays are sized at launch (``shared(dtype, n)`` with ``n: int`` a parameter), for
tests/frontend/test_runtime_shared.py."""

from __future__ import annotations

import iron
from iron import T, Tensor, barrier, f32, group_id, i32, local_id, shared


@iron.kernel
def reverse_groups(x: Tensor[T], out: Tensor[T], n: int):
    """Each group of n threads reverses its n elements through a shared array of n."""
    buf = shared(T, n)
    i = local_id(0)
    base = group_id(0) * n
    buf[i] = x[base + i]
    barrier()
    out[base + i] = buf[n - 1 - i]


@iron.kernel
def mixed(x: Tensor[f32], out: Tensor[f32], n: int, m: int):
    """A compile-time array beside two run-time ones of different dtypes (f32 of n, i32 of m <= n)."""
    fixed = shared(f32, 8)
    a = shared(f32, n)
    b = shared(i32, m)
    i = local_id(0)
    base = group_id(0) * n
    if i < 8:
        fixed[i] = float(i) * 0.5
    a[i] = x[base + i]
    if i < m:
        b[i] = i * 3 + 1
    barrier()
    out[base + i] = a[n - 1 - i] + float(b[i % m]) + fixed[i % 8]
