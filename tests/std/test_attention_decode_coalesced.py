"""std/attention_decode's two split kernels, "coalesced" (``attn_decode_split_coalesced``) and "per_thread"
(``attn_decode_split``), against float64 NumPy oracles: ragged lengths (1, a chunk boundary, several splits, one
split), GQA G = 1, 2, 3, 4, 8, D 48, 64 and 128, f32, f16 and bf16, contiguous and paged caches, on every backend;
every configuration GPU autotuning may pick, and the lane sums at every SIMD width, on the interpreter; the launch's
choice; the coalesced kernel's registers (NVRTC). Outputs start poisoned with NaN."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import iron
from iron.codegen import emit_cuda
from iron.codegen.nvrtc import resource_report, unavailable_reason
from iron.harness.registry import InputGen
from iron.runtime import get_backend
from iron.std import attention_decode as Dc
from iron.std.attention_decode_coalesced import attn_decode_split_coalesced

DTYPES = {"f32": np.float32, "f16": np.float16, "bf16": ml_dtypes.bfloat16}


def _data(rng, shape, dtype: str, paged: bool, lens) -> dict:
    gen = InputGen(shape, np.dtype(DTYPES[dtype]), rng)
    d = (Dc._setup_paged if paged else Dc._setup)(gen)
    d["lens"] = np.array(lens, np.int32)
    assert np.isnan(d["out"].astype(np.float32)).all()
    return d


def _launch(d: dict, paged: bool, backend: str, chunk: int | None, path: str | None) -> dict:
    if paged:
        return Dc.launch_decode_paged(d["q"], d["k"], d["v"], d["table"], d["lens"], d["out"], None, backend,
                                      chunk=chunk, path=path)
    return Dc.launch_decode(d["q"], d["k"], d["v"], d["lens"], d["out"], None, backend, chunk=chunk, path=path)


def _check(d: dict, paged: bool, dtype: str) -> None:
    want = (Dc.oracle_paged if paged else Dc.oracle)(d)
    got = d["out"].astype(np.float64)
    rtol, atol = Dc._TOL[dtype]
    assert not np.isnan(got).any(), "an output element was never written"
    assert np.allclose(got, want, rtol=rtol, atol=atol), f"max error {np.abs(got - want).max():.3g}"


#: (dtype, G, D, HKV, paged, chunk): chunk 16 over a 48-position cache is 3 splits (the combine runs), 64 is one
CASES = [("f32", 1, 64, 2, False, 16), ("f16", 2, 128, 1, True, 16), ("bf16", 4, 128, 2, False, 16),
         ("bf16", 8, 64, 1, True, 16), ("f16", 4, 64, 2, True, 64), ("f32", 8, 128, 1, False, 64)]


@pytest.mark.parametrize("path", [p for p in Dc.PATHS if p != "mma"])  # f16/bf16 only: test_attention_decode_mma
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}-G{c[1]}-D{c[2]}-{'paged' if c[4] else 'flat'}-c{c[5]}")
def test_paths_match_the_oracle(backend, rng, path, case):
    """Lengths: the whole cache, exactly one chunk, 1, and one ending inside the second split."""
    dtype, g, d, hkv, paged, chunk = case
    vec = 16 // np.dtype(DTYPES[dtype]).itemsize
    if path == "per_thread" and backend != "cpu" and 128 // (d // vec) * g * d * 4 + g * (d + chunk) * 4 > 32768:
        pytest.skip("the per-thread kernel's shared arrays pass the 32 KiB of Metal and lavapipe at f16/bf16 G 8")
    data = _data(rng, (4, 48, g * hkv, hkv, d), dtype, paged, [48, 16, 1, 29])
    cfg = _launch(data, paged, backend, chunk, path)
    assert cfg["path"] == path and cfg["CHUNK"] == chunk
    _check(data, paged, dtype)


@pytest.mark.parametrize("entry", Dc.TUNING["cuda"], ids=lambda e: "-".join(map(str, e)))
def test_every_gpu_configuration_on_the_interpreter(rng, entry):
    """Each configuration autotuning times on GPUs (here at the interpreter's SIMD width), at bf16 D 128 G 4 and
    f32 D 64 G 2 paged, the chunk left to plan_chunk (4 or 2 splits) and the lengths ragged."""
    for dtype, g, d, paged in (("bf16", 4, 128, False), ("f32", 2, 64, True)):
        data = _data(rng, (3, 120, 2 * g, 2, d), dtype, paged, [120, 1, 64])
        cfg = Dc.entry_config(entry, d, g, data["q"].dtype.itemsize, None, 120, get_backend("cpu").simd_width())
        if cfg is None:  # the matrix-unit kernel reads f16/bf16 only
            assert entry[0] == "mma" and dtype == "f32"
            continue
        table = data.get("table", data["lens"])
        cache_len, maxp = (Dc.PAGE, data["table"].shape[1]) if paged else (120, 0)
        lmax = Dc.PAGE * maxp if paged else 120
        Dc.run_config(cfg, data["q"], data["k"], data["v"], table, data["lens"], data["out"], cache_len, maxp, lmax,
                      paged, None, "cpu")
        _check(data, paged, dtype)


@pytest.mark.parametrize("uk", [1, 8])
@pytest.mark.parametrize("width", [4, 8, 64])
def test_lane_sums_at_every_simd_width(monkeypatch, rng, width, uk):
    """f32 D 64 (16 vectors a row, so LANES = min(16, width)): more rows a step than lanes, as many, fewer; G 3 (an
    odd count of heads in the butterfly after the reduce-scatter)."""
    monkeypatch.setenv("IRON_CPU_SIMD_WIDTH", str(width))
    data = _data(rng, (3, 40, 6, 2, 64), "f32", False, [40, 17, 1])
    cfg = dict(Dc.coalesced_config(64, 3, 4, 16, 128, 4, 1, width), UK=uk)
    assert cfg["LANES"] == min(16, width)
    Dc.run_config(cfg, data["q"], data["k"], data["v"], data["lens"], data["lens"], data["out"], 40, 0, 40, False,
                  0.2, "cpu")
    want = Dc.oracle(data, 0.2)
    assert np.allclose(data["out"], want, rtol=1e-5, atol=1e-5)


def test_head_dim_with_an_odd_vector_count(rng):
    """bf16 D 48: 12 vectors of 4 a row, so 4 lanes share a row, each holding 3 vectors."""
    data = _data(rng, (2, 40, 4, 2, 48), "bf16", True, [40, 9])
    assert _launch(data, True, "cpu", 16, None)["LANES"] == 4
    _check(data, True, "bf16")


def test_the_launch_prefers_the_coalesced_kernel():
    """Without a tuning table (CPU devices): one configuration, the coalesced kernel; GPUs time both paths."""
    assert Dc.split_configs(128, 4, 2, None, 8192, "cpu") == [Dc.entry_config(Dc.TUNING["cuda"][0], 128, 4, 2, None,
                                                                             8192, get_backend("cpu").simd_width())]
    assert Dc.split_configs(128, 4, 2, None, 8192, "cpu")[0]["path"] == "coalesced"
    assert Dc.split_configs(64, 2, 4, 16, 64, "cpu", "per_thread") == [
        {"path": "per_thread", "BLOCK": 128, "CHUNK": 16, "VEC": 4}]
    assert {e[0] for e in Dc.TUNING["cuda"]} == set(Dc.PATHS)
    with pytest.raises(ValueError, match="path 'fast'"):
        Dc.split_configs(64, 2, 4, 16, 64, "cpu", "fast")


@pytest.mark.skipif(unavailable_reason() is not None, reason=f"NVRTC unavailable: {unavailable_reason()}")
def test_cuda_coalesced_kernel_keeps_its_registers():
    """bf16 D 128 G 4, CHUNK 256, BLOCK 128 (the H200 shapes' default): no spills, and at most 128 registers, so at
    least 4 groups of 128 threads share an SM (the per-thread kernel takes 252 with NVRTC 13.5: 2 groups)."""
    cfg = Dc.coalesced_config(128, 4, 2, 256, 128, 4, 1, 32)
    constexprs = (128, 4, 256, 128, cfg["VEC"], False, 32, cfg["LANES"], cfg["UK"], cfg["U"])
    source = emit_cuda(attn_decode_split_coalesced.variant(iron.bf16, constexprs).kernel)
    res = resource_report(source, "sm_90")["attn_decode_split_coalesced"]
    assert res["stack_frame_bytes"] == res["spill_store_bytes"] == res["spill_load_bytes"] == 0, res
    assert 0 < res["registers"] <= 128, res


@pytest.mark.parametrize("g", [3, 5, 6])
def test_uneven_head_groups_with_long_chunks(backend, rng, g):
    """G 3, 5, 6 (Llama-3.2-3B has 24/8 heads, Qwen3-14B 40/8) over 128 positions in 64-position chunks: the rows
    a thread scores a step stay a power of two (the lane sums halve them; 5 and 3 rows lost rows)."""
    data = _data(rng, (2, 128, g * 2, 2, 64), "f32", False, [128, 97])
    cfg = _launch(data, False, backend, 64, "coalesced")
    assert cfg["UK"] & (cfg["UK"] - 1) == 0
    _check(data, False, "f32")


@pytest.mark.parametrize("chunk", [8, 24, 40])
def test_paged_chunks_that_split_pages(backend, rng, chunk):
    """The coalesced kernel reads the chunk's page numbers into shared memory first: chunks shorter than a page (8)
    and chunks starting inside a page (24, 40 over pages of 16) find the right rows."""
    data = _data(rng, (3, 80, 4, 2, 64), "f32", True, [80, 47, 9])
    cfg = _launch(data, True, backend, chunk, "coalesced")
    assert cfg["CHUNK"] == chunk
    _check(data, True, "f32")


@pytest.mark.parametrize("path", Dc.PATHS)
@pytest.mark.parametrize("paged", [False, True], ids=["flat", "paged"])
def test_lengths_outside_the_cache(backend, rng, path, paged):
    """lens lives on the device, so the kernels clamp it: a length past the cache (40 positions flat, 3 pages of 16
    paged; chunks of 16, the last split short when flat) attends over the whole cache and never reads the next
    sequence's rows or past the buffer (the interpreter checks every access); a length of 0 or below gives zeros.
    The matrix-unit kernel reads f16 (not on lavapipe: its compile time, test_attention_decode_mma.py)."""
    if path == "mma" and backend == "vulkan":
        pytest.skip("lavapipe runs two of the matrix-unit kernel's variants (test_attention_decode_mma.py)")
    dtype, tol = ("f16", 2e-3) if path == "mma" else ("f32", 1e-5)
    data = _data(rng, (5, 40, 4, 2, 64), dtype, paged, [45, 0, 1000, -3, 7])
    _launch(data, paged, backend, 16, path)
    lmax = Dc.PAGE * data["table"].shape[1] if paged else data["k"].shape[1]
    lens = data["lens"]
    full = (Dc.oracle_paged if paged else Dc.oracle)({**data, "lens": np.clip(lens, 1, lmax)})
    want = np.where((lens > 0)[:, None, None], full, 0.0)
    got = data["out"].astype(np.float64)
    assert not np.isnan(got).any(), "an output element was never written"
    assert np.allclose(got, want, rtol=max(tol, 1e-4), atol=tol), f"max error {np.abs(got - want).max():.3g}"
