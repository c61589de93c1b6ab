"""Experiment (issue 14): a hand-written Hopper GEMM, wgmma fed by cp.async into 128-byte-swizzled shared memory,
to validate the descriptors and layouts Iron's sm_90a lowering will emit and to measure what this design reaches
before building it into the compiler. Not product code: the product path is iron.std.gemm.

Design: a block of WG warpgroups (128 threads each) computes a (64 WG) x BN tile of C; every thread also stages
tiles with 16-byte cp.async. BK = 64 (one 128-byte row of bf16 per K step). A (M x K, K-major) is stored row r at
byte 128 r with 16-byte chunk c at c ^ (r % 8); B (K x N row-major, "MN-major", wgmma's transposed B) in panels of
64 columns: element (k, n) at panel n / 64 (stride 64 * 128 bytes), row k, chunk ((n % 64) / 8) ^ (k % 8). STAGES
deep, one wgmma batch in flight (wait_group 1) or none (wait_group 0).

Run on the H200: python3 bench/experiments/wgmma_proto.py OUT.json  (builds with nvcc -gencode sm_90a, checks
against torch in float64 on random inputs, times with CUDA events, L2 flushed by rotating inputs).
"""

from __future__ import annotations

import ctypes
import json
import subprocess
import sys
import tempfile
from pathlib import Path


def wgmma_asm(n: int, elem: str, trans_b: int) -> str:
    """The device function issuing one wgmma m64nNk16 with f32 accumulators d[N / 2] (scale-d from ``acc``)."""
    regs = n // 2
    outs = ",".join(f"%{i}" for i in range(regs))
    cons = ", ".join(f'"+f"(d[{i}])' for i in range(regs))
    return f"""
__device__ __forceinline__ void wgmma_{n}_{elem}_{trans_b}(float* d, unsigned long long da, unsigned long long db,
                                                          int acc) {{
    asm volatile("{{\\n.reg .pred p;\\nsetp.ne.b32 p, %{regs + 2}, 0;\\n"
                 "wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{elem}.{elem} {{{outs}}}, %{regs}, %{regs + 1}, p, 1, 1, 0, "
                 "{trans_b};\\n}}\\n"
                 : {cons}
                 : "l"(da), "l"(db), "r"(acc));
}}
"""


