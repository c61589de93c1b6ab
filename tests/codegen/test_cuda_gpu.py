"""The emitted CUDA, run on a GPU, against the interpreter (the definition of Iron's semantics).

Skipped without a CUDA device. On one (e.g. the H200 through the device tool):

    PYTHONPATH=src:tests python -m pytest tests/codegen/test_cuda_gpu.py

Also see ``gpu_as_cpu.py``, which runs the front-end's kernel suite and its oracles on the GPU.
"""

from __future__ import annotations

import functools
import os

import ml_dtypes
import numpy as np
import pytest

import iron
from iron import T, Tensor, cast, f32, i32, program_id, u32
from iron.codegen import emit_cuda
from iron.codegen.nvrtc import compile_cuda, unavailable_reason
from iron.interp.executor import run_kernel

from .cuda_driver import gpu_or_none

_REASON = unavailable_reason()
GPU, _GPU_REASON = gpu_or_none() if _REASON is None else (None, _REASON)
pytestmark = pytest.mark.skipif(GPU is None, reason=f"needs a CUDA GPU: {_GPU_REASON}")


def run_both(kernel, args: dict[str, np.ndarray | np.generic], grid, group, vector: bool = False, offset: int = 0):
    """(interpreter outputs, GPU outputs) of one launch, from copies of ``args``; ``vector`` launches the
    vectorised entry instead (the caller checks there is one), ``offset`` misaligns the buffers."""
    cpu = {k: np.array(v, copy=True) for k, v in args.items()}
    gpu = {k: np.array(v, copy=True) for k, v in args.items()}
    run_kernel(kernel, cpu, grid, group, 32)
    src = emit_cuda(kernel)
    GPU.run(src, compile_cuda(src, arch=GPU.arch), gpu, grid, group, vector=vector, offset=offset)
    return cpu, gpu


def assert_bits_equal(want: np.ndarray, got: np.ndarray, what: str) -> None:
    """Bit-identical, except that any NaN equals any NaN."""
    if want.dtype.kind == "f" or want.dtype == ml_dtypes.bfloat16:
        nan = np.isnan(want.astype(np.float32))
        assert np.array_equal(nan, np.isnan(got.astype(np.float32))), f"{what}: NaNs differ"
        bits = {2: np.uint16, 4: np.uint32}[want.dtype.itemsize]
        bad = np.flatnonzero((want.view(bits) != got.view(bits)) & ~nan)
    else:
        bad = np.flatnonzero(want != got)
    assert bad.size == 0, f"{what}: {bad.size} differ, first at {bad[:5]}: want {want[bad[:5]]} got {got[bad[:5]]}"


# -- conversions: every f16/bf16 pattern, and f32 values at and around every rounding boundary ------------------------


@iron.kernel
def f32_to_i32(x: Tensor[f32], out: Tensor[i32]):
    i = program_id(0)
    out[i] = cast(x[i], i32)


@iron.kernel
def f32_to_u32(x: Tensor[f32], out: Tensor[u32]):
    i = program_id(0)
    out[i] = cast(x[i], u32)


@iron.kernel
def narrow(x: Tensor[f32], out: Tensor[T]):
    i = program_id(0)
    out[i] = x[i]


@iron.kernel
def widen(x: Tensor[T], out: Tensor[f32]):
    i = program_id(0)
    out[i] = x[i]


@iron.kernel
def i32_to(x: Tensor[i32], out: Tensor[T]):
    i = program_id(0)
    out[i] = cast(x[i], T)


@iron.kernel
def u32_to(x: Tensor[u32], out: Tensor[T]):
    i = program_id(0)
    out[i] = cast(x[i], T)


def _f32_samples(rng) -> np.ndarray:
    bits = rng.integers(0, 2**32, 1 << 20, dtype=np.uint64).astype(np.uint32)
    halves = np.arange(1 << 16, dtype=np.uint32) << 16  # every bf16 value, and the ties just above them
    specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 2.0**31, -(2.0**31), 2.0**32, 4294967040.0, 2147483520.0,
                         -2147483904.0, 65504.0, 65519.99, 65520.0, 1e-45, 6e-8, 3e-8, -0.5, 0.99999994],
                        dtype=np.float32).view(np.uint32)
    return np.concatenate([bits, halves, halves | 0x8000, halves | 0x7FFF, halves | 0x8001, specials]).view(np.float32)


