"""IR verifier: structure, dominance and types. Run after the front-end and after every pass.

A failure here is a bug in Iron (the front-end or a pass), never the user's: it raises ``VerifyError`` naming the
op and its source line so the bug report points somewhere useful.
"""

from __future__ import annotations

from . import ops as O
from . import types as t
from .core import Block, Kernel, Op, Value
from .printer import _Namer, format_op


class VerifyError(Exception):
    """The IR is malformed (an internal error)."""


class _Verifier:
    def __init__(self, kernel: Kernel):
        self.kernel = kernel
        self.defined: set[int] = set()
        self.namer = _Namer()

    def fail(self, op: Op, msg: str) -> None:
        where = f" (line {op.loc.line})" if op.loc else ""
        raise VerifyError(f"kernel {self.kernel.name}: {msg} in `{format_op(op, self.namer)}`{where}")

    def run(self) -> None:
        for p in self.kernel.params:
            self.defined.add(p.value.uid)
            if p.kind == "buffer" and not isinstance(p.type, t.BufferType):
                raise VerifyError(f"parameter {p.name} is a buffer of type {p.type}")
            if p.kind == "scalar" and not isinstance(p.type, t.ScalarType):
                raise VerifyError(f"parameter {p.name} is a scalar of type {p.type}")
        self.block(self.kernel.body, loops=0, scope=[])

    def block(self, block: Block, loops: int, scope: list[set[int]]) -> None:
        local: set[int] = set()
        for a in block.args:
            local.add(a.uid)
            self.defined.add(a.uid)
        for i, op in enumerate(block.ops):
            if op.parent is not block:
                self.fail(op, "op's parent link is stale")
            self.op(op, loops, scope + [local])
            if op.opcode in O.JUMPS | {"condition"} and i != len(block.ops) - 1:
                self.fail(op, f"`{op.opcode}` must end its block")
            if op.result is not None:
                if op.result.uid in self.defined:
                    self.fail(op, "value defined twice")
                local.add(op.result.uid)
                self.defined.add(op.result.uid)
        # values defined in this block go out of scope when it ends
        self.defined -= local

    def op(self, op: Op, loops: int, scope: list[set[int]]) -> None:
        info = O.OPS.get(op.opcode)
        if info is None:
            self.fail(op, f"unknown opcode {op.opcode!r}")
        if info.n_operands >= 0 and len(op.operands) != info.n_operands:
            self.fail(op, f"expected {info.n_operands} operands, got {len(op.operands)}")
        if len(op.regions) != info.n_regions:
            self.fail(op, f"expected {info.n_regions} regions")
        if info.has_result != (op.result is not None):
            self.fail(op, "result presence does not match the op table")
        for v in op.operands:
            if not isinstance(v, Value):
                self.fail(op, f"operand {v!r} is not a Value")
            if v.uid not in self.defined:
                self.fail(op, f"operand {v!r} does not dominate its use")
        self.check_types(op)
        if op.opcode in ("break", "continue") and loops == 0:
            self.fail(op, f"`{op.opcode}` outside a loop")
        if op.opcode in O.JUMPS and loops < 0:
            self.fail(op, f"`{op.opcode}` inside a while condition region")
        if op.opcode == "if":
            for r in op.regions:
                self.block(r, loops, scope)
        elif op.opcode == "for":
            body = op.regions[0]
            if len(body.args) != 1 or body.args[0].type != t.i32:
                self.fail(op, "for body needs one i32 block argument")
            # break/continue cannot target an unrolled loop: mark it so only nested dynamic loops allow them
            self.block(body, 0 if op.attrs.get("unroll") and loops >= 0 else loops + 1, scope)
        elif op.opcode == "while":
            cond, body = op.regions
            if not cond.ops or cond.ops[-1].opcode != "condition":
                self.fail(op, "while condition region must end with `condition`")
            self.block(cond, -1, scope)  # a condition region computes a value: no jumps
            self.block(body, loops + 1, scope)

    def check_types(self, op: Op) -> None:  # noqa: C901 - one flat table of rules reads best
        code, xs = op.opcode, [v.type for v in op.operands]
        r = op.result.type if op.result is not None else None

        def need(cond: bool, msg: str) -> None:
            if not cond:
                self.fail(op, msg)

        scalar = all(isinstance(x, t.ScalarType) for x in xs)
        if code in _MEMORY_RULES:
            _check_memory(code, xs, r, op.attrs, need)
        elif code == "const":
            need(isinstance(r, t.ScalarType) and "value" in op.attrs, "const needs a scalar type and a value")
        elif code in O.BINARY_ARITH:
            need(scalar and xs[0] == xs[1] == r and not r.is_bool, "arithmetic needs two equal numeric types")
        elif code in O.BITWISE:
            need(scalar and xs[0] == xs[1] == r and not r.is_float, "bitwise ops need equal int/bool types")
            need(code not in ("shl", "shr") or r.is_int, "shifts need ints")
        elif code == "neg":
            need(scalar and xs[0] == r and not r.is_bool, "neg needs a number")
        elif code == "not":
            need(scalar and xs[0] == r and not r.is_float, "not needs an int or bool")
        elif code in O.COMPARE:
            need(scalar and xs[0] == xs[1] and r == t.bool_, "comparison needs equal types and a bool result")
        elif code in O.MATH_PREDICATES:
            need(scalar and xs[0].is_float and r == t.bool_, "a float predicate takes a float and gives a bool")
        elif code in O.FLOAT_MATH or code == "fma":
            need(scalar and all(x == r for x in xs) and r.is_float, "math needs floats of the result type")
        elif code == "abs":
            need(scalar and xs[0] == r and (r.is_float or r.is_signed), "abs needs a float or signed int")
        elif code in O.INT_BITS:
            need(scalar and all(x == r for x in xs) and r in (t.i32, t.u32), f"{code} needs i32/u32 of the result type")
        elif code == "bitcast":
            need(scalar and {xs[0], r} <= {t.f32, t.i32, t.u32}, "bitcast between f32, i32 and u32")
        elif code == "select":
            need(scalar and xs[0] == t.bool_ and xs[1] == xs[2] == r, "select(bool, T, T) -> T")
        elif code == "cast":
            need(scalar and isinstance(r, t.ScalarType), "cast between scalars")
        elif code in O.THREAD_AXIS:
            need(r == t.i32 and op.attrs.get("axis") in (0, 1, 2), "thread index needs axis 0..2 and i32")
        elif code in ("simd_lane", "simd_group", "simd_size"):
            need(r == t.i32, "simd index is i32")
        elif code in O.SIMD_REDUCE:
            need(scalar and xs[0] == r and not r.is_bool, "simd reduction needs a number")
        elif code in O.SIMD_EXCHANGE:
            need(scalar and xs[0] == r and xs[1] == t.i32, "simd exchange needs (value, i32 lane)")
        elif code in O.SIMD_VOTE:
            need(xs[0] == t.bool_ and r == (t.u32 if code == "simd_ballot" else t.bool_), "simd vote needs a bool")
        elif code in O.SIMD_SCAN:
            need(scalar and xs[0] == r and r in (t.i32, t.u32, t.f32), "simd prefix sum needs i32/u32/f32")
        elif code == "var":
            need(isinstance(r, t.VarType), "var result must be a var type")
        elif code == "get":
            need(isinstance(xs[0], t.VarType) and r == xs[0].elem, "get(var<T>) -> T")
        elif code == "set":
            need(isinstance(xs[0], t.VarType) and xs[1] == xs[0].elem, "set(var<T>, T)")
        elif code in ("if", "condition"):
            need(xs[0] == t.bool_, f"{code} needs a bool")
        elif code == "for":
            need(all(x == t.i32 for x in xs), "for bounds must be i32")
            if op.attrs.get("unroll"):
                need(all(v.owner is not None and getattr(v.owner, "opcode", None) == "const" for v in op.operands),
                     "static_range bounds must be constants")


