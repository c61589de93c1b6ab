"""Batched greedy decoding: B prompts, then B sequences decoded in lockstep, one forward over B tokens per step.

Each prompt is prefilled on its own (``Llama.prefill``) into its row of a batched KV cache (per layer one array
(B, max_len, HKV, D); the model's cache is bound to row b's view while prompt b runs). A decode step is then one
forward over B rows: the projections are GEMMs over B rows (each weight read once per step for all B, which is what
makes batching pay on a memory-bound decode), RoPE at per-token positions, the cache append at per-sequence rows,
std/attention_decode over B sequences of their own lengths, the LM head over B rows and std/reductions argmax.

Every per-sequence count lives on the device (``state``: position, cache row, length and prompt length, each B i32 at
a 256-byte-aligned slot, as ``model/decode_graph.py`` does for one sequence) and ``advance_batch`` moves them on at
the end of a step, so the launches of every step are the same: CUDA and Vulkan record one step and replay it
(``iron.graph``); the other backends run it launch by launch. Greedy only (batch-1 ``generate`` also samples).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..frontend import kernel
from ..lang import Tensor, constexpr, i32, program_id
from ..runtime.device_array import asarray, empty, graph, synchronize
from ..std.reductions import launch_argmax
from .config import ModelError
from .decode_graph import graphs_apply
from .llama import SLOT, BatchStep, Llama

__all__ = ["BatchDecoder"]

#: the slots of ``state``: position, row of the (B * max_len)-row cache, length, prompt length
POS, FLAT, LENS, BASE = range(4)


@kernel
def advance_batch(tokens: Tensor[i32], state: Tensor[i32], history: Tensor[i32], n: int, SLOT: constexpr):
    """Thread b: sequence b's position, cache row and length move on by one; the token chosen for its new position
    goes to ``history[step * n + b]`` (step = position - prompt length)."""
    b = program_id(0)
    if b < n:
        p = state[POS * SLOT + b] + 1
        state[POS * SLOT + b] = p
        state[FLAT * SLOT + b] = state[FLAT * SLOT + b] + 1
        state[LENS * SLOT + b] = p + 1
        history[(p - state[BASE * SLOT + b]) * n + b] = tokens[b]


class BatchDecoder:
    """``len(prompts)`` sequences on ``model`` (which it takes over: its cache is rebound; ``generate`` or ``reset``
    give it back its own), up to ``max_new_tokens`` new tokens each. ``run()`` returns them, one list per prompt;
    or ``prefill()`` then ``step()`` as many times as wanted, then ``tokens()``."""

    def __init__(self, model: Llama, prompts: Sequence[Sequence[int]], max_new_tokens: int, capture: bool = True):
        self.prompts = [[int(t) for t in p] for p in prompts]
        c, be, dt = model.config, model.backend, model.dtype
        if not self.prompts or any(not p for p in self.prompts):
            raise ModelError("a batch needs at least one prompt, and every prompt at least one token")
        if max_new_tokens < 1:
            raise ModelError(f"max_new_tokens must be at least 1, not {max_new_tokens}")
        bad = [t for p in self.prompts for t in p if not 0 <= t < c.vocab_size]
        if bad:
            raise ModelError(f"prompt token ids {bad[:5]} are outside the vocabulary (0 .. {c.vocab_size - 1})")
        n = len(self.prompts)
        if n > SLOT:
            raise ModelError(f"a batch holds at most {SLOT} sequences, not {n}")
        self.model, self.n, self.max_new = model, n, max_new_tokens
        model.reset(max(len(p) for p in self.prompts) + max_new_tokens, caches=False)
        length = model.max_len
        shape = (n, length, c.num_kv_heads, c.head_dim)
        k = [empty(shape, dt, backend=be) for _ in range(c.num_layers)]
        v = [empty(shape, dt, backend=be) for _ in range(c.num_layers)]
        self.state = asarray(_initial_state(self.prompts, length), backend=be)
        self.step_state = BatchStep(pos=self._slot(POS), flat=self._slot(FLAT), lens=self._slot(LENS), k_cache=k,
                                    v_cache=v)
        self.ids = empty((n,), i32, backend=be)  # the tokens of the step about to run
        self.history = asarray(np.full(max_new_tokens * n, -1, np.int32), backend=be)
        self.rows = model.activations(n)
        self.logits = empty((n, c.vocab_size), dt, backend=be)
        self.capture = capture and graphs_apply(model)
        self.recording = None
        self.steps = 0

    def _slot(self, which: int):
        return self.state[which * SLOT:which * SLOT + self.n]

    def prefill(self) -> None:
        """Each prompt into its row of the cache, and its first new token (history step 0)."""
        m, be, st = self.model, self.model.backend, self.step_state
        for b, prompt in enumerate(self.prompts):
            m.k_cache, m.v_cache = [k[b] for k in st.k_cache], [v[b] for v in st.v_cache]
            m.length = 0
            launch_argmax(m.prefill(prompt), self.ids[b:b + 1], be)
        m.k_cache, m.v_cache = [], []  # the rows' views are not the model's cache
        advance_batch[self.n](self.ids, self.state, self.history, self.n, SLOT, backend=be)
        self.steps = 1

    def step(self) -> None:
        """One decode step of every sequence. On CUDA and Vulkan the first runs launch by launch (compiling and
        autotuning), the second is recorded and launched, the rest replay the recording."""
        if self.steps == 0:
            raise ModelError("call prefill() before step()")
        if self.steps >= self.max_new:
            raise ModelError(f"all {self.max_new} new tokens of the batch are decoded")
        if self.steps == 1 or not self.capture:
            self._run_step()
        else:
            if self.recording is None:
                with graph(self.model.backend) as g:
                    self._run_step()
                self.recording = g
            self.recording.launch()
        self.steps += 1

    def _run_step(self) -> None:
        m, be = self.model, self.model.backend
        m.forward_batch(self.ids, self.rows, self.step_state, self.logits)
        launch_argmax(self.logits, self.ids, be)
        advance_batch[self.n](self.ids, self.state, self.history, self.n, SLOT, backend=be)

    def tokens(self) -> list[list[int]]:
        """The new tokens so far, one list per prompt (waits for the device)."""
        synchronize(self.model.backend)
        got = self.history.numpy().reshape(self.max_new, self.n)[:self.steps]
        return [[int(t) for t in got[:, b]] for b in range(self.n)]

    def run(self) -> list[list[int]]:
        """Prefill, then decode until every sequence has ``max_new_tokens`` new tokens."""
        self.prefill()
        while self.steps < self.max_new:
            self.step()
        return self.tokens()


def _initial_state(prompts: list[list[int]], length: int) -> np.ndarray:
    """The counts before the prefill's token is recorded: position len - 1, so that the first ``advance_batch``
    moves every sequence to its first decode step (position len, cache row b * length + len, length len + 1)."""
    state = np.zeros(4 * SLOT, np.int32)
    for b, p in enumerate(prompts):
        state[POS * SLOT + b] = len(p) - 1
        state[FLAT * SLOT + b] = b * length + len(p) - 1
        state[LENS * SLOT + b] = len(p)
        state[BASE * SLOT + b] = len(p)
    return state
