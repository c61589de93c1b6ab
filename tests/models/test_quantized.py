"""Quantized loading (issue 19: ``Llama.load(..., quantize="q4"|"q8", group=...)``) on every backend: the runner's
prefill (dequantizing GEMMs) and decode steps (dequantizing GEMVs) against the float64 NumPy forward
(numpy_llama.py) run on the *same* quantized weights, dequantized here independently of iron.std.quant (the packed
words read little end first, w = s q + b). The quantization error itself is not the test: both sides see the same
weights, so the tolerances are those of the unquantized runs (f32 1e-4; the bf16 checkpoint run in bf16: 0.05)."""

from __future__ import annotations

import numpy as np
import pytest

from iron.model import Llama, ModelError
from iron.model.quantized import QuantWeight

from .numpy_llama import Model as NumpyModel
from .numpy_llama import forward as numpy_forward
from .test_model_runner import HERE, TOL, reference, rel_err

#: (variant, bits): GQA + llama3 RoPE + tied head at 8 and 4 bits; Qwen2's q/k/v biases; the bf16 checkpoint in bf16
CASES = [("llama3", 8), ("llama3", 4), ("qwen2", 4), ("llama3_bf16", 8)]
GROUP = 32
STEPS = {"msl-cpu": 1}  # decode steps checked (msl-cpu runs a GEMV's groups as threads: slow)


def _dequantize(w: QuantWeight) -> np.ndarray:
    packed = w.packed.numpy().astype(np.uint64)
    n, words = packed.shape
    per = 32 // w.bits
    shifts = np.arange(per, dtype=np.uint64) * np.uint64(w.bits)
    q = ((packed[:, :, None] >> shifts) & np.uint64((1 << w.bits) - 1)).reshape(n, words * per).astype(np.float64)
    s = np.repeat(w.scales.numpy().astype(np.float64), w.group, axis=1)
    b = np.repeat(w.biases.numpy().astype(np.float64), w.group, axis=1)
    return s * q + b


def _oracle_model(variant: str, m: Llama) -> NumpyModel:
    """The float64 model of the checkpoint with the runner's quantized projections put back, dequantized."""
    ref = NumpyModel.load(HERE / variant)
    c = m.config
    for i, lw in enumerate(m.weights.layers):
        attn, mlp = f"model.layers.{i}.self_attn.", f"model.layers.{i}.mlp."
        qkv, gate_up = _dequantize(lw.qkv), _dequantize(lw.gate_up)
        edges = np.cumsum([c.q_size, c.kv_size])
        for name, part in zip(("q_proj", "k_proj", "v_proj"), np.split(qkv, edges)):
            ref.weights[f"{attn}{name}.weight"] = part
        gate, up = np.split(gate_up, 2)
        ref.weights[f"{mlp}gate_proj.weight"], ref.weights[f"{mlp}up_proj.weight"] = gate, up
        ref.weights[f"{attn}o_proj.weight"] = _dequantize(lw.o)
        ref.weights[f"{mlp}down_proj.weight"] = _dequantize(lw.down)
    return ref


@pytest.mark.parametrize("variant,bits", CASES, ids=[f"{v}-q{b}" for v, b in CASES])
def test_quantized_prefill_and_decode(backend, variant, bits):
    ref, info = reference(variant)
    prompt = ref["prompt"].tolist()
    m = Llama.load(HERE / variant, backend=backend, quantize=f"q{bits}", group=GROUP)
    assert isinstance(m.weights.layers[0].qkv, QuantWeight) and m.weights.layers[0].qkv.bits == bits
    oracle = _oracle_model(variant, m)
    steps = STEPS.get(backend, 3)
    tokens = info["greedy_tokens"][:steps]
    want = numpy_forward(oracle, prompt + tokens)
    m.reset(len(prompt) + steps)
    got = m.prefill(prompt, all_logits=True).numpy()
    assert rel_err(got, want[:len(prompt)]) < TOL[m.dtype]
    for j, token in enumerate(tokens):  # teacher-forced decode: the one-row (GEMV) path
        step = m.decode(token).numpy()[0]
        assert rel_err(step, want[len(prompt) + j]) < TOL[m.dtype]


def test_quantized_weights_are_smaller():
    m = Llama.load(HERE / "llama3", backend="cpu", quantize="q4", group=GROUP)
    lw = m.weights.layers[0]
    n, k = lw.down.shape
    assert lw.down.packed.nbytes == n * k // 2 and lw.down.scales.shape == (n, k // GROUP)


@pytest.mark.parametrize("kwargs,message", [
    ({"quantize": "q3"}, "choose q4 or q8"),
    ({"quantize": "q8", "group": 48}, "group size 48"),
    ({"quantize": "q8", "group": 128}, "not a whole number of groups of 128"),
])
def test_quantize_refusals(kwargs, message):
    with pytest.raises(ModelError, match=message):
        Llama.load(HERE / "llama3", backend="cpu", **kwargs)
