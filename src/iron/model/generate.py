"""The generation loop: prefill the prompt, then decode with the KV cache, greedy or sampled, timed.

Each new token is chosen on the device (std/reductions argmax, or std/sampling's top-k / top-p draw from
softmax(logits / temperature) with the seed ``seed + step``) into a slot of a device array, which the next step's
embedding reads in place: the host copies nothing in during decode. It reads each token back as it comes only when it
needs it (an ``on_token`` callback, or stop tokens to watch for); otherwise once, at the end.

Decoding on CUDA and Vulkan, greedy or sampled, replays each step as a recording (a CUDA graph, a Vulkan command
buffer: ``decode_graph``; ``IRON_DECODE_GRAPH=0`` for the launch-by-launch loop, which the other backends use). The
recording is kept on the model (``decode_graph.kept``): a later call with the same cache size and sampling
parameters, whatever its prompt, only replays it (``extra["graph_reused"]``).

Timing: ``prefill_s`` runs from the prompt's upload to its first token on the device (``iron.synchronize``), so it
includes the first choice; ``decode_s`` covers the remaining steps of this call. The first call of each kernel
variant compiles it (and on GPUs autotunes), and the first recorded call runs one step launch by launch and records
the next, so a first run is slower than the ones after it: ``warmup=True`` runs the loop once, untimed, on the same
prompt first (and records the step), so that the timed decode is replays only.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..runtime.device_array import asarray, synchronize
from ..std.reductions import launch_argmax
from ..std.sampling import launch_sample
from ..std.topk import MAX_K
from .config import ModelError
from .decode_graph import graphs_apply, kept
from .llama import SLOT, Llama, slot_array

__all__ = ["GenerationResult", "generate"]


@dataclass
class GenerationResult:
    tokens: list[int]  # the new tokens (the prompt excluded)
    last_prefill_logits: np.ndarray  # (vocab,) float32: the logits at the last prompt position
    prefill_s: float
    decode_s: float
    prompt_len: int
    stopped: bool = False  # ended on a stop token (before max_new_tokens)
    extra: dict = field(default_factory=dict)

    @property
    def prefill_tokens_per_s(self) -> float:
        return self.prompt_len / self.prefill_s if self.prefill_s > 0 else float("inf")

    @property
    def decode_tokens_per_s(self) -> float | None:
        """Decode steps per second (None when there was no decode step: one new token comes from the prefill)."""
        steps = len(self.tokens) - 1
        if steps <= 0:
            return None
        return steps / self.decode_s if self.decode_s > 0 else float("inf")


@dataclass(frozen=True)
class Sampling:
    """Greedy when ``temperature`` is None or <= 0; else a draw from the top ``top_k`` (<= 64) tokens, cut to
    ``top_p`` of the probability (std/sampling's rule)."""

    temperature: float | None = None
    top_p: float = 1.0
    top_k: int = MAX_K
    seed: int = 0

    @property
    def greedy(self) -> bool:
        return self.temperature is None or self.temperature <= 0.0


def generate(model: Llama, prompt_ids: Sequence[int], max_new_tokens: int, temperature: float | None = None,
             top_p: float = 1.0, top_k: int = MAX_K, seed: int = 0, stop_ids: Sequence[int] = (),
             on_token: Callable[[int, int], None] | None = None, warmup: bool = False) -> GenerationResult:
    """``max_new_tokens`` tokens after ``prompt_ids`` (fewer if one of ``stop_ids`` comes, which is kept), greedy
    unless ``temperature`` > 0. ``on_token(step, token)`` is called as each token is known. Resets the model's
    cache to len(prompt) + max_new_tokens positions (rounded up to 16; the same size keeps the cache, and the
    recorded decode step of an earlier call is replayed)."""
    prompt = [int(t) for t in prompt_ids]
    vocab = model.config.vocab_size
    if not prompt:
        raise ModelError("the prompt is empty: give at least one token id")
    bad = [t for t in prompt if not 0 <= t < vocab]
    if bad:
        raise ModelError(f"prompt token ids {bad[:5]} are outside the vocabulary (0 .. {vocab - 1})")
    if max_new_tokens < 1:
        raise ModelError(f"max_new_tokens must be at least 1, not {max_new_tokens}")
    if not 0 < top_k <= MAX_K:
        raise ModelError(f"top_k must be in 1 .. {MAX_K}, not {top_k}")
    sampling = Sampling(temperature, top_p, top_k, seed)
    cache = len(prompt) + max_new_tokens
    if warmup:  # the same cache size: the same kernel variants, autotuning buckets and recording as the timed run
        _run(model, prompt, min(max_new_tokens, 3), sampling, (), None, cache)
    return _run(model, prompt, max_new_tokens, sampling, tuple(int(s) for s in stop_ids), on_token, cache)


def _run(model: Llama, prompt: list[int], max_new: int, sampling: Sampling, stop_ids: tuple[int, ...],
         on_token: Callable[[int, int], None] | None, cache: int) -> GenerationResult:
    be = model.backend
    model.reset(cache)
    replay = kept(model, len(prompt), sampling) if graphs_apply(model) else None
    reused = replay is not None and replay.graph is not None  # recorded by an earlier run: this one only replays
    # token i at element i * SLOT
    out = replay.history if replay is not None else asarray(slot_array(np.zeros(max_new, np.int64)), backend=be)
    watch = on_token is not None or bool(stop_ids)
    synchronize(be)
    start = time.perf_counter()
    logits = model.prefill(prompt)
    if replay is not None:
        replay.first(logits)
    else:
        _choose(logits, model.slot(out, 0), sampling, 0, be)
    last_logits = logits.numpy().reshape(-1).astype(np.float32)  # waits: the prefill and the first choice are done
    prefill_s = time.perf_counter() - start
    tokens: list[int] = []
    stopped = _take(out, 0, tokens, stop_ids, on_token) if watch else False
    start = time.perf_counter()
    for step in range(1, max_new):
        if stopped:
            break
        if replay is not None:
            replay.step()
        else:
            logits = model.decode(model.slot(out, step - 1))
            _choose(logits, model.slot(out, step), sampling, step, be)
        if watch:
            stopped = _take(out, step, tokens, stop_ids, on_token)
    synchronize(be)
    decode_s = time.perf_counter() - start
    if not watch:
        tokens = [int(t) for t in out[0:max_new * SLOT].numpy()[::SLOT]]
    if replay is not None:
        replay.record()  # untimed: a run too short to record (one decode step) leaves the next call a recording
    return GenerationResult(tokens=tokens, last_prefill_logits=last_logits, prefill_s=prefill_s, decode_s=decode_s,
                            prompt_len=len(prompt), stopped=stopped,
                            extra={"graph": replay is not None, "graph_reused": reused})


def _choose(logits, slot, sampling: Sampling, step: int, backend: str) -> None:
    if sampling.greedy:
        launch_argmax(logits, slot, backend)
    else:
        launch_sample(logits, slot, sampling.temperature, sampling.top_p, sampling.seed + step, sampling.top_k,
                      backend)


def _take(out, step: int, tokens: list[int], stop_ids: tuple[int, ...],
          on_token: Callable[[int, int], None] | None) -> bool:
    """Read token ``step`` back (waits for it), report it; True when it is a stop token."""
    token = int(out[step * SLOT:step * SLOT + 1].numpy()[0])
    tokens.append(token)
    if on_token is not None:
        on_token(step, token)
    return token in stop_ids
