"""Decode steps recorded once and replayed per token (issue 19: no host work per token): a CUDA graph on CUDA, one
command buffer on Vulkan (``iron.graph``).

A decode step reads everything that changes from one token to the next from the device: the token (``token``,
written by the previous step's choice) and ``state``, three slots: the position, the cache length (position + 1),
which ``Llama.decode(..., where=...)`` passes to RoPE, the cache append and attention, and the step s (the tokens
chosen so far). The step ends with ``advance``: position and length move on by one, the token goes to history slot
s, and s moves on. So the launches of step s + 1 are those of step s, and ``iron.graph()`` records them once (not
run); each token is then one replay, and the host only counts. Sampling (temperature > 0) draws step s with the seed
``seed + s``, as the launch-by-launch loop does, s read on the device (``std/sampling``'s ``sample_tokens_at``).

Kept across runs: ``kept(model, prompt_len, sampling)`` (what ``generate`` uses) keeps the DecodeGraph and its
recording on the model, and a later run only rewrites ``state`` on the device (``restart``) and replays. A recording
bakes in buffers and scalars, so reuse requires the same: the model's buffers (weights, KV caches, RoPE tables, the
step's activations and logits; compared by identity, held weakly), its cache size and whether PDL is on; the
sampling parameters (one recording kept per set, ``KEEP`` at most); its own token/state/history arrays (history: one
slot per cache position; never reallocated). The prompt length is not baked in (it lives in ``state``). The backends
without a recording (the interpreter, msl-cpu, HIP, Metal) run the loop launch by launch.

On CUDA sm_90+, programmatic dependent launch (on by default, ``IRON_CUDA_PDL=0`` turns it off;
``runtime/cuda.py:pdl_enabled``) makes every kernel of the step wait for the previous one in-kernel and be launched
with programmatic stream serialization, and the recording keeps those dependencies as programmatic edges: each
kernel's launch and ramp may then overlap the previous kernel's run instead of following its end.
"""

from __future__ import annotations

import dataclasses
import os
import weakref
from typing import Any

from ..frontend import kernel
from ..lang import Tensor, constexpr, i32
from ..runtime.cuda import pdl_enabled
from ..runtime.device_array import Array, empty, graph
from ..std.reductions import launch_argmax
from ..std.sampling import launch_sample
from .llama import SLOT, Llama

__all__ = ["DecodeGraph", "forget", "graphs_apply", "kept"]


@kernel
def restart_state(state: Tensor[i32], base: int, SLOT: constexpr):
    """One thread: position ``base - 1``, length ``base``, step 0 (before the prefill's choice: its ``advance``
    moves them to the first decode step's)."""
    state[0] = base - 1
    state[SLOT] = base
    state[2 * SLOT] = 0


@kernel
def advance(token: Tensor[i32], state: Tensor[i32], history: Tensor[i32], SLOT: constexpr):
    """One thread: position and length (``state[0]``, ``state[SLOT]``) move on by one; the token chosen goes to
    ``history[s * SLOT]``, s (``state[2 * SLOT]``) the tokens chosen before it, which moves on by one."""
    state[0] = state[0] + 1
    state[SLOT] = state[SLOT] + 1
    s = state[2 * SLOT]
    history[s * SLOT] = token[0]
    state[2 * SLOT] = s + 1


#: backends whose launches ``iron.graph`` records for replay
RECORDING = ("cuda", "vulkan")
#: recordings kept per model (one per set of sampling parameters; the oldest goes first)
KEEP = 4


def graphs_apply(model: Llama) -> bool:
    """Whether ``generate`` replays decode steps as a recording on this model's backend (a CUDA graph, a Vulkan
    command buffer); IRON_DECODE_GRAPH=0 turns it off."""
    return model.backend in RECORDING and os.environ.get("IRON_DECODE_GRAPH", "1") != "0"


