"""Every std kernel, in every dtype and host shape, on every backend present, against its float64 oracle; outputs
start poisoned with NaN so an element the kernel never writes fails."""

from __future__ import annotations

import numpy as np
import pytest

from iron.harness.checking import compare
from iron.ir import types as t
from iron.std import load_all

ENTRIES = {e.name: e for e in load_all()}
CASES = [(name, dtype) for name, e in ENTRIES.items() for dtype in e.dtypes]


def test_the_issue_kernels_are_registered():
    for name in ("std/unary/exp", "std/binary/add", "std/softmax/row", "std/norm/rms_norm", "std/gemv/gemv"):
        entry = ENTRIES[name]
        assert entry.benched and entry.tested
        assert entry.reference is not None and entry.torch_reference is not None and "mlx" in entry.references
        assert set(entry.tolerance) >= {"f32", "f16", "bf16"}
        assert entry.count_bytes(entry.shapes[0], 4) > 0 and entry.count_flops(entry.shapes[0]) > 0
        assert entry.device_shapes


@pytest.mark.parametrize("name,dtype", CASES)
def test_matches_oracle(name, dtype, backend, rng):
    entry = ENTRIES[name]
    np_dtype = t.SCALAR_TYPES[dtype].np_dtype
    for shape in entry.shapes:
        arrays = entry.make(shape, np_dtype, rng)
        assert np.isnan(arrays[entry.output].astype(np.float32)).all()
        entry.launch(arrays, backend)
        result = compare(arrays[entry.output], entry.oracle(arrays), entry.tolerance[dtype])
        assert result.ok, f"{name} {dtype} {shape} on {backend}: {result.describe()}"


@pytest.mark.parametrize("name", list(ENTRIES))
def test_numpy_reference_agrees_with_oracle(name, rng):
    entry = ENTRIES[name]
    arrays = entry.make(entry.shapes[0], np.float32, rng)
    got = entry.reference(arrays)
    assert compare(got, entry.oracle(arrays), entry.tolerance["f32"]).ok


@pytest.mark.parametrize("width", [8, 32, 64])
def test_reductions_read_simd_size(width, monkeypatch, rng):
    """rms_norm and gemv reduce across SIMD groups: right for every width (lavapipe 8, NVIDIA 32, AMD 64)."""
    monkeypatch.setenv("IRON_CPU_SIMD_WIDTH", str(width))
    for name in ("std/norm/rms_norm", "std/gemv/gemv"):
        entry = ENTRIES[name]
        arrays = entry.make((5, 300), np.float32, rng)
        entry.launch(arrays, "cpu")
        result = compare(arrays[entry.output], entry.oracle(arrays), entry.tolerance["f32"])
        assert result.ok, f"{name} at SIMD width {width}: {result.describe()}"
