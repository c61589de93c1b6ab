"""The Llama-family forward pass on Iron kernels: weights, KV cache and activations are device arrays, and every step
of the loop is a launch of a std kernel (no NumPy or torch math between them).

One decoder layer, for T tokens at positions start .. start + T - 1 (batch 1):

    n     = rms_norm(h) * w_in                       std/norm (fused with the previous residual add: std/fused_norm)
    qkv   = n W_qkv^T (+ b)                          one linear over the fused matrix: std/gemv (T = 1), else
                                                     std/gemm (f16/bf16) or std/gemm_f32; biases by std/elementwise
                                                     add with row broadcast
    q, cache[start ..] = rope(q), (rope(k), v)       std/rope_append: one launch (f32 cos/sin tables made at reset)
    a     = attention(q, cache)                      std/attention_decode (one token); prefill: std/attention's
                                                     flash kernel over the prompt's rows of the cache, or the decode
                                                     kernel over the cache (below)
    h     = h + a W_o^T;  n = rms_norm(h) * w_post    std/fused_norm add_rms_norm
    gu    = n W_gate_up^T;  m = silu(gu_g) * gu_u     one linear over the fused matrix, std/elementwise swiglu_rows
                                                     (one token: the gating inside the gate/up GEMV, std/gemv's
                                                     glu_out, which stores m alone)
    h     = h + m W_down^T                           fused with the next layer's (or the final) norm

then logits = rms_norm(h) W_head^T (the last row only, unless all rows are asked for), and the next token by
std/reductions argmax or std/sampling.

Prefill attention. std/attention's flash kernel reads f16/bf16 only, and keeps D / simd_size() output columns per
lane (so D must be a multiple of the SIMD width). Where it applies (a half dtype, such a head dim, an empty cache) it
runs on the prompt's own rows of the cache. Elsewhere (f32 models, small heads, a prefill continuing a cache) the
prompt's T queries run as a batch of T "sequences" through the *paged* decode kernel, all sharing one block table
over the cache (page j holds positions 16 j ..), sequence t with length start + t + 1: causal attention by
construction, in every dtype. It reads the cache once per query row, which is fine for short prompts and slow for
long f32 ones.

Scalars that change every step (the cache position, the length, the sampled token) live in device arrays that a
step reads through views, so a decode step writes nothing from the host and never waits: ``slots`` holds 0, 1, 2,
... one per 256 bytes (the largest ``minStorageBufferOffsetAlignment`` Vulkan allows, so every view is bound in place
rather than through an aligned copy), and the generated tokens are written the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..runtime import best_backend, get_backend
from ..runtime.device_array import Array, asarray, empty
from ..std import gemm, gemm_f32
from ..std.attention import launch_prefill
from ..std.attention_decode import launch_decode, launch_decode_paged, plan_chunk
from ..std.elementwise import launch_binary, launch_swiglu_rows
from ..std.fused_norm import launch_add_rms_norm
from ..std.gather import launch_embedding
from ..std.gemv import launch_gemv
from ..std.norm import launch_rms_norm
from ..std.rope_append import launch_rope_append
from .config import LlamaConfig, ModelError, load_config
from .quantized import QuantWeight, parse_quantize, quant_linear
from .weights import LayerWeights, ModelWeights, read_checkpoint, upload_weights

__all__ = ["PAGE", "SLOT", "Llama"]

#: i32 elements between two slots of a slot array: 256 bytes, Vulkan's largest minStorageBufferOffsetAlignment
SLOT = 64
#: positions per page of the block table the prefill fallback reads the cache through
PAGE = 16


@dataclass
class _Rows:
    """The activations of one forward over T rows (kept for the next prefill of T rows; once per reset for decode)."""

    h: list[Array]  # two residual streams (T, hidden), written in turn
    n: Array  # normed (T, hidden)
    qkv: Array  # (T, q + 2 kv): the fused projection [q | k | v] of each row
    q: Array  # (T, heads, D): q after RoPE (k and v go to the cache)
    attn: Array  # (T, heads, D)
    o: Array  # (T, hidden): attention output projected, then the MLP's
    gate_up: Array  # (T, 2 * intermediate): the fused projection [gate | up]
    act: Array  # silu(gate) * up
    tmp: Array | None  # flat scratch for a linear's output before its bias is added
    pages: tuple[Array, Array] | None = None  # the prefill fallback's block table (T, pages) and lengths (T,)


@dataclass
class BatchStep:
    """Where one decode step over B sequences (model/batch.py) reads each sequence's state: (B,) i32 device
    views, and the batched caches it appends to and attends over."""

    pos: Array  # each sequence's position (RoPE)
    flat: Array  # b * max_len + position: its row of the cache seen as (B * max_len, HKV, D)
    lens: Array  # position + 1: the length attention reads
    k_cache: list[Array]  # per layer (B, max_len, HKV, D)
    v_cache: list[Array]


class Llama:
    """A Llama-family model on one backend, batch 1: ``reset(max_len)``, ``prefill(ids)``, then ``decode(token)``."""

    def __init__(self, config: LlamaConfig, weights: ModelWeights, backend: str):
        self.config, self.weights, self.backend = config, weights, backend
        self.dtype = weights.dtype
        self.max_len = 0
        self.length = 0  # positions in the KV cache
        self._prompt_rows: _Rows | None = None  # the last prefill's activations, reused by one of the same length
        self._own_cache: tuple[int, ...] | None = None  # the shape of the caches reset() allocated (None: bound)
        self.cos = None

    @classmethod
    def load(cls, folder: str | Path, dtype: str | None = None, backend: str | None = None, quantize: Any = None,
             group: int = 64) -> Llama:
        """The checkpoint in ``folder`` (config.json + *.safetensors) on ``backend`` (default: ``IRON_BACKEND``,
        else the best present), its weights in ``dtype`` (f32, f16, bf16; default: the checkpoint's). ``quantize``
        ("q4" or "q8") stores the layers' projections 4- or 8-bit affine in groups of ``group`` (quantized.py)."""
        config = load_config(folder)
        bits = parse_quantize(quantize)
        name = backend or _default_backend()
        get_backend(name)  # an unknown backend fails here, before the upload
        weights = upload_weights(config, read_checkpoint(folder), dtype, name, where=str(folder), bits=bits,
                                 group=group)
        return cls(config, weights, name)

    # -- state ------------------------------------------------------------------------------------------------------

    def reset(self, max_len: int, caches: bool = True) -> None:
        """An empty KV cache for ``max_len`` positions, with the tables and buffers of the decode step.
        ``caches=False``: the tables only; whoever calls it binds caches (model/batch.py binds views of its own).
        A cache of the same size as the last is reused (its old contents lie past the length: never read)."""
        c = self.config
        if max_len < 1:
            raise ModelError(f"a KV cache needs at least one position, not {max_len}")
        if max_len > c.max_position_embeddings:
            raise ModelError(f"{max_len} positions exceed the model's max_position_embeddings "
                             f"({c.max_position_embeddings})")
        self.max_len = -(-max_len // PAGE) * PAGE
        # positions per split of the decode kernel, fixed for the session (splits past the length finish at once)
        self.chunk = plan_chunk(self.max_len)
        self.length = 0
        be, dt = self.backend, self.dtype
        shape = (self.max_len, c.num_kv_heads, c.head_dim)
        if not caches:
            self.k_cache, self.v_cache, self._own_cache = [], [], None
        elif self._own_cache != shape:
            self.k_cache = [empty(shape, dt, backend=be) for _ in range(c.num_layers)]
            self.v_cache = [empty(shape, dt, backend=be) for _ in range(c.num_layers)]
            self._own_cache = shape
        if self.cos is not None and self.cos.shape[0] == self.max_len:
            return  # the same tables and decode-step buffers serve this length again
        cos, sin = c.rope_tables(self.max_len)
        self.cos, self.sin = asarray(cos, backend=be), asarray(sin, backend=be)
        self.positions = asarray(np.arange(self.max_len, dtype=np.int32), backend=be)
        self.slots = asarray(slot_array(np.arange(self.max_len + 1)), backend=be)
        self.step_rows = self.activations(1)
        self.step_logits = empty((1, c.vocab_size), dt, backend=be)

    def slot(self, array: Array, i: int) -> Array:
        """The one-element view of slot ``i`` of a slot array."""
        return array[i * SLOT:i * SLOT + 1]

    # -- the forward ------------------------------------------------------------------------------------------------

    def prefill(self, ids: Any, all_logits: bool = False) -> Array:
        """Run the tokens ``ids`` at the next positions of the cache; returns the logits of the last one, (1,
        vocab), or with ``all_logits`` of every one, (T, vocab). ``ids``: a sequence of ints or an i32 Array."""
        if self.max_len == 0:
            raise ModelError("no KV cache: call reset(max_len) before prefill")
        ids = ids if isinstance(ids, Array) else asarray(np.asarray(ids, dtype=np.int32).reshape(-1),
                                                         backend=self.backend)
        t = ids.shape[0]
        if t < 1:
            raise ModelError("prefill needs at least one token")
        self._check_room(t)
        rows = self.step_rows if t == 1 else self._prompt_rows_for(t)
        if t > 1:
            rows.pages = None if self.length == 0 and self._flash_prefill_applies() else self._page_table(t)
        self._forward(ids, rows)
        if all_logits:
            logits = empty((t, self.config.vocab_size), self.dtype, backend=self.backend)
            self._linear(rows.n, self.weights.lm_head, None, logits, rows)
        else:
            logits = empty((1, self.config.vocab_size), self.dtype, backend=self.backend)
            launch_gemv(self.weights.lm_head, rows.n[t - 1], logits.reshape(-1), self.backend)
        return logits

    def decode(self, token: Any, where: tuple[Array, Array] | None = None) -> Array:
        """One step: the token (an int, or a one-element i32 Array on the device, e.g. a slot the previous step's
        sampling wrote) at the next position; returns the logits (1, vocab), a buffer reused by the next step.

        ``where``: one-element i32 device arrays (position, position + 1) that the step reads its position from
        instead of the host's count, so that the same launches serve every step (a captured CUDA graph,
        ``model.graph``); whoever passes them keeps them equal to the host's count."""
        if self.max_len == 0:
            raise ModelError("no KV cache: call reset(max_len) before decode")
        if not isinstance(token, Array):
            token = asarray(np.array([int(token)], dtype=np.int32), backend=self.backend)
        self._check_room(1)
        rows = self.step_rows
        self._forward(token, rows, where)
        launch_gemv(self.weights.lm_head, rows.n.reshape(-1), self.step_logits.reshape(-1), self.backend)
        return self.step_logits

    def _prompt_rows_for(self, t: int) -> _Rows:
        """Activations for a prompt of t tokens: the last prefill's when it had t too (no allocation, and the same
        addresses: the launchers' and tensor-map descriptors' caches hit), else new ones, kept for the next."""
        rows = self._prompt_rows
        if rows is None or rows.n.shape[0] != t:
            self._prompt_rows = rows = None  # the old ones go first: two prompts' activations are never both held
            rows = self._prompt_rows = self.activations(t)
        return rows

    def _check_room(self, t: int) -> None:
        if self.length + t > self.max_len:
            raise ModelError(f"the KV cache holds {self.max_len} positions; {self.length} are used and {t} more "
                             "do not fit (reset with a larger max_len)")

    def _forward(self, ids: Array, rows: _Rows, where: tuple[Array, Array] | None = None,
                 batch: BatchStep | None = None) -> None:
        """The layers over ``ids`` at positions length .. length + T - 1; leaves rms_norm(h) * w_final in rows.n.
        One token reads its position and the cache length from ``where`` (default: the slots of the host's count).
        With ``batch``: one token of each of B sequences, each at its own position (``BatchStep``)."""
        be, w = self.backend, self.weights
        if ids.shape[0] == 1 and where is None and batch is None:
            where = (self.slot(self.slots, self.length), self.slot(self.slots, self.length + 1))
        launch_embedding(w.embed, ids, rows.h[0], be)
        launch_rms_norm(rows.h[0], w.layers[0].input_norm, rows.n, self.config.rms_norm_eps, be)
        cur = 0
        for i, lw in enumerate(w.layers):
            self._attention(i, lw, rows, where, batch)
            launch_add_rms_norm(rows.o, rows.h[cur], lw.post_norm, rows.h[1 - cur], rows.n, self.config.rms_norm_eps,
                                be)
            cur = 1 - cur
            self._mlp(lw, rows)
            following = w.layers[i + 1].input_norm if i + 1 < len(w.layers) else w.norm
            launch_add_rms_norm(rows.o, rows.h[cur], following, rows.h[1 - cur], rows.n, self.config.rms_norm_eps,
                                be)
            cur = 1 - cur
        if batch is None:
            self.length += ids.shape[0]

    def forward_batch(self, ids: Array, rows: _Rows, batch: BatchStep, logits: Array) -> None:
        """One decode step of B sequences (model/batch.py): ``ids`` (B,) i32 on the device, one token each, at the
        positions in ``batch``; ``logits`` (B, vocab). The projections are GEMMs over the B rows (each weight read
        once for all of them)."""
        self._forward(ids, rows, batch=batch)
        self._linear(rows.n, self.weights.lm_head, None, logits, rows)

    def _attention(self, i: int, lw: LayerWeights, rows: _Rows, where: tuple[Array, Array] | None,
                   batch: BatchStep | None = None) -> None:
        """rows.o = attention of rows.n (projections, RoPE, the cache append, attention, the output projection)."""
        c = self.config
        t = rows.n.shape[0]
        self._project_qkv(lw, rows)
        if batch is not None:
            self._attend_batch(i, rows, batch)
        else:
            self._attend(i, rows, where)
        self._linear(rows.attn.reshape(t, c.q_size), lw.o, lw.o_bias, rows.o, rows)

    def _attend(self, i: int, rows: _Rows, where: tuple[Array, Array] | None) -> None:
        """RoPE, the cache append and attention of one sequence's T new rows (rows.qkv -> rows.attn). One launch
        rotates q into rows.q and k into the cache and copies v there (std/rope_append); then a token attends over
        the whole cache (its length on the device: every step launches the same shapes), a prompt over its own
        rows of the cache (flash kernel) or, continuing a cache, through the paged decode kernel."""
        c, be = self.config, self.backend
        t, start = rows.n.shape[0], self.length
        heads = c.num_heads + 2 * c.num_kv_heads
        pos = where[0] if t == 1 else self.positions[start:start + t]
        launch_rope_append(rows.qkv.reshape(t, heads, c.head_dim), rows.q, self.k_cache[i], self.v_cache[i],
                           self.cos, self.sin, pos, pos, False, be)
        if t == 1:
            shape = (1, self.max_len, c.num_kv_heads, c.head_dim)
            launch_decode(rows.q, self.k_cache[i].reshape(shape), self.v_cache[i].reshape(shape),
                          where[1], rows.attn, backend=be, chunk=self.chunk)
        elif start == 0 and self._flash_prefill_applies():
            launch_prefill(rows.q, self.k_cache[i][0:t], self.v_cache[i][0:t], rows.attn, causal=True, backend=be)
        else:
            self._prefill_through_pages(i, rows)

    def _attend_batch(self, i: int, rows: _Rows, batch: BatchStep) -> None:
        """The same for one new row of each of B sequences, each at its own position, over the batched caches."""
        c, be = self.config, self.backend
        b = rows.n.shape[0]
        rows_of = (b * self.max_len, c.num_kv_heads, c.head_dim)
        launch_rope_append(rows.qkv.reshape(b, c.num_heads + 2 * c.num_kv_heads, c.head_dim), rows.q,
                           batch.k_cache[i].reshape(rows_of), batch.v_cache[i].reshape(rows_of), self.cos, self.sin,
                           batch.pos, batch.flat, False, be)
        launch_decode(rows.q, batch.k_cache[i], batch.v_cache[i], batch.lens, rows.attn, backend=be, chunk=self.chunk)

    def _flash_prefill_applies(self) -> bool:
        d, width = self.config.head_dim, get_backend(self.backend).simd_width()
        return self.dtype in ("f16", "bf16") and d % 16 == 0 and d % width == 0 and d <= 256

    def _page_table(self, t: int) -> tuple[Array, Array]:
        """The block table (T rows, each the pages 0, 1, ... of the cache in order) and the lengths start + 1 ..
        start + T of the prefill fallback, uploaded once per prefill."""
        pages = -(-(self.length + t) // PAGE)
        table = np.tile(np.arange(pages, dtype=np.int32), (t, 1))
        lens = np.arange(self.length + 1, self.length + t + 1, dtype=np.int32)
        return asarray(table, backend=self.backend), asarray(lens, backend=self.backend)

    def _prefill_through_pages(self, i: int, rows: _Rows) -> None:
        """Causal attention of the T new rows over the cache as T sequences of the paged decode kernel, one shared
        block table (see the module docstring)."""
        c = self.config
        table, lens = rows.pages
        shape = (table.shape[1], PAGE, c.num_kv_heads, c.head_dim)
        k = self.k_cache[i][0:table.shape[1] * PAGE].reshape(shape)
        v = self.v_cache[i][0:table.shape[1] * PAGE].reshape(shape)
        launch_decode_paged(rows.q, k, v, table, lens, rows.attn, backend=self.backend)

    def _project_qkv(self, lw: LayerWeights, rows: _Rows) -> None:
        """rows.qkv = n W_qkv^T (+ b): one linear over the fused matrix."""
        self._linear(rows.n, lw.qkv, lw.qkv_bias, rows.qkv, rows)

    def _mlp(self, lw: LayerWeights, rows: _Rows) -> None:
        """rows.o = down(silu(gate(n)) * up(n)): one linear over the fused gate/up matrix. One token (weights not
        quantized, no gate/up bias) gates inside that GEMV (std/gemv's glu_out: it stores silu(gate) * up, so the
        down projection is a plain GEMV); otherwise std/elementwise swiglu_rows between the two linears."""
        if rows.n.shape[0] == 1 and not isinstance(lw.gate_up, QuantWeight) and lw.gate_up_bias is None:
            launch_gemv(lw.gate_up, rows.n.reshape(-1), rows.act.reshape(-1), self.backend, glu_out=True)
        else:
            self._linear(rows.n, lw.gate_up, lw.gate_up_bias, rows.gate_up, rows)
            launch_swiglu_rows(rows.gate_up, rows.act, self.backend)
        self._linear(rows.act, lw.down, lw.down_bias, rows.o, rows)

    def _linear(self, x: Array, w: Array | QuantWeight, bias: Array | None, out: Array, rows: _Rows) -> None:
        """out (T, N) = x (T, K) @ w (N, K)^T (+ bias): a GEMV for one row, else a GEMM (dequantizing ones for a
        quantized w)."""
        be, t = self.backend, x.shape[0]
        y = out if bias is None else rows.tmp[0:out.size].reshape(out.shape)
        if isinstance(w, QuantWeight):
            quant_linear(x, w, y, be)
        elif t == 1:
            launch_gemv(w, x.reshape(-1), y.reshape(-1), be)
        elif self.dtype == "f32":
            gemm_f32.launch(x, w, y, trans_b=True, backend=be)
        else:
            gemm.launch(x, w, y, trans_b=True, backend=be)
        if bias is not None:
            launch_binary("add", y, bias, out, be)

    # -- buffers ----------------------------------------------------------------------------------------------------

    def activations(self, t: int) -> _Rows:
        """New activation buffers for a forward over t rows."""
        c, be, dt = self.config, self.backend, self.dtype
        hd, inter = c.head_dim, c.intermediate_size

        def new(*shape: int) -> Array:
            return empty(shape, dt, backend=be)

        biased = any(b is not None for lw in self.weights.layers for b in (lw.qkv_bias, lw.o_bias, lw.gate_up_bias,
                                                                             lw.down_bias))
        widest = max(c.q_size + 2 * c.kv_size, 2 * inter, c.hidden_size)
        return _Rows(h=[new(t, c.hidden_size), new(t, c.hidden_size)], n=new(t, c.hidden_size),
                     qkv=new(t, c.q_size + 2 * c.kv_size), q=new(t, c.num_heads, hd), attn=new(t, c.num_heads, hd),
                     o=new(t, c.hidden_size), gate_up=new(t, 2 * inter), act=new(t, inter),
                     tmp=new(t * widest) if biased else None)


def slot_array(values: np.ndarray) -> np.ndarray:
    """``values`` as i32, one per SLOT elements (the rest zero): views of one slot start on 256-byte boundaries."""
    out = np.zeros(len(values) * SLOT, np.int32)
    out[::SLOT] = values
    return out


def _default_backend() -> str:
    import os

    return os.environ.get("IRON_BACKEND") or best_backend()
