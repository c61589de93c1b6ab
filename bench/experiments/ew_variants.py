"""Which elementwise code shape reaches the copy ceiling on the H200? exp over 256M elements, hand-written CUDA
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
template <class T> __global__ void base1(const T* __restrict__ a, T* __restrict__ o, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    body(a, o, i);
}
template <class T, int V> __global__ void strided_seq(const T* __restrict__ a, T* __restrict__ o, int n) {
    int base = blockIdx.x * (blockDim.x * V) + threadIdx.x;
    if (base + (V - 1) * (int)blockDim.x < n) {
#pragma unroll
        for (int v = 0; v < V; ++v) body(a, o, base + v * blockDim.x);
    } else {
        for (int v = 0; v < V; ++v) if (base + v * (int)blockDim.x < n) body(a, o, base + v * blockDim.x);
    }
}
template <class T, int V> __global__ void strided_loads_first(const T* __restrict__ a, T* __restrict__ o, int n) {
    int base = blockIdx.x * (blockDim.x * V) + threadIdx.x;
    if (base + (V - 1) * (int)blockDim.x < n) {
        T x[V];
#pragma unroll
        for (int v = 0; v < V; ++v) x[v] = a[base + v * blockDim.x];
#pragma unroll
        for (int v = 0; v < V; ++v) o[base + v * blockDim.x] = cv<T>(expf(ld(x[v])));
    } else {
        for (int v = 0; v < V; ++v) if (base + v * (int)blockDim.x < n) body(a, o, base + v * blockDim.x);
    }
}
// 16-byte vectors: W elements of T per uint4; U vectors per thread, strided by the block
template <class T, int U> __global__ void vec16(const T* __restrict__ a, T* __restrict__ o, int n) {
    constexpr int W = 16 / sizeof(T);
    int vbase = blockIdx.x * (blockDim.x * U) + threadIdx.x;
    if ((vbase + (U - 1) * (int)blockDim.x + 1) * W <= n) {
        uint4 x[U];
#pragma unroll
        for (int u = 0; u < U; ++u) x[u] = reinterpret_cast<const uint4*>(a)[vbase + u * blockDim.x];
#pragma unroll
        for (int u = 0; u < U; ++u) {
            T* e = reinterpret_cast<T*>(&x[u]);
#pragma unroll
            for (int w = 0; w < W; ++w) e[w] = cv<T>(expf(ld(e[w])));
            reinterpret_cast<uint4*>(o)[vbase + u * blockDim.x] = x[u];
        }
    } else {
        for (int u = 0; u < U; ++u) for (int w = 0; w < W; ++w) {
            int i = (vbase + u * blockDim.x) * W + w;
            if (i < n) body(a, o, i);
        }
    }
}
"""
NAMES = {}
for t in ("float", "bf16"):
    NAMES[(t, "base1", 1)] = f"base1<{t}>"
    for v in (4, 8):
        NAMES[(t, "strided_seq", v)] = f"strided_seq<{t}, {v}>"
        NAMES[(t, "strided_loads_first", v)] = f"strided_loads_first<{t}, {v}>"
    for u in (1, 2, 4):
        NAMES[(t, "vec16", u)] = f"vec16<{t}, {u}>"


def main():
    dev = Device(0)
    dev.set_current()
    s = dev.create_stream()
    prog = Program(SRC, "c++", ProgramOptions(arch="sm_90", fma=False, std="c++17"))
    mod = prog.compile("cubin", name_expressions=list(NAMES.values()))
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
            k = mod.get_kernel(expr)
            for block in (256, 512):
                per = block * (v if kind != "vec16" else v * 16 // a.element_size())
                cfg = LaunchConfig(grid=(n + per - 1) // per, block=block)
                args = (a.data_ptr(), o.data_ptr(), n)
                o.fill_(float("nan"))
                s.sync()
                ms = timed(lambda: launch(s, cfg, k, *args))
                s.sync()
                ok = bool(torch.equal(o, ref))
                print(f"  {expr:32s} block {block}: {2 * n * a.element_size() / ms / 1e6 / ceiling * 100:5.1f}% "
                      f"of copy  ok={ok}")


if __name__ == "__main__":
    main()