@pytest.mark.parametrize("vector", [False, True], ids=["scalar", "vector"])
def test_float_conversions_bit_exact(rng, vector):
    x = _f32_samples(rng)[:-3]  # an odd count: the vector entry's tail runs too
    n = x.size
    run = functools.partial(run_both, vector=vector)
    for k, out in ((f32_to_i32, np.zeros(n, np.int32)), (f32_to_u32, np.zeros(n, np.uint32))):
        cpu, gpu = run(k.variant(None).kernel, {"x": x, "out": out}, (n,), (256,))
        assert_bits_equal(cpu["out"], gpu["out"], k.__name__)
    for dt in (iron.f16, iron.bf16):
        cpu, gpu = run(narrow.variant(dt).kernel, {"x": x, "out": np.zeros(n, dt.np_dtype)}, (n,), (256,))
        assert_bits_equal(cpu["out"], gpu["out"], f"f32 -> {dt}")
        every = np.arange(1 << 16, dtype=np.uint16).view(dt.np_dtype)
        cpu, gpu = run(widen.variant(dt).kernel, {"x": every, "out": np.zeros(every.size, np.float32)},
                       (every.size,), (256,))
        assert_bits_equal(cpu["out"], gpu["out"], f"{dt} -> f32")


def test_int_to_half_rounds_once(rng):
    xi = np.concatenate([rng.integers(-(2**31), 2**31, 1 << 18, dtype=np.int64),
                         (2**24 + 2**16 + 1) * np.array([1, -1]), np.arange(-70000, 70000)]).astype(np.int32)
    xu = np.concatenate([rng.integers(0, 2**32, 1 << 18, dtype=np.uint64), [2**32 - 1, 2**31, 2**24 + 2**16 + 1]])
    xu = xu.astype(np.uint32)
    for dt in (iron.f16, iron.bf16):
        for k, x in ((i32_to, xi), (u32_to, xu)):
            cpu, gpu = run_both(k.variant(dt).kernel, {"x": x, "out": np.zeros(x.size, dt.np_dtype)}, (x.size,),
                                (128,))
            assert_bits_equal(cpu["out"], gpu["out"], f"{k.__name__} {dt}")


# -- random kernels (the pass tests' generator): every op and control-flow form, GPU vs interpreter -----------------


def _random_kernel_module():
    from ..passes import passes_kernel_gen  # part of the repository: an import error is a failure, not a skip

    return passes_kernel_gen


def _close(want: np.ndarray, got: np.ndarray) -> np.ndarray:
    """Elements that agree: ints exactly; floats to a few f32 ulps (libm and CUDA's math differ in the last bits)."""
    if want.dtype.kind != "f":
        return want == got
    both_nan = np.isnan(want) & np.isnan(got)
    with np.errstate(all="ignore"):
        near = np.abs(want.astype(np.float64) - got) <= 4e-6 * np.abs(want.astype(np.float64)) + 1e-37
    return both_nan | (want == got) | near


