"""Small kernel-building helpers shared by the pass tests."""

from __future__ import annotations

from iron.ir import Block, Builder, Kernel, Param, Value, print_kernel, verify
from iron.ir import types as t

F32_BUF = t.BufferType(t.f32)
I32_BUF = t.BufferType(t.i32)
U32_BUF = t.BufferType(t.u32)


def new_kernel(*params: tuple[str, t.Type], name: str = "k") -> tuple[Kernel, Builder, dict[str, Value]]:
    """An empty kernel with the given parameters, a builder appending to its body, and the parameter values."""
    ps, vals = [], {}
    for pname, ptype in params:
        v = Value(ptype, pname)
        kind = "buffer" if isinstance(ptype, t.BufferType) else "scalar"
        ps.append(Param(pname, kind, v))
        vals[pname] = v
    body = Block()
    return Kernel(name, ps, body), Builder(body), vals


def body_text(kernel: Kernel) -> str:
    """The printed kernel without its signature line and closing brace, dedented by one level."""
    verify(kernel)
    lines = print_kernel(kernel, locs=False).splitlines()[1:-1]
    return "\n".join(line[2:] for line in lines) + "\n"


def opcodes(kernel: Kernel) -> list[str]:
    return [op.opcode for op in kernel.walk()]


def static_for(b: Builder, lo: int, hi: int, step: int = 1, name: str = "i"):
    """A ``static_range(lo, hi, step)`` loop; returns (op, body block, induction variable)."""
    op, body = b.for_(b.const(lo, t.i32), b.const(hi, t.i32), b.const(step, t.i32), name, unroll=True)
    return op, body, body.args[0]
