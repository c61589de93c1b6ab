"""Issue 15 point 4: atomic_min/and/or/xor/exchange/cas on i32 and u32, in global and shared memory, on every
backend of the ``backend`` fixture, under contention (many threads on few addresses).

Atomics are relaxed, so only the final values are deterministic; the returned old values are checked to form a valid
serialization: for exchange, and/or/xor (each thread owns a distinct bit or value) the old values of one address
chain from the initial value to the final one through every thread exactly once; for min each old value is one the
address held; the CAS ticket loops hand out each ticket 0..k-1 of an address exactly once.
"""

from __future__ import annotations

import numpy as np
import pytest

from iron import CompileError

from .atomic_kernels import (
    atomic_tickets_i32,
    atomics_global_f32,
    atomics_global_i32,
    atomics_global_u32,
    atomics_shared_u32,
    last_group_sums,
)
from .sources import module_from_source
from .test_kernels import int_poisoned

N, M = 512, 16  # threads, addresses per table: 32 threads per address, each with a bit of its own


def _chain(initial: int, olds: np.ndarray, writes: np.ndarray, final: int) -> None:
    """The olds of one address are a serialization: starting at ``initial``, each thread's old is the value the
    previous thread left (``writes[k]`` is what thread k leaves, given its old), ending at ``final``."""
    after = {int(o): int(w) for o, w in zip(olds, writes)}
    assert len(after) == len(olds), "two threads saw the same old value"
    cur, seen = int(initial), 0
    while cur in after and seen <= len(olds):
        cur, seen = after[cur], seen + 1
    assert seen == len(olds) and cur == int(final), "the old values do not chain through every thread"


def _check_tables(dtype, t0, t, old, v, bits, addr, m, n) -> None:
    """Every table's final values (NumPy oracle) and the serialization of the old values."""
    old = old.reshape(6, n)
    for a in range(m):
        on = np.flatnonzero(addr == a)
        mins = old[0, on]
        assert t[a] == min(t0[a], v[on].min())
        held = {int(t0[a]), *(int(x) for x in v[on])}
        assert all(int(x) in held and x >= t[a] and x <= t0[a] for x in mins)
        assert (mins == t0[a]).any(), "no thread saw the initial value"
        for k, combine in ((1, lambda o, b: o & ~b), (2, lambda o, b: o | b), (3, lambda o, b: o ^ b)):
            want = t0[k * m + a]
            for b in bits[on]:
                want = combine(want, b)
            assert t[k * m + a] == want
            _chain(t0[k * m + a], old[k, on], combine(old[k, on], bits[on]), t[k * m + a])
        ids = on.astype(dtype)
        _chain(t0[4 * m + a], old[4, on], ids, t[4 * m + a])


def _inputs(rng, dtype, n, m):
    info = np.iinfo(dtype)
    addr = rng.permutation(np.arange(n) % m).astype(np.int32)
    v = rng.integers(info.min, info.max, n, dtype=np.int64, endpoint=True).astype(dtype)
    rank = np.empty(n, np.int64)
    for a in range(m):  # a distinct bit per thread of an address, in a random order
        on = np.flatnonzero(addr == a)
        rank[on] = rng.permutation(len(on))
    bits = (np.uint32(1) << rank.astype(np.uint32)).view(np.int32).astype(dtype) if dtype == np.int32 else \
        (np.uint32(1) << rank.astype(np.uint32))
    t0 = np.empty(5 * m + n, dtype)
    t0[: 4 * m] = rng.integers(info.min, info.max, 4 * m, dtype=np.int64, endpoint=True).astype(dtype)
    ones = -1 if dtype == np.int32 else info.max
    t0[m: 2 * m], t0[2 * m: 3 * m] = ones, 0  # every and/or changes its address: the chain is checkable
    t0[4 * m: 5 * m] = ones  # not a thread id: the chain's start is unambiguous
    t0[5 * m:] = rng.integers(0, 4, n).astype(dtype)
    w = rng.integers(0, 4, n).astype(dtype)
    return addr, v, bits, t0, w


@pytest.mark.parametrize("dtype", [np.int32, np.uint32])
def test_global_atomics_under_contention(backend, rng, dtype):
    kernel = atomics_global_i32 if dtype == np.int32 else atomics_global_u32
    addr, v, bits, t0, w = _inputs(rng, dtype, N, M)
    t = t0.copy()
    old = int_poisoned(6 * N, dtype)
    kernel[N, 64](t, addr, v, bits, w, old, N, M, backend=backend)
    _check_tables(dtype, t0, t, old, v, bits, addr, M, N)
    cas_old = old[5 * N:]
    slot0 = t0[5 * M:]
    np.testing.assert_array_equal(cas_old, slot0)  # uncontended: the old value is the slot's
    np.testing.assert_array_equal(t[5 * M:], np.where(slot0 == w, v, slot0))


