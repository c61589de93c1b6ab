"""The decode step that reads its token and position from the device (model/decode_graph.py): its launches are the
same at every step, so CUDA and Vulkan record them once (``iron.graph``). On every backend the same steps run launch
by launch (``capture=False``) and must give transformers' greedy continuation; on CUDA and Vulkan ``generate``
replays a recording and must give the same tokens as the launch-by-launch loop and transformers. The recording is
kept on the model across ``generate`` calls: a second call (or the timed run after ``warmup``) only replays it, with
the same tokens as the launch-by-launch loop and the float64 NumPy model, greedy and sampled; another prompt length
replays it too; another cache size, sampling parameters or weights record anew."""

from __future__ import annotations

import dataclasses
import gc

import numpy as np
import pytest

import iron
from iron.model import decode_graph, generate
from iron.model.decode_graph import RECORDING, DecodeGraph, forget
from iron.model.llama import SLOT, slot_array
from iron.std.sampling import sample_choices

from .numpy_llama import Model as NumpyModel
from .numpy_llama import forward as numpy_forward
from .numpy_llama import greedy as numpy_greedy
from .test_model_runner import FULL, HERE, VARIANTS, model, reference


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


def test_restart_runs_again_on_the_same_arrays(backend):
    """On every backend: a DecodeGraph restarted (``restart``, the state rewritten on the device) after a reset to
    the same size decodes another prompt, of another length, on the same arrays: the float64 model's greedy path
    each time."""
    _, info = reference(FULL)
    m = model(FULL, backend, None)
    oracle = NumpyModel.load(HERE / FULL)
    steps = 4
    first = list(info["prompt_ids"])
    second = first[3:] + [5]  # shorter, other tokens: the same cache size after rounding to 16
    m.reset(len(first) + steps)
    history = iron.asarray(slot_array(np.full(steps, -1)), backend=backend)
    run = DecodeGraph(m, history, len(first), capture=False)
    arrays = (run.token, run.state, run.history)
    for prompt in (first, second):
        m.reset(len(first) + steps)
        if prompt is second:
            run.restart(len(second))
        run.first(m.prefill(prompt))
        for _ in range(steps - 1):
            run.step()
        assert [int(t) for t in history.numpy()[::SLOT]] == numpy_greedy(oracle, prompt, steps)[0]
        state = run.state.numpy()
        assert (int(state[0]), int(state[SLOT]), int(state[2 * SLOT])) == (m.length, m.length + 1, steps)
    assert (run.token, run.state, run.history) == arrays


def _count_recordings(monkeypatch) -> list:
    """Every recording decode_graph makes from now on, as a list of their backends."""
    made, real = [], decode_graph.graph

    def counting(backend=None):
        made.append(backend)
        return real(backend)

    monkeypatch.setattr(decode_graph, "graph", counting)
    return made


def _plain(monkeypatch, *args, **kwargs):
    """generate launch by launch (IRON_DECODE_GRAPH=0)."""
    with monkeypatch.context() as mp:
        mp.setenv("IRON_DECODE_GRAPH", "0")
        result = generate(*args, **kwargs)
    assert not result.extra["graph"] and not result.extra["graph_reused"]
    return result


def test_generate_keeps_the_recording(backend, monkeypatch):
    """CUDA and Vulkan, greedy: warmup records the step and the timed run replays it; a second call replays it too;
    a shorter prompt (the same cache size) replays it; another cache size records anew, and so does the first size
    again (the reset reallocated the buffers). Every call: the launch-by-launch loop's tokens and the float64
    model's greedy path."""
    if backend not in RECORDING:
        pytest.skip(f"{backend} has no recording")
    _, info = reference(FULL)
    m = model(FULL, backend, None)
    oracle = NumpyModel.load(HERE / FULL)
    prompt = list(info["prompt_ids"])
    forget(m)
    made = _count_recordings(monkeypatch)

    def check(p, n, recordings, reused, warmup=False):
        got = generate(m, p, n, warmup=warmup)
        assert got.extra["graph"] and got.extra["graph_reused"] == reused
        assert len(made) == recordings
        assert got.tokens == _plain(monkeypatch, m, p, n).tokens == numpy_greedy(oracle, p, n)[0]
        assert m.length == len(p) + n - 1
        return got

    first = check(prompt, 8, 1, True, warmup=True)  # the warm-up recorded: the timed run replays only
    assert first.tokens == info["greedy_tokens"][:8]
    check(prompt, 8, 1, True)  # a second call: replays, records nothing
    check(prompt[2:], 8, 1, True)  # 10 + 8 positions: 32 after rounding, as 12 + 8: the same recording
    check(prompt, 24, 2, False)  # 48 positions: new buffers, a new recording
    check(prompt, 8, 3, False)  # 32 again: the reset reallocated, the first recording is stale
    check(prompt, 8, 3, True)


