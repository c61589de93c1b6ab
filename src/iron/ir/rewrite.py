"""IR surgery shared by the passes: cloning with a value map, use counts, replacing uses, erasing and inlining ops.

Passes rewrite in place. Values are identified by object identity (``Value`` defines no ``__eq__``), so a mapping
``dict[Value, Value]`` is the natural substitution. Every helper keeps ``Op.parent``/``Block.parent`` links right,
because the verifier checks them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

from . import ops as O
from . import types as t
from .core import Block, Kernel, Loc, Op, Param, Value

ValueMap = dict[Value, Value]

_NOT_CONST = object()


# -- queries ------------------------------------------------------------------------------------------------------


def const_value(v: Value, default: Any = None) -> Any:
    """The Python value of ``v`` when a ``const`` op defines it, else ``default``."""
    owner = v.owner
    if isinstance(owner, Op) and owner.opcode == "const":
        return owner.attrs["value"]
    return default


def is_const(v: Value) -> bool:
    return const_value(v, _NOT_CONST) is not _NOT_CONST


def defining_op(v: Value, opcode: str | None = None) -> Op | None:
    """The op whose result ``v`` is (optionally only when it has ``opcode``); None for block arguments."""
    owner = v.owner
    if isinstance(owner, Op) and (opcode is None or owner.opcode == opcode):
        return owner
    return None


def is_jump(op: Op) -> bool:
    return op.opcode in O.JUMPS


def is_while_condition(block: Block) -> bool:
    """True for a ``while``'s condition region, which must keep ending with ``condition`` (never with a jump)."""
    owner = block.parent
    return owner is not None and owner.opcode == "while" and owner.regions[0] is block


def blocks(root: Kernel | Block | Op) -> Iterator[Block]:
    """Every block under ``root`` (itself included when a Block), outer before inner, in program order."""
    if isinstance(root, Kernel):
        root = root.body
    if isinstance(root, Block):
        yield root
        ops = list(root.ops)
    else:
        ops = [root]
    for op in ops:
        for r in op.regions:
            yield from blocks(r)


def walk(root: Kernel | Block | Op) -> Iterator[Op]:
    """Every op under ``root`` in program order (a snapshot per block, so erasing while walking is safe)."""
    return root.walk()


def use_counts(root: Kernel | Block | Op) -> Counter[Value]:
    """How many operand slots under ``root`` read each value (a value used twice by one op counts twice)."""
    counts: Counter[Value] = Counter()
    for op in walk(root):
        counts.update(op.operands)
    return counts


def users(root: Kernel | Block | Op) -> dict[Value, list[Op]]:
    """The ops under ``root`` that read each value, in program order (an op appears once per value)."""
    out: dict[Value, list[Op]] = {}
    for op in walk(root):
        for v in dict.fromkeys(op.operands):
            out.setdefault(v, []).append(op)
    return out


# -- substitution -------------------------------------------------------------------------------------------------


def resolve(v: Value, mapping: ValueMap) -> Value:
    """Follow ``mapping`` to its end (a replacement may itself have been replaced later)."""
    while v in mapping:
        v = mapping[v]
    return v


def substitute(root: Kernel | Block | Op, mapping: ValueMap) -> int:
    """Rewrite every operand under ``root`` through ``mapping``; returns how many operand slots changed."""
    if not mapping:
        return 0
    n = 0
    for op in walk(root):
        for i, v in enumerate(op.operands):
            if v in mapping:
                op.operands[i] = resolve(v, mapping)
                n += 1
    return n


def replace_all_uses(root: Kernel | Block | Op, old: Value, new: Value) -> int:
    """Make every op under ``root`` read ``new`` where it read ``old``; returns the number of slots rewritten.

    ``new`` must dominate every use of ``old``; it inherits ``old``'s name hint (see ``inherit_name``).
    """
    inherit_name(new, old)
    return substitute(root, {old: new})


def inherit_name(survivor: Value, dead: Value) -> None:
    """Give ``survivor`` the name hint of the value it replaces when it has none, so the printed IR and generated
    source keep the user's variable name. Constants stay anonymous: a name on ``const 0`` would mislead."""
    if survivor.name is None and dead.name is not None and not is_const(survivor):
        survivor.name = dead.name


def rewrite_operands(op: Op, mapping: ValueMap) -> bool:
    """Rewrite ``op``'s own operands (not its regions') through ``mapping``; returns whether any changed."""
    changed = False
    for i, v in enumerate(op.operands):
        if v in mapping:
            op.operands[i] = resolve(v, mapping)
            changed = True
    return changed


# -- construction and cloning -------------------------------------------------------------------------------------


