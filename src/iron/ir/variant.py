"""The compiled-variant record and the facts about it that launches and runtimes share.

These live below ``frontend/`` and ``runtime/`` so that both read them without importing each other: the front-end
builds a :class:`Variant`, the runtimes cache their artifacts in it, and the CUDA fast launcher and the msl-cpu runtime
read :func:`constexpr_key` and :data:`COLLECTIVE_OPS`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from . import ops as O
from .core import Kernel, Op

#: ops every thread of a group must reach together: a launch of a kernel using one needs whole groups
COLLECTIVE_OPS = {"barrier"} | O.SIMD_OPS | {"frag_load", "mma", "mma_q4", "mv_q4", "frag_store", "wg_mma", "wg_wait",
                                              "tile_load", "tile_commit", "tile_wait"}


@dataclass
class SizeCheck:
    """A buffer indexed directly by ``program_id(axis)`` outside any guard: it needs ``grid[axis]`` elements."""

    param: str
    axis: int
    access: str  # "reads" / "writes"
    line: int


@dataclass
class Variant:
    """One compiled variant: the optimised IR plus what launches and backends need from it."""

    kernel: Kernel
    frontend_ir: Kernel | None
    snapshots: list[tuple[str, str]]
    compile_ms: float
    collectives: bool  # uses barrier/simd ops: the grid must be a multiple of the group
    size_checks: list[SizeCheck]
    artifacts: dict[Any, Any] = field(default_factory=dict)  # per-backend compiled objects
    #: the SIMD width simd_size() was folded to (the variant runs only at that width); None: read at run time
    simd_width: int | None = None
    #: the kernel calls simd_size(): its variants are keyed by the width they were compiled for
    reads_simd_size: bool = False


def constexpr_key(value: Any) -> Any:
    """Cache key of a constexpr value: 1, 1.0 and True (equal in Python) and 0.0 / -0.0 compile differently."""
    if isinstance(value, float):
        return ("float", value.hex())
    return (type(value).__name__, value)


def uses_collectives(kernel: Kernel) -> bool:
    """Whether ``kernel`` has a barrier or SIMD-group collective (its groups must run their threads together)."""
    return any(op.opcode in COLLECTIVE_OPS for op in kernel.walk())


def launch_facts(kernel: Kernel) -> tuple[bool, list[SizeCheck]]:
    """(uses collectives, [SizeCheck]). A buffer indexed with exactly ``program_id(axis)`` by a top-level op that
    every thread reaches (no earlier ``return`` on any path) must have at least ``grid[axis]`` elements."""
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
    return uses_collectives(kernel), checks


def _may_return(op: Op) -> bool:
    return any(inner.opcode == "return" for inner in op.walk())
