"""Comparing a kernel's output with its float64 oracle: pass/fail within tolerance, max abs/rel error, worst index."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class Comparison:
    """How an output compares with its oracle. ``worst`` is the index that exceeds its tolerance the most (a NaN or
    a wrong infinity counts as infinitely far), or the index of the largest absolute error when all pass."""

    ok: bool
    max_abs: float
    max_rel: float
    worst: tuple[int, ...]
    got: float
    want: float
    nonfinite: int

    def describe(self) -> str:
        where = "[" + ", ".join(map(str, self.worst)) + "]"
        text = (f"max abs err {self.max_abs:.3g}, max rel err {self.max_rel:.3g}, worst at {where}: got {self.got!r}, "
                f"want {self.want!r}")
        if self.nonfinite:
            text += f"; {self.nonfinite} unexpected NaN/inf"
        return text


def compare(out: np.ndarray, expected: np.ndarray, tol: tuple[float, float]) -> Comparison:
    """Check ``|out - expected| <= atol + rtol * |expected|`` everywhere; a NaN or inf in ``out`` where the oracle
    is finite fails (outputs start poisoned with NaN, so an element never written fails)."""
    got = np.asarray(out).astype(np.float64).reshape(np.shape(expected))
    want = np.asarray(expected, dtype=np.float64)
    if got.size == 0:
        return Comparison(True, 0.0, 0.0, (), 0.0, 0.0, 0)
    same_special = (np.isnan(got) & np.isnan(want)) | (np.isinf(want) & (got == want))
    with np.errstate(invalid="ignore", over="ignore"):
        err = np.where(same_special, 0.0, np.abs(got - want))
        err = np.where(np.isnan(err), np.inf, err)
        rel = err / np.maximum(np.abs(want), np.finfo(np.float64).tiny)
        excess = err - (tol[0] + tol[1] * np.abs(np.where(np.isfinite(want), want, 0.0)))
    excess = np.where(np.isnan(excess), np.inf, excess)
    ok = bool(np.all(excess <= 0))
    flat = int(np.argmax(excess)) if not ok else int(np.argmax(err))
    worst = tuple(int(i) for i in np.unravel_index(flat, want.shape))
    nonfinite = int(np.count_nonzero(~np.isfinite(got) & np.isfinite(want)))
    return Comparison(ok, float(np.max(err)), float(np.max(np.where(np.isfinite(rel), rel, np.inf))), worst,
                      float(got[worst]), float(want[worst]), nonfinite)
