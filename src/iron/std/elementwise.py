"""Elementwise kernels for a decoder (issue 18): unary math and activations, binary arithmetic with broadcasting of a
scalar or a row vector, casts between f32/f16/bf16 and fused SwiGLU.

One thread per element (exact grids: threads past the end return), every value computed in f32 and rounded once to
the output dtype, as torch does for f16/bf16. The operation is a constexpr code (``EXP``, ``ADD``, ...), so each op
is its own variant with no run-time branch; ``unary_op``/``binary_op`` are the device helpers other kernels reuse.
Each op is registered as ``std/elementwise/<op>`` (binary ones also ``..._scalar`` and ``..._row``) with a float64
oracle written here independently of the kernels (NumPy on float64 inputs), and ``std/cast/to_<dtype>`` for casts.

Registered tolerances: one rounding to the output dtype on top of the f32 computation's error, which for the
transcendental ops is the backends' documented ulp bound (docs/dsl.md, "precision"); gelu's erf form cancels for
x < -3 (absolute error ~2^-23 |x|), hence its absolute allowance.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..frontend import func, kernel
from ..harness.registry import InputGen, bench, test_kernel
from ..lang import (
    T,
    Tensor,
    bf16,
    cast,
    constexpr,
    erf,
    exp,
    f16,
    f32,
    log,
    program_id,
    rsqrt,
    sigmoid,
    silu,
    sqrt,
    tanh,
)

UNARY = ("neg", "abs", "exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "silu", "gelu", "gelu_tanh", "relu",
         "square")
BINARY = ("add", "sub", "mul", "div", "max", "min")
BROADCASTS = ("none", "scalar", "row")
# the ops' codes (constexprs are numbers): an op's position in UNARY / BINARY / BROADCASTS
NEG, ABS, EXP, LOG, SQRT, RSQRT, TANH, SIGMOID, SILU, GELU, GELU_TANH, RELU, SQUARE = range(13)
ADD, SUB, MUL, DIV, MAX, MIN = range(6)
SAME, SCALAR, ROW = range(3)
#: the constexprs `iron build` compiles by default: unary NEG and binary ADD, no broadcast
OP, BCAST = 0, SAME
_GELU_C = math.sqrt(2.0 / math.pi)


@func
def unary_op(x, OP):
    """OP applied to the f32 value x (OP a compile-time code: NEG, ABS, ... in ``UNARY``'s order)."""
    if OP == NEG:
        return -x
    if OP == ABS:
        return abs(x)
    if OP == EXP:
        return exp(x)
    if OP == LOG:
        return log(x)
    if OP == SQRT:
        return sqrt(x)
    if OP == RSQRT:
        return rsqrt(x)
    if OP == TANH:
        return tanh(x)
    if OP == SIGMOID:
        return sigmoid(x)
    if OP == SILU:
        return silu(x)
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


@kernel
def unary(a: Tensor[T], out: Tensor[T], OP: constexpr):
    """out[i] = OP(a[i]), computed in f32. Launch one thread per element."""
    i = program_id(0)
    out[i] = cast(unary_op(cast(a[i], f32), OP), T)


@kernel
def binary(a: Tensor[T], b: Tensor[T], out: Tensor[T], ncols: int, OP: constexpr, BCAST: constexpr):
    """out[i] = a[i] OP b[j], computed in f32: j = i (BCAST SAME), 0 (SCALAR: b has one element) or i % ncols
    (ROW: b is one row of ncols elements, a and out rows of ncols). Launch one thread per element of a."""
    i = program_id(0)
    j = i
    if BCAST == SCALAR:
        j = 0
    if BCAST == ROW:
        j = i % ncols
    out[i] = cast(binary_op(cast(a[i], f32), cast(b[j], f32), OP), T)


@kernel
def swiglu(gate: Tensor[T], up: Tensor[T], out: Tensor[T]):
    """out[i] = silu(gate[i]) * up[i] (SwiGLU's gating), in f32. Launch one thread per element."""
    i = program_id(0)
    out[i] = cast(silu(cast(gate[i], f32)) * cast(up[i], f32), T)


@kernel
def to_f32(a: Tensor[T], out: Tensor[f32]):
    """out[i] = a[i] as f32 (exact)."""
    i = program_id(0)
    out[i] = cast(a[i], f32)


@kernel
def to_f16(a: Tensor[T], out: Tensor[f16]):
    """out[i] = a[i] rounded to f16 (to nearest even; out of range gives inf)."""
    i = program_id(0)
    out[i] = cast(a[i], f16)


@kernel
def to_bf16(a: Tensor[T], out: Tensor[bf16]):
    """out[i] = a[i] rounded to bf16 (to nearest even)."""
    i = program_id(0)
    out[i] = cast(a[i], bf16)


# -- host side: launchers, oracles, registration ----------------------------------------------------------------------

def _n(x: Any) -> int:
    return int(np.prod(x.shape))


def launch_unary(op: str, a: Any, out: Any, backend: str | None = None) -> None:
    unary[_n(a)](a, out, UNARY.index(op), backend=backend)


def launch_binary(op: str, a: Any, b: Any, out: Any, backend: str | None = None) -> None:
    """out = a OP b; b of a's shape, one element, or one row of a's last axis (broadcast)."""
    nb, ncols = _n(b), a.shape[-1]
    mode = "none" if tuple(b.shape) == tuple(a.shape) else "scalar" if nb == 1 else "row"
    if mode == "row" and nb != ncols:
        raise ValueError(f"binary {op}: b has shape {tuple(b.shape)}; expected {tuple(a.shape)}, one element or "
                         f"one row of {ncols}")
    binary[_n(a)](a, b, out, ncols, BINARY.index(op), BROADCASTS.index(mode), backend=backend)


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
          launch=lambda d, be: swiglu[_n(d["gate"])](d["gate"], d["up"], d["out"], backend=be),
          references={"numpy": lambda d: (_UNARY_F64["silu"](d["gate"].astype(np.float32))
                                          * d["up"].astype(np.float32)).astype(d["gate"].dtype),
                      "torch": lambda d: _torch_fn("nn.functional.silu")(d["gate"]) * d["up"]},
          bytes_moved=lambda shape, itemsize: 3 * int(np.prod(shape)) * itemsize,
          flops=lambda shape: 5 * int(np.prod(shape)), device_shapes=_DEVICE)(swiglu)
    test_kernel(oracle=lambda d: _UNARY_F64["silu"](d["gate"].astype(np.float64)) * d["up"].astype(np.float64),
                domain="signed", shapes=_HOST, tolerance=_TRANSCENDENTAL)(swiglu)


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
          launch=lambda d, be: k[_n(d["a"])](d["a"], d["out"], backend=be),
          references={"numpy": lambda d: d["a"].astype(out_dtype()),
                      "torch": lambda d: d["a"].to(_torch_out(name))},
          bytes_moved=lambda shape, itemsize: 2 * int(np.prod(shape)) * itemsize,
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
for _name in _CAST_TARGETS:
    _register_cast(_name)
