"""iron.asarray / empty / zeros / numpy / views / synchronize (issue 16) on every backend, against NumPy."""

from __future__ import annotations

import gc

import numpy as np
import pytest

import iron
from iron import T, Tensor, program_id

from ..frontend.test_kernels import as_dtype


@iron.kernel
def axpy(x: Tensor[T], y: Tensor[T], out: Tensor[T], a: float):
    i = program_id(0)
    out[i] = a * x[i] + y[i]


@iron.kernel
def step(src: Tensor[T], dst: Tensor[T], n: int):
    """dst[i] = 0.5 * src[i] + 0.25 * src[(i + 1) % n] + 1: each launch depends on the whole previous one."""
    i = program_id(0)
    dst[i] = 0.5 * src[i] + 0.25 * src[(i + 1) % n] + 1.0


@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
def test_round_trip_and_facts(backend, dtype, rng):
    host = as_dtype(rng.standard_normal((5, 7)), dtype)
    x = iron.asarray(host, backend=backend)
    assert (x.shape, x.dtype, x.nbytes, x.backend, x.device, x.size) == (
        (5, 7), getattr(iron, dtype), host.nbytes, backend, 0, 35)
    assert np.array_equal(x.numpy().view(np.uint8), host.view(np.uint8))
    assert np.array_equal(x[1:3].numpy().view(np.uint8), host[1:3].view(np.uint8))
    assert np.array_equal(x[4].numpy().view(np.uint8), host[4].view(np.uint8))
    z = iron.zeros((3, 2), dtype, backend=backend)
    assert z.numpy().dtype == host.dtype and not z.numpy().astype(np.float64).any()
    assert iron.asarray(x, backend=backend) is x


