"""Elementwise kernels for a decoder (issue 18): unary math and activations, binary arithmetic with broadcasting of a
scalar or a row vector, casts between f32/f16/bf16 and fused SwiGLU.

Layout: the ``n`` elements are cut into vectors of ``VEC`` elements (16 bytes of the widest buffer type: 4 x f32,
8 x f16/bf16) and each thread moves ``PER`` of them, vector ``k * num_threads(0) + program_id(0)`` for k < PER (so a
SIMD group's accesses are contiguous): every load is issued, as one 16-byte ``vload``, before any value is used, the
values wait in an f32 register array, and each result vector leaves in one ``vstore``. A last, partial vector (n not
a multiple of VEC) is read and written element by element. An H200 needs tens of KB of loads in flight per SM to
reach its bandwidth; one 2-byte access per thread gives it 4 KB. ``VEC = 1`` (plain scalar accesses) is taken when a
device array does not start on a 16-byte boundary (a view at an odd offset) or a broadcast row is not a whole number
of vectors. ``PER`` comes from autotuning on CUDA (elements per thread 16, 32 or 8).

Every value is computed in f32 and rounded once to the output dtype, as torch does for f16/bf16. The operation is a
constexpr code (``EXP``, ``ADD``, ...), so each op is its own variant with no run-time branch; ``unary_op`` and
``binary_op`` are the device helpers other kernels reuse. sigmoid and silu are written as one ``exp2`` and one
division (not the builtins' ``exp`` of -|x|, a reciprocal and a select): half the instructions, which at 2 bytes
an element is what a 4 TB/s stream can afford (about 30 instructions per element on an H200). For f16/bf16 data
(FAST = 1) exp, sigmoid and silu use ``fast_exp``/``fast_exp2``: on Vulkan ``exp``/``exp2`` are Iron's own
correctly-rounding sequences, ~30 instructions, and on NVIDIA's driver (H100, 2026-12-05, 2^28 bf16) silu and
sigmoid took 540-547 us with them against 378 with GLSL Exp2 (relu 378, CUDA 355): compute-bound, not memory-bound.

Each op is registered as ``std/elementwise/<op>`` (binary ones also ``..._scalar`` and ``..._row``) with a float64
oracle written here independently of the kernels (NumPy on float64 inputs), and ``std/cast/to_<dtype>`` for casts.
Registered tolerances: one rounding to the output dtype on top of the f32 computation's error, which for the
transcendental ops is the backends' documented ulp bound (docs/dsl.md, "precision"); gelu's erf form cancels for
x < -3 (absolute error ~2^-23 |x|), hence its absolute allowance; Vulkan's log is 2^-21 absolute on [0.5, 2]
(tests/backends/capabilities.py), hence log's.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..frontend import func, kernel
from ..frontend.autotune import table_for, tune
from ..harness.registry import InputGen, bench, test_kernel
from ..lang import (
    T,
    Tensor,
    bf16,
    cast,
    constexpr,
    erf,
    exp,
    exp2,
    f16,
    f32,
    fast_exp,
    fast_exp2,
    local_array,
    log,
    num_threads,
    program_id,
    rsqrt,
    sqrt,
    static_range,
    tanh,
    vload,
    vstore,
)
from ..runtime import get_backend

UNARY = ("neg", "abs", "exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "silu", "gelu", "gelu_tanh", "relu",
         "square")
BINARY = ("add", "sub", "mul", "div", "max", "min")
BROADCASTS = ("none", "scalar", "row")
# the ops' codes (constexprs are numbers): an op's position in UNARY / BINARY / BROADCASTS
NEG, ABS, EXP, LOG, SQRT, RSQRT, TANH, SIGMOID, SILU, GELU, GELU_TANH, RELU, SQUARE = range(13)
ADD, SUB, MUL, DIV, MAX, MIN = range(6)
SAME, SCALAR, ROW = range(3)
#: the constexprs `iron build` compiles by default: unary NEG and binary ADD, no broadcast, 4 x 4 elements a thread,
#: precise exp (FAST 0)
OP, BCAST = 0, SAME
VEC, PER = 4, 4
FAST = 0
#: elements per thread: the default, and the candidates autotuning times per backend
ELEMS = 16
TUNING = {"cuda": (16, 32, 8)}
_GELU_C = math.sqrt(2.0 / math.pi)
_LOG2E = 1.4426950408889634


@func
def unary_op(x, OP, FAST):
    """OP applied to the f32 value x (OP a compile-time code: NEG, ABS, ... in ``UNARY``'s order); FAST = 1 (for
    f16/bf16 results) takes exp, sigmoid and silu through ``fast_exp``/``fast_exp2``, the target's own."""
    if OP == NEG:
        return -x
    if OP == ABS:
        return abs(x)
    if OP == EXP:
        if FAST:
            return fast_exp(x)
        return exp(x)
    if OP == LOG:
        return log(x)
    if OP == SQRT:
        return sqrt(x)
    if OP == RSQRT:
        return rsqrt(x)
    if OP == TANH:
        return tanh(x)
    if OP == SIGMOID:  # exp2 overflows to inf for x < -88: 1 / inf = 0, the right limit
        if FAST:
            return 1.0 / (1.0 + fast_exp2(x * -1.4426950408889634))
        return 1.0 / (1.0 + exp2(x * -1.4426950408889634))
    if OP == SILU:  # x / inf = -0 for x < -88 (the exact value is below 1e-36)
        if FAST:
            return x / (1.0 + fast_exp2(x * -1.4426950408889634))
        return x / (1.0 + exp2(x * -1.4426950408889634))
    if OP == GELU:
        return 0.5 * x * (1.0 + erf(x * 0.7071067811865476))
    if OP == GELU_TANH:
        return 0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))
    if OP == RELU:
        return max(x, 0.0)
    return x * x


