"""A kernel reading its SIMD width and lane (tests/runtime_vulkan/test_subgroup_pin.py)."""

from __future__ import annotations

import iron
from iron import Tensor, program_id, simd_lane, simd_size


@iron.kernel
def width_and_lane(o: Tensor[iron.i32]):
    i = program_id(0)
    o[i] = simd_size() * 1000 + simd_lane()
