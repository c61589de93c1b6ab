"""Issue 3 (launch overhead) on the GPU machine: where the host time of one cached Iron launch on torch tensors goes.

Prints JSON (and writes it to argv[1]):
- ``iron_us``: one launch of a tiny kernel, as scripts/gpu_bench.py measures it (batches of 250, GPU drained between);
- ``iron_noop_driver_us``: the same with cuLaunchKernel replaced by a C function that returns 0 (Iron's own cost:
  the Python call, the argument checks, the stream query);
- ``per_call_ns``: the torch calls the launcher makes per tensor, the stream query, ``k[grid]`` and a bare Python call.
The C++ floor (cuLaunchKernel from C++) is bench/experiments/launch_floor.cu.
"""

import json
import os
import subprocess
import sys
import tempfile
import timeit

import torch

import iron
from iron import Tensor, program_id
from iron.runtime import cuda_fast

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "scripts"))
from gpu_bench import host_overhead_us  # noqa: E402


@iron.kernel
def tiny(a: Tensor[iron.f32], out: Tensor[iron.f32]):
    i = program_id(0)
    out[i] = a[i] + 1.0


def noop_address() -> int:
    import ctypes

    folder = tempfile.mkdtemp()
    src, lib = os.path.join(folder, "noop.c"), os.path.join(folder, "noop.so")
    with open(src, "w") as f:
        f.write("int iron_noop(void *f, unsigned a, unsigned b, unsigned c, unsigned d, unsigned e, unsigned g,"
                " unsigned h, void *s, void **p, void **x) { return 0; }\n")
    subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", lib, src], check=True)
    handle = ctypes.CDLL(lib)
    noop_address.keep = handle
    return ctypes.cast(handle.iron_noop, ctypes.c_void_p).value


def ns(stmt, number=200000, **names) -> float:
    return min(timeit.repeat(stmt, globals=names, number=number, repeat=5)) / number * 1e9


def main():
    a = torch.randn(1024, device="cuda")
    out = torch.empty_like(a)
    result = {"launcher": "c" if cuda_fast.compiled_module() is not None else f"python ({cuda_fast.EXT_REASON})"}
    result["iron_us"] = host_overhead_us(lambda: tiny[1024](a, out))
    result["torch_us"] = host_overhead_us(lambda: torch.add(a, 1.0, out=out))
    side = torch.cuda.Stream()  # the same on a created (blocking-flag-free) stream instead of the legacy default one
    with torch.cuda.stream(side):
        result["iron_side_stream_us"] = host_overhead_us(lambda: tiny[1024](a, out))
        result["torch_side_stream_us"] = host_overhead_us(lambda: torch.add(a, 1.0, out=out))
    torch.cuda.synchronize()
    real = cuda_fast._launch_address
    address = noop_address()
    cuda_fast._launch_address = lambda: address
    tiny._launchers.clear()
    tiny[1024](a, out)
    result["iron_noop_driver_us"] = host_overhead_us(lambda: tiny[1024](a, out))
    cuda_fast._launch_address = real
    tiny._launchers.clear()
    tiny[1024](a, out)
    k = tiny[1024]
    fast = getattr(k, "fast", None)
    raw = torch._C._cuda_getCurrentRawStream

    def f(x, y):
        return None

    result["per_call_ns"] = {
        "t.data_ptr()": ns("a.data_ptr()", a=a), "t.is_contiguous()": ns("a.is_contiguous()", a=a),
        "t.numel()": ns("a.numel()", a=a), "t.get_device()": ns("a.get_device()", a=a), "t.dtype": ns("a.dtype", a=a),
        "torch._C._cuda_getCurrentRawStream(0)": ns("raw(0)", raw=raw), "k[1024]": ns("tiny[1024]", tiny=tiny),
        "python call f(a, out)": ns("f(a, out)", f=f, a=a, out=out),
        "k(a, out) bound launcher object": ns("k(a, out)", k=k, a=a, out=out, number=20000),
        "t.is_cuda": ns("a.is_cuda", a=a), "t.device": ns("a.device", a=a), "t.nbytes": ns("a.nbytes", a=a),
        "type(k)": type(k).__name__,
    }
    if fast is not None:
        result["per_call_ns"]["fast((a, out)) compiled launcher"] = ns("fast((a, out))", fast=fast, a=a, out=out,
                                                                        number=20000)
    torch.cuda.synchronize()
    print(json.dumps(result, indent=1))
    if len(sys.argv) > 1:
        with open(sys.argv[1], "w") as fh:
            json.dump(result, fh, indent=1)


if __name__ == "__main__":
    main()
