"""Rotary position embedding (RoPE, issue 18) in both layouts, with per-token positions and a position offset.

``x`` is (tokens, heads, D) contiguous; ``cos``/``sin`` are f32 tables of (max_pos, D / 2) (the engine's
cos/sin cache, as vLLM keeps it: one table for every layer, angles pos * base^(-2i/D) computed once in float64 on
the host by ``rope_tables``); ``pos`` holds each token's position (i32), to which ``offset`` is added (decode: the
cache length). A token whose position is outside the table, [0, max_pos), reads no angle: its rotated values are
zeros (never a read past the table; the same on every backend). Pair i of a head rotates by angle index i:

- ``INTERLEAVED = True`` (GPT-J, llama.cpp's "normal" mode): the pair is (x[2i], x[2i + 1]);
- ``INTERLEAVED = False`` (rotate-half, the Hugging Face Llama layout): (x[i], x[i + D/2]).

out = (x0 c - x1 s, x0 s + x1 c) in f32, rounded once to T. ``out`` may be ``x`` (in place: ``launch_rope`` then
runs ``rope_inplace``, the same code on one buffer: every thread reads exactly the elements it writes).

Layout (``launch_rope``): a thread owns one vector of ``VEC`` elements (16 bytes: 8 x f16/bf16, 4 x f32) at the
same place of ``HPT`` heads of one token, heads hg, hg + G, hg + 2G, ... (G = ceil(heads / HPT)). Rotate-half: the
vector at i and its partner at i + D/2, VEC pairs; interleaved: one vector holding VEC / 2 pairs. The thread reads
its token's VEC (or VEC / 2) cos and sin values once, in 16-byte loads, and uses them for all its heads; it issues
every x load before the first use. Neighbouring threads hold neighbouring vectors of a head, so a SIMD group's
accesses are contiguous. ``HPT`` doubles (up to ``MAX_VECTORS`` x vectors a thread) while it divides the heads and
the launch keeps ``MIN_THREADS`` threads: long prompts take 4 (rotate-half) or 8 heads a thread, decode 1. ``VEC``
halves until D / 2 (rotate-half) or D (interleaved) is a multiple of it, and is 1, the scalar path of one thread per
pair, when that reaches 1 or a device array does not start on a 16-byte boundary.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..frontend import func, kernel
from ..frontend.autotune import table_for, tune
from ..harness.registry import InputGen, bench, test_kernel
from ..lang import T, Tensor, cast, constexpr, f32, i32, local_array, program_id, static_range, vload, vstore, where
from ..runtime import get_backend
from .elementwise import device_offset
from .reductions import scratch_like
from .softmax import dtype_label

#: iron build's default layout and vector shape (valid for every dtype: 4 elements, one head a thread)
INTERLEAVED = False
VEC = 4
HPT = 1
BASE = 10000.0
#: x vectors a thread keeps in flight at most (HPT is at most this over the vectors one head takes), and the threads
#: a launch keeps at least before it gives a thread more heads (an H200 holds ~270k; 64k with 8 x 16 bytes in flight
#: each are ~8 MB of loads in flight, well past what its bandwidth-latency product needs)
MAX_VECTORS = 8
MIN_THREADS = 1 << 16
#: heads a thread that GPUs time beside plan_rope's choice (plan_rope's one-wave launches of the long-prompt shapes
#: reached 2561-3013 GB/s of a 4275 ceiling on the H200, 2026-12-02)
ROPE_TUNING = {"cuda": (1, 2, 4, 8)}


@func
def angle_row(pos, tok, offset, npos):
    """(the table row of token tok's angles, whether its position is in the table): a position outside [0, npos)
    reads row 0, and its angles count as cos = sin = 0, so the token's rotated values are zeros (never a read past
    the table)."""
    p = pos[tok] + offset
    ok = p >= 0 and p < npos
    return where(ok, p, 0), ok


@func
def rope_pair(x, out, cos, sin, pos, heads, D, offset, npos, INTERLEAVED):
    """The scalar path: thread i rotates pair i % (D / 2) of row i // (D / 2) (token * heads + head)."""
    i = program_id(0)
    half = D // 2
    p = i % half
    th = i // half  # token * heads + head
    at, ok = angle_row(pos, th // heads, offset, npos)
    row = at * half + p
    c = where(ok, cos[row], 0.0)
    s = where(ok, sin[row], 0.0)
    a = th * D + p
    b = a + half
    if INTERLEAVED:
        a = th * D + 2 * p
        b = a + 1
    x0 = cast(x[a], f32)
    x1 = cast(x[b], f32)
    out[a] = x0 * c - x1 * s  # rounded once to out's dtype by the store
    out[b] = x0 * s + x1 * c


@func
def load_table(t, i, dst, N):
    """dst[j] = t[i + j] for j < N (f32 table values): 16-byte loads of 4, or one of N < 4."""
    if N <= 4:
        one = vload(t, i, N)
        for j in static_range(N):
            dst[j] = one[j]
    else:
        for q in static_range(N // 4):
            w = vload(t, i + 4 * q, 4)
            for j in static_range(4):
                dst[4 * q + j] = w[j]


@func
def rope_vectors(x, out, cos, sin, pos, heads, D, offset, npos, INTERLEAVED, VEC, HPT, DT):
    """The vector path (module docstring): VEC elements of HPT heads of one token a thread."""
    half = D // 2
    P = VEC // (1 + INTERLEAVED)  # pairs a vector holds (compile-time)
    nv = (D // (2 - INTERLEAVED)) // VEC  # vectors of a head: D / 2 / VEC (rotate-half) or D / VEC (interleaved)
    i = program_id(0)
    groups = (heads + HPT - 1) // HPT
    v = i % nv
    rest = i // nv
    hg = rest % groups
    tok = rest // groups
    c = local_array(f32, P)
    s = local_array(f32, P)
    at, ok = angle_row(pos, tok, offset, npos)
    row = at * half + v * P  # the token's angles for this vector's pairs
    load_table(cos, row, c, P)
    load_table(sin, row, s, P)
    for j in static_range(P):
        c[j] = where(ok, c[j], 0.0)
        s[j] = where(ok, s[j], 0.0)
    xa = local_array(DT, HPT * VEC)
    xb = local_array(DT, HPT * VEC)
    for k in static_range(HPT):
        h = hg + k * groups
        if h < heads:
            a = (tok * heads + h) * D + v * VEC
            va = vload(x, a, VEC)
            for j in static_range(VEC):
                xa[k * VEC + j] = va[j]
            if not INTERLEAVED:
                vb = vload(x, a + half, VEC)
                for j in static_range(VEC):
                    xb[k * VEC + j] = vb[j]
    for k in static_range(HPT):
        h = hg + k * groups
        if h < heads:
            a = (tok * heads + h) * D + v * VEC
            oa = local_array(DT, VEC)
            if INTERLEAVED:
                for j in static_range(P):
                    x0 = cast(xa[k * VEC + 2 * j], f32)
                    x1 = cast(xa[k * VEC + 2 * j + 1], f32)
                    oa[2 * j] = x0 * c[j] - x1 * s[j]
                    oa[2 * j + 1] = x0 * s[j] + x1 * c[j]
                vstore(out, a, oa)
            else:
                ob = local_array(DT, VEC)
                for j in static_range(VEC):
                    x0 = cast(xa[k * VEC + j], f32)
                    x1 = cast(xb[k * VEC + j], f32)
                    oa[j] = x0 * c[j] - x1 * s[j]
                    ob[j] = x0 * s[j] + x1 * c[j]
                vstore(out, a, oa)
                vstore(out, a + half, ob)


@kernel
def rope(x: Tensor[T], out: Tensor[T], cos: Tensor[f32], sin: Tensor[f32], pos: Tensor[i32], heads: int, D: int,
         offset: int, npos: int, INTERLEAVED: constexpr, VEC: constexpr, HPT: constexpr):
    """Rotate each pair of x (tokens x heads x D) by its token's angle into out; grid: ``rope_grid``."""
    if VEC == 1:
        rope_pair(x, out, cos, sin, pos, heads, D, offset, npos, INTERLEAVED)
    else:
        rope_vectors(x, out, cos, sin, pos, heads, D, offset, npos, INTERLEAVED, VEC, HPT, T)


@kernel
def rope_inplace(x: Tensor[T], cos: Tensor[f32], sin: Tensor[f32], pos: Tensor[i32], heads: int, D: int,
                 offset: int, npos: int, INTERLEAVED: constexpr, VEC: constexpr, HPT: constexpr):
    """``rope`` with out = x (each thread reads exactly the elements it writes)."""
    if VEC == 1:
        rope_pair(x, x, cos, sin, pos, heads, D, offset, npos, INTERLEAVED)
    else:
        rope_vectors(x, x, cos, sin, pos, heads, D, offset, npos, INTERLEAVED, VEC, HPT, T)


def rope_tables(max_pos: int, dim: int, base: float = BASE) -> tuple[np.ndarray, np.ndarray]:
    """(cos, sin) f32 tables of (max_pos, dim / 2): angle[p, i] = p * base^(-2i / dim), in float64."""
    inv = base ** (-np.arange(0, dim, 2, dtype=np.float64) / dim)
    ang = np.arange(max_pos, dtype=np.float64)[:, None] * inv[None, :]
    return np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)


def check_tables(cos: Any, sin: Any, dim: int) -> int:
    """The tables' rows (max_pos), after checking both are (max_pos >= 1, dim / 2)."""
    shape = tuple(cos.shape)
    if len(shape) != 2 or shape[0] < 1 or shape[1] != dim // 2 or tuple(sin.shape) != shape:
        raise ValueError(f"RoPE tables: cos {shape} and sin {tuple(sin.shape)} must both be (max_pos >= 1, "
                         f"{dim // 2}) for a head dim of {dim}")
    return int(shape[0])


def _itemsize(x: Any) -> int:
    size = getattr(x.dtype, "itemsize", None)
    return int(size) if size is not None else int(x.element_size())


def plan_rope(tokens: int, heads: int, dim: int, itemsize: int, interleaved: bool,
              aligned: bool = True) -> tuple[int, int]:
    """(VEC, HPT) for x of (tokens, heads, dim) and ``itemsize`` bytes an element (module docstring); ``aligned``:
    every array starts on a 16-byte boundary."""
    span = dim if interleaved else dim // 2  # the elements a head's vectors tile
    vec = 16 // itemsize if aligned and span > 0 else 1
    while vec > 1 and span % vec:
        vec //= 2
    if vec == 1:
        return 1, 1
    per_head = span // vec  # vectors (threads) per head at one head a thread
    loads = 1 if interleaved else 2  # x vectors per head a thread
    hpt = 1
    while (2 * hpt * loads <= MAX_VECTORS and heads % (2 * hpt) == 0
           and tokens * heads * per_head // (2 * hpt) >= MIN_THREADS):
        hpt *= 2
    return vec, hpt


def rope_grid(tokens: int, heads: int, dim: int, interleaved: bool, vec: int, hpt: int) -> int:
    """Threads of a launch of (VEC, HPT) = (vec, hpt)."""
    if vec == 1:
        return tokens * heads * (dim // 2)
    span = dim if interleaved else dim // 2
    return tokens * -(-heads // hpt) * (span // vec)


def rope_configs(tokens: int, heads: int, dim: int, itemsize: int, interleaved: bool, aligned: bool,
                 backend: str) -> list[dict]:
    """The (VEC, HPT) configurations ``launch_rope`` times on ``backend``: ``plan_rope``'s first, then, where the
    backend autotunes (``ROPE_TUNING``), the other heads-per-thread figures that divide the heads and keep at most
    ``MAX_VECTORS`` x vectors a thread (fewer heads a thread: more, lighter threads, several waves instead of one)."""
    vec, hpt = plan_rope(tokens, heads, dim, itemsize, interleaved, aligned)
    configs = [{"VEC": vec, "HPT": hpt}]
    loads = 1 if interleaved else 2
    candidates = (table_for(ROPE_TUNING, backend) or ()) if vec > 1 else ()  # the scalar path has no HPT
    for h in candidates:
        if h != hpt and heads % h == 0 and h * loads <= MAX_VECTORS:
            configs.append({"VEC": vec, "HPT": h})
    return configs


def launch_rope(x: Any, out: Any, cos: Any, sin: Any, pos: Any, offset: int = 0, interleaved: bool = False,
                backend: str | None = None) -> dict:
    """out = x rotated (module docstring); ``out`` may be ``x``. Returns the configuration run ({VEC, HPT}). In
    place, autotuning times the configurations out of place into a scratch array (each timed run would rotate x
    again), then the winner runs in place."""
    tokens, heads, dim = x.shape
    npos = check_tables(cos, sin, dim)
    aligned = not any((device_offset(a) or 0) % 16 for a in (x, out, cos, sin))
    be = backend or get_backend(None).name
    configs = rope_configs(tokens, heads, dim, _itemsize(x), interleaved, aligned, be)
    if rope_grid(tokens, heads, dim, interleaved, configs[0]["VEC"], configs[0]["HPT"]) <= 0:
        return configs[0]  # nothing to rotate (and nothing to time: an empty launch would set the bucket's choice)
    spare: list = []  # the in-place launch's timing target, made on the first timed run

    def launch(cfg: dict, dst: Any) -> None:
        n = rope_grid(tokens, heads, dim, interleaved, cfg["VEC"], cfg["HPT"])
        if dst is x:  # one buffer both read and written (dsl.md: no aliasing between two arguments)
            rope_inplace[n](x, cos, sin, pos, heads, dim, offset, npos, interleaved, cfg["VEC"], cfg["HPT"],
                            backend=backend)
        else:
            rope[n](x, dst, cos, sin, pos, heads, dim, offset, npos, interleaved, cfg["VEC"], cfg["HPT"],
                    backend=backend)

    def timed(cfg: dict) -> None:
        if out is x and not spare:
            spare.append(scratch_like(x, tokens * heads * dim))
        launch(cfg, spare[0] if out is x else out)

    cfg = tune(f"std/rope/{'interleaved' if interleaved else 'rotate_half'}", configs, timed, backend=be,
               dtype=dtype_label(x), key=(tokens, heads, dim))
    launch(cfg, out)
    return cfg
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
          # the prompt shapes move 64 MiB, where a copy of the same bytes reaches ~90 % of its 4 GiB rate; the
          # 512 MiB shape reads the steady-state rate that issue 18's 3900 GB/s is set against
          device_shapes=[(4096, 32, 128), (16384, 8, 128), (32768, 32, 128)])(target)
    # f32: two products and a sum of table values (a few ulp); f16/bf16: one rounding of the output
    test_kernel(oracle=lambda d: oracle(d, offset, interleaved), domain="signed",
                shapes=[(33, 4, 64), (5, 3, 128)],
                tolerance={"f32": (1e-6, 1e-6), "f16": (1e-3, 1e-3), "bf16": (8e-3, 8e-3)})(target)


_register(False)
_register(True)
