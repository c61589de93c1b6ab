"""Issue 17, names: a user's names never meet the names Iron generates or the targets' headers declare.

Scalars and locals called ``iron_n0`` (the grid size Iron passes), ``iron_local_linear``, ``blockIdx``... and kernels
called ``half``, ``std``, ``printf``, ``float4``, ``main``... are valid Iron; the emitters mangle them, the runtimes
launch the mangled entry (``KernelSource.entry``), and every backend gives NumPy's values."""

from __future__ import annotations

import numpy as np
import pytest

import iron
from iron import Tensor, kernel, program_id
from iron.codegen import emit_cuda, emit_hip, emit_msl, hiprtc, nvrtc
from iron.codegen.spirv import emit_spirv
from iron.runtime import unavailable_reason

RUNNABLE = ("cpu", "vulkan", "msl-cpu")
_NO_NVRTC = nvrtc.unavailable_reason()
_NO_HIPRTC = hiprtc.unavailable_reason()


def _backend(name: str) -> str:
    reason = unavailable_reason(name)
    if reason is not None:
        pytest.skip(f"{name} unavailable: {reason}")
    return name


@kernel
def hostile_params(x: Tensor[iron.f32], out: Tensor[iron.f32], iron_n0: iron.i32, iron_n1: iron.i32,
                   iron_n5: iron.f32, iron_local_linear: iron.i32, iron_dynamic_shared: iron.i32, blockIdx: iron.i32,
                   threadIdx: iron.i32, gl_GlobalInvocationID: iron.i32):
    """Scalars named like the generated grid sizes and helpers, locals too (``iron_n2``, ``iron_pid``...)."""
    i = program_id(0)
    iron_n2 = x[i] * 2.0
    iron_pid = i + 1
    iron_first = iron_n0 * 1000 + iron_n1 * 100
    iron_model = iron_local_linear * 10 + iron_dynamic_shared
    gl_LocalInvocationID = blockIdx * 3 + threadIdx * 5 + gl_GlobalInvocationID * 7
    out[i] = iron_n2 + iron_first + iron_n5 + iron_model + gl_LocalInvocationID + iron_pid


@kernel
def hostile_grid(out: Tensor[iron.i32], iron_n0: iron.i32, iron_n1: iron.i32, iron_n2: iron.i32):
    """A 2-D grid whose exact sizes differ from the scalars of the same names: each must read its own value."""
    r = program_id(0)
    c = program_id(1)
    out[r * 37 + c] = iron_n0 * 10000 + iron_n1 * 100 + iron_n2 + r * 37 + c


_SCALARS = {"iron_n0": 3, "iron_n1": 4, "iron_n5": 0.5, "iron_local_linear": 6, "iron_dynamic_shared": 7,
            "blockIdx": 8, "threadIdx": 9, "gl_GlobalInvocationID": 11}


def _hostile_want(x: np.ndarray) -> np.ndarray:
    s = _SCALARS
    return (x.astype(np.float64) * 2.0 + s["iron_n0"] * 1000 + s["iron_n1"] * 100 + s["iron_n5"]
            + s["iron_local_linear"] * 10 + s["iron_dynamic_shared"] + s["blockIdx"] * 3 + s["threadIdx"] * 5
            + s["gl_GlobalInvocationID"] * 7 + np.arange(1, x.size + 1))


@pytest.mark.parametrize("backend", RUNNABLE)
@pytest.mark.parametrize("by_keyword", [False, True])
def test_scalars_and_locals_named_like_generated_names(backend, by_keyword, rng):
    be = _backend(backend)
    n = int(rng.integers(65, 300))
    x = rng.standard_normal(n).astype(np.float32)
    out = np.full_like(x, np.nan)
    if by_keyword:  # the Python-visible names are the user's own: keywords still reach the right parameters
        hostile_params[n, 32](x, out, **dict(reversed(list(_SCALARS.items()))), backend=be)
    else:
        hostile_params[n, 32](x, out, *_SCALARS.values(), backend=be)
    np.testing.assert_allclose(out, _hostile_want(x), rtol=1e-6, atol=1e-3)


@pytest.mark.parametrize("backend", RUNNABLE)
def test_scalars_named_iron_n_do_not_read_the_grid(backend, rng):
    be = _backend(backend)
    rows, cols = int(rng.integers(3, 30)), int(rng.integers(5, 37))
    vals = [int(v) for v in rng.integers(1, 99, 3)]
    out = np.full(rows * 37, -1, np.int32)
    hostile_grid[(rows, cols), (4, 8)](out, *vals, backend=be)
    want = np.full((rows, 37), -1, np.int64)
    r, c = np.meshgrid(np.arange(rows), np.arange(cols), indexing="ij")
    want[:, :cols] = vals[0] * 10000 + vals[1] * 100 + vals[2] + r * 37 + c
    np.testing.assert_array_equal(out.reshape(rows, 37), want)


def test_spirv_grid_fields_are_found_by_axis_not_name():
    spk = emit_spirv(hostile_grid.variant(None).kernel)
    fields = [(p.name, p.axis) for p in spk.push]
    assert fields[:3] == [("iron_n0", None), ("iron_n1", None), ("iron_n2", None)]
    assert [axis for _, axis in fields[3:]] == [0, 1, 2]
    assert len({name for name, _ in fields}) == 6  # the grid fields take names no parameter has
    plain = emit_spirv(hostile_params.variant(None).kernel)
    assert [(p.name, p.axis) for p in plain.push][-3:] == [("iron_n0_", 0), ("iron_n1_", 1), ("iron_n2", 2)]