class DecodeGraph:
    """The decode loop of ``model`` after a prefill of ``prompt_len`` tokens; ``history`` (a slot array) receives
    token s of the continuation at slot s. Greedy, or with ``sampling`` (generate.Sampling, not greedy) drawn
    with the seed ``sampling.seed + s``. ``restart(prompt_len)`` starts another run on the same arrays (after
    ``model.reset`` to the same size), replaying the recording if there is one."""

    def __init__(self, model: Llama, history: Array, prompt_len: int, capture: bool = True, sampling=None):
        be = model.backend
        self.sampling = None if sampling is None or sampling.greedy else sampling
        self.capture = capture  # False: every step launch by launch (the same launches, for backends without graphs)
        self.model, self.history = model, history
        self.token = empty((1,), i32, backend=be)
        self.state = empty((3 * SLOT,), i32, backend=be)  # position, length, step: one slot each
        self.where = (model.slot(self.state, 0), model.slot(self.state, 1))
        self.step_slot = model.slot(self.state, 2)
        self.graph = None
        self.eager = 0  # steps run launch by launch (the first compiles and autotunes: no timing inside a capture)
        self.recordings = 0
        self.baked = _Baked(model)
        self.restart(prompt_len)

    def restart(self, prompt_len: int) -> None:
        """A new run after a prefill of ``prompt_len`` tokens: ``state`` rewritten on the device (in order with the
        launches, no host wait), the recording kept."""
        self.base, self.steps = prompt_len, 0
        restart_state[1](self.state, prompt_len, SLOT, backend=self.model.backend)

    def first(self, logits: Array) -> None:
        """Choose the prefill's token into ``token`` and history slot 0."""
        self._choose(logits)

    def step(self) -> None:
        """One decode step. The DecodeGraph's first runs launch by launch (compiling and autotuning what it needs);
        the next is recorded and launched; the rest, in this run and the ones after, replay the recording."""
        model = self.model
        model._check_room(1)
        if not self.capture or (self.graph is None and self.eager == 0):
            self._choose(model.decode(self.token, where=self.where))
            self.eager += 1
        else:
            if self.graph is None:
                self.record()
            self.graph.launch()
            model.length += 1
        self.steps += 1

    def record(self) -> bool:
        """Record the decode step (not run) if it is not yet and may be (capture on, one step run launch by
        launch before, room for the step in the cache); whether there is a recording now."""
        model = self.model
        if self.graph is None and self.capture and self.eager > 0 and model.length < model.max_len:
            length = model.length
            with graph(model.backend) as g:
                self._choose(model.decode(self.token, where=self.where))
            model.length = length  # recorded, not run
            self.graph = g
            self.recordings += 1
        return self.graph is not None

    def fits(self, model: Llama) -> bool:
        """Whether this DecodeGraph's launches (and recording) still address ``model``'s buffers, at its size."""
        return model is self.model and self.baked.same(model)

    def _choose(self, logits: Array) -> None:
        be, sp = self.model.backend, self.sampling
        if sp is None:
            launch_argmax(logits, self.token, be)
        else:  # step s (state's third slot): the seed sp.seed + s, read on the device
            launch_sample(logits, self.token, sp.temperature, sp.top_p, sp.seed, sp.top_k, be, step=self.step_slot)
        advance[1](self.token, self.state, self.history, SLOT, backend=be)


class _Baked:
    """What a decode step's launches bake in from the model: its buffers (weak references: identity, without
    keeping old ones alive) and the scalars the launches depend on."""

    def __init__(self, model: Llama):
        self.scalars = _scalars(model)
        self.refs = [weakref.ref(a) for a in _buffers(model)]

    def same(self, model: Llama) -> bool:
        if _scalars(model) != self.scalars:
            return False
        now = _buffers(model)
        return len(now) == len(self.refs) and all(r() is a for r, a in zip(self.refs, now))


def _scalars(model: Llama) -> tuple:
    return (model.backend, model.dtype, model.max_len, getattr(model, "chunk", None),
            model.backend == "cuda" and pdl_enabled())


def _buffers(model: Llama) -> list[Array]:
    """The device arrays a decode step reads or writes (weights, caches, tables, the step's activations and
    logits), in a fixed order."""
    out: list[Array] = []
    for part in (model.weights, model.k_cache, model.v_cache, model.cos, model.sin, model.step_rows,
                 model.step_logits):
        _collect(part, out)
    return out


def _collect(x: Any, out: list[Array]) -> None:
    if isinstance(x, Array):
        out.append(x)
    elif isinstance(x, (list, tuple)):
        for y in x:
            _collect(y, out)
    elif dataclasses.is_dataclass(x) and not isinstance(x, type):
        for f in dataclasses.fields(x):
            _collect(getattr(x, f.name), out)


def kept(model: Llama, prompt_len: int, sampling=None) -> DecodeGraph:
    """The DecodeGraph kept on ``model`` for ``sampling`` (greedy: None), restarted for a prefill of ``prompt_len``
    tokens, with its recording if it has one (call after ``model.reset``); a new one, kept, when there is none or
    the model's buffers or size have changed since it was made (those are dropped). Its ``history`` has one slot
    per cache position."""
    key = None if sampling is None or sampling.greedy else sampling
    graphs: dict = model.__dict__.setdefault("_kept_decode_graphs", {})
    for k in [k for k, g in graphs.items() if not g.fits(model)]:
        del graphs[k]  # the buffers it was recorded with are gone or resized
    found = graphs.pop(key, None)
    if found is not None:
        found.restart(prompt_len)
    else:
        history = empty((model.max_len * SLOT,), i32, backend=model.backend)
        found = DecodeGraph(model, history, prompt_len, sampling=sampling)
    graphs[key] = found  # the most recent last
    while len(graphs) > KEEP:
        del graphs[next(iter(graphs))]
    return found


def forget(model: Llama) -> None:
    """Drop the recordings kept on ``model``."""
    model.__dict__.pop("_kept_decode_graphs", None)