def test_cas_tickets_under_contention(backend, rng):
    n, m = 512, 4
    addr = rng.permutation(np.arange(n) % m).astype(np.int32)
    t = np.zeros(m, np.int32)
    ticket = int_poisoned(n)
    atomic_tickets_i32[n, 128](t, addr, ticket, backend=backend)
    np.testing.assert_array_equal(t, np.bincount(addr, minlength=m))
    for a in range(m):
        got = np.sort(ticket[addr == a])
        np.testing.assert_array_equal(got, np.arange(len(got)))



def _max_serialization(initial: float, olds: np.ndarray, v: np.ndarray, final: float) -> None:
    """The olds of one address are those of some order of its max updates. Memory only rises, so the threads that
    saw one value are consecutive; all but the last of them leave it unchanged, and the last raises it to the value
    the next threads saw (or to the final one). So: the smallest old is the initial value and, for each distinct old
    value, at most one of its threads' operands is above it: exactly the next value, if memory rose after it."""
    seen = np.unique(olds)
    assert seen[0] == initial, f"no thread saw the initial value {initial} (smallest old: {seen[0]})"
    for k, held in enumerate(seen):
        after = seen[k + 1] if k + 1 < len(seen) else final
        raised = v[olds == held]
        raised = sorted(raised[raised > held].tolist())
        assert raised == ([after] if after != held else []), (
            f"threads that saw {held} raised it with {raised}, but the next value held was {after}")


@pytest.mark.parametrize("m", [1, 16])
def test_float_atomics_return_a_serialization(backend, rng, m):
    check_float_atomics(backend, rng, m)


def check_float_atomics(backend: str, rng: np.random.Generator, m: int) -> None:
    """f32 atomic_max and atomic_add on one or a few addresses (many threads of one SIMD group on the same address):
    the returned old values must be exactly those of some serialization of the updates. The add operands are
    small positive integers, so every partial sum is exact and the olds of an address chain through its threads."""
    addr = rng.permutation(np.arange(N) % m).astype(np.int32)
    v = (rng.standard_normal(N) * 100).astype(np.float32)
    v[v == 0] = 1.0  # fmax of +0 and -0 may return either: no zeros
    w = rng.integers(1, 1000, N).astype(np.float32)
    t0 = np.concatenate([(rng.standard_normal(m) * 100).astype(np.float32),
                         rng.integers(-1000, 1000, m).astype(np.float32)])
    t = t0.copy()
    old = np.full(2 * N, np.nan, np.float32)
    atomics_global_f32[N, 64](t, addr, v, w, old, N, m, backend=backend)
    for a in range(m):
        on = np.flatnonzero(addr == a)
        assert t[a] == max(t0[a], v[on].max())
        _max_serialization(t0[a], old[on], v[on], t[a])
        assert t[m + a] == t0[m + a] + w[on].astype(np.float64).sum()
        _chain(t0[m + a], old[N + on], old[N + on] + w[on], t[m + a])

