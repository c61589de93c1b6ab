"""Decode steps recorded once and replayed per token (issue 19: no host work per token): a CUDA graph on CUDA, one
command buffer on Vulkan (``iron.graph``).

A decode step reads everything that changes from one token to the next from the device: the token (``token``,
written by the previous step's argmax), its position and the cache length (``state``: two slots, position and
position + 1, which ``Llama.decode(..., where=...)`` passes to RoPE, the cache append and attention). The step ends
with ``advance``: both counts move on by one and the new token is written into the history. So the launches of step
s + 1 are those of step s, and ``iron.cuda.graph()`` records them once (the first step's launches, recorded rather
than run); each token is then one graph launch, and the host only counts.

Sampling (temperature > 0) draws step s with the seed ``seed + s``, as the launch-by-launch loop does; in a recording
the draw reads s from the device (``std/sampling``'s ``sample_tokens_at``: the position in ``state`` minus the
prompt's last), so one recorded step serves every token. The backends without a recording (the interpreter,
msl-cpu, HIP, Metal) run the loop launch by launch.

On CUDA, ``IRON_CUDA_PDL=1`` (opt-in, not yet measured to pay; ``runtime/cuda.py:pdl_enabled``) makes every kernel of
the step wait for the previous one in-kernel and be launched with programmatic stream serialization, and the
recording keeps those dependencies as programmatic edges: each kernel's launch and ramp may then overlap the previous
kernel's run instead of following its end.
"""

from __future__ import annotations

import os

import numpy as np

from ..frontend import kernel
from ..lang import Tensor, constexpr, i32
from ..runtime.device_array import Array, asarray, empty, graph
from ..std.reductions import launch_argmax
from ..std.sampling import launch_sample
from .llama import SLOT, Llama, slot_array

__all__ = ["DecodeGraph", "graphs_apply"]


@kernel
def advance(token: Tensor[i32], state: Tensor[i32], history: Tensor[i32], base: int, SLOT: constexpr):
    """One thread: position and length (``state[0]``, ``state[SLOT]``) move on by one; the token chosen for the new
    position goes to ``history[(position - base) * SLOT]``."""
    p = state[0] + 1
    state[0] = p
    state[SLOT] = state[SLOT] + 1
    history[(p - base) * SLOT] = token[0]


#: backends whose launches ``iron.graph`` records for replay
RECORDING = ("cuda", "vulkan")


def graphs_apply(model: Llama) -> bool:
    """Whether ``generate`` replays decode steps as a recording on this model's backend (a CUDA graph, a Vulkan
    command buffer); IRON_DECODE_GRAPH=0 turns it off."""
    return model.backend in RECORDING and os.environ.get("IRON_DECODE_GRAPH", "1") != "0"


class DecodeGraph:
    """The decode loop of ``model`` after a prefill of ``prompt_len`` tokens; ``history`` (a slot array) receives
    token s of the continuation at slot s. Greedy, or with ``sampling`` (generate.Sampling, not greedy) drawn
    with the seed ``sampling.seed + s``."""

    def __init__(self, model: Llama, history: Array, prompt_len: int, capture: bool = True, sampling=None):
        be = model.backend
        self.sampling = None if sampling is None or sampling.greedy else sampling
        self.capture = capture  # False: every step launch by launch (the same launches, for backends without graphs)
        self.model, self.history, self.base = model, history, prompt_len
        self.token = empty((1,), i32, backend=be)
        # position, length: prompt_len - 1 and prompt_len, so that the first advance (after the prefill's choice)
        # moves them to the first decode step's
        self.state = asarray(slot_array(np.array([prompt_len - 1, prompt_len])), backend=be)
        self.where = (model.slot(self.state, 0), model.slot(self.state, 1))
        self.graph = None
        self.steps = 0

    def first(self, logits: Array) -> None:
        """Choose the prefill's token (greedy) into ``token`` and history slot 0."""
        self._choose(logits)

    def step(self) -> None:
        """One decode step. The first runs launch by launch (compiling and autotuning what it needs: timing cannot
        run inside a capture); the second is recorded and launched; the rest replay the recording."""
        model = self.model
        model._check_room(1)
        if self.steps == 0 or not self.capture:
            self._choose(model.decode(self.token, where=self.where))
        else:
            if self.graph is None:
                with graph(model.backend) as g:
                    self._choose(model.decode(self.token, where=self.where))
                model.length -= 1  # recorded, not run
                self.graph = g
            self.graph.launch()
            model.length += 1
        self.steps += 1

    def _choose(self, logits: Array) -> None:
        be, sp = self.model.backend, self.sampling
        if sp is None:
            launch_argmax(logits, self.token, be)
        else:  # step s = state[0] - (prompt_len - 1): the seed sp.seed + s, read on the device
            launch_sample(logits, self.token, sp.temperature, sp.top_p, sp.seed - (self.base - 1), sp.top_k, be,
                          step=self.where[0])
        advance[1](self.token, self.state, self.history, self.base, SLOT, backend=be)
