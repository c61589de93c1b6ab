"""Rotary position embedding (RoPE, issue 18) in both layouts, with per-token positions and a position offset.

``x`` is (tokens, heads, D) contiguous; ``cos``/``sin`` are f32 tables of (max_pos, D / 2) (the engine's
cos/sin cache, as vLLM keeps it: one table for every layer, angles pos * base^(-2i/D) computed once in float64 on
the host by ``rope_tables``); ``pos`` holds each token's position (i32), to which ``offset`` is added (decode: the
cache length). Pair i of a head rotates by angle index i:

- ``INTERLEAVED = True`` (GPT-J, llama.cpp's "normal" mode): the pair is (x[2i], x[2i + 1]);
- ``INTERLEAVED = False`` (rotate-half, the Hugging Face Llama layout): (x[i], x[i + D/2]).

out = (x0 c - x1 s, x0 s + x1 c) in f32, rounded once to T; ``out`` may be ``x`` (in place: ``launch_rope`` then
reads a copy of ``x``). One thread per pair.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..frontend import kernel
from ..harness.registry import InputGen, bench, test_kernel
from ..lang import T, Tensor, cast, constexpr, f32, i32, program_id

#: iron build's default layout
INTERLEAVED = False
BASE = 10000.0


@kernel
def rope(x: Tensor[T], out: Tensor[T], cos: Tensor[f32], sin: Tensor[f32], pos: Tensor[i32], heads: int, D: int,
         offset: int, INTERLEAVED: constexpr):
    """Rotate each pair of x (tokens x heads x D) by its token's angle; launch tokens * heads * D / 2 threads."""
    i = program_id(0)
    half = D // 2
    p = i % half
    th = i // half  # token * heads + head
    row = (pos[th // heads] + offset) * half + p
    c = cos[row]
    s = sin[row]
    a = th * D + p
    b = a + half
    if INTERLEAVED:
        a = th * D + 2 * p
        b = a + 1
    x0 = cast(x[a], f32)
    x1 = cast(x[b], f32)
    out[a] = cast(x0 * c - x1 * s, T)
    out[b] = cast(x0 * s + x1 * c, T)


def rope_tables(max_pos: int, dim: int, base: float = BASE) -> tuple[np.ndarray, np.ndarray]:
    """(cos, sin) f32 tables of (max_pos, dim / 2): angle[p, i] = p * base^(-2i / dim), in float64."""
    inv = base ** (-np.arange(0, dim, 2, dtype=np.float64) / dim)
    ang = np.arange(max_pos, dtype=np.float64)[:, None] * inv[None, :]
    return np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)


def launch_rope(x: Any, out: Any, cos: Any, sin: Any, pos: Any, offset: int = 0, interleaved: bool = False,
                backend: str | None = None) -> None:
    tokens, heads, dim = x.shape
    if out is x:  # in place: a kernel may not read through one argument memory it writes through another (dsl.md)
        x = x.clone() if callable(getattr(x, "clone", None)) else x.copy()
    rope[tokens * heads * dim // 2](x, out, cos, sin, pos, heads, dim, offset, interleaved, backend=backend)


def _setup(gen: InputGen) -> dict[str, np.ndarray]:
    tokens, heads, dim = gen.shape
    max_pos = tokens + 64
    cos, sin = rope_tables(max_pos, dim)
    return {"x": gen.random(), "out": gen.poisoned(), "cos": cos, "sin": sin,
            "pos": gen.rng.integers(0, max_pos - 7, tokens).astype(np.int32)}


def oracle(d: dict, offset: int, interleaved: bool) -> np.ndarray:
    """float64: the rotation written from the layout's definition, on the tables' f32 values."""
    x = d["x"].astype(np.float64)
    dim = x.shape[-1]
    rows = d["pos"].astype(np.int64) + offset
    c = d["cos"].astype(np.float64)[rows][:, None, :]
    s = d["sin"].astype(np.float64)[rows][:, None, :]
    if interleaved:
        x0, x1 = x[..., 0::2], x[..., 1::2]
    else:
        x0, x1 = x[..., : dim // 2], x[..., dim // 2:]
    y0, y1 = x0 * c - x1 * s, x0 * s + x1 * c
    out = np.empty_like(x)
    if interleaved:
        out[..., 0::2], out[..., 1::2] = y0, y1
    else:
        out[..., : dim // 2], out[..., dim // 2:] = y0, y1
    return out


def _torch_rope(d: dict, offset: int, interleaved: bool):
    """The eager torch formulation (Hugging Face's apply_rotary_pos_emb for rotate-half), f32 math, cast back."""
    import torch

    x = d["x"].float()
    rows = d["pos"].long() + offset
    c, s = d["cos"][rows][:, None, :], d["sin"][rows][:, None, :]
    if interleaved:
        x0, x1 = x[..., 0::2], x[..., 1::2]
        return torch.stack((x0 * c - x1 * s, x0 * s + x1 * c), dim=-1).flatten(-2).to(d["x"].dtype)
    c, s = torch.cat((c, c), dim=-1), torch.cat((s, s), dim=-1)
    half = x.shape[-1] // 2
    rot = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return (x * c + rot * s).to(d["x"].dtype)


class _Layout:
    """``rope`` registered once per layout (the registry keeps one entry per object)."""

    def __init__(self, interleaved: bool):
        self.fn = rope.fn
        self.kernel = rope
        self.interleaved = interleaved

    def __repr__(self) -> str:
        return f"<iron kernel rope ({'interleaved' if self.interleaved else 'rotate-half'})>"


def _register(interleaved: bool, offset: int = 7) -> None:
    target = _Layout(interleaved)
    name = f"std/rope/{'interleaved' if interleaved else 'rotate_half'}"
    bench(name, setup=_setup,
          launch=lambda d, be: launch_rope(d["x"], d["out"], d["cos"], d["sin"], d["pos"], offset, interleaved, be),
          references={"numpy": lambda d: oracle(d, offset, interleaved).astype(d["x"].dtype),
                      "torch": lambda d: _torch_rope(d, offset, interleaved)},
          bytes_moved=lambda shape, itemsize: 2 * int(np.prod(shape)) * itemsize,
          flops=lambda shape: 3 * int(np.prod(shape)),
          device_shapes=[(4096, 32, 128), (16384, 8, 128)])(target)
    # f32: two products and a sum of table values (a few ulp); f16/bf16: one rounding of the output
    test_kernel(oracle=lambda d: oracle(d, offset, interleaved), domain="signed",
                shapes=[(33, 4, 64), (5, 3, 128)],
                tolerance={"f32": (1e-6, 1e-6), "f16": (1e-3, 1e-3), "bf16": (8e-3, 8e-3)})(target)


_register(False)
_register(True)
