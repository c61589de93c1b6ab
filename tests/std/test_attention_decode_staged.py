"""std/attention_decode's staged split kernel (``attn_decode_split_staged``: K/V tiles through a ring of shared-memory
stages by asynchronous copies, one online-softmax pass) against the float64 NumPy oracles: f32, f16 and bf16, G 1, 2,
3, 4, 8, D 64 and 128, contiguous and paged caches, ragged lengths (1, a tile boundary and one past it, a chunk
boundary, several splits, one split), chunks that are no multiple of R x STAGES, on every backend; every staged
tuning entry as CUDA configures it, pipeline depths, SIMD widths and tiles shorter than the row sets on the
interpreter; the configuration's shared memory; the CUDA kernel's registers (NVRTC). Outputs start poisoned with
NaN (the helpers of test_attention_decode_coalesced.py)."""

from __future__ import annotations

import numpy as np
import pytest

import iron
from iron.codegen import emit_cuda
from iron.codegen.nvrtc import resource_report, unavailable_reason
from iron.runtime import get_backend
from iron.std import attention_decode as Dc
from iron.std.attention_decode_staged import attn_decode_split_staged, staged_shared_bytes

from .test_attention_decode_coalesced import DTYPES, _check, _data, _launch

#: 96 positions: the whole cache (several splits, the last short), exactly one chunk of 40, 1, a tile boundary (16:
#: tiles are 8 or 16 rows), one row past the next (33), and one ending in the second split
LENS = [96, 40, 1, 16, 33, 57]

#: (dtype, G, D, HKV, paged, chunk): chunks of 24 and 40 (no multiple of R x STAGES; 24 and 40 also start inside a
#: page of 16), 96 (the whole cache in one split)
CASES = [("f32", 1, 64, 2, False, 40), ("f16", 2, 128, 1, True, 24), ("bf16", 4, 128, 2, False, 40),
         ("bf16", 8, 64, 1, True, 40), ("f16", 3, 64, 2, False, 24), ("f32", 4, 128, 1, True, 96),
         ("bf16", 8, 128, 1, False, 24), ("f32", 8, 128, 1, True, 40)]


def _run(cfg: dict, data: dict, paged: bool, backend: str, scale=None) -> None:
    """``cfg`` launched as it stands (not re-planned), on the cache of ``data``."""
    table = data.get("table", data["lens"])
    lmax = Dc.PAGE * data["table"].shape[1] if paged else data["k"].shape[1]
    cache_len, maxp = (Dc.PAGE, data["table"].shape[1]) if paged else (lmax, 0)
    Dc.run_config(cfg, data["q"], data["k"], data["v"], table, data["lens"], data["out"], cache_len, maxp, lmax,
                  paged, scale, backend)


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}-G{c[1]}-D{c[2]}-{'paged' if c[4] else 'flat'}-c{c[5]}")
def test_staged_matches_the_oracle(backend, rng, case):
    dtype, g, d, hkv, paged, chunk = case
    data = _data(rng, (len(LENS), 96, g * hkv, hkv, d), dtype, paged, LENS)
    cfg = _launch(data, paged, backend, chunk, "staged")
    assert cfg["path"] == "staged" and cfg["CHUNK"] == chunk and cfg["VEC"] * data["q"].dtype.itemsize == 16
    _check(data, paged, dtype)


STAGED = [e for e in Dc.TUNING["cuda"] if e[0] == "staged"]


@pytest.mark.parametrize("entry", STAGED, ids=lambda e: "-".join(map(str, e)))
def test_every_staged_entry_as_cuda_configures_it(rng, entry):
    """Each staged entry with CUDA's shared-memory limit (R 32 STAGES 2 keeps its 32 rows there), on the
    interpreter at SIMD width 32: bf16 D 128 G 4 and f16 D 64 G 3 paged, the chunk planned (2 or 4 splits)."""
    for dtype, g, d, paged in (("bf16", 4, 128, False), ("f16", 3, 64, True)):
        data = _data(rng, (3, 200, 2 * g, 2, d), dtype, paged, [200, 1, 111])
        lmax = Dc.PAGE * data["table"].shape[1] if paged else 200
        cfg = Dc.entry_config(entry, d, g, data["q"].dtype.itemsize, None, lmax, 32, "cuda")
        assert cfg["path"] == "staged" and cfg["BLOCK"] == entry[1]
        if dtype == "bf16":
            assert (cfg["R"], cfg["STAGES"]) == entry[2:4]
        _run(cfg, data, paged, "cpu")
        _check(data, paged, dtype)


