"""Shared arrays sized at launch on Vulkan (issue 15): ``shared(dtype, n)`` with ``n: int`` a kernel parameter is a
Workgroup array whose length is a specialization constant; the runtime builds one pipeline per group size and
lengths, and refuses a length below 1 or a group past the device's shared memory before anything runs."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

import iron
from iron import Tensor, barrier, f32, group_id, i32, kernel, local_id, shared
from iron.codegen.spirv import disassemble, emit_spirv, validate

needs_spirv_val = pytest.mark.skipif(shutil.which("spirv-val") is None, reason="spirv-val is not on PATH")


@pytest.fixture
def vulkan(vk_backend, monkeypatch) -> str:
    """The backend name, served by the session's backend (its context is the one the tests look into)."""
    import iron.runtime as rt

    monkeypatch.setitem(rt._INSTANCES, "vulkan", vk_backend)
    return "vulkan"


@kernel
def rev(x: Tensor[f32], out: Tensor[f32], n: int):
    buf = shared(f32, n)
    i = local_id(0)
    g = group_id(0)
    buf[i] = x[g * n + i]
    barrier()
    out[g * n + i] = buf[n - 1 - i]


@kernel
def two_lengths(x: Tensor[f32], k: Tensor[i32], out: Tensor[f32], kout: Tensor[i32], n: int, m: int):
    """An f32 array of n and an i32 array of m <= n elements (spec ids 3 and 4), each reversed per group."""
    a = shared(f32, n)
    b = shared(i32, m)
    i = local_id(0)
    g = group_id(0)
    a[i] = x[g * n + i]
    if i < m:
        b[i] = k[g * m + i]
    barrier()
    out[g * n + i] = a[n - 1 - i] * 2.0
    if i < m:
        kout[g * m + i] = b[m - 1 - i] + 1


@kernel
def beside_static(x: Tensor[f32], out: Tensor[f32], n: int):
    """A run-time array beside a static one of 32 elements."""
    table = shared(f32, 32)
    buf = shared(f32, n)
    i = local_id(0)
    g = group_id(0)
    if i < 32:
        table[i] = i * 0.5
    buf[i] = x[g * n + i]
    barrier()
    out[g * n + i] = buf[n - 1 - i] + table[i % 32]


@kernel
def rev_words(x: Tensor[f32], out: Tensor[f32], n: int):
    """Filled by 16-byte vector stores: the array is declared as ceil(n / 4) uvec4 words (a spec constant op)."""
    buf = shared(f32, n)
    i = local_id(0)
    g = group_id(0)
    iron.vstore(buf, 4 * i, iron.vload(x, g * n + 4 * i, 4))
    barrier()
    for k in iron.static_range(4):
        j = 4 * i + k
        out[g * n + j] = buf[n - 1 - j]


@kernel
def rev_part(x: Tensor[f32], out: Tensor[f32], n: int):
    """``rev`` on the first n threads of each group."""
    buf = shared(f32, n)
    i = local_id(0)
    g = group_id(0)
    if i < n:
        buf[i] = x[g * n + i]
    barrier()
    if i < n:
        out[g * n + i] = buf[n - 1 - i]


@kernel
def paired_tiles(A: Tensor[iron.f16], B: Tensor[iron.f16], C: Tensor[f32], K: int, S: int):
    """One 16 x 16 tile of C = A @ B by one SIMD group through shared tiles of S halves (S = 256 at launch): 16-byte
    copies fill them, so cooperative matrices read them as halves two to a 32-bit word (codegen/spirv/pairs.py)."""
    FM, FN, FK = iron.mma_shape(iron.f16)
    sa = shared(iron.f16, S)
    sb = shared(iron.f16, S)
    lane = iron.simd_lane()
    acc = iron.frag_acc()
    for k in range(0, K, FK):
        for v in range(lane, FM * 2, iron.simd_size()):  # two 8-half vectors a row
            r = v // 2
            c = (v % 2) * 8
            iron.async_copy(sa, r * FK + c, A, r * K + k + c, 8)
            iron.async_copy(sb, r * FN + c, B, (k + r) * FN + c, 8)
        iron.async_commit()
        iron.async_wait(0)
        barrier()
        acc = iron.mma(iron.frag_a(sa, 0, FK), iron.frag_b(sb, 0, FN), acc)
        barrier()
    iron.frag_store(C, 0, FN, acc)


