"""Kernels for the 16-byte vector accesses of the SPIR-V emitter (codegen/spirv/words.py): both views of one buffer
in one invocation, integer words, shared arrays that move whole words beside element accesses."""

from __future__ import annotations

import iron
from iron import T, Tensor, constexpr, kernel, program_id


@kernel
def vstore_then_read(x: Tensor[T], out: Tensor[T], back: Tensor[T], VEC: constexpr):
    """vstore into out, then read out's elements one by one in the same invocation (the word view, then the element
    view of one buffer: the reads must see the vector store)."""
    i = program_id(0) * VEC
    v = iron.vload(x, i, VEC)
    r = iron.local_array(T, VEC)
    for k in iron.static_range(VEC):
        r[k] = v[k] + 1.0
    iron.vstore(out, i, r)
    for k in iron.static_range(VEC):
        back[i + k] = out[i + VEC - 1 - k] * 2.0


@kernel
def u32_words(x: Tensor[iron.u32], out: Tensor[iron.u32]):
    """Four u32 per thread in one word each way, complemented in registers."""
    i = program_id(0) * 4
    v = iron.vload(x, i, 4)
    r = iron.local_array(iron.u32, 4)
    for k in iron.static_range(4):
        r[k] = v[3 - k] ^ 0xFFFFFFFF
    iron.vstore(out, i, r)


@kernel
def shared_words(x: Tensor[T], out: Tensor[T], VEC: constexpr, BLOCK: constexpr):
    """async_copy of VEC elements per thread into a shared tile of BLOCK * VEC + 3 elements (not a whole number of
    words), one element written alone past the vectors; each thread reads its neighbour's vector element by
    element."""
    tile = iron.shared(T, BLOCK * VEC + 3)
    lid = iron.local_id(0)
    base = iron.group_id(0) * BLOCK * VEC
    iron.async_copy(tile, lid * VEC, x, base + lid * VEC, VEC)
    iron.async_commit()
    iron.async_wait(0)
    if lid == 0:
        tile[BLOCK * VEC + 2] = 0.5
    iron.barrier()
    for k in iron.static_range(VEC):
        out[base + lid * VEC + k] = tile[((lid + 1) % BLOCK) * VEC + k] + tile[BLOCK * VEC + 2]


@kernel
def shared_counters(x: Tensor[iron.i32], out: Tensor[iron.i32]):
    """A shared array moved by vectors and updated by an atomic (groups of 16 threads, 4 counters each): every
    thread adds 1 to the first counter of the next thread's vector."""
    c = iron.shared(iron.i32, 64)
    lid = iron.local_id(0)
    iron.vstore(c, lid * 4, iron.vload(x, program_id(0) * 4, 4))
    iron.barrier()
    iron.atomic_add(c, (lid * 4 + 4) % 64, 1)
    iron.barrier()
    iron.vstore(out, program_id(0) * 4, iron.vload(c, lid * 4, 4))
