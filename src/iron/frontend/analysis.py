"""Facts about a compiled variant that launches check: collectives, and buffers that must cover the grid."""

from __future__ import annotations

from ..ir import ops as O
from ..ir.core import Kernel, Op

COLLECTIVE_OPS = {"barrier"} | O.SIMD_REDUCE | O.SIMD_EXCHANGE


def launch_facts(kernel: Kernel):
    """(uses collectives, [SizeCheck]). A buffer indexed with exactly ``program_id(axis)`` by a top-level op that
    every thread reaches (no earlier ``return`` on any path) must have at least ``grid[axis]`` elements."""
    from .kernel import SizeCheck

    collectives = any(op.opcode in COLLECTIVE_OPS for op in kernel.walk())
    names = {p.value.uid: p.name for p in kernel.params if p.kind == "buffer"}
    checks: list[SizeCheck] = []
    seen: set[tuple[str, int]] = set()
    for op in kernel.body.ops:
        if op.regions and _may_return(op):
            break
        if op.opcode == "return":
            break
        if op.opcode in ("load", "store", "atomic_add", "atomic_max"):
            buf, idx = op.operands[0], op.operands[1]
            owner = idx.owner
            if buf.uid in names and isinstance(owner, Op) and owner.opcode == "program_id":
                key = (names[buf.uid], owner.attrs["axis"])
                if key not in seen:
                    seen.add(key)
                    access = "reads" if op.opcode == "load" else "writes"
                    checks.append(SizeCheck(key[0], key[1], access, op.loc.line if op.loc else 0))
    return collectives, checks


def _may_return(op: Op) -> bool:
    return any(inner.opcode == "return" for inner in op.walk())