KERNEL = r"""
#include <cuda_bf16.h>
#include <cstdint>
__device__ __forceinline__ unsigned long long desc(const void* p, unsigned lbo, unsigned sbo) {
    const unsigned a = (unsigned)__cvta_generic_to_shared(p);
    return (unsigned long long)((a & 0x3FFFF) >> 4) | ((unsigned long long)((lbo >> 4) & 0x3FFF) << 16)
         | ((unsigned long long)((sbo >> 4) & 0x3FFF) << 32) | (1ull << 62);
}
__device__ __forceinline__ void cp16(void* dst, const void* src) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" :: "r"((unsigned)__cvta_generic_to_shared(dst)),
                 "l"(__cvta_generic_to_global(src)));
}
WGMMA_FUNCS
extern "C" __global__ void __launch_bounds__(WG * 128, 1)
gemm(const __nv_bfloat16* A, const __nv_bfloat16* B, __nv_bfloat16* C, int M, int N, int K, unsigned lbo_b,
     unsigned sbo_b) {
    extern __shared__ __align__(1024) unsigned char smem[];
    constexpr int BM = 64 * WG, BK = 64, A_BYTES = BM * 128, B_BYTES = BK * BN * 2, STAGE = A_BYTES + B_BYTES;
    unsigned char* base = (unsigned char*)(((uintptr_t)smem + 1023) & ~(uintptr_t)1023);
    const int tid = threadIdx.x, nthreads = WG * 128, wg = tid / 128;
    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN, ktiles = K / BK;
    float d[BN / 2];  // not zeroed: the first wgmma overwrites (scale-d 0); K >= 64 is assumed here
    auto load = [&](int kt, int s) {
        unsigned char* sa = base + s * STAGE;
        unsigned char* sb = sa + A_BYTES;
        const int k0 = kt * BK;
#pragma unroll
        for (int v = tid; v < BM * 8; v += nthreads) {  // A: BM rows x 8 chunks
            const int r = v >> 3, c = v & 7;
            cp16(sa + r * 128 + ((c ^ (r & 7)) << 4), A + (size_t)(m0 + r) * K + k0 + c * 8);
        }
#pragma unroll
        for (int v = tid; v < BK * (BN / 8); v += nthreads) {  // B: BK rows x BN/8 chunks, panels of 64 columns
            const int k = v / (BN / 8), cn = v % (BN / 8), p = cn >> 3, c = cn & 7;
            cp16(sb + p * (BK * 128) + k * 128 + ((c ^ (k & 7)) << 4), B + (size_t)(k0 + k) * N + n0 + cn * 8);
        }
    };
#pragma unroll
    for (int s = 0; s < STAGES - PREFETCH_GAP; ++s) {
        if (s < ktiles) load(s, s);
        asm volatile("cp.async.commit_group;" ::: "memory");
    }
    for (int kt = 0; kt < ktiles; ++kt) {
        asm volatile("cp.async.wait_group %0;" :: "n"(STAGES - PREFETCH_GAP - 1) : "memory");
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
        __syncthreads();
        const int nxt = kt + STAGES - PREFETCH_GAP;
        if (nxt < ktiles) load(nxt, nxt % STAGES);
        asm volatile("cp.async.commit_group;" ::: "memory");
        unsigned char* sa = base + (kt % STAGES) * STAGE + wg * 64 * 128;
        unsigned char* sb = base + (kt % STAGES) * STAGE + A_BYTES;
        asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#pragma unroll
        for (int kk = 0; kk < 4; ++kk) {
            WGMMA_CALL(d, desc(sa + kk * 32, 16, 1024), desc(sb + kk * 16 * 128, lbo_b, sbo_b), kt > 0 || kk > 0);
        }
        asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
        asm volatile("wgmma.wait_group.sync.aligned %0;" :: "n"(INFLIGHT) : "memory");
    }
    asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
    const int w = (tid % 128) / 32, lane = tid % 32, g = lane / 4, q = lane % 4;
#pragma unroll
    for (int j = 0; j < BN / 8; ++j) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int r = m0 + wg * 64 + w * 16 + g + 8 * h, c = n0 + 8 * j + 2 * q;
            __nv_bfloat162 v = __floats2bfloat162_rn(d[4 * j + 2 * h], d[4 * j + 2 * h + 1]);
            *reinterpret_cast<__nv_bfloat162*>(C + (size_t)r * N + c) = v;
        }
    }
}
"""


def build(wg: int, bn: int, stages: int, inflight: int, workdir: Path) -> Path:
    gap = 2 if inflight else 1  # with a wgmma batch in flight the buffer it reads is refilled one step later
    src = KERNEL.replace("WGMMA_FUNCS", wgmma_asm(bn, "bf16", 1)).replace("WGMMA_CALL", f"wgmma_{bn}_bf16_1")
    defs = f"#define WG {wg}\n#define BN {bn}\n#define STAGES {stages}\n#define INFLIGHT {inflight}\n" \
           f"#define PREFETCH_GAP {gap}\n"
    name = f"wg{wg}_bn{bn}_s{stages}_f{inflight}"
    cu = workdir / f"{name}.cu"
    cu.write_text(defs + src)
    cubin = workdir / f"{name}.cubin"
    r = subprocess.run(["nvcc", "-cubin", "-O3", "-gencode=arch=compute_90a,code=sm_90a", "-Xptxas", "-v",
                        str(cu), "-o", str(cubin)], capture_output=True, text=True)
    print(name, r.stderr.strip().replace("\n", " | ")[-400:])
    if r.returncode:
        raise RuntimeError(r.stderr)
    return cubin


def smem_bytes(wg: int, bn: int, stages: int) -> int:
    return stages * (64 * wg * 128 + 64 * bn * 2) + 1024


