"""NumPy peers by name (the host reference on the CPU backends): f32 arithmetic, the result in the output's dtype."""

from __future__ import annotations

from typing import Any

import numpy as np


def matmul(d: dict[str, Any], *, trans_b: bool = False, a: str = "a", b: str = "b", out: str = "out") -> np.ndarray:
    lhs = d[a].astype(np.float32)
    rhs = d[b].astype(np.float32)
    return (lhs @ (np.swapaxes(rhs, -1, -2) if trans_b else rhs)).astype(d[out].dtype)  # 3-D: a batch
