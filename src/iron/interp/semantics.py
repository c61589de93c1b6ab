"""The executable definition of Iron's pure value ops on NumPy arrays.

The interpreter and the constant folder both call this module, so a folded constant and an interpreted value agree bit
for bit. Arrays are 0-d (uniform values, constants) or 1-d (one element per thread) and broadcast against each other.

Choices where C leaves behaviour undefined or a GPU differs (each backend's emitter must match these):

- Integer ``div``/``rem`` truncate toward zero and ``rem`` takes the dividend's sign (C). Division by zero gives 0 here;
  the executor raises for an active thread before it gets that far. ``INT_MIN / -1`` wraps to ``INT_MIN``.
- Integer overflow wraps (two's complement). ``shl``/``shr`` mask the shift amount to 0..31 (what x86, SPIR-V drivers
  and ``shf`` in practice do; C calls larger amounts undefined), 0..63 on i64/u64. ``shr`` is arithmetic on signed
  ints, logical on unsigned ones. i64/u64 arithmetic is done in their own NumPy dtypes (which wrap).
- Float ``min``/``max`` return the other operand when one is NaN, a signalling one too (CUDA ``fminf``, IEEE
  754-2019 minimumNumber; glibc's ``fminf`` returns NaN for a signalling NaN).
- Float ``rem`` is C ``fmodf``. Transcendental math (exp exp2 log log2 sin cos tanh erf rsqrt) and ``fma`` are
  computed in float64 and rounded once to the result type, so results are within half an ulp plus a hair and do not
  depend on the host CPU; GPU math libraries are allowed 1-4 ulp, so tests compare with a tolerance.
- f16/bf16 arithmetic (only when a kernel asks for native half math) is computed in float32 and rounded to the type;
  for + - * / and sqrt that double rounding is exact, as float32 has at least 2p+2 bits.
- ``cast`` float->int truncates toward zero, maps NaN to 0 and saturates out-of-range values to the integer range
  (PTX ``cvt.rzi.sat``; C leaves it undefined). Int->int casts wrap. Casts to bool test ``!= 0`` (NaN is true).
  Every rounding to a float type is round-to-nearest-even, done once (no double rounding through f32 for bf16),
  except these two (tracker issue 15), defined through f32 so every backend can give them with plain conversions:
  i64/u64 -> f16/bf16 round to f32 first (i64/u64 -> f32 and -> f64 round once), and f64 -> f16/bf16 likewise.
- f64 math is IEEE double; ``fma`` on f64 rounds once (exact rationals here).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..ir import ops as O
from ..ir import types as t

PureFn = Callable[..., np.ndarray]

_F32 = np.dtype(np.float32)
_F64 = np.dtype(np.float64)
_INT_RANGE = t.INT_RANGE


def scalar_type_of_dtype(dtype: np.dtype) -> t.ScalarType:
    """The IR scalar type of a NumPy dtype (bool included)."""
    dtype = np.dtype(dtype)
    for st in t.SCALAR_TYPES.values():
        if st.np_dtype == dtype:
            return st
    raise TypeError(f"no Iron scalar type for NumPy dtype {dtype}")


# -- rounding helpers ---------------------------------------------------------------------------------------------


def _round_to_odd_f32(x: np.ndarray) -> np.ndarray:
    """float64 -> float32 rounding to odd: a later round-to-nearest to <= 22 bits is then correctly rounded.

    ml_dtypes converts float64 to bfloat16 through float32 with two round-to-nearest steps, which can land on the
    wrong neighbour when the first step produces an exact tie; rounding to odd keeps the sticky information.
    """
    f = x.astype(np.float32)
    back = f.astype(np.float64)
    fix = (back != x) & ~np.isnan(x) & ((f.view(np.uint32) & 1) == 0)
    if fix.any():
        toward = np.where(back < x, np.float32(np.inf), np.float32(-np.inf))
        f = np.where(fix, np.nextafter(f, toward), f)
    return f


def from_f64(x: np.ndarray, dst: t.ScalarType) -> np.ndarray:
    """Round float64 values once, to nearest even, to the float type ``dst``."""
    x = np.asarray(x, dtype=np.float64)
    if dst == t.f64:
        return x
    if dst == t.f32:
        return x.astype(np.float32)
    if dst == t.f16:
        return x.astype(np.float16)  # NumPy rounds double -> half directly
    return _round_to_odd_f32(x).astype(dst.np_dtype)


def _to_f32(a: np.ndarray) -> np.ndarray:
    return a if a.dtype == _F32 else a.astype(np.float32)


def _to_f64(a: np.ndarray) -> np.ndarray:
    if a.dtype == _F64:
        return a
    return a.astype(np.float32).astype(np.float64) if a.dtype != _F32 else a.astype(np.float64)


# -- constants ----------------------------------------------------------------------------------------------------


def const_array(value: bool | int | float, type: t.ScalarType) -> np.ndarray:
    """The 0-d array holding a ``const`` op's value. Ints wrap to their width; floats round once to nearest even."""
    if type.is_bool:
        return np.array(bool(value))
    if type.is_int:
        lo, hi = _INT_RANGE[type.name]
        return np.array((int(value) - lo) % (hi - lo + 1) + lo, dtype=type.np_dtype)
    return np.asarray(from_f64(np.array(float(value)), type))