def _reversed(x: np.ndarray, n: int) -> np.ndarray:
    return x.reshape(-1, n)[:, ::-1].reshape(-1)


def _limit(be) -> int:
    return int(be.context().limits.maxComputeSharedMemorySize)


def test_reverse_at_several_lengths_builds_a_pipeline_each(vulkan, vk_backend):
    groups = 4
    for n in (64, 128, 256, 64):
        x = np.arange(groups * n, dtype=np.float32)
        out = np.full_like(x, np.nan)
        rev[groups * n, n](x, out, n, backend=vulkan)
        assert np.array_equal(out, _reversed(x, n)), n
    spk = vk_backend._device_module(rev.variant(f32), (groups * 64, 1, 1))
    assert spk.length_spec_ids == {"n": 3} and spk.shared_bytes == 0
    keys = set(vk_backend.context().program(spk).pipelines)
    assert {(64, 1, 1, 64), (128, 1, 1, 128), (256, 1, 1, 256)} <= keys


def test_two_run_time_arrays_of_different_dtypes(vulkan, rng):
    for n, m in ((64, 16), (32, 32), (128, 8)):
        groups = 3
        x = rng.standard_normal(groups * n).astype(np.float32)
        k = rng.integers(-1000, 1000, groups * m).astype(np.int32)
        out, kout = np.full_like(x, np.nan), np.full(groups * m, -7, np.int32)
        two_lengths[groups * n, n](x, k, out, kout, n, m, backend=vulkan)
        assert np.array_equal(out, _reversed(x, n) * 2), (n, m)
        assert np.array_equal(kout, _reversed(k, m) + 1), (n, m)


def test_run_time_array_beside_a_static_one(vulkan, vk_backend, rng):
    for n in (32, 96):
        x = rng.standard_normal(2 * n).astype(np.float32)
        out = np.full_like(x, np.nan)
        beside_static[2 * n, n](x, out, n, backend=vulkan)
        table = (np.arange(n) % 32 * 0.5).astype(np.float32)
        assert np.array_equal(out, _reversed(x, n) + np.tile(table, 2)), n
    # the static array counts against the limit too: 128 bytes + 4 * n
    limit = _limit(vk_backend)
    n = (limit - 128) // 4 + 1
    x = np.zeros(64, np.float32)
    out = np.full_like(x, np.nan)
    with pytest.raises(iron.LaunchError, match=rf"needs {128 + 4 * n} bytes of shared memory with n={n}; .* at most "
                                               rf"{limit}"):
        beside_static[64, 64](x, out, n, backend=vulkan)
    assert np.isnan(out).all()


def test_length_past_the_shared_memory_limit_is_refused(vulkan, vk_backend):
    limit = _limit(vk_backend)
    n = limit // 4 + 1
    x = np.zeros(4 * 64, np.float32)
    out = np.full_like(x, np.nan)
    with pytest.raises(iron.LaunchError) as e:
        rev[4 * 64, 64](x, out, n, backend=vulkan)
    assert f"needs {4 * n} bytes of shared memory with n={n}" in e.value.message
    assert f"at most {limit}" in e.value.message
    assert np.isnan(out).all()  # refused before anything ran


def test_zero_length_is_refused(vulkan):
    x = np.zeros(64, np.float32)
    out = np.full_like(x, np.nan)
    for n in (0, -3):
        with pytest.raises(iron.LaunchError, match=rf"shared array 'buf' is sized by 'n', which is {n}; a shared "
                                                   "array needs at least one element"):
            rev[64, 64](x, out, n, backend=vulkan)
    assert np.isnan(out).all()