def test_sampled_generate_keeps_the_recording(backend, monkeypatch):
    """CUDA and Vulkan, sampled: the warm-up's recording is replayed by the timed run and a second call; the tokens
    are the launch-by-launch loop's and each one a draw the float64 logits allow with the seed seed + step. Other
    sampling parameters record their own step (and get the loop's tokens); the first ones' recording is kept."""
    if backend not in RECORDING:
        pytest.skip(f"{backend} has no recording")
    _, info = reference(FULL)
    m = model(FULL, backend, None)
    oracle = NumpyModel.load(HERE / FULL)
    prompt, n = list(info["prompt_ids"]), 8
    forget(m)
    made = _count_recordings(monkeypatch)
    hot = dict(temperature=1.5, top_p=0.95, top_k=40, seed=1234)

    def check(kwargs, recordings, reused, warmup=False):
        got = generate(m, prompt, n, warmup=warmup, **kwargs)
        assert got.extra["graph"] and got.extra["graph_reused"] == reused
        assert len(made) == recordings
        assert got.tokens == _plain(monkeypatch, m, prompt, n, **kwargs).tokens
        for s, token in enumerate(got.tokens):
            logits = numpy_forward(oracle, prompt + got.tokens[:s])[-1]
            allowed = sample_choices(logits[None, :], kwargs["temperature"], kwargs["top_p"], kwargs["seed"] + s,
                                     kwargs["top_k"])[0]
            assert token in allowed, (s, token, allowed)
        return got.tokens

    a = check(hot, 1, True, warmup=True)
    assert check(hot, 1, True) == a
    assert a != info["greedy_tokens"][:n]
    b = check(dict(hot, seed=99), 2, False)  # another seed: baked in, a recording of its own
    assert b != a
    check(dict(hot, top_k=8, temperature=0.8), 3, False)
    assert check(hot, 3, True) == a  # the first recording is still kept
    greedy = generate(m, prompt, n)  # greedy: a recording of its own
    assert len(made) == 4 and greedy.tokens == info["greedy_tokens"][:n]


def test_new_weights_are_not_replayed_through_an_old_recording(backend, monkeypatch):
    """A weight array replaced (the same values in a new buffer) makes the kept recording stale: the next call
    records anew and reads the new buffer."""
    if backend not in RECORDING:
        pytest.skip(f"{backend} has no recording")
    _, info = reference(FULL)
    m = model(FULL, backend, None)
    prompt = list(info["prompt_ids"])
    forget(m)
    made = _count_recordings(monkeypatch)
    assert generate(m, prompt, 6).tokens == info["greedy_tokens"][:6]
    assert len(made) == 1
    w = m.weights
    monkeypatch.setattr(m, "weights", dataclasses.replace(w, norm=iron.asarray(w.norm.numpy(), backend=backend)))
    again = generate(m, prompt, 6)
    assert not again.extra["graph_reused"] and len(made) == 2 and again.tokens == info["greedy_tokens"][:6]
    # the recording reads the new array: the final norm's weights negated in it negate the logits (the float64
    # model's greedy path with them negated), replayed without recording again
    new = m.weights.norm
    new.store.write(new.offset, (-w.norm.numpy()).reshape(-1).view(np.uint8))
    oracle = NumpyModel.load(HERE / FULL)
    oracle.weights["model.norm.weight"] = -oracle.weights["model.norm.weight"]
    flipped = generate(m, prompt, 6)
    assert flipped.extra["graph_reused"] and len(made) == 2
    assert flipped.tokens == numpy_greedy(oracle, prompt, 6)[0] != info["greedy_tokens"][:6]
    monkeypatch.setattr(m, "weights", w)
    forget(m)
