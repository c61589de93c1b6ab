"""The op table: every IR opcode, its operand count, whether it is pure, and what it means.

This table is the single list of ops that the verifier, the passes, the interpreter and every emitter walk. A new op
is added here first; a backend that has no lowering for it raises "unsupported op X on backend Y".

Semantics (the interpreter in ``iron.interp`` is the executable definition):

- Integer ``div``/``rem`` truncate toward zero (C), float ``rem`` is C's ``fmod``; ``shr`` is arithmetic on i32,
  logical on u32 (likewise i64/u64); shift counts are taken mod 32 (mod 64 on 64-bit ints); integer overflow wraps
  (``INT_MIN / -1`` gives ``INT_MIN``).
  Integer division by zero is undefined: the interpreter faults, the folder never folds it, and DCE may remove an
  unused one (as C compilers do).
- ``cast`` float -> int truncates toward zero and saturates, NaN -> 0 (PTX ``cvt.rzi.sat``); int -> float and
  float -> narrower float round to nearest even. Float ``min``/``max`` (and ``atomic_max``) return the non-NaN
  operand (C ``fmin``/``fmax``).
- f32 transcendentals are defined as the correctly rounded result (the interpreter computes them in float64 and
  rounds once); GPU backends are within a few ulp of that.
- ``const`` values are finite: the folder leaves NaN/inf-producing ops unfolded; the front-end may still create
  ``inf`` constants from ``math.inf``, which every emitter must spell (e.g. ``INFINITY``).
- Atomics behave as if the active threads ran in launch order (group by group, then linear local id). On GPUs
  each is one indivisible read-modify-write with relaxed memory order: device scope on buffers, group scope on
  shared arrays; they order nothing else (use ``barrier()`` for shared memory, ``fence()`` or a new launch for
  buffers).
- Binary arithmetic ops take two operands of the same type; the front-end inserts ``cast``s.
- ``f16``/``bf16`` are storage types: the front-end computes in f32 unless the kernel asks for native half math.
- Thread-index ops return ``i32``; ``axis`` is 0, 1 or 2.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from . import mathref


@dataclass(frozen=True)
class OpInfo:
    name: str
    category: str
    n_operands: int  # -1: variable
    n_regions: int = 0
    pure: bool = True  # no side effects and no dependence on memory: may be folded, CSE'd, removed when unused
    has_result: bool = True
    doc: str = ""
    #: float math only: the result type ("float": the operands' float type; "bool"), the float64 reference that
    #: defines the op (its exact value, rounded once to the result type: ``mathref``), and whether every backend
    #: must give that value bit for bit (else within the ulp allowances of tests/backends)
    result: str = ""
    ref: Callable | None = None
    exact: bool = False
    #: memory ops: the operand positions of the buffers the op reads and writes
    reads: tuple[int, ...] = ()
    writes: tuple[int, ...] = ()


def _ops(category: str, names: str, n: int, doc: str = "", **kw) -> list[OpInfo]:
    return [OpInfo(name, category, n, doc=doc, **kw) for name in names.split()]


#: float math: name -> (operands, result rule, exact, what it computes); f16/bf16 operands compute in f32
_MATH: dict[str, tuple[int, str, bool, str]] = {
    "exp": (1, "float", False, "e**x."),
    "exp2": (1, "float", False, "2**x."),
    "fast_exp": (1, "float", False, "e**x by the target's fast approximation (CUDA ex2.approx.ftz of x log2 e, "
                 "HIP __expf, Metal fast::exp, Vulkan GLSL Exp), for f16/bf16 results or where speed beats the last "
                 "f32 bits."),
    "fast_exp2": (1, "float", False, "2**x by the target's fast approximation (CUDA ex2.approx.ftz, HIP exp2f, "
                  "Metal fast::exp2, Vulkan GLSL Exp2)."),
    "log": (1, "float", False, "Natural logarithm."),
    "log2": (1, "float", False, "Base-2 logarithm."),
    "sqrt": (1, "float", False, "Square root."),
    "rsqrt": (1, "float", False, "1 / sqrt(x)."),
    "sin": (1, "float", False, "Sine (radians)."),
    "cos": (1, "float", False, "Cosine (radians)."),
    "tanh": (1, "float", False, "Hyperbolic tangent."),
    "erf": (1, "float", False, "Error function."),
    "floor": (1, "float", True, "Round toward -inf."),
    "ceil": (1, "float", True, "Round toward +inf."),
    "rint": (1, "float", True, "Round to the nearest integer, ties to even (C rintf in the default rounding mode)."),
    "sigmoid": (1, "float", False, "1 / (1 + e**-x)."),
    "silu": (1, "float", False, "x * sigmoid(x) (SiLU, swish)."),
    "gelu": (1, "float", False, "x/2 * (1 + erf(x / sqrt(2))): GELU, the erf form (not the tanh approximation)."),
    "atan2": (2, "float", False, "The angle of the point (x, y), in [-pi, pi] (C atan2f)."),
    "pow": (2, "float", False, "x**y for a float exponent (C powf: NaN for negative x and non-integer y)."),
    "copysign": (2, "float", True, "|x| with the sign of y (also of zeros and NaNs)."),
    "isnan": (1, "bool", True, "x is a NaN."),
    "isinf": (1, "bool", True, "x is +inf or -inf."),
}


def _math_rows() -> list[OpInfo]:
    return [OpInfo(name, "math", n, doc=doc, result=result, ref=mathref.REFS[name], exact=exact)
            for name, (n, result, exact, doc) in _MATH.items()]


_TABLE: list[OpInfo] = [
    OpInfo("const", "const", 0, doc="attrs.value: a Python bool/int/float, exactly representable in the type"),
    *_ops("binary", "add sub mul div rem min max", 2, "same-type arithmetic (int div/rem truncate, like C)"),
    *_ops("bitwise", "and or xor shl shr", 2, "ints bitwise; and/or/xor also on bool"),
    *_ops("unary", "neg not", 1, "neg: arithmetic negation; not: bitwise (ints) or logical (bool)"),
    *_ops("compare", "lt le gt ge eq ne", 2, "same-type comparison -> bool"),
    *_math_rows(),
    OpInfo("abs", "math", 1, doc="float or signed int absolute value"),
    OpInfo("fma", "math", 3, doc="a*b+c rounded once (floats)"),
    OpInfo("select", "select", 3, doc="select(cond, a, b): a where cond else b"),
    OpInfo("cast", "cast", 1, doc="convert to the result type (float->int truncates toward zero)"),
    *_ops("thread", "program_id local_id group_id group_size num_groups", 0, "attrs.axis; i32"),
    *_ops("thread", "simd_lane simd_group simd_size", 0, "i32"),
    OpInfo("load", "memory", 2, pure=False, doc="load(buf, index) -> elem; reads memory, so never CSE'd", reads=(0,)),
    OpInfo("store", "memory", 3, pure=False, has_result=False, doc="store(buf, index, value)", writes=(0,)),
    OpInfo("shared", "memory", 0, pure=False, doc="a group-shared array; attrs.elem, attrs.size"),
    OpInfo("local", "memory", 0, pure=False, doc="a per-thread (register) array; attrs.elem, attrs.size"),
    OpInfo("vcopy", "memory", 4, pure=False, has_result=False, reads=(2,), writes=(0,),
           doc="vcopy(dst, dst_index, src, src_index): attrs.n consecutive elements in one access of n * size bytes "
               "(<= 16, a power of two); the global/shared side's index is a multiple of n"),
    OpInfo("async_copy", "memory", 4, pure=False, has_result=False, reads=(2,), writes=(0,),
           doc="async_copy(dst_shared, dst_index, src, src_index): attrs.n elements, landing by a later async_wait"),
    OpInfo("async_commit", "memory", 0, pure=False, has_result=False, doc="close the thread's group of async copies"),
    OpInfo("async_wait", "memory", 0, pure=False, has_result=False,
           doc="wait until at most attrs.pending committed groups of this thread's async copies are in flight"),
    OpInfo("tile_load", "memory", 11, pure=False, has_result=False, reads=(2,), writes=(0,),
           doc="tile_load(dst, j, src, rows, cols, ld, bstride, batch, row, col, stage): a group collective copying "
               "the attrs.rows_box x attrs.cols_box box at (batch, row, col) of src viewed as matrices rows x cols "
               "(leading dimension ld, batch stride bstride; zeros outside) to dst[j + r*attrs.dst_ld + c], landing "
               "by the tile_wait of its stage after tile_commit; attrs.view names the view's host-known values"),
    OpInfo("tile_commit", "memory", 1, pure=False, has_result=False,
           doc="tile_commit(stage): the tile_loads issued to the stage since its last commit form its next phase"),
    OpInfo("tile_wait", "memory", 1, pure=False, has_result=False,
           doc="tile_wait(stage): wait for the stage's oldest committed phase to land (a group collective)"),
    OpInfo("frag_load", "matrix", 3, pure=False, reads=(0,),
           doc="frag_load(buf, index, ld) -> frag a/b (attrs role, trans): element (r, c) from buf[index + r*ld + c] "
               "(trans: buf[index + c*ld + r]); a SIMD-group collective with uniform operands"),
    OpInfo("frag_zero", "matrix", 0, doc="an accumulator fragment of zeros"),
    OpInfo("mma", "matrix", 3, pure=False,
           doc="mma(a, b, acc) -> acc + a @ b, f32 accumulation; a SIMD-group collective"),
    OpInfo("frag_store", "matrix", 6, pure=False, has_result=False, writes=(0,),
           doc="frag_store(buf, index, ld, acc, rows, cols): element (r, c) with r < rows and c < cols to "
               "buf[index + r*ld + c], rounded to buf's dtype"),
    # -- element-wise fragment ops (accumulators and row vectors: f32; layouts are the target's business) --
    OpInfo("frag_unary", "matrix", 1, pure=False,
           doc="frag_unary(x) -> fragment: attrs.fn (a float-math op or neg) of each element of an accumulator or "
               "row fragment"),
    OpInfo("frag_binary", "matrix", 2, pure=False,
           doc="frag_binary(a, b) -> fragment: attrs.fn (add sub mul div min max) element by element; an operand is "
               "an accumulator, a row fragment (broadcast along the columns) or an f32 scalar uniform in the SIMD "
               "group"),
    OpInfo("frag_reduce", "matrix", 1, pure=False,
           doc="frag_reduce(acc) -> row fragment: attrs.fn (max or add) of each row of an accumulator"),
    OpInfo("frag_fill", "matrix", 1, pure=False, doc="frag_fill(value) -> a row or accumulator fragment of value"),
    OpInfo("mma_q4", "matrix", 10, pure=False, reads=(0, 3, 6),
           doc="mma_q4(a, ai, lda, w, wi, ldw, s, si, lds, acc) -> acc + A @ B, A 16x128 at a[ai + r*lda + k], B "
               "128xN the 4-bit codes of w (u32 words, row n at w[wi + n*ldw], code k in bits 4(k%8) of word k/8) "
               "times s[si + n*lds + k / attrs.group], each product rounded to a's dtype; a SIMD-group collective"),
    OpInfo("mv_q4", "matrix", 9, pure=False, reads=(0, 3, 6),
           doc="mv_q4(w, wi, ldw, s, si, lds, x, xi, acc) -> acc + W @ X, W 16mt x 128: row r's code k from w[wi + "
               "r*ldw + k/8] (bits 4(k%8)) times s[si + r*lds + k / attrs.group]; X 128 x 16, every column "
               "x[xi .. xi + 127]; each group's sum scaled once; a SIMD-group collective"),
    OpInfo("frag_to_a", "matrix", 2, pure=False,
           doc="frag_to_a(acc, col0) -> A fragment: columns col0 .. col0 + 15 of a 16-row accumulator as an A "
               "fragment of the result's dtype (rounded); col0 (i32) a constant once static_range is unrolled"),
    OpInfo("frag_mask", "matrix", 5, pure=False,
           doc="frag_mask(acc, row0, col0, cols, fill) -> acc with element (r, c) replaced by fill where col0 + c >= "
               "cols, or (attrs.causal) col0 + c > row0 + r"),
    OpInfo("wg_mma", "matrix", 6, pure=False, reads=(0, 2),
           doc="wg_mma(a, a_index, b, b_index, ldb, acc) -> acc (attrs trans_b; a: a shared array, or each SIMD "
               "group's 16x64 accumulator fragment with a_index 0): the 4 SIMD groups of a warpgroup "
               "start acc += A[16w:16w+16, :] @ B, A 64x64 at a[a_index + 64r + k], B 64xN at b[b_index + ldb*k + n] "
               "(trans_b: b[b_index + 64n + k]); complete by a later wg_wait"),
    OpInfo("wg_wait", "matrix", 0, pure=False, has_result=False,
           doc="wait until at most attrs.pending of this warpgroup's wg_mma calls are in flight"),
    OpInfo("barrier", "sync", 0, pure=False, has_result=False, doc="group barrier + shared-memory fence"),
    OpInfo("fence", "sync", 0, pure=False, has_result=False,
           doc="device-scope memory fence (acquire and release) over buffers: CUDA fence.acq_rel.gpu"),
    *_ops("simd", "simd_sum simd_max simd_min", 1, "reduction over the active lanes of the SIMD group", pure=False),
    *_ops("simd", "simd_shuffle simd_shuffle_xor simd_broadcast", 2, "(value, lane)", pure=False),
    # -- issue 15 points 2 and 5: relative shuffles, votes, scans (SIMD group), the exact grid --
    *_ops("simd", "simd_shuffle_up simd_shuffle_down", 2,
          "(value, delta): x of lane simd_lane() - delta / + delta; a source lane outside the SIMD group (or not in "
          "it: a partial group) gives the caller's own value, as every simd_shuffle does", pure=False),
    OpInfo("simd_ballot", "simd", 1, pure=False,
           doc="(bool) -> u32: bit k set where lane k is active and its cond is true; lanes 0..31 only (wave64)"),
    *_ops("simd", "simd_any simd_all", 1, "(bool) -> bool over the active lanes", pure=False),
    *_ops("simd", "simd_prefix_sum simd_prefix_exclusive_sum", 1,
          "inclusive / exclusive sum over the active lanes of lower index, in lane order; i32/u32 wrap, f32",
          pure=False),
    OpInfo("num_threads", "thread", 0, doc="attrs.axis; i32: the launched (exact) grid size in threads"),
    *_ops("atomic", "atomic_add atomic_max", 3, "(buf, index, value) -> old value", pure=False, reads=(0,),
          writes=(0,)),
    # -- issue 15 point 3: integer bits (i32/u32; the result has the operand's type) --
    OpInfo("umulhi", "bits", 2, doc="the high 32 bits of the 64-bit product (signed for i32, unsigned for u32)"),
    OpInfo("dp4a", "bits", 3, doc="(i32, i32, i32) -> i32: c + the dot product of a's and b's four signed bytes"),
    *_ops("bits", "popcount clz ctz", 1, "set bits / leading zeros / trailing zeros; clz(0) = ctz(0) = 32"),
    OpInfo("bitcast", "bits", 1, doc="the operand's bits as the result type, of the same width (f32/i32/u32)"),
    # -- issue 15 point 4: integer atomics (i32/u32; relaxed, device scope on buffers, group scope on shared) --
    *_ops("atomic", "atomic_min atomic_and atomic_or atomic_xor atomic_exchange", 3,
          "(buf, index, value) -> old value; i32/u32", pure=False, reads=(0,), writes=(0,)),
    OpInfo("atomic_cas", "atomic", 4, pure=False, reads=(0,), writes=(0,),
           doc="(buf, index, expected, new) -> old value; stores new only where old == expected; i32/u32"),
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
#: float math (the ``_MATH`` rows): operands of one float type; the result is that type, or bool for the predicates
FLOAT_MATH = frozenset(_MATH)
MATH_PREDICATES = frozenset(n for n, row in _MATH.items() if row[1] == "bool")
THREAD_AXIS = {"program_id", "local_id", "group_id", "group_size", "num_groups", "num_threads"}
#: element-wise fragment ops (their operands and results are accumulator or row fragments, or f32 scalars)
FRAG_ELEMENTWISE = frozenset({"frag_unary", "frag_binary", "frag_reduce", "frag_fill", "frag_mask"})
#: the fragment ops that depend on the accumulator's lane layout (the scalar fallback where a target has none)
FRAG_LAYOUT = FRAG_ELEMENTWISE | {"frag_to_a"}
#: the fragment ops whose operands a target's matrix units see in its own element order (NVIDIA's mma.sync), the
#: scalar fallback elsewhere
FRAG_PERMUTED = frozenset({"mma_q4", "mv_q4"})
MATRIX = {"frag_load", "frag_zero", "mma", "frag_store", "wg_mma", "wg_wait"} | FRAG_LAYOUT | FRAG_PERMUTED
#: binary functions of frag_binary; unary ones are the one-operand float math ops and neg
FRAG_BINARY_FNS = ("add", "sub", "mul", "div", "min", "max")
#: the warpgroup ops (codegen/warpgroup.py expands them into fragment ops where the target has no wgmma)
WARPGROUP = {"wg_mma", "wg_wait"}
SIMD_REDUCE = {"simd_sum", "simd_max", "simd_min"}
SIMD_EXCHANGE = {"simd_shuffle", "simd_shuffle_xor", "simd_broadcast", "simd_shuffle_up", "simd_shuffle_down"}
#: bool -> mask / bool over the active lanes; the prefix sums over the active lanes of lower index
SIMD_VOTE = {"simd_ballot", "simd_any", "simd_all"}
SIMD_SCAN = {"simd_prefix_sum", "simd_prefix_exclusive_sum"}
#: every SIMD-group op (a collective of the SIMD group's active lanes)
SIMD_OPS = frozenset(SIMD_REDUCE | SIMD_EXCHANGE | SIMD_VOTE | SIMD_SCAN)
ATOMICS = {"atomic_add", "atomic_max", "atomic_min", "atomic_and", "atomic_or", "atomic_xor", "atomic_exchange",
           "atomic_cas"}
#: the integer bit ops on i32/u32 (the result type is the operand's)
INT_BITS = frozenset({"umulhi", "popcount", "clz", "ctz", "dp4a"})
#: the atomics on i32/u32 only (atomic_add and atomic_max also take f32)
INT_ATOMICS = frozenset(ATOMICS - {"atomic_add", "atomic_max"})
JUMPS = {"break", "continue", "return"}
COMMUTATIVE = {"add", "mul", "min", "max", "and", "or", "xor", "eq", "ne"}


def info(opcode: str) -> OpInfo:
    return OPS[opcode]


def buffers_read(op) -> list:
    """The buffer values ``op`` (an ``ir.core.Op``) reads."""
    return [op.operands[k] for k in OPS[op.opcode].reads if hasattr(op.operands[k].type, "space")]  # wg_mma: A may
    # be a fragment


def buffers_written(op) -> list:
    """The buffer values ``op`` writes."""
    return [op.operands[k] for k in OPS[op.opcode].writes]


# -- builtins: what kernel authors call (``iron.exp``, ``iron.where``, ...) ------------------------------------------


@dataclass(frozen=True)
class BuiltinInfo:
    """One builtin: ``iron.lang`` exports it, the front-end checks its arity and lowers it, docs/dsl.md lists it.

    ``op`` is the IR op it lowers to (None for front-end forms: ``where`` -> select, ``static_range``); ``pure``
    calls have no side effects and read no memory, so the front-end may evaluate them speculatively (short-circuit
    operands)."""

    name: str
    signature: str
    doc: str
    arity: tuple[int, int]
    pure: bool
    op: str | None


_MATH_PARAMS = {"atan2": "y, x", "pow": "x, y", "copysign": "x, y"}


def _math_builtins() -> list[BuiltinInfo]:
    out = []
    for name, (n, result, _exact, doc) in _MATH.items():
        params = _MATH_PARAMS.get(name, "x")
        out.append(BuiltinInfo(name, f"{name}({params}) -> {result}", doc, (n, n), True, name))
    return out


def _b(name: str, signature: str, doc: str, arity: tuple[int, int], pure: bool = True, op: str | None = "") \
        -> BuiltinInfo:
    return BuiltinInfo(name, signature, doc, arity, pure, name if op == "" else op)


_BUILTIN_ROWS: list[BuiltinInfo] = [
    _b("program_id", "program_id(axis=0) -> i32", "Global thread index along axis: group_id * group_size + local_id.",
       (0, 1)),
    _b("local_id", "local_id(axis=0) -> i32", "Thread index inside its group along axis.", (0, 1)),
    _b("group_id", "group_id(axis=0) -> i32", "Index of the thread's group along axis.", (0, 1)),
    _b("group_size", "group_size(axis=0) -> i32", "Threads per group along axis.", (0, 1)),
    _b("num_groups", "num_groups(axis=0) -> i32", "Number of groups along axis.", (0, 1)),
    _b("num_threads", "num_threads(axis=0) -> i32",
       "The launched grid size in threads along axis, exactly as given at launch (not rounded up to whole groups).",
       (0, 1)),
    _b("simd_lane", "simd_lane() -> i32", "Lane index inside the SIMD group (warp / wave / subgroup).", (0, 0)),
    _b("simd_group", "simd_group() -> i32", "Index of the SIMD group inside the thread group.", (0, 0)),
    _b("simd_size", "simd_size() -> i32",
       "SIMD width: 32 on NVIDIA/Apple, 64 on AMD CDNA, 8 on lavapipe. Never assume.", (0, 0)),
    _b("load", "load(t, i) -> t.dtype", "Read element i of buffer t (same as `t[i]`).", (2, 2), pure=False),
    _b("store", "store(t, i, v)", "Write v (converted to t's dtype) to element i of t (same as `t[i] = v`).", (3, 3),
       pure=False),
    *_math_builtins(),
    _b("abs", "abs(x)", "Absolute value (float or signed int).", (1, 1)),
    _b("min", "min(a, b, ...)", "Smaller of a and b (promoted); for floats a NaN operand yields the other operand; "
       "of +0.0 and -0.0, either zero (see `max`).", (2, 99)),
    _b("max", "max(a, b, ...)", "Larger of a and b (promoted); for floats a NaN operand yields the other operand. "
       "When the operands are +0.0 and -0.0 (equal), which zero comes back is not specified (as on CUDA, Vulkan "
       "and Metal): the interpreter and lavapipe return the second operand, msl-cpu the first; the value is 0 "
       "either way.", (2, 99)),
    _b("fma", "fma(a, b, c) -> float", "a * b + c with one rounding.", (3, 3)),
    _b("where", "where(c, a, b)", "a where c is true else b; both a and b are evaluated.", (3, 3), op="select"),
    _b("cast", "cast(v, dtype)", "Convert v to dtype (float to int truncates toward zero, saturates, NaN -> 0).",
       (2, 2)),
    _b("shared", "shared(dtype, n) -> shared array",
       "A group-shared array of n elements; its contents start undefined. n is a compile-time size (a literal or "
       "constexpr), or an `int` parameter of the kernel: then the array's length is that parameter's value at each "
       "launch (one compiled kernel serves every length; a length below 1 or past the limit below is a LaunchError "
       "before anything runs). A group's shared arrays "
       "together may use at most: 32 KiB on Metal and msl-cpu, 48 KiB on the interpreter (`IRON_CPU_MAX_SHARED`, in "
       "bytes, changes it), 64 KiB on HIP, 227 KiB on CUDA (sm_90), the device's `maxComputeSharedMemorySize` on "
       "Vulkan (32 KiB on lavapipe); more is a located CompileError (LaunchError on Vulkan) before anything runs or "
       "is allocated. 32 KiB runs everywhere.", (2, 2),
       pure=False),
    _b("local_array", "local_array(dtype, n) -> array",
       "A per-thread array of n (compile-time) elements; kept in registers when every index is a compile-time "
       "constant after unrolling (`static_range`), else in local memory. Contents start undefined.", (2, 2),
       pure=False, op="local"),
    _b("vload", "vload(t, i, n) -> array",
       "Elements t[i] ... t[i+n-1] of a buffer or shared array, in one n * size-byte access (4 x f32, 8 x f16/bf16 "
       "at most), as a new local_array of n. i must be a multiple of n (checked by the interpreter).", (3, 3),
       pure=False, op="vcopy"),
    _b("vstore", "vstore(t, i, a)",
       "Write the whole local_array a to t[i] ... t[i+len(a)-1] in one access; the same size and alignment rules as "
       "vload.", (3, 3), pure=False, op="vcopy"),
    _b("async_copy", "async_copy(dst, j, src, i, n)",
       "Start copying src[i] ... src[i+n-1] (global memory) to dst[j] ... (a shared array) in one n * size-byte "
       "access (4, 8 or 16 bytes; i and j multiples of n): the data lands by the async_wait that covers it. "
       "cp.async on NVIDIA sm_80+; an ordinary copy elsewhere.", (5, 5), pure=False),
    _b("async_commit", "async_commit()",
       "Close this thread's current group of async_copy calls (a pipeline stage).", (0, 0), pure=False),
    _b("async_wait", "async_wait(pending)",
       "Wait until at most `pending` (compile-time) of this thread's committed groups are still in flight; then "
       "barrier() before reading what other threads copied.", (1, 1), pure=False),
    _b("tile_load", "tile_load(dst, j, DST_LD, src, (rows, cols, ld, bstride), (batch, row, col), ROWS, COLS, stage)",
       "Start copying a ROWS x COLS box (compile-time; ROWS a multiple of 8 up to 256, COLS * size a multiple of 16 "
       "bytes up to 256 elements) of src, seen as matrices of rows x cols with leading dimension ld and batch "
       "stride bstride (0: one matrix), to the shared array dst: element (r, c) of the box is "
       "src[batch * bstride + (row + r) * ld + col + c], or 0 where row + r or col + c falls outside the matrix, "
       "and lands at dst[j + r * DST_LD + c] (DST_LD compile-time). Every thread of the group calls it with the "
       "same arguments. The view's four values are kernel parameters or compile-time constants; ld * size and "
       "bstride * size are multiples of 16 bytes, j a multiple of ROWS * DST_LD, 0 <= stage < 8 (checked by the "
       "interpreter, and at launch on CUDA). The bulk tensor copy engine (TMA, one thread issues) on NVIDIA sm_90 "
       "into warpgroup_mma's operand arrays; the group's threads copy it element by element elsewhere.", (9, 9),
       pure=False),
    _b("tile_commit", "tile_commit(stage)",
       "The tile_load calls made to `stage` since its last commit form its next phase (every thread of the group "
       "calls it).", (1, 1), pure=False),
    _b("tile_wait", "tile_wait(stage)",
       "Wait until the oldest committed phase of `stage` has landed: its data is then visible to every thread of "
       "the group (a group collective, like barrier()). Waiting on a stage with no committed phase is an "
       "ExecutionError on the interpreter (a GPU would wait forever).", (1, 1), pure=False),
    _b("mma_shape", "mma_shape(dtype) -> (M, N, K)",
       "The compile-time fragment shape of mma for inputs of dtype: A is M x K, B is K x N, the accumulator M x N "
       "(16, 16, 16 for f16/bf16 on every target today).", (1, 1), op=None),
    _b("frag_a", "frag_a(t, i, ld, trans=False, tiles=1) -> fragment",
       "The (tiles*M) x K A-fragment whose element (r, k) is t[i + r*ld + k] (trans: t[i + k*ld + r]), from a buffer "
       "or shared array; every lane of the SIMD group calls it with the same arguments.", (3, 5), pure=False,
       op="frag_load"),
    _b("frag_b", "frag_b(t, i, ld, trans=False, tiles=1) -> fragment",
       "The K x (tiles*N) B-fragment whose element (k, n) is t[i + k*ld + n] (trans: t[i + n*ld + k], B stored as "
       "B^T).", (3, 5), pure=False, op="frag_load"),
    _b("frag_acc", "frag_acc(mt=1, nt=1) -> fragment",
       "A (mt*M) x (nt*N) f32 accumulator fragment of zeros (mt, nt compile-time).", (0, 2), op="frag_zero"),
    _b("mma", "mma(a, b, acc) -> fragment",
       "acc + a @ b with f32 accumulation (matrix units where the target has them), by the whole SIMD group.", (3, 3),
       pure=False),
    _b("frag_store", "frag_store(t, i, ld, acc, rows=R, cols=C)",
       "Write the R x C accumulator: element (r, n) with r < rows and n < cols (the edge of a matrix) to "
       "t[i + r*ld + n], rounded to t's dtype; the whole SIMD group calls it with the same arguments.", (4, 6),
       pure=False),
    _b("frag_rows", "frag_rows(mt=1, value=0.0) -> row fragment",
       "A (mt*M) x 1 f32 row fragment (a value per row of an accumulator with mt row tiles), every row value "
       "(uniform in the SIMD group). Accumulators and row fragments take +, -, *, /, unary -, min, max (a row "
       "fragment broadcast along the columns, a uniform scalar to every element) and the one-operand float math "
       "builtins (exp2, exp, log, sqrt, ...) element by element, in f32.", (0, 2), op="frag_fill"),
    _b("frag_row_max", "frag_row_max(acc) -> row fragment", "The largest element of each row of accumulator acc.",
       (1, 1), pure=False, op="frag_reduce"),
    _b("frag_row_sum", "frag_row_sum(acc) -> row fragment", "The sum of each row of accumulator acc (in f32).",
       (1, 1), pure=False, op="frag_reduce"),
    _b("frag_mask", "frag_mask(acc, row0, col0, cols, causal, fill) -> fragment",
       "acc with element (r, c) replaced by fill where col0 + c >= cols, or, when causal (compile-time bool), where "
       "col0 + c > row0 + r: the edge and causal masks of attention scores (row0, col0: the tile's origin). "
       "row0, col0, cols and fill uniform in the SIMD group.", (6, 6), pure=False),
    _b("mma_q4", "mma_q4(a, ai, lda, w, wi, ldw, s, si, lds, acc, group) -> fragment",
       "acc + A @ B with a 4-bit quantized B (a GEMV or GEMM on the matrix units): A is 16 x 128, element (r, k) at "
       "a[ai + r*lda + k] (lda 0: every row is the vector at a[ai]); B is 128 x N (N = acc's columns), element (k, n) "
       "= q * s[si + n*lds + k // group] rounded to a's dtype, q = (w[wi + n*ldw + k // 8] >> 4*(k % 8)) & 15 (u32 "
       "words, 8 codes each, MLX's order); a and s f16/bf16 of one dtype, acc a frag_acc(1, nt), group a compile-time "
       "multiple of 32. f32 accumulation; a quantization's bias is the caller's (bias * sum of x over the group). "
       "Alignment rule (NVIDIA's 16-byte loads): ai and lda multiples of 8, wi and ldw of 4; the interpreter "
       "raises ExecutionError otherwise. mma.sync on NVIDIA, the scalar fallback elsewhere.", (11, 11), pure=False),
    _b("mv_q4", "mv_q4(w, wi, ldw, s, si, lds, x, xi, acc, group) -> fragment",
       "acc + W @ x on the matrix units, W 4-bit quantized (a GEMV's inner step, the weight rows as the matrix "
       "units' rows): acc a frag_acc(mt, 1), W is 16*mt x 128, its element (r, k) = q * s[si + r*lds + k // group], "
       "q = (w[wi + r*ldw + k // 8] >> 4*(k % 8)) & 15 (MLX's order), and every column of the result adds "
       "sum_k W[r, k] x[xi + k]. x and s f16/bf16 of one dtype; group a compile-time multiple of 32. Each group's "
       "sum of codes times x is scaled once, in f32 (no rounding of the dequantized weights; a quantization's bias "
       "is the caller's: bias * sum of x over the group). Alignment rule: xi a multiple of 8, wi and ldw of 4; the "
       "interpreter raises ExecutionError otherwise. mma.sync on NVIDIA, the scalar fallback elsewhere.",
       (10, 10), pure=False),
    _b("frag_to_a", "frag_to_a(acc, col0, dtype) -> A fragment",
       "Columns col0 .. col0 + K - 1 of a 16-row accumulator (frag_acc(1, nt)) as an M x K A-fragment of dtype (f16 "
       "or bf16; each element rounded to it): P of attention's P V straight from the registers. col0 a multiple of K "
       "inside the accumulator, known at compile time (a literal, a constexpr or a static_range index).", (3, 3),
       pure=False),
    _b("warpgroup_mma", "warpgroup_mma(a, ai, b, bi, ldb, trans_b, acc) -> fragment",
       "The 4 SIMD groups 4j..4j+3 of a group (a warpgroup) together start acc += A[16w:16w+16, :] @ B in SIMD "
       "group 4j+w: A is 64 x 64 at a[ai + 64*r + k], B is 64 x N (N = acc's columns, up to 256) at "
       "b[bi + ldb*k + n] (trans_b: b[bi + 64*n + k]); a and b are shared arrays of f16/bf16, acc a frag_acc(1, nt); "
       "every argument the same across the warpgroup. Alignment: ai a multiple of 512; trans_b: ldb == 64 and bi a "
       "multiple of 512; else ldb a multiple of 64, bi % 64 == 0, (bi // ldb) % 64 == 0 and bi % ldb + N <= ldb. "
       "The result and the tiles it reads are in use until a warpgroup_wait completes the call. a may instead be "
       "each SIMD group's 16 x 64 accumulator fragment (its rows of A, rounded to b's dtype) with ai 0. wgmma on "
       "NVIDIA sm_90 (Hopper); matrix fragments elsewhere.", (7, 7), pure=False, op="wg_mma"),
    _b("warpgroup_wait", "warpgroup_wait(pending)",
       "Wait until at most `pending` (compile-time) of this warpgroup's warpgroup_mma calls are in flight: only then "
       "may their accumulators be read (frag_store, mma) or the shared memory they read be written.", (1, 1),
       pure=False, op="wg_wait"),
    _b("barrier", "barrier()",
       "Every thread of the group that has not returned waits; shared-memory writes before it are visible after "
       "it. Must be reached by all of them (uniform control flow; threads that returned earlier are not waited "
       "for, as on CUDA sm_70+); the interpreter reports a divergent barrier.", (0, 0),
       pure=False),
    _b("fence", "fence()",
       "A device-scope memory fence over buffers (acquire and release: CUDA's fence.acq_rel.gpu): this thread's "
       "buffer writes before it are visible to any thread, of any group, that observes a buffer write or atomic of "
       "this thread after it; and the fence makes visible to this thread what other threads' fences published "
       "before the writes or atomics it observed. With an atomic counter it lets the last group of a launch to "
       "finish combine the others' results (every thread: writes, fence(), barrier(); one thread: the atomic; "
       "the last group: fence(), then reads). Not a barrier: no thread waits. Metal needs MSL 3.2 for it.", (0, 0),
       pure=False),
    _b("simd_sum", "simd_sum(x)", "Sum of x over the active lanes of the SIMD group, given to every lane.", (1, 1),
       pure=False),
    _b("simd_max", "simd_max(x)", "Maximum of x over the active lanes of the SIMD group.", (1, 1), pure=False),
    _b("simd_min", "simd_min(x)", "Minimum of x over the active lanes of the SIMD group.", (1, 1), pure=False),
    _b("simd_shuffle", "simd_shuffle(x, lane)", "x of lane `lane` of the same SIMD group.", (2, 2), pure=False),
    _b("simd_shuffle_xor", "simd_shuffle_xor(x, mask)", "x of lane (simd_lane() ^ mask).", (2, 2), pure=False),
    _b("simd_broadcast", "simd_broadcast(x, lane)", "x of lane `lane` (uniform) given to every lane.", (2, 2),
       pure=False),
    # -- issue 15 point 2 --
    _b("simd_shuffle_up", "simd_shuffle_up(x, delta)",
       "x of lane simd_lane() - delta; where that lane is outside the SIMD group, the caller's own x.", (2, 2),
       pure=False),
    _b("simd_shuffle_down", "simd_shuffle_down(x, delta)",
       "x of lane simd_lane() + delta; where that lane is outside the SIMD group (past its last lane, also in a "
       "partial group), the caller's own x.", (2, 2), pure=False),
    _b("simd_ballot", "simd_ballot(cond) -> u32",
       "A mask with bit k set where lane k is active and cond is true there. On 64-lane AMD wavefronts only lanes "
       "0..31 appear (use simd_any/simd_all there).", (1, 1), pure=False),
    _b("simd_any", "simd_any(cond) -> bool", "cond is true in some active lane of the SIMD group.", (1, 1),
       pure=False),
    _b("simd_all", "simd_all(cond) -> bool", "cond is true in every active lane of the SIMD group.", (1, 1),
       pure=False),
    _b("simd_prefix_sum", "simd_prefix_sum(x)",
       "Inclusive scan: the sum of x over the active lanes up to and including this one, in lane order; i32/u32 "
       "(wrapping) and f32 (f16/bf16 sum in f32).", (1, 1), pure=False),
    _b("simd_prefix_exclusive_sum", "simd_prefix_exclusive_sum(x)",
       "Exclusive scan: the sum of x over the active lanes before this one (0 in the first active lane).", (1, 1),
       pure=False),
    _b("atomic_add", "atomic_add(t, i, v) -> old",
       "Atomically t[i] += v (i32/u32/f32/i64/u64 buffers or shared arrays; not i64/u64 on Metal); "
       "returns the old value.", (3, 3), pure=False),
    _b("atomic_max", "atomic_max(t, i, v) -> old", "Atomically t[i] = max(t[i], v); returns the old value.", (3, 3),
       pure=False),
    # -- issue 15 point 3: integer bits --
    _b("umulhi", "umulhi(a, b)",
       "The high 32 bits of the 64-bit product a * b (i32: signed, u32: unsigned; the operands' common type).",
       (2, 2)),
    _b("dp4a", "dp4a(a, b, c)",
       "c + the dot product of the four signed bytes packed in a with those in b (byte k: bits 8k..8k+7), in i32 "
       "(wrapping); operands i32 or u32 (their bits), result i32. CUDA's ``__dp4a``; one instruction on NVIDIA.",
       (3, 3)),
    _b("popcount", "popcount(x)", "The number of set bits of x (i32/u32; the result has x's type).", (1, 1)),
    _b("clz", "clz(x)", "The number of leading zero bits of x (i32/u32); clz(0) = 32.", (1, 1)),
    _b("ctz", "ctz(x)", "The number of trailing zero bits of x (i32/u32); ctz(0) = 32.", (1, 1)),
    _b("bitcast", "bitcast(v, dtype)",
       "v's bits reinterpreted as dtype, of the same width: f32, i32 and u32 to each other (no 16-bit integer "
       "types exist for f16/bf16).", (2, 2)),
    # -- issue 15 point 4: integer atomics --
    _b("atomic_min", "atomic_min(t, i, v) -> old", "Atomically t[i] = min(t[i], v) (i32/u32); returns the old value.",
       (3, 3), pure=False),
    _b("atomic_and", "atomic_and(t, i, v) -> old", "Atomically t[i] &= v (i32/u32); returns the old value.", (3, 3),
       pure=False),
    _b("atomic_or", "atomic_or(t, i, v) -> old", "Atomically t[i] |= v (i32/u32); returns the old value.", (3, 3),
       pure=False),
    _b("atomic_xor", "atomic_xor(t, i, v) -> old", "Atomically t[i] ^= v (i32/u32); returns the old value.", (3, 3),
       pure=False),
    _b("atomic_exchange", "atomic_exchange(t, i, v) -> old",
       "Atomically t[i] = v (i32/u32); returns the value it replaced.", (3, 3), pure=False),
    _b("atomic_cas", "atomic_cas(t, i, expected, new) -> old",
       "Atomically: if t[i] == expected, t[i] = new (i32/u32); returns the old value either way (compare it with "
       "expected to know whether the swap happened). Never fails spuriously.", (4, 4), pure=False),
    _b("static_range", "static_range(stop) / static_range(start, stop, step=1)",
       "A range with compile-time bounds whose loop is fully unrolled (only as a `for` iterable).", (1, 3), pure=False,
       op=None),
]

#: every builtin, in documentation order
BUILTINS: dict[str, BuiltinInfo] = {b.name: b for b in _BUILTIN_ROWS}