#: ops whose operand/result rules are memory and tile-level ones (``_check_memory``)
_MEMORY_RULES = frozenset({"load", "store", "shared", "local", "async_copy", "async_wait", "tile_load",
                           "vcopy", "frag_load", "frag_zero", "mma", "frag_store", "wg_mma", "wg_wait"}) | O.ATOMICS \
    | O.FRAG_LAYOUT | O.FRAG_PERMUTED


def _check_memory(code: str, xs: list, r, attrs: dict, need) -> None:  # noqa: C901 - one flat table of rules
    """The type rules of the memory ops, vector and asynchronous copies and matrix fragments."""
    if code in ("load", "store") or code in O.ATOMICS:
        need(isinstance(xs[0], t.BufferType), "first operand must be a buffer")
        need(isinstance(xs[1], t.ScalarType) and xs[1].is_int, "index must be an integer")
        elem = xs[0].elem
        if code == "load":
            need(r == elem, "load result must be the element type")
        else:
            need(all(x == elem for x in xs[2:]), "stored value must have the element type")
        if code in O.INT_ATOMICS:
            need(elem in (t.i32, t.u32), f"{code} on i32/u32 only")
        if code.startswith("atomic"):
            need(r == elem and (elem in (t.i32, t.u32, t.f32) or code == "atomic_add" and elem in (t.i64, t.u64)),
                 "atomics on i32/u32/f32 only (atomic_add also on i64/u64)")
            need(xs[0].space in ("global", "shared"), "atomic on a buffer")
    elif code in ("shared", "local"):
        a = attrs
        need(r == t.BufferType(a.get("elem"), code, a.get("size")), f"{code} result type mismatch")
        if code == "shared" and a.get("size") is None:  # run-time length: a scalar parameter's value at launch
            need(isinstance(a.get("length"), str), "shared with no size names its length parameter")
        else:
            need(isinstance(a.get("size"), int) and a["size"] > 0, f"{code} size must be a positive int")
    elif code == "async_copy":
        need(isinstance(xs[0], t.BufferType) and xs[0].space == "shared" and isinstance(xs[2], t.BufferType)
             and xs[2].space == "global" and xs[0].elem == xs[2].elem, "async_copy(shared, j, global, i)")
        n = attrs.get("n")
        need(isinstance(n, int) and n > 0 and not n & (n - 1) and 4 <= n * xs[0].elem.itemsize <= 16,
             "async_copy moves 4, 8 or 16 bytes")
    elif code == "tile_load":
        need(isinstance(xs[0], t.BufferType) and xs[0].space == "shared" and isinstance(xs[2], t.BufferType)
             and xs[2].space == "global" and xs[0].elem == xs[2].elem, "tile_load(shared, j, global, ...)")
        need(all(isinstance(x, t.ScalarType) and x.is_int for k, x in enumerate(xs) if k not in (0, 2)),
             "tile_load's indices are ints")
        need(all(isinstance(attrs.get(k), int) for k in ("rows_box", "cols_box", "dst_ld")), "tile_load box attrs")
    elif code == "async_wait":
        need(isinstance(attrs.get("pending"), int), "async_wait needs attrs.pending")
    elif code == "vcopy":
        n = attrs.get("n")
        need(len(xs) == 4 and all(isinstance(xs[k], t.BufferType) for k in (0, 2)), "vcopy(dst, i, src, j)")
        need(all(isinstance(xs[k], t.ScalarType) and xs[k].is_int for k in (1, 3)), "vcopy indices are ints")
        need(xs[0].elem == xs[2].elem, "vcopy between buffers of one element type")
        need(isinstance(n, int) and n > 0 and (n & (n - 1)) == 0 and n * xs[0].elem.itemsize <= 16,
             "vcopy moves a power-of-two count of elements, at most 16 bytes")
    elif code == "frag_load":
        need(isinstance(r, t.FragType) and r.role in ("a", "b") and isinstance(xs[0], t.BufferType)
             and r.elem == xs[0].elem, "frag_load(buf, index, ld) -> frag of buf's dtype")
        need(all(isinstance(x, t.ScalarType) and x.is_int for x in xs[1:]), "frag_load index and ld are ints")
    elif code == "frag_zero":
        need(isinstance(r, t.FragType) and r.role == "acc" and r.elem == t.f32, "frag_zero -> f32 accumulator")
    elif code == "mma":
        a, b_, c = xs
        need(all(isinstance(x, t.FragType) for x in xs) and (a.role, b_.role, c.role) == ("a", "b", "acc")
             and r == c and a.elem == b_.elem and (a.rows, a.cols, b_.cols) == (c.rows, b_.rows, c.cols),
             "mma(a MxK, b KxN, acc MxN) -> acc")
    elif code == "wg_mma":
        a, _, b_, _, _, c = xs
        if isinstance(a, t.FragType):  # A from each SIMD group's 16 x 64 accumulator
            need(a.role == "acc" and (a.rows, a.cols) == (16, 64), "wg_mma's A fragment is a 16x64 accumulator")
            a = b_
        need(isinstance(a, t.BufferType) and isinstance(b_, t.BufferType) and a.space == b_.space == "shared"
             and a.elem == b_.elem and a.elem.name in t.MMA_SHAPE and isinstance(c, t.FragType) and c.role == "acc"
             and c.rows == 16 and r == c and all(isinstance(xs[k], t.ScalarType) and xs[k].is_int for k in (1, 3, 4)),
             "wg_mma(shared a, ai, shared b, bi, ldb, acc 16xN) -> acc")
    elif code == "wg_wait":
        need(isinstance(attrs.get("pending"), int), "wg_wait needs attrs.pending")
    elif code == "frag_store":
        need(isinstance(xs[0], t.BufferType) and isinstance(xs[3], t.FragType) and xs[3].role == "acc"
             and all(isinstance(x, t.ScalarType) and x.is_int for x in (xs[1], xs[2], xs[4], xs[5])),
             "frag_store(buf, index, ld, acc, rows, cols)")
    elif code in O.FRAG_ELEMENTWISE:
        _check_elementwise(code, xs, r, attrs, need)
    elif code == "mma_q4":
        a, w, s, acc = xs[0], xs[3], xs[6], xs[9]
        need(all(isinstance(x, t.BufferType) for x in (a, w, s)) and a.elem.name in t.MMA_SHAPE and w.elem == t.u32
             and s.elem == a.elem and isinstance(acc, t.FragType) and acc.role == "acc" and acc.rows == 16
             and r == acc and all(isinstance(xs[k], t.ScalarType) and xs[k].is_int for k in (1, 2, 4, 5, 7, 8))
             and isinstance(attrs.get("group"), int) and attrs["group"] > 0 and attrs["group"] % 32 == 0,
             "mma_q4(a, ai, lda, w u32, wi, ldw, s, si, lds, acc 16xN) -> acc (attrs group)")
    elif code == "mv_q4":
        w, s, x, acc = xs[0], xs[3], xs[6], xs[8]
        need(all(isinstance(v, t.BufferType) for v in (w, s, x)) and x.elem.name in t.MMA_SHAPE and w.elem == t.u32
             and s.elem == x.elem and isinstance(acc, t.FragType) and acc.role == "acc" and acc.cols == 16
             and acc.rows % 16 == 0 and r == acc
             and all(isinstance(xs[k], t.ScalarType) and xs[k].is_int for k in (1, 2, 4, 5, 7))
             and isinstance(attrs.get("group"), int) and attrs["group"] > 0 and attrs["group"] % 32 == 0,
             "mv_q4(w u32, wi, ldw, s, si, lds, x, xi, acc 16mt x 16) -> acc (attrs group)")
    elif code == "frag_to_a":
        need(isinstance(xs[0], t.FragType) and xs[0].role == "acc" and xs[0].rows == 16 and isinstance(r, t.FragType)
             and r.role == "a" and (r.rows, r.cols) == (16, 16) and r.elem.name in t.MMA_SHAPE
             and isinstance(xs[1], t.ScalarType) and xs[1].is_int,
             "frag_to_a(acc 16xN, col0 int) -> a 16x16")


