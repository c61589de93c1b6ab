"""iron.model against transformers' recorded references (tests/models/<variant>/, scripts/make_model_refs.py), on
every backend of the ``backend`` fixture: the prefill logits at every prompt position, the decode step logits of the
greedy path (teacher-forced, KV cache on the device), the greedy continuation of ``generate``, sampling, and the
loader's refusals.

Tolerances (max |ours - reference| over max |reference|, per logits array):

- f32 checkpoints, against transformers in float64 (``prefill_logits``, ``step_logits``): 1e-4. Seen: 4e-7 to 1.5e-6
  (f32 sums over 64-128 terms, f32 RoPE tables); transformers' own f32 run is 1.2e-6 off.
- the bf16 checkpoint run in bf16 (every activation rounded to bf16, as torch's bf16 model does), against the float64
  reference of the same weights: 0.05. Seen: 0.018; transformers' own bf16 run is 0.078 off, so both runs' 16-token
  greedy paths (top-2 gaps >= 0.14) agree with the float64 one.
- the bf16 checkpoint upcast to f32 at load (``dtype="f32"``, exact): 1e-4 against the same float64 reference;
  converted to f16 at load and run in f16: 0.01 (seen: 2e-3).

Test time: a decode step runs ~30 launches; the interpreter takes ~0.1 s a step, Vulkan (lavapipe) ~0.02 s, msl-cpu
~1.3 s (its GEMV groups run as threads: 0.13 s a launch). So on msl-cpu the 16 teacher-forced steps run on
``llama3`` (GQA, llama3 RoPE, tied head) and every other check of the decode path takes its first 4 steps
(``STEPS``).
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

import numpy as np
import pytest

from iron.model import Llama, ModelError, generate, load_config, read_safetensors
from iron.model.config import LlamaConfig
from iron.std.sampling import sample_choices

from .numpy_llama import Model as NumpyModel
from .numpy_llama import forward as numpy_forward
from .numpy_llama import read_safetensors as numpy_read_safetensors

HERE = Path(__file__).parent
VARIANTS = ["llama2", "llama3", "llama3_bf16", "mistral", "qwen2"]
#: (variant, dtype to run in): the bf16 checkpoint also upcast to f32 and converted to f16 at load
RUNS = [(v, None) for v in VARIANTS] + [("llama3_bf16", "f32"), ("llama3_bf16", "f16")]
#: decode steps checked on a backend where they are slow (see the module docstring); 16 elsewhere and for FULL
STEPS = {"msl-cpu": 4}
FULL = "llama3"
TOL = {"f32": 1e-4, "f16": 0.01, "bf16": 0.05}


def rel_err(got: np.ndarray, want: np.ndarray) -> float:
    return float(np.abs(got.astype(np.float64) - want).max() / np.abs(want).max())


@functools.cache
def reference(variant: str) -> tuple[dict, dict]:
    folder = HERE / variant
    return dict(np.load(folder / "ref.npz")), json.loads((folder / "ref.json").read_text())


@functools.cache
def model(variant: str, backend: str, dtype: str | None) -> Llama:
    return Llama.load(HERE / variant, dtype=dtype, backend=backend)


def steps_for(variant: str, backend: str, full: bool = True) -> int:
    """Decode steps to check: 16, or on a slow backend STEPS[backend] (16 for FULL where ``full``)."""
    return 16 if full and variant == FULL else STEPS.get(backend, 16)


@pytest.mark.parametrize("variant,dtype", RUNS, ids=[f"{v}-{d or 'native'}" for v, d in RUNS])
def test_prefill_logits_every_position(backend, variant, dtype):
    ref, info = reference(variant)
    m = model(variant, backend, dtype)
    m.reset(len(ref["prompt"]))
    logits = m.prefill(ref["prompt"].tolist(), all_logits=True).numpy()
    assert logits.shape == (12, 256)
    tol = TOL[m.dtype]
    assert rel_err(logits, ref["prefill_logits"]) < tol
    if m.dtype == "bf16":  # as close to the float64 run as transformers' bf16 run is, or closer
        assert rel_err(logits, ref["prefill_logits"]) < rel_err(ref["prefill_logits_bf16"], ref["prefill_logits"])
    assert m.length == 12


@pytest.mark.parametrize("variant,dtype", RUNS, ids=[f"{v}-{d or 'native'}" for v, d in RUNS])
def test_decode_steps_teacher_forced(backend, variant, dtype):
    """The greedy path's tokens fed one by one through the KV cache: each step's logits near transformers' and
    their argmax the recorded token."""
    ref, info = reference(variant)
    m = model(variant, backend, dtype)
    steps = steps_for(variant, backend)
    m.reset(12 + steps)
    logits = [m.prefill(ref["prompt"].tolist()).numpy()[0]]
    for token in info["greedy_tokens"][:steps - 1]:
        logits.append(m.decode(token).numpy()[0])
    logits = np.stack(logits)
    assert [int(i) for i in logits.argmax(axis=1)] == info["greedy_tokens"][:steps]
    assert rel_err(logits, ref["step_logits"][:steps]) < TOL[m.dtype]


@pytest.mark.parametrize("variant", VARIANTS)
def test_generate_greedy(backend, variant):
    ref, info = reference(variant)
    steps = steps_for(variant, backend, full=False)  # FULL's 16 steps are test_decode_steps_teacher_forced's
    m = model(variant, backend, None)
    result = generate(m, info["prompt_ids"], steps)
    assert result.tokens == info["greedy_tokens"][:steps]
    assert rel_err(result.last_prefill_logits, ref["step_logits"][0]) < TOL[m.dtype]
    assert result.prefill_tokens_per_s > 0 and result.prompt_len == 12
    assert (result.decode_tokens_per_s is None) == (steps == 1)


def test_generate_streams_and_stops(backend):
    """``on_token`` sees each token as it comes; a stop token ends the run (and is kept)."""
    _, info = reference(FULL)
    seen = []
    stop = info["greedy_tokens"][2]
    result = generate(model(FULL, backend, None), info["prompt_ids"], 8, stop_ids=[stop],
                      on_token=lambda step, tok: seen.append((step, tok)))
    assert result.tokens == info["greedy_tokens"][:3] and result.stopped
    assert seen == list(enumerate(info["greedy_tokens"][:3]))


def test_generate_sampled(backend):
    """Sampling is reproducible from the seed; the first token is one std/sampling's rule allows for the prefill
    logits; a low temperature follows the greedy path, a high one leaves it."""
    _, info = reference(FULL)
    m = model(FULL, backend, None)
    a = generate(m, info["prompt_ids"], 3, temperature=1.5, top_p=0.95, seed=7)
    b = generate(m, info["prompt_ids"], 3, temperature=1.5, top_p=0.95, seed=7)
    assert a.tokens == b.tokens
    assert a.tokens[0] in sample_choices(a.last_prefill_logits[None, :], 1.5, 0.95, 7)[0]
    assert a.tokens != info["greedy_tokens"][:3]
    cold = generate(m, info["prompt_ids"], 2, temperature=1e-3, seed=1)
    assert cold.tokens == info["greedy_tokens"][:2]


def test_prefill_continues_cache(backend):
    """A prompt prefilled in two pieces (the second through the paged fallback, over the cache) gives the logits of
    one prefill."""
    ref, _ = reference("qwen2")
    m = model("qwen2", backend, None)
    m.reset(12)
    m.prefill(ref["prompt"][:5].tolist())
    logits = m.prefill(ref["prompt"][5:].tolist(), all_logits=True).numpy()
    assert m.length == 12
    assert rel_err(logits, ref["prefill_logits"][5:]) < TOL["f32"]


# --- loading and refusals (host only) ------------------------------------------------------------------------------


def _config(variant: str) -> dict:
    return json.loads((HERE / variant / "config.json").read_text())


def test_config_reads_both_rope_spellings():
    new = _config("llama3")
    old = {k: v for k, v in new.items() if k != "rope_parameters"}
    scaling = {k: v for k, v in new["rope_parameters"].items() if k not in ("rope_theta", "rope_type")}
    old |= {"rope_theta": 500000.0, "rope_scaling": {"type": "llama3", **scaling}}
    a, b = LlamaConfig.from_dict(old), LlamaConfig.from_dict(new)
    assert a == b and a.rope["rope_type"] == "llama3"
    np.testing.assert_array_equal(a.rope_inv_freq(), b.rope_inv_freq())
    c = load_config(HERE / "qwen2")
    assert (c.num_heads, c.num_kv_heads, c.head_dim, c.tie_word_embeddings) == (4, 2, 16, True)


@pytest.mark.parametrize("change,message", [
    ({"sliding_window": 4096}, "sliding-window attention"),
    ({"rope_parameters": {"rope_type": "yarn", "rope_theta": 1e4, "factor": 4.0}}, "RoPE type 'yarn'"),
    ({"model_type": "gemma"}, "model_type 'gemma'"),
    ({"hidden_act": "gelu"}, "hidden_act 'gelu'"),
    ({"quantization_config": {"quant_method": "awq"}}, "quantized checkpoints"),
    ({"num_key_value_heads": 3}, "not a multiple of 3"),
])
def test_config_refusals(change, message):
    with pytest.raises(ModelError, match=message):
        LlamaConfig.from_dict(_config("mistral") | change)


def test_qwen2_window_off_is_accepted():
    cfg = _config("qwen2") | {"sliding_window": 32768, "use_sliding_window": False}
    assert LlamaConfig.from_dict(cfg).model_type == "qwen2"
    with pytest.raises(ModelError, match="sliding-window"):
        LlamaConfig.from_dict(cfg | {"use_sliding_window": True})


def test_missing_folder_and_files(tmp_path):
    with pytest.raises(ModelError, match="no such checkpoint directory"):
        load_config(tmp_path / "nope")
    with pytest.raises(ModelError, match="no config.json"):
        load_config(tmp_path)
    (tmp_path / "config.json").write_text((HERE / "llama2" / "config.json").read_text())
    with pytest.raises(ModelError, match="no \\*.safetensors"):
        Llama.load(tmp_path, backend="cpu")
    (tmp_path / "generation_config.json").write_text("[2]")  # optional, not an object: ignored
    assert load_config(tmp_path).hidden_size > 0
    for bad, message in (("{\"hidden", "cannot read it as JSON"), ("[1, 2]", "a JSON list, not the object")):
        (tmp_path / "config.json").write_text(bad)
        with pytest.raises(ModelError, match=message):
            load_config(tmp_path)


@pytest.mark.parametrize("variant", VARIANTS)
def test_safetensors_reader(variant):
    """The reader (the library where installed, else the mapped reader) gives the tensors the NumPy oracle reads."""
    ours = read_safetensors(HERE / variant / "model.safetensors")
    theirs = numpy_read_safetensors(HERE / variant / "model.safetensors")
    assert ours.keys() == theirs.keys()
    for name, array in theirs.items():
        np.testing.assert_array_equal(ours[name].astype(np.float32), array)
    if variant.endswith("_bf16"):
        assert {str(a.dtype) for a in ours.values()} == {"bfloat16"}


def test_unknown_tensor_is_refused(tmp_path):
    """A tensor the runner would ignore (a feature it does not know) stops the load."""
    from iron.model.weights import upload_weights

    tensors = read_safetensors(HERE / "llama2" / "model.safetensors")
    tensors = dict(tensors) | {"model.layers.0.self_attn.q_norm.weight": np.ones(16, np.float32)}
    with pytest.raises(ModelError, match="q_norm"):
        upload_weights(load_config(HERE / "llama2"), tensors, backend="cpu")


def test_cache_overflow_is_refused():
    m = model("llama2", "cpu", None)
    m.reset(4)  # rounded up to 16 positions
    with pytest.raises(ModelError, match="KV cache holds 16 positions"):
        m.prefill(list(range(17)))


def _write_safetensors(path: Path, tensors: dict[str, np.ndarray]) -> None:
    """A float32 safetensors file, written from the format's definition."""
    tensors = {name: np.ascontiguousarray(a, dtype="<f4") for name, a in tensors.items()}
    header, offset = {}, 0
    for name, a in tensors.items():
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [offset, offset + a.nbytes]}
        offset += a.nbytes
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    path.write_bytes(len(raw).to_bytes(8, "little") + raw + b"".join(a.tobytes() for a in tensors.values()))


