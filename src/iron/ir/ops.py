"""The op table: every IR opcode, its operand count, whether it is pure, and what it means.

This table is the single list of ops that the verifier, the passes, the interpreter and every emitter walk. A new op
is added here first; a backend that has no lowering for it raises "unsupported op X on backend Y".

Semantics (the interpreter in ``iron.interp`` is the executable definition):

- Integer ``div``/``rem`` truncate toward zero (C), float ``rem`` is C's ``fmod``; ``shr`` is arithmetic on i32,
  logical on u32; shift counts are taken mod 32; integer overflow wraps (``INT_MIN / -1`` gives ``INT_MIN``).
  Integer division by zero is undefined: the interpreter faults, the folder never folds it, and DCE may remove an
  unused one (as C compilers do).
- ``cast`` float -> int truncates toward zero and saturates, NaN -> 0 (PTX ``cvt.rzi.sat``); int -> float and
  float -> narrower float round to nearest even. Float ``min``/``max`` (and ``atomic_max``) return the non-NaN
  operand (C ``fmin``/``fmax``).
- f32 transcendentals are defined as the correctly rounded result (the interpreter computes them in float64 and
  rounds once); GPU backends are within a few ulp of that.
- ``const`` values are finite: the folder leaves NaN/inf-producing ops unfolded; the front-end may still create
  ``inf`` constants from ``math.inf``, which every emitter must spell (e.g. ``INFINITY``).
- Atomics behave as if the active threads ran in launch order (group by group, then linear local id).
- Binary arithmetic ops take two operands of the same type; the front-end inserts ``cast``s.
- ``f16``/``bf16`` are storage types: the front-end computes in f32 unless the kernel asks for native half math.
- Thread-index ops return ``i32``; ``axis`` is 0, 1 or 2.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class OpInfo:
    name: str
    category: str
    n_operands: int  # -1: variable
    n_regions: int = 0
    pure: bool = True  # no side effects and no dependence on memory: may be folded, CSE'd, removed when unused
    has_result: bool = True
    doc: str = ""


def _ops(category: str, names: str, n: int, doc: str = "", **kw) -> list[OpInfo]:
    return [OpInfo(name, category, n, doc=doc, **kw) for name in names.split()]


_TABLE: list[OpInfo] = [
    OpInfo("const", "const", 0, doc="attrs.value: a Python bool/int/float, exactly representable in the type"),
    *_ops("binary", "add sub mul div rem min max", 2, "same-type arithmetic (int div/rem truncate, like C)"),
    *_ops("bitwise", "and or xor shl shr", 2, "ints bitwise; and/or/xor also on bool"),
    *_ops("unary", "neg not", 1, "neg: arithmetic negation; not: bitwise (ints) or logical (bool)"),
    *_ops("compare", "lt le gt ge eq ne", 2, "same-type comparison -> bool"),
    *_ops("math", "exp exp2 log log2 sqrt rsqrt sin cos tanh erf floor ceil", 1, "float math"),
    OpInfo("abs", "math", 1, doc="float or signed int absolute value"),
    OpInfo("fma", "math", 3, doc="a*b+c rounded once (floats)"),
    OpInfo("select", "select", 3, doc="select(cond, a, b): a where cond else b"),
    OpInfo("cast", "cast", 1, doc="convert to the result type (float->int truncates toward zero)"),
    *_ops("thread", "program_id local_id group_id group_size num_groups", 0, "attrs.axis; i32"),
    *_ops("thread", "simd_lane simd_group simd_size", 0, "i32"),
    OpInfo("load", "memory", 2, pure=False, doc="load(buf, index) -> elem; reads memory, so never CSE'd"),
    OpInfo("store", "memory", 3, pure=False, has_result=False, doc="store(buf, index, value)"),
    OpInfo("shared", "memory", 0, pure=False, doc="a group-shared array; attrs.elem, attrs.size"),
    OpInfo("barrier", "sync", 0, pure=False, has_result=False, doc="group barrier + shared-memory fence"),
    *_ops("simd", "simd_sum simd_max simd_min", 1, "reduction over the active lanes of the SIMD group", pure=False),
    *_ops("simd", "simd_shuffle simd_shuffle_xor simd_broadcast", 2, "(value, lane)", pure=False),
    *_ops("atomic", "atomic_add atomic_max", 3, "(buf, index, value) -> old value", pure=False),
    OpInfo("var", "var", 0, pure=False, doc="a per-thread local variable slot, uninitialised"),
    OpInfo("get", "var", 1, pure=False, doc="read a var slot"),
    OpInfo("set", "var", 2, pure=False, has_result=False, doc="write a var slot"),
    OpInfo("if", "control", 1, n_regions=2, pure=False, has_result=False, doc="if cond then regions[0] else [1]"),
    OpInfo(
        "for",
        "control",
        3,
        n_regions=1,
        pure=False,
        has_result=False,
        doc="for iv in range(lo, hi, step): body (block arg 0 = iv); attrs.unroll marks static_range",
    ),
    OpInfo(
        "while",
        "control",
        0,
        n_regions=2,
        pure=False,
        has_result=False,
        doc="regions[0] computes the condition (ends with `condition`); regions[1] is the body",
    ),
    OpInfo("condition", "terminator", 1, pure=False, has_result=False, doc="ends a while's condition region"),
    *_ops("jump", "break continue return", 0, "leave the innermost loop / iteration / kernel", pure=False,
          has_result=False),
]

OPS: dict[str, OpInfo] = {info.name: info for info in _TABLE}

BINARY_ARITH = {"add", "sub", "mul", "div", "rem", "min", "max"}
BITWISE = {"and", "or", "xor", "shl", "shr"}
COMPARE = {"lt", "le", "gt", "ge", "eq", "ne"}
FLOAT_MATH = {"exp", "exp2", "log", "log2", "sqrt", "rsqrt", "sin", "cos", "tanh", "erf", "floor", "ceil"}
THREAD_AXIS = {"program_id", "local_id", "group_id", "group_size", "num_groups"}
SIMD_REDUCE = {"simd_sum", "simd_max", "simd_min"}
SIMD_EXCHANGE = {"simd_shuffle", "simd_shuffle_xor", "simd_broadcast"}
ATOMICS = {"atomic_add", "atomic_max"}
JUMPS = {"break", "continue", "return"}
COMMUTATIVE = {"add", "mul", "min", "max", "and", "or", "xor", "eq", "ne"}


def info(opcode: str) -> OpInfo:
    return OPS[opcode]
