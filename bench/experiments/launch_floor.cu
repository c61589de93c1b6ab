// The host cost of one kernel launch from C++ on this machine (the floor under any Python launcher):
// batches of 250 launches of a tiny kernel, timed on the host, the GPU drained between batches; median per launch.
// Build and run on the GPU: nvcc -O2 -arch=sm_90 launch_floor.cu -o launch_floor -lcuda && ./launch_floor
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cuda.h>
#include <cuda_runtime.h>
#include <vector>

__global__ void tiny(const float* a, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a[i] + 1.0f;
}

int main() {
    float *a, *out;
    cudaMalloc(&a, 4096);
    cudaMalloc(&out, 4096);
    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    int n = 1024;
    for (int i = 0; i < 1000; ++i) tiny<<<4, 256, 0, s>>>(a, out, n);
    cudaStreamSynchronize(s);
    std::vector<double> per;
    for (int b = 0; b < 40; ++b) {
        cudaStreamSynchronize(s);
        auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < 250; ++i) tiny<<<4, 256, 0, s>>>(a, out, n);
        auto t1 = std::chrono::steady_clock::now();
        per.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count() / 250);
    }
    std::sort(per.begin(), per.end());
    printf("runtime API <<<>>> launch: median %.2f us, min %.2f us per launch\n", per[per.size() / 2], per[0]);
    // the driver API, as a Python launcher would call it
    CUfunction f;
    cudaGetFuncBySymbol(&f, (const void*)tiny);
    void* args[] = {&a, &out, &n};
    per.clear();
    for (int b = 0; b < 40; ++b) {
        cudaStreamSynchronize(s);
        auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < 250; ++i) cuLaunchKernel(f, 4, 1, 1, 256, 1, 1, 0, s, args, nullptr);
        auto t1 = std::chrono::steady_clock::now();
        per.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count() / 250);
    }
    std::sort(per.begin(), per.end());
    printf("driver API cuLaunchKernel:  median %.2f us, min %.2f us per launch\n", per[per.size() / 2], per[0]);
    // the same on the legacy default stream (stream 0: torch's current stream unless the code picks another)
    per.clear();
    for (int b = 0; b < 40; ++b) {
        cudaDeviceSynchronize();
        auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < 250; ++i) cuLaunchKernel(f, 4, 1, 1, 256, 1, 1, 0, nullptr, args, nullptr);
        auto t1 = std::chrono::steady_clock::now();
        per.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count() / 250);
    }
    std::sort(per.begin(), per.end());
    printf("driver API cuLaunchKernel on the legacy default stream: median %.2f us, min %.2f us per launch\n",
           per[per.size() / 2], per[0]);
    cudaError_t e = cudaStreamSynchronize(s);
    printf("status: %s\n", cudaGetErrorString(e));
    return 0;
}
