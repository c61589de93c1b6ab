"""Sampling one token per row from softmax(logits / temperature) with top-k, top-p (nucleus) and a seed (issue 18).

The rule, exactly (what ``sample_oracle`` computes in float64 and the kernel in f32):

1. Candidates: the row's ``top_k`` (<= 64) best logits v_0 >= v_1 >= ... in std/sample/topk's order (equal values
   by lower index first). Tokens outside them have probability 0 (top-k sampling, then top-p, as vLLM and Hugging
   Face apply them). ``temperature <= 0`` or ``top_k == 1``: the token is the argmax (the lowest index among equal
   maxima), and no uniform is drawn.
2. Weights e_j = exp((v_j - v_0) / temperature); cumulative sums c_n = e_0 + ... + e_{n-1} (in that order).
3. Top-p: n is the smallest n >= 1 with c_n >= top_p * c_K (the smallest set of most probable tokens whose
   probability reaches top_p; top_p <= 0 keeps only the argmax, top_p >= 1 keeps all K).
4. The draw: u in [0, 1) from ``uniform(seed, row)``; the token is candidate j, the first j < n with c_{j+1} >
   u * c_n (candidate n - 1 if rounding leaves none).

The uniform is a counter-based hash in u32 arithmetic (wrapping multiplies, shifts, xors), so every backend and the
NumPy oracle get the same bits: ``h = pcg(pcg(seed) ^ row)`` with the PCG-RXS-M-XS output hash of Jarzynski and
Olano ("Hash Functions for GPU Rendering", 2020), and u = (h >> 8) * 2^-24 (24 bits, exact in f32). pcg is a
bijection of u32, so distinct rows of one seed and distinct seeds of one row get distinct hashes. A decode loop
passes a new seed per step (e.g. base seed + step).

Agreement with the float64 oracle: the kernel computes steps 2-4 in f32, so where c_n lands within a tiny relative
epsilon (``EPS`` of c_K) of top_p * c_K, or c_{j+1} of u * c_n, the two may pick neighbouring answers;
``sample_choices`` returns every token the rule allows within that epsilon and the tests accept any of them.

Design: ``launch_sample`` runs std/sample/topk (k = top_k) into (rows, k) workspaces, then ``sample_tokens``, one
thread per row over its <= 64 ranked candidates (three short passes recomputing the same exps in the same order, so
the sums of the passes agree bit for bit). The cost is the top-k's. ``sample_tokens_f32`` writes the token as f32:
the registered entry's checked output (the harness compares one NaN-poisoned float array).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..frontend import func, kernel
from ..harness.registry import InputGen, bench, test_kernel
from ..lang import T, Tensor, cast, exp, f32, i32, program_id, u32
from .topk import MAX_K, launch_topk, scratch

__all__ = ["EPS", "launch_sample", "sample_choices", "sample_oracle", "sample_tokens", "uniform"]

#: relative width (of c_K) of the band around a top-p or draw boundary where the oracle accepts either side
EPS = 3e-5


@func
def pcg(x):
    """PCG-RXS-M-XS: a bijective 32-bit hash (u32 wrapping arithmetic)."""
    state = x * 747796405 + 2891336453
    word = ((state >> ((state >> 28) + 4)) ^ state) * 277803737
    return (word >> 22) ^ word


@func
def draw_uniform(seed, row):
    """u in [0, 1): 24 bits of pcg(pcg(seed) ^ row), exact in f32."""
    h = pcg(pcg(seed) ^ cast(row, u32))
    return cast(h >> 8, f32) * (1.0 / 16777216.0)


@func
def weight(vals, base, j, v0, temperature):
    return exp((cast(vals[base + j], f32) - v0) / temperature)


@func
def sample_row(vals, idx, tokens, k, temperature, top_p, seed):
    """Row program_id(0)'s token from its k ranked candidates vals/idx[row * k ...] (the module's rule)."""
    row = program_id(0)
    base = row * k
    tok = idx[base]
    if temperature > 0.0 and k > 1:
        v0 = cast(vals[base], f32)
        total = 0.0
        for j in range(k):
            total += weight(vals, base, j, v0, temperature)
        cut = top_p * total
        c = 0.0
        n = k
        kept = total
        for j in range(k):
            c += weight(vals, base, j, v0, temperature)
            if c >= cut and n == k:
                n = j + 1
                kept = c
        target = draw_uniform(seed, row) * kept
        c = 0.0
        pick = n - 1
        for j in range(n - 1):
            c += weight(vals, base, j, v0, temperature)
            if c > target and pick == n - 1:
                pick = j
        tok = idx[base + pick]
    tokens[row] = tok


@kernel
def sample_tokens(vals: Tensor[T], idx: Tensor[i32], tokens: Tensor[i32], k: int, temperature: float, top_p: float,
                  seed: u32):
    """tokens[r] = the token drawn for row r from its k ranked candidates; launch rows threads."""
    sample_row(vals, idx, tokens, k, temperature, top_p, seed)


@kernel
def sample_tokens_f32(vals: Tensor[T], idx: Tensor[i32], tokens: Tensor[f32], k: int, temperature: float,
                      top_p: float, seed: u32):
    """``sample_tokens`` writing the token as f32 (exact below 2^24): the registered entry's checked output."""
    sample_row(vals, idx, tokens, k, temperature, top_p, seed)