def test_shared_atomics_under_contention(backend, rng):
    groups, size = 4, 64
    n = groups * size
    info = np.iinfo(np.uint32)
    init = np.empty(groups * 48, np.uint32)
    init[:] = rng.integers(0, info.max, groups * 48, dtype=np.int64, endpoint=True).astype(np.uint32)
    init.reshape(groups, 48)[:, 8:16] = info.max  # and: every thread clears a set bit
    init.reshape(groups, 48)[:, 16:24] = 0  # or: every thread sets a clear bit
    init.reshape(groups, 48)[:, 32:40] = info.max  # exchange: not a thread id
    init.reshape(groups, 48)[:, 40:48] = 0  # tickets start at 0
    v = rng.integers(0, info.max, n, dtype=np.int64, endpoint=True).astype(np.uint32)
    local = np.arange(n) % size
    bits = np.uint32(1) << (local // 8).astype(np.uint32)  # 8 threads per address, a bit each
    final = int_poisoned(groups * 48, np.uint32)
    old = int_poisoned(6 * n, np.uint32)
    atomics_shared_u32[n, size](init, v, bits, final, old, n, backend=backend)
    for g in range(groups):
        sl = slice(g * size, (g + 1) * size)
        t0, t = init[g * 48: g * 48 + 40], final[g * 48: g * 48 + 40]
        olds = old.reshape(6, n)[:5, sl].reshape(-1)
        _check_shared(t0, t, olds.reshape(5, size), v[sl], bits[sl], local[sl] % 8, np.arange(n)[sl])
        tickets = old.reshape(6, n)[5, sl]
        ends = final[g * 48 + 40: g * 48 + 48]
        for a in range(8):
            got = np.sort(tickets[local[sl] % 8 == a])
            np.testing.assert_array_equal(got, np.arange(8))
            assert ends[a] == 8


def _check_shared(t0, t, old, v, bits, addr, ids) -> None:
    for a in range(8):
        on = np.flatnonzero(addr == a)
        assert t[a] == min(t0[a], v[on].min())
        held = {int(t0[a]), *(int(x) for x in v[on])}
        assert all(int(x) in held and t[a] <= x <= t0[a] for x in old[0, on])
        for k, combine in ((1, lambda o, b: o & ~b), (2, lambda o, b: o | b), (3, lambda o, b: o ^ b)):
            want = t0[k * 8 + a]
            for b in bits[on]:
                want = combine(want, b)
            assert t[k * 8 + a] == want
            _chain(t0[k * 8 + a], old[k, on], combine(old[k, on], bits[on]), t[k * 8 + a])
        _chain(t0[32 + a], old[4, on], ids[on].astype(np.uint32), t[32 + a])


BAD = '''import iron
from iron import Tensor


@iron.kernel
def k(t: Tensor[iron.f32], out: Tensor[iron.f32]):
    i = iron.program_id(0)
    out[i] = iron.OP(t, 0, 1.0{extra})
'''


@pytest.mark.parametrize("op", ["atomic_min", "atomic_and", "atomic_or", "atomic_xor", "atomic_exchange",
                                "atomic_cas"])
def test_float_buffers_are_refused_located(tmp_path, op):
    text = BAD.replace("OP", op).replace("{extra}", ", 2.0" if op == "atomic_cas" else "")
    mod = module_from_source(tmp_path, f"bad_{op}", text)
    with pytest.raises(CompileError, match=f"{op} on a buffer of f32 is not supported") as e:
        mod.k.variant(None, ())
    assert f"bad_{op}.py:8" in str(e.value)


def test_wrong_arity_is_refused(tmp_path):
    text = BAD.replace("OP", "atomic_cas").replace("{extra}", "").replace("f32", "i32").replace("1.0", "1")
    mod = module_from_source(tmp_path, "bad_cas_arity", text)
    with pytest.raises(CompileError, match="atomic_cas"):
        mod.k.variant(None, ())


@pytest.mark.parametrize("chunks", [1, 3, 8])
def test_fence_lets_the_last_group_combine(backend, rng, chunks):
    """fence() + an atomic counter: the last of a row's groups sums the others' parts (float64 oracle, the parts
    summed in order), every count 0 .. chunks-1 seen once per row, and the counters reset, so a second launch on
    the same counters (new data, outputs poisoned) is right too."""
    rows, n, block = 5, 1000, 32
    count = np.zeros(rows, np.int32)
    for _ in range(2):
        x = rng.standard_normal(rows * n).astype(np.float32)
        part = np.full(rows * chunks, np.nan, np.float32)
        out = np.full(rows, np.nan, np.float32)
        seen = np.full(rows * chunks, -1, np.int32)
        last_group_sums[rows * chunks * block, block](x, part, count, out, seen, n, chunks, block, backend=backend)
        want = x.astype(np.float64).reshape(rows, n).sum(axis=1)
        np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-4)
        assert (np.sort(seen.reshape(rows, chunks), axis=1) == np.arange(chunks)).all()
        assert (count == 0).all()


def test_fence_spellings():
    """fence() is CUDA's fence.acq_rel.gpu (not __threadfence's sequentially consistent fence.sc), HIP's
    __threadfence, MSL 3.2's device-scope atomic_thread_fence and SPIR-V's device-scope
    OpMemoryBarrier; the C-family vectorizer never merges accesses across it."""
    from iron.codegen import emit_cuda, emit_hip, emit_msl

    kernel = last_group_sums.variant(None, (32,)).kernel
    cuda = emit_cuda(kernel).source
    assert cuda.count('asm volatile("fence.acq_rel.gpu;" ::: "memory");') == 2 and "__threadfence" not in cuda
    assert emit_hip(kernel).source.count("__threadfence();") == 2
    assert emit_msl(kernel).source.count(
        "atomic_thread_fence(mem_flags::mem_device, memory_order_seq_cst, thread_scope_device);") == 2
