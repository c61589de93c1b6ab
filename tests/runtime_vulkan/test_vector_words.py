"""16-byte vector accesses run on the Vulkan device (lavapipe in CI) and give exact results (issue 14 point 2,
codegen/spirv/words.py): a vector store read back element by element in the same invocation, integer words, async
copies into shared word arrays beside element accesses, a shared array moved by vectors and updated by atomics.
The modules' structure: tests/codegen_spirv/test_vector_words.py. Outputs poisoned first, NumPy oracles."""

from __future__ import annotations

import numpy as np
import pytest

from ..codegen_spirv import vector_kernels as VK
from ..frontend.test_kernels import as_dtype, assert_exact, f64, int_poisoned, poisoned

DTYPES = ["f32", "f16", "bf16"]


@pytest.mark.parametrize("dtype", DTYPES)
def test_vector_store_then_element_reads(vk_backend, dtype, rng):
    vec = 4 if dtype == "f32" else 8
    n = 8 * 64 * vec + vec * 3  # a partial last group
    x = as_dtype(rng.standard_normal(n) * 8, dtype)
    out, back = poisoned(n, dtype), poisoned(n, dtype)
    VK.vstore_then_read[n // vec](x, out, back, vec, backend="vulkan")
    want = as_dtype(f64(x) + 1.0, dtype)  # x + 1 in f32, rounded once to the dtype
    assert_exact(out, f64(want), "out (vector store)")
    reversed_out = f64(want).reshape(-1, vec)[:, ::-1].reshape(-1)
    assert_exact(back, f64(as_dtype(reversed_out * 2.0, dtype)), "back (element reads after the vector store)")


def test_u32_words(vk_backend, rng):
    n = 4 * 300
    x = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    out = int_poisoned(n, np.uint32)
    VK.u32_words[n // 4](x, out, backend="vulkan")
    assert_exact(out, ~x.reshape(-1, 4)[:, ::-1].reshape(-1), "complemented, reversed words")


@pytest.mark.parametrize("dtype", DTYPES)
def test_async_copies_into_shared_words(vk_backend, dtype, rng):
    vec, block, groups = (4 if dtype == "f32" else 8), 32, 3
    n = groups * block * vec
    x = as_dtype(rng.standard_normal(n), dtype)
    out = poisoned(n, dtype)
    VK.shared_words[groups * block, block](x, out, vec, block, backend="vulkan")
    neighbour = np.roll(f64(x).reshape(groups, block, vec), -1, axis=1).reshape(-1)
    assert_exact(out, f64(as_dtype(neighbour + 0.5, dtype)), "neighbour's vector + 0.5")


def test_shared_words_beside_atomics(vk_backend, rng):
    n = 4 * 16 * 5
    x = rng.integers(-1000, 1000, n).astype(np.int32)
    out = int_poisoned(n, np.int32)
    VK.shared_counters[n // 4, 16](x, out, backend="vulkan")
    want = x.reshape(-1, 4).copy()
    want[:, 0] += 1
    assert_exact(out, want.reshape(-1), "counters")
