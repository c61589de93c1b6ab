"""Issue 14's Vulkan GEMM row through VK_NV_cooperative_matrix2: does a GEMM of workgroup-scope cooperative matrices
loaded by tensor layouts (the driver staging through shared memory, coopmat2_spirv.py) reach half of Iron's CUDA
GEMM on the H200, where gemm_rs (subgroup-scope KHR matrices staged by the kernel) reached 23 %? Prints the device's
coopmat2 properties and flexible dimensions, checks each tile configuration against float64 NumPy at 512^3, then
times it at 4096^3 and 8192^3 (GPU timestamps, ``repeat`` dispatches in one submission), beside Iron's std GEMM and
torch on CUDA in the same process.

    IRON_VULKAN_COOPMAT2=1 python bench/experiments/vk_coopmat2_gemm.py out.json [dtype ...]
The .spv modules are assembled here where spirv-as 2025+ is found, else read from bench/experiments/coopmat2_spv/.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import ml_dtypes
import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
import coopmat2_spirv as cs  # noqa: E402

import iron.ir.types as t  # noqa: E402
from iron.codegen.spirv.module import SpirvBuffer, SpirvKernel, SpirvPush, SpirvSharedLength  # noqa: E402
from iron.runtime import get_backend  # noqa: E402

SPV = Path(__file__).parent / "coopmat2_spv"
#: s26 (2026-12-06): the std module's best (128 x 256 x 64, 256 invocations, two K steps, groups of 8) beside 512
#: invocations (16 warps: half the accumulators a warp, twice the warps to hide the driver's staging) and 256 x 128,
#: 128 x 512 and 256 x 256 tiles (new in s26; the s16 sweep had timed other shapes). Earlier lists are in their commits (README of the
#: results): 286d647 run-time sizes; 9719d04 Aligned, prefetch, constant sizes; 2ae7ac1 N/8 and K/8, specialization
#: constants, unroll 2; 6a18d33 unroll 4 and grouped order.
CONFIGS = [(128, 256, 64, 256), (128, 256, 64, 512), (256, 128, 64, 256), (256, 128, 64, 512), (128, 512, 64, 256),
           (128, 512, 64, 512), (256, 256, 64, 256), (256, 256, 64, 512)]
if os.environ.get("CM2_CONFIGS"):  # "BMxBNxBKxWG ..." to time a subset
    CONFIGS = [tuple(int(v) for v in c.split("x")) for c in os.environ["CM2_CONFIGS"].split()]
OPTIONS = [{"aligned": True, "spec": True, "unroll": 2, "swizzle": 8}]
NP = {"bf16": ml_dtypes.bfloat16, "f16": np.float16}
#: edges through clamping layouts: the std module's best with clamp mode Constant, checked at shapes off the tiles
CLAMPED = [((128, 256, 64, 256), {"aligned": True, "spec": True, "unroll": 2, "swizzle": 8, "clamp": True})]
EDGE_SHAPES = [(1000, 1000, 1000), (2048 + 64, 1536 + 40, 1000 + 8), (4096, 4096, 4096)]


def tag(opts: dict) -> str:
    return "".join(f"_{k}{v if v is not True else ''}" for k, v in sorted(opts.items()))


def module(dtype: str, cfg: tuple[int, ...], opts: dict | None = None) -> bytes:
    opts = opts or {}
    path = SPV / f"gemm_{dtype}_{'x'.join(map(str, cfg))}{tag(opts)}.spv"
    if cs.tool("spirv-as") and os.environ.get("CM2_PREBUILT") != "1":
        try:
            words = cs.assemble(cs.gemm_asm(dtype, *cfg, **opts))
            SPV.mkdir(exist_ok=True)
            path.write_bytes(words)
            return words
        except (RuntimeError, TypeError):
            pass
    return path.read_bytes()


def kernel(dtype: str, cfg: tuple[int, ...], opts: dict | None = None) -> SpirvKernel:
    st = t.bf16 if dtype == "bf16" else t.f16
    feats = {"cooperative_matrix", "spirv_1_6", "vulkan_memory_model", "storage16"}
    feats.add("cooperative_matrix_bf16" if dtype == "bf16" else "float16")
    opts = opts or {}
    names = ("M", "N8", "K8") if opts.get("hint8") else "MNK"
    lengths = tuple(SpirvSharedLength(p, 3 + i, 0) for i, p in enumerate("MNK")) if opts.get("spec") else ()
    return SpirvKernel(words=module(dtype, cfg, opts), entry="gemm_cm2", shared_lengths=lengths,
                       buffers=(SpirvBuffer("A", 0, st, True), SpirvBuffer("B", 1, st, True),
                                SpirvBuffer("C", 2, st, False)),
                       push=tuple(SpirvPush(n, 4 * i, t.u32) for i, n in enumerate(names)), push_size=12,
                       local_size_spec_ids=(0, 1, 2), shared_bytes=0, features=frozenset(feats))


def run(be, spk, cfg, a, b, c, m, n, k, repeat=1):
    bm, bn, _, wg = cfg
    return be.run_spirv(spk, {"A": a, "B": b, "C": c}, {"M": m, "N": n, "K": k, "N8": n // 8, "K8": k // 8},
                        (n // bn * wg, m // bm, 1),
                        (wg, 1, 1), repeat=repeat)


def cuda_rows(dtype: str, sizes) -> list[dict]:
    try:
        import torch

        from iron.std import gemm as G
    except ImportError:
        return []
    rows = []
    td = torch.bfloat16 if dtype == "bf16" else torch.float16
    for s in sizes:
        a, b = (torch.randn(s, s, device="cuda", dtype=td) for _ in range(2))
        c = torch.empty(s, s, device="cuda", dtype=td)
        for name, fn in (("iron_cuda", lambda: G.launch(a, b, c, backend="cuda")), ("torch", lambda: torch.mm(a, b))):
            fn()
            torch.cuda.synchronize()
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            reps = 20 if s <= 4096 else 5
            e0.record()
            for _ in range(reps):
                fn()
            e1.record()
            torch.cuda.synchronize()
            ms = e0.elapsed_time(e1) / reps
            rows.append({"who": name, "size": s, "ms": ms, "tflops": 2 * s ** 3 / ms / 1e9})
            print(rows[-1], flush=True)
    return rows


def measure(be, dtype, cfg, opts, a, b, want, big) -> dict:
    """One module: checked (at 512^3, or on 64 rows at its own size), then timed at each size it takes."""
    npt = NP[dtype]
    row = {"dtype": dtype, "cfg": cfg, "opts": tag(opts)}
    try:
        for n, (x, y) in big.items():
            if "dims" in opts and opts["dims"] != n:
                continue
            spk = kernel(dtype, cfg, opts)
            if "dims" not in opts and "max_rel_err" not in row:
                s = a.shape[0]
                c = np.full((s, s), np.nan, npt)
                run(be, spk, cfg, a, b, c, s, s, s)
                got, ref = c.astype(np.float64), want
            cc = np.full((n, n), np.nan, npt)
            ms = run(be, spk, cfg, x, y, cc, n, n, n, repeat=10 if n == 4096 else 4)
            if "dims" in opts:
                got, ref = cc[:64].astype(np.float64), x[:64].astype(np.float64) @ y.astype(np.float64)
            err = np.abs(got - ref) / (np.abs(ref) + 1.0)
            row["max_rel_err"] = float(np.max(err)) if np.all(np.isfinite(got)) else "nan"
            row["ok"] = row["max_rel_err"] != "nan" and row["max_rel_err"] < 2e-2
            row[f"ms_{n}"] = ms
            row[f"tflops_{n}"] = None if ms is None else 2 * n ** 3 / ms / 1e9
    except Exception as e:  # noqa: BLE001 - a configuration the driver refuses is a result too
        row["error"] = f"{type(e).__name__}: {e}"[:400]
    print(row, flush=True)
    return row


def main(out: str, dtypes: list[str]) -> None:
    try:  # a CUDA context first: without one the Vulkan GEMM ran at a fraction of its clocks (2026-12-02, s3)
        import torch

        torch.zeros(1, device="cuda")
    except Exception:  # noqa: BLE001 - no torch or no CUDA: Vulkan alone
        pass
    be = get_backend("vulkan")
    info = be.info()
    print(json.dumps(info.get("cooperative_matrix2"), indent=None), flush=True)
    rng = np.random.default_rng(0)
    result = {"device": info.get("name"), "driver": info.get("driver"), "coopmat2": info.get("cooperative_matrix2"),
              "rows": []}
    for dtype in dtypes:
        npt = NP[dtype]
        a = rng.standard_normal((512, 512)).astype(np.float32).astype(npt)
        b = rng.standard_normal((512, 512)).astype(np.float32).astype(npt)
        want = a.astype(np.float64) @ b.astype(np.float64)
        big = {n: [rng.standard_normal((n, n)).astype(np.float32).astype(npt) for _ in range(2)] for n in (4096, 8192)}
        for cfg in CONFIGS:
            for opts in OPTIONS:
                sizes = (4096, 8192) if "dims" in opts else (None,)
                for n in sizes:
                    o = dict(opts, dims=n) if n else opts
                    result["rows"].append(measure(be, dtype, cfg, o, a, b, want, big))
        result["rows"] += edges(be, dtype, rng)
        if os.environ.get("CM2_CUDA", "1") != "0":
            result["rows"] += cuda_rows(dtype, (4096, 8192))
        Path(out).write_text(json.dumps(result, indent=1, default=str))


def edges(be, dtype: str, rng) -> list[dict]:
    """The clamped module at shapes off its tiles: every element checked (float64), then GPU time."""
    npt, rows = NP[dtype], []
    for cfg, opts in CLAMPED:
        for m, n, k in EDGE_SHAPES:
            row = {"dtype": dtype, "cfg": cfg, "opts": tag(opts), "shape": (m, n, k)}
            try:
                spk = kernel(dtype, cfg, opts)
                a = rng.standard_normal((m, k)).astype(np.float32).astype(npt)
                b = rng.standard_normal((k, n)).astype(np.float32).astype(npt)
                c = np.full((m, n), np.nan, npt)
                bm, bn, _, wg = cfg
                grid = (-(-n // bn) * wg, -(-m // bm), 1)
                ms = be.run_spirv(spk, {"A": a, "B": b, "C": c}, {"M": m, "N": n, "K": k}, grid, (wg, 1, 1),
                                  repeat=5)
                got = c[:256].astype(np.float64)
                want = a[:256].astype(np.float64) @ b.astype(np.float64)
                err = np.abs(got - want) / (np.abs(want) + 1.0)
                row.update(ms=ms, tflops=None if ms is None else 2 * m * n * k / ms / 1e9,
                           finite=bool(np.all(np.isfinite(c.astype(np.float32)))),
                           max_rel_err=float(np.nanmax(err)))
            except Exception as e:  # noqa: BLE001 - a refusal is a result
                row["error"] = f"{type(e).__name__}: {e}"[:400]
            print(row, flush=True)
            rows.append(row)
    return rows


def prebuild() -> None:
    """Assemble every module into coopmat2_spv/ (needs spirv-as 2025+): the H200 has no SPIRV-Tools."""
    for dtype in NP:
        for cfg in CONFIGS:
            for opts in OPTIONS:
                for n in ((4096, 8192) if "dims" in opts else (None,)):
                    module(dtype, cfg, dict(opts, dims=n) if n else opts)
        for cfg, opts in CLAMPED:
            module(dtype, cfg, opts)


if __name__ == "__main__":
    if sys.argv[1:] == ["--prebuild"]:
        prebuild()
    else:
        main(sys.argv[1], sys.argv[2:] or ["bf16"])