def test_launch_in_place(backend, rng):
    n = 1000
    xs, ys = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    x, y = iron.asarray(xs, backend=backend), iron.asarray(ys, backend=backend)
    out = iron.asarray(np.full(n, np.nan, np.float32), backend=backend)
    axpy[n](x, y, out, 2.0)
    want = 2.0 * xs.astype(np.float64) + ys
    assert np.allclose(out.numpy(), want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("start", [1, 3, 64], ids=["offset4", "offset12", "offset256"])
def test_views_write_through(backend, rng, start):
    """A launch on views (aligned or not to the device's binding alignment) writes into the parent array."""
    n, m = 300, 100
    base = rng.standard_normal(n).astype(np.float32)
    x = iron.asarray(base, backend=backend)
    y = iron.asarray(rng.standard_normal(m).astype(np.float32), backend=backend)
    out = iron.asarray(np.full(n, np.nan, np.float32), backend=backend)
    axpy[m](x[start:start + m], y, out[start:start + m], -1.0)
    got = out.numpy()
    want = -base[start:start + m].astype(np.float64) + y.numpy()
    assert np.allclose(got[start:start + m], want, rtol=1e-6, atol=1e-6)
    assert np.isnan(got[:start]).all() and np.isnan(got[start + m:]).all()


def test_dependent_chain_matches_interpreter(backend, rng):
    """1,000 dependent launches on device arrays (recorded without waiting on Vulkan) equal the interpreter's."""
    n, steps = 256, 1000
    init = rng.standard_normal(n).astype(np.float32)

    def run(be):
        a, b = iron.asarray(init, backend=be), iron.empty(n, iron.f32, backend=be)
        for _ in range(steps // 2):
            step[n](a, b, n)
            step[n](b, a, n)
        return a.numpy()

    got = run(backend)
    want = init.astype(np.float64)
    for _ in range(steps):
        want = 0.5 * want + 0.25 * np.roll(want, -1) + 1.0
    assert np.allclose(got, want, rtol=1e-5, atol=1e-5)
    if backend != "cpu":
        assert np.array_equal(got, run("cpu"))


def test_numpy_and_device_arrays_mixed(backend, rng):
    n = 129
    xs, ys = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    x = iron.asarray(xs, backend=backend)
    out = np.full(n, np.nan, np.float32)
    axpy[n](x, ys, out, 3.0, backend=backend)  # NumPy output: copied back as before
    assert np.allclose(out, 3.0 * xs.astype(np.float64) + ys, rtol=1e-6, atol=1e-6)
    dev_out = iron.empty(n, iron.f32, backend=backend)
    axpy[n](xs, x[0:n], dev_out, 1.0, backend=backend)
    assert np.allclose(dev_out.numpy(), xs.astype(np.float64) + xs, rtol=1e-6, atol=1e-6)


def test_freed_arrays_do_not_disturb_queued_work(backend, rng):
    """Arrays dropped while their launches may still be queued: the memory is reused only after the work ran."""
    n = 512
    results = []
    for k in range(20):
        x = iron.asarray(np.full(n, float(k), np.float32), backend=backend)
        y = iron.asarray(np.ones(n, np.float32), backend=backend)
        out = iron.empty(n, iron.f32, backend=backend)
        axpy[n](x, y, out, 2.0)
        results.append(out)
        del x, y
        if k % 5 == 4:  # a full collection costs seconds once the suite's heap is large
            gc.collect()
    iron.synchronize()
    for k, out in enumerate(results):
        assert np.array_equal(out.numpy(), np.full(n, 2.0 * k + 1.0, np.float32))


def test_refusals(backend):
    x = iron.zeros(16, iron.f32, backend=backend)
    other = "msl-cpu" if backend == "cpu" else "cpu"
    with pytest.raises(iron.LaunchError, match=f"iron array on {backend}; this launch runs on {other}"):
        axpy[16](x, x, iron.empty(16, iron.f32, backend=backend), 1.0, backend=other)
    with pytest.raises(iron.LaunchError, match="share memory"):
        axpy[8](x[0:8], x[4:12], x[8:16], 1.0)  # out overlaps y
    axpy[8](x[0:8], x[0:8], x[8:16], 1.0)  # read-only views may overlap; disjoint output is fine
    with pytest.raises(IndexError, match="step 1"):
        x[::2]
    with pytest.raises(TypeError, match="f32, f16, bf16, f64, i32, u32, i64, u64, i8 or u8"):
        iron.empty(4, np.complex64, backend=backend)


def test_dlpack_on_host_backends(rng):
    host = rng.standard_normal(10).astype(np.float32)
    x = iron.from_dlpack(host, backend="cpu")
    assert x.backend == "cpu" and np.array_equal(x.numpy(), host)
    back = np.from_dlpack(x)
    assert x.__dlpack_device__() == (1, 0) and np.array_equal(back, host)
    back[0] = 42.0  # the export shares memory
    assert x.numpy()[0] == 42.0


def test_vulkan_array_after_close_is_refused():
    from iron.runtime import get_backend, unavailable_reason

    if unavailable_reason("vulkan"):
        pytest.skip("no Vulkan device")
    x = iron.zeros(8, iron.f32, backend="vulkan")
    get_backend("vulkan").close()
    with pytest.raises(iron.LaunchError, match="closed"):
        axpy[8](x, x, iron.empty(8, iron.f32, backend="vulkan"), 1.0)


def test_cuda_dlpack_and_torch_exchange(rng):
    """CUDA: a torch tensor wrapped without a copy (iron.from_dlpack), written by an Iron launch, seen by torch."""
    torch = pytest.importorskip("torch")
    from iron.runtime import unavailable_reason

    if unavailable_reason("cuda") or not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    xs = torch.tensor(rng.standard_normal(300).astype(np.float32), device="cuda")
    out_t = torch.full((300,), float("nan"), device="cuda")
    x, out = iron.from_dlpack(xs), iron.from_dlpack(out_t)
    assert x.backend == "cuda" and x.shape == (300,) and x.__cuda_array_interface__["data"][0] == xs.data_ptr()
    y = iron.asarray(np.ones(300, np.float32), backend="cuda")
    axpy[300](x, y, out, 2.0)
    iron.synchronize()
    assert np.allclose(out_t.cpu().numpy(), 2.0 * xs.cpu().numpy().astype(np.float64) + 1.0, rtol=1e-6, atol=1e-6)
    back = torch.as_tensor(y, device="cuda")  # through __cuda_array_interface__, no copy
    assert back.data_ptr() == y.__cuda_array_interface__["data"][0]


def test_cuda_dlpack_export_to_torch(rng):
    """CUDA: torch.from_dlpack(iron array) shares the memory (no copy) both ways, with Iron's stream synchronised."""
    torch = pytest.importorskip("torch")
    from iron.runtime import unavailable_reason

    if unavailable_reason("cuda") or not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    xs = rng.standard_normal(257).astype(np.float32)
    x = iron.asarray(xs, backend="cuda")
    out = iron.asarray(np.full(257, np.nan, np.float32), backend="cuda")
    axpy[257](x, x, out, 3.0)  # out = 4 x, queued on Iron's stream
    t = torch.from_dlpack(out)
    assert t.device.type == "cuda" and t.data_ptr() == out.__cuda_array_interface__["data"][0]
    assert np.array_equal(t.cpu().numpy(), (4.0 * xs.astype(np.float64)).astype(np.float32))
    t.mul_(0.5)
    torch.cuda.synchronize()
    assert np.array_equal(out.numpy(), (2.0 * xs.astype(np.float64)).astype(np.float32))
    assert out[1:].__dlpack_device__() == out.__dlpack_device__()
    assert np.array_equal(torch.from_dlpack(out[1:]).cpu().numpy(), out.numpy()[1:])


def test_repeat_launches_are_checked_again(backend):
    """After a first launch (which may install a backend's fast launcher) every call is still checked."""
    n = 64
    x = iron.asarray(np.ones(n, np.float32), backend=backend)
    y = iron.asarray(np.full(n, 2.0, np.float32), backend=backend)
    out = iron.empty(n, iron.f32, backend=backend)
    for a in (1.0, 2.0, 3):
        axpy[n](x, y, out, a)
        assert np.array_equal(out.numpy(), np.full(n, a + 2.0, np.float32))
    with pytest.raises(iron.LaunchError, match="share memory"):
        axpy[n](x, y, y, 1.0)
    with pytest.raises(iron.LaunchError, match="has 10 elements"):
        axpy[n](x[:10], y, out, 1.0)
    with pytest.raises(iron.LaunchError, match="must be a number"):
        axpy[n](x, y, out, "2")
    with pytest.raises(iron.LaunchError, match="same dtype"):
        axpy[n](x, iron.zeros(n, iron.f16, backend=backend), out, 1.0)
    other = "cpu" if backend != "cpu" else "msl-cpu"
    hx, hy = iron.asarray(np.ones(n, np.float32), backend=other), iron.zeros(n, iron.f32, backend=other)
    hout = iron.empty(n, iron.f32, backend=other)
    axpy[n](hx, hy, hout, 5.0)  # the same k[grid] with another backend's arrays
    assert np.array_equal(hout.numpy(), np.full(n, 5.0, np.float32))


def test_one_grid_serving_several_call_shapes_in_turn(backend, rng):
    """One k[grid] called in turn with arguments of two dtypes and on views (as a model's GEMVs of one grid are):
    each call gets its own answer, however the backend keeps its fast launchers."""
    n = 96
    xs = {d: as_dtype(rng.standard_normal(2 * n), d) for d in ("f32", "f16")}
    ys = {d: as_dtype(rng.standard_normal(n), d) for d in ("f32", "f16")}
    xa = {d: iron.asarray(v, backend=backend) for d, v in xs.items()}
    ya = {d: iron.asarray(v, backend=backend) for d, v in ys.items()}
    for step in range(6):
        d = ("f32", "f16")[step % 2]
        lo = 8 * step
        out = iron.asarray(as_dtype(np.full(n, np.nan), d), backend=backend)
        axpy[n](xa[d][lo:lo + n], ya[d], out, float(step))
        want = step * xs[d][lo:lo + n].astype(np.float64) + ys[d].astype(np.float64)
        tol = 1e-6 if d == "f32" else 4e-3
        assert np.allclose(out.numpy().astype(np.float64), want, rtol=tol, atol=tol), (step, d)


def test_more_distinct_views_than_the_descriptor_pool_holds(monkeypatch, rng):
    """Vulkan binds each (buffer, offset) through a descriptor set from a pool; a run of launches on more distinct
    views than the pool holds (a model's decode steps, each on the slot of its position) refills it, with the
    queued work's results intact. (NVIDIA's driver refused the 513th set, with an error code the `vulkan` package
    cannot name: a KeyError.)"""
    from iron.runtime import unavailable_reason, vulkan_queue

    if unavailable_reason("vulkan"):
        pytest.skip(f"vulkan unavailable: {unavailable_reason('vulkan')}")
    monkeypatch.setattr(vulkan_queue, "_SETS", 4)
    n, views = 64, 24
    xs = rng.standard_normal(n + 64 * views).astype(np.float32)
    x = iron.asarray(xs, backend="vulkan")
    y = iron.zeros(n, iron.f32, backend="vulkan")
    outs = [iron.empty(n, iron.f32, backend="vulkan") for _ in range(views)]
    for i in range(views):
        axpy[n](x[64 * i:64 * i + n], y, outs[i], 1.0)
    for i in range(views):
        assert np.array_equal(outs[i].numpy(), xs[64 * i:64 * i + n]), i


def test_dlpack_export_capsule_is_read_by_numpy(rng):
    """The DLPack capsule CUDA arrays export (runtime/dlpack.py), built here over host memory: NumPy reads the
    same memory through it (layout of every structure), the owner stays alive while NumPy holds it, and both a
    consumed and an unconsumed capsule release it."""
    from iron.runtime import dlpack

    host = rng.standard_normal((3, 5)).astype(np.float32)

    class Producer:
        def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
            return dlpack.capsule(host.ctypes.data, host.shape, host.dtype, (dlpack.CPU, 0), host)

        def __dlpack_device__(self):
            return (dlpack.CPU, 0)

    before = dlpack.live_exports()
    y = np.from_dlpack(Producer())
    assert y.shape == (3, 5) and y.ctypes.data == host.ctypes.data and np.array_equal(y, host)
    assert dlpack.live_exports() == before + 1
    del y
    gc.collect()
    assert dlpack.live_exports() == before
    unused = Producer().__dlpack__()
    assert dlpack.live_exports() == before + 1
    del unused
    gc.collect()
    assert dlpack.live_exports() == before
    codes = {d: (t.code, t.bits) for d, t in ((d, dlpack.data_type(np.dtype(d))) for d in ("float32", "float16",
                                                                                            "int32", "uint32"))}
    assert codes == {"float32": (2, 32), "float16": (2, 16), "int32": (0, 32), "uint32": (1, 32)}
    assert (dlpack.data_type(as_dtype(np.zeros(1), "bf16").dtype).code, 16) == (4, 16)


def test_cuda_array_dlpack_export_to_torch(rng):
    """CUDA: an iron Array exported through DLPack is the same memory in torch (no copy), written by Iron first."""
    torch = pytest.importorskip("torch")
    from iron.runtime import unavailable_reason

    if unavailable_reason("cuda") or not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    xs = rng.standard_normal(1000).astype(np.float32)
    x = iron.asarray(xs, backend="cuda")
    out = iron.empty((1000,), iron.f32, backend="cuda")
    axpy[1000](x, x, out, 2.0)
    t = torch.from_dlpack(out)
    assert t.device.type == "cuda" and t.data_ptr() == out.__cuda_array_interface__["data"][0]
    assert np.allclose(t.cpu().numpy(), 3 * xs, rtol=1e-6)
    assert out.__dlpack_device__() == (2, out.device)


@pytest.mark.parametrize("start", [1, 3, 64, 1024], ids=["offset4", "offset12", "offset256", "offset4096"])
def test_numpy_views_at_an_offset(backend, rng, start):
    """Issue 15 item 6: ``a[start:]`` of a NumPy array passed as a buffer: the kernel reads and writes the view, the
    rest of the parent is untouched (host backends run on the view's own memory; GPU backends copy it in and back)."""
    m = 100
    x = rng.standard_normal(start + m + 7).astype(np.float32)
    y = rng.standard_normal(m).astype(np.float32)
    out = np.full(start + m + 7, np.nan, np.float32)
    axpy[m](x[start:start + m], y, out[start:start + m], 2.0, backend=backend)
    want = 2.0 * x[start:start + m].astype(np.float64) + y
    assert np.allclose(out[start:start + m], want, rtol=1e-6, atol=1e-6)
    assert np.isnan(out[:start]).all() and np.isnan(out[start + m:]).all()
