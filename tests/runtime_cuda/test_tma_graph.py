"""A GEMM whose tiles ride the copy engine (std/gemm's gemm_tma), recorded into a CUDA graph with buffers it has
not seen: its descriptors are made while Iron's stream is being captured (written through a stream of their own,
not into the graph) and stay valid at every replay. On the H200 the 1B model's batched decode step failed here
("GraphBuilder has no attribute handle")."""

from __future__ import annotations

import numpy as np
import pytest

import iron
from iron.std import gemm


def test_descriptors_made_while_recording(rng, monkeypatch):
    from iron.runtime import unavailable_reason

    if unavailable_reason("cuda") or not gemm.uses_wgmma("cuda"):
        pytest.skip("needs CUDA on sm_90 (the copy engine's descriptors)")
    import ml_dtypes

    monkeypatch.setenv("IRON_TMA_MIN_FLOPS", "0")
    m, n, k = 8, 256, 512
    bf = ml_dtypes.bfloat16

    def arrays():
        a, b = (rng.standard_normal(s).astype(bf) for s in ((m, k), (n, k)))
        return a, b, iron.asarray(a, backend="cuda"), iron.asarray(b, backend="cuda")

    _, _, a0, b0 = arrays()
    c0 = iron.empty((m, n), iron.bf16, backend="cuda")
    gemm.launch(a0, b0, c0, trans_b=True, backend="cuda")  # tuned and compiled outside the recording
    iron.synchronize("cuda")
    poison = np.full((m, n), 7.0, bf)
    steps = [(*arrays(), iron.asarray(poison, backend="cuda")) for _ in range(3)]
    with iron.graph("cuda") as g:
        for _, _, a, b, c in steps:  # new buffers: new descriptors, made while recording
            gemm.launch(a, b, c, trans_b=True, backend="cuda")
    for _ in range(2):
        g.launch()
    iron.synchronize("cuda")
    for ah, bh, _, _, c in steps:
        want = ah.astype(np.float64) @ bh.astype(np.float64).T
        got = c.numpy().astype(np.float64)
        assert np.abs(got - want).max() <= 2e-2 * np.abs(want).max()
