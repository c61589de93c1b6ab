"""Issue 15, item 6: shared arrays whose length is given at launch — ``shared(dtype, n)`` with ``n`` an ``int``
parameter of the kernel. One compiled kernel serves every length (CUDA/HIP: the dynamic shared buffer sized per
launch; Metal: threadgroup parameters the host sizes; Vulkan: a specialization constant per length; the interpreter:
the value itself). Run on every backend of the ``backend`` fixture against NumPy, outputs poisoned first; bad lengths
are located LaunchErrors raised before anything runs; every compile-only toolchain builds the kernels."""

from __future__ import annotations

import numpy as np
import pytest

import iron
from iron import CompileError, LaunchError

from . import runtime_shared_kernels as K
from .sources import module_from_source

NP = {"f32": np.float32, "f16": np.float16}
PRELUDE = "import iron\nfrom iron import Tensor, f32, local_array, shared\n\n\n@iron.kernel\n"


def _reversed_groups(x: np.ndarray, n: int) -> np.ndarray:
    return x.reshape(-1, n)[:, ::-1].reshape(-1)


@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_one_kernel_many_lengths(backend, dtype, rng):
    """The same kernel at several lengths in one process (and the first again): each launch sized by its value."""
    for n in (32, 64, 128, 32):
        x = rng.standard_normal(3 * n).astype(NP[dtype])
        out = np.full_like(x, np.nan)
        K.reverse_groups[3 * n, n](x, out, n, backend=backend)
        np.testing.assert_array_equal(out, _reversed_groups(x, n))


@pytest.mark.parametrize("n, m", [(64, 5), (32, 32), (128, 1)])
def test_run_time_arrays_beside_a_compile_time_one(backend, n, m, rng):
    x = rng.standard_normal(2 * n).astype(np.float32)
    out = np.full_like(x, np.nan)
    K.mixed[2 * n, n](x, out, n, m, backend=backend)
    i = np.tile(np.arange(n), 2)
    want = _reversed_groups(x, n).astype(np.float64) + (i % m * 3 + 1) + (i % 8) * 0.5
    np.testing.assert_allclose(out, want, rtol=1e-6, atol=1e-6)


def test_zero_length_is_a_located_launch_error(backend):
    x = np.zeros(64, np.float32)
    with pytest.raises(LaunchError, match=r"shared array 'buf'( \(declared at runtime_shared_kernels.py:\d+\))? is "
                                          r"sized by 'n', which is 0; a shared array needs at least one element") as e:
        K.reverse_groups[64, 64](x, np.zeros_like(x), 0, backend=backend)
    assert e.value.loc is not None and e.value.loc.file == __file__  # located at the launch, as LaunchErrors are


def test_length_past_the_device_limit_is_a_launch_error(backend):
    n = 256 * 1024  # 1 MiB of f32: past every backend's limit for a group
    x = np.zeros(64, np.float32)
    out = np.full_like(x, np.nan)
    with pytest.raises(LaunchError, match=r"(would use|needs) \d+ bytes of shared memory with n=262144; .* at most "
                                          r"\d+"):
        K.reverse_groups[64, 64](x, out, n, backend=backend)
    assert np.isnan(out).all()  # nothing ran


def test_ir_shows_the_length_parameter():
    text = K.reverse_groups.ir(iron.f32)
    assert "shared f32 x n : shared<f32 x ?>" in text


@pytest.mark.parametrize("body, message", [
    ("buf = shared(f32, n + 1)", "an int kernel parameter"),
    ("m = n\n    m += 1\n    buf = shared(f32, m)", "an int kernel parameter"),
])
def test_only_a_parameter_sizes_an_array(tmp_path, body, message):
    src = PRELUDE + f"def k(x: Tensor[f32], n: int):\n    {body}\n    buf[0] = x[0]\n"
    mod = module_from_source(tmp_path, f"rts_{abs(hash(body))}", src)
    with pytest.raises(CompileError, match=message):
        mod.k.ir()


def test_local_arrays_stay_compile_time(tmp_path):
    src = PRELUDE + "def k(x: Tensor[f32], n: int):\n    a = local_array(f32, n)\n    a[0] = x[0]\n"
    mod = module_from_source(tmp_path, "rts_local", src)
    with pytest.raises(CompileError, match=r"local_array\(dtype, n\) needs a positive compile-time size"):
        mod.k.ir()


@pytest.mark.parametrize("row_name", ["nvrtc-sm_90", "hiprtc-gfx90a", "hiprtc-gfx1030", "spirv-val",
                                      "clang-metal-model"])
def test_through_the_compile_targets(row_name):
    from ..backends.compile_targets import COMPILE_ROWS

    row = COMPILE_ROWS[row_name]
    reason = row.unavailable_reason()
    if reason:
        pytest.skip(reason)
    variants = {"reverse_groups-f32": K.reverse_groups.variant(iron.f32, ()),
                "reverse_groups-f16": K.reverse_groups.variant(iron.f16, ()),
                "mixed": K.mixed.variant(None, ())}
    emitted = {case: row.emit(v) for case, v in variants.items()}
    results = row.build_all(emitted)
    for case, v in variants.items():
        if isinstance(results[case], Exception):
            raise results[case]
        row.check(case, v, emitted[case], results[case])


def test_cuda_source_sizes_the_dynamic_buffer_per_launch():
    from iron.codegen import emit_cuda

    src = emit_cuda(K.mixed.variant(None, ()).kernel)
    assert src.runtime_shared == (("a", "n", 4), ("b", "m", 4))
    assert "__shared__ __align__(16) float fixed[8];" in src.source  # the compile-time array stays static
    assert src.launch_shared_bytes({"n": 10, "m": 3}) == 48 + 16  # each run-time array 16-byte aligned