@pytest.mark.parametrize("emit", [emit_cuda, emit_hip, emit_msl], ids=["cuda", "hip", "msl"])
def test_c_family_mangles_what_could_collide(emit):
    src = emit(hostile_params.variant(None).kernel)
    user = [p for p in src.params if p.kind == "scalar"]
    assert [p.source for p in user] == list(_SCALARS)
    grid = {p.name for p in src.params if p.kind == "grid"}
    assert not grid & {p.name for p in user}
    assert {p.name for p in user} >= {"iron_n0_", "iron_n1_", "iron_dynamic_shared_", "iron_local_linear_"}


@pytest.mark.skipif(_NO_NVRTC is not None, reason=f"NVRTC unavailable: {_NO_NVRTC}")
@pytest.mark.parametrize("k", [hostile_params, hostile_grid], ids=["params", "grid"])
def test_hostile_params_compile_for_cuda(k):
    assert nvrtc.compile_cuda(emit_cuda(k.variant(None).kernel))[:4] == b"\x7fELF"


@pytest.mark.skipif(_NO_HIPRTC is not None, reason=f"hipRTC unavailable: {_NO_HIPRTC}")
@pytest.mark.parametrize("k", [hostile_params, hostile_grid], ids=["params", "grid"])
def test_hostile_params_compile_for_hip(k):
    assert hiprtc.compile_hip(emit_hip(k.variant(None).kernel), target="gfx90a")[:4] == b"\x7fELF"


# -- kernels named like keywords, built-in types, namespaces and library functions --------------------------------

#: names Python allows for a function that some target's compiler reads as something else
KERNEL_NAMES = ("half", "float4", "uint3", "half2", "int2", "std", "printf", "iron_model", "main", "kernel",
                "device", "float", "int", "metal", "threadgroup", "sin", "expf", "size_t", "iron_n0",
                "iron_local_linear", "blockIdx")


def _named(name: str):
    def scaled(x: Tensor[iron.f32], out: Tensor[iron.f32], s: iron.f32):
        i = program_id(0)
        std = x[i] * s  # a local named like a namespace, and one like a type
        float4 = std + 1.0
        out[i] = float4

    scaled.__name__ = scaled.__qualname__ = name
    return kernel(scaled)


_KERNELS = {name: _named(name) for name in KERNEL_NAMES}


@pytest.mark.parametrize("backend", RUNNABLE)
@pytest.mark.parametrize("name", KERNEL_NAMES)
def test_kernels_named_like_builtins_run(backend, name, rng):
    be = _backend(backend)
    k = _KERNELS[name]
    n = int(rng.integers(33, 200))
    x = rng.standard_normal(n).astype(np.float32)
    s = np.float32(rng.uniform(0.5, 2.0))
    out = np.full_like(x, np.nan)
    k[n, 32](x, out, s, backend=be)
    np.testing.assert_allclose(out, x.astype(np.float64) * float(s) + 1.0, rtol=1e-6, atol=1e-6)


@pytest.mark.skipif(_NO_NVRTC is not None, reason=f"NVRTC unavailable: {_NO_NVRTC}")
@pytest.mark.parametrize("name", KERNEL_NAMES)
def test_kernels_named_like_builtins_compile_for_cuda(name):
    src = emit_cuda(_KERNELS[name].variant(None).kernel)
    assert src.kernel == name
    ptx = nvrtc.compile_cuda(src, arch="compute_90").decode()
    assert f".entry {src.entry}(" in ptx
    if src.vector is not None:
        assert f".entry {src.vector.entry}(" in ptx


@pytest.mark.skipif(_NO_HIPRTC is not None, reason=f"hipRTC unavailable: {_NO_HIPRTC}")
@pytest.mark.parametrize("name", KERNEL_NAMES)
def test_kernels_named_like_builtins_compile_for_hip(name):
    src = emit_hip(_KERNELS[name].variant(None).kernel)
    code = hiprtc.compile_hip(src, target="gfx90a")
    assert code[:4] == b"\x7fELF" and src.entry.encode() in code


def test_entry_names_are_mangled_only_where_they_collide():
    """Ordinary names keep their spelling (the golden sources stay as they were); colliding ones get a suffix."""
    entries = {name: emit_cuda(_KERNELS[name].variant(None).kernel).entry for name in KERNEL_NAMES}
    assert entries["printf"] == "printf_" and entries["std"] == "std_" and entries["sin"] == "sin_"
    assert entries["float4"] == "float4_" and entries["iron_n0"] == "iron_n0_"
    assert emit_hip(_KERNELS["half"].variant(None).kernel).entry == "half_"
    assert emit_msl(_KERNELS["iron_model"].variant(None).kernel).entry == "iron_model_"
    assert emit_cuda(hostile_grid.variant(None).kernel).entry == "hostile_grid"
    assert emit_spirv(_KERNELS["main"].variant(None).kernel).entry == "main"  # any string names a SPIR-V entry
