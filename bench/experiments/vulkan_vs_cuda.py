"""Issue #4 point 5 on the H200: the same kernels on NVIDIA's Vulkan driver and on CUDA, checked against NumPy and
timed on the device (Vulkan timestamp queries around the dispatch; CUDA events). Writes JSON to argv[1]."""

import json
import sys
import time

import numpy as np

import iron
from iron.runtime import get_backend
from iron.std.softmax import softmax
from iron.std.unary import iron_exp


@iron.kernel
def copy(a: iron.Tensor[iron.f32], out: iron.Tensor[iron.f32]):
    """The same shape of work as exp without the math: tells a slow exp from a slow dispatch or memory path."""
    i = iron.program_id(0)
    out[i] = a[i]


def cuda_ms(fn, reps=5):
    import torch

    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e))
    return float(np.median(times))


def vulkan_ms(fn, reps=3):
    be = get_backend("vulkan")
    times = []
    for _ in range(reps):
        fn()
        times.append(be.last_gpu_time_ms)
    return float(np.median(times)) if all(t is not None for t in times) else None


def _sm_clock():
    import subprocess

    try:
        return int(subprocess.run(["nvidia-smi", "--query-gpu=clocks.sm", "--format=csv,noheader,nounits", "-i", "0"],
                                  capture_output=True, text=True, timeout=10).stdout.split()[0])
    except Exception:  # noqa: BLE001 - a figure for the record only
        return None


def main():
    import torch

    out = {"vulkan_device": get_backend("vulkan").info(), "rows": []}
    rng = np.random.default_rng()
    n = 256 << 20
    a = rng.standard_normal(n, dtype=np.float32)
    o = np.full_like(a, np.nan)
    t0 = time.perf_counter()
    # before any CUDA work: does the Vulkan exp speed up over consecutive submissions (the GPU's clocks ramping)?
    variant = iron_exp.variant(iron.f32)
    be = get_backend("vulkan")
    series = []
    for _ in range(8):
        ms = be.time_launch(variant, {"a": a, "out": o}, {}, (n, 1, 1), (256, 1, 1), repeat=10)
        series.append({"ms_per_dispatch": ms, "sm_clock_mhz": _sm_clock()})
    out["vulkan_exp_series_before_cuda"] = series
    ms_vk = vulkan_ms(lambda: iron_exp[n](a, o, backend="vulkan"))
    err = float(np.max(np.abs(o.astype(np.float64) - np.exp(a.astype(np.float64))) / np.exp(a.astype(np.float64))))
    repeated = {g: be.time_launch(variant, {"a": a, "out": o}, {}, (n, 1, 1), (g, 1, 1), repeat=10)
                for g in (256, 1024)}
    ta, to = torch.from_numpy(a).cuda(), torch.empty(n, device="cuda")
    ms_cu = cuda_ms(lambda: iron_exp[n](ta, to))
    out["rows"].append({"kernel": "exp f32", "shape": [n], "vulkan_ms": ms_vk, "cuda_ms": ms_cu,
                        "vulkan_gbps": 8 * n / ms_vk / 1e6 if ms_vk else None, "cuda_gbps": 8 * n / ms_cu / 1e6,
                        "vulkan_max_rel_err": err, "wall_s": time.perf_counter() - t0,
                        "vulkan_ms_10_back_to_back_by_group": repeated})
    ms_copy_vk = be.time_launch(copy.variant(None), {"a": a, "out": o}, {}, (n, 1, 1), (256, 1, 1), repeat=10)
    ms_copy_cu = cuda_ms(lambda: copy[n](ta, to))
    out["rows"].append({"kernel": "copy f32 (an Iron kernel)", "shape": [n], "vulkan_ms": ms_copy_vk,
                        "cuda_ms": ms_copy_cu, "copy_correct_on_vulkan": bool(np.array_equal(o, a))})
    # what SignedZeroInfNanPreserve (declared by every Iron module, for IEEE special values) costs on this driver
    from iron.codegen.spirv import emit as spirv_emit

    @iron.kernel
    def affine(a: iron.Tensor[iron.f32], out: iron.Tensor[iron.f32]):
        i = iron.program_id(0)
        out[i] = a[i] * 1.5 + 0.25

    modes = {}
    for keep in (True, False):
        spirv_emit.IEEE_SPECIALS = keep
        for k, v in ((iron_exp, variant), (affine, affine.variant(None)), (copy, copy.variant(None))):
            v.artifacts.clear()
            modes[f"{k.__name__} signed_zero_inf_nan_preserve={keep}"] = be.time_launch(
                v, {"a": a, "out": o}, {}, (n, 1, 1), (256, 1, 1), repeat=10)
    spirv_emit.IEEE_SPECIALS = True
    for v in (variant, affine.variant(None), copy.variant(None)):
        v.artifacts.clear()
    out["float_controls_ms"] = modes
    # the lanes module (4 elements per invocation, the default for 1-D elementwise launches) against the plain one
    import os

    lanes = {}
    for setting in ("1", "0"):
        os.environ["IRON_VULKAN_VECTORIZE"] = setting
        for k, v in ((iron_exp, variant), (copy, copy.variant(None))):
            lanes[f"{k.__name__} lanes={'on' if setting == '1' else 'off'}"] = be.time_launch(
                v, {"a": a, "out": o}, {}, (n, 1, 1), (256, 1, 1), repeat=10)
    del os.environ["IRON_VULKAN_VECTORIZE"]
    out["lanes_ms"] = lanes
    rows, cols = 16384, 8192
    x = (rng.standard_normal((rows, cols)) * 4).astype(np.float32)
    y = np.full_like(x, np.nan)
    ms_vk = vulkan_ms(lambda: softmax[rows * 256, 256](x, y, cols, 256, backend="vulkan"))
    e = np.exp(x.astype(np.float64) - x.max(1, keepdims=True))
    ref = e / e.sum(1, keepdims=True)
    err = float(np.max(np.abs(y - ref)))
    tx, ty = torch.from_numpy(x).cuda(), torch.empty(rows, cols, device="cuda")
    ms_cu = cuda_ms(lambda: softmax[rows * 256, 256](tx, ty, cols, 256))
    out["rows"].append({"kernel": "softmax f32", "shape": [rows, cols], "vulkan_ms": ms_vk, "cuda_ms": ms_cu,
                        "vulkan_max_abs_err": err})
    print(json.dumps(out, indent=1))
    with open(sys.argv[1], "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
