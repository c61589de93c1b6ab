"""The recorded transformers references (tests/models/<variant>/, made by scripts/make_model_refs.py) against an
independent float64 NumPy forward pass (numpy_llama.py): the data, the checkpoints and our reading of the configs
agree, so the NumPy model can stand in as the oracle for Iron's model runner. No torch needed."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from .numpy_llama import Config, Model, forward, greedy, read_safetensors, rope_inv_freq

HERE = Path(__file__).parent
VARIANTS = sorted(p.parent.name for p in HERE.glob("*/ref.json"))
EXPECTED = {"llama2", "llama3", "llama3_bf16", "mistral", "qwen2"}


def rel_err(got: np.ndarray, want: np.ndarray) -> float:
    """Largest absolute difference, relative to the largest |logit|."""
    return float(np.abs(got - want).max() / np.abs(want).max())


def load(variant: str) -> tuple[Model, dict, dict]:
    folder = HERE / variant
    return Model.load(folder), dict(np.load(folder / "ref.npz")), json.loads((folder / "ref.json").read_text())


def test_every_variant_is_recorded():
    assert set(VARIANTS) == EXPECTED


@pytest.mark.parametrize("variant", VARIANTS)
def test_prefill_logits_match_transformers(variant):
    model, ref, info = load(variant)
    logits = forward(model, ref["prompt"])
    assert logits.shape == (12, 256)
    assert rel_err(logits, ref["prefill_logits"]) < 1e-11  # transformers in float64 throughout: ~3e-15 seen
    assert rel_err(logits, ref["prefill_logits_f64_stock"]) < 2e-6  # its float32 RMSNorm/softmax/RoPE islands
    low, bound = ("bf16", 0.2) if info["weights_dtype"] == "bfloat16" else ("f32", 5e-6)
    assert rel_err(logits, ref[f"prefill_logits_{low}"]) < bound


@pytest.mark.parametrize("variant", VARIANTS)
def test_greedy_continuation_matches_transformers(variant):
    model, ref, info = load(variant)
    tokens, steps = greedy(model, ref["prompt"], 16)
    assert tokens == ref["greedy_tokens"].tolist() == info["greedy_tokens"]
    assert all(run == tokens for run in info["greedy_tokens_generate"].values())  # generate() agreed in every run
    assert rel_err(steps, ref["step_logits"]) < 1e-11  # full recompute here, KV-cache decode there


@pytest.mark.parametrize("variant", VARIANTS)
def test_greedy_path_is_not_fragile(variant):
    _, ref, info = load(variant)
    top = np.sort(ref["step_logits"], axis=-1)
    gaps = top[:, -1] - top[:, -2]
    np.testing.assert_allclose(gaps, info["top2_gaps"], rtol=1e-12)
    assert gaps.min() > 0.05  # float32 noise on these logits is ~1e-5: a float32 runner must find the same tokens
    assert len(set(info["greedy_tokens"])) >= 8
    assert info["prompt_ids"] == ref["prompt"].tolist() and len(info["prompt_ids"]) == 12


@pytest.mark.parametrize("variant", VARIANTS)
def test_checkpoint_files(variant):
    folder = HERE / variant
    assert sum(f.stat().st_size for f in folder.iterdir()) < 1 << 20
    config = json.loads((folder / "config.json").read_text())
    raw = read_safetensors(folder / "model.safetensors")
    assert ("lm_head.weight" in raw) == (not config["tie_word_embeddings"])
    header_len = int.from_bytes((folder / "model.safetensors").read_bytes()[:8], "little")
    header = json.loads((folder / "model.safetensors").read_bytes()[8:8 + header_len])
    dtypes = {meta["dtype"] for name, meta in header.items() if name != "__metadata__"}
    assert dtypes == ({"BF16"} if variant.endswith("_bf16") else {"F32"})


def test_variant_features():
    """Each variant carries the feature it stands for."""
    configs = {v: json.loads((HERE / v / "config.json").read_text()) for v in VARIANTS}
    cfg = {v: Config.from_json(c) for v, c in configs.items()}
    assert cfg["llama2"].num_kv_heads == cfg["llama2"].num_heads and not cfg["llama2"].tie_word_embeddings
    assert cfg["llama2"].rope == {"rope_type": "default", "rope_theta": 10000.0}
    assert cfg["llama3"].num_kv_heads < cfg["llama3"].num_heads and cfg["llama3"].tie_word_embeddings
    assert cfg["llama3"].rope["rope_type"] == "llama3" and cfg["llama3"].rope["rope_theta"] == 500000.0
    assert configs["mistral"]["sliding_window"] is None and cfg["mistral"].num_kv_heads < cfg["mistral"].num_heads
    biases = {k.split(".")[-2] for k in read_safetensors(HERE / "qwen2" / "model.safetensors") if k.endswith("bias")}
    assert biases == {"q_proj", "k_proj", "v_proj"}


def test_llama3_scaling_reaches_all_three_bands():
    """With original_max_position_embeddings 64 the 8 frequencies fall in every band: kept, blended, divided."""
    config = Config.from_json(json.loads((HERE / "llama3" / "config.json").read_text()))
    scaled = rope_inv_freq(config)
    plain = rope_inv_freq(dataclasses.replace(config, rope={"rope_type": "default", "rope_theta": 500000.0}))
    ratio = plain / scaled
    assert ratio[0] == 1.0 and 1.0 < ratio[1] < 8.0 and np.allclose(ratio[2:], 8.0)


def _drop(model: Model, what: str) -> Model:
    weights = dict(model.weights)
    for name in [n for n in weights if what in n]:
        weights[name] = np.ones_like(weights[name]) if "norm" in what else np.zeros_like(weights[name])
    return dataclasses.replace(model, weights=weights)


MISREADINGS = {
    "llama3 scaling ignored": ("llama3", lambda m: dataclasses.replace(
        m, config=dataclasses.replace(m.config, rope={"rope_type": "default", "rope_theta": 500000.0}))),
    "rope_theta 10000 assumed": ("mistral", lambda m: dataclasses.replace(
        m, config=dataclasses.replace(m.config, rope={"rope_type": "default", "rope_theta": 10000.0}))),
    "qwen2 biases ignored": ("qwen2", lambda m: _drop(m, ".bias")),
    "norm weights ignored": ("llama2", lambda m: _drop(m, "layernorm.weight")),
    "untied head replaced by embedding": ("llama2", lambda m: dataclasses.replace(
        m, weights={**m.weights, "lm_head.weight": m.weights["model.embed_tokens.weight"]})),
}


@pytest.mark.parametrize("misreading", sorted(MISREADINGS))
def test_references_catch_misreadings(misreading):
    """The data pins each feature down: an oracle that misreads it is far off."""
    variant, misread = MISREADINGS[misreading]
    model, ref, _ = load(variant)
    assert rel_err(forward(misread(model), ref["prompt"]), ref["prefill_logits"]) > 1e-3


def test_legacy_rope_config_names():
    """transformers 4.x files spell llama3 RoPE as rope_theta + rope_scaling (with `type` or `rope_type`)."""
    new = json.loads((HERE / "llama3" / "config.json").read_text())
    old = {k: v for k, v in new.items() if k != "rope_parameters"}
    scaling = {k: v for k, v in new["rope_parameters"].items() if k not in ("rope_theta", "rope_type")}
    old |= {"rope_theta": 500000.0, "rope_scaling": {"type": "llama3", **scaling}}
    assert Config.from_json(old) == Config.from_json(new)


@pytest.mark.parametrize("variant", [v for v in VARIANTS if not v.endswith("_bf16")])
def test_safetensors_reader_matches_the_library(variant):
    st = pytest.importorskip("safetensors.numpy", reason="safetensors not installed (the reader is checked by hand)")
    ours = read_safetensors(HERE / variant / "model.safetensors")
    theirs = st.load_file(HERE / variant / "model.safetensors")
    assert ours.keys() == theirs.keys()
    for name, array in theirs.items():
        np.testing.assert_array_equal(ours[name], array)
