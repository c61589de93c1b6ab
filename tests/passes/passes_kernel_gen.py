"""A hypothesis-driven generator of random, well-defined kernels for checking that passes preserve behaviour.

A kernel reads one element per thread from ``xi``/``xu``/``xf`` (i32/u32/f32), builds random expression DAGs over
those, ``program_id``, ``n`` and constants (chosen so identities like ``x + 0`` and ``x * 1`` come up), with random
``if``/``else``, dynamic and static loops, ``while`` loops, ``var`` get/set, ``break``/``continue``/``return``, SIMD
reductions and atomics, and stores to ``oi``/``ou``/``of``. Each store site owns a slot per thread
(``gid * SITES + site``), so a value stored early is not hidden by a later store. Everything it builds is defined
behaviour: divisors are forced into 1..8, shift amounts into 0..31, and floats are range-checked before a cast to an
integer.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from hypothesis import strategies as st

from iron.ir import Kernel, Value
from iron.ir import types as t

from .passes_helpers import new_kernel

N_THREADS = 16
SITES = 48  # store slots per thread in each output buffer
NUMERIC = (t.i32, t.u32, t.f32)
CONSTS = {
    t.i32: [0, 1, -1, 2, 3, 7, 8, 31, 32, -(2**31), 2**31 - 1],
    t.u32: [0, 1, 2, 3, 8, 16, 31, 2**31, 2**32 - 1],
    t.f32: [0.0, -0.0, 0.0, -0.0, 1.0, -1.0, 0.5, 2.0, 3.0, 1e30, -1e-30, 65504.0],
    t.bool_: [True, False],
}
INT_BINARY = ["add", "sub", "mul", "min", "max", "and", "or", "xor", "shl", "shr", "div", "rem"]
FLOAT_BINARY = ["add", "sub", "mul", "div", "min", "max", "rem"]
FLOAT_UNARY = ["neg", "abs", "exp", "sqrt", "floor", "ceil", "sin", "tanh"]
COMPARE = ["lt", "le", "gt", "ge", "eq", "ne"]


@dataclass
class _Scope:
    values: dict[t.ScalarType, list[Value]] = field(default_factory=lambda: {ty: [] for ty in CONSTS})
    vars: list[Value] = field(default_factory=list)
    exprs: list[tuple[str, list[Value], t.ScalarType]] = field(default_factory=list)


#: the ``exact`` profile (differential testing across backends): float ops that every backend rounds the same way
#: (IEEE basic ops; Vulkan's OpFDiv and the transcendentals may differ by ulps, fma need not be fused there)
EXACT_FLOAT_BINARY = ["add", "sub", "mul", "min", "max"]
EXACT_FLOAT_UNARY = ["neg", "abs", "floor", "ceil"]


class KernelGen:
    def __init__(self, draw, budget: int, exact: bool = False, rng: np.random.Generator | None = None):
        self.draw = draw  # hypothesis's draw, or None with ``rng``: plain NumPy choices (uniform, no shrinking)
        self.rng = rng
        self.budget = budget
        self.exact = exact
        self.depth = 0  # nesting of if/loop bodies: the exact profile keeps SIMD ops in uniform (top-level) code
        bufs = [(name, t.BufferType(ty)) for name, ty in (("xi", t.i32), ("xu", t.u32), ("xf", t.f32))]
        outs = [(name, t.BufferType(ty)) for name, ty in (("oi", t.i32), ("ou", t.u32), ("of", t.f32))]
        self.kernel, self.b, self.p = new_kernel(*bufs, *outs, ("n", t.i32), name="random")
        self.out = {t.i32: self.p["oi"], t.u32: self.p["ou"], t.f32: self.p["of"]}
        self.scopes = [_Scope()]
        self.sites = 0

    # -- helpers -------------------------------------------------------------------------------------------------

    def pick(self, options):
        if self.rng is not None:
            return options[int(self.rng.integers(len(options)))]
        return self.draw(st.sampled_from(options))

    def integers(self, lo: int, hi: int) -> int:
        if self.rng is not None:
            return int(self.rng.integers(lo, hi + 1))
        return self.draw(st.integers(lo, hi))

    def chance(self, p: float) -> bool:
        return self.integers(0, 99) < p * 100

    def add(self, v: Value) -> Value:
        self.scopes[-1].values[v.type].append(v)
        return v

    def visible(self, ty) -> list[Value]:
        return [v for s in self.scopes for v in s.values[ty]]

    def const(self, ty) -> Value:
        options = CONSTS[ty]
        if self.exact and ty.is_float:  # lavapipe folds x * 0.0 and x + 0.0 to constants (a driver bug, documented
            options = [c for c in options if c != 0.0]  # in docs/backends/vulkan.md); zeros still come from inputs
        return self.b.const(self.pick(options), ty)

    def operand(self, ty, depth: int) -> Value:
        pool = self.visible(ty)
        if pool and self.chance(0.6):
            return self.pick(pool[-3:] if self.chance(0.5) else pool)  # favour recent values: longer chains
        if depth > 0 and self.chance(0.5):
            return self.expr(ty, depth - 1)
        return self.const(ty)

    # -- expressions ---------------------------------------------------------------------------------------------

    def expr(self, ty, depth: int = 2) -> Value:
        exprs = [e for s in self.scopes for e in s.exprs if e[2] == ty]
        if exprs and self.chance(0.15):  # recompute an earlier expression: work for cse
            code, operands, rty = self.pick(exprs)
            return self.add(self.b.op(code, operands, rty).result)
        kinds = ["binary", "binary", "unary", "select", "cast"]
        if ty == t.bool_:
            kinds = ["compare", "compare", "logic", "select"]
        elif ty == t.f32 and not self.exact:
            kinds += ["fma"]
        kind = self.pick(kinds)
        b = self.b
        if kind == "binary":
            code = self.pick((EXACT_FLOAT_BINARY if self.exact else FLOAT_BINARY) if ty.is_float else INT_BINARY)
            x = self.operand(ty, depth)
            y = x if self.chance(0.15) else self.operand(ty, depth)
            if ty.is_int and code in ("div", "rem"):  # divisor in 1..8: no division by zero, no INT_MIN / -1
                y = b.binary("add", b.binary("and", y, b.const(7, ty)), b.const(1, ty))
            elif code in ("shl", "shr"):
                y = b.binary("and", y, b.const(31, ty))
            v = b.binary(code, x, y)
        elif kind == "unary":
            codes = (EXACT_FLOAT_UNARY if self.exact else FLOAT_UNARY) if ty.is_float else \
                ["neg", "not"] + (["abs"] if ty.is_signed else [])
            code = self.pick(codes)
            x = self.operand(ty, depth)
            if code == "sqrt":
                x = b.unary("abs", x)
            v = b.unary(code, x)
        elif kind == "fma":
            v = b.op("fma", [self.operand(ty, depth) for _ in range(3)], ty).result
        elif kind == "select":
            v = b.select(self.operand(t.bool_, depth), self.operand(ty, depth), self.operand(ty, depth))
        elif kind == "cast":
            v = self.cast_to(ty, depth)
        elif kind == "compare":
            src = self.pick(NUMERIC)
            x = self.operand(src, depth)
            y = x if self.chance(0.15) else self.operand(src, depth)
            v = b.binary(self.pick(COMPARE), x, y)
        else:  # logic
            code = self.pick(["and", "or", "xor", "not"])
            x = self.operand(t.bool_, depth)
            v = b.unary("not", x) if code == "not" else b.binary(code, x, self.operand(t.bool_, depth))
        self.scopes[-1].exprs.append((v.owner.opcode, list(v.owner.operands), ty))
        return self.add(v)

    def cast_to(self, ty, depth: int) -> Value:
        b = self.b
        src = self.pick([s for s in (t.i32, t.u32, t.f32, t.bool_) if s != ty])
        x = self.operand(src, depth)
        if src.is_float and ty.is_int:  # keep float->int casts in range (and NaN out) so C would agree
            a = b.unary("abs", x)
            x = b.select(b.binary("lt", a, b.const(1e9, t.f32)), a, b.const(1.0 if self.exact else 0.0, t.f32))
        return b.op("cast", [x], ty).result

    # -- statements ----------------------------------------------------------------------------------------------

    def block(self, n: int, loop: str | None) -> bool:
        """Emit up to ``n`` statements into the current block; returns True when it ended with a jump."""
        for _ in range(n):
            if self.budget <= 0:
                return False
            self.budget -= 1
            kinds = ["expr", "expr", "store", "store", "store", "if", "var", "set", "for", "static", "while", "atomic"]
            if not self.exact or self.depth == 0:
                kinds += ["simd"]
            if loop is not None:
                kinds += ["jump"]
            kind = self.pick(kinds)
            if kind == "jump":
                jumps = ["return"] if loop == "static" else ["break", "continue", "return"]
                self.b.op(self.pick(jumps))
                return True
            getattr(self, "stmt_" + kind)(loop)
        return False

    def nested(self, block, n: int, loop: str | None) -> bool:
        self.scopes.append(_Scope())
        self.depth += 1
        try:
            with self.b.at(block):
                return self.block(n, loop)
        finally:
            self.depth -= 1
            self.scopes.pop()

    def stmt_expr(self, loop):
        self.expr(self.pick(list(CONSTS)))

    def slot(self) -> Value:
        """This thread's slot for a new store site."""
        b = self.b
        gid = self.visible(t.i32)[0]  # program_id is the first i32 of the outer scope
        site = self.sites % SITES
        self.sites += 1
        return b.binary("add", b.binary("mul", gid, b.const(SITES, t.i32)), b.const(site, t.i32))

    def stmt_store(self, loop):
        ty = self.pick(NUMERIC)
        pool = self.visible(ty)
        value = pool[-1] if pool and self.chance(0.5) else self.operand(ty, 2)  # the newest value, often
        self.b.store(self.out[ty], self.slot(), value)

    def stmt_atomic(self, loop):
        ty = self.pick(NUMERIC)
        code = "atomic_add" if ty.is_float else self.pick(["atomic_add", "atomic_max"])
        old = self.b.op(code, [self.out[ty], self.slot(), self.operand(ty, 1)], ty).result
        if self.chance(0.5):
            self.add(old)

    def stmt_simd(self, loop):
        ty = self.pick(NUMERIC)
        codes = ["simd_max", "simd_min"] if self.exact and ty.is_float else ["simd_sum", "simd_max", "simd_min"]
        self.add(self.b.op(self.pick(codes), [self.operand(ty, 1)], ty).result)

    def stmt_var(self, loop):
        ty = self.pick(list(CONSTS))
        v = self.b.var(ty)
        self.b.set(v, self.operand(ty, 1))  # initialised at once: reading an unset var is undefined
        self.scopes[-1].vars.append(v)
        self.add(self.b.get(v))

    def stmt_set(self, loop):
        vars_ = [v for s in self.scopes for v in s.vars]
        if not vars_:
            return self.stmt_var(loop)
        v = self.pick(vars_)
        self.b.set(v, self.operand(v.type.elem, 2))
        if self.chance(0.5):
            self.add(self.b.get(v))

    def stmt_if(self, loop):
        _, then, else_ = self.b.if_(self.operand(t.bool_, 2))
        self.nested(then, self.integers(0, 4), loop)
        if self.chance(0.6):
            self.nested(else_, self.integers(0, 4), loop)

    def stmt_for(self, loop):
        b = self.b
        hi = b.binary("and", self.operand(t.i32, 1), b.const(3, t.i32))  # 0..3 iterations
        _, body = b.for_(b.const(self.pick([0, 1]), t.i32), hi, b.const(self.pick([1, 2]), t.i32), "j")
        self._loop_body(body, "dynamic")

    def stmt_static(self, loop):
        lo, hi, step = self.pick([(0, 3, 1), (0, 4, 2), (3, 0, -1), (2, 2, 1), (1, 5, 1)])
        _, body = self.b.for_(self.b.const(lo, t.i32), self.b.const(hi, t.i32), self.b.const(step, t.i32), "s", True)
        self._loop_body(body, "static")

    def _loop_body(self, body, kind: str):
        self.scopes.append(_Scope())
        self.depth += 1
        self.add(body.args[0])
        try:
            with self.b.at(body):
                self.block(self.integers(1, 4), kind)
        finally:
            self.depth -= 1
            self.scopes.pop()

    def stmt_while(self, loop):
        b = self.b
        count = b.var(t.i32, "w")
        b.set(count, b.const(0, t.i32))
        bound = b.binary("and", self.operand(t.i32, 1), b.const(3, t.i32))
        _, cond, body = b.while_()
        with b.at(cond):
            b.op("condition", [b.binary("lt", b.get(count), bound)])
        with b.at(body):  # count first, so `continue` cannot loop forever
            b.set(count, b.binary("add", b.get(count), b.const(1, t.i32)))
        self.nested(body, self.integers(0, 3), "dynamic")

    # -- whole kernel --------------------------------------------------------------------------------------------

    def build(self) -> Kernel:
        b, p = self.b, self.p
        gid = self.add(b.thread("program_id", 0))
        self.add(p["n"])
        self.add(b.load(p["xi"], gid, name="a"))
        self.add(b.load(p["xu"], gid, name="u"))
        self.add(b.load(p["xf"], gid, name="f"))
        if not self.block(self.integers(1, 12), None):
            for ty in NUMERIC:
                b.store(self.out[ty], self.slot(), self.operand(ty, 1))
        return self.kernel


def random_kernel(seed: int, budget: int = 30, exact: bool = False) -> Kernel:
    """The same generator driven by a NumPy generator on ``seed``: uniform choices, so long runs cover the rare ops
    that hypothesis (which favours simple examples) seldom draws."""
    return KernelGen(None, budget, exact, np.random.default_rng(seed)).build()


@st.composite
def kernels(draw, budget: int = 30, exact: bool = False) -> Kernel:
    """A random kernel; ``exact``: only ops every backend computes bit for bit alike (no float division, remainder,
    transcendental, fma or float SIMD sum; SIMD ops only in uniform code), for differential tests."""
    return KernelGen(draw, budget, exact).build()
