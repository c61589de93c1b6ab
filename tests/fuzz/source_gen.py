"""A seeded generator of random Iron kernel *source text*: the differential fuzzer's second generator, which (unlike
the IR generator of tests/passes/passes_kernel_gen.py) goes through the whole pipeline, front-end included.

``random_source(seed)`` returns a ``Program``: the text of a module with one ``@iron.kernel def k(...)`` (and up to
two ``@iron.func`` helpers), plus how to launch it. Every kernel takes the same parameters (``PARAMS``): input
buffers of i32/u32/f32/f16/bf16, scalars (``int``, ``iron.u32``, ``float``), a constexpr ``C``, and output buffers
that each store site writes at ``gid * SITES + site`` (a slot per thread and site, so later stores do not hide
earlier ones). A generic kernel (``Tensor[T]``) also gets ``xt``/``ot``.

What it writes: typed expression trees over i32/u32/f32/bool (arithmetic, comparisons, chains, ``and``/``or``/
``not``, ternaries, ``where``, min/max/abs, bit ops and counts, ``umulhi``, ``bitcast``, ``**`` with literal
exponents, casts between every pair of bool/i32/u32/f32/f16/bf16, including saturating float->int casts, which
docs/dsl.md defines); statements (SSA and mutable locals, ``+=``, if/elif/else, ``for range`` with per-thread
bounds, ``static_range``, ``while`` with a bounded counter, break/continue, early ``return``, atomics, register
arrays (``local_array``) at static and masked run-time indices, 16/8/4-byte ``vload``/``vstore`` at aligned
indices, ``dp4a``: odd seeds only); helpers
(``@iron.func``, with early returns); and, in a uniform prelude (straight-line code before any branch), shared
arrays with ``barrier()``, group-scope atomics and SIMD ops. Only defined behaviour: integer divisors are made
non-zero, buffer indices are masked into range, atomics whose order matters write per-thread slots (and the
order-independent ones discard their result). Floats that backends may round differently (``/``, math functions,
``fma``, ``**`` -1/0.5) go only to the ``oa`` output, compared with a tolerance, and only from arguments clamped to
[-30, 30] (NaN clamps to a bound).

``Program.features`` names what a comparison must allow for: ``zsign`` (an integer result depends on the sign of a
float zero, which lavapipe does not keep). Where the sign of a zero would change more than a zero's sign (bitcasts,
copysign's second argument, atan2's arguments, pow's base, rsqrt's argument: ``ZERO_SIGN_ARGS``), the generator sends
that zero to +0.0 (or 1.0) instead.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

N_THREADS = 32
GROUP = 16
SIMD = 8
SITES = 24  # store slots per thread in each output buffer
IN_SIZE = 64  # input buffers; indices are masked with IN_SIZE - 1
ATOMIC_SLOTS = 8
PRIVATE = 4  # per-thread slots of ``ap`` (atomics whose returned value is used)

INPUTS = ("xi", "xu", "xf", "xh", "xb")
OUTPUTS = ("oi", "ou", "of", "oh", "ob", "oa")
ATOMICS = ("ai", "au", "ap")
INT_TYPES = ("i32", "u32")
CAST_TYPES = ("bool", "i32", "u32", "f32", "f16", "bf16")
LOAD = {"i32": ["xi"], "u32": ["xu"], "f32": ["xf", "xh", "xb"]}
OUT = {"i32": "oi", "u32": "ou", "f32": "of", "f16": "oh", "bf16": "ob", "bool": "oi"}
CONSTS = {
    "i32": ["1", "2", "3", "7", "31", "32", "(-1)", "(-7)", "(-2147483648)", "2147483647", "65535"],
    "u32": ["1", "2", "3", "8", "31", "255", "65536", "2147483648", "4294967295"],
    "f32": ["1.0", "(-1.0)", "0.5", "2.0", "(-3.25)", "1e30", "(-1e-30)", "65504.0", "1e-40", "3e38", "0.1",
            "float('inf')", "float('-inf')", "float('nan')", "1.5", "(-2.0)", "(-65520.0)", "4096.5", "0.0"],
    "bool": ["True", "False"],
}
APPROX_UNARY = ["exp", "exp2", "log", "log2", "sqrt", "rsqrt", "sin", "cos", "tanh", "erf", "sigmoid", "silu", "gelu"]
APPROX_BINARY = ["atan2", "pow"]
#: the arguments (by position) whose sign of zero changes more than the sign of the result (atan2(+0, -0) = pi but
#: atan2(+0, +0) = 0; rsqrt(-0) = -inf; pow(-0, -1) = -inf): a zero there is sent to +0.0. lavapipe may hand over a
#: zero of the other sign: it folds ``x + 0.0`` to ``x`` even where the zero is only known after its own folding
#: (``cast(u < u, f32) + x``), which no check of the IR can see (docs/backends/vulkan.md; fuzz seed 450045308)
ZERO_SIGN_ARGS = {"atan2": (0, 1), "pow": (0,), "rsqrt": (0,)}


@dataclass
class Program:
    seed: int
    source: str
    generic: bool
    dtype: str  # what T is for a generic kernel ("f32", "f16", "bf16"); "" otherwise
    constexpr: int
    features: set[str] = field(default_factory=set)


@dataclass
class _Expr:
    src: str
    const: bool = False  # made only of literals and constexprs (folded at compile time)


@dataclass
class _Scope:
    vars: dict[str, str]  # name -> type
    mutable: set[str]  # names that may be reassigned here (not loop variables)


class SourceGen:
    """One kernel (or helper) being written: ``lines`` of source, the names in scope and their types."""

    def __init__(self, rng: random.Random, features: set[str], generic: bool, helpers: list[tuple] | None = None,
                 tiles: bool = False):
        self.r = rng
        self.tiles = tiles  # also the tile-level constructs (odd seeds: ``random_source``)
        self.features = features
        self.generic = generic
        self.helpers = helpers or []  # (name, [param types], return type)
        self.scopes = [_Scope({}, set())]
        self.lines: list[str] = []
        self.indent = 1
        self.sites = {name: 0 for name in OUTPUTS + ("ot",)}
        self.counter = 0
        self.budget = 0
        self.loop_depth = 0
        self.static_depth = 0
        self.in_helper = False
        self.atomic_ops = {ty: rng.choice(["add", "max", "min", "and", "or", "xor", "add"]) for ty in INT_TYPES}

    # -- names ------------------------------------------------------------------------------------------------

    def fresh(self, prefix: str = "v") -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def names(self, ty: str, mutable: bool = False) -> list[str]:
        out = []
        for s in self.scopes:
            out += [n for n, t in s.vars.items() if t == ty and (not mutable or n in s.mutable)]
        return out

    def define(self, name: str, ty: str, mutable: bool = True) -> None:
        self.scopes[-1].vars[name] = ty
        if mutable:
            self.scopes[-1].mutable.add(name)

    def emit(self, text: str) -> None:
        self.lines.append("    " * self.indent + text)

    # -- expressions ------------------------------------------------------------------------------------------

    def chance(self, p: float) -> bool:
        return self.r.random() < p

    def index(self) -> str:
        """An in-range index into an input buffer."""
        if self.in_helper or self.chance(0.5):
            return "gid" if not self.in_helper else f"({self.expr('i32', 1).src}) & {IN_SIZE - 1}"
        return f"({self.expr('i32', 1).src}) & {IN_SIZE - 1}"

    def leaf(self, ty: str, allow_const: bool = True) -> _Expr:
        choices = self.names(ty)
        r = self.r.random()
        if allow_const and r < 0.25:
            if ty == "i32" and not self.in_helper and self.chance(0.3):
                return _Expr("C", True)
            return _Expr(self.r.choice(CONSTS[ty]), True)
        if choices and r < 0.65:
            return _Expr(self.r.choice(choices))
        return self.runtime_leaf(ty)

    def runtime_leaf(self, ty: str) -> _Expr:
        if ty == "bool":
            return _Expr(f"({self.leaf('i32', False).src} > {self.r.choice(['0', '3', '(-5)'])})")
        if self.in_helper:
            names = self.names(ty)
            if names:
                return _Expr(self.r.choice(names))
            return _Expr({"i32": "program_id(0)", "u32": "iron.u32(program_id(0))", "f32": "float(program_id(0))"}[ty])
        extra = {"i32": ["si", "gid", "local_id(0)", "group_id(0)", "simd_lane()", "simd_size()", "num_threads(0)"],
                 "u32": ["su"], "f32": ["sf"]}[ty]
        if self.generic and ty == "f32":
            extra.append("xt[gid]")
        if self.chance(0.3):
            return _Expr(self.r.choice(extra))
        return _Expr(f"{self.r.choice(LOAD[ty])}[{self.index()}]")

    def expr(self, ty: str, depth: int, allow_const: bool = False) -> _Expr:
        """An expression of type ``ty`` (i32, u32, f32 or bool); const only where ``allow_const``."""
        if depth <= 0 or self.chance(0.2):
            return self.leaf(ty, allow_const)
        d = depth - 1
        kind = self.r.random()
        if kind < 0.12:
            return self.cast_to(ty, d)
        if kind < 0.17 and self.helpers:
            fitting = [h for h in self.helpers if h[2] == ty]
            if fitting:
                name, params, _ = self.r.choice(fitting)
                return _Expr(f"{name}({', '.join(self.expr(p, d).src for p in params)})")
        if kind < 0.25:
            c = self.expr("bool", d).src
            a, b = self.expr(ty, d, True), self.expr(ty, d, True)
            if a.const and b.const:  # a select of two literals is i32 or f32: give one arm its type
                b = _Expr(f"{ {'bool': 'bool', 'f32': 'float'}.get(ty, 'iron.' + ty)}({b.src})")
            form = f"({a.src} if {c} else {b.src})" if self.chance(0.6) else f"where({c}, {a.src}, {b.src})"
            if ty == "bool":  # a select of two bools is an i32 (tests/fuzz/found/test_bool_select.py)
                form = f"bool({form})"
            return _Expr(form)
        if ty == "bool":
            return self.bool_expr(d)
        if ty == "f32":
            return self.float_expr(d)
        return self.int_expr(ty, d)

    def pair(self, ty: str, d: int) -> tuple[str, str]:
        """Two operands of ``ty``, at most one of them a constant (so the op runs, not folded in Python)."""
        a = self.expr(ty, d, True)
        b = self.expr(ty, d, not a.const)
        if self.chance(0.5):
            a, b = b, a
        return a.src, b.src

    def bool_expr(self, d: int) -> _Expr:
        k = self.r.random()
        if k < 0.4:
            ty = self.r.choice(("i32", "u32", "f32"))
            a, b = self.pair(ty, d)
            op = self.r.choice(["<", "<=", ">", ">=", "==", "!="])
            if self.chance(0.15):
                c = self.expr(ty, d).src
                return _Expr(f"({a} {op} {b} {self.r.choice(['<', '<=', '!='])} {c})")
            return _Expr(f"({a} {op} {b})")
        if k < 0.6:
            a, b = self.expr("bool", d).src, self.expr("bool", d).src
            return _Expr(f"({a} {self.r.choice(['and', 'or'])} {b})")
        if k < 0.7:
            return _Expr(f"(not {self.expr('bool', d).src})")
        if k < 0.8:
            return _Expr(f"{self.r.choice(['isnan', 'isinf'])}({self.expr('f32', d).src})")
        return self.leaf("bool", False)

    def int_expr(self, ty: str, d: int) -> _Expr:
        k = self.r.random()
        if k < 0.45:
            a, b = self.pair(ty, d)
            return _Expr(f"({a} {self.r.choice(['+', '-', '*', '&', '|', '^', '+', '-', '*'])} {b})")
        if k < 0.55:
            a, b = self.expr(ty, d).src, self.expr(ty, d).src
            guard = self.r.choice([f"({b} | 1)", f"({b} if {b} != 0 else 7)", "3", "7"])
            op = self.r.choice(["//", "%"])
            if op == "//" and self.chance(0.2):  # (x % 1 and x % -1 are 0: lavapipe's LLVM then folds 0.0 * x)
                guard = self.r.choice(["1", "(-1)" if ty == "i32" else "2"])
            return _Expr(f"({a} {op} {guard})")
        if k < 0.65:
            a = self.expr(ty, d).src
            count = self.r.choice([self.expr("i32", d).src, f"({self.expr('i32', d).src} & 31)",
                                   str(self.r.randrange(36))])
            return _Expr(f"({a} {self.r.choice(['<<', '>>'])} {count})")
        if k < 0.8:
            a = self.expr(ty, d).src
            fns = ["~", "min", "max", "popcount", "clz", "ctz", "umulhi", "pow2"]
            fns += ["-", "abs"] if ty == "i32" else []
            fn = self.r.choice(fns)
            if fn in ("~", "-"):
                return _Expr(f"({fn}{a})")
            if fn == "abs":
                return _Expr(f"abs({a} >> 1)")  # abs(INT_MIN) is left out
            if fn == "pow2":
                return _Expr(f"({a} ** {self.r.choice(['2', '3'])})")
            if fn in ("min", "max", "umulhi"):
                return _Expr(f"{fn}({a}, {self.expr(ty, d, True).src})")
            return _Expr(f"{fn}({a})")
        if k < 0.85:
            x = self.expr("f32", d).src  # NaN payloads and the sign of zero may differ: sent to 1.0 and +0.0
            return _Expr(f"bitcast(where(isnan({x}) or {x} == 0.0, 1.0, {x}), iron.{ty})")
        if k < 0.88 and ty == "i32" and self.tiles:
            a = self.expr(self.r.choice(INT_TYPES), d).src
            b = self.expr(self.r.choice(INT_TYPES), d).src
            return _Expr(f"dp4a({a}, {b}, {self.expr('i32', d, True).src})")
        return self.leaf(ty, False)

    def float_expr(self, d: int) -> _Expr:
        k = self.r.random()
        if k < 0.45:
            a, b = self.pair("f32", d)
            return _Expr(f"({a} {self.r.choice(['+', '-', '*'])} {b})")
        if k < 0.75:
            a = self.expr("f32", d).src
            fn = self.r.choice(["-", "abs", "floor", "ceil", "rint", "min", "max", "copysign", "pow2", "fabs"])
            if fn == "-":
                return _Expr(f"(-{a})")
            if fn == "pow2":
                return _Expr(f"({a} ** {self.r.choice(['2', '3', '4', '0', '1'])})")
            if fn == "fabs":
                return _Expr(f"math.fabs({a})")
            if fn == "copysign":
                y = self.expr("f32", d).src
                return _Expr(f"copysign({a}, where(isnan({y}) or {y} == 0.0, 1.0, {y}))")
            if fn in ("min", "max"):
                return _Expr(f"{fn}({a}, {self.expr('f32', d, True).src})")
            return _Expr(f"{fn}({a})")
        if k < 0.8:
            u = self.expr("u32", d).src
            return _Expr(f"bitcast(({u} & 0x7F7FFFFF) | 0x00800000, iron.f32)")  # a finite normal float
        return self.leaf("f32", False)

    def cast_to(self, ty: str, d: int) -> _Expr:
        """``ty`` from any of bool/i32/u32/f32/f16/bf16 (an f16/bf16 value is an f32 expression cast or loaded)."""
        src = self.r.choice(CAST_TYPES)
        if src in ("f16", "bf16"):
            inner = self.r.choice([f"iron.{src}({self.expr('f32', d).src})",
                                   f"iron.{src}({self.expr(self.r.choice(['i32', 'u32']), d).src})"])
            if self.generic and self.chance(0.2):
                inner = f"cast({self.expr('f32', d).src}, T)"
        else:
            inner = self.expr(src, d).src
        target = self.r.choice(("f16", "bf16", "f32")) if ty == "f32" else ty
        if target == "bool":
            return _Expr(f"bool({inner})")
        spelled = self.r.choice([f"iron.{target}({inner})", f"cast({inner}, iron.{target})"])
        if target == "i32" and self.chance(0.3):
            spelled = f"int({inner})"
        return _Expr(spelled)

    def approx(self, d: int) -> str:
        """A float that backends may round differently (compared with a tolerance): arguments clamped to [-30, 30]."""
        def arg(fn: str = "", i: int = 0) -> str:
            a = f"min(max({self.expr('f32', d).src}, -30.0), 30.0)"
            return f"where({a} == 0.0, 0.0, {a})" if i in ZERO_SIGN_ARGS.get(fn, ()) else a

        k = self.r.random()
        if k < 0.55:
            fn = self.r.choice(APPROX_UNARY)
            return f"{fn}({arg(fn)})"
        if k < 0.7:
            fn = self.r.choice(APPROX_BINARY)
            return f"{fn}({arg(fn, 0)}, {arg(fn, 1)})"
        if k < 0.8:
            return f"fma({arg()}, {arg()}, {arg()})"
        if k < 0.9:
            return f"({arg()} / ({arg()} + 31.0))"
        return f"(({arg()} + 31.5) ** {self.r.choice(['-1', '0.5', '-0.5'])})"

    # -- statements -------------------------------------------------------------------------------------------

    def store(self, ty: str) -> None:
        buf = OUT[ty]
        site = self.sites[buf] % SITES
        self.sites[buf] += 1
        value = self.expr("f32" if ty in ("f16", "bf16") else ty, 3).src
        self.emit(f"{buf}[gid * {SITES} + {site}] = {value}")

    def store_any(self) -> None:
        k = self.r.random()
        if k < 0.15:
            site = self.sites["oa"] % SITES
            self.sites["oa"] += 1
            self.emit(f"oa[gid * {SITES} + {site}] = {self.approx(2)}")
        elif k < 0.2 and self.generic:
            site = self.sites["ot"] % SITES
            self.sites["ot"] += 1
            self.emit(f"ot[gid * {SITES} + {site}] = {self.expr('f32', 3).src}")
        else:
            self.store(self.r.choice(["i32", "u32", "f32", "f16", "bf16", "bool"]))

    def assign(self) -> None:
        targets = [n for ty in ("i32", "u32", "f32", "bool") for n in self.names(ty, mutable=True)]
        if targets and self.chance(0.5):
            name = self.r.choice(targets)
            ty = next(s.vars[name] for s in reversed(self.scopes) if name in s.vars)
            if ty != "bool" and self.chance(0.4):
                op = self.r.choice(["+=", "-=", "*="] + (["&=", "^=", "|="] if ty != "f32" else []))
                self.emit(f"{name} {op} {self.expr(ty, 3, True).src}")
            else:
                self.emit(f"{name} = {self.expr(ty, 3, True).src}")
            return
        ty = self.r.choice(["i32", "u32", "f32", "bool", "i32", "f32"])
        name = self.fresh()
        value = self.expr(ty, 3).src
        if self.chance(0.2) and ty != "bool":
            self.emit(f"{name}: iron.{ty} = {value}")
        else:
            self.emit(f"{name} = {value}")
        self.define(name, ty)

    def block(self, n: int, loop_var: str | None = None) -> None:
        self.indent += 1
        self.scopes.append(_Scope({loop_var: "i32"} if loop_var else {}, set()))
        start = len(self.lines)
        for _ in range(n):
            self.statement()
        if len(self.lines) == start:
            self.emit("pass")
        self.scopes.pop()
        self.indent -= 1

    def statement(self) -> None:
        self.budget -= 1
        k = self.r.random()
        nested = self.budget > 0 and self.indent < 5
        if k < 0.3:
            self.assign()
        elif k < 0.5 and not self.in_helper:
            self.store_any()
        elif k < 0.62 and nested:
            self.if_statement()
        elif k < 0.72 and nested:
            self.loop()
        elif k < 0.77 and self.loop_depth and not self.static_depth:  # no break/continue in static_range
            self.emit(f"if {self.expr('bool', 2).src}:")
            self.indent += 1
            self.emit(self.r.choice(["break", "continue"]))
            self.indent -= 1
        elif k < 0.81 and not self.in_helper:
            self.emit(f"if {self.expr('bool', 2).src}:")
            self.indent += 1
            self.emit("return")
            self.indent -= 1
        elif k < 0.88 and not self.in_helper:
            self.atomic()
        elif k < 0.92 and self.tiles:
            self.register_array()
        elif k < 0.96 and self.tiles and not self.in_helper:
            self.vector_access()
        else:
            self.assign()

    def register_array(self) -> None:
        """A ``local_array`` of 2 to 8 elements, every element written (static indices, a ``static_range``
        loop, or both), sometimes one more written at a masked run-time index, then read at a static or a masked
        run-time index, or summed over a ``static_range``."""
        ty = self.r.choice(["i32", "u32", "f32", "f32"])
        n = self.r.choice([2, 4, 8])
        arr, name = self.fresh("ra"), self.fresh()
        self.emit(f"{arr} = local_array(iron.{self.r.choice(['f16', 'bf16', 'f32']) if ty == 'f32' else ty}, {n})")
        if self.chance(0.5):
            var = self.fresh("e")
            self.emit(f"for {var} in static_range({n}):")
            self.scopes.append(_Scope({var: "i32"}, set()))
            self.indent += 1
            self.emit(f"{arr}[{var}] = {self.expr(ty, 2).src}")
            self.indent -= 1
            self.scopes.pop()
        else:
            for i in range(n):
                self.emit(f"{arr}[{i}] = {self.expr(ty, 2, True).src}")
        if self.chance(0.4):
            self.emit(f"{arr}[({self.expr('i32', 1).src}) & {n - 1}] = {self.expr(ty, 2).src}")
        k = self.r.random()
        if k < 0.4:
            self.emit(f"{name} = {arr}[{self.r.randrange(n)}]")
        elif k < 0.7:
            self.emit(f"{name} = {arr}[({self.expr('i32', 1).src}) & {n - 1}]")
        else:
            var = self.fresh("e")
            self.emit(f"{name} = {arr}[0]")
            self.emit(f"for {var} in static_range(1, {n}):")
            self.emit(f"    {name} = {name} {self.r.choice(['+', '*', '^' if ty != 'f32' else '-'])} {arr}[{var}]")
        self.define(name, ty, mutable=False)

    def vector_access(self) -> None:
        """``vload`` of a 16-, 8- or 4-byte vector from an input buffer at an aligned masked index, its elements
        used; or ``vstore`` of a register array to an output's aligned store slots (SITES and the slots a thread
        are multiples of 8, so a thread's slots start 16-byte aligned)."""
        if self.chance(0.5):
            buf, ty = self.r.choice([("xf", "f32"), ("xi", "i32"), ("xu", "u32"), ("xh", "f32"), ("xb", "f32")])
            most = 8 if buf in ("xh", "xb") else 4
            n = self.r.choice([m for m in (1, 2, 4, 8) if m <= most])
            vec = self.fresh("vv")
            self.emit(f"{vec} = vload({buf}, (({self.expr('i32', 1).src}) & {IN_SIZE // n - 1}) * {n}, {n})")
            for _ in range(self.r.randint(1, 2)):
                name = self.fresh()
                self.emit(f"{name} = {vec}[{self.r.randrange(n)}]")
                self.define(name, ty, mutable=False)
            return
        ty, buf = self.r.choice([("f32", "of"), ("i32", "oi"), ("u32", "ou"), ("f16", "oh"), ("bf16", "ob")])
        n = self.r.choice([2, 4, 8] if ty in ("f16", "bf16") else [2, 4])
        site = -(-self.sites[buf] // n) * n % SITES
        self.sites[buf] = site + n
        arr = self.fresh("rw")
        self.emit(f"{arr} = local_array(iron.{ty}, {n})")
        for i in range(n):
            self.emit(f"{arr}[{i}] = {self.expr('f32' if ty in ('f16', 'bf16') else ty, 2, True).src}")
        self.emit(f"vstore({buf}, gid * {SITES} + {site}, {arr})")

    def if_statement(self) -> None:
        self.emit(f"if {self.expr('bool', 3).src}:")
        self.block(self.r.randint(1, 3))
        while self.chance(0.3):
            self.emit(f"elif {self.expr('bool', 2).src}:")
            self.block(self.r.randint(1, 2))
        if self.chance(0.5):
            self.emit("else:")
            self.block(self.r.randint(1, 2))

    def loop(self) -> None:
        var = self.fresh("j")
        k = self.r.random()
        if k < 0.4:
            lo = self.r.choice(["0", f"({self.expr('i32', 1).src}) & 3", "(-2)"])
            hi = f"({self.expr('i32', 1).src}) & 7"
            step = self.r.choice(["", "", ", 2", ", 3"])
            if self.chance(0.2):
                lo, hi, step = hi, lo, ", -1"
            self.emit(f"for {var} in range({lo}, {hi}{step}):")
        elif k < 0.7:
            bounds = self.r.choice(["3", "1, 4", "2, 0, -1"] + ([] if self.in_helper else ["C", "0, C + 1, 2"]))
            self.emit(f"for {var} in static_range({bounds}):")
            self.static_depth += 1
            self.loop_depth += 1
            self.block(self.r.randint(1, 3), var)
            self.loop_depth -= 1
            self.static_depth -= 1
            return
        else:
            self.emit(f"{var} = 0")
            self.define(var, "i32", mutable=False)
            self.emit(f"while {var} < (({self.expr('i32', 1).src}) & 7):")
            self.indent += 1
            self.emit(f"{var} += 1")
            self.indent -= 1
            self.loop_depth += 1
            self.block(self.r.randint(1, 3))
            self.loop_depth -= 1
            return
        self.loop_depth += 1
        saved, self.static_depth = self.static_depth, 0
        self.block(self.r.randint(1, 3), var)
        self.static_depth = saved
        self.loop_depth -= 1

    def atomic(self) -> None:
        k = self.r.random()
        if k < 0.5:  # order-independent final values; the returned old value is dropped
            ty = self.r.choice(INT_TYPES)
            fn = self.atomic_ops[ty]  # one op per buffer: mixing ops on a slot would make the result order-dependent
            slot = self.r.choice(["gid % 8", f"({self.expr('i32', 1).src}) & 7", "3"])
            self.emit(f"atomic_{fn}({'ai' if ty == 'i32' else 'au'}, {slot}, {self.expr(ty, 2, True).src})")
            return
        slot = f"gid * {PRIVATE} + {self.r.randrange(PRIVATE)}"  # a thread's own slot: the old value is defined
        name = self.fresh()
        fn = self.r.choice(["add", "max", "min", "and", "or", "xor", "exchange", "cas"])
        args = f"{self.expr('i32', 2, True).src}"
        if fn == "cas":
            args = f"{self.r.choice(['ap[' + slot + ']', self.expr('i32', 1, True).src])}, {args}"
        self.emit(f"{name} = atomic_{fn}(ap, {slot}, {args})")
        self.define(name, "i32", mutable=False)

    # -- the uniform prelude: every thread of the group runs it together ----------------------------------------

    def uniform(self) -> None:
        k = self.r.random()
        if k < 0.3:
            ty = self.r.choice(["i32", "f32", "f16", "u32", "bf16"])
            sh, got = self.fresh("sh"), self.fresh()
            size = self.r.choice(["16", "C * 16", "32"])
            self.emit(f"{sh} = shared(iron.{ty}, {size})")
            self.emit(f"{sh}[local_id(0)] = {self.expr('f32' if ty in ('f16', 'bf16') else ty, 3).src}")
            self.emit("barrier()")
            other = self.r.choice(["15 - local_id(0)", "(local_id(0) + 5) % 16", f"({self.expr('i32', 1).src}) & 15"])
            self.emit(f"{got} = {sh}[{other}]")
            self.define(got, "f32" if ty in ("f16", "bf16") else ty)
        elif k < 0.4:
            sa, got = self.fresh("sa"), self.fresh()
            ty = self.r.choice(INT_TYPES)
            fn = self.r.choice(["add", "max", "min", "xor", "or", "and"])
            self.emit(f"{sa} = shared(iron.{ty}, 16)")
            self.emit(f"{sa}[local_id(0)] = {self.expr(ty, 1).src}")
            self.emit("barrier()")
            self.emit(f"atomic_{fn}({sa}, local_id(0) % 4, {self.expr(ty, 2, True).src})")
            self.emit("barrier()")
            self.emit(f"{got} = {sa}[local_id(0)]")
            self.define(got, ty)
        else:
            self.simd_op()

    def simd_op(self) -> None:
        name = self.fresh("s")
        k = self.r.random()
        ty = self.r.choice(["i32", "u32", "f32"])
        x = self.expr(ty, 3).src
        if k < 0.3:
            fn = self.r.choice(["simd_max", "simd_min"] + (["simd_sum", "simd_prefix_sum",
                                                            "simd_prefix_exclusive_sum"] if ty != "f32" else []))
            value = f"{fn}({x})"
        elif k < 0.7:
            fn = self.r.choice(["simd_shuffle_xor", "simd_shuffle_up", "simd_shuffle_down", "simd_broadcast",
                                "simd_shuffle"])
            lane = str(self.r.randrange(1, 8))
            if fn == "simd_shuffle":
                lane = self.r.choice([lane, f"({self.expr('i32', 1).src}) & 7"])
            value = f"{fn}({x}, {lane})"
        else:
            fn = self.r.choice(["simd_ballot", "simd_any", "simd_all"])
            value = f"{fn}({self.expr('bool', 3).src})"
            ty = "u32" if fn == "simd_ballot" else "bool"
        self.emit(f"{name} = {value}")
        self.define(name, ty, mutable=False)


def _helper(rng: random.Random, name: str, features: set[str], generic: bool,
            tiles: bool) -> tuple[list[str], tuple]:
    """An ``@iron.func`` of two or three typed parameters (the types are fixed at generation: callers pass them),
    with branches and loops that may return early; it ends in a return of its result type."""
    g = SourceGen(rng, features, generic, tiles=tiles)
    g.in_helper = True
    params = [rng.choice(["i32", "u32", "f32", "bool"]) for _ in range(rng.randint(1, 3))]
    ret = rng.choice(["i32", "u32", "f32"])
    for i, ty in enumerate(params):
        g.define(f"p{i}", ty, mutable=False)
    g.budget = rng.randint(2, 6)
    while g.budget > 0:
        k = rng.random()
        if k < 0.3:
            g.emit(f"if {g.expr('bool', 2).src}:")
            g.indent += 1
            g.emit(f"return {g.expr(ret, 2).src}")
            g.indent -= 1
            g.budget -= 1
        elif k < 0.45:
            var = g.fresh("j")
            g.emit(f"for {var} in {rng.choice(['range', 'static_range'])}(3):")
            g.indent += 1
            g.scopes.append(_Scope({var: "i32"}, set()))
            g.emit(f"if {g.expr('bool', 2).src}:")
            g.emit(f"    return {g.expr(ret, 2).src}")
            g.scopes.pop()
            g.indent -= 1
            g.budget -= 1
        else:
            g.statement()
    g.emit(f"return {g.expr(ret, 3).src}")
    lines = ["@iron.func", f"def {name}({', '.join(f'p{i}' for i in range(len(params)))}):", *g.lines, ""]
    return lines, (name, params, ret)


SIGNATURE = ("xi: Tensor[iron.i32], xu: Tensor[iron.u32], xf: Tensor[iron.f32], xh: Tensor[iron.f16], "
             "xb: Tensor[iron.bf16], oi: Tensor[iron.i32], ou: Tensor[iron.u32], of: Tensor[iron.f32], "
             "oh: Tensor[iron.f16], ob: Tensor[iron.bf16], oa: Tensor[iron.f32], ai: Tensor[iron.i32], "
             "au: Tensor[iron.u32], ap: Tensor[iron.i32], si: int, su: iron.u32, sf: float, C: iron.constexpr")


def random_source(seed: int, budget: int = 24) -> Program:
    """The kernel module for ``seed`` (the same text for the same seed and budget). Odd seeds also write the
    tile-level constructs (register arrays, vector accesses, ``dp4a``; since s36); even seeds write the kernels they
    wrote before, so the seeds pinned in tests and notes still name the same kernels."""
    r = random.Random(seed)
    features: set[str] = set()
    generic = r.random() < 0.25
    lines = ["import math", "", "import iron", "from iron import *  # noqa: F403", "",  ""]
    helpers = []
    for i in range(r.choice([0, 1, 1, 2])):
        text, sig = _helper(r, f"helper{i}", features, generic, seed % 2 == 1)
        lines += text + [""]
        helpers.append(sig)
    g = SourceGen(r, features, generic, helpers, tiles=seed % 2 == 1)
    g.emit("gid = program_id(0)")
    g.define("gid", "i32", mutable=False)
    for _ in range(r.randint(0, 4)):
        g.assign() if r.random() < 0.4 else g.uniform()
    g.budget = budget
    while g.budget > 0:
        g.statement()
    params = SIGNATURE + (", xt: Tensor[T], ot: Tensor[T]" if generic else "")
    lines += ["@iron.kernel", f"def k({params}):", *g.lines, ""]
    return Program(seed, "\n".join(lines), generic, r.choice(["f32", "f16", "bf16"]) if generic else "",
                   r.choice([1, 2, 3]), features)
