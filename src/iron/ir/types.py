"""IR types: scalar dtypes, buffers (global or shared memory) and local variable slots.

Types are immutable and interned by value, so they compare with ``==`` and hash cheaply.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class ScalarType:
    """A scalar dtype: ``bool``, ``i8``, ``u8``, ``i32``, ``u32``, ``i64``, ``u64``, ``f16``, ``bf16``, ``f32`` or
    ``f64``. ``i8``/``u8`` are storage types: values loaded from them are ``i32`` (docs/dsl.md)."""

    name: str
    kind: str  # "bool", "int", "uint", "float"
    bits: int

    def __repr__(self) -> str:
        return self.name

    __str__ = __repr__

    @property
    def is_float(self) -> bool:
        return self.kind == "float"

    @property
    def is_int(self) -> bool:
        """True for signed and unsigned integers (not bool)."""
        return self.kind in ("int", "uint")

    @property
    def is_signed(self) -> bool:
        return self.kind == "int"

    @property
    def is_bool(self) -> bool:
        return self.kind == "bool"

    @property
    def is_half(self) -> bool:
        """f16 and bf16: stored in 16 bits, computed in f32 by default."""
        return self.kind == "float" and self.bits == 16

    @property
    def is_narrow(self) -> bool:
        """i8 and u8: buffer elements only; loads widen to i32 and stores wrap to 8 bits."""
        return self.is_int and self.bits == 8

    @property
    def is_wide(self) -> bool:
        """The 64-bit types i64, u64 and f64 (8-byte scalars; devices may lack them)."""
        return self.bits == 64

    @property
    def itemsize(self) -> int:
        return max(1, self.bits // 8)

    @property
    def np_dtype(self) -> np.dtype:
        """The NumPy dtype used by the interpreter and for host arrays."""
        return np.dtype(_NP_NAMES[self.name]) if self.name != "bf16" else _bf16_dtype()


def _bf16_dtype() -> np.dtype:
    import ml_dtypes

    return np.dtype(ml_dtypes.bfloat16)


_NP_NAMES = {"bool": "bool", "i8": "int8", "u8": "uint8", "i32": "int32", "u32": "uint32", "i64": "int64",
             "u64": "uint64", "f16": "float16", "f32": "float32", "f64": "float64"}

bool_ = ScalarType("bool", "bool", 1)
i32 = ScalarType("i32", "int", 32)
u32 = ScalarType("u32", "uint", 32)
f16 = ScalarType("f16", "float", 16)
bf16 = ScalarType("bf16", "float", 16)
f32 = ScalarType("f32", "float", 32)
i8 = ScalarType("i8", "int", 8)
u8 = ScalarType("u8", "uint", 8)
i64 = ScalarType("i64", "int", 64)
u64 = ScalarType("u64", "uint", 64)
f64 = ScalarType("f64", "float", 64)

SCALAR_TYPES: dict[str, ScalarType] = {t.name: t for t in (bool_, i32, u32, f16, bf16, f32, i8, u8, i64, u64, f64)}
FLOAT_TYPES = (f32, f16, bf16)
#: dtypes a buffer element may have
BUFFER_ELEM_TYPES = (f32, f16, bf16, i32, u32, i8, u8, i64, u64, f64)
#: the integer range of each integer type
INT_RANGE = {"i8": (-(2**7), 2**7 - 1), "u8": (0, 2**8 - 1), "i32": (-(2**31), 2**31 - 1), "u32": (0, 2**32 - 1),
             "i64": (-(2**63), 2**63 - 1), "u64": (0, 2**64 - 1)}


def scalar_type_of_numpy(dtype: np.dtype) -> ScalarType | None:
    """Map a NumPy dtype to the IR scalar type, or None when Iron has no such type."""
    dtype = np.dtype(dtype)
    for t in BUFFER_ELEM_TYPES:
        if t.np_dtype == dtype:
            return t
    return None


@dataclass(frozen=True)
class BufferType:
    """A 1-D array of ``elem`` in ``space``: "global" (kernel arguments), "shared" (group memory) or "local" (a
    per-thread register array)."""

    elem: ScalarType
    space: str = "global"
    size: int | None = None  # known for shared arrays

    def __repr__(self) -> str:
        if self.space in ("shared", "local"):
            return f"{self.space}<{self.elem} x {'?' if self.size is None else self.size}>"
        return f"buffer<{self.elem}>"

    __str__ = __repr__


@dataclass(frozen=True)
class FragType:
    """A matrix fragment owned by a SIMD group: ``role`` "a" (rows x cols = M x K of ``elem``), "b" (K x N of
    ``elem``), "acc" (M x N of f32) or "row" (M x 1 of f32: a value per row of an accumulator, spread like its rows).
    How its elements spread over the lanes is the target's business."""

    role: str
    rows: int
    cols: int
    elem: ScalarType

    def __repr__(self) -> str:
        return f"frag<{self.role}, {self.rows}x{self.cols}, {self.elem}>"

    __str__ = __repr__


#: the fragment shape (M, N, K) of ``mma`` per input dtype, the same on every target (each composes its own matrix
#: instruction: mma.sync m16n8k16 twice on NVIDIA, MFMA 16x16x16 on CDNA, ...; the scalar fallback anywhere)
MMA_SHAPE = {"f16": (16, 16, 16), "bf16": (16, 16, 16)}


@dataclass(frozen=True)
class VarType:
    """A mutable per-thread local variable holding one ``elem`` (read with ``get``, written with ``set``)."""

    elem: ScalarType

    def __repr__(self) -> str:
        return f"var<{self.elem}>"

    __str__ = __repr__


Type = ScalarType | BufferType | VarType