def test_sharded_checkpoint(tmp_path):
    """Shards listed by model.safetensors.index.json load as the single file does; a stray export beside them
    (another *.safetensors, e.g. Mistral's consolidated.safetensors) is not read."""
    tensors = numpy_read_safetensors(HERE / "llama2" / "model.safetensors")
    names = sorted(tensors)
    shards = {"model-00001-of-00002.safetensors": names[::2], "model-00002-of-00002.safetensors": names[1::2]}
    for file, part in shards.items():
        _write_safetensors(tmp_path / file, {n: tensors[n] for n in part})
    _write_safetensors(tmp_path / "consolidated.safetensors", {"tok_embeddings.weight": np.zeros((2, 2))})
    index = {"weight_map": {n: file for file, part in shards.items() for n in part}}
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps(index))
    (tmp_path / "config.json").write_text((HERE / "llama2" / "config.json").read_text())
    ref, _ = reference("llama2")
    m = Llama.load(tmp_path, backend="cpu")
    m.reset(12)
    assert rel_err(m.prefill(ref["prompt"].tolist()).numpy()[0], ref["step_logits"][0]) < TOL["f32"]


def test_biases_everywhere(backend, tmp_path):
    """Biases on every projection (Llama's attention_bias and mlp_bias), through prefill and decode, against the
    float64 NumPy model (tests/models/numpy_llama.py), which uses a bias wherever the checkpoint holds one."""
    rng = np.random.default_rng(5)
    tensors = dict(numpy_read_safetensors(HERE / "llama2" / "model.safetensors"))
    for name in [n for n in tensors if n.endswith("proj.weight")]:
        tensors[name.replace(".weight", ".bias")] = (0.5 * rng.standard_normal(tensors[name].shape[0]))
    _write_safetensors(tmp_path / "model.safetensors", tensors)
    config = _config("llama2") | {"attention_bias": True, "mlp_bias": True}
    (tmp_path / "config.json").write_text(json.dumps(config))
    prompt = [3, 1, 4, 1, 5, 9, 2, 6]
    want = numpy_forward(NumpyModel.load(tmp_path), prompt + [7, 8])
    m = Llama.load(tmp_path, backend=backend)
    m.reset(10)
    got = [m.prefill(prompt, all_logits=True).numpy()]
    got += [m.decode(7).numpy(), m.decode(8).numpy()]
    assert rel_err(np.concatenate(got), want) < TOL["f32"]
