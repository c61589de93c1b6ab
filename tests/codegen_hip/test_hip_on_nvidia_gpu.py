"""Issue 7, point 4: the HIP source for the NVIDIA run (wavefront 32), behind the hip->CUDA compatibility header,
compiled by NVRTC, runs on an NVIDIA GPU and matches the interpreter bit for bit. Skipped without a CUDA GPU.

The whole conformance suite runs on the same path as ``backend="hip-on-cuda"``
(``IRON_TEST_BACKENDS=hip-on-cuda``, in ``scripts/gpu_check.sh cuda``).
"""

from __future__ import annotations

import numpy as np
import pytest

import iron
from iron.codegen.cfamily.hip import HIP_ON_NVIDIA, emit_source, for_nvidia
from iron.codegen.nvrtc import compile_cuda, unavailable_reason
from iron.interp.executor import run_kernel

from ..codegen import kernels as K
from ..codegen.cuda_driver import gpu_or_none
from ..codegen.test_cuda_gpu import _f32_samples, assert_bits_equal, f32_to_i32, f32_to_u32, narrow, widen

_REASON = unavailable_reason()
GPU, _GPU_REASON = gpu_or_none() if _REASON is None else (None, _REASON)
pytestmark = pytest.mark.skipif(GPU is None, reason=f"needs a CUDA GPU: {_GPU_REASON}")


def run_both(kernel, args, grid, group):
    """(interpreter outputs, outputs of the HIP source run on the NVIDIA GPU) of one launch."""
    cpu = {k: np.array(v, copy=True) for k, v in args.items()}
    run_kernel(kernel, cpu, grid, group, 32)  # the NVIDIA wavefront
    src = emit_source(kernel, HIP_ON_NVIDIA, vectorize=False)
    gpu = {k: np.array(v, copy=True) for k, v in args.items()}
    GPU.run(src, compile_cuda(for_nvidia(src.source), arch=GPU.arch, name=src.entry), gpu, grid, group)
    return cpu, gpu


@pytest.fixture
def rng():
    return np.random.default_rng(7)


def test_conversions_bit_exact(rng):
    x = _f32_samples(rng)
    n = x.size
    for k, out in ((f32_to_i32, np.zeros(n, np.int32)), (f32_to_u32, np.zeros(n, np.uint32))):
        cpu, gpu = run_both(k.variant(None).kernel, {"x": x, "out": out}, (n,), (256,))
        assert_bits_equal(cpu["out"], gpu["out"], k.__name__)
    for dt in (iron.f16, iron.bf16):
        cpu, gpu = run_both(narrow.variant(dt).kernel, {"x": x, "out": np.zeros(n, dt.np_dtype)}, (n,), (256,))
        assert_bits_equal(cpu["out"], gpu["out"], f"f32 -> {dt}")
        every = np.arange(1 << 16, dtype=np.uint16).view(dt.np_dtype)
        cpu, gpu = run_both(widen.variant(dt).kernel, {"x": every, "out": np.zeros(every.size, np.float32)},
                            (every.size,), (256,))
        assert_bits_equal(cpu["out"], gpu["out"], f"{dt} -> f32")


@pytest.mark.parametrize("n", [4096, 1000])
def test_simd_kernel_matches_interpreter(rng, n):
    """warp_tile: shuffles and reductions over the wavefront, including a partial last group."""
    x = rng.standard_normal(n).astype(np.float32)
    args = {"x": x, "out": np.zeros(n, np.float32), "total": np.zeros(1, np.uint32)}
    cpu, gpu = run_both(K.warp_tile.variant(iron.f32, (256,)).kernel, args, (n,), (256,))
    # out[i] reads tile[255 - tid]; in a partial last group the slots past its last thread are never written, so
    # those outputs are undefined (the interpreter's poisoned shared memory gives NaN there). It also reads v from
    # lane + 1 (left), lane ^ 1 (pair) and lane 0: from a lane past the grid (it has left) that is undefined too.
    i = np.arange(n)
    lane = i % 32
    written = (i - i % 256) + 255 - i % 256 < n
    defined = written & ((i - lane + (lane + 1) % 32) < n) & ((i - lane + (lane ^ 1)) < n)
    assert np.isnan(cpu["out"][~written]).all()
    np.testing.assert_allclose(gpu["out"][defined], cpu["out"][defined], rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(gpu["total"], cpu["total"])