@pytest.mark.parametrize("stages", [2, 3, 4])
@pytest.mark.parametrize("rows", [4, 8, 16])
def test_pipeline_depths_and_short_tiles(rng, rows, stages):
    """f32 D 64 G 2 (16 lanes a row: 8 row sets at BLOCK 128) in chunks of 72: tiles of 4 rows (fewer than the
    row sets: half of them idle), 8 and 16, 2 to 4 stages, so the ring wraps several times in a chunk."""
    data = _data(rng, (4, 150, 4, 2, 64), "f32", False, [150, 72, 9, 100])
    cfg = dict(Dc.staged_config(64, 2, 4, 72, 128, 32), R=rows, STAGES=stages)
    assert cfg["LANES"] == 16
    _run(cfg, data, False, "cpu")
    _check(data, False, "f32")


@pytest.mark.parametrize("width", [4, 8, 64])
def test_simd_widths(monkeypatch, rng, width):
    """bf16 D 128 G 3: at width 4 and 8 a row's lanes fill the SIMD group (2 or 4 vectors a lane); at 64 four row
    sets share one and their sums merge by shuffles before shared memory."""
    monkeypatch.setenv("IRON_CPU_SIMD_WIDTH", str(width))
    data = _data(rng, (3, 64, 6, 2, 128), "bf16", True, [64, 20, 1])
    cfg = _launch(data, True, "cpu", 24, "staged")
    assert cfg["LANES"] == min(16, width)
    _check(data, True, "bf16")


def test_scale_and_one_split_cache(backend, rng):
    """A cache of one split (NSPLIT 1: the split kernel writes the output) with an explicit scale."""
    data = _data(rng, (2, 12, 6, 3, 64), "f32", False, [12, 7])
    Dc.launch_decode(data["q"], data["k"], data["v"], data["lens"], data["out"], 0.3, backend, path="staged")
    assert np.allclose(data["out"], Dc.oracle(data, 0.3), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("backend_name", ["cpu", "vulkan", "cuda"])
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_configurations_fit_shared_memory(backend_name, dtype):
    """Every staged entry at D 64 and 128, G 1 to 8, SIMD widths 8 and 32, chunks 16 to 256: within 32 KiB (48
    KiB on CUDA; SPIR-V stores f16/bf16 shared elements as 4-byte words), at least 2 stages, R a power of two."""
    limit = Dc.SHARED_LIMIT.get(backend_name, 32 * 1024)
    itemsize = np.dtype(DTYPES[dtype]).itemsize
    stored = 4 if backend_name == "vulkan" else itemsize
    for entry in STAGED:
        for d in (64, 128):
            for g in range(1, 9):
                for sw in (8, 32):
                    for chunk in (16, 24, 256):
                        cfg = Dc.entry_config(entry, d, g, itemsize, chunk, 8192, sw, backend_name)
                        r, stages = cfg["R"], cfg["STAGES"]
                        assert stages >= 2 and r & (r - 1) == 0, cfg
                        assert staged_shared_bytes(d, g, stored, chunk, cfg["BLOCK"], sw, cfg["LANES"], r,
                                                   stages) <= limit, cfg


@pytest.mark.skipif(unavailable_reason() is not None, reason=f"NVRTC unavailable: {unavailable_reason()}")
@pytest.mark.parametrize("paged", [False, True])
def test_cuda_staged_kernel_keeps_its_registers(paged):
    """bf16 D 128 G 4, CHUNK 256, BLOCK 128 at the first staged entry (R 16, STAGES 3): no spills, at most 128
    registers (4 groups of 128 threads per SM; NVRTC 13.5 takes 128), about 29 KiB of shared memory (7 groups)."""
    cfg = Dc.entry_config(STAGED[0], 128, 4, 2, 256, 8192, 32, "cuda")
    assert (cfg["R"], cfg["STAGES"], cfg["VEC"], cfg["LANES"]) == (16, 3, 8, 16)
    constexprs = (128, 4, 256, 128, cfg["VEC"], paged, 32, cfg["LANES"], cfg["R"], cfg["STAGES"])
    source = emit_cuda(attn_decode_split_staged.variant(iron.bf16, constexprs).kernel)
    assert source.source.count("iron_cp_async<16>") >= 4  # K and V, 16-byte cp.async pieces
    res = resource_report(source, "sm_90")["attn_decode_split_staged"]
    assert res["stack_frame_bytes"] == res["spill_store_bytes"] == res["spill_load_bytes"] == 0, res
    assert 0 < res["registers"] <= 128, res
    assert res["shared_bytes"] <= 32 * 1024, res


def test_the_staged_path_is_timed_on_gpus_only():
    """CPU devices run the first (coalesced) entry; ``path="staged"`` picks the first staged entry there."""
    sw = get_backend("cpu").simd_width()
    assert Dc.split_configs(128, 4, 2, None, 8192, "cpu")[0]["path"] == "coalesced"
    assert Dc.split_configs(128, 4, 2, None, 8192, "cpu", "staged") == [
        Dc.staged_config(128, 4, 2, Dc.plan_chunk(8192), 128, sw, 16, 3)]