@func
def binary_op(x, y, OP):
    """x OP y for f32 values (OP a compile-time code: ADD, SUB, ... in ``BINARY``'s order)."""
    if OP == ADD:
        return x + y
    if OP == SUB:
        return x - y
    if OP == MUL:
        return x * y
    if OP == DIV:
        return x / y
    if OP == MAX:
        return max(x, y)
    return min(x, y)


@func
def load_lanes(a, vals, n, VEC, PER):
    """vals[k * VEC + j] = a[e + j] (as f32) for this thread's vectors, e = (k * num_threads(0) + program_id(0)) *
    VEC: a whole vector in one access, the partial last one element by element, 0 past n."""
    t = program_id(0)
    g = num_threads(0)
    for k in static_range(PER):
        e = (k * g + t) * VEC
        if e + VEC <= n:
            chunk = vload(a, e, VEC)
            for j in static_range(VEC):
                vals[k * VEC + j] = chunk[j]
        else:
            for j in static_range(VEC):
                vals[k * VEC + j] = 0.0
                if e + j < n:
                    vals[k * VEC + j] = a[e + j]


@func
def load_operand(b, vals, n, ncols, VEC, PER, BCAST):
    """The second operand for the thread's elements: b's own (SAME), b[0] (SCALAR) or b[(e + j) % ncols] (ROW; a
    whole vector at once, since the launcher takes VEC = 1 unless ncols is a multiple of VEC)."""
    if BCAST == SAME:
        load_lanes(b, vals, n, VEC, PER)
    elif BCAST == SCALAR:
        y = cast(b[0], f32)
        for i in static_range(PER * VEC):
            vals[i] = y
    else:
        t = program_id(0)
        g = num_threads(0)
        for k in static_range(PER):
            e = (k * g + t) * VEC
            if e + VEC <= n:
                chunk = vload(b, e % ncols, VEC)
                for j in static_range(VEC):
                    vals[k * VEC + j] = chunk[j]
            else:
                for j in static_range(VEC):
                    vals[k * VEC + j] = 0.0
                    if e + j < n:
                        vals[k * VEC + j] = b[(e + j) % ncols]


