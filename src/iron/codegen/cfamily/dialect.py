"""What a C-family dialect is: data tables plus a handful of hooks, read by the one printer (``printer.py``).

A dialect says how to *spell* things -- type names, qualifiers, thread indices, math functions, conversions, atomics,
SIMD-group helpers, the barrier, the kernel signature -- never how to walk the IR. CUDA (``cuda.py``) fills every
table; HIP and MSL are meant to be subclasses that override a few tables and hooks:

========================  ==========================================================================================
table / hook              what it holds (CUDA's value as the example)
========================  ==========================================================================================
``types``                 IR scalar type -> C spelling (``f32`` -> ``float``; ``bf16`` -> ``iron_bf16``)
``type_needs``            prelude snippets a type needs (the 16-bit storage structs)
``thread``                thread-index op -> template over ``{axis}`` (``(int)threadIdx.{axis}``)
``math``                  f32 math op -> function (``exp`` -> ``expf``; also ``min``/``max``/``rem``/``abs``/``fma``)
``math_needs``            math op -> prelude snippets its function needs (MSL's ``erf`` helper)
``unsupported_ops``       float math ops the target cannot spell: a located ``CompileError`` naming op and backend
``int_math``              i32/u32 ``min``/``max``/``abs`` -> template
``conversions``           (src, dst) type pair -> template, where a plain C cast is wrong (float -> int saturates)
``atomics``               (opcode, elem type) -> template over ``{ptr}`` and ``{val}``
``simd``                  SIMD op -> helper function; the helper for each value type is the snippet
                          ``"<function>:<type>"``
``snippets``              name -> ``Snippet``: helper code put before the kernel when something uses it, in table order
``unroll_pragma``         put before a ``static_range`` loop that survived unrolling
``float_specials``        how to write inf, -inf and NaN
``barrier``               the group barrier statement
``shared_decl()``         declaration of a group-shared array
``param_decl()``          one kernel parameter (buffers: ``const T* __restrict__ name``)
``signature()``           the kernel's first line; gets the features used (MSL adds ``[[thread_position...]]``
                          parameters only for thread indices the kernel reads)
``half_literal()``        an f16/bf16 constant from its bits
``vector_entry()``        the vectorised entry point of an elementwise kernel (``vectorize.py``), calling the element
                          function (``device_function``, with ``lane_ref_decl()`` parameters); None: no such entry
========================  ==========================================================================================

A dialect that lacks an entry the kernel needs makes the printer raise ``CompileError("unsupported ...")``: new
ops get a shared default in the printer where one exists, else that error, never a silent wrong answer.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import ClassVar

from ...ir import types as t
from .expr import PRIMARY, UNARY, Expr
from .names import CXX_KEYWORDS


@dataclass(frozen=True)
class Template:
    """A ``str.format`` pattern producing an expression of precedence ``prec``; ``needs`` names prelude snippets."""

    text: str
    prec: int = PRIMARY
    needs: tuple[str, ...] = ()

    def __call__(self, *args: Expr | str, **kw: Expr | str) -> Expr:
        text = self.text.format(*(str(a) for a in args), **{k: str(v) for k, v in kw.items()})
        return Expr(text, self.prec)


@dataclass(frozen=True)
class Snippet:
    """Helper code emitted once before the kernel; ``needs`` are snippets that must come before it."""

    text: str
    needs: tuple[str, ...] = ()


@dataclass(frozen=True)
class CParam:
    """One parameter of the emitted kernel, in order.

    ``kind`` is ``"buffer"`` (a pointer to ``ctype`` elements), ``"scalar"`` (passed by value) or ``"grid"`` (the
    exact grid size on ``axis``, an ``int`` appended after the kernel's own parameters). ``source`` is the Iron
    parameter's name (empty for grid sizes).
    """

    name: str
    kind: str
    ctype: str
    dtype: t.ScalarType
    readonly: bool = False
    source: str = ""
    axis: int | None = None


@dataclass(frozen=True)
class LaneBuffer:
    """A buffer the vector entry moves as vectors: held in the register array ``regs`` while the body runs."""

    param: CParam
    regs: str
    preload: bool
    writeback: bool


@dataclass(frozen=True)
class VectorParts:
    """What ``CDialect.vector_entry`` assembles: the entry ``entry`` calls ``element(*args, pid, *lane elements)``
    for ``width`` consecutive elements per thread. ``params`` are the scalar entry's, in order."""

    entry: str
    element: str
    width: int
    params: tuple[CParam, ...]
    args: tuple[str, ...]
    lanes: tuple[LaneBuffer, ...]
    first: str  # name for the thread's first element index
    k: str  # name for the element counter
    prologue: tuple[str, ...] = ()  # statements put first in the entry (emit_source's ``prologue``)


@dataclass
class Features:
    """What the printed kernel uses, collected while printing (the prelude and the signature depend on it)."""

    snippets: set[str] = field(default_factory=set)
    thread_ops: set[str] = field(default_factory=set)
    #: shared arrays passed as kernel parameters (dialects with ``shared_as_params``): (ctype, name, bytes), in order
    shared_params: list[tuple[str, str, int]] = field(default_factory=list)


@dataclass(frozen=True)
class SimdMasks:
    """How a dialect whose SIMD ops take an explicit lane mask spells it (see ``convergence.py``)."""

    #: the declaration of ``iron_live`` at kernel entry, before the exact-grid guard; ``{in_grid}`` is the thread's
    #: "inside the grid" condition
    live: str
    #: snippets the declaration calls
    live_needs: tuple[str, ...]
    #: the mask passed at SIMD ops that are not provably convergent: the lanes active at that moment
    divergent: str


def wrapping_int_helpers(qualifier: str, unsigned: str) -> dict[str, Snippet]:
    """i32 ``abs``, ``/`` and ``%`` with Iron's wrapping semantics, where C leaves INT_MIN undefined (and an x86 host
    running the Metal model traps on INT_MIN / -1): ``qualifier`` prefixes each function (``static inline``)."""
    return {
        "abs_i32": Snippet(f"""\
// |x| with Iron's wrapping semantics: abs(INT_MIN) is INT_MIN (C's abs is undefined there).
{qualifier} int iron_abs(int x) {{
    return x < 0 ? (int)(0u - ({unsigned})x) : x;
}}"""),
        "div_i32": Snippet(f"""\
// a / b truncating, as C, but INT_MIN / -1 wraps to INT_MIN (undefined in C; x86 traps).
{qualifier} int iron_div(int a, int b) {{
    return b == -1 ? (int)(0u - ({unsigned})a) : a / b;
}}"""),
        "rem_i32": Snippet(f"""\
// a % b with the dividend's sign, as C, but INT_MIN % -1 is 0 (undefined in C; x86 traps).
{qualifier} int iron_rem(int a, int b) {{
    return b == -1 ? 0 : a % b;
}}"""),
        "dp4a": Snippet(f"""\
// dp4a(a, b, c): c + the dot product of a's and b's four signed bytes, wrapping (CUDA's __dp4a); each byte
// sign-extended by shifting it to the top of the word and back (no shift of a negative value to the left).
{qualifier} int iron_dp4a(int a, int b, int c) {{
    {unsigned} s = ({unsigned})c;
    for (int k = 0; k < 32; k += 8) {{
        s += ({unsigned})(((int)(({unsigned})a << (24 - k)) >> 24) * ((int)(({unsigned})b << (24 - k)) >> 24));
    }}
    return (int)s;
}}"""),
    }


def activation_helpers(qualifier: str, exp: str, abs_: str, erf: str) -> dict[str, Snippet]:
    """f32 ``sigmoid``, ``silu`` and ``gelu`` (erf form) in the target's spellings of exp, fabs and erf."""
    return {
        "sigmoid": Snippet(f"""\
// 1 / (1 + e^-x) without overflow: e^-|x| is in (0, 1], and e / (1 + e) for negative x.
{qualifier} float iron_sigmoid(float x) {{
    const float e = {exp}(-{abs_}(x));
    const float s = 1.0f / (1.0f + e);
    return x >= 0.0f ? s : e * s;
}}"""),
        "silu": Snippet(f"""\
{qualifier} float iron_silu(float x) {{
    return x * iron_sigmoid(x);
}}""", needs=("sigmoid",)),
        "gelu": Snippet(f"""\
// GELU, erf form, as torch computes it in f32 (1 + erf cancels for x below about -3: see docs/dsl.md).
{qualifier} float iron_gelu(float x) {{
    return 0.5f * x * (1.0f + {erf}(x * 0.70710678118654752f));
}}"""),
    }


#: ``math`` entries and their ``math_needs`` for ``activation_helpers``
ACTIVATION_MATH = {"sigmoid": "iron_sigmoid", "silu": "iron_silu", "gelu": "iron_gelu"}
ACTIVATION_NEEDS = {"sigmoid": ("sigmoid",), "silu": ("silu",), "gelu": ("gelu",)}


#: the ``int_math`` entries that use ``wrapping_int_helpers``
WRAPPING_INT_MATH = {
    "abs:i32": Template("iron_abs({})", needs=("abs_i32",)),
    "div:i32": Template("iron_div({}, {})", needs=("div_i32",)),
    "rem:i32": Template("iron_rem({}, {})", needs=("rem_i32",)),
    "dp4a": Template("iron_dp4a({}, {}, {})", needs=("dp4a",)),
}


class CDialect:
    """The base dialect: plain C spellings shared by the family; subclasses fill in the target's tables."""

    name: ClassVar[str] = "c"
    types: ClassVar[dict[str, str]] = {"bool": "bool", "i32": "int", "u32": "unsigned", "f32": "float",
                                       "i8": "signed char", "u8": "unsigned char", "i64": "long long",
                                       "u64": "unsigned long long", "f64": "double"}
    #: the suffix of a 64-bit integer literal (``LL``; the unsigned one adds ``U``)
    int64_suffix: ClassVar[str] = "LL"
    #: f64 math op -> function (the f64 subset the front-end allows; empty where the target has no double)
    math64: ClassVar[dict[str, str]] = {}
    type_needs: ClassVar[dict[str, tuple[str, ...]]] = {}
    #: identifiers with a meaning in the target besides the keywords (builtin variables, ...)
    builtin_names: ClassVar[frozenset[str]] = frozenset()
    thread: ClassVar[dict[str, Template]] = {}
    #: SIMD-group width the ``thread`` templates and SIMD snippets assume (``simd_size()``); 0 when only known at
    #: run time. Metadata for launchers; the templates spell it themselves.
    simd_width: ClassVar[int] = 32
    math: ClassVar[dict[str, str]] = {}
    #: prelude snippets a math function needs (MSL's ``erf`` is a helper)
    math_needs: ClassVar[dict[str, tuple[str, ...]]] = {}
    #: the op table's float math this dialect declares it cannot spell (tests/backends checks math + this = all)
    unsupported_ops: ClassVar[frozenset[str]] = frozenset()
    int_math: ClassVar[dict[str, Template]] = {}
    conversions: ClassVar[dict[tuple[str, str], Template]] = {}
    atomics: ClassVar[dict[tuple[str, str], Template]] = {}
    simd: ClassVar[dict[str, str]] = {}
    #: None: SIMD helpers take no lane mask (the hardware's active lanes are exact, as on Apple GPUs)
    simd_masks: ClassVar[SimdMasks | None] = None
    snippets: ClassVar[dict[str, Snippet]] = {}
    float_specials: ClassVar[dict[str, str]] = {"inf": "INFINITY", "-inf": "-INFINITY", "nan": "NAN"}
    barrier: ClassVar[str] = "barrier();"
    #: the device-scope memory fence statement (``fence()``)
    fence: ClassVar[str] = "fence();"
    unroll_pragma: ClassVar[str] = "#pragma unroll"
    #: the exact-grid sizes appended to every kernel's parameters
    grid_params: ClassVar[tuple[str, str, str]] = ("iron_n0", "iron_n1", "iron_n2")
    #: bytes of statically declared group-shared memory the target accepts in one kernel
    max_static_shared: ClassVar[int] = 32 * 1024
    axes: ClassVar[tuple[str, str, str]] = ("x", "y", "z")

    # -- hooks ----------------------------------------------------------------------------------------------------

    def param_decl(self, p: CParam, position: int) -> str:
        if p.kind == "buffer":
            return f"{'const ' if p.readonly else ''}{p.ctype}* {p.name}"
        return f"{p.ctype} {p.name}"

    def bounded(self, signature: str, threads: int, groups: int) -> str:
        """``signature`` with the launch bounds of ``@kernel(launch_bounds=...)`` (unchanged where the dialect has
        no spelling for them)."""
        return signature

    def signature(self, entry: str, params: list[CParam], features: Features, prefix: str = "void") -> str:
        """``prefix entry(params)``, on one line when it fits in 120 columns, else one parameter per line."""
        decls = [self.param_decl(p, i) for i, p in enumerate(params)]
        head = f"{prefix} {entry}("
        one_line = head + ", ".join(decls) + ")"
        if len(one_line) <= 120:
            return one_line
        return head + "\n" + ",\n".join("    " + d for d in decls) + ")"

    def shared_decl(self, ctype: str, name: str, size: int) -> str:
        return f"{ctype} {name}[{size}];"

    #: matrix fragments (``frag_a``/``mma``/...): an object spelling them (``cuda_matrix.CudaMatrix``), or None when
    #: the target has no spelling (the printer then refuses the kernel, located)
    matrix: ClassVar[object | None] = None

    #: the type a vector access of that many bytes moves (vcopy)
    vector_types: ClassVar[dict[int, str]] = {16: "uint4", 8: "uint2", 4: "unsigned int", 2: "unsigned short"}

    def async_copy(self, dst: str, src: str, nbytes: int) -> tuple[str, tuple[str, ...]] | None:
        """A statement starting an asynchronous global -> shared copy of ``nbytes`` from ``&src`` to ``&dst``, or
        None: the target copies synchronously (a vcopy), which every async_wait then finds complete."""
        return None

    def async_sync(self, code: str, pending: int | None) -> tuple[str, tuple[str, ...]] | None:
        """The statement of ``async_commit``/``async_wait(pending)``, or None (synchronous copies need neither)."""
        return None

    def local_decl(self, ctype: str, name: str, size: int) -> str:
        """A per-thread array, 16-byte aligned so that vector copies into it need no check."""
        return f"alignas(16) {ctype} {name}[{size}];"

    def vector_pointer(self, vtype: str, space: str, const: bool) -> str:
        """The cast that views an element of a buffer in ``space`` (global, shared, local) as ``vtype``."""
        return f"reinterpret_cast<{'const ' if const else ''}{vtype}*>"

    def attribute_params(self, features: Features) -> list[tuple[str, str, str]]:
        """Parameters after the kernel's own that the hardware fills in (Metal's thread-position attributes):
        (ctype, name, attribute) in order; none in CUDA/HIP, whose thread indices are builtin variables."""
        return []

    #: shared arrays are kernel parameters the host sizes (Metal's ``[[threadgroup(i)]]``) instead of declarations
    shared_as_params: ClassVar[bool] = False

    #: bytes of group-shared memory in one kernel when arrays come from the dynamic buffer (0: no dynamic buffer)
    max_dynamic_shared: ClassVar[int] = 0

    def dynamic_shared_decl(self) -> str:
        """Declaration of the one dynamic shared buffer (named ``iron_dynamic_shared``)."""
        raise NotImplementedError(f"dynamic shared memory on backend {self.name}")

    def dynamic_shared_view(self, ctype: str, name: str, offset: int) -> str:
        """A shared array as a typed pointer into the dynamic buffer at ``offset`` bytes (16-byte aligned)."""
        return f"{ctype}* const {name} = reinterpret_cast<{ctype}*>(iron_dynamic_shared + {offset});"

    #: declaration of a helper function holding the kernel body for one element (the vector entry calls it)
    device_function: ClassVar[str] = "static inline void"

    def lane_ref_decl(self, ctype: str, name: str, readonly: bool) -> str:
        """The element function's parameter for one element of a lane buffer."""
        return f"{'const ' if readonly else ''}{ctype}& {name}"

    def vector_entry(self, parts: VectorParts) -> str | None:
        """The vectorised entry point's source, or None where the dialect has none (see ``vectorize.py``)."""
        return None

    def half_literal(self, type: t.ScalarType, bits: int, value: float) -> Expr:
        raise NotImplementedError(f"{self.name}: no {type} literal")

    def header(self, title: str) -> str:
        return f"// {title}\n"

    # -- derived --------------------------------------------------------------------------------------------------

    def literal_int64(self, value: int, signed: bool) -> Expr:
        """An i64 (``signed``) or u64 literal of ``value``, wrapped to 64 bits."""
        v = value % 2**64
        if not signed:
            return Expr(f"{v}U{self.int64_suffix}")
        v = v - 2**64 if v >= 2**63 else v
        if v == -(2**63):
            return Expr(f"(-9223372036854775807{self.int64_suffix} - 1)")
        return Expr(f"{v}{self.int64_suffix}", UNARY if v < 0 else PRIMARY)

    def literal_float_special(self, value: float) -> Expr:
        if value != value:
            text = self.float_specials["nan"]
        else:
            text = self.float_specials["inf" if value > 0 else "-inf"]
        return Expr(text, UNARY if text.startswith("-") else PRIMARY)

    def prelude(self, needed: Iterable[str]) -> str:
        """The snippets in ``needed`` and everything they need, in the order of the ``snippets`` table."""
        want: set[str] = set()
        stack = list(needed)
        while stack:
            name = stack.pop()
            if name in want:
                continue
            if name not in self.snippets:
                raise KeyError(f"dialect {self.name} has no snippet {name!r}")
            want.add(name)
            stack.extend(self.snippets[name].needs)
        return "".join(s.text.rstrip("\n") + "\n\n" for name, s in self.snippets.items() if name in want and s.text)

    def reserved_names(self) -> frozenset[str]:
        """Identifiers a kernel's values must not take: keywords, builtins, type names, grid sizes, and every
        function or struct the dialect's templates and snippets may declare or call."""
        cached = self.__dict__.get("_reserved")
        if cached is None:
            cached = self.__dict__["_reserved"] = self._collect_reserved()
        return cached

    def _collect_reserved(self) -> frozenset[str]:
        texts = [tpl.text for tpl in self.thread.values()] + [tpl.text for tpl in self.int_math.values()]
        texts += [tpl.text for tpl in self.conversions.values()] + [tpl.text for tpl in self.atomics.values()]
        texts += [s.text for s in self.snippets.values()] + list(self.float_specials.values())
        names = set(CXX_KEYWORDS) | set(self.builtin_names) | set(self.grid_params) | set(self.types.values())
        names |= set(self.math.values()) | set(self.simd.values())
        for text in texts:
            text = re.sub(r'//[^\n]*|"[^"\n]*"', " ", text)  # comments and asm strings declare nothing
            names.update(re.findall(r"\b([A-Za-z_]\w*)\s*\(", text))
            names.update(re.findall(r"\bstruct\s+([A-Za-z_]\w*)", text))
        return frozenset(names)
