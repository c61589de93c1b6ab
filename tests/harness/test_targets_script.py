"""scripts/targets.py: the issues' speed targets read from `iron bench --json` documents."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "targets.py"


def _targets():
    spec = importlib.util.spec_from_file_location("targets_script", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_rows_are_judged_in_the_targets_measure(tmp_path):
    rows = [
        {"kernel": "std/norm/layer_norm", "shape": [16384, 8192], "dtype": "bf16", "iron_gbps": 3950.0,
         "gflops": 1.0, "refs": {"triton": {"gbps": 3733.0, "gflops": 1.0}}},
        {"kernel": "std/attention/prefill", "shape": [4096, 32, 8, 128], "dtype": "bf16", "iron_gbps": 10.0,
         "gflops": 373400.0, "refs": {"torch": {"gbps": 1.0, "gflops": 474000.0}}},
        {"kernel": "std/elementwise/silu", "shape": [268435456], "dtype": "bf16", "iron_gbps": 3961.0,
         "gflops": 1.0},
        {"kernel": "std/norm/layer_norm", "shape": [4096, 4096], "dtype": "bf16", "iron_gbps": 1.0, "gflops": 1.0},
        {"kernel": "std/sample/topk", "shape": [32, 128256], "dtype": "bf16", "ok": False, "error": "boom"},
        {"kernel": "std/reduce/argmax", "shape": [32, 128256], "dtype": "bf16", "ok": False, "iron_gbps": 9000.0,
         "gflops": 1.0},
    ]
    path = tmp_path / "run.json"
    path.write_text(json.dumps({"backend": "cuda", "ceiling": {"copy_gbps": 4000.0}, "rows": rows}))
    vulkan = tmp_path / "vulkan.json"
    vulkan.write_text(json.dumps({"backend": "vulkan", "rows": rows}))
    lines = _targets().report([str(path), str(vulkan)], show_all=True)
    assert any(ln.startswith("(not judged:") and "vulkan" in ln for ln in lines)
    assert sum("layer_norm bf16 16384x8192" in ln for ln in lines) == 1
    assert any("argmax bf16 32x128256: 9000.0 GB/s (target 2000) wrong result" in ln for ln in lines)
    assert any("layer_norm bf16 16384x8192: 3950.0 GB/s (target 3900) met; peers: triton 3733" in ln for ln in lines)
    assert any("prefill bf16 4096x32x8x128: 373.4 TF/s (target 430) MISSED; peers: torch 474" in ln for ln in lines)
    assert any("silu bf16 268435456: 99.0 % of copy ceiling (target 97) met" in ln for ln in lines)
    assert any("topk bf16 32x128256: - GB/s (target 2000) no figure" in ln for ln in lines)
    assert not any("4096x4096" in ln and "layer_norm" in ln for ln in lines)  # no target at that shape
    assert any(ln.startswith("#18 std/quant/gemv_q4") and ln.endswith("no row") for ln in lines)


def test_gbps_lines_give_the_one_launch_bound(tmp_path):
    """4 MB at a 4000 GB/s ceiling is 1 us of memory time; with a 3 us empty launch one launch shows <= 1000 GB/s."""
    row = {"kernel": "std/reduce/argmax", "shape": [32, 128256], "dtype": "bf16", "iron_gbps": 800.0,
           "iron_us": 5.0, "gflops": 1.0}
    path = tmp_path / "run.json"
    path.write_text(json.dumps({"backend": "cuda", "ceiling": {"copy_gbps": 4000.0, "launch_us": 3.0},
                                "rows": [row]}))
    (line,) = _targets().report([str(path)])
    assert "800.0 GB/s (target 2000) (one launch at this size: <= 1000) MISSED" in line
    path.write_text(json.dumps({"backend": "cuda", "ceiling": {"copy_gbps": 4000.0}, "rows": [row]}))
    assert "one launch" not in _targets().report([str(path)])[0]  # no empty-kernel figure in the run: no bound
