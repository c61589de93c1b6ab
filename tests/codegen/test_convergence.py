"""The convergence analysis (``codegen/cfamily/convergence.py``): which SIMD ops get the entry ballot ``iron_live``
as their lane mask on CUDA/HIP, and which the run-time mask of the lanes active at that moment.

Getting this wrong in one direction is a wrong answer on NVIDIA GPUs (a shuffle over a mask naming lanes that are
not there), in the other only a missed guarantee, so each case below asserts the exact mask every SIMD op gets.
"""

from __future__ import annotations

import re

from iron import (
    Tensor,
    f32,
    group_id,
    i32,
    kernel,
    local_id,
    program_id,
    simd_broadcast,
    simd_lane,
    simd_max,
    simd_shuffle,
    simd_sum,
)
from iron.codegen import emit_cuda
from iron.codegen.cfamily.hip import emit_hip


@kernel
def top_level(x: Tensor[f32], out: Tensor[f32]):
    i = program_id(0)
    v = x[i]
    out[i] = simd_sum(v) + simd_shuffle(v, simd_lane() ^ 1) + simd_broadcast(v, 0)


@kernel
def data_branch(x: Tensor[f32], out: Tensor[f32]):
    i = program_id(0)
    v = x[i]
    if v > 0.0:
        out[i] = simd_sum(v)


@kernel
def uniform_branch_then_divergent_return(x: Tensor[f32], out: Tensor[f32], n: i32):
    i = program_id(0)
    v = x[i]
    if group_id(0) < n:  # the same in every lane of a SIMD group
        v = v + simd_max(v)
    if v > 1.0:
        return
    out[i] = simd_sum(v)  # some lanes have left


@kernel
def loops(x: Tensor[f32], out: Tensor[f32], n: i32):
    i = program_id(0)
    acc = 0.0
    for k in range(0, n, 4):  # uniform bounds: every lane runs every iteration
        acc += simd_sum(x[i] * k)
    for k in range(local_id(0), n, 64):  # bounds differ per lane
        acc += simd_sum(x[i] + k)
    out[i] = simd_sum(acc)  # after both loops every lane is back


@kernel
def divergent_break(x: Tensor[f32], out: Tensor[f32], n: i32):
    i = program_id(0)
    acc = 0.0
    for k in range(0, n, 1):
        acc += simd_sum(x[i])  # later iterations run without the lanes that broke out
        if x[i] > k:
            break
    out[i] = simd_sum(acc)


@kernel
def uniform_variable(x: Tensor[f32], out: Tensor[f32], n: i32):
    i = program_id(0)
    limit = n * 2
    if local_id(0) == 0:
        limit = 0  # now limit differs between lanes
    s = simd_sum(x[i])
    if s > 0.0:  # a reduction's result is the same in every lane
        out[i] = simd_sum(x[i] * 2.0)
    if limit > 3:
        out[i] = simd_sum(x[i] * 3.0)


@kernel
def while_condition_with_divergent_exit(x: Tensor[f32], out: Tensor[f32]):
    i = program_id(0)
    v = x[i]
    while simd_sum(v) > 0.0:  # runs again after some lanes broke out
        if v > 100.0:
            break
        v = v - 1.0
    out[i] = v


@kernel
def broadcasts(x: Tensor[f32], out: Tensor[f32]):
    i = program_id(0)
    last = simd_broadcast(x[i], 31)  # in a partial SIMD group lane 31 is missing: each lane reads its own value
    first = simd_broadcast(x[i], 0)  # every SIMD group has a lane 0
    if first > 0.0:
        out[i] = simd_sum(x[i])
    if last > 0.0:
        out[i] = simd_sum(x[i] * 2.0)


def masks(k, emit=emit_cuda, *args) -> list[str]:
    """The mask argument of every SIMD call in the kernel body, in order."""
    src = emit(k.variant(None).kernel, *args).source
    body = src[src.index("__global__"):]
    return re.findall(r"iron_simd_\w+\(.*, (iron_live|__activemask\(\)|__ballot\(1\))\);", body)


def test_straight_line_ops_use_the_entry_ballot():
    assert masks(top_level) == ["iron_live"] * 3
    src = emit_cuda(top_level.variant(None).kernel).source
    assert "const unsigned iron_live = __ballot_sync(iron_lanes_mask()," in src
    assert src.index("iron_live = ") < src.index("return;")  # taken before any lane leaves


def test_a_branch_on_data_uses_the_active_lanes():
    assert masks(data_branch) == ["__activemask()"]


def test_uniform_branches_keep_and_divergent_returns_lose_convergence():
    assert masks(uniform_branch_then_divergent_return) == ["iron_live", "__activemask()"]


def test_loops_with_uniform_bounds_are_convergent():
    assert masks(loops) == ["iron_live", "__activemask()", "iron_live"]


def test_a_divergent_break_makes_the_loop_divergent_until_it_ends():
    assert masks(divergent_break) == ["__activemask()", "iron_live"]


def test_a_while_condition_after_a_divergent_exit_is_divergent():
    assert masks(while_condition_with_divergent_exit) == ["__activemask()"]


def test_only_a_broadcast_of_lane_0_is_uniform():
    assert masks(broadcasts) == ["iron_live", "iron_live", "iron_live", "__activemask()"]


def test_variables_and_reductions_carry_uniformity():
    assert masks(uniform_variable) == ["iron_live", "iron_live", "__activemask()"]


def test_hip_uses_the_same_analysis_with_its_ballot():
    assert masks(uniform_branch_then_divergent_return, emit_hip, 64) == ["iron_live", "__ballot(1)"]
    src = emit_hip(top_level.variant(None).kernel, 64).source
    assert "const unsigned long long iron_live = __ballot(" in src
