"""Which float operands the SPIR-V emitter takes around lavapipe's ``x * 0.0`` fold (codegen/spirv/driver_constants.py):
every value the driver may make a constant (fuzz seed 705000879; tests/fuzz/found checks the results on every
backend), and none that only a launch knows, so that ordinary kernels pay nothing for it."""

from __future__ import annotations

import iron
from iron import Tensor, barrier, local_array, local_id, program_id, shared
from iron.codegen.spirv.driver_constants import driver_constants


def _flagged(kernel) -> list[list[bool]]:
    """Per float product or quotient of ``kernel``, in program order: which operands may be driver constants."""
    k = kernel.variant(None, ()).kernel
    found = driver_constants(k)
    return [[v.uid in found for v in op.operands] for op in k.walk()
            if op.opcode in ("mul", "div") and op.result.type.is_float]


@iron.func
def _zero_from_a_loop(p):
    for j in range(3):
        if j > -5:
            return 0.0
    return p


@iron.kernel
def helper_zero(x: Tensor[iron.f32], o: Tensor[iron.f32]):
    i = program_id(0)
    o[i] = _zero_from_a_loop(x[i]) * x[i]


@iron.kernel
def loop_indices(x: Tensor[iron.f32], o: Tensor[iron.f32], n: int):
    i = program_id(0)
    for j in range(3):  # unrolled by the driver: j is 0 in the first copy
        o[i] = iron.f32(j) * x[i]
    for j in range(n):  # a run-time trip count: j is a phi
        o[i] = iron.f32(j) * x[i]


@iron.kernel
def accumulators(x: Tensor[iron.f32], o: Tensor[iron.f32], n: int):
    i = program_id(0)
    acc = 0.0
    for k in range(n):  # the 0.0 meets the loop-carried product at the top: a constant on neither path
        acc = acc * x[k] + 1.0
    o[i] = acc * x[i]
    acc = 0.0
    for k in range(4):  # the first copy of the unrolled loop multiplies the 0.0 itself
        acc = acc * x[k] + 1.0
    o[i] = acc * x[i]


@iron.kernel
def branches(x: Tensor[iron.f32], o: Tensor[iron.f32]):
    i = program_id(0)
    v = x[i]
    if x[i] > 1.0:  # decided at run time: 0.0 on one path, x on the other
        v = 0.0
    o[i] = v * x[i]
    v = x[i]
    if local_id(1) == 0:  # decided by the driver in a group of size 1 along axis 1: 0.0 on the only path left
        v = 0.0
    o[i] = v * x[i]


@iron.kernel
def memories(x: Tensor[iron.f32], o: Tensor[iron.f32]):
    i = program_id(0)
    a = local_array(iron.f32, 2)
    a[0] = 0.0
    a[1] = x[i]
    o[i] = a[1] * a[0]  # registers: element by element
    s = shared(iron.f32, 64)
    s[local_id(0)] = 0.0
    o[i] = s[local_id(0)] * x[i]  # the store forwarded to the load
    barrier()
    o[i] = s[local_id(0)] * x[i]  # past a barrier, other invocations' stores may be read


@iron.kernel
def equal_loads(u: Tensor[iron.u32], x: Tensor[iron.f32], o: Tensor[iron.f32]):
    i = program_id(0)
    o[i] = iron.f32(u[i] - u[i]) * x[i]  # two loads of one address: one value after NIR's CSE (fuzz seed 706000716)
    o[i] = iron.f32(u[(i + 1) & 7] ^ u[(i + 1) & 7]) * x[i]  # ... at an index computed twice
    o[i] = iron.f32(u[i] - u[i + 1]) * x[i]  # two addresses
    o[i] = iron.f32(iron.atomic_add(u, 0, 1) - iron.atomic_add(u, 0, 1)) * x[i]  # two atomics are two values


def test_zeros_the_driver_makes():
    assert _flagged(helper_zero) == [[True, False]]
    assert _flagged(loop_indices) == [[True, False], [False, False]]
    assert _flagged(memories) == [[False, True], [True, False], [False, False]]
    assert _flagged(equal_loads) == [[True, False], [True, False], [False, False], [False, False]]


def test_run_time_values_stay_run_time():
    assert _flagged(accumulators) == [[False, False], [False, False], [True, False], [False, False]]
    assert _flagged(branches) == [[False, False], [True, False]]
