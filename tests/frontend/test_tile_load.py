"""tile_load / tile_commit / tile_wait (interp/tile_copies.py, codegen/tile_copy.py, codegen/cfamily/cuda_tma.py):
boxes with edges, batches and stages against NumPy on every backend, the rules the interpreter enforces, the
front-end's refusals, and gemm_tma (std/gemm_tma.py) -- the warpgroup GEMM staged by tile_load -- against float64."""

from __future__ import annotations

import numpy as np
import pytest

import iron
from iron.codegen import emit_cuda
from iron.codegen.nvrtc import PTXAS_VERBOSE, compile_cuda_log, default_options, unavailable_reason
from iron.lang import (
    Tensor,
    f32,
    local_id,
    shared,
    tile_commit,
    tile_load,
    tile_wait,
)
from iron.runtime import get_backend
from iron.std.gemm_tma import gemm_tma, tma_ok

from .test_kernels import as_dtype, assert_close, f64
from .tile_kernels import boxes


def _expected(x, groups, R, C, LD, BS, r0, c0, rows, cols, dld, fill):
    out = np.full((groups, 2, rows, dld), fill, np.float64)
    for g in range(groups):
        base = g * BS
        for box, (rr, cc) in enumerate(((r0 + g, c0), (r0, c0 + cols))):
            for r in range(rows):
                for c in range(cols):
                    gr, gc = rr + r, cc + c
                    inside = 0 <= gr < R and 0 <= gc < C
                    out[g, box, r, c] = x[base + gr * LD + gc] if inside else 0.0
    return out


@pytest.mark.parametrize("R, C, LD, BS, r0, c0, dld", [
    (13, 12, 16, 0, 0, 0, 8), (13, 12, 16, 0, -3, -5, 8), (40, 20, 20, 800, 2, 4, 12), (9, 30, 32, 0, 5, 20, 8)])
def test_boxes_with_edges_and_batches(backend, R, C, LD, BS, r0, c0, dld, rng):
    groups = 3
    n = (groups - 1) * BS + R * LD if BS else R * LD
    x = rng.standard_normal(n).astype(np.float32)
    y = np.full(groups * 2 * 8 * dld, np.nan, np.float32)  # poisoned: the padding past COLS stays NaN
    g = get_backend(backend).simd_width()
    boxes[(groups * g,), (g,)](x, y, R, C, LD, BS, r0, c0, 8, 8, dld, backend=backend)
    want = _expected(x.astype(np.float64), groups, R, C, LD, BS, r0, c0, 8, 8, dld, np.nan)
    got = y.reshape(groups, 2, 8, dld)
    np.testing.assert_array_equal(got[..., :8], want[..., :8])


def _run(X, Y, *scalars, group=32):
    return boxes[(group,), (group,)](X, Y, *scalars, backend="cpu")


@iron.kernel
def wait_unissued(X: Tensor[f32], Y: Tensor[f32], R: int):
    s = shared(f32, 64)
    tile_load(s, 0, 8, X, (R, 8, 8, 0), (0, 0, 0), 8, 8, 0)
    tile_commit(0)
    tile_wait(1)
    Y[local_id(0)] = s[local_id(0)]


@iron.kernel
def wait_uncommitted(X: Tensor[f32], Y: Tensor[f32], R: int):
    s = shared(f32, 64)
    tile_load(s, 0, 8, X, (R, 8, 8, 0), (0, 0, 0), 8, 8, 2)
    tile_wait(2)
    Y[local_id(0)] = s[local_id(0)]


@iron.kernel
def divergent_rows(X: Tensor[f32], Y: Tensor[f32], R: int):
    s = shared(f32, 64)
    tile_load(s, 0, 8, X, (R, 8, 8, 0), (0, local_id(0) % 2, 0), 8, 8, 0)
    tile_commit(0)
    tile_wait(0)
    Y[local_id(0)] = s[local_id(0)]