@kernel
def sample_tokens_at(vals: Tensor[T], idx: Tensor[i32], tokens: Tensor[i32], k: int, temperature: float,
                     top_p: float, seed: u32, step: Tensor[i32]):
    """``sample_tokens`` with the seed ``seed + step[0]`` (u32, wrapping): a step counter on the device, so that a
    recorded decode step (model/decode_graph.py) draws with a new seed at every replay."""
    sample_row(vals, idx, tokens, k, temperature, top_p, seed + cast(step[0], u32))


def launch_sample(logits: Any, tokens: Any, temperature: float, top_p: float, seed: int, top_k: int = MAX_K,
                  backend: str | None = None, step: Any = None) -> None:
    """tokens[r] = the token sampled from row r of the C-contiguous (rows, vocab) logits (the module's rule); tokens
    is (rows,) i32 (or f32: ``sample_tokens_f32``). With ``step`` (a one-element i32 array on the device) the seed
    is ``seed + step[0]``, read when the draw runs."""
    rows, ncols = logits.shape
    k = 1 if temperature <= 0.0 else min(int(top_k), ncols)
    if not 1 <= k <= MAX_K:
        raise ValueError(f"sampling: top_k = {top_k} must be in 1 .. {MAX_K}")
    vals = scratch(logits, (rows, k), "like")
    idx = scratch(logits, (rows, k), "i32")
    launch_topk(logits, vals, idx, k, backend)
    if step is not None:
        sample_tokens_at[rows](vals, idx, tokens, k, float(temperature), float(top_p), int(seed) & 0xFFFFFFFF, step,
                               backend=backend)
        return
    f32_out = str(getattr(tokens, "dtype", "")).replace("torch.", "") in ("float32", "f32")  # NumPy/torch, iron
    kern = sample_tokens_f32 if f32_out else sample_tokens
    kern[rows](vals, idx, tokens, k, float(temperature), float(top_p), int(seed) & 0xFFFFFFFF, backend=backend)


# --- the float64 oracle, written from the rule (independent of the kernel) ----------------------------------------


def _pcg_np(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.uint32)
    with np.errstate(over="ignore"):
        state = x * np.uint32(747796405) + np.uint32(2891336453)
        word = ((state >> ((state >> np.uint32(28)) + np.uint32(4))) ^ state) * np.uint32(277803737)
    return (word >> np.uint32(22)) ^ word


def uniform(seed: int, rows: int) -> np.ndarray:
    """The draw of each row, in float64: pcg(pcg(seed) ^ row) >> 8, over 2^24."""
    h = _pcg_np(_pcg_np(np.full(rows, seed & 0xFFFFFFFF, dtype=np.uint32)) ^ np.arange(rows, dtype=np.uint32))
    return (h >> np.uint32(8)).astype(np.float64) / 16777216.0


