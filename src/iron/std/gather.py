"""Row gathers and scatters of a decoder (issue 18): the embedding lookup and the KV-cache append.

- ``embedding``: out[t, :] = table[ids[t], :] for i32 token ids; an id outside [0, vocab) writes zeros (a padding
  token reads nothing, never another row or past the table).
- ``kv_append``: cache[pos[i], :] = new[i, :] for each new row i (its K or V: heads x head_dim values), at the
  given positions (prefill: consecutive; decode: one per sequence); rows at positions outside [0, max_len) are
  dropped (neither read nor written). The same kernel writes K and V (two launches, or one per cache).

Layout: the output rows are cut into vectors of ``VEC`` elements (16 bytes: 8 x f16/bf16, 4 x f32) and each thread
moves ``PER`` of them, vector ``k * num_threads(0) + program_id(0)`` for k < PER, so a SIMD group's accesses are
contiguous runs of whole rows' vectors; every 16-byte load is issued before the first store. ``VEC`` halves until the
row length is a multiple of it, and is 1 (scalar accesses, one element a vector) when that reaches 1 or a device array
does not start on a 16-byte boundary. ``PER`` grows (up to 4) only while the launch keeps ``MIN_THREADS`` threads.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..frontend import kernel
from ..harness.registry import InputGen, bench, test_kernel
from ..lang import T, Tensor, constexpr, i32, local_array, num_threads, program_id, static_range, vload, vstore
from .elementwise import device_offset

#: iron build's default variant (valid for every dtype): 4-element vectors, one a thread
VEC = 4
PER = 1
#: vectors a thread moves at most, and the threads a launch keeps at least before a thread takes more
MAX_PER = 4
MIN_THREADS = 1 << 16


@kernel
def embedding(table: Tensor[T], ids: Tensor[i32], out: Tensor[T], vocab: int, dim: int, nvec: int, VEC: constexpr,
              PER: constexpr):
    """out[t, c] = table[ids[t], c] (zeros for an id outside [0, vocab)), in ``nvec`` = tokens * dim / VEC vectors
    of VEC elements (dim a multiple of VEC), PER a thread; launch ceil(nvec / PER) threads."""
    t0 = program_id(0)
    g = num_threads(0)
    nv = dim // VEC
    vals = local_array(T, PER * VEC)
    for k in static_range(PER):
        e = k * g + t0
        if e < nvec:
            tok = ids[e // nv]
            if tok >= 0 and tok < vocab:
                w = vload(table, tok * dim + (e % nv) * VEC, VEC)
                for j in static_range(VEC):
                    vals[k * VEC + j] = w[j]
            else:
                for j in static_range(VEC):
                    vals[k * VEC + j] = 0.0
    for k in static_range(PER):
        e = k * g + t0
        if e < nvec:
            o = local_array(T, VEC)
            for j in static_range(VEC):
                o[j] = vals[k * VEC + j]
            vstore(out, e * VEC, o)


@kernel
def kv_append(new: Tensor[T], pos: Tensor[i32], cache: Tensor[T], row: int, max_len: int, nvec: int,
              VEC: constexpr, PER: constexpr):
    """cache[pos[r] * row + c] = new[r * row + c] for row r of ``new`` (``row`` elements each, a multiple of VEC),
    in ``nvec`` = n_new * row / VEC vectors, PER a thread; rows at positions outside [0, max_len) are neither read
    nor written. Launch ceil(nvec / PER) threads."""
    t0 = program_id(0)
    g = num_threads(0)
    nv = row // VEC
    vals = local_array(T, PER * VEC)
    dst = local_array(i32, PER)  # where vector k goes in the cache; -1: nowhere
    for k in static_range(PER):
        e = k * g + t0
        dst[k] = -1
        if e < nvec:
            p = pos[e // nv]
            if p >= 0 and p < max_len:
                dst[k] = p * row + (e % nv) * VEC
                w = vload(new, e * VEC, VEC)
                for j in static_range(VEC):
                    vals[k * VEC + j] = w[j]
    for k in static_range(PER):
        if dst[k] >= 0:
            o = local_array(T, VEC)
            for j in static_range(VEC):
                o[j] = vals[k * VEC + j]
            vstore(cache, dst[k], o)


def _itemsize(x: Any) -> int:
    size = getattr(x.dtype, "itemsize", None)
    return int(size) if size is not None else int(x.element_size())


def plan_rows(rows: int, length: int, *arrays: Any) -> tuple[int, int]:
    """(VEC, PER) for ``rows`` rows of ``length`` elements of ``arrays``' dtype (module docstring)."""
    aligned = not any((device_offset(a) or 0) % 16 for a in arrays)
    vec = 16 // _itemsize(arrays[0]) if aligned else 1
    while vec > 1 and length % vec:
        vec //= 2
    vectors = rows * (length // vec)
    per = 1
    while 2 * per <= MAX_PER and vectors // (2 * per) >= MIN_THREADS:
        per *= 2
    return vec, per


def launch_embedding(table: Any, ids: Any, out: Any, backend: str | None = None) -> None:
    vocab, dim = table.shape
    tokens = int(ids.shape[0])
    vec, per = plan_rows(tokens, dim, table, out)
    nvec = tokens * dim // vec
    if nvec > 0:
        embedding[-(-nvec // per)](table, ids, out, vocab, dim, nvec, vec, per, backend=backend)


def launch_kv_append(new: Any, pos: Any, cache: Any, backend: str | None = None) -> None:
    """new: (n, ...) rows, cache: (max_len, ...) rows of the same trailing shape, pos: (n,) i32."""
    row = int(np.prod(new.shape[1:]))
    n = int(new.shape[0])
    vec, per = plan_rows(n, row, new, cache)
    nvec = n * row // vec
    if nvec > 0:
        kv_append[-(-nvec // per)](new, pos, cache, row, int(cache.shape[0]), nvec, vec, per, backend=backend)
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
