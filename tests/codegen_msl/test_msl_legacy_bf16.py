"""MSL 3.0 (``IRON_MSL_VERSION=3.0``): no ``bfloat``, bf16 as ``ushort`` bits with written-out conversions. The
bf16 variants must give bit-identical results to MSL 3.1's ``bfloat`` on the CPU model, and pass the clang check."""

from __future__ import annotations

import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import iron
from iron.codegen import emit_msl
from iron.codegen.msl_model import find_clang, syntax_check
from iron.runtime import unavailable_reason

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from frontend import kernels as K  # noqa: E402

BF16 = ml_dtypes.bfloat16
CASES = [  # (kernel, constexprs, make the arguments from an rng)
    (K.iron_exp, {}, lambda r: [r.standard_normal(300).astype(BF16), np.full(300, np.nan, BF16)]),
    (K.cast_roundtrip, {}, lambda r: [(r.standard_normal(300) * 1e3).astype(BF16), np.zeros(300, np.int32),
                                      np.zeros(300, np.uint32), np.full(300, np.nan, BF16)]),
    (K.block_sum, {"BLOCK": 64}, lambda r: [r.standard_normal(256).astype(BF16), np.full(4, np.nan, BF16)]),
    (K.simd_exchange, {"SHIFT": 1, "MASK": 1}, lambda r: [r.standard_normal(256).astype(BF16)]
     + [np.full(256, np.nan, BF16) for _ in range(3)]),
]


@pytest.mark.parametrize("kernel,constexprs,_", CASES, ids=[c[0].__name__ for c in CASES])
def test_legacy_source_has_no_bfloat_and_passes_clang(kernel, constexprs, _):
    variant = kernel.variant(iron.bf16, tuple(constexprs.values()))
    src = emit_msl(variant.kernel, version="3.0").source
    code = "\n".join(line.split("//")[0] for line in src.splitlines())  # comments may name the type
    assert "bfloat" not in code and "ushort" in code and "// MSL 3.0: bf16 values are ushort bits." in src
    if find_clang() is None:
        pytest.skip("no clang")
    ok, log = syntax_check(src)
    assert ok and "warning" not in log, log


@pytest.mark.skipif(unavailable_reason("msl-cpu") is not None, reason="needs msl-cpu")
@pytest.mark.parametrize("kernel,constexprs,make", CASES, ids=[c[0].__name__ for c in CASES])
def test_legacy_bf16_matches_bfloat_bit_for_bit(kernel, constexprs, make, monkeypatch, rng):
    args = make(rng)
    scalars = list(constexprs.values())
    group = 64 if kernel in (K.block_sum, K.simd_exchange) else 256
    n = args[0].size
    results = {}
    for version in ("3.1", "3.0"):
        monkeypatch.setenv("IRON_MSL_VERSION", version)
        run = [a.copy() for a in args]
        kernel[n, group](*run, *scalars, backend="msl-cpu")
        results[version] = run
    for new, old in zip(results["3.0"], results["3.1"]):
        np.testing.assert_array_equal(new.view(np.uint16) if new.dtype == BF16 else new,
                                      old.view(np.uint16) if old.dtype == BF16 else old)
    assert not any(np.isnan(a.astype(np.float32)).all() for a in results["3.0"][1:] if a.dtype == BF16)


def test_unknown_version_is_refused(monkeypatch):
    monkeypatch.setenv("IRON_MSL_VERSION", "2.4")
    with pytest.raises(iron.LaunchError, match=r"MSL version '2.4' is not one Iron writes; choose 3.1 or 3.0"):
        K.iron_exp[4](np.zeros(4, np.float32), np.zeros(4, np.float32), backend="msl-cpu")