def _frag_operand(x) -> bool:
    return x == t.f32 or isinstance(x, t.FragType) and x.role in ("acc", "row")


def _check_elementwise(code: str, xs: list, r, attrs: dict, need) -> None:
    """frag_unary/binary/reduce/fill/mask: f32 accumulators, row fragments ((rows) x 1) and f32 scalars."""
    need(isinstance(r, t.FragType) and r.role in ("acc", "row") and r.elem == t.f32, f"{code} -> an f32 fragment")
    frags = [x for x in xs if isinstance(x, t.FragType)]
    if code in ("frag_unary", "frag_binary"):
        need(all(_frag_operand(x) for x in xs) and frags, f"{code} on fragments and f32 scalars")
        need(all(x.rows == r.rows for x in frags), f"{code}: operands with the result's rows")
        need(r.role == ("acc" if any(x.role == "acc" for x in frags) else "row"), f"{code}: result role")
        need(all(x.role == "row" or x == r for x in frags), f"{code}: accumulators of one shape")
        fns = O.FRAG_BINARY_FNS if code == "frag_binary" else tuple(O.FLOAT_MATH) + ("neg", "abs")
        need(attrs.get("fn") in fns, f"{code}: fn {attrs.get('fn')!r}")
    elif code == "frag_reduce":
        need(isinstance(xs[0], t.FragType) and xs[0].role == "acc" and r.role == "row" and r.rows == xs[0].rows
             and attrs.get("fn") in ("max", "add"), "frag_reduce(acc) -> row, fn max/add")
    elif code == "frag_fill":
        need(xs[0] == t.f32, "frag_fill(f32)")
    else:
        need(xs[0] == r and r.role == "acc" and xs[4] == t.f32
             and all(x == t.i32 for x in xs[1:4]) and isinstance(attrs.get("causal"), bool),
             "frag_mask(acc, row0 i32, col0 i32, cols i32, fill f32) -> acc")


def verify(kernel: Kernel) -> None:
    """Raise ``VerifyError`` if ``kernel`` is malformed."""
    _Verifier(kernel).run()
