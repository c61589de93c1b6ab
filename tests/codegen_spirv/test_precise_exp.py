"""exp, exp2 and tanh on Vulkan (``codegen/spirv/precise_exp.py``) against the correctly rounded float64 NumPy
results: within 2 ulp for normal results, one subnormal ulp for subnormal ones, and exact at the special values.
GLSL.std.450 Exp/Exp2/Tanh, which the emitter used before, fail this on lavapipe (tanh(1e-8) gave 3e-8, exp(84.56)
was 64 ulp off, exp(-103) and exp2(-130) flushed to 0). Skipped without a Vulkan device."""

from __future__ import annotations

import numpy as np
import pytest

from ..frontend import kernels as K

try:
    from iron.runtime import get_backend, unavailable_reason

    _REASON = unavailable_reason("vulkan")
    _INFO = get_backend("vulkan").info() if _REASON is None else {}
except Exception as e:  # no loader, no device
    _REASON, _INFO = str(e), {}

pytestmark = pytest.mark.skipif(_REASON is not None, reason=f"no Vulkan device: {_REASON}")
ORACLES = {"exp": np.exp, "exp2": np.exp2, "tanh": np.tanh}
MAX_ULP = 2  # docs/backends/vulkan.md; lavapipe measured 1
TINY = np.float32(2.0**-126)
#: NVIDIA's driver (no DenormPreserve) flushes f32 subnormal results to 0; lavapipe keeps them (docs/backends/vulkan.md)
FLUSHES = "denorm_preserve" not in _INFO.get("features", ()) and "llvmpipe" not in str(_INFO.get("name"))


def run(op: str, x: np.ndarray) -> np.ndarray:
    x = np.ascontiguousarray(x, dtype=np.float32)
    out = np.full(x.size, np.float32(np.nan))  # poisoned: a lane left unwritten stays NaN
    K.unary_math[x.size](x, out, K.UNARY_OP_CODE[op], backend="vulkan")
    return out


def ulps(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """Distance in f32 steps (through zero, counting subnormals) between finite or infinite f32 arrays."""
    def ordered(v: np.ndarray) -> np.ndarray:
        i = v.view(np.int32).astype(np.int64)
        return np.where(i < 0, -(i & 0x7FFFFFFF), i)

    return np.abs(ordered(got) - ordered(want))


def check(op: str, x: np.ndarray, got: np.ndarray) -> None:
    with np.errstate(over="ignore", invalid="ignore"):
        want = ORACLES[op](x.astype(np.float64)).astype(np.float32)
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan), f"{op}: NaN where none is due at x = {x[np.isnan(got) != nan][:5]}"
    got, want, x = got[~nan], want[~nan], x[~nan]
    err = ulps(got, want)
    sub = np.abs(want.astype(np.float64)) < TINY
    if FLUSHES:
        err = np.where(sub & (got == 0), 0, err)
    bound = np.where(sub, 1, MAX_ULP)
    bad = np.flatnonzero(err > bound)
    assert bad.size == 0, (f"{op}: {bad.size} results off by more than {MAX_ULP} ulp (1 subnormal ulp), worst "
                           f"x = {x[bad[np.argmax(err[bad])]]!r}: got {got[bad[np.argmax(err[bad])]]!r}, "
                           f"want {want[bad[np.argmax(err[bad])]]!r}, {err.max()} ulp")


def log_uniform(rng: np.random.Generator, lo: float, hi: float, n: int) -> np.ndarray:
    """Magnitudes spread evenly over the f32 bit patterns in [lo, hi], with random signs."""
    a, b = np.array([lo, hi], dtype=np.float32).view(np.int32)
    mag = rng.integers(a, b, n, dtype=np.int32).view(np.float32)
    return mag * rng.choice(np.array([-1.0, 1.0], dtype=np.float32), n)


@pytest.mark.parametrize(("op", "lo", "hi"), [("exp", -105.0, 89.0), ("exp2", -152.0, 129.0), ("tanh", -12.0, 12.0)])
def test_random_arguments_within_two_ulp(op, lo, hi, rng):
    n = 200_000
    x = np.concatenate([rng.uniform(lo, hi, n), rng.uniform(-1.0, 1.0, n // 4),
                        log_uniform(rng, 1e-38, max(-lo, hi), n)]).astype(np.float32)
    check(op, x, run(op, x))


EDGES = {
    "tanh": [1.136e-6, -1.136e-6, 1e-30, -1e-30, 1e-8, 1e-3, 0.5499999, 0.55, 0.5500001, -0.55, 0.8, 9.0, 9.02,
             -9.0, 10.0, 20.0, -20.0, 1e30, 3e38, 1e-45, 1e-40],
    "exp": [80.0, -80.0, 84.56183, 88.7, 88.72283, 88.7228394, 88.72284, 88.73, 89.0, 1000.0, -87.3, -87.33655,
            -100.0, -103.0, -103.97, -103.98, -104.0, -200.0, 0.34657359, -0.34657359, 1e-30, -1e-30, 1e-8],
    "exp2": [28.925436, 100.5, 127.0, 127.99999, 128.0, 200.0, -126.0, -126.5, -130.0, -149.0, -149.5, -150.0,
             -150.1, -151.0, -300.0, 0.5, -0.5, 1e-30],
}


@pytest.mark.parametrize("op", sorted(EDGES))
def test_edge_points(op):
    x = np.array(EDGES[op] + [0.0, -0.0, np.inf, -np.inf, np.nan], dtype=np.float32)
    got = run(op, x)
    check(op, x, got)
    specials = dict(zip(["+0", "-0", "+inf", "-inf"], got[-5:-1]))
    want = {"exp": [1.0, 1.0, np.inf, 0.0], "exp2": [1.0, 1.0, np.inf, 0.0], "tanh": [0.0, -0.0, 1.0, -1.0]}[op]
    assert list(specials.values()) == want, f"{op} of +-0, +-inf: {specials}"
    if op == "tanh":
        assert np.signbit(specials["-0"]) and not np.signbit(specials["+0"]), "tanh keeps the sign of zero"


def test_overflow_and_underflow_thresholds():
    """The largest f32 with a finite exp, and the first past it; 2^-150 rounds (to even) to 0, 2^-149 does not."""
    got = run("exp", np.array([88.72283172607422, np.nextafter(np.float32(88.72283172607422), np.float32(100))],
                              dtype=np.float32))
    assert np.isfinite(got[0]) and got[1] == np.inf, got
    got = run("exp2", np.array([-149.0, -150.0, -152.0], dtype=np.float32))
    if not FLUSHES:
        assert got[0] == np.float32(2.0**-149), got
    assert got[1] == 0.0 and got[2] == 0.0, got
