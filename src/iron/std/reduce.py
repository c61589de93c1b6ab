"""Group-wide reductions shared by the std kernels (inlined at each call as ``@iron.func`` helpers)."""

from __future__ import annotations

from ..frontend import func
from ..lang import barrier, simd_group, simd_lane, simd_size, simd_sum


@func
def group_sum(acc, partial, BLOCK):
    """Sum of ``acc`` over the BLOCK threads of the group, in f32, using ``partial`` (a shared f32 array of BLOCK
    elements). Each SIMD group reduces with ``simd_sum``; then SIMD group 0 sums the BLOCK / simd_size() partials with
    a strided loop (one SIMD group's lanes may be fewer than the partials on narrow hardware). The result is valid in
    SIMD group 0; the other SIMD groups get 0.0. Every thread of the group must call it (it holds a barrier)."""
    acc = simd_sum(acc)
    if simd_lane() == 0:
        partial[simd_group()] = acc
    barrier()
    s = 0.0
    if simd_group() == 0:
        for i in range(simd_lane(), BLOCK // simd_size(), simd_size()):
            s += partial[i]
        s = simd_sum(s)
    return s
