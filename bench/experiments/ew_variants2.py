"""Round 2 for 16-bit types: which elementwise code shape reaches the copy ceiling on the H200? exp over 256M elements, hand-written CUDA
variants compiled with NVRTC (--fmad=false, as Iron compiles), timed with CUDA events against torch's copy.
Informs the CUDA emitter's coarsening/vectorisation (issue #3). Run on the GPU: python3 ew_variants.py"""

import statistics

import torch
from cuda.core import Device, LaunchConfig, Program, ProgramOptions, launch

HDR = r"""
struct bf16 { unsigned short b; };
__device__ __forceinline__ float ld(bf16 h) { return __uint_as_float((unsigned)h.b << 16); }
__device__ __forceinline__ bf16 st(float f) { bf16 h; asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h.b) : "f"(f)); return h; }
__device__ __forceinline__ float ld(float x) { return x; }
template <class T> __device__ __forceinline__ T cv(float f);
template <> __device__ __forceinline__ float cv<float>(float f) { return f; }
template <> __device__ __forceinline__ bf16 cv<bf16>(float f) { return st(f); }
"""
SRC = HDR + r"""
template <class T> __device__ __forceinline__ void body(const T* __restrict__ a, T* __restrict__ o, int i) {
    o[i] = cv<T>(expf(ld(a[i])));
}
// one 16-byte vector per thread (what the emitter's vector entry does)
template <class T> __global__ void vec_u1(const T* __restrict__ a, T* __restrict__ o, int n) {
    constexpr int W = 16 / sizeof(T);
    int v = blockIdx.x * blockDim.x + threadIdx.x;
    if ((v + 1) * W <= n) {
        uint4 x = reinterpret_cast<const uint4*>(a)[v];
        T* e = reinterpret_cast<T*>(&x);
#pragma unroll
        for (int w = 0; w < W; ++w) e[w] = cv<T>(expf(ld(e[w])));
        reinterpret_cast<uint4*>(o)[v] = x;
    } else {
        for (int i = v * W; i < n; ++i) body(a, o, i);
    }
}
// two consecutive 16-byte vectors per thread (32 bytes in flight)
template <class T> __global__ void vec_c2(const T* __restrict__ a, T* __restrict__ o, int n) {
    constexpr int W = 16 / sizeof(T);
    int v = 2 * (blockIdx.x * blockDim.x + threadIdx.x);
    if ((v + 2) * W <= n) {
        uint4 x0 = reinterpret_cast<const uint4*>(a)[v];
        uint4 x1 = reinterpret_cast<const uint4*>(a)[v + 1];
        T* e0 = reinterpret_cast<T*>(&x0);
        T* e1 = reinterpret_cast<T*>(&x1);
#pragma unroll
        for (int w = 0; w < W; ++w) { e0[w] = cv<T>(expf(ld(e0[w]))); e1[w] = cv<T>(expf(ld(e1[w]))); }
        reinterpret_cast<uint4*>(o)[v] = x0;
        reinterpret_cast<uint4*>(o)[v + 1] = x1;
    } else {
        for (int i = v * W; i < n && i < (v + 2) * W; ++i) body(a, o, i);
    }
}
// persistent grid-stride over 16-byte vectors
template <class T> __global__ void vec_gs(const T* __restrict__ a, T* __restrict__ o, int n) {
    constexpr int W = 16 / sizeof(T);
    int nv = n / W;
    for (int v = blockIdx.x * blockDim.x + threadIdx.x; v < nv; v += gridDim.x * blockDim.x) {
        uint4 x = reinterpret_cast<const uint4*>(a)[v];
        T* e = reinterpret_cast<T*>(&x);
#pragma unroll
        for (int w = 0; w < W; ++w) e[w] = cv<T>(expf(ld(e[w])));
        reinterpret_cast<uint4*>(o)[v] = x;
    }
}
"""
NAMES = {}
for t in ("float", "bf16"):
    for k in ("vec_u1", "vec_c2", "vec_gs"):
        NAMES[(t, k, 1)] = f"{k}<{t}>"


def main():
    dev = Device(0)
    dev.set_current()
    s = dev.create_stream()
    mods = {fma: Program(SRC, "c++", ProgramOptions(arch="sm_90", fma=fma, std="c++17")).compile(
        "cubin", name_expressions=list(NAMES.values())) for fma in (False, True)}
    n = 256 << 20
    ts = torch.cuda.ExternalStream(int(s.handle))
    with torch.cuda.stream(ts):
        src = torch.empty(n, device="cuda").uniform_()
        dst = torch.empty_like(src)
    s.sync()

    def timed(fn, reps=20):
        for _ in range(3):
            fn()
        ev = []
        for _ in range(reps):
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record(ts)
            fn()
            e1.record(ts)
            e1.synchronize()
            ev.append(e0.elapsed_time(e1))
        return statistics.median(ev)

    with torch.cuda.stream(ts):
        ceil_ms = timed(lambda: dst.copy_(src))
    ceiling = 2 * n * 4 / ceil_ms / 1e6
    print(f"copy ceiling {ceiling:.0f} GB/s")
    for t, dt in (("float", torch.float32), ("bf16", torch.bfloat16)):
        with torch.cuda.stream(ts):
            a = torch.randn(n, dtype=dt, device="cuda")
            o = torch.empty_like(a)
            ref = torch.exp(a.float()).to(dt)
            tt = timed(lambda: torch.exp(a, out=o))
        print(f"{t}: torch.exp {2 * n * a.element_size() / tt / 1e6 / ceiling * 100:.1f}%")
        for (tn, kind, v), expr in NAMES.items():
            if tn != t:
                continue
            for fma in (False, True):
                k = mods[fma].get_kernel(expr)
                for block in (128, 256):
                    vecs = n * a.element_size() // 16
                    if kind == "vec_gs":
                        grid = 132 * 2048 // block * 2
                    else:
                        grid = -(-vecs // (block * (2 if kind == "vec_c2" else 1)))
                    cfg = LaunchConfig(grid=grid, block=block)
                    args = (a.data_ptr(), o.data_ptr(), n)
                    o.fill_(float("nan"))
                    s.sync()
                    ms = timed(lambda: launch(s, cfg, k, *args))
                    s.sync()
                    ok = bool(torch.equal(o, ref)) if not fma else bool(torch.isfinite(o).all())
                    print(f"  {expr:16s} fma={fma!s:5} block {block}: "
                          f"{2 * n * a.element_size() / ms / 1e6 / ceiling * 100:5.1f}% of copy  ok={ok}")


if __name__ == "__main__":
    main()
