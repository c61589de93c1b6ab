"""``iron bench --filter model/`` (iron/model/bench_rows.py): the rows are registered for the bench only, their
model is the float64 NumPy model's on the same random weights, their byte count is the weights' size, and a row
runs on the host backends (transformers, where it is missing, is reported as the reason for an empty Ref column)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from iron.harness.measure import bench_case
from iron.harness.registry import load_all, selected
from iron.model import bench_rows

from .numpy_llama import Config as NumpyConfig
from .numpy_llama import Model as NumpyModel
from .numpy_llama import forward as numpy_forward
from .test_model_runner import TOL, rel_err

ROWS = ("model/llama/prefill", "model/llama/decode")


def test_rows_are_for_the_bench_only():
    benched = {e.name: e for e in selected("model/", benched=True)}
    assert set(benched) == set(ROWS)
    assert all(e.row is not None and not e.tested for e in benched.values())
    assert not any(e.name.startswith("model/") for e in load_all() if e.tested)  # never in `iron test`
    for entry in benched.values():  # the 1B shape on GPUs, the toy one on the host
        assert {s[1] for s in entry.device_shapes} == {2048} and {s[1] for s in entry.shapes} == {64}


@pytest.mark.parametrize("hidden", sorted(bench_rows.MODELS))
def test_bytes_are_the_weights(hidden):
    """GB/s counts the weights once: the parameter count is the sum of every tensor's size (tied head once),
    checked on each model's shape with a smaller vocabulary and one layer (the 1B tensors are not made here)."""
    small = dict(bench_rows.MODELS[hidden], vocab_size=512, num_hidden_layers=1)
    weights = bench_rows.random_weights(small)
    assert bench_rows._params(small) == sum(w.size for w in weights.values())
    assert all(w.dtype.name == "bfloat16" for w in weights.values())
    assert bench_rows._bytes((1, hidden), 2) == 2 * bench_rows._params(bench_rows.MODELS[hidden])


def test_row_model_is_the_float64_model(backend, rng):
    """The prefill row's model (random weights, toy shape) against the independent float64 NumPy forward."""
    cfg = bench_rows.MODELS[64]
    m, tensors = bench_rows.model_for(backend, 64)
    oracle = NumpyModel(NumpyConfig.from_json(cfg), {k: v.astype(np.float64) for k, v in tensors.items()})
    oracle.weights["lm_head.weight"] = oracle.weights["model.embed_tokens.weight"]
    ids = rng.integers(0, cfg["vocab_size"], 20).tolist()
    m.reset(len(ids))
    got = m.prefill(ids, all_logits=True).numpy()
    assert rel_err(got, numpy_forward(oracle, ids)) < TOL["bf16"]


@pytest.mark.parametrize("name,shape", [("model/llama/prefill", (24, 64)), ("model/llama/decode", (2, 64))])
def test_a_row_runs_on_the_host(backend, name, shape):
    if backend == "msl-cpu":
        pytest.skip("msl-cpu runs a decode step in ~1 s: the row's repeats take minutes (cpu and vulkan run it)")
    entry = {e.name: e for e in selected("model/", benched=True)}[name]
    answer = bench_case(entry, backend, "bf16", shape, 7, {"repeats": 2})
    assert "error" not in answer, answer.get("error")
    assert answer["ok"] and answer["iron_s"] > 0
    assert "torch" in answer["refs"] or "torch" in answer["ref_errors"]


def test_a_crashing_peer_is_reported_not_fatal():
    """The compiled transformers peer runs in a child process (it died of SIGSEGV inside torch on the H200): its exit
    is read as a time, the peer's own error, a signal by name, or a failed exit with the last line of its stderr."""
    from iron.model.hf_peer import _answer

    assert _answer(0, "Compiling...\n{\"s\": 0.0125}\n", "") == (0.0125, None)
    raised = "raised RuntimeError: overwritten"
    assert _answer(0, json.dumps({"error": raised}) + "\n", "") == (None, raised)
    s, why = _answer(-11, "", "Fatal Python error: Segmentation fault")
    assert s is None and "SIGSEGV" in why
    s, why = _answer(1, "", "Traceback (most recent call last):\nImportError: no transformers")
    assert s is None and "status 1" in why and "ImportError: no transformers" in why


def test_transformers_reference_keeps_rope_in_float32():
    """The bench rows' transformers model is cast to bf16 with its rotary ``inv_freq`` left in float32 (as
    ``from_pretrained(dtype=bf16)`` leaves it): cast with the weights, it put the 2048-token reference 0.52 off.
    Checked against the independent float64 formula; needs torch, transformers and a CUDA device (skips elsewhere)."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    if not torch.cuda.is_available():
        pytest.skip("the transformers peer runs on CUDA")
    from iron.model.hf_peer import hf_model, torch_state

    from .numpy_llama import rope_inv_freq

    cfg = bench_rows.MODELS[64]
    model = hf_model(cfg, torch_state(bench_rows.random_weights(cfg)))
    tables = {n: b for n, b in model.named_buffers() if n.endswith("inv_freq")}
    assert tables and all(b.dtype == torch.float32 for b in tables.values()), {n: b.dtype for n, b in tables.items()}
    want = rope_inv_freq(NumpyConfig.from_json(cfg))
    for b in tables.values():
        np.testing.assert_allclose(b.double().cpu().numpy(), want, rtol=4e-6)  # f32 formulas; bf16: ~4e-3
    assert all(p.dtype == torch.bfloat16 for p in model.parameters())