@pytest.mark.parametrize("grid,group,vector,offset", [
    ((64,), (32,), False, 0), ((40,), (40,), False, 0), ((24,), (8,), False, 0),  # full, partial, tiny warps
    ((61,), (32,), True, 0), ((61,), (32,), True, 4),  # the vector entry: aligned (with a tail), and unaligned
])
def test_random_kernels_match_interpreter(grid, group, vector, offset):
    gen = _random_kernel_module()
    from hypothesis import HealthCheck, given, settings

    from iron.ir.rewrite import clone_kernel
    from iron.passes import PassManager, default_pipeline

    n = grid[0]
    rng = np.random.default_rng(7)
    xi = rng.integers(-(2**31), 2**31, n, dtype=np.int64).astype(np.int32)
    xi[:6] = [0, 1, -1, 7, -(2**31), 2**31 - 1]
    xu = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    xu[:4] = [0, 1, 2**31, 2**32 - 1]
    xf = (rng.standard_normal(n) * 10).astype(np.float32)
    xf[:10] = [0.0, -0.0, np.nan, np.inf, -np.inf, 1e-45, -3.5, -0.0, 0.5, -0.0]
    size = n * gen.SITES
    failures = []
    examples = int(os.environ.get("IRON_GPU_FUZZ_EXAMPLES", "150"))

    @settings(max_examples=examples, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(kernel=gen.kernels())
    def check(kernel):
        for label, k in (("raw", kernel), ("optimised", PassManager(default_pipeline()).run(clone_kernel(kernel)))):
            if vector and emit_cuda(k).vector is None:
                continue
            args = {"xi": xi, "xu": xu, "xf": xf, "n": np.int32(n), "oi": np.full(size, -12345, np.int32),
                    "ou": np.full(size, 0xDEADBEEF, np.uint32), "of": np.full(size, np.nan, np.float32)}
            cpu, gpu = run_both(k, args, grid, group, vector, offset)
            for name in ("oi", "ou", "of"):
                ok = _close(cpu[name], gpu[name])
                if not ok.all():
                    bad = np.flatnonzero(~ok)[:4]
                    failures.append(f"{label} {name} at {bad}: interp {cpu[name][bad]} gpu {gpu[name][bad]}\n"
                                    + iron.ir.print_kernel(k) + emit_cuda(k).source)
                    return

    check()
    assert not failures, f"{len(failures)} random kernels differ; first:\n{failures[0]}"


# -- the std library against its float64 oracles ---------------------------------------------------------------------


def test_std_kernels_match_oracles(monkeypatch, rng):
    from iron.runtime.cpu import CpuBackend
    from iron.std.registry import load_all

    from .gpu_as_cpu import _launch_on_gpu

    monkeypatch.setattr(CpuBackend, "launch", _launch_on_gpu)
    for entry in load_all():
        for dtype in entry.dtypes:
            for shape in entry.shapes:
                d = entry.make(shape, iron.ir.types.SCALAR_TYPES[dtype].np_dtype, rng)
                entry.launch(d, "cpu")
                got = d[entry.output].astype(np.float64)
                want = entry.oracle(d)
                atol, rtol = entry.tolerance[dtype]
                err = np.abs(got - want) - (atol + rtol * np.abs(want))
                assert not (err > 0).any(), f"{entry.name} {dtype} {shape}: max excess {np.nanmax(err)}"


# -- the seed's kernel at the size: a throughput figure for the report (not a pass/fail bar) ----------------


@iron.kernel
def copy(a: Tensor[T], out: Tensor[T]):
    i = program_id(0)
    out[i] = a[i]


@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
def test_exp_throughput(dtype, capsys):
    if os.environ.get("IRON_GPU_BENCH") != "1":
        pytest.skip("set IRON_GPU_BENCH=1 to time exp over 256M elements")
    from iron.std.unary import iron_exp

    dt = iron.ir.types.SCALAR_TYPES[dtype]
    n = 1 << 28
    a = np.random.default_rng(0).standard_normal(n).astype(dt.np_dtype)
    figures = []
    for k in (copy, iron_exp):
        src = emit_cuda(k.variant(dt).kernel)
        cubin = compile_cuda(src, arch=GPU.arch)
        for vector in (False, True):
            args = {"a": a, "out": np.empty_like(a)}
            ms = GPU.run(src, cubin, args, (n,), (256,), timed=20, vector=vector)
            label = f"{k.__name__}_x{src.vector.width}" if vector else k.__name__
            figures.append(f"{label} {ms:.3f} ms {2 * a.nbytes / ms / 1e6:.0f} GB/s")
    with capsys.disabled():
        print(f"\n{dtype} n=2^28 on {GPU.name}, group 256: " + "; ".join(figures))
    ref = np.exp(a[:4096].astype(np.float32)).astype(dt.np_dtype).astype(np.float64)
    assert np.allclose(args["out"][:4096].astype(np.float64), ref, rtol=1e-2)