@func
def store_lanes(out, vals, n, VEC, PER, DT):
    """out[e + j] = vals[k * VEC + j] rounded to DT (out's dtype) for this thread's elements below n."""
    t = program_id(0)
    g = num_threads(0)
    for k in static_range(PER):
        e = (k * g + t) * VEC
        if e + VEC <= n:
            o = local_array(DT, VEC)
            for j in static_range(VEC):
                o[j] = vals[k * VEC + j]
            vstore(out, e, o)
        else:
            for j in static_range(VEC):
                if e + j < n:
                    out[e + j] = vals[k * VEC + j]


@kernel
def unary(a: Tensor[T], out: Tensor[T], n: int, OP: constexpr, VEC: constexpr, PER: constexpr, FAST: constexpr):
    """out[i] = OP(a[i]) for i < n, computed in f32; PER vectors of VEC elements a thread (``launch_unary``); FAST:
    ``unary_op``'s (1 for f16/bf16)."""
    vals = local_array(f32, PER * VEC)
    load_lanes(a, vals, n, VEC, PER)
    for i in static_range(PER * VEC):
        vals[i] = unary_op(vals[i], OP, FAST)
    store_lanes(out, vals, n, VEC, PER, T)


@kernel
def binary(a: Tensor[T], b: Tensor[T], out: Tensor[T], n: int, ncols: int, OP: constexpr, BCAST: constexpr,
           VEC: constexpr, PER: constexpr):
    """out[i] = a[i] OP b[j] for i < n, computed in f32: j = i (BCAST SAME), 0 (SCALAR: b has one element) or
    i % ncols (ROW: b is one row of ncols elements, a and out rows of ncols). See ``launch_binary``."""
    x = local_array(f32, PER * VEC)
    y = local_array(f32, PER * VEC)
    load_lanes(a, x, n, VEC, PER)
    load_operand(b, y, n, ncols, VEC, PER, BCAST)
    for i in static_range(PER * VEC):
        x[i] = binary_op(x[i], y[i], OP)
    store_lanes(out, x, n, VEC, PER, T)


@kernel
def swiglu(gate: Tensor[T], up: Tensor[T], out: Tensor[T], n: int, VEC: constexpr, PER: constexpr,
           FAST: constexpr):
    """out[i] = silu(gate[i]) * up[i] (SwiGLU's gating) for i < n, in f32 (``launch_swiglu``)."""
    g = local_array(f32, PER * VEC)
    u = local_array(f32, PER * VEC)
    load_lanes(gate, g, n, VEC, PER)
    load_lanes(up, u, n, VEC, PER)
    for i in static_range(PER * VEC):
        g[i] = unary_op(g[i], SILU, FAST) * u[i]
    store_lanes(out, g, n, VEC, PER, T)


