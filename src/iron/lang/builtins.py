"""The builtins kernel authors call: thread indices, memory, math, SIMD-group ops, atomics.

Each is a ``Builtin`` object. It does nothing in plain Python (calling one outside a kernel raises); inside an
``@iron.kernel`` the front-end recognises it and lowers the call to IR (``iron.frontend.lower_builtins``). This
table is the one list that the front-end, the docs and ``help()`` read.
"""

from __future__ import annotations


class Builtin:
    """A kernel builtin. ``signature`` and ``doc`` document it; the front-end owns its typing and lowering."""

    def __init__(self, name: str, signature: str, doc: str):
        self.name = name
        self.signature = signature
        self.__doc__ = doc
        self.__name__ = name

    def __repr__(self) -> str:
        return f"<iron builtin {self.name}>"

    def __call__(self, *args, **kwargs):
        raise RuntimeError(f"iron.{self.name}() can only be used inside an @iron.kernel or @iron.func body")


_SPECS: list[tuple[str, str, str]] = [
    ("program_id", "program_id(axis=0) -> i32", "Global thread index along axis: group_id * group_size + local_id."),
    ("local_id", "local_id(axis=0) -> i32", "Thread index inside its group along axis."),
    ("group_id", "group_id(axis=0) -> i32", "Index of the thread's group along axis."),
    ("group_size", "group_size(axis=0) -> i32", "Threads per group along axis."),
    ("num_groups", "num_groups(axis=0) -> i32", "Number of groups along axis."),
    ("simd_lane", "simd_lane() -> i32", "Lane index inside the SIMD group (warp / wave / subgroup)."),
    ("simd_group", "simd_group() -> i32", "Index of the SIMD group inside the thread group."),
    ("simd_size", "simd_size() -> i32", "SIMD width: 32 on NVIDIA/Apple, 64 on AMD CDNA, 8 on lavapipe. Never assume."),
    ("load", "load(t, i) -> t.dtype", "Read element i of buffer t (same as t[i])."),
    ("store", "store(t, i, v)", "Write v (converted to t's dtype) to element i of t (same as t[i] = v)."),
    ("exp", "exp(x) -> float", "e**x."),
    ("exp2", "exp2(x) -> float", "2**x."),
    ("log", "log(x) -> float", "Natural logarithm."),
    ("log2", "log2(x) -> float", "Base-2 logarithm."),
    ("sqrt", "sqrt(x) -> float", "Square root."),
    ("rsqrt", "rsqrt(x) -> float", "1 / sqrt(x)."),
    ("sin", "sin(x) -> float", "Sine (radians)."),
    ("cos", "cos(x) -> float", "Cosine (radians)."),
    ("tanh", "tanh(x) -> float", "Hyperbolic tangent."),
    ("erf", "erf(x) -> float", "Error function."),
    ("abs", "abs(x)", "Absolute value (float or signed int)."),
    ("floor", "floor(x) -> float", "Round toward -inf."),
    ("ceil", "ceil(x) -> float", "Round toward +inf."),
    ("min", "min(a, b)", "Smaller of a and b (promoted); for floats a NaN operand yields the other operand."),
    ("max", "max(a, b)", "Larger of a and b (promoted); for floats a NaN operand yields the other operand."),
    ("fma", "fma(a, b, c) -> float", "a * b + c with one rounding."),
    ("where", "where(c, a, b)", "a where c is true else b; both a and b are evaluated."),
    ("cast", "cast(v, dtype)", "Convert v to dtype (float to int truncates toward zero and saturates)."),
    ("shared", "shared(dtype, n) -> shared array", "A group-shared array of n elements (n compile-time)."),
    ("barrier", "barrier()", "Wait for every thread of the group; makes shared-memory writes visible."),
    ("simd_sum", "simd_sum(x)", "Sum of x over the active lanes of the SIMD group, given to every lane."),
    ("simd_max", "simd_max(x)", "Maximum of x over the active lanes of the SIMD group."),
    ("simd_min", "simd_min(x)", "Minimum of x over the active lanes of the SIMD group."),
    ("simd_shuffle", "simd_shuffle(x, lane)", "x of lane `lane` of the same SIMD group."),
    ("simd_shuffle_xor", "simd_shuffle_xor(x, mask)", "x of lane (simd_lane() ^ mask)."),
    ("simd_broadcast", "simd_broadcast(x, lane)", "x of lane `lane` (uniform) given to every lane."),
    ("atomic_add", "atomic_add(t, i, v) -> old", "Atomically t[i] += v; returns the old value (i32/u32/f32)."),
    ("atomic_max", "atomic_max(t, i, v) -> old", "Atomically t[i] = max(t[i], v); returns the old value."),
    ("static_range", "static_range(stop) / static_range(start, stop, step=1)",
     "A range with compile-time bounds whose loop is fully unrolled."),
]

BUILTINS: dict[str, Builtin] = {name: Builtin(name, sig, doc) for name, sig, doc in _SPECS}
globals().update(BUILTINS)

__all__ = ["BUILTINS", "Builtin", *BUILTINS]
