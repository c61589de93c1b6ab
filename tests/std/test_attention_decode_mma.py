"""std/attention_decode's matrix-unit split kernel (``attn_decode_split_mma``: FlashDecoding's loop on matrix
fragments, K/V tiles through a ring of shared-memory stages, the online softmax on the accumulators, P V with P from
the registers by ``frag_to_a``) against the float64 NumPy oracles: f16 and bf16, G 1 to 16, D 64 and 128,
contiguous and paged caches, ragged lengths (1, tile and chunk boundaries, several splits, one split), on every
backend where it fits; every mma tuning entry as CUDA configures it and several SIMD widths on the interpreter; the
configurations' shared memory; refusals; the CUDA kernel's registers and matrix instructions (NVRTC). Outputs start
poisoned with NaN (the helpers of test_attention_decode_coalesced.py)."""

from __future__ import annotations

import numpy as np
import pytest

import iron
from iron.codegen import emit_cuda
from iron.codegen.nvrtc import resource_report
from iron.codegen.nvrtc import unavailable_reason as nvrtc_unavailable
from iron.runtime import unavailable_reason
from iron.std import attention_decode as Dc
from iron.std.attention_decode_mma import attn_decode_split_mma, mma_shared_bytes

from .test_attention_decode_coalesced import _check, _data, _launch
from .test_attention_decode_staged import _run

#: the whole 96-position cache (several splits), one chunk of 40, 1, a 16-position tile boundary, one past the
#: next, one ending in the second split
LENS = [96, 40, 1, 16, 33, 57]

#: (dtype, G, D, HKV, paged, chunk); D 128 fits lavapipe's and Metal's 32 KiB only where SPIR-V's 4-byte words do
#: not apply (the interpreter, msl-cpu): the launch refuses it on Vulkan (test_refusals). lavapipe runs the first
#: and third only: its LLVM takes about a minute to compile each variant of the unrolled scalar fallback (the kernel
#: is timed on CUDA only; the scalar fallback itself is the interpreter's and msl-cpu's too)
CASES = [("bf16", 4, 64, 2, False, 40), ("f16", 2, 64, 1, True, 24), ("bf16", 8, 64, 1, True, 40),
         ("f16", 3, 64, 2, False, 96), ("bf16", 1, 64, 3, False, 24), ("bf16", 16, 64, 1, True, 40),
         ("f16", 4, 128, 1, True, 40), ("bf16", 5, 128, 2, False, 24)]


VULKAN = {0, 2}


@pytest.mark.parametrize("i", range(len(CASES)), ids=lambda i: "{}-G{}-D{}-{}-c{}".format(
    *CASES[i][:3], "paged" if CASES[i][4] else "flat", CASES[i][5]))
def test_mma_matches_the_oracle(backend, rng, i):
    dtype, g, d, hkv, paged, chunk = CASES[i]
    if backend == "vulkan" and i not in VULKAN:
        pytest.skip("lavapipe runs two of the cases (its compile time; see CASES)")
    data = _data(rng, (len(LENS), 96, g * hkv, hkv, d), dtype, paged, LENS)
    cfg = _launch(data, paged, backend, chunk, "mma")
    assert cfg["path"] == "mma" and cfg["CHUNK"] == chunk and cfg["BLOCK"] == iron.runtime.get_backend(
        backend).simd_width()
    _check(data, paged, dtype)


MMA = [e for e in Dc.TUNING["cuda"] if e[0] == "mma"]


@pytest.mark.parametrize("entry", MMA, ids=lambda e: "-".join(map(str, e)))
def test_every_mma_entry_as_cuda_configures_it(monkeypatch, rng, entry):
    """Each mma entry with CUDA's limits on the interpreter at SIMD width 32 (given CUDA's shared memory): bf16 D
    128 G 4 and f16 D 64 G 3 paged, the chunk planned (2 or 4 splits of a 200-position cache)."""
    monkeypatch.setenv("IRON_CPU_MAX_SHARED", str(227 * 1024))
    for dtype, g, d, paged in (("bf16", 4, 128, False), ("f16", 3, 64, True)):
        data = _data(rng, (3, 200, 2 * g, 2, d), dtype, paged, [200, 1, 111])
        lmax = Dc.PAGE * data["table"].shape[1] if paged else 200
        cfg = Dc.entry_config(entry, d, g, 2, None, lmax, 32, "cuda", paged)
        assert cfg is not None and (cfg["path"], cfg["BLOCK"], cfg["BN"], cfg["STAGES"]) == ("mma", 32, *entry[2:4])
        _run(cfg, data, paged, "cpu")
        _check(data, paged, dtype)


@pytest.mark.parametrize("width", [8, 16, 64])
def test_simd_widths(monkeypatch, rng, width):
    """The group is one SIMD group of any width: its copies, the fragments' lanes and the stores follow it."""
    monkeypatch.setenv("IRON_CPU_SIMD_WIDTH", str(width))
    data = _data(rng, (3, 64, 6, 2, 64), "bf16", True, [64, 20, 1])
    cfg = _launch(data, True, "cpu", 24, "mma")
    assert cfg["BLOCK"] == width
    _check(data, True, "bf16")


@pytest.mark.parametrize("bn, stages", [(16, 2), (32, 2), (16, 3), (48, 2)])
def test_tiles_and_depths(rng, bn, stages):
    """f16 D 64 G 2 in chunks of 72: tiles of 16, 32 and 48 positions, 2 and 3 stages (the ring wraps several
    times in a chunk, the last tile is partial)."""
    data = _data(rng, (4, 150, 4, 2, 64), "f16", False, [150, 72, 9, 100])
    cfg = dict(Dc.mma_config(64, 2, 2, 72, 32), BN=bn, STAGES=stages)
    _run(cfg, data, False, "cpu")
    _check(data, False, "f16")


