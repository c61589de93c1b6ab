"""The Triton peers. Without a GPU (CI): every named Triton peer resolves to its module's function, the modules
import no Triton until a row runs them, a missing Triton is a reason, and the layer_norm and attention prefill
registrations name their peers. On a CUDA GPU with Triton, against float64 NumPy: softmax and rms_norm (rows held in
registers and the long rows' chunked path), layer_norm (registers, and the looping kernel of long rows; with and
without bias), flash attention (causal, GQA, head dims 64 and 128, sequences no multiple of any tile; every tile
config as well as the autotuned choice), GEMM (A @ B and A @ B^T, edges that are no multiple of any tile,
f16/bf16/f32 in, f16/bf16/f32 out)."""

from __future__ import annotations

import ast
import importlib.util
import os
import subprocess
import sys

import numpy as np
import pytest

from iron.harness import peers
from iron.harness.checking import compare
from iron.harness.registry import REGISTRY, load_all

try:
    import torch
except ImportError:  # CI: the GPU tests skip
    torch = None

GPU = torch is not None and importlib.util.find_spec("triton") is not None and torch.cuda.is_available()
gpu = pytest.mark.skipif(not GPU, reason="needs Triton and a CUDA GPU")

DTYPES = {"f32": "float32", "f16": "float16", "bf16": "bfloat16"}
#: one output rounding of each dtype, beyond the f32 arithmetic
ROUNDING = {"f32": (1e-6, 2e-5), "f16": (1e-4, 2e-3), "bf16": (1e-3, 1.6e-2)}
#: the peers this file adds, by name: (module, function)
NEW_PEERS = {"layer_norm": ("triton_layernorm", "layer_norm"), "attention": ("triton_attention", "attention")}


def _dt(name):
    return getattr(torch, DTYPES[name])


# --- without a GPU ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(NEW_PEERS))
def test_the_named_triton_peer_points_at_its_module_function(name):
    module, function = NEW_PEERS[name]
    assert peers.NAMED["triton"][name] == f"{module}:{function}"
    peers.check_spec("triton", name)
    tree = ast.parse(open(os.path.join(os.path.dirname(peers.__file__), f"{module}.py")).read())
    assert function in {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}


def test_importing_the_peers_package_imports_no_triton():
    code = ("import sys, iron.harness.peers as p; from iron.harness.registry import load_all; load_all();"
            "p.check_spec('triton', 'layer_norm'); p.check_spec('triton', 'attention');"
            "bad = [m for m in ('triton', 'torch') if m in sys.modules]; assert not bad, bad")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


@pytest.mark.skipif(importlib.util.find_spec("triton") is not None, reason="Triton is installed here")
def test_without_triton_the_peers_are_unavailable_with_a_reason():
    assert peers.available("triton") == "triton is not installed"
    for name in NEW_PEERS:
        with pytest.raises(peers.PeerUnavailable, match="triton is not installed"):
            peers.resolve("triton", name)
    _, missing = peers.device_references(_registered_references()["std/attention/prefill"])
    assert missing["triton"] == "triton is not installed"


def _registered_references():
    load_all()
    return {name: entry.references for name, entry in REGISTRY.items()}


def test_layer_norm_and_attention_prefill_name_their_triton_peers():
    refs = _registered_references()
    from iron.std.layer_norm import EPS

    assert peers.parse(refs["std/norm/layer_norm"]["triton"]) == ("layer_norm", {"eps": EPS})
    name, options = peers.parse(refs["std/attention/prefill"]["triton"])
    assert name == "attention" and options.get("causal", True) is True and options.get("scale") is None


# --- on a CUDA GPU ---------------------------------------------------------------------------------------------------


def _host(t):
    return t.float().cpu().numpy().astype(np.float64)


@gpu
@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("shape", [(64, 1000), (16, 8192), (8, 40000)])  # the last takes the online path
def test_softmax(dtype, shape):
    x = (torch.randn(shape, device="cuda") * 4).to(_dt(dtype))
    d = {"x": x, "ref_out": torch.full_like(x, float("nan"))}
    peers.resolve("triton", "softmax")(d)
    want = np.exp(_host(x) - _host(x).max(axis=1, keepdims=True))
    want /= want.sum(axis=1, keepdims=True)
    result = compare(_host(d["ref_out"]), want, ROUNDING[dtype])
    assert result.ok, result.describe()


@gpu
@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("shape", [(64, 1000), (16, 8192), (8, 40000)])
def test_rms_norm(dtype, shape):
    x = torch.randn(shape, device="cuda").to(_dt(dtype))
    w = torch.randn(shape[1:], device="cuda").to(_dt(dtype))
    d = {"x": x, "w": w, "ref_out": torch.full_like(x, float("nan"))}
    peers.resolve("triton", ("rms_norm", {"eps": 1e-6}))(d)
    hx = _host(x)
    want = hx / np.sqrt(np.mean(hx * hx, axis=1, keepdims=True) + 1e-6) * _host(w)
    atol, rtol = ROUNDING[dtype]
    result = compare(_host(d["ref_out"]), want, (atol * 10, rtol))
    assert result.ok, result.describe()


