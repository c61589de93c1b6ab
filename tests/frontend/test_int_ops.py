"""Issue 15 point 3: umulhi, popcount, clz, ctz on i32/u32, dp4a, and bitcast between f32/i32/u32, on every backend of
the ``backend`` fixture, against oracles in Python's unbounded ints (outputs poisoned first); clz(0) = ctz(0) = 32.
Refusals (floats, 16-bit bitcasts) are located compile errors."""

from __future__ import annotations

import numpy as np
import pytest

from iron import CompileError

from .int_kernels import bitcasts, dot4, int_bits_i32, int_bits_u32
from .sources import module_from_source
from .test_kernels import int_poisoned

N = 1000
MASK = 2**32 - 1


def _words(rng, dtype) -> np.ndarray:
    """Random words of every bit length, with the edge values (0, 1, -1 / max, INT_MIN, powers of two) first."""
    info = np.iinfo(dtype)
    edges = [0, 1, info.max, info.min, 2, 1 << 30, (1 << 31) if dtype == np.uint32 else -(1 << 31) + 1]
    edges += [-1] if dtype == np.int32 else []
    width = rng.integers(0, 33, N)
    raw = rng.integers(0, 2**32, N, dtype=np.uint64) & ((np.uint64(1) << width.astype(np.uint64)) - np.uint64(1))
    out = raw.astype(np.uint32).view(dtype).copy()
    out[: len(edges)] = edges
    return out


def _oracle(a: np.ndarray, b: np.ndarray, signed: bool) -> list[np.ndarray]:
    ints = [int(x) for x in a]
    hi = [(x * int(y)) >> 32 for x, y in zip(ints, b)]  # Python's >> floors: the signed high word
    words = [x & MASK for x in ints]
    pc = [bin(w).count("1") for w in words]
    lz = [32 - w.bit_length() for w in words]
    tz = [32 if w == 0 else (w & -w).bit_length() - 1 for w in words]
    dtype = a.dtype
    return [np.array([h & MASK for h in hi], np.uint64).astype(np.uint32).view(dtype)] + \
        [np.array(v, np.int64).astype(dtype) for v in (pc, lz, tz)]


@pytest.mark.parametrize("dtype", [np.int32, np.uint32])
def test_bit_ops_match_python_ints(backend, rng, dtype):
    a, b = _words(rng, dtype), rng.permutation(_words(rng, dtype))
    outs = [int_poisoned(N, dtype) for _ in range(4)]
    if dtype == np.int32:
        folded = int_poisoned(2)
        int_bits_i32[N](a, b, *outs, folded, backend=backend)
        assert folded.tolist() == [32 + 100 * 32, 32 + 100 * ((-7 * 2**30) >> 32)]
    else:
        int_bits_u32[N](a, b, *outs, backend=backend)
    for name, got, want in zip(("umulhi", "popcount", "clz", "ctz"), outs, _oracle(a, b, dtype == np.int32)):
        np.testing.assert_array_equal(got, want, err_msg=name)


def _wrap32(v: int) -> int:
    return (v + 2**31) % 2**32 - 2**31


def _dp4a(a: int, b: int, c: int) -> int:
    """c + the dot product of the signed bytes, in Python's ints, wrapped to i32 (independent of the kernel)."""
    sbyte = [lambda w, k=k: ((w >> (8 * k)) & 0xFF) - (256 if (w >> (8 * k)) & 0x80 else 0) for k in range(4)]
    return _wrap32(c + sum(f(a & MASK) * f(b & MASK) for f in sbyte))


def test_dp4a_matches_python_ints(backend, rng):
    """Random words, the extreme bytes (0x80 * 0x80 four times past INT_MAX wraps), u32 operands as their bits."""
    a, b = _words(rng, np.int32), rng.permutation(_words(rng, np.uint32))
    a[:3], b[:3] = [-2139062144, 0x7F7F7F7F, -1], [0x80808080, 0x81818181, 0xFFFFFFFF]  # 0x80808080 as i32
    c = rng.integers(-(2**31), 2**31, N, dtype=np.int64).astype(np.int32)
    c[0] = 2**31 - 1
    out, folded = int_poisoned(N), int_poisoned(3)
    dot4[N](a, b, c, out, folded, backend=backend)
    want = [_dp4a(int(x), int(y), int(z)) for x, y, z in zip(a, b, c)]
    np.testing.assert_array_equal(out, np.array(want, np.int64).astype(np.int32))
    assert folded.tolist() == [_dp4a(0x7F80FF01, -1, 10), _dp4a(0x01020304, 0xFFFFFFFF, 2**31 - 1),
                               _dp4a(0x80808080, 0x80808080, 2**31 - 1)]


def test_bitcast_is_bit_exact(backend, rng):
    bits = rng.integers(0, 2**32, N, dtype=np.uint64).astype(np.uint32)
    exponent = (bits >> 23) & 0xFF
    bits = np.where((exponent == 0) | (exponent == 0xFF), bits ^ (np.uint32(0x40) << 23), bits).astype(np.uint32)
    bits[:4] = [0x00000000, 0x80000000, 0x7F800000, 0xFF800000]  # +-0, +-inf: finite or not, bits go through
    x = bits.view(np.float32)
    u = rng.permutation(bits)
    as_i, as_u = int_poisoned(N), int_poisoned(N, np.uint32)
    as_f, flipped = np.full(N, np.nan, np.float32), np.full(N, np.nan, np.float32)
    bitcasts[N](x, u, as_i, as_u, as_f, flipped, backend=backend)
    np.testing.assert_array_equal(as_i, bits.view(np.int32))
    np.testing.assert_array_equal(as_u, bits)
    np.testing.assert_array_equal(as_f.view(np.uint32), u)
    np.testing.assert_array_equal(flipped.view(np.uint32), bits ^ np.uint32(0x80000000))


BAD = '''import iron
from iron import Tensor


@iron.kernel
def k(x: Tensor[iron.f32], h: Tensor[iron.f16], out: Tensor[iron.i32]):
    i = iron.program_id(0)
    out[i] = EXPR
'''


@pytest.mark.parametrize("expr, message", [
    ("iron.popcount(x[i])", r"popcount\(\) needs i32 or u32 operands, got"),
    ("iron.umulhi(1, x[i])", r"umulhi\(\) needs i32 or u32 operands"),
    ("iron.clz(i > 0)", r"clz\(\) needs i32 or u32 operands"),
    ("iron.dp4a(i, x[i], 0)", r"dp4a\(\) needs i32 or u32 operands"),
    ("iron.bitcast(h[i], iron.i32)", "bitcast from f16 to i32 is not supported: Iron has no 16-bit integer"),
    ("iron.cast(iron.bitcast(x[i], iron.bf16), iron.i32)", "bitcast from f32 to bf16 is not supported"),
])
def test_bad_operands_are_located_errors(tmp_path, expr, message):
    mod = module_from_source(tmp_path, "bad_bits", BAD.replace("EXPR", expr))
    with pytest.raises(CompileError, match=message) as e:
        mod.k.variant(None, ())
    assert "bad_bits.py:8" in str(e.value)
