"""Where Iron's long-prompt prefill parts from transformers on CUDA (the bench row's check failed at 512 and 2048
tokens on the H200, 2026-12-03: last-position logits 0.14 and 0.52 off, max |ref|-relative, while a 32-token
prompt was 0.03 off). The 1B-shaped model of iron/model/bench_rows.py (random bf16 weights) on Iron and on
transformers in float32 (the reference) and bf16 (its own rounding's distance), for prompts of several lengths.
Then again with IRON_ATTN_WG=0 and with IRON_TMA=0 (the wgmma attention, the copy-engine GEMM taken out), unless
PC_KNOBS=0. The cause (2026-12-03, ninth session): the reference's rotary inv_freq had been cast to bf16 with its
weights (iron/model/hf_peer.py, to_dtype_keeping_rope).

    python bench/experiments/prefill_check.py [T ...]    (default 32 128 512 2048)
"""

from __future__ import annotations

import copy
import json
import os
import sys

import numpy as np
import torch

from iron.model import bench_rows
from iron.model.hf_peer import hf_model, torch_state


def main() -> None:
    lengths = [int(a) for a in sys.argv[1:]] or [32, 128, 512, 2048]
    cfg = bench_rows.MODELS[2048]
    m, tensors = bench_rows.model_for("cuda", 2048)
    ref16 = hf_model(cfg, torch_state(tensors))
    ref32 = copy.deepcopy(ref16).float()
    variants = ({}, {"IRON_ATTN_WG": "0"}, {"IRON_TMA": "0"}) if os.environ.get("PC_KNOBS") != "0" else ({},)
    for knobs in variants:  # read at each launch: set here in turn
        for k in ("IRON_ATTN_WG", "IRON_TMA"):
            os.environ.pop(k, None)
        os.environ.update(knobs)
        for t in lengths if not knobs else [t for t in lengths if t >= 512]:
            _check(m, ref16, ref32, cfg, knobs, t)


def _check(m, ref16, ref32, cfg: dict, knobs: dict, t: int) -> None:
    ids = np.random.default_rng(t).integers(0, cfg["vocab_size"], t).astype(np.int32)
    m.reset(t)
    got = m.prefill(ids.tolist(), all_logits=True).numpy().astype(np.float64)
    x = torch.tensor(ids[None].astype(np.int64), device="cuda")
    with torch.no_grad():
        want16 = ref16(x).logits[0].double().cpu().numpy()
        want32 = ref32(x).logits[0].double().cpu().numpy()
    scale = np.abs(want32).max()
    per_row = np.abs(got - want32).max(axis=1) / scale
    print(json.dumps({"knobs": knobs, "tokens": t,
                      "iron_vs_f32_last": float(per_row[-1]), "iron_vs_f32_all": float(per_row.max()),
                      "bf16_vs_f32_all": float(np.abs(want16 - want32).max() / scale),
                      "iron_vs_bf16_all": float(np.abs(got - want16).max() / np.abs(want16).max()),
                      "worst_rows": [int(i) for i in np.argsort(per_row)[-3:]],
                      "err_by_quarter": [float(per_row[q * t // 4:(q + 1) * t // 4].max()) for q in range(4)]}),
          flush=True)


if __name__ == "__main__":
    main()