# -- integer arithmetic -------------------------------------------------------------------------------------------


def _int_divmod(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """C quotient and remainder in int64 (exact for 32-bit operands); a zero divisor gives 0 and 0."""
    if a.dtype.itemsize == 8:
        return _int_divmod64(a, b)
    a64, b64 = a.astype(np.int64), b.astype(np.int64)
    zero = b64 == 0
    safe = np.where(zero, 1, b64)
    r = np.fmod(a64, safe)  # integer fmod is C's %, sign of the dividend
    q = (a64 - r) // safe  # exact division, so floor == trunc
    return np.where(zero, 0, q), np.where(zero, 0, r)


def _int_divmod64(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The same for i64/u64, in their own dtype: INT64_MIN / -1 wraps (negation) and INT64_MIN % -1 is 0."""
    zero = b == 0
    minus_one = (b == -1) if a.dtype.kind == "i" else np.zeros_like(zero)
    safe = np.where(zero | minus_one, np.ones_like(b), b)
    r = np.fmod(a, safe)  # sign of the dividend, as C
    q = (a - r) // safe  # exact division, so floor == trunc; |r| < |b| so a - r does not overflow
    q = np.where(minus_one, np.negative(a), q)
    r = np.where(minus_one | zero, np.zeros_like(r), r)
    return np.where(zero, np.zeros_like(q), q), r


def _int_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return _int_divmod(a, b)[0].astype(a.dtype)


def _int_rem(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return _int_divmod(a, b)[1].astype(a.dtype)


def _shl(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    # shift the unsigned bit pattern: left-shifting a negative signed value is undefined in C and NumPy
    unsigned = np.dtype(f"u{a.dtype.itemsize}")
    amount = (b & (8 * a.dtype.itemsize - 1)).astype(unsigned)
    return np.left_shift(a.astype(unsigned), amount).astype(a.dtype)


def _shr(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.right_shift(a, (b & (8 * a.dtype.itemsize - 1)).astype(a.dtype))


# -- float helpers ------------------------------------------------------------------------------------------------


def _fma_f64(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """a*b+c rounded to odd in float64, so that the final rounding to a <= f32 type happens once.

    The product of two f32 (or half) values is exact in float64; the sum's rounding error comes from TwoSum.
    """
    p = a * b
    s = p + c
    bb = s - p
    err = (p - (s - bb)) + (c - bb)
    fix = (err != 0) & np.isfinite(s) & ((s.view(np.uint64) & 1) == 0)
    if fix.any():
        s = np.where(fix, np.nextafter(s, np.where(err > 0, np.inf, -np.inf)), s)
    return s


def _nan_loses(ufunc: np.ufunc) -> PureFn:
    """``np.fmin``/``np.fmax`` that return the other operand for a *signalling* NaN too (IEEE 754-2019's
    minimumNumber, as PTX ``min``, SPIR-V ``NMin`` on lavapipe and Metal's ``fmin`` do): NumPy's SIMD loops do, but
    its scalar and strided loops (0-d or short operands) call glibc's ``fminf``, which returns NaN for one (754-2008's
    minNum). A signalling NaN reaches here from ``bitcast`` or a load (fuzz seed 706003266)."""

    def nan_loses(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        r = ufunc(a, b)
        nan = np.isnan(r)
        if not nan.any():
            return r
        return np.where(nan & ~np.isnan(a), a, np.where(nan & ~np.isnan(b), b, r))

    return nan_loses


# -- the op table -------------------------------------------------------------------------------------------------

_FLOAT_BINARY = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "div": np.divide,
    "rem": np.fmod,
    "min": _nan_loses(np.fmin),
    "max": _nan_loses(np.fmax),
}
_INT_BINARY = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "div": _int_div,
    "rem": _int_rem,
    "min": np.minimum,
    "max": np.maximum,
    "and": np.bitwise_and,
    "or": np.bitwise_or,
    "xor": np.bitwise_xor,
    "shl": _shl,
    "shr": _shr,
}
_COMPARE = {
    "lt": np.less,
    "le": np.less_equal,
    "gt": np.greater,
    "ge": np.greater_equal,
    "eq": np.equal,
    "ne": np.not_equal,
}
# exact or correctly rounded in float32 already
_F32_MATH = {"sqrt": np.sqrt, "floor": np.floor, "ceil": np.ceil, "abs": np.abs, "neg": np.negative}
# The rest of the float math (exp, log, sin, erf, sigmoid, atan2, pow, ...) is defined by the op table's float64
# references (``iron.ir.mathref``), rounded once: NumPy's float32 kernels are off by up to 3 ulp and differ between
# CPUs (AVX2 vs AVX-512 paths); float64 rounded once is (all but) correctly rounded and the same everywhere, so
# folding is reproducible.


def _wrap(fn: PureFn) -> PureFn:
    # NumPy ufuncs turn 0-d inputs into NumPy scalars; the interpreter keeps everything as ndarrays
    return lambda *args: np.asarray(fn(*args))


def _float_fn(opcode: str, rt: t.ScalarType) -> PureFn | None:
    if opcode in _FLOAT_BINARY or opcode in _F32_MATH:
        fn = _FLOAT_BINARY.get(opcode) or _F32_MATH[opcode]
        if rt in (t.f32, t.f64):
            return fn
        dt = rt.np_dtype
        return lambda *a: fn(*[_to_f32(x) for x in a]).astype(dt)
    if opcode in O.FLOAT_MATH:
        ref = O.OPS[opcode].ref
        return lambda *a: from_f64(ref(*(_to_f64(x) for x in a)), rt)
    if opcode == "fma" and rt == t.f64:
        return _fma_exact
    if opcode == "fma":
        return lambda a, b, c: from_f64(_fma_f64(_to_f64(a), _to_f64(b), _to_f64(c)), rt)
    return None


def _cast_fn(src: t.ScalarType, dst: t.ScalarType) -> PureFn:
    dt = dst.np_dtype
    if src == dst:
        return lambda a: a
    if dst.is_bool:
        return (lambda a: _to_f32(a) != 0) if src.is_float else (lambda a: a != 0)
    if src.is_bool or src.is_int:
        if dst.is_int or src.is_bool and dst.is_float and not dst.is_half or dst == t.f64:
            return lambda a: a.astype(dt)  # int -> int wraps; bool -> 0/1 is exact; -> f64 rounds once
        if src.is_wide:  # i64/u64 -> f32 rounds once (C's conversion); -> f16/bf16 through that f32
            return lambda a: from_f64(a.astype(np.float32).astype(np.float64), dst)
        return lambda a: from_f64(a.astype(np.float64), dst)  # i32/u32 are exact in float64: one rounding
    if dst.is_float:
        return lambda a: _to_f32(a).astype(dt)  # halves are exact in f32, so this rounds once
    lo, hi = _INT_RANGE[dst.name]

    def float_to_int(a: np.ndarray) -> np.ndarray:
        x = np.trunc(_to_f64(a))
        over = x >= float(hi) + 1.0  # exact: 2^31, 2^32, 2^63, 2^64 are doubles (the 64-bit maxima are not)
        x = np.maximum(np.where(np.isnan(x) | over, 0.0, x), float(lo))
        return np.where(over, np.array(hi, dtype=dt), np.minimum(x, float(hi)).astype(dt))

    return float_to_int


def _fma_exact(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """f64 a*b+c rounded once, through exact rationals (slow, but f64 fma is rare in kernels)."""
    from fractions import Fraction

    def one(x: float, y: float, z: float) -> float:
        if not all(map(np.isfinite, (x, y, z))):
            return x * y + z
        return float(Fraction(x) * Fraction(y) + Fraction(z))

    a, b, c = np.broadcast_arrays(a, b, c)
    return np.array([one(*v) for v in zip(a.ravel().tolist(), b.ravel().tolist(), c.ravel().tolist())],
                    dtype=np.float64).reshape(a.shape)


# -- integer bits (issue 15 point 3): clz(0) = ctz(0) = 32 ---------------------------------------------------------


def _bit_length(x: np.ndarray) -> np.ndarray:
    """Bits needed for each u32 (0 for 0): frexp's exponent, exact as float64 holds every u32."""
    return np.frexp(np.asarray(x).astype(np.uint32).astype(np.float64))[1]


def _clz(x: np.ndarray) -> np.ndarray:
    return (32 - _bit_length(x)).astype(np.asarray(x).dtype)


def _ctz(x: np.ndarray) -> np.ndarray:
    u = np.asarray(x).astype(np.uint32)
    low = _bit_length(u & (~u + np.uint32(1)))  # the lowest set bit alone
    return np.where(u == 0, 32, low - 1).astype(np.asarray(x).dtype)


def _popcount(x: np.ndarray) -> np.ndarray:
    return np.bitwise_count(np.asarray(x).astype(np.uint32)).astype(np.asarray(x).dtype)


def _mulhi_s(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return ((np.asarray(a).astype(np.int64) * np.asarray(b).astype(np.int64)) >> 32).astype(np.int32)


def _mulhi_u(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return ((np.asarray(a).astype(np.uint64) * np.asarray(b).astype(np.uint64)) >> np.uint64(32)).astype(np.uint32)


def _dp4a(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """c + the dot product of a's and b's four signed bytes (byte k: bits 8k..8k+7), wrapping in i32."""
    a, b = (np.asarray(v).astype(np.int32).astype(np.int64) for v in (a, b))
    total = np.asarray(c).astype(np.int64)
    for k in range(4):
        total = total + ((a << (24 - 8 * k)) << 32 >> 56) * ((b << (24 - 8 * k)) << 32 >> 56)
    return (total & 0xFFFFFFFF).astype(np.uint32).astype(np.int32)


_BITS = {"popcount": _popcount, "clz": _clz, "ctz": _ctz, "dp4a": _dp4a}


def pure_fn(
    opcode: str, operand_types: list[t.ScalarType], result_type: t.ScalarType, attrs: dict | None = None
) -> PureFn:
    """Resolve a pure op once into a function of its operand arrays (the executor calls it per launch).

    The returned function may emit NumPy floating-point warnings: callers run it under ``np.errstate(all='ignore')``.
    """
    rt = result_type
    fn: PureFn | None = None
    if opcode == "const":
        value = const_array((attrs or {})["value"], rt)
        return lambda: value
    if opcode == "cast":
        return _wrap(_cast_fn(operand_types[0], rt))
    if opcode == "select":
        return _wrap(np.where)
    if opcode == "bitcast":
        return _wrap(lambda a: np.array(a, copy=True).view(rt.np_dtype))
    if opcode in O.INT_BITS:
        return _wrap(_BITS[opcode] if opcode != "umulhi" else (_mulhi_s if rt.is_signed else _mulhi_u))
    if opcode in _COMPARE:
        cmp = _COMPARE[opcode]
        fn = (lambda a, b: cmp(_to_f32(a), _to_f32(b))) if operand_types[0].is_half else cmp
    elif opcode == "not":
        fn = np.logical_not if rt.is_bool else np.invert
    elif opcode in O.MATH_PREDICATES:
        ref = O.OPS[opcode].ref
        fn = lambda a: ref(_to_f64(a))  # noqa: E731 - exact for every float type
    elif rt.is_float:
        fn = _float_fn(opcode, rt)
    elif rt.is_bool and opcode in ("and", "or", "xor"):
        fn = _INT_BINARY[opcode]
    elif rt.is_int:
        fn = _INT_BINARY.get(opcode) or {"neg": np.negative, "abs": np.abs}.get(opcode)
    if fn is None:
        raise NotImplementedError(f"no pure semantics for op {opcode!r} with result type {rt}")
    return _wrap(fn)


def eval_pure(opcode: str, args: list[np.ndarray], result_type: t.ScalarType, attrs: dict) -> np.ndarray:
    """Evaluate one pure op on 0-d or 1-d arrays (broadcasting); the result has ``result_type.np_dtype``."""
    arrays = [np.asarray(a) for a in args]
    fn = pure_fn(opcode, [scalar_type_of_dtype(a.dtype) for a in arrays], result_type, attrs)
    with np.errstate(all="ignore"):
        out = fn(*arrays)
    if out.dtype != result_type.np_dtype:  # only when the caller's result_type disagrees with the operands
        out = out.astype(result_type.np_dtype)
    return out