def main(out_path: str) -> None:
    import torch
    from cuda.bindings import driver as cu

    work = Path(tempfile.mkdtemp())
    configs = [(2, 128, 4, 1), (2, 128, 4, 0), (2, 256, 3, 1), (2, 256, 4, 1), (1, 256, 4, 1), (2, 192, 4, 1)]
    results = []
    torch.cuda.init()
    (err,) = cu.cuInit(0)
    err, ctx = cu.cuDevicePrimaryCtxRetain(0)
    cu.cuCtxSetCurrent(ctx)
    for m, n, k in [(512, 512, 256), (4096, 4096, 4096), (8192, 8192, 8192)]:
        sets = 1 if m <= 512 else 4 if m <= 4096 else 2
        a = [torch.randn(m, k, device="cuda", dtype=torch.bfloat16) for _ in range(sets)]
        b = [torch.randn(k, n, device="cuda", dtype=torch.bfloat16) for _ in range(sets)]
        c = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        ref = (a[0].double() @ b[0].double())
        for cfg in configs:
            wg, bn, stages, inflight = cfg
            if n % bn or m % (64 * wg):
                continue
            try:
                cubin = build(wg, bn, stages, inflight, work)
            except RuntimeError as e:
                results.append({"config": cfg, "error": str(e)[-600:]})
                continue
            err, mod = cu.cuModuleLoadData(cubin.read_bytes())
            err, fn = cu.cuModuleGetFunction(mod, b"gemm")
            shm = smem_bytes(wg, bn, stages)
            cu.cuFuncSetAttribute(fn, cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, shm)
            for lbo, sbo in [(64 * 128, 1024), (1024, 64 * 128)]:
                def launch(i=0, lbo=lbo, sbo=sbo):
                    args = [ctypes.c_void_p(a[i].data_ptr()), ctypes.c_void_p(b[i].data_ptr()),
                            ctypes.c_void_p(c.data_ptr()), ctypes.c_int(m), ctypes.c_int(n), ctypes.c_int(k),
                            ctypes.c_uint(lbo), ctypes.c_uint(sbo)]
                    ptrs = (ctypes.c_void_p * len(args))(*[ctypes.addressof(x) for x in args])
                    (e,) = cu.cuLaunchKernel(fn, n // bn, m // (64 * wg), 1, 128 * wg, 1, 1, shm,
                                             torch.cuda.current_stream().cuda_stream, ctypes.addressof(ptrs), 0)
                    assert e == cu.CUresult.CUDA_SUCCESS, e
                c.fill_(float("nan"))
                launch()
                torch.cuda.synchronize()
                rel = float((c.double() - ref).norm() / ref.norm())
                row = {"shape": [m, n, k], "config": cfg, "lbo": lbo, "sbo": sbo, "rel_err": rel}
                if rel < 1e-2 and m >= 4096:
                    ev = [torch.cuda.Event(enable_timing=True) for _ in range(2)]
                    for i in range(3):
                        launch(i % sets)
                    times = []
                    for rep in range(20):
                        ev[0].record()
                        launch(rep % sets)
                        ev[1].record()
                        torch.cuda.synchronize()
                        times.append(ev[0].elapsed_time(ev[1]))
                    ms = sorted(times)[len(times) // 2]
                    row["ms"] = ms
                    row["tflops"] = 2 * m * n * k / ms / 1e9
                print(row, flush=True)
                results.append(row)
                if rel < 1e-2:
                    break
        if m >= 4096:
            ev = [torch.cuda.Event(enable_timing=True) for _ in range(2)]
            times = []
            for rep in range(20):
                ev[0].record()
                torch.matmul(a[rep % sets], b[rep % sets], out=c)
                ev[1].record()
                torch.cuda.synchronize()
                times.append(ev[0].elapsed_time(ev[1]))
            ms = sorted(times)[len(times) // 2]
            print({"shape": [m, n, k], "cublas_tflops": 2 * m * n * k / ms / 1e9}, flush=True)
            results.append({"shape": [m, n, k], "peer": "torch", "ms": ms, "tflops": 2 * m * n * k / ms / 1e9})
    Path(out_path).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "wgmma_proto.json")
