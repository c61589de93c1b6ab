"""Issue 15 points 2 and 5 on every backend: shuffles up/down (and simd_shuffle out of range), simd_ballot/any/all,
prefix sums and num_threads, against float64 NumPy oracles computed per SIMD group at the backend's width.

Groups are not a multiple of the SIMD width (a partial last SIMD group in every group) and the votes and sums run in
a branch that only some lanes take: inactive lanes must not contribute, and must not write their (poisoned) outputs.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import iron
from iron import Tensor, i32, kernel, program_id

from ..backends.capabilities import caps
from .simd_kernels import grid_sizes, prefix_float, prefix_i32, prefix_u32, reverse, shuffles, votes

DTYPES = {"f32": np.float32, "f16": np.float16, "bf16": ml_dtypes.bfloat16}
INT_POISON = -0x21524111  # 0xDEADBEEF


@pytest.fixture(params=[8, 32, 64])
def simd_width(request, monkeypatch, backend) -> int:
    """The interpreter runs at each width; a device only at its own (the others skip)."""
    row = caps(backend)
    if row.simd_env is not None:
        monkeypatch.setenv(row.simd_env, str(request.param))
    elif row.simd_width() != request.param:
        pytest.skip(f"{backend} has SIMD width {row.simd_width()}, not {request.param}")
    return request.param


def simd_layout(n: int, group: int, width: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per thread: its lane, the thread index of lane 0 of its SIMD group, and how many lanes that group has."""
    local = np.arange(n) % group
    lane = local % width
    count = np.minimum(width, group - (local - lane))
    return lane, np.arange(n) - lane, count


def exchanged(x: np.ndarray, src: np.ndarray, lane, base, count) -> np.ndarray:
    """x of lane ``src`` of the reader's SIMD group, or the reader's own x where that lane does not exist."""
    ok = (src >= 0) & (src < count)
    return np.where(ok, x[base + np.where(ok, src, 0)], x)


def groups_of(width: int) -> tuple[int, int]:
    """(threads, group size): four groups of 1.5 SIMD widths (a partial SIMD group in each), plus 3 threads."""
    group = width + width // 2 + 1
    return 4 * group, group


