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
from iron import Tensor, f32, i32, kernel, program_id

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


# -- issue 15 point 1: simd_size() is a compile-time constant of each variant -----------------------------------------

BLOCK = 64


@kernel
def two_level_sum(x: Tensor[f32], out: Tensor[f32], rows: Tensor[f32]):
    """Per group of BLOCK threads: simd_sum, one partial per SIMD group in shared memory sized BLOCK // simd_size(),
    summed by thread 0 over a static_range; and per SIMD group, a static_range(simd_size()) of shuffles."""
    partial = iron.shared(f32, BLOCK // iron.simd_size())
    i = program_id(0)
    v = x[i]
    s = iron.simd_sum(v)
    if iron.simd_lane() == 0:
        partial[iron.simd_group()] = s
    iron.barrier()
    if iron.local_id(0) == 0:
        total = 0.0
        for j in iron.static_range(BLOCK // iron.simd_size()):
            total += partial[j]
        out[iron.group_id(0)] = total
    row = 0.0
    for j in iron.static_range(iron.simd_size()):
        row += iron.simd_shuffle(v, j)
    rows[i] = row


def test_simd_size_folds_per_variant(backend, simd_width, rng):
    groups = 5
    n = groups * BLOCK
    x = rng.standard_normal(n).astype(np.float32)
    out, rows = np.full(groups, np.nan, np.float32), np.full(n, np.nan, np.float32)
    two_level_sum[n, BLOCK](x, out, rows, backend=backend)
    xf = x.astype(np.float64)
    bound = BLOCK * 2.0**-24 * np.abs(xf).reshape(groups, BLOCK).sum(axis=1) * 1.01
    assert (np.abs(out - xf.reshape(groups, BLOCK).sum(axis=1)) <= bound).all(), "two-level sum"
    per_simd = xf.reshape(-1, simd_width).sum(axis=1)
    bound = simd_width * 2.0**-24 * np.abs(xf).reshape(-1, simd_width).sum(axis=1) * 1.01
    assert (np.abs(rows.reshape(-1, simd_width) - per_simd[:, None]) <= bound[:, None]).all(), "static_range sum"
    assert f"= shared f32 x {BLOCK // simd_width} " in two_level_sum.ir(simd_width=simd_width)


def test_a_width_dependent_kernel_has_one_variant_per_width():
    ir8, ir32 = two_level_sum.ir(simd_width=8), two_level_sum.ir(simd_width=32)
    assert ir8 != ir32 and "simd_size" not in ir8 and "simd_size" not in ir32
    widths = {v.simd_width for v in two_level_sum._variants.values()}
    assert {8, 32} <= widths
    # a kernel that never reads simd_size() has one variant for every width
    before = len(reverse._variants)
    reverse.ir(simd_width=8), reverse.ir(simd_width=64)
    assert len(reverse._variants) <= before + 1 and not any(v.reads_simd_size for v in reverse._variants.values())


def test_without_a_width_simd_size_is_not_a_constant():
    with pytest.raises(iron.CompileError) as info:
        two_level_sum.ir()
    assert "test_simd_ops.py" in str(info.value)


@pytest.mark.parametrize("row,backend,target,width", [("hiprtc-gfx90a", "hip", "gfx90a", 64),
                                                       ("hiprtc-gfx1030", "hip", "gfx1030", 32),
                                                       ("nvrtc-sm_90", "cuda", None, 32)])
def test_compile_targets_fold_their_own_width(row, backend, target, width):
    """hipRTC targets compile the variant for their wavefront (64 on gfx90a, 32 on gfx1030); CUDA for 32."""
    from ..backends.compile_targets import COMPILE_ROWS

    reason = COMPILE_ROWS[row].unavailable_reason()
    if reason:
        pytest.skip(reason)
    binary = two_level_sum.compile(backend, target=target)
    assert isinstance(binary, bytes) and binary
    assert width in {v.simd_width for v in two_level_sum._variants.values()}


def test_a_variant_runs_only_at_its_width():
    from iron.errors import LaunchError
    from iron.interp.executor import run_kernel

    variant = two_level_sum.variant(None, (), 32)
    x = np.zeros(64, np.float32)
    with pytest.raises(LaunchError, match="compiled for SIMD width 32"):
        run_kernel(variant.kernel, {"x": x, "out": np.zeros(1, np.float32), "rows": x.copy()}, (64, 1, 1),
                   (64, 1, 1), 8)


def test_emitters_refuse_or_record_another_width():
    """CUDA spells 32 lanes: a variant folded for 64 is refused (located); a SPIR-V module records its width, which
    the Vulkan runtime checks against the device's subgroup size."""
    from iron.codegen import emit_cuda
    from iron.codegen.spirv import emit_spirv

    with pytest.raises(iron.CompileError, match="compiled for SIMD width 64") as info:
        emit_cuda(two_level_sum.variant(None, (), 64).kernel)
    assert "test_simd_ops.py" in str(info.value)
    assert emit_spirv(two_level_sum.variant(None, (), 16).kernel).simd_width == 16
    assert emit_spirv(reverse.variant(None, (), 16).kernel).simd_width == 0  # width-free: runs at any width
