"""Kernels of the integer atomics (issue 15 point 4), run by tests/frontend/test_atomics.py on every backend and
built by every compile-only target (tests/backends/variants.py lists this module).

Each thread applies the six atomics to six tables (``t[k*m + a]``: op k, address a) and records every old value in
``old[k*n + i]``; ``atomic_cas`` there is uncontended (one address per thread). The ticket kernels run a CAS loop
under contention, the shared ones do the same on a group-shared array.
"""

from __future__ import annotations

import iron
from iron import Tensor


@iron.kernel
def atomics_global_i32(t: Tensor[iron.i32], addr: Tensor[iron.i32], v: Tensor[iron.i32], bits: Tensor[iron.i32],
                       w: Tensor[iron.i32], old: Tensor[iron.i32], n: int, m: int):
    i = iron.program_id(0)
    a = addr[i]
    old[i] = iron.atomic_min(t, a, v[i])
    old[n + i] = iron.atomic_and(t, m + a, ~bits[i])
    old[2 * n + i] = iron.atomic_or(t, 2 * m + a, bits[i])
    old[3 * n + i] = iron.atomic_xor(t, 3 * m + a, bits[i])
    old[4 * n + i] = iron.atomic_exchange(t, 4 * m + a, i)
    old[5 * n + i] = iron.atomic_cas(t, 5 * m + i, w[i], v[i])


@iron.kernel
def atomics_global_u32(t: Tensor[iron.u32], addr: Tensor[iron.i32], v: Tensor[iron.u32], bits: Tensor[iron.u32],
                       w: Tensor[iron.u32], old: Tensor[iron.u32], n: int, m: int):
    i = iron.program_id(0)
    a = addr[i]
    old[i] = iron.atomic_min(t, a, v[i])
    old[n + i] = iron.atomic_and(t, m + a, ~bits[i])
    old[2 * n + i] = iron.atomic_or(t, 2 * m + a, bits[i])
    old[3 * n + i] = iron.atomic_xor(t, 3 * m + a, bits[i])
    old[4 * n + i] = iron.atomic_exchange(t, 4 * m + a, iron.cast(i, iron.u32))
    old[5 * n + i] = iron.atomic_cas(t, 5 * m + i, w[i], v[i])


@iron.kernel
def atomic_tickets_i32(t: Tensor[iron.i32], addr: Tensor[iron.i32], ticket: Tensor[iron.i32]):
    """Each thread takes the next ticket of its address with a compare-and-swap loop (lock-free: a failed swap
    means another thread's succeeded)."""
    i = iron.program_id(0)
    a = addr[i]
    cur = 0
    while True:
        seen = iron.atomic_cas(t, a, cur, cur + 1)
        if seen == cur:
            break
        cur = seen
    ticket[i] = cur


@iron.kernel
def atomics_shared_u32(init: Tensor[iron.u32], v: Tensor[iron.u32], bits: Tensor[iron.u32], final: Tensor[iron.u32],
                       old: Tensor[iron.u32], n: int):
    """The same updates on a group-shared table of 8 x 6 words per group (addresses local_id % 8)."""
    tab = iron.shared(iron.u32, 48)
    i = iron.program_id(0)
    j = iron.local_id(0)
    g = iron.group_id(0)
    if j < 48:
        tab[j] = init[g * 48 + j]
    iron.barrier()
    a = j % 8
    old[i] = iron.atomic_min(tab, a, v[i])
    old[n + i] = iron.atomic_and(tab, 8 + a, ~bits[i])
    old[2 * n + i] = iron.atomic_or(tab, 16 + a, bits[i])
    old[3 * n + i] = iron.atomic_xor(tab, 24 + a, bits[i])
    old[4 * n + i] = iron.atomic_exchange(tab, 32 + a, iron.cast(i, iron.u32))
    cur = iron.cast(0, iron.u32)
    while True:
        seen = iron.atomic_cas(tab, 40 + a, cur, cur + 1)
        if seen == cur:
            break
        cur = seen
    old[5 * n + i] = cur
    iron.barrier()
    if j < 48:
        final[g * 48 + j] = tab[j]


@iron.kernel
def atomics_global_f32(t: Tensor[iron.f32], addr: Tensor[iron.i32], v: Tensor[iron.f32], w: Tensor[iron.f32],
                       old: Tensor[iron.f32], n: int, m: int):
    """The float atomics under contention, keeping every old value: ``atomic_max`` of ``v`` on ``t[a]`` and
    ``atomic_add`` of ``w`` on ``t[m + a]``."""
    i = iron.program_id(0)
    a = addr[i]
    old[i] = iron.atomic_max(t, a, v[i])
    old[n + i] = iron.atomic_add(t, m + a, w[i])


@iron.kernel
def last_group_sums(x: Tensor[iron.f32], part: Tensor[iron.f32], count: Tensor[iron.i32], out: Tensor[iron.f32],
                    seen: Tensor[iron.i32], n: int, chunks: int, BLOCK: iron.constexpr):
    """``fence()``'s pattern: row r's ``chunks`` groups each sum a span of x[r] into part[r chunks + c]; every
    thread fences, one counts the group in count[r]; the group that counts last fences again, sums the parts in
    order into out[r] and resets count[r] to 0 for the next launch. seen[group] = the count the group saw."""
    g = iron.group_id(0)
    r = g // chunks
    c = g % chunks
    tid = iron.local_id(0)
    red = iron.shared(iron.f32, BLOCK)
    flag = iron.shared(iron.i32, 1)
    span = (n + chunks - 1) // chunks
    acc = 0.0
    for j in range(c * span + tid, min(n, (c + 1) * span), BLOCK):
        acc += x[r * n + j]
    red[tid] = acc
    iron.barrier()
    if tid == 0:
        total = 0.0
        for k in range(BLOCK):
            total += red[k]
        part[g] = total
    iron.fence()  # the part is published before the count that announces it
    iron.barrier()
    if tid == 0:
        old = iron.atomic_add(count, r, 1)
        seen[g] = old
        flag[0] = old
    iron.barrier()
    if flag[0] == chunks - 1:
        iron.fence()  # the other groups' parts, published before their counts, are visible from here
        if tid == 0:
            s = 0.0
            for k in range(chunks):
                s += part[r * chunks + k]
            out[r] = s
            count[r] = 0