def test_shuffles_out_of_range_give_own_value(backend, simd_width, dtype, rng):
    n, group = groups_of(simd_width)
    x = rng.standard_normal(n).astype(DTYPES[dtype])
    delta = rng.integers(0, simd_width + 3, n).astype(np.int32)
    outs = [np.full(n, np.nan, DTYPES[dtype]) for _ in range(4)]
    shuffles[n, group](x, delta, *outs, backend=backend)
    lane, base, count = simd_layout(n, group, simd_width)
    xf = x.astype(np.float64)
    want = [exchanged(xf, lane - delta, lane, base, count), exchanged(xf, lane + delta, lane, base, count),
            exchanged(xf, lane * 3 - 5, lane, base, count),
            exchanged(xf, lane ^ (1 + simd_width // 2), lane, base, count)]
    for name, got, w in zip(("simd_shuffle_up", "simd_shuffle_down", "simd_shuffle", "simd_shuffle_xor"), outs, want):
        bad = np.flatnonzero(got.astype(np.float64) != w)
        assert bad.size == 0, f"{name}: {bad.size} lanes wrong, first {bad[0]}: got {got[bad[0]]}, want {w[bad[0]]}"


def active_mask(n: int, rng) -> np.ndarray:
    on = (rng.random(n) < 0.6).astype(np.int32)
    on[: n // 8] = 1  # some SIMD groups fully active
    return on


def test_ballot_any_all_over_active_lanes(backend, simd_width, rng):
    n, group = groups_of(simd_width)
    x = rng.standard_normal(n).astype(np.float32)
    x[group: group + simd_width] = np.abs(x[group: group + simd_width]) + 1  # a SIMD group where cond holds in all
    on = active_mask(n, rng)
    bal = np.full(n, 0xDEADBEEF, np.uint32)
    any_, all_ = np.full(n, INT_POISON, np.int32), np.full(n, INT_POISON, np.int32)
    votes[n, group](x, on, bal, any_, all_, backend=backend)
    lane, base, count = simd_layout(n, group, simd_width)
    active = on != 0
    cond = active & (x > 0)
    want_bal = np.zeros(n, np.int64)
    want_any, want_all = np.zeros(n, np.int32), np.zeros(n, np.int32)
    for b in np.unique(base):
        members = np.arange(b, b + count[b])
        bits = sum(1 << int(lane[j]) for j in members if cond[j] and lane[j] < 32)
        want_bal[members] = bits
        want_any[members] = int(cond[members].any())
        want_all[members] = int((cond[members] | ~active[members]).all())
    off = ~active
    assert (bal[off] == 0xDEADBEEF).all() and (any_[off] == INT_POISON).all() and (all_[off] == INT_POISON).all()
    np.testing.assert_array_equal(bal[active].astype(np.int64), want_bal[active], "simd_ballot")
    np.testing.assert_array_equal(any_[active], want_any[active], "simd_any")
    np.testing.assert_array_equal(all_[active], want_all[active], "simd_all")


def prefix_oracle(x: np.ndarray, active: np.ndarray, lane, base, count) -> tuple[np.ndarray, np.ndarray]:
    """Inclusive and exclusive sums (float64, or Python ints) over the active lanes of each SIMD group."""
    incl, excl = np.zeros(len(x), dtype=object), np.zeros(len(x), dtype=object)
    for b in np.unique(base):
        total = 0
        for j in range(b, b + count[b]):
            if active[j]:
                excl[j] = total
                total = total + x[j]
                incl[j] = total
    return incl, excl


@pytest.mark.parametrize("itype", ["i32", "u32"])
def test_prefix_sums_int_wrap(backend, simd_width, itype, rng):
    n, group = groups_of(simd_width)
    np_t = np.int32 if itype == "i32" else np.uint32
    info = np.iinfo(np_t)
    x = rng.integers(info.min, info.max, n, dtype=np.int64, endpoint=True).astype(np_t)  # sums wrap
    on = active_mask(n, rng)
    incl, excl = np.full(n, INT_POISON, np.int32).view(np_t), np.full(n, INT_POISON, np.int32).view(np_t)
    (prefix_i32 if itype == "i32" else prefix_u32)[n, group](x, on, incl, excl, backend=backend)
    lane, base, count = simd_layout(n, group, simd_width)
    active = on != 0
    want_incl, want_excl = prefix_oracle([int(v) for v in x], active, lane, base, count)
    wrap = np.vectorize(lambda v: np.array(int(v) % 2**32, np.uint64).astype(np.uint32).view(np_t))
    poison = np.array(INT_POISON, np.int32).view(np_t)
    assert (incl[~active] == poison).all() and (excl[~active] == poison).all()
    np.testing.assert_array_equal(incl[active], wrap(want_incl[active]).astype(np_t), "simd_prefix_sum")
    np.testing.assert_array_equal(excl[active], wrap(want_excl[active]).astype(np_t), "simd_prefix_exclusive_sum")


def test_prefix_sums_float(backend, simd_width, dtype, rng):
    n, group = groups_of(simd_width)
    x = rng.standard_normal(n).astype(DTYPES[dtype])
    on = active_mask(n, rng)
    incl, excl = np.full(n, np.nan, DTYPES[dtype]), np.full(n, np.nan, DTYPES[dtype])
    prefix_float[n, group](x, on, incl, excl, backend=backend)
    lane, base, count = simd_layout(n, group, simd_width)
    active = on != 0
    xf = x.astype(np.float64)
    want_incl, want_excl = prefix_oracle(xf, active, lane, base, count)
    abs_sum, _ = prefix_oracle(np.abs(xf), active, lane, base, count)
    assert np.isnan(incl[~active].astype(np.float64)).all() and np.isnan(excl[~active].astype(np.float64)).all()
    # f32 adds in any order: each partial sum is off by at most (lanes) * 2^-24 * sum |x|; halves then round once
    half_ulp = {"f32": 0.0, "f16": 2.0**-11, "bf16": 2.0**-8}[dtype]
    for name, got, want in (("simd_prefix_sum", incl, want_incl), ("simd_prefix_exclusive_sum", excl, want_excl)):
        g, w = got[active].astype(np.float64), want[active].astype(np.float64)
        bound = simd_width * 2.0**-24 * abs_sum[active].astype(np.float64) * 1.01 + np.abs(w) * half_ulp
        bad = np.flatnonzero(~(np.abs(g - w) <= bound + 1e-30))
        assert bad.size == 0, f"{name}: {bad.size} lanes off, first: got {g[bad[0]]}, want {w[bad[0]]}"


def test_num_threads_is_the_exact_grid(backend):
    grid, group = (37, 5, 3), (8, 2, 1)
    total = int(np.prod(grid))
    out = np.full(3 * total, INT_POISON, np.int32)
    grid_sizes[grid, group](out, backend=backend)
    for axis in range(3):
        np.testing.assert_array_equal(out[axis * total: (axis + 1) * total], np.full(total, grid[axis]),
                                      f"num_threads({axis})")


def test_num_threads_in_an_elementwise_kernel(backend, rng):
    n = 1003  # not a multiple of any group or vector width
    x = rng.standard_normal(n).astype(np.float32)
    y = np.full(n, np.nan, np.float32)
    reverse[n](x, y, backend=backend)
    np.testing.assert_array_equal(y, x[::-1])


def test_prefix_sum_of_a_bool_is_a_located_error():
    @kernel
    def bad(out: Tensor[i32]):
        out[program_id(0)] = iron.simd_prefix_sum(program_id(0) > 3)

    with pytest.raises(iron.CompileError, match="simd_prefix_sum needs a number") as info:
        bad.ir()
    assert "test_simd_ops.py" in str(info.value)