@iron.kernel
def stale_read(X: Tensor[f32], Y: Tensor[f32], R: int):
    """Reads the stage before waiting for it: the interpreter shows the old (poisoned) contents."""
    s = shared(f32, 64)
    tile_load(s, 0, 8, X, (R, 8, 8, 0), (0, 0, 0), 8, 8, 0)
    tile_commit(0)
    Y[local_id(0)] = s[local_id(0)]
    tile_wait(0)


@pytest.mark.parametrize("kern, message", [
    (wait_unissued, "no committed phase of stage 1"), (wait_uncommitted, "not yet committed"),
    (divergent_rows, "operands differ between the threads")])
def test_the_interpreter_reports_kernels_that_would_hang_or_race(kern, message):
    x, y = np.ones(64, np.float32), np.zeros(32, np.float32)
    with pytest.raises(iron.ExecutionError, match=message):
        kern[(32,), (32,)](x, y, 8, backend="cpu")


def test_reading_a_stage_before_its_wait_sees_the_old_contents():
    y = np.zeros(32, np.float32)
    stale_read[(32,), (32,)](np.ones(64, np.float32), y, 8, backend="cpu")
    assert np.isnan(y).all()


@pytest.mark.parametrize("LD, BS, message", [(6, 0, "multiple of 16 bytes"), (8, 18, "multiple of 16 bytes")])
def test_views_the_copy_engine_cannot_describe_are_refused(LD, BS, message):
    x, y = np.ones(400, np.float32), np.zeros(2 * 8 * 8, np.float32)
    with pytest.raises(iron.ExecutionError, match=message):
        boxes[(32,), (32,)](x, y, 8, 8, LD, BS, 0, 0, 8, 8, 8, backend="cpu")


_BAD = {
    "view": ("tile_load(s, 0, 8, X, (R + 1, 8, 8, 0), (0, 0, 0), 8, 8, 0)", "must be an i32 parameter"),
    "rows": ("tile_load(s, 0, 8, X, (R, 8, 8, 0), (0, 0, 0), 12, 8, 0)", "multiple of 8"),
    "cols": ("tile_load(s, 0, 8, X, (R, 8, 8, 0), (0, 0, 0), 8, 3, 0)", "multiple of 16 bytes"),
    "tuple": ("tile_load(s, 0, 8, X, R, (0, 0, 0), 8, 8, 0)", "as a tuple written in the call"),
}


@pytest.mark.parametrize("case", sorted(_BAD))
def test_front_end_refusals_are_located(case, tmp_path):
    from .sources import module_from_source

    line, message = _BAD[case]
    body = ("import iron\nfrom iron.lang import *\n\n\n@iron.kernel\ndef k(X: Tensor[f32], R: int):\n"
            f"    s = shared(f32, 256)\n    {line}\n    tile_commit(0)\n    tile_wait(0)\n")
    mod = module_from_source(tmp_path, f"tile_{case}", body)
    with pytest.raises(iron.CompileError, match=message) as e:
        mod.k[(32,), (32,)](np.ones(64, np.float32), 8, backend="cpu")
    assert "tile_load" in str(e.value) and ":" in str(e.value).split("\n")[0]


# -- gemm_tma --------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
@pytest.mark.parametrize("shape, trans, stages, batch", [
    ((64, 64, 64), False, 2, 1), ((100, 72, 136), False, 2, 1), ((72, 64, 200), True, 2, 1),
    ((70, 136, 72), False, 2, 2), ((130, 64, 200), True, 3, 2), ((80, 72, 320), False, 3, 1)])
