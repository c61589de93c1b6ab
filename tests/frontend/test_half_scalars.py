"""Issue 15 point 3: half-precision scalar parameters (``h: iron.f16``, ``b: iron.bf16``) passed as Python floats are
rounded once to the dtype at launch (to nearest even, straight from the float64: never through f32, which can round
twice) on every backend of the ``backend`` fixture; the oracle rounds the float64's bits itself."""

from __future__ import annotations

import numpy as np
import pytest

import iron

from .sources import module_from_source

KERNEL = '''import iron
from iron import Tensor


@iron.kernel
def k(out: Tensor[iron.f32], h: iron.f16, b: iron.bf16, scale: float):
    i = iron.program_id(0)
    out[i] = h * scale
    out[i + 1] = b * scale
    out[i + 2] = iron.cast(h, iron.f32) + iron.cast(b, iron.f32)
'''


def _bf16(x: float) -> float:
    """float64 -> bfloat16, to nearest even, from the float64's bits (normal range)."""
    bits = int(np.float64(x).view(np.uint64))
    keep = (bits >> 45) + (((bits >> 44) & 1) and ((bits & (2**44 - 1)) != 0 or (bits >> 45) & 1))
    return float(np.uint64(keep << 45).view(np.float64))


def test_half_scalars_round_once_at_launch(tmp_path, backend, rng):
    mod = module_from_source(tmp_path, "half_scalars", KERNEL)
    values = [1 + 2**-8 + 2**-30, 1 + 2**-11 + 2**-40, 0.1, -3.0e-3, *rng.uniform(-1000, 1000, 4)]
    for x in values:
        out = np.full(3, np.nan, np.float32)
        mod.k[1](out, x, x, 1.0, backend=backend)
        h, b = float(np.float16(x)), _bf16(x)  # NumPy rounds float64 -> float16 directly
        assert out.tolist() == [h, b, float(np.float32(h + b))], x
    # the oracles round once: through f32 both of these would be 1.0 (a tie, then even)
    assert _bf16(1 + 2**-8 + 2**-30) == 1 + 2**-7 and float(np.float16(1 + 2**-11 + 2**-40)) == 1 + 2**-10


def test_half_scalars_reject_non_numbers(tmp_path):
    mod = module_from_source(tmp_path, "half_scalars_bad", KERNEL)
    with pytest.raises(iron.LaunchError, match=r"argument 'h' must be a number \(f16\)"):
        mod.k[1](np.zeros(3, np.float32), "x", 1.0, 1.0, backend="cpu")