def test_vector_stores_into_a_run_time_array(vulkan):
    for n in (64, 256):
        x = np.arange(3 * n, dtype=np.float32)
        out = np.full_like(x, np.nan)
        rev_words[3 * n // 4, n // 4](x, out, n, backend=vulkan)
        assert np.array_equal(out, _reversed(x, n)), n


def test_fast_launches_on_device_arrays_key_on_the_length(vulkan, vk_backend, monkeypatch):
    """Repeat launches on Vulkan arrays take the fast launcher, built for the length its pipeline holds: another
    length takes the full path (and gets a launcher of its own), a length seen before its launcher."""
    full = []
    launch = vk_backend.launch
    monkeypatch.setattr(vk_backend, "launch", lambda *a: (full.append(a[2]["n"]), launch(*a)))
    for n in (64, 32, 64, 32, 16):
        xs = np.arange(4 * n, dtype=np.float32) - n
        x = iron.asarray(xs, backend=vulkan)
        out = iron.asarray(np.full_like(xs, np.nan), backend=vulkan)
        rev_part[4 * 64, 64](x, out, n, backend=vulkan)
        assert np.array_equal(out.numpy(), _reversed(xs, n)), n
    assert full == [64, 32, 16]
    sources = [f.source for f in rev_part[4 * 64, 64]._fast[vulkan]]
    assert any("!= 64:" in s for s in sources) and any("!= 32:" in s for s in sources)


def test_recorded_launches_keep_their_lengths(vulkan, rng):
    """A graph of launches at two lengths replays each on its own pipeline."""
    xs = rng.standard_normal(4 * 64).astype(np.float32)
    x = iron.asarray(xs, backend=vulkan)
    outs = [iron.asarray(np.full_like(xs, np.nan), backend=vulkan) for _ in range(2)]
    with iron.graph(vulkan) as g:
        rev_part[4 * 64, 64](x, outs[0], 64)
        rev_part[4 * 64, 64](x, outs[1], 16)
    assert np.isnan(outs[0].numpy()).all()  # recorded, not run
    g.launch()
    iron.synchronize(vulkan)
    assert np.array_equal(outs[0].numpy(), _reversed(xs, 64))
    got = outs[1].numpy()
    assert np.array_equal(got[:64], _reversed(xs[:64], 16)) and np.isnan(got[64:]).all()


@needs_spirv_val
def test_halves_two_to_a_word_in_a_run_time_array(vulkan, vk_backend, monkeypatch, rng):
    """The pairs declaration of a run-time sized array (ceil(S / 2) words): the emulated cooperative matrices read it
    (SPIR-V 1.6 under the Vulkan memory model, validated for vulkan1.3) and the product is right."""
    spk = emit_spirv(paired_tiles.variant(None).kernel, coopmat=frozenset({"f16"}), coopmat_emulation=True,
                     simd_width=8)
    assert validate(spk, "vulkan1.3") is None, validate(spk, "vulkan1.3")
    assert {(s.item_bytes, s.multiple) for s in spk.shared_lengths} == {(2, 2)} and spk.length_spec_ids == {"S": 3}
    monkeypatch.setenv("IRON_VULKAN_COOPMAT", "emulate")
    ran = vk_backend._device_module(paired_tiles.variant(None))
    assert ran.fragments == "emulated" and len(ran.shared_lengths) == 2, ran.fragments
    k = 32
    a = rng.standard_normal((16, k)).astype(np.float16)
    b = rng.standard_normal((k, 16)).astype(np.float16)
    c = np.full(256, np.nan, np.float32)
    width = vk_backend.simd_width()
    paired_tiles[width, width](a.reshape(-1), b.reshape(-1), c, k, 256, backend=vulkan)
    want = a.astype(np.float64) @ b.astype(np.float64)
    assert np.allclose(c.reshape(16, 16), want, rtol=1e-5, atol=1e-4)


@needs_spirv_val
@pytest.mark.parametrize("k", [rev, two_lengths, beside_static, rev_words], ids=lambda k: k.__name__)
def test_modules_validate_and_record_their_spec_ids(k):
    spk = emit_spirv(k.variant(f32).kernel)
    assert validate(spk) is None, validate(spk)
    text = disassemble(spk)
    assert "SpecId 3" in text
    want = {"rev": {"n": 3}, "two_lengths": {"n": 3, "m": 4}, "beside_static": {"n": 3}, "rev_words": {"n": 3}}
    assert spk.length_spec_ids == want[k.__name__]
    assert spk.shared_bytes == (128 if k is beside_static else 0)
    sizes = {s.param: s.nbytes(10) for s in spk.shared_lengths}
    assert sizes == {"rev": {"n": 40}, "two_lengths": {"n": 40, "m": 40}, "beside_static": {"n": 40},
                     "rev_words": {"n": 48}}[k.__name__]  # 10 elements as 3 words of 16 bytes
    if k is rev_words:
        assert "OpSpecConstantOp" in text
