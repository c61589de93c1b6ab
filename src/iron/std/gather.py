"""Row gathers and scatters of a decoder (issue 18): the embedding lookup and the KV-cache append.

- ``embedding``: out[t, :] = table[ids[t], :] for i32 token ids; an id outside [0, vocab) writes zeros (a padding
  token reads nothing, never another row or past the table).
- ``kv_append``: cache[pos[i], :] = new[i, :] for each new row i (its K or V: heads x head_dim values), at the
  given positions (prefill: consecutive; decode: one per sequence); rows at positions outside [0, max_len) are
  dropped. The same kernel writes K and V (two launches, or one per cache).

One thread per element; rows are contiguous, so neighbouring threads touch neighbouring elements.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..frontend import kernel
from ..harness.registry import InputGen, bench, test_kernel
from ..lang import T, Tensor, i32, program_id


@kernel
def embedding(table: Tensor[T], ids: Tensor[i32], out: Tensor[T], vocab: int, dim: int):
    """out[t, c] = table[ids[t], c] (zeros for an id outside [0, vocab)); launch tokens * dim threads."""
    i = program_id(0)
    t = i // dim
    c = i % dim
    tok = ids[t]
    if tok >= 0 and tok < vocab:
        out[i] = table[tok * dim + c]
    else:
        out[i] = 0.0


@kernel
def kv_append(new: Tensor[T], pos: Tensor[i32], cache: Tensor[T], row: int, max_len: int):
    """cache[pos[r] * row + c] = new[r * row + c] for row r of ``new`` (``row`` elements each); positions outside
    [0, max_len) are skipped. Launch n_new * row threads."""
    i = program_id(0)
    r = i // row
    p = pos[r]
    if p >= 0 and p < max_len:
        cache[p * row + i % row] = new[i]


def launch_embedding(table: Any, ids: Any, out: Any, backend: str | None = None) -> None:
    vocab, dim = table.shape
    embedding[int(ids.shape[0]) * dim](table, ids, out, vocab, dim, backend=backend)


def launch_kv_append(new: Any, pos: Any, cache: Any, backend: str | None = None) -> None:
    """new: (n, ...) rows, cache: (max_len, ...) rows of the same trailing shape, pos: (n,) i32."""
    row = int(np.prod(new.shape[1:]))
    kv_append[int(new.shape[0]) * row](new, pos, cache, row, int(cache.shape[0]), backend=backend)


def _emb_setup(gen: InputGen) -> dict[str, np.ndarray]:
    tokens, vocab, dim = gen.shape
    ids = gen.rng.integers(0, vocab, tokens).astype(np.int32)
    return {"table": gen.random(shape=(vocab, dim)), "ids": ids, "out": gen.poisoned(shape=(tokens, dim))}


def _emb_oracle(d) -> np.ndarray:
    table = d["table"].astype(np.float64)
    out = np.zeros((d["ids"].shape[0], table.shape[1]))
    for t, tok in enumerate(d["ids"]):
        if 0 <= tok < table.shape[0]:
            out[t] = table[tok]
    return out


bench("std/gather/embedding", setup=_emb_setup,
      launch=lambda d, be: launch_embedding(d["table"], d["ids"], d["out"], be),
      references={"numpy": lambda d: _emb_oracle(d).astype(d["table"].dtype),
                  "torch": lambda d: __import__("torch").nn.functional.embedding(d["ids"].long(), d["table"])},
      bytes_moved=lambda shape, itemsize: 2 * shape[0] * shape[2] * itemsize,
      flops=lambda shape: 0, device_shapes=[(4096, 128256, 4096)])(embedding)
test_kernel(oracle=_emb_oracle, domain="signed", shapes=[(37, 500, 64), (5, 10, 3)],
            tolerance={"f32": (0.0, 0.0), "f16": (0.0, 0.0), "bf16": (0.0, 0.0)})(embedding)


def _kv_setup(gen: InputGen) -> dict[str, np.ndarray]:
    """(rows, heads, dim): new rows scattered over a poisoned cache of as many rows, at permuted positions (every
    cache row written once; rows past the cache and decode-sized appends: tests/std/test_gather.py)."""
    rows, heads, dim = gen.shape
    return {"new": gen.random(shape=(rows, heads, dim)), "pos": gen.rng.permutation(rows).astype(np.int32),
            "cache": gen.poisoned(shape=(rows, heads, dim))}


def _kv_expected(d) -> np.ndarray:
    cache = np.full(d["cache"].shape, np.nan)
    for r, p in enumerate(d["pos"]):
        cache[p] = d["new"][r].astype(np.float64)
    return cache


bench("std/gather/kv_append", setup=_kv_setup,
      launch=lambda d, be: launch_kv_append(d["new"], d["pos"], d["cache"], be), output="cache",
      references={"numpy": lambda d: _kv_expected(d).astype(d["cache"].dtype)},
      bytes_moved=lambda shape, itemsize: 2 * int(np.prod(shape)) * itemsize,
      flops=lambda shape: 0, device_shapes=[(8192, 8, 128), (32768, 8, 128)])(kv_append)
test_kernel(oracle=_kv_expected, domain="signed", shapes=[(40, 4, 32), (3, 2, 8)],
            tolerance={"f32": (0.0, 0.0), "f16": (0.0, 0.0), "bf16": (0.0, 0.0)})(kv_append)
