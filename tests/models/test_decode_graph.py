"""The decode step that reads its token and position from the device (model/decode_graph.py): its launches are the
same at every step, so CUDA and Vulkan record them once (``iron.graph``). On every backend the same steps run launch
by launch (``capture=False``) and must give transformers' greedy continuation; on CUDA and Vulkan ``generate``
replays a recording and must give the same tokens as the launch-by-launch loop and transformers."""

from __future__ import annotations

import gc

import numpy as np
import pytest

import iron
from iron.model import generate
from iron.model.decode_graph import RECORDING, DecodeGraph
from iron.model.llama import SLOT, slot_array

from .test_model_runner import FULL, VARIANTS, model, reference


@pytest.mark.parametrize("variant", [FULL, "qwen2"])
def test_device_state_steps_follow_transformers(backend, variant):
    _, info = reference(variant)
    m = model(variant, backend, None)
    prompt, steps = info["prompt_ids"], 6
    m.reset(len(prompt) + steps)
    history = iron.asarray(slot_array(np.full(steps, -1)), backend=backend)
    run = DecodeGraph(m, history, len(prompt), capture=False)
    run.first(m.prefill(prompt))
    for _ in range(steps - 1):
        run.step()
    assert [int(t) for t in history.numpy()[::SLOT]] == info["greedy_tokens"][:steps]
    assert m.length == len(prompt) + steps - 1
    state = run.state.numpy()
    assert (int(state[0]), int(state[SLOT])) == (m.length, m.length + 1)


def _cuda_or_skip():
    from iron.runtime import unavailable_reason

    why = unavailable_reason("cuda")
    if why:
        pytest.skip(f"cuda unavailable: {why}")


@pytest.mark.parametrize("variant", VARIANTS)
def test_generate_replays_a_recording(backend, variant, monkeypatch):
    """CUDA and Vulkan: greedy generate records one decode step and replays it; same tokens as transformers and as
    the launch-by-launch loop."""
    if backend not in RECORDING:
        pytest.skip(f"{backend} has no recording")
    _, info = reference(variant)
    m = model(variant, backend, None)
    graphed = generate(m, info["prompt_ids"], 16)
    assert graphed.extra["graph"]
    assert graphed.tokens == info["greedy_tokens"][:16]
    monkeypatch.setenv("IRON_DECODE_GRAPH", "0")
    plain = generate(m, info["prompt_ids"], 16)
    assert not plain.extra["graph"] and plain.tokens == graphed.tokens


def test_memory_made_while_capturing_lives_with_the_graph(rng):
    """Workspaces a launch helper allocates inside iron.cuda.graph() stay the graph's: replays after the Python
    objects are gone still read and write them (argmax's scratch here)."""
    _cuda_or_skip()
    from iron.std.reductions import launch_argmax

    x = iron.asarray(rng.standard_normal((4, 5000)).astype(np.float32), backend="cuda")
    out = iron.empty((4,), iron.i32, backend="cuda")
    launch_argmax(x, out, "cuda")  # compiles and tunes outside the capture
    with iron.cuda.graph() as g:
        launch_argmax(x, out, "cuda")
    gc.collect()
    junk = [iron.zeros((1 << 16,), iron.f32, backend="cuda") for _ in range(8)]  # reuse of freed pool memory
    for _ in range(3):
        host = rng.standard_normal((4, 5000)).astype(np.float32)
        # new inputs and a poisoned output, written into the memory the graph reads and writes (bytes)
        x.store.write(0, host.reshape(-1).view(np.uint8))
        out.store.write(0, np.full(4, -1, np.int32).view(np.uint8))
        g.launch()
        assert np.array_equal(out.numpy(), host.argmax(axis=1))
    del junk


@pytest.mark.parametrize("variant", [FULL, "qwen2"])
def test_sampled_generate_replays_a_recording(backend, variant, monkeypatch):
    """CUDA and Vulkan: sampled generate records one decode step too (the draw's seed, seed + step, read on the
    device) and gives the launch-by-launch loop's tokens for the same seed; another seed gives other tokens."""
    if backend not in RECORDING:
        pytest.skip(f"{backend} has no recording")
    _, info = reference(variant)
    m = model(variant, backend, None)
    kwargs = dict(temperature=1.5, top_p=0.95, top_k=40)
    graphed = generate(m, info["prompt_ids"], 12, seed=1234, **kwargs)
    assert graphed.extra["graph"]
    monkeypatch.setenv("IRON_DECODE_GRAPH", "0")
    plain = generate(m, info["prompt_ids"], 12, seed=1234, **kwargs)
    assert not plain.extra["graph"] and plain.tokens == graphed.tokens
    other = generate(m, info["prompt_ids"], 12, seed=99, **kwargs)
    assert other.tokens != plain.tokens


def test_sampled_device_state_steps_match_the_loop(backend):
    """On every backend, DecodeGraph's sampled steps (capture=False: the step read from the device) draw the same
    tokens as generate's launch-by-launch loop with the same seed."""
    _, info = reference(FULL)
    m = model(FULL, backend, None)
    prompt, steps = info["prompt_ids"], 5
    from iron.model.generate import Sampling

    sampling = Sampling(1.5, 0.95, 40, 7)
    m.reset(len(prompt) + steps)
    history = iron.asarray(slot_array(np.full(steps, -1)), backend=backend)
    run = DecodeGraph(m, history, len(prompt), capture=False, sampling=sampling)
    run.first(m.prefill(prompt))
    for _ in range(steps - 1):
        run.step()
    loop = generate(m, prompt, steps, temperature=1.5, top_p=0.95, top_k=40, seed=7)
    assert [int(t) for t in history.numpy()[::SLOT]] == loop.tokens