def _draws(c: np.ndarray, n: int, u: float, eps: float) -> set[int]:
    """Candidates j < n the draw may give (u * c_n compared with each c_{j+1}, within eps of a boundary: both)."""
    target = u * c[n - 1]
    first = next((j for j in range(n - 1) if c[j] > target), n - 1)
    out = {first}
    for j in range(n - 1):
        if abs(c[j] - target) < eps:
            out.update((j, j + 1))
    return out


def sample_choices(logits: np.ndarray, temperature: float, top_p: float, seed: int, top_k: int = MAX_K,
                   eps: float = EPS) -> list[set[int]]:
    """Per row, every token the rule allows in float64 when sums within ``eps`` (relative to c_K) of a boundary may
    fall either way; one token where no boundary is that close."""
    x = np.asarray(logits).astype(np.float64)
    rows, ncols = x.shape
    k = 1 if temperature <= 0.0 else min(int(top_k), ncols)
    order = np.argsort(-x, axis=1, kind="stable")[:, :k]
    u = uniform(seed, rows)
    result = []
    for r in range(rows):
        if k == 1:
            result.append({int(order[r, 0])})
            continue
        v = x[r, order[r]]
        c = np.cumsum(np.exp((v - v[0]) / temperature))
        band = eps * c[-1]
        cut = top_p * c[-1]
        ns = {next(n for n in range(1, k + 1) if c[n - 1] >= cut or n == k)}
        for n in range(1, k):
            if abs(c[n - 1] - cut) < band:
                ns.update((n, n + 1))
        picks = set().union(*(_draws(c, n, u[r], band) for n in ns))
        result.append({int(order[r, j]) for j in picks})
    return result


def sample_oracle(logits: np.ndarray, temperature: float, top_p: float, seed: int, top_k: int = MAX_K) -> np.ndarray:
    """The token of each row, the rule in float64 with no epsilon band."""
    return np.array([s.pop() for s in sample_choices(logits, temperature, top_p, seed, top_k, eps=0.0)])


# --- registration: std/sample/sample at fixed settings; the checked output is the token (f32) --------------------

TEMPERATURE, TOP_P, TOP_K, SEED = 0.8, 0.9, 64, 20261201


def _setup(gen: InputGen) -> dict[str, np.ndarray]:
    """Random logits (scale 3: a few dozen tokens share most of the mass); a row whose draw lands within EPS of a
    boundary is redrawn, so that the oracle's single token is the only right answer."""
    rows, ncols = gen.shape
    x = gen.random(scale=3.0)
    while True:
        close = [r for r, s in enumerate(sample_choices(x, TEMPERATURE, TOP_P, SEED, TOP_K)) if len(s) > 1]
        if not close:
            break
        for r in close:
            x[r] = gen.random(shape=(ncols,), scale=3.0)
    return {"x": x, "out": np.full(rows, np.nan, np.float32)}


def _oracle(d) -> np.ndarray:
    return sample_oracle(d["x"], TEMPERATURE, TOP_P, SEED, TOP_K).astype(np.float64)


bench("std/sample/sample", setup=_setup,
      launch=lambda d, be: launch_sample(d["x"], d["out"], TEMPERATURE, TOP_P, SEED, TOP_K, be),
      references={"numpy": lambda d: _oracle(d).astype(np.float32)},
      bytes_moved=lambda shape, itemsize: int(np.prod(shape)) * itemsize,
      flops=lambda shape: int(np.prod(shape)),
      device_shapes=[(32, 128256)])(sample_tokens_f32)
test_kernel(oracle=_oracle, domain="signed", shapes=[(3, 5000), (4, 100)],
            tolerance={"f32": (0.0, 0.0), "f16": (0.0, 0.0), "bf16": (0.0, 0.0)})(sample_tokens_f32)
