"""torch peers by name: one library call each, writing ``ref_out`` where torch has an ``out=`` form, else returning
torch's own output (a copy into ``ref_out`` would be a second pass that the timing would charge to torch)."""

from __future__ import annotations

from typing import Any


def softmax(d: dict[str, Any], *, x: str = "x") -> None:
    import torch

    torch.softmax(d[x], dim=-1, out=d["ref_out"])


def rms_norm(d: dict[str, Any], *, eps: float = 1e-6, x: str = "x", w: str = "w") -> Any:
    import torch

    # no out= form: return torch's output (checked against the oracle) rather than copy it into ref_out
    return torch.nn.functional.rms_norm(d[x], d[x].shape[-1:], d[w], eps=eps)


def matmul(d: dict[str, Any], *, trans_b: bool = False, a: str = "a", b: str = "b") -> Any:
    """C = A @ B (or A @ B^T with ``trans_b``: ``b`` is (N, K)); cuBLAS through torch. f32 inputs use no TF32
    unless the process allowed it (torch's default is full f32). An output dtype other than the inputs' (bf16 in,
    f32 out) is cuBLAS's f32 accumulator returned without the rounding to bf16 where this torch can say so. 3-D
    operands are a batch of products."""
    import torch

    lhs, rhs, out = d[a], d[b].transpose(-1, -2) if trans_b else d[b], d["ref_out"]
    if out.dtype == lhs.dtype:
        torch.matmul(lhs, rhs, out=out)
        return None
    try:  # torch >= 2.9: a bf16/f16 product with an f32 result, accumulated and stored in f32 by cuBLAS
        return (torch.mm if lhs.dim() == 2 else torch.bmm)(lhs, rhs, out_dtype=out.dtype)
    except TypeError:
        return torch.matmul(lhs, rhs).to(out.dtype)