def test_scale_and_one_split_cache(backend, rng):
    """A cache of one split (NSPLIT 1: the split kernel writes the normalised output) with an explicit scale."""
    if backend == "vulkan":
        pytest.skip("lavapipe runs two of the cases (its compile time; see CASES)")
    data = _data(rng, (2, 12, 6, 3, 64), "bf16", False, [12, 7])
    Dc.launch_decode(data["q"], data["k"], data["v"], data["lens"], data["out"], 0.3, backend, path="mma")
    assert np.allclose(data["out"].astype(np.float64), Dc.oracle(data, 0.3), rtol=1e-2, atol=1e-2)


def test_refusals(rng):
    """f32, more than 16 heads a kv head, and D 128 on Vulkan (no room for two stages) are refused with the reason;
    CUDA's tuning leaves the mma entries out for f32 rather than failing."""
    cases = [(4, 4, 64, "cpu"), (2, 17, 64, "cpu"), (2, 4, 512, "cpu")]
    if not unavailable_reason("vulkan"):
        cases.append((2, 4, 128, "vulkan"))
    for itemsize, g, d, backend in cases:
        with pytest.raises(ValueError, match="does not apply"):
            Dc.split_configs(d, g, itemsize, 64, 1024, backend, "mma")
    assert all(c["path"] != "mma" for c in Dc.split_configs(128, 4, 4, None, 8192, "cuda"))
    assert sum(c["path"] == "mma" for c in Dc.split_configs(128, 4, 2, None, 8192, "cuda")) == len(MMA)


def test_vulkan_on_a_gpu_does_not_time_it(monkeypatch):
    """Vulkan on a GPU borrows CUDA's tuning table, but without the mma.sync lane layout its fragments take the
    scalar fallback: the mma entries are left out there (``path="mma"`` still forces the kernel)."""
    from iron.frontend import autotune

    if unavailable_reason("vulkan"):
        pytest.skip(unavailable_reason("vulkan"))
    monkeypatch.setitem(autotune._BORROWS, "vulkan", True)
    configs = Dc.split_configs(64, 4, 2, None, 8192, "vulkan")
    assert len(configs) > 1 and all(c["path"] != "mma" for c in configs)
    assert {c["path"] for c in Dc.split_configs(64, 4, 2, None, 8192, "vulkan", "mma")} == {"mma"}


@pytest.mark.parametrize("backend_name, limit", [("cpu", 32 * 1024), ("vulkan", 32 * 1024), ("cuda", 227 * 1024)])
def test_configurations_fit_shared_memory(backend_name, limit):
    """Every mma entry at D 64 and 128, G 1 to 16, chunks 16 to 512, contiguous and paged: within the backend's
    limit (SPIR-V stores f16/bf16 shared elements as 4-byte words), or None where two stages of 16 cannot fit."""
    stored = 4 if backend_name == "vulkan" else 2
    for entry in MMA:
        for d in (64, 128):
            for g in (1, 4, 16):
                for chunk in (16, 256, 512):
                    for paged in (False, True):
                        cfg = Dc.entry_config(entry, d, g, 2, chunk, 8192, 32, backend_name, paged)
                        if cfg is None:
                            assert mma_shared_bytes(d, stored, 16, 2, chunk, paged) > limit
                            continue
                        assert cfg["STAGES"] >= 2 and cfg["BN"] % 16 == 0, cfg
                        assert mma_shared_bytes(d, stored, cfg["BN"], cfg["STAGES"], chunk, paged) <= limit, cfg


@pytest.mark.skipif(nvrtc_unavailable() is not None, reason=f"NVRTC unavailable: {nvrtc_unavailable()}")
@pytest.mark.parametrize("paged", [False, True])
def test_cuda_kernel_uses_the_tensor_cores_without_spills(paged):
    """bf16 D 128 G 4, CHUNK 256 at each mma entry: mma.sync and ldmatrix (K plain, V transposed), P packed from
    the accumulator (no scalar-fallback arrays), 16-byte cp.async, no spills or stack (registers vary by
    NVRTC build: 140-166 here, up to 220 on the H200's, 2026-12-05; at most 255), shared memory as counted
    (dynamic past 48 KiB)."""
    for entry in MMA:
        cfg = Dc.entry_config(entry, 128, 4, 2, 256, 8192, 32, "cuda", paged)
        constexprs = (128, 4, 256, 32, 8, paged, 32, cfg["BN"], cfg["STAGES"])
        source = emit_cuda(attn_decode_split_mma.variant(iron.bf16, constexprs).kernel)
        text = source.source
        assert "mma.sync.aligned.m16n8k16" in text and "ldmatrix.sync.aligned.m8n8.x4.trans" in text
        assert "iron_fto_a_bf16" in text and "iron_cp_async<16>" in text and "regs[" not in text
        res = resource_report(source, "sm_90")["attn_decode_split_mma"]
        assert res["stack_frame_bytes"] == res["spill_store_bytes"] == res["spill_load_bytes"] == 0, res
        assert 0 < res["registers"] <= 255, res
        counted = mma_shared_bytes(128, 2, cfg["BN"], cfg["STAGES"], 256, paged)  # the unused page slot may go
        static = res["shared_bytes"]
        if counted > 48 * 1024:  # past CUDA's static limit the arrays are one dynamic buffer, sized at launch
            assert static == 0 and counted - 4 <= source.dynamic_shared_bytes <= counted + 64, (source, res)
        else:
            assert source.dynamic_shared_bytes == 0 and counted - 4 <= static <= counted, res