@gpu
@pytest.mark.parametrize("trans_b", [False, True])
@pytest.mark.parametrize("dtype, out_dtype", [("bf16", "bf16"), ("f16", "f16"), ("bf16", "f32"), ("f16", "f32"),
                                              ("f32", "f32")])
@pytest.mark.parametrize("mnk", [(256, 512, 128), (1000, 520, 333), (77, 1, 4096)])
def test_gemm(trans_b, dtype, out_dtype, mnk):
    M, N, K = mnk
    a = torch.randn(M, K, device="cuda").to(_dt(dtype))
    b = torch.randn((N, K) if trans_b else (K, N), device="cuda").to(_dt(dtype))
    d = {"a": a, "b": b, "ref_out": torch.full((M, N), float("nan"), device="cuda", dtype=_dt(out_dtype))}
    peers.resolve("triton", ("gemm", {"trans_b": trans_b}))(d)
    hb = _host(b)
    want = _host(a) @ (hb.T if trans_b else hb)
    # f32 accumulation over K terms (|c| ~ sqrt(K)), then the output's rounding
    atol = 1e-5 * K ** 0.5 * 8 + ROUNDING[out_dtype][0]
    result = compare(_host(d["ref_out"]), want, (atol, ROUNDING[out_dtype][1]))
    assert result.ok, result.describe()


@gpu
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


def _tolerance(name: str, dtype: str) -> tuple[float, float]:
    """The registered kernel's own test tolerance: the peer is held to what Iron is held to."""
    load_all()
    return REGISTRY[name].tolerance[dtype]


@gpu
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("shape", [(37, 1000), (4, 70000)])  # the last takes the looping kernel
def test_layer_norm(dtype, shape, bias):
    from iron.std.layer_norm import EPS, _oracle

    # the bench's inputs: a row offset of 3 makes the mean matter
    x = (torch.randn(shape, device="cuda") + 3).to(_dt(dtype))
    w = torch.randn(shape[1:], device="cuda").to(_dt(dtype))
    b = torch.randn(shape[1:], device="cuda").to(_dt(dtype))
    d = {"x": x, "w": w, "b": b, "ref_out": torch.full_like(x, float("nan"))}
    peers.resolve("triton", ("layer_norm", {"eps": EPS, "b": "b" if bias else None}))(d)
    host = {"x": _host(x), "w": _host(w), "b": _host(b) if bias else np.zeros(shape[1:])}
    result = compare(_host(d["ref_out"]), _oracle(host), _tolerance("std/norm/layer_norm", dtype))
    assert result.ok, result.describe()


def _attention_case(shape, dtype):
    n, hq, hkv, dim = shape
    q = torch.randn(n, hq, dim, device="cuda").to(_dt(dtype))
    k = torch.randn(n, hkv, dim, device="cuda").to(_dt(dtype))
    v = torch.randn(n, hkv, dim, device="cuda").to(_dt(dtype))
    return {"q": q, "k": k, "v": v, "ref_out": torch.full_like(q, float("nan"))}


def _check_attention(d, dtype, causal=True):
    from iron.std.attention import oracle

    want = oracle({name: _host(d[name]) for name in "qkv"}, causal=causal)
    result = compare(_host(d["ref_out"]), want, _tolerance("std/attention/prefill", dtype))
    assert result.ok, result.describe()


@gpu
@pytest.mark.parametrize("dtype", ["bf16", "f16"])
@pytest.mark.parametrize("shape", [(200, 4, 2, 64), (130, 8, 8, 128), (1, 2, 1, 64)])  # (tokens, HQ, HKV, D)
def test_attention_autotuned(dtype, shape):
    d = _attention_case(shape, dtype)
    peers.resolve("triton", ("attention", {"causal": True}))(d)
    _check_attention(d, dtype)


@gpu
@pytest.mark.parametrize("config", [(64, 32, 4, 2), (64, 64, 4, 4), (128, 32, 4, 3), (128, 64, 8, 3),
                                    (128, 128, 8, 2)])
@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("dtype", ["bf16", "f16"])
def test_attention_every_tile_shape(dtype, config, causal):
    bm, bn, warps, stages = config
    d = _attention_case((200, 4, 2, 128), dtype)
    peers.resolve("triton", ("attention", {"causal": causal, "config": {"BLOCK_M": bm, "BLOCK_N": bn,
                                                                       "num_warps": warps, "num_stages": stages}}))(d)
    _check_attention(d, dtype, causal)
