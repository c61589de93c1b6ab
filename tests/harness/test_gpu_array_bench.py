"""iron bench on a GPU reached without torch tensors (issue 16): the rows run on device arrays with the device shapes,
timed by the backend's GPU timer, and the table names its reference. Proved on lavapipe by declaring it a GPU."""

from __future__ import annotations

import numpy as np
import pytest

from iron.harness import measure, roofline
from iron.harness.registry import REGISTRY
from iron.runtime import get_backend, unavailable_reason
from iron.std.registry import import_std


@pytest.fixture
def vulkan_as_gpu(monkeypatch):
    if unavailable_reason("vulkan"):
        pytest.skip("no Vulkan device")
    be = get_backend("vulkan")
    monkeypatch.setattr(type(be), "is_gpu", lambda self: True)
    return be


def test_rows_run_on_device_arrays_beside_the_host_reference(vulkan_as_gpu):
    import_std()
    entry = REGISTRY["std/elementwise/add"]
    assert measure.on_gpu_arrays("vulkan") and not measure.on_gpu_arrays("cpu")
    answer = measure.bench_case(entry, "vulkan", "f32", (4096,), 7, {"repeats": 3})
    assert answer["ok"], answer
    assert answer["timing"] == "Vulkan timestamp queries" and answer["iron_s"] > 0
    assert answer["reference"] == measure.HOST_REFERENCE and answer["ref_s"] > 0  # lavapipe is not NVIDIA's
    assert answer["input_copies"] >= 4  # 4096 f32 elements: many copies to span 4x the assumed L2


def test_a_wrong_kernel_is_still_caught_on_device_arrays(vulkan_as_gpu, monkeypatch):
    import_std()
    entry = REGISTRY["std/elementwise/add"]
    real = entry.launch

    def off_by_one(arrays, backend):
        real(arrays, backend)
        out = arrays[entry.output]
        out.store.write(out.offset, np.zeros(4, np.uint8))  # the first element overwritten with 0

    monkeypatch.setattr(entry, "launch", off_by_one)
    answer = measure.bench_case(entry, "vulkan", "f32", (256,), 3, {"repeats": 2})
    assert answer["ok"] is False


def test_the_ceiling_is_a_copy_through_the_backend(vulkan_as_gpu, monkeypatch, tmp_path):
    monkeypatch.setattr(roofline, "bench_dir", lambda: tmp_path)
    gbps = vulkan_as_gpu.copy_gbps()
    assert gbps is None or gbps > 0.1
    if gbps is None:
        pytest.skip("this Vulkan device has no timestamps")
    ceiling = roofline.copy_ceiling("vulkan", use_cache=False)
    assert ceiling.how.startswith("device-to-device copy through vulkan") and ceiling.copy_gbps > 0.1


def test_the_ceiling_takes_the_copy_kernel_where_the_copy_command_is_slow(vulkan_as_gpu, monkeypatch, tmp_path, rng):
    """NVIDIA's vkCmdCopyBuffer ran at a fifth of the H200's copy rate: the copy kernel's rate is taken instead."""
    monkeypatch.setattr(roofline, "bench_dir", lambda: tmp_path)
    monkeypatch.setattr(type(vulkan_as_gpu), "copy_gbps", lambda self: 1e-6)
    ceiling = roofline.copy_ceiling("vulkan", use_cache=False)
    assert ceiling.copy_gbps > 1e-3  # the kernel's rate, not the command's
    import iron

    src = iron.asarray(rng.standard_normal(1 << 12).astype(np.float32), backend="vulkan")
    dst = iron.asarray(np.full(1 << 12, np.nan, np.float32), backend="vulkan")
    roofline.copy_words[1 << 10](src, dst, 1 << 12)
    np.testing.assert_array_equal(dst.numpy(), src.numpy())  # the kernel measured is a real copy


def test_a_gpu_row_ramps_the_clocks_before_it_is_timed(monkeypatch):
    """measure.ramp keeps the GPU busy for its seconds in batches of 8 launches, each batch waited for (the queue
    never holds more), before the timed repeats."""
    events = []
    clock = iter(range(100))
    monkeypatch.setattr(measure.time, "perf_counter", lambda: next(clock) * 0.1)
    measure.ramp(lambda: events.append("launch"), lambda: events.append("wait"), seconds=0.25)
    assert events == (["launch"] * 8 + ["wait"]) * 3
