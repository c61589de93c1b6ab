"""The Triton peers against float64 NumPy on a CUDA GPU: softmax and rms_norm (rows held in registers and the long
rows' chunked path), GEMM (A @ B and A @ B^T, edges that are no multiple of any tile, f16/bf16/f32 in, f16/bf16/f32
out). Skipped where torch has no GPU or Triton is not installed (CI)."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

torch = pytest.importorskip("torch")
if importlib.util.find_spec("triton") is None or not torch.cuda.is_available():
    pytest.skip("needs Triton and a CUDA GPU", allow_module_level=True)

from iron.harness import peers  # noqa: E402
from iron.harness.checking import compare  # noqa: E402

DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}
#: one output rounding of each dtype, beyond the f32 arithmetic
ROUNDING = {"f32": (1e-6, 2e-5), "f16": (1e-4, 2e-3), "bf16": (1e-3, 1.6e-2)}


def _host(t):
    return t.float().cpu().numpy().astype(np.float64)


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("shape", [(64, 1000), (16, 8192), (8, 40000)])  # the last takes the online path
def test_softmax(dtype, shape):
    x = (torch.randn(shape, device="cuda") * 4).to(DTYPES[dtype])
    d = {"x": x, "ref_out": torch.full_like(x, float("nan"))}
    peers.resolve("triton", "softmax")(d)
    want = np.exp(_host(x) - _host(x).max(axis=1, keepdims=True))
    want /= want.sum(axis=1, keepdims=True)
    result = compare(_host(d["ref_out"]), want, ROUNDING[dtype])
    assert result.ok, result.describe()


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("shape", [(64, 1000), (16, 8192), (8, 40000)])
def test_rms_norm(dtype, shape):
    x = torch.randn(shape, device="cuda").to(DTYPES[dtype])
    w = torch.randn(shape[1:], device="cuda").to(DTYPES[dtype])
    d = {"x": x, "w": w, "ref_out": torch.full_like(x, float("nan"))}
    peers.resolve("triton", ("rms_norm", {"eps": 1e-6}))(d)
    hx = _host(x)
    want = hx / np.sqrt(np.mean(hx * hx, axis=1, keepdims=True) + 1e-6) * _host(w)
    atol, rtol = ROUNDING[dtype]
    result = compare(_host(d["ref_out"]), want, (atol * 10, rtol))
    assert result.ok, result.describe()


@pytest.mark.parametrize("trans_b", [False, True])
@pytest.mark.parametrize("dtype, out_dtype", [("bf16", "bf16"), ("f16", "f16"), ("bf16", "f32"), ("f16", "f32"),
                                              ("f32", "f32")])
@pytest.mark.parametrize("mnk", [(256, 512, 128), (1000, 520, 333), (77, 1, 4096)])
def test_gemm(trans_b, dtype, out_dtype, mnk):
    M, N, K = mnk
    a = torch.randn(M, K, device="cuda").to(DTYPES[dtype])
    b = torch.randn((N, K) if trans_b else (K, N), device="cuda").to(DTYPES[dtype])
    d = {"a": a, "b": b, "ref_out": torch.full((M, N), float("nan"), device="cuda", dtype=DTYPES[out_dtype])}
    peers.resolve("triton", ("gemm", {"trans_b": trans_b}))(d)
    hb = _host(b)
    want = _host(a) @ (hb.T if trans_b else hb)
    # f32 accumulation over K terms (|c| ~ sqrt(K)), then the output's rounding
    atol = 1e-5 * K ** 0.5 * 8 + ROUNDING[out_dtype][0]
    result = compare(_host(d["ref_out"]), want, (atol, ROUNDING[out_dtype][1]))
    assert result.ok, result.describe()


@pytest.mark.parametrize("trans_b", [False, True])
def test_torch_matmul_peer_keeps_an_f32_output(trans_b):
    a = torch.randn(128, 256, device="cuda", dtype=torch.bfloat16)
    b = torch.randn((64, 256) if trans_b else (256, 64), device="cuda", dtype=torch.bfloat16)
    d = {"a": a, "b": b, "ref_out": torch.full((128, 64), float("nan"), device="cuda")}
    got = peers.resolve("torch", ("matmul", {"trans_b": trans_b}))(d)
    got = d["ref_out"] if got is None else got
    assert got.dtype == torch.float32
    want = _host(a) @ (_host(b).T if trans_b else _host(b))
    assert compare(_host(got), want, (1e-3, 1e-5)).ok
