"""When a kernel can also be launched vectorised: several consecutive elements per thread, moved as 16-byte vectors.

Why: an H200 needs tens of KB of loads in flight per SM to reach its memory bandwidth, and one 4-byte (or 2-byte) load
per thread cannot provide them (2048 threads x 4 bytes = 8 KB per SM). Measured on the H200 (2026-11-30, 2^28
elements, groups of 256): the seed's exp kernel at one element per thread ran at 2.40 TB/s in f32 and 1.30 TB/s in
bf16; through this vector entry at 4.27 TB/s (f32, 4 per thread) and 4.21 TB/s (bf16, 8 per thread), the same as a
vectorised copy (4.27 / 4.24 TB/s).

When the IR allows it -- an *elementwise* kernel -- the printer emits, besides the normal entry point, an *element
function* (the kernel's body for one element, ``program_id(0)`` a parameter) and a *vector entry* in which each thread
calls it for ``width`` consecutive elements. A kernel qualifies when:

- its only thread index is ``program_id(0)``, and it has no barrier, shared array or SIMD-group op (the vector entry
  changes the launch geometry, so nothing may depend on groups or lanes);
- at least one global buffer is a *lane buffer*: every access to it is a ``load``/``store`` at index
  ``program_id(0)`` itself (no atomics), and one of them is a top-level op that every thread reaches (no ``return``
  can come first). Each element of a lane buffer then belongs to exactly one thread, so its ``width`` elements can
  live in registers for the whole body: loaded once as vectors before, stored back once after. The reached access
  matters: it is what makes the launcher require the buffer to cover the whole grid (``frontend.analysis``), so
  touching every element below ``n0`` is in bounds. A buffer used only behind a guard like ``if i < n`` may be
  shorter than the grid, and keeps scalar accesses.

Other buffers keep their scalar accesses. ``__restrict__`` (which the kernel already declares) promises that lane
buffers do not alias them.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...ir import ops as O
from ...ir.core import Kernel

VECTOR_BYTES = 16
_BLOCKERS = {"local_id", "group_id", "group_size", "num_groups", "simd_lane", "simd_group", "simd_size", "barrier",
             "fence", "shared", "local", "vcopy", "async_copy", "async_commit", "async_wait", "num_threads"} \
    | O.MATRIX | O.SIMD_OPS


@dataclass(frozen=True)
class LanePlan:
    """``lanes``: indices into ``kernel.params`` of the lane buffers, in parameter order. ``preload``: those whose
    elements are read before the body (loaded, or stored only on some paths, so unwritten elements keep their
    contents). ``writeback``: those stored after it."""

    width: int
    lanes: tuple[int, ...]
    preload: frozenset[int]
    writeback: frozenset[int]


def plan_lanes(kernel: Kernel) -> LanePlan | None:
    """The vectorisation of ``kernel``, or None when it does not qualify (see the module docstring)."""
    pids: set[int] = set()
    accesses: dict[int, list] = {}
    for op in kernel.walk():
        code = op.opcode
        if code in _BLOCKERS or (code == "program_id" and op.attrs.get("axis") != 0):
            return None
        if code == "program_id":
            pids.add(op.result.uid)
        elif code in ("load", "store") or code in O.ATOMICS:
            accesses.setdefault(op.operands[0].uid, []).append(op)
    # the top-level ops every thread reaches: those before the first one that is or holds a `return`
    reached: set[int] = set()
    for op in kernel.body.ops:
        if any(inner.opcode == "return" for inner in op.walk()):
            break
        reached.add(id(op))
    lanes, preload, writeback = [], set(), set()
    for i, p in enumerate(kernel.params):
        ops = accesses.get(p.value.uid)
        if p.kind != "buffer" or not ops:
            continue
        if not all(op.opcode in ("load", "store") and op.operands[1].uid in pids for op in ops):
            continue
        if not any(id(op) in reached for op in ops):
            continue
        lanes.append(i)
        stores = [op for op in ops if op.opcode == "store"]
        always_stored = any(id(op) in reached for op in stores)
        if any(op.opcode == "load" for op in ops) or not always_stored:
            preload.add(i)
        if stores:
            writeback.add(i)
    if not lanes:
        return None
    width = VECTOR_BYTES // min(kernel.params[i].type.elem.itemsize for i in lanes)
    return LanePlan(width, tuple(lanes), frozenset(preload), frozenset(writeback))
