"""Conformance kernels of the tile copies (``tile_load``/``tile_commit``/``tile_wait``), run by test_tile_load.py."""

from __future__ import annotations

import iron
from iron.lang import Tensor, constexpr, f32, group_id, group_size, local_id, shared, tile_commit, tile_load, tile_wait


@iron.kernel
def boxes(X: Tensor[f32], Y: Tensor[f32], R: int, C: int, LD: int, BS: int, r0: int, c0: int,
          ROWS: constexpr, COLS: constexpr, DLD: constexpr):
    """Group g copies two boxes of batch g -- at (r0 + g, c0) into stage 0 and (r0, c0 + COLS) into stage 1 --
    waits for stage 1 first, and writes the whole shared array out."""
    s = shared(f32, 2 * ROWS * DLD)
    g = group_id(0)
    tile_load(s, 0, DLD, X, (R, C, LD, BS), (g, r0 + g, c0), ROWS, COLS, 0)
    tile_load(s, ROWS * DLD, DLD, X, (R, C, LD, BS), (g, r0, c0 + COLS), ROWS, COLS, 1)
    tile_commit(0)
    tile_commit(1)
    tile_wait(1)
    tile_wait(0)
    for v in range(local_id(0), 2 * ROWS * DLD, group_size(0)):
        Y[g * 2 * ROWS * DLD + v] = s[v]
