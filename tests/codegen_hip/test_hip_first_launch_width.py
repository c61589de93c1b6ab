"""``HipBackend.simd_width()`` is the open device's wavefront even before the first launch: std/gemm sizes its groups
(WM * WN * simd_size()) before launching, and on an RDNA (wave32) GPU the default target's 64 would give groups of
twice the size the kernel's SIMD-group split assumes (seen as an out-of-bounds shared-memory read in the fake)."""

from __future__ import annotations

import numpy as np
import pytest

from iron.codegen import hiprtc
from iron.harness.registry import selected
from iron.ir.types import SCALAR_TYPES

_NO_HIPRTC = hiprtc.unavailable_reason()


def test_simd_width_is_the_devices_before_any_launch(install):  # noqa: F811
    _, wave32 = install(arch="gfx1030", warp_size=32)
    assert wave32.simd_width() == 32
    _, wave64 = install(arch="gfx90a", warp_size=64)
    assert wave64.simd_width() == 64


@pytest.mark.skipif(_NO_HIPRTC is not None, reason=f"hipRTC unavailable: {_NO_HIPRTC}")
def test_std_gemm_as_the_first_launch_on_a_wave32_device(install, monkeypatch):  # noqa: F811
    monkeypatch.setenv("IRON_CPU_SIMD_WIDTH", "32")
    fake, backend = install(arch="gfx1030", warp_size=32)
    compile_for = backend.compile

    def compile_and_remember(variant, target=None):  # the fake runs what it loads in the interpreter
        code = compile_for(variant, target)
        fake.programs[code] = variant
        return code

    monkeypatch.setattr(backend, "compile", compile_and_remember)
    (entry,) = [r for r in selected(tested=True) if r.name == "std/gemm/gemm"]
    arrays = entry.make(min(entry.shapes, key=np.prod), SCALAR_TYPES["f16"].np_dtype, np.random.default_rng())
    on_cpu = {k: v.copy() if isinstance(v, np.ndarray) else v for k, v in arrays.items()}
    entry.launch(arrays, "hip")
    entry.launch(on_cpu, "cpu")
    assert fake.launches and fake.launches[0].threads[0] % 32 == 0
    assert not np.isnan(on_cpu[entry.output].astype(np.float32)).any()
    np.testing.assert_array_equal(arrays[entry.output], on_cpu[entry.output])
