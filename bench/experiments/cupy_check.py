"""CuPy arrays are used in place by the CUDA backend (``__cuda_array_interface__``): exp on CuPy arrays, checked
against NumPy float64, plus a non-contiguous CuPy view that must be refused naming the argument."""

import cupy as cp
import numpy as np

import iron
from iron.std.unary import iron_exp

a = cp.random.standard_normal(1 << 20, dtype=cp.float32)
out = cp.full_like(a, cp.nan)
iron_exp[a.size](a, out)
cp.cuda.Device().synchronize()
iron.cuda.synchronize()
ref = np.exp(cp.asnumpy(a).astype(np.float64))
err = np.abs(cp.asnumpy(out) - ref) / np.abs(ref)
print(f"cupy in place: max rel err {err.max():.2e}, ok={bool(err.max() < 2e-6)}")
try:
    iron_exp[a.size // 2](a[::2], out[::2])
    print("non-contiguous cupy view: NOT refused")
except iron.LaunchError as e:
    print("non-contiguous cupy view refused:", str(e).splitlines()[0])