def make_const(value: bool | float, type: t.ScalarType, loc: Loc | None = None, name: str | None = None) -> Op:
    """A detached ``const`` op; ``value`` is normalised to the Python type the printer and emitters expect."""
    if type.is_bool:
        value = bool(value)
    elif type.is_int:
        value = int(value)
    else:
        value = float(value)
    return Op("const", [], type, {"value": value}, loc=loc, name=name)


def become_const(op: Op, value: bool | float) -> None:
    """Turn ``op`` into a ``const`` in place, keeping its result Value (so uses and the name hint survive)."""
    assert op.result is not None and isinstance(op.result.type, t.ScalarType)
    op.opcode = "const"
    op.operands = []
    op.attrs = make_const(value, op.result.type).attrs
    op.regions = []


def clone_op(op: Op, mapping: ValueMap) -> Op:
    """A deep copy of ``op`` reading ``mapping``'s replacements; records old->new result (and block args) in it."""
    regions = [clone_block(r, mapping) for r in op.regions]
    name = op.result.name if op.result is not None else None
    rtype = op.result.type if op.result is not None else None
    operands = [mapping.get(v, v) for v in op.operands]
    new = Op(op.opcode, operands, rtype, dict(op.attrs), regions, op.loc, name)
    if op.result is not None:
        mapping[op.result] = new.result
    return new


def clone_block(block: Block, mapping: ValueMap) -> Block:
    """A deep copy of ``block`` with fresh block arguments; the copy has no parent yet."""
    args = []
    for a in block.args:
        na = Value(a.type, a.name)
        mapping[a] = na
        args.append(na)
    new = Block(args)
    for op in block.ops:
        new.append(clone_op(op, mapping))
    return new


def clone_ops_into(ops: list[Op], dest: list[Op], parent: Block, mapping: ValueMap) -> None:
    """Clone ``ops`` in order, appending the copies to ``dest`` with ``parent`` as their block."""
    for op in ops:
        new = clone_op(op, mapping)
        new.parent = parent
        dest.append(new)


def clone_kernel(kernel: Kernel) -> Kernel:
    """An independent deep copy of ``kernel`` (fresh Values throughout), e.g. to keep the unoptimised IR."""
    mapping: ValueMap = {}
    params = []
    for p in kernel.params:
        nv = Value(p.value.type, p.value.name)
        mapping[p.value] = nv
        params.append(Param(p.name, p.kind, nv, p.readonly))
    # the body's block arguments are the parameters' values: the copy's must be the new parameters' (a plain
    # clone_block would give them fresh values that no parameter owns)
    args = [mapping.get(a) or Value(a.type, a.name) for a in kernel.body.args]
    mapping.update(zip(kernel.body.args, args))
    body = Block(args)
    for op in kernel.body.ops:
        body.append(clone_op(op, mapping))
    attrs = {k: (dict(v) if isinstance(v, dict) else v) for k, v in kernel.attrs.items()}
    return Kernel(kernel.name, params, body, kernel.loc, attrs)


# -- erasing and inlining -----------------------------------------------------------------------------------------


def erase_op(op: Op, counts: Counter[Value] | None = None) -> None:
    """Detach ``op`` from its block; with ``counts``, subtract the uses made by it and everything nested in it.

    The caller guarantees nothing still reads ``op``'s result.
    """
    if op.parent is not None:
        op.parent.ops.remove(op)
        op.parent = None
    if counts is not None:
        forget_uses(op, counts)


def forget_uses(op: Op, counts: Counter[Value]) -> None:
    """Subtract the operand uses of ``op`` and of every op nested in it from ``counts``."""
    for o in op.walk():
        counts.subtract(o.operands)


def insert_before(anchor: Op, op: Op) -> Op:
    """Insert ``op`` just before ``anchor`` in ``anchor``'s block."""
    block = anchor.parent
    assert block is not None
    block.ops.insert(block.ops.index(anchor), op)
    op.parent = block
    return op


def adopt(ops: list[Op], parent: Block) -> list[Op]:
    """Point each op's parent link at ``parent`` (after moving it there by list surgery)."""
    for op in ops:
        op.parent = parent
    return ops


def truncate_after_jump(block: Block, counts: Counter[Value] | None = None) -> bool:
    """Drop the ops that follow the first jump in ``block`` (they can never run); returns whether any were dropped."""
    for i, op in enumerate(block.ops):
        if is_jump(op) and i + 1 < len(block.ops):
            dead = block.ops[i + 1 :]
            del block.ops[i + 1 :]
            for d in dead:
                d.parent = None
                if counts is not None:
                    forget_uses(d, counts)
            return True
    return False
