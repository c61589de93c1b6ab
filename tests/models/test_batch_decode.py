"""Batched greedy decoding (model/batch.py) on every backend of the ``backend`` fixture: B prompts of different
lengths decoded in lockstep must give, per prompt, the float64 NumPy model's greedy continuation (tests/models/
numpy_llama.py, no KV cache: an independent schedule) and transformers' recorded one for the reference prompt; each
step's logits row within the runner's tolerance of the NumPy model's logits for that sequence; a recorded step
(CUDA, Vulkan) the same as the launch-by-launch one. Also: the prompt activations and KV cache are reused across
``generate`` calls, and the batch's refusals."""

from __future__ import annotations

import numpy as np
import pytest

from iron.model import ModelError, generate
from iron.model.batch import BatchDecoder
from iron.model.decode_graph import RECORDING

from .numpy_llama import Model as NumpyModel
from .numpy_llama import forward as numpy_forward
from .numpy_llama import greedy as numpy_greedy
from .test_model_runner import HERE, TOL, model, reference, rel_err

STEPS = 5


def _prompts(info: dict, rng: np.random.Generator, vocab: int) -> list[list[int]]:
    """The reference prompt, and two fresh random ones: shorter and longer than it."""
    ref = list(info["prompt_ids"])
    return [ref, rng.integers(0, vocab, 3).tolist(), rng.integers(0, vocab, len(ref) + 5).tolist()]


@pytest.mark.parametrize("variant", ["llama3", "qwen2"])
def test_batch_follows_the_float64_model(backend, variant, rng):
    _, info = reference(variant)
    m = model(variant, backend, None)
    prompts = _prompts(info, rng, m.config.vocab_size)
    oracle = NumpyModel.load(HERE / variant)
    run = BatchDecoder(m, prompts, STEPS, capture=False)
    run.prefill()
    for step in range(1, STEPS):
        run.step()
        logits = run.logits.numpy().astype(np.float64)
        so_far = run.tokens()
        for b, prompt in enumerate(prompts):  # step s read token s - 1: logits at the position after it
            want = numpy_forward(oracle, prompt + so_far[b][:step])[-1]
            assert rel_err(logits[b], want) < TOL[m.dtype], (b, step)
    got = run.tokens()
    for b, prompt in enumerate(prompts):
        assert got[b] == numpy_greedy(oracle, prompt, STEPS)[0], b
    assert got[0] == info["greedy_tokens"][:STEPS]  # transformers' own continuation of the reference prompt


def test_batch_equals_one_sequence_at_a_time(backend, rng):
    """Every prompt alone through ``generate`` (batch 1, its own code path) gives the batch's tokens; a recording
    (CUDA, Vulkan) replays to the same tokens as launch by launch."""
    _, info = reference("llama3")
    m = model("llama3", backend, None)
    prompts = _prompts(info, rng, m.config.vocab_size)
    batched = BatchDecoder(m, prompts, STEPS + 2).run()
    assert batched == [generate(m, p, STEPS + 2).tokens for p in prompts]
    if backend in RECORDING:
        plain = BatchDecoder(m, prompts, STEPS + 2, capture=False)
        assert plain.run() == batched and not plain.recording
        again = BatchDecoder(m, prompts, STEPS + 2)
        assert again.run() == batched and again.recording is not None


def test_prompt_buffers_and_cache_are_reused(backend):
    """A second prompt of the same length runs in the first one's activations and cache (no allocation: the same
    addresses, so launchers and descriptors stay cached), and gives the same answer."""
    _, info = reference("llama3")
    m = model("llama3", backend, None)
    first = generate(m, info["prompt_ids"], 3)
    rows, cache = m._prompt_rows, m.k_cache[0]
    second = generate(m, info["prompt_ids"], 3)
    assert m._prompt_rows is rows and m.k_cache[0] is cache
    assert second.tokens == first.tokens == info["greedy_tokens"][:3]
    np.testing.assert_array_equal(second.last_prefill_logits, first.last_prefill_logits)
    generate(m, info["prompt_ids"][:5], 3)  # another length: new activations
    assert m._prompt_rows is not rows


def test_batch_refusals(backend):
    m = model("llama3", backend, None)
    with pytest.raises(ModelError, match="at least one prompt"):
        BatchDecoder(m, [], 4)
    with pytest.raises(ModelError, match="every prompt at least one token"):
        BatchDecoder(m, [[1, 2], []], 4)
    with pytest.raises(ModelError, match="at most 64 sequences"):
        BatchDecoder(m, [[1]] * 65, 4)
    with pytest.raises(ModelError, match="outside the vocabulary"):
        BatchDecoder(m, [[1, 999]], 4)
    with pytest.raises(ModelError, match="max_new_tokens"):
        BatchDecoder(m, [[1]], 0)
    run = BatchDecoder(m, [[1, 2]], 2, capture=False)
    with pytest.raises(ModelError, match="prefill"):
        run.step()
    run.prefill()
    run.step()
    with pytest.raises(ModelError, match="all 2 new tokens"):
        run.step()
    assert len(run.tokens()[0]) == 2
    assert generate(m, [1, 2], 2).tokens == run.tokens()[0]  # the model is usable alone again
