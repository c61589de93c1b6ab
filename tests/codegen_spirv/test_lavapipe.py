"""Emitted modules run on a Vulkan device (lavapipe in CI) through the throwaway driver ``vk_driver.py`` and match
the interpreter run with the same SIMD width. Skipped when no Vulkan loader/device is present."""

from __future__ import annotations

import numpy as np
import pytest

import iron
from iron.codegen.spirv import emit_spirv
from iron.interp.executor import run_kernel

from ..codegen import kernels as codegen_kernels
from .test_spirv_validate import _frontend_kernels

try:
    from . import vk_driver

    _VK, *_ = vk_driver.context()
    _REASON = None
    _SIMD = 8
except Exception as e:  # no loader, no device
    _REASON = str(e)

pytestmark = pytest.mark.skipif(_REASON is not None, reason=f"no Vulkan device: {_REASON}")
FK = _frontend_kernels()
_TOL = {"f32": 2e-6, "f16": 1e-3, "bf16": 8e-3}


def _case(kernel, dtype, cv=(), n=256, group=64, scalars=None, sizes=None, ignore=(), grid=None, cas=False):
    name = f"{kernel.__name__}-{dtype}-{'-'.join(map(str, cv))}{'-cas' if cas else ''}"
    return pytest.param(kernel, dtype, cv, n, group, scalars or {}, sizes or {}, ignore, grid, cas, id=name)


def _cases():
    cases = []
    from iron.std.softmax import softmax
    from iron.std.unary import iron_exp

    for dt in (iron.f32, iron.f16, iron.bf16):
        cases.append(_case(iron_exp, dt, n=1000))
        cases.append(_case(softmax, dt, (32,), grid=4 * 32, group=32, scalars={"ncols": 100}, sizes={"x": 400,
                                                                                                       "out": 400}))
        cases.append(_case(codegen_kernels.control_flow, dt, scalars={"n": 256, "limit": 20.0}, ignore=("peak",)))
        cases.append(_case(codegen_kernels.warp_tile, dt, (64,), group=64))
    if FK is not None:
        for op in range(13):
            cases.append(_case(FK.unary_math, iron.f32, (op,)))
        for dt in (iron.f32, iron.bf16, iron.f16):
            cases.append(_case(FK.cast_roundtrip, dt))
            cases.append(_case(FK.minmax_fma, dt))
            cases.append(_case(FK.simd_reduce, dt))
            cases.append(_case(FK.simd_exchange, dt, (1, 1)))
            cases.append(_case(FK.break_continue, dt, scalars={"m": 8, "limit": 5.0}, sizes={"x": 256 * 8}))
        cases += [
            _case(FK.int_arith_i32, None), _case(FK.int_arith_u32, None),
            _case(FK.thread_ids_1d, None, n=200, group=32),
            _case(FK.simd_ids, None, n=128, group=64),
            _case(FK.histogram_u32, iron.f32, scalars={"nbins": 8}, sizes={"hist": 8, "counter": 1},
                  ignore=("tickets",)),
            _case(FK.atomic_sum_f32, iron.f32, scalars={"nslots": 4}, sizes={"total": 4}),
            _case(FK.atomic_sum_f32, iron.f32, scalars={"nslots": 4}, sizes={"total": 4}, cas=True),
            _case(FK.atomic_max_f32, iron.f32, scalars={"nslots": 4}, sizes={"out": 4}),
            _case(FK.atomic_max_i32, None, scalars={"nslots": 4}, sizes={"out": 4}, ignore=("old",)),
            _case(FK.collatz_steps, None, scalars={"cap": 200}),
            _case(FK.range_sum, iron.f32, scalars={"m": 16, "start": 14, "stop": -1, "step": -3},
                  sizes={"x": 256 * 16}),
            _case(FK.early_exit, iron.f32, scalars={"n": 100}),
        ]
    return cases


def _inputs(ir, n, sizes, scalars, rng):
    args = {}
    for p in ir.params:
        if p.kind != "buffer":
            st = p.type
            args[p.name] = st.np_dtype.type(scalars[p.name])
            continue
        elem = p.type.elem
        size = sizes.get(p.name, n)
        if elem.is_float:
            a = (rng.standard_normal(size) * 3).astype(elem.np_dtype)
        elif elem.is_signed:
            a = rng.integers(-60, 60, size).astype(np.int32)
            a[a == 0] = 7
        else:
            a = rng.integers(1, 1000, size).astype(np.uint32)
        if p.name in ("total", "hist", "counter", "out") and not p.readonly and p.name in sizes:
            a[...] = 0
        args[p.name] = a
    return args


@pytest.mark.parametrize("kernel,dtype,cv,n,group,scalars,sizes,ignore,grid,cas", _cases())
def test_matches_interpreter(kernel, dtype, cv, n, group, scalars, sizes, ignore, grid, cas):
    ir = kernel.variant(dtype, tuple(cv)).kernel
    module = emit_spirv(ir, atomic_float_add=not cas)
    rng = np.random.default_rng(0)
    args = _inputs(ir, n, sizes, scalars, rng)
    expect = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in args.items()}
    grid3 = (grid or n, 1, 1)
    run_kernel(ir, expect, grid3, (group, 1, 1), simd_width=_SIMD)
    got = {k: v.copy() for k, v in args.items() if isinstance(v, np.ndarray)}
    vk_driver.run(module, got, {k: v.item() for k, v in args.items() if not isinstance(v, np.ndarray)}, grid3,
                  (group, 1, 1))
    for p in ir.params:
        if p.kind != "buffer" or p.name in ignore:
            continue
        e, g = expect[p.name], got[p.name]
        if p.type.elem.is_float:
            tol = _TOL[p.type.elem.name] * (64 if kernel.__name__ in ("unary_math", "warp_tile") else 8)
            np.testing.assert_allclose(g.astype(np.float64), e.astype(np.float64), rtol=tol, atol=tol,
                                       err_msg=p.name)
        else:
            np.testing.assert_array_equal(g, e, err_msg=p.name)