@kernel
def swiglu_rows(gu: Tensor[T], out: Tensor[T], n: int, inter: int, VEC: constexpr, PER: constexpr,
                FAST: constexpr):
    """out[r, c] = silu(gu[r, c]) * gu[r, inter + c]: out (rows, inter) from gu (rows, 2 inter), the fused gate/up
    projection of several tokens (``launch_swiglu_rows``); VEC divides inter, so a vector never crosses a row."""
    vals = local_array(f32, PER * VEC)
    t = program_id(0)
    g = num_threads(0)
    for k in static_range(PER):
        e = (k * g + t) * VEC
        for j in static_range(VEC):
            vals[k * VEC + j] = 0.0
        if e < n:
            src = e + (e // inter) * inter  # row r's gate starts at 2 r inter
            gv = vload(gu, src, VEC)
            uv = vload(gu, src + inter, VEC)
            for j in static_range(VEC):
                vals[k * VEC + j] = unary_op(cast(gv[j], f32), SILU, FAST) * cast(uv[j], f32)
    store_lanes(out, vals, n, VEC, PER, T)


@kernel
def to_f32(a: Tensor[T], out: Tensor[f32], n: int, VEC: constexpr, PER: constexpr):
    """out[i] = a[i] as f32 (exact), i < n (``launch_cast``)."""
    vals = local_array(f32, PER * VEC)
    load_lanes(a, vals, n, VEC, PER)
    store_lanes(out, vals, n, VEC, PER, f32)


@kernel
def to_f16(a: Tensor[T], out: Tensor[f16], n: int, VEC: constexpr, PER: constexpr):
    """out[i] = a[i] rounded to f16 (to nearest even; out of range gives inf), i < n."""
    vals = local_array(f32, PER * VEC)
    load_lanes(a, vals, n, VEC, PER)
    store_lanes(out, vals, n, VEC, PER, f16)


@kernel
def to_bf16(a: Tensor[T], out: Tensor[bf16], n: int, VEC: constexpr, PER: constexpr):
    """out[i] = a[i] rounded to bf16 (to nearest even), i < n."""
    vals = local_array(f32, PER * VEC)
    load_lanes(a, vals, n, VEC, PER)
    store_lanes(out, vals, n, VEC, PER, bf16)


# -- host side: launchers ---------------------------------------------------------------------------------------------

def _n(x: Any) -> int:
    return int(np.prod(x.shape))


def _itemsize(x: Any) -> int:
    size = getattr(x.dtype, "itemsize", None)
    return int(size) if size is not None else int(x.element_size())


def device_offset(x: Any) -> int | None:
    """Where ``x``'s data starts (mod 16 is what matters) for arrays used in place on a device: torch and CuPy
    tensors, iron arrays (their byte offset); None for NumPy arrays, which backends copy into fresh allocations."""
    if isinstance(x, np.ndarray):
        return None
    if callable(getattr(x, "data_ptr", None)):
        return int(x.data_ptr())
    cai = getattr(x, "__cuda_array_interface__", None)
    if cai is not None:
        return int(cai["data"][0])
    offset = getattr(x, "offset", None)
    return int(offset) if isinstance(offset, int) else None


def vector_width(*arrays: Any) -> int:
    """Elements per 16-byte access of the widest element type among ``arrays``; 1 when one of them does not start on
    a 16-byte boundary (vector accesses must be aligned, docs/dsl.md)."""
    if any((device_offset(x) or 0) % 16 for x in arrays):
        return 1
    return 16 // max(_itemsize(x) for x in arrays)


def dtype_label(x: Any) -> str:
    """``x``'s dtype as Iron names it (NumPy, torch or CuPy arrays): the autotuner's key."""
    return str(getattr(x, "dtype", "")).replace("torch.", "").replace("bfloat16", "bf16").replace("float16", "f16") \
        .replace("float32", "f32")


def launch_lanes(name: str, n: int, vec: int, like: Any, backend: str | None, launch) -> None:
    """Run ``launch(per, threads)`` for n elements in vectors of ``vec``, with the elements per thread autotuning
    picks on this backend (the first of ``TUNING`` elsewhere)."""
    if n <= 0:
        return
    be = backend or get_backend(None).name
    configs = [{"EPT": e} for e in table_for(TUNING, be) or (ELEMS,)]

    def run(cfg: dict) -> None:
        per = max(1, cfg["EPT"] // vec)
        vectors = -(-n // vec)
        launch(per, -(-vectors // per))

    run(tune(name, configs, run, backend=be, dtype=dtype_label(like), key=(n,)))


def fast_math(x: Any) -> int:
    """``unary_op``'s FAST for data like x: 1 for f16/bf16 (a result rounded to 8 or 11 bits does not need the last
    f32 bits of exp), 0 for f32."""
    return int(_itemsize(x) < 4)


def launch_unary(op: str, a: Any, out: Any, backend: str | None = None) -> None:
    """out = OP(a) elementwise (a and out of the same size and dtype)."""
    n, code, vec = _n(a), UNARY.index(op), vector_width(a, out)
    launch_lanes(f"std/elementwise/{op}", n, vec, a, backend,
                 lambda per, th: unary[th](a, out, n, code, vec, per, fast_math(a), backend=backend))


def launch_binary(op: str, a: Any, b: Any, out: Any, backend: str | None = None) -> None:
    """out = a OP b; b of a's shape, one element, or one row of a's last axis (broadcast)."""
    n, nb, ncols = _n(a), _n(b), a.shape[-1]
    mode = "none" if tuple(b.shape) == tuple(a.shape) else "scalar" if nb == 1 else "row"
    if mode == "row" and nb != ncols:
        raise ValueError(f"binary {op}: b has shape {tuple(b.shape)}; expected {tuple(a.shape)}, one element or "
                         f"one row of {ncols}")
    vec = vector_width(a, b, out) if mode != "scalar" else vector_width(a, out)
    if mode == "row" and ncols % vec:
        vec = 1
    code, bcast = BINARY.index(op), BROADCASTS.index(mode)
    launch_lanes(f"std/elementwise/{op}", n, vec, a, backend,
                 lambda per, th: binary[th](a, b, out, n, ncols, code, bcast, vec, per, backend=backend))


def launch_swiglu(gate: Any, up: Any, out: Any, backend: str | None = None) -> None:
    """out = silu(gate) * up elementwise."""
    n, vec = _n(gate), vector_width(gate, up, out)
    launch_lanes("std/elementwise/swiglu", n, vec, gate, backend,
                 lambda per, th: swiglu[th](gate, up, out, n, vec, per, fast_math(gate), backend=backend))


def launch_swiglu_rows(gu: Any, out: Any, backend: str | None = None) -> None:
    """out (rows, inter) = silu(gu[:, :inter]) * gu[:, inter:] for gu (rows, 2 inter)."""
    rows, inter = out.shape[0], out.shape[-1]
    if tuple(gu.shape) != (rows, 2 * inter):
        raise ValueError(f"swiglu_rows: gu has shape {tuple(gu.shape)}; out {tuple(out.shape)} needs ({rows}, "
                         f"{2 * inter})")
    n, vec = rows * inter, vector_width(gu, out)
    if inter % vec:
        vec = 1
    launch_lanes("std/elementwise/swiglu_rows", n, vec, gu, backend,
                 lambda per, th: swiglu_rows[th](gu, out, n, inter, vec, per, fast_math(gu), backend=backend))


def launch_cast(a: Any, out: Any, backend: str | None = None) -> None:
    """out = a converted to out's dtype (f32, f16 or bf16), rounding to nearest even."""
    k = {"f32": to_f32, "f16": to_f16, "bf16": to_bf16}[dtype_label(out)]
    n, vec = _n(a), vector_width(a, out)
    launch_lanes(f"std/cast/to_{dtype_label(out)}", n, vec, a, backend,
                 lambda per, th: k[th](a, out, n, vec, per, backend=backend))


# -- oracles, references, registration ----------------------------------------------------------------------------

_UNARY_F64 = {
    "neg": np.negative, "abs": np.abs, "exp": np.exp, "log": np.log, "sqrt": np.sqrt,
    "rsqrt": lambda x: 1.0 / np.sqrt(x), "tanh": np.tanh, "sigmoid": lambda x: 1.0 / (1.0 + np.exp(-x)),
    "silu": lambda x: x / (1.0 + np.exp(-x)),
    "gelu": lambda x: 0.5 * x * (1.0 + np.vectorize(math.erf)(x / math.sqrt(2.0))),
    "gelu_tanh": lambda x: 0.5 * x * (1.0 + np.tanh(_GELU_C * (x + 0.044715 * x ** 3))),
    "relu": lambda x: np.maximum(x, 0.0), "square": np.square,
}
_TORCH_UNARY = {"gelu": ("nn.functional.gelu", {}), "gelu_tanh": ("nn.functional.gelu", {"approximate": "tanh"}),
                "silu": ("nn.functional.silu", {}), "relu": ("nn.functional.relu", {})}
_TORCH_BINARY = {"add": "add", "sub": "sub", "mul": "mul", "div": "div", "max": "maximum", "min": "minimum"}


def _torch_fn(path: str):
    import torch

    fn = torch
    for part in path.split("."):
        fn = getattr(fn, part)
    return fn


def _torch_unary(op: str):
    path, kw = _TORCH_UNARY.get(op, (op, {}))
    return lambda d: _torch_fn(path)(d["a"], **kw)


_BINARY_F64 = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide, "max": np.maximum,
               "min": np.minimum}
#: input domains: log/sqrt/rsqrt need positive inputs; div's divisor is kept away from 0 by its setup
_DOMAIN = {"log": "positive", "sqrt": "positive", "rsqrt": "positive"}
_ONE_ROUNDING = {"f32": (1e-30, 1.2e-7), "f16": (1e-7, 9.8e-4), "bf16": (1e-30, 7.9e-3)}
#: f32 transcendental allowance (a few ulp, the backends' bound) plus the output's rounding
_TRANSCENDENTAL = {"f32": (1e-7, 1e-6), "f16": (1e-5, 1.5e-3), "bf16": (1e-5, 8.5e-3)}
_HOST = [(1 << 12,), (1000, 3)]
_DEVICE = [(1 << 20,), (1 << 24,), (1 << 28,)]


class _Op:
    """A kernel registered again under one op's name (the registry keeps one entry per object)."""

    def __init__(self, k: Any, what: str):
        self.fn = k.fn
        self.kernel = k
        self.what = what

    def __repr__(self) -> str:
        return f"<iron kernel {self.kernel.__name__} ({self.what})>"


def _tolerance(op: str) -> dict[str, tuple[float, float]]:
    if op in ("neg", "abs", "relu", "add", "sub", "mul", "div", "max", "min", "square"):
        return dict(_ONE_ROUNDING)
    if op in ("gelu", "gelu_tanh"):
        return {k: (max(a, 2e-6), r) for k, (a, r) in _TRANSCENDENTAL.items()}
    if op == "log":  # Vulkan's log is 2^-21 absolute on [0.5, 2] (the SPIR-V precision table): near x = 1 that is
        return {k: (max(a, 2.0 ** -21), r) for k, (a, r) in _TRANSCENDENTAL.items()}  # many ulp of a tiny result
    return dict(_TRANSCENDENTAL)


def _register_unary(op: str) -> None:
    f64 = _UNARY_F64[op]
    target = _Op(unary, op)
    bench(f"std/elementwise/{op}", setup=lambda g: {"a": g.random(), "out": g.poisoned()},
          launch=lambda d, be: launch_unary(op, d["a"], d["out"], be),
          references={"numpy": lambda d: f64(d["a"].astype(np.float32)).astype(d["a"].dtype),
                      "torch": _torch_unary(op)},
          bytes_moved=lambda shape, itemsize: 2 * int(np.prod(shape)) * itemsize,
          flops=lambda shape: int(np.prod(shape)), device_shapes=_DEVICE)(target)
    test_kernel(oracle=lambda d: f64(d["a"].astype(np.float64)), domain=_DOMAIN.get(op, "signed"), shapes=_HOST,
                tolerance=_tolerance(op))(target)


def _binary_setup(g: InputGen, op: str, mode: str) -> dict[str, np.ndarray]:
    bshape = g.shape if mode == "none" else (1,) if mode == "scalar" else g.shape[-1:]
    b = g.random(shape=bshape)
    if op == "div":  # divisors of magnitude >= 0.25, same sign as drawn
        b = g.random(shape=bshape, domain="positive")
    return {"a": g.random(), "b": b, "out": g.poisoned()}


def _register_binary(op: str, mode: str) -> None:
    f64 = _BINARY_F64[op]
    target = _Op(binary, f"{op}, {mode}")
    suffix = "" if mode == "none" else f"_{mode}"
    streams = 3 if mode == "none" else 2
    bench(f"std/elementwise/{op}{suffix}", setup=lambda g: _binary_setup(g, op, mode),
          launch=lambda d, be: launch_binary(op, d["a"], d["b"], d["out"], be),
          references={"numpy": lambda d: f64(d["a"].astype(np.float32), d["b"].astype(np.float32)
                                             ).astype(d["a"].dtype),
                      "torch": lambda d: _torch_fn(_TORCH_BINARY[op])(d["a"], d["b"])},
          bytes_moved=lambda shape, itemsize: streams * int(np.prod(shape)) * itemsize,
          flops=lambda shape: int(np.prod(shape)), device_shapes=_DEVICE if mode == "none" else [(16384, 8192)])(
        target)
    test_kernel(oracle=lambda d: f64(d["a"].astype(np.float64), d["b"].astype(np.float64)), domain="signed",
                shapes=_HOST, tolerance=_tolerance(op))(target)


def _register_swiglu() -> None:
    bench("std/elementwise/swiglu", setup=lambda g: {"gate": g.random(), "up": g.random(), "out": g.poisoned()},
          launch=lambda d, be: launch_swiglu(d["gate"], d["up"], d["out"], be),
          references={"numpy": lambda d: (_UNARY_F64["silu"](d["gate"].astype(np.float32))
                                          * d["up"].astype(np.float32)).astype(d["gate"].dtype),
                      "torch": lambda d: _torch_fn("nn.functional.silu")(d["gate"]) * d["up"]},
          bytes_moved=lambda shape, itemsize: 3 * int(np.prod(shape)) * itemsize,
          flops=lambda shape: 5 * int(np.prod(shape)), device_shapes=_DEVICE)(swiglu)
    test_kernel(oracle=lambda d: _UNARY_F64["silu"](d["gate"].astype(np.float64)) * d["up"].astype(np.float64),
                domain="signed", shapes=_HOST, tolerance=_TRANSCENDENTAL)(swiglu)


def _register_swiglu_rows() -> None:
    """shape (rows, inter): gu (rows, 2 inter), out (rows, inter)."""

    def halves(d):
        inter = d["out"].shape[1]
        return d["gu"][:, :inter], d["gu"][:, inter:]

    def numpy_ref(d):
        g, u = halves(d)
        return (_UNARY_F64["silu"](g.astype(np.float32)) * u.astype(np.float32)).astype(d["gu"].dtype)

    def torch_ref(d):
        g, u = halves(d)
        return _torch_fn("nn.functional.silu")(g) * u

    def oracle(d):
        g, u = halves(d)
        return _UNARY_F64["silu"](g.astype(np.float64)) * u.astype(np.float64)

    bench("std/elementwise/swiglu_rows",
          setup=lambda g: {"gu": g.random(shape=(g.shape[0], 2 * g.shape[1])), "out": g.poisoned()},
          launch=lambda d, be: launch_swiglu_rows(d["gu"], d["out"], be),
          references={"numpy": numpy_ref, "torch": torch_ref},
          bytes_moved=lambda shape, itemsize: 3 * int(np.prod(shape)) * itemsize,
          flops=lambda shape: 5 * int(np.prod(shape)), device_shapes=[(2048, 8192), (512, 14336)])(swiglu_rows)
    test_kernel(oracle=oracle, domain="signed", shapes=[(64, 256), (7, 100), (3, 5)],
                tolerance=_TRANSCENDENTAL)(swiglu_rows)


def _torch_out(name: str):
    import torch

    return {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}[name]


_CAST_TARGETS = {"f32": (to_f32, np.float32), "f16": (to_f16, np.float16), "bf16": (to_bf16, None)}


def _register_cast(name: str) -> None:
    k, np_out = _CAST_TARGETS[name]

    def out_dtype() -> Any:
        if np_out is not None:
            return np_out
        import ml_dtypes

        return ml_dtypes.bfloat16

    bench(f"std/cast/to_{name}", setup=lambda g: {"a": g.random(), "out": g.poisoned().astype(out_dtype())},
          launch=lambda d, be: launch_cast(d["a"], d["out"], be),
          references={"numpy": lambda d: d["a"].astype(out_dtype()),
                      "torch": lambda d: d["a"].to(_torch_out(name), copy=True)},
          bytes_moved=lambda shape, itemsize: int(np.prod(shape)) * (itemsize + (4 if name == "f32" else 2)),
          flops=lambda shape: int(np.prod(shape)), device_shapes=_DEVICE)(k)
    # one rounding of the input into the output type (exact when the output is wider)
    test_kernel(oracle=lambda d: d["a"].astype(np.float64), domain="signed", shapes=_HOST,
                tolerance={dt: _ONE_ROUNDING[name] for dt in ("f32", "f16", "bf16")})(k)


for _op in UNARY:
    _register_unary(_op)
for _op in BINARY:
    for _mode in BROADCASTS:
        _register_binary(_op, _mode)
_register_swiglu()
_register_swiglu_rows()
for _name in _CAST_TARGETS:
    _register_cast(_name)