def test_gemm_tma(backend, dtype, shape, trans, stages, batch, rng):
    m, n, k = shape
    a = as_dtype(rng.standard_normal((batch, m, k)), dtype)
    b = as_dtype(rng.standard_normal((batch, n, k) if trans else (batch, k, n)), dtype)
    c = np.full((batch, m, n), np.nan, a.dtype)
    strides = (m * k, n * k, m * n) if batch > 1 else (0, 0, 0)
    assert tma_ok(m, n, k, strides)
    g = 4 * get_backend(backend).simd_width()
    grid = (-(-n // 64) * g, -(-m // 64), batch)
    try:  # 64 x 64 tiles: 16 KiB a stage; lavapipe holds 16-bit shared elements in 32 bits
        gemm_tma[grid, (g, 1, 1)](a.reshape(-1), b.reshape(-1), c.reshape(-1), m, n, k, *strides, 64, 64, stages,
                                  trans, backend=backend)
    except (iron.LaunchError, iron.CompileError) as e:  # refused before running, located
        if "bytes of shared memory" not in str(e):
            raise
        pytest.skip(f"{backend}: {e.message}")
    bb = np.swapaxes(f64(b), -1, -2) if trans else f64(b)
    assert_close(c, f64(a) @ bb, dtype, n_ops=k + 1, scale=np.abs(f64(a)) @ np.abs(bb), what="gemm_tma")


def test_sm90_source_uses_the_copy_engine_and_no_proxy_fence():
    src = emit_cuda(gemm_tma.variant(iron.bf16, (128, 256, 4, False)).kernel, arch="sm_90")
    text = src.source
    assert src.arch == "sm_90a" and "cp.async.bulk.tensor.3d" in text and "mbarrier.try_wait.parity" in text
    assert "fence.proxy.async" not in text and "cp.async.cg" not in text
    assert [s.buffer for s in src.tensor_maps] == ["A", "B"] and [p.kind for p in src.params[-2:]] == ["tmap"] * 2
    assert src.tensor_maps[1].box == (64, 64) and text.count("iron_tma_3d(sb") == 3 * 4  # 4 panels of B, 3 sites
    plain = emit_cuda(gemm_tma.variant(iron.bf16, (128, 256, 4, False)).kernel)  # no sm_90: loops and barriers
    assert "bulk" not in plain.source and not plain.tensor_maps


@pytest.mark.skipif(unavailable_reason() is not None, reason=f"NVRTC unavailable: {unavailable_reason()}")
@pytest.mark.parametrize("cfg", [(128, 256, 4, False), (128, 128, 4, True), (64, 128, 3, False)])
@pytest.mark.parametrize("dtype", [iron.f16, iron.bf16])
def test_nvrtc_compiles_gemm_tma_without_serialising(cfg, dtype):
    src = emit_cuda(gemm_tma.variant(dtype, cfg).kernel, arch="sm_90")
    _, log = compile_cuda_log(src, "sm_90a", [*default_options(), PTXAS_VERBOSE])
    assert "C751" not in log and "serialized" not in log, log


def test_gemm_tma_repeat_launches_on_torch_tensors(rng):
    """Repeat launches on CUDA tensors take the fast launcher, which looks the copy engine's descriptors up per call:
    new buffers and new sizes must give new descriptors (a stale one would read the old matrices)."""
    from iron.runtime import unavailable_reason

    if unavailable_reason("cuda"):
        pytest.skip(f"cuda unavailable: {unavailable_reason('cuda')}")
    torch = pytest.importorskip("torch")
    if getattr(get_backend("cuda"), "arch", "") != "sm_90":
        pytest.skip("the copy engine path is sm_90's")
    for m, n, k in [(256, 256, 128), (256, 256, 128), (192, 320, 256), (256, 256, 128)]:
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
        c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
        grid = (-(-n // 256) * 256, -(-m // 128), 1)
        # no backend=: the tensors' device picks CUDA, and a repeat call takes the fast launcher
        gemm_tma[grid, (256, 1, 1)](a.view(-1), b.view(-1), c.view(-1), m, n, k, 0, 0, 0, 128, 256, 4, False)
        want = a.double() @ b.double()
        assert torch.allclose(c.double(), want, rtol=2e-2, atol=2e-1 * k ** 0.5 / 8), (m, n, k)
