"""The Vulkan fast launcher (issue 16): repeat launches on device arrays with no Python-level re-validation.

The first launch of a ``k[grid]`` shape goes through the full path (frontend/launch.py); when every buffer argument
was a Vulkan ``iron.Array``, the backend returns ``fast(args) -> bool`` built from it: the module, program, pipeline,
group counts and push-constant layout are fixed, and each call only checks that the arguments are shaped like the
first (arrays of the same dtype on the same queue, large enough; scalars of the right kind; constexprs equal; no
written buffer overlapping another; a parameter sizing a shared array equal to the first call's: the pipeline holds
that length), packs the push constants and records the dispatch. Anything else returns False and takes the full
path, which refuses or serves it; so does a change of ``IRON_BACKEND`` since the launcher was made.

Two implementations of the same checks, as CUDA has (``cuda_fast``). Compiled C (``vulkan_launch.c``, built at first
use with the system C compiler against this Python's headers, cached on disk; ``c_extension``) that records the
push constants, descriptor set, dispatch and barrier through the device's own entry points (vkGetDeviceProcAddr) with
the queue's lock held, and hands the uncommon cases (a view the device cannot bind in place, a descriptor set not
made yet, an open ``iron.graph()``) to the other: generated Python, every check unrolled per argument, one
precompiled ``struct.Struct`` for the push constants, the descriptor-set key built inline, the loader called
through cffi. ``IRON_VULKAN_LAUNCHER``: auto (default: the compiled one where it builds; ``EXT_REASON`` says why
not), c (it or an error), python. The compiled one also stands in for ``k[grid]`` itself (``direct``, as CUDA's),
so a repeat call runs no Python frame of Iron's. Host time per repeat launch of a 1,024-element kernel on lavapipe,
this 2-core machine (bench/experiments/vk_launch_profile.py, 2026-12-02): 5.0-5.4 µs before (generated Python, the
batch begun and submitted through the `vulkan` package's wrappers), 1.55-1.65 µs compiled, 4.5-6.4 µs generated
Python now.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable
from typing import Any

from ..errors import LaunchError
from .arrays import is_iron_array
from .c_extension import BACKEND_ENV_KEY, BUILD_ERRORS, ENV_DATA
from .vulkan_shared import launch_lengths, length_params

_CODES = {"i32": "<i", "u32": "<I", "f32": "<f"}
_INT_RANGE = {"i32": (-(2**31), 2**31 - 1), "u32": (0, 2**32 - 1)}

_EXT: Any = None
#: why the compiled launcher is not in use (None while it is, or before the first attempt)
EXT_REASON: str | None = None


def launcher_mode() -> str:
    """``IRON_VULKAN_LAUNCHER``: "auto" (default: the compiled launcher when it builds, else Python), "c" (the
    compiled one or an error), or "python" (the generated-Python launcher)."""
    mode = os.environ.get("IRON_VULKAN_LAUNCHER", "auto")
    if mode not in ("auto", "c", "python"):
        raise LaunchError(f"IRON_VULKAN_LAUNCHER must be auto, c or python, got {mode!r}")
    return mode


def compiled_module():
    """The compiled launcher extension (``vulkan_launch.c``), built at first use and cached on disk; None (reason in
    ``EXT_REASON``) when it cannot be built."""
    global _EXT, EXT_REASON
    if _EXT is not None:
        return _EXT or None
    try:
        _EXT = _build_extension()
        EXT_REASON = None
    except BUILD_ERRORS as e:
        _EXT, EXT_REASON = False, str(e)
    return _EXT or None


def _build_extension():
    from pathlib import Path

    from .c_extension import build_extension

    here = Path(__file__).parent
    return build_extension("iron_vulkan_launch", here / "vulkan_launch.c", "vulkan-launch",
                           (here / "launch_direct.h", here / "vulkan_launch_record.h"))


def make_fast_launch(backend, kfn, variant, args: tuple, grid, group,
                     min_sizes: dict[str, int]) -> Callable[[tuple], bool] | None:
    """``fast(args) -> bool`` for launches shaped like this one (every buffer a Vulkan array), or None."""
    params = kfn.params
    queue = backend._queue
    if queue is None or len(args) != len(params):
        return None
    plan = []
    for i, (p, value) in enumerate(zip(params, args)):
        if p.kind == "buffer":
            if not is_iron_array(value) or value.backend != "vulkan" or value.store.queue is not queue:
                return None
            plan.append((0, i, p.name, value.dtype, min_sizes.get(p.name, 0)))
        elif p.kind == "scalar":
            if p.dtype.is_half or str(p.dtype) not in _CODES:
                return None
            plan.append((1, i, p.name, str(p.dtype), None))
        else:
            plan.append((2, i, p.name, type(value), value))
    spk = backend._device_module(variant, grid)
    # run-time sized shared arrays: the pipeline holds this launch's lengths, so only calls passing the same values
    # are taken (others take the full path, which makes a launcher for theirs)
    lengths = launch_lengths(spk, {p.name: v for p, v in zip(params, args) if p.kind == "scalar"})
    fixed = dict(zip(length_params(spk), lengths))
    plan = [(k, i, name, want, fixed.get(name)) if k == 1 else (k, i, name, want, extra)
            for k, i, name, want, extra in plan]
    lanes = getattr(spk, "lanes", 1)
    run_grid = (-(-grid[0] // lanes), grid[1], grid[2]) if lanes > 1 else tuple(grid)
    prog, pipe, groups = queue.prepare(spk, run_grid, tuple(group), lengths)
    push_fields = _push_fields(spk, grid)
    if push_fields is None:
        return None
    written = {b.param for b in spk.buffers if not b.readonly}
    bufs = [entry for entry in plan if entry[0] == 0]
    n = len(params)
    mode = launcher_mode()
    fast = _generate(backend, queue, spk, prog, pipe, groups, plan, push_fields, written, bufs, n)
    module = compiled_module() if mode != "python" else None
    if module is None:
        if mode == "c":
            raise LaunchError(f"IRON_VULKAN_LAUNCHER=c but the compiled launcher is unavailable: {EXT_REASON}")
        return fast
    return _compiled(module, backend, queue, spk, prog, pipe, groups, plan, push_fields, written, bufs, fast)


def _generate(backend, queue, spk, prog, pipe, groups, plan, push_fields, written, bufs, n) -> Callable[[tuple], bool]:
    """The fast launcher as generated Python: the plan's checks unrolled per argument, the push constants packed by one
    precompiled ``struct.Struct``, the descriptor-set key built inline; a view at an offset the device cannot bind
    takes ``record`` (which copies it through an aligned scratch buffer)."""
    names = [f"a{i}" for i in range(n)]
    ns: dict[str, Any] = {"TIMER": backend._timer, "Q": queue, "LOCK": queue.lock, "ALIGN": queue.align,
                          "SPK": spk, "PROG": prog, "PIPE": pipe, "GROUPS": groups, "PROGID": id(prog),
                          "ENVIRON": ENV_DATA, "ENV_KEY": BACKEND_ENV_KEY, "ENV0": ENV_DATA.get(BACKEND_ENV_KEY)}
    code = ["def fast(call_args):",
            f"    if len(call_args) != {n} or TIMER.samples is not None:  # timed launches take the full path",
            "        return False",
            "    if ENVIRON.get(ENV_KEY) != ENV0:  # IRON_BACKEND changed since: the full path decides",
            "        return False",
            f"    {', '.join(names)}{',' if n == 1 else ''} = call_args"]
    for kind, i, _name, want, extra in plan:
        v = names[i]
        if kind == 0:
            ns[f"D{i}"] = want
            code += [f"    if type({v}) is not ARRAY or {v}.dtype is not D{i} or {v}._store.__class__ is not STORE"
                     f" or {v}._store.queue is not Q or {v}.size < {int(extra)}:",
                     "        return False"]
        elif kind == 1:
            if want == "f32":
                code += [f"    if type({v}) is not float and type({v}) is not int:", "        return False"]
            elif extra is not None:  # a run-time shared length: the value the pipeline was built for
                code += [f"    if type({v}) is not int or {v} != {int(extra)}:", "        return False"]
            else:
                lo, hi = _INT_RANGE[want]
                code += [f"    if type({v}) is not int or not {lo} <= {v} <= {hi}:", "        return False"]
        else:
            ns[f"T{i}"], ns[f"K{i}"] = want, extra
            code += [f"    if type({v}) is not T{i} or {v} != K{i}:", "        return False"]
    by_name = {entry[2]: names[entry[1]] for entry in bufs}
    for a in range(len(bufs)):
        for b in range(a + 1, len(bufs)):
            if bufs[a][2] in written or bufs[b][2] in written:
                x, y = names[bufs[a][1]], names[bufs[b][1]]
                code += [f"    if {x}._store is {y}._store and {x}._offset < {y}._offset + {y}.nbytes"
                         f" and {y}._offset < {x}._offset + {x}.nbytes:", "        return False"]
    fmt, args, at = "<", [], 0
    for offset, kind_code, source in sorted(push_fields):
        fmt += "x" * (offset - at) + kind_code[1:]
        args.append(names[next(e[1] for e in plan if e[2] == source)] if isinstance(source, str)
                    else repr(source[0]))
        at = offset + struct.calcsize("<" + kind_code[1:])
    fmt += "x" * (spk.push_size - at)
    ns["PACK"] = struct.Struct(fmt).pack
    code.append(f"    data = PACK({', '.join(args)})" if args else f"    data = bytes({spk.push_size})")
    binds = ", ".join(f"{b.param!r}: ({by_name[b.param]}._store.buf, {by_name[b.param]}._offset, "
                      f"{by_name[b.param]}.nbytes)" for b in spk.buffers)
    key = "".join(f"({b.binding}, id({by_name[b.param]}._store.buf), {by_name[b.param]}._offset, "
                  f"{by_name[b.param]}.nbytes), " for b in spk.buffers)
    aligned = " and ".join(f"{by_name[b.param]}._offset % ALIGN == 0" for b in spk.buffers) or "True"
    code += ["    with LOCK:",
             f"        if {aligned}:",
             f"            Q.record_aligned(SPK, PROG, PIPE, GROUPS, (PROGID, ({key})), {{{binds}}}, data)",
             "        else:",
             f"            Q.record(SPK, PROG, PIPE, GROUPS, {{{binds}}}, data)",
             "    TIMER.record(None)",
             "    return True"]
    from .device_array import Array
    from .vulkan_queue import VulkanStore

    ns["ARRAY"], ns["STORE"] = Array, VulkanStore
    exec("\n".join(code), ns)  # noqa: S102 - generated from the kernel's own signature, no user text
    fast = ns["fast"]
    fast.source = "\n".join(code)
    return fast


def _push_fields(spk, grid) -> list[tuple[int, str, Any]] | None:
    """(offset, struct code, source) per push constant: a parameter name, or (the grid size,) for grid fields."""
    fields = []
    for p in spk.push:
        code = _CODES.get(str(p.dtype))
        if code is None:
            return None
        axis = getattr(p, "axis", None)
        fields.append((p.offset, code, (int(grid[axis]),) if axis is not None else p.name))
    return fields


#: parameter kinds of vulkan_launch.c (``Param.kind``) and its push-constant codes
_C_BUFFER, _C_CONSTEXPR, _C_FIXED = 0, 4, 5
_C_CODES = {"i32": 1, "u32": 2, "f32": 3}
_C_PUSH = {_CODES[name]: code for name, code in _C_CODES.items()}


def _compiled(module, backend, queue, spk, prog, pipe, groups, plan, push_fields, written, bufs,
              python: Callable[[tuple], bool]) -> Callable[[tuple], bool]:
    """The compiled launcher for ``plan`` (see ``vulkan_launch.c`` for the argument layout), handing what it does not
    record itself to ``python``, the generated launcher of the same plan; ``python`` where it cannot be made."""
    from . import vulkan_queue
    from .device_array import Array

    vk, ffi = queue.ctx.vk, queue.ctx.ffi
    params = []
    for kind, _i, _name, want, extra in plan:
        if kind == 0:
            params.append((_C_BUFFER, want, None, int(extra), 0))
        elif kind == 1 and extra is not None and want != "f32":  # as the generated check: an f32 takes any number
            params.append((_C_FIXED, None, None, int(extra), _C_CODES[want]))
        elif kind == 1:
            params.append((_C_CODES[want], None, None, 0, 0))
        else:
            params.append((_C_CONSTEXPR, want, extra, 0, 0))
    index = {name: i for _k, i, name, _w, _e in plan}
    push = [(offset, _C_PUSH[code], index[source], 0) if isinstance(source, str)
            else (offset, _C_PUSH[code], -1, source[0]) for offset, code, source in sorted(push_fields)]
    bindings = [(b.binding, index[b.param]) for b in spk.buffers]
    alias = [(bufs[a][1], bufs[b][1]) for a in range(len(bufs)) for b in range(a + 1, len(bufs))
             if bufs[a][2] in written or bufs[b][2] in written]
    barrier = queue.memory_barrier
    handle = lambda h: int(ffi.cast("uintptr_t", h))  # noqa: E731
    try:
        fast = module.FastLaunch(
            queue.procs(), pipe, handle(pipe), handle(prog.pipeline_layout), tuple(groups), spk.push_size,
            vk.VK_SHADER_STAGE_COMPUTE_BIT, vk.VK_PIPELINE_BIND_POINT_COMPUTE,
            (barrier.sType, barrier.srcAccessMask, barrier.dstAccessMask, queue.stages, queue.stages), queue.align,
            queue, queue.lock, backend._timer, vars(vulkan_queue), python, Array, vulkan_queue.VulkanStore, id(prog),
            params, push, bindings, alias)
    except ValueError:  # more than it takes (parameters, push-constant bytes), or an entry point missing
        if launcher_mode() == "c":
            raise
        return python
    return fast
