"""The CUDA launch fast path: repeat launches of one ``k[grid]`` on device arrays in a few microseconds.

The first launch goes through the full path (binding, dtype/size checks, variant compile, ``cuda.core``). When all
buffers were device arrays, it leaves behind a *fast launcher* specialised to that call's shape: the argument kinds,
dtypes, constexpr values and the minimum buffer sizes. A later call re-checks exactly those facts and, when they still
hold, writes the pointers and scalars into a prebuilt ``void*[]`` and calls the driver's ``cuLaunchKernel``. Anything
that does not match (another dtype, a NumPy array, a graph capture, a kwarg) falls back to the full path, which
re-validates and installs a new fast launcher.

Two implementations of the same checks: compiled C (``cuda_launch.c``, built at first use with the system C compiler
against this Python's headers, cached on disk), which calls the driver through a function pointer; and, where that
cannot be built (no compiler or headers; ``EXT_REASON`` says why) or ``IRON_CUDA_LAUNCHER=python``, a function
generated in Python that calls the driver through ctypes. A kernel emitted for programmatic dependent launch
(``KernelSource.pdl``, ``IRON_CUDA_PDL=1``) is launched by both with ``cuLaunchKernelEx`` and the programmatic stream
serialization attribute instead.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Callable
from typing import Any

from ..errors import LaunchError
from ..ir.variant import constexpr_key as _constexpr_key
from .arrays import is_iron_array
from .c_extension import BUILD_ERRORS

_LIB: Any = None


#: where the fast launcher reads IRON_BACKEND: os.environ's underlying dict where CPython has one (bytes keys and
#: values on POSIX, kept in step by os.environ's own writes), else os.environ itself
_ENV_DATA = getattr(os.environ, "_data", os.environ)
_ENV_KEY = os.environ.encodekey("IRON_BACKEND") if _ENV_DATA is not os.environ else "IRON_BACKEND"


def _libcuda():
    global _LIB
    if _LIB is None:
        lib = ctypes.CDLL("libcuda.so.1")
        fn = lib.cuLaunchKernel
        fn.restype = ctypes.c_int
        fn.argtypes = [ctypes.c_void_p, ctypes.c_uint, ctypes.c_uint, ctypes.c_uint, ctypes.c_uint, ctypes.c_uint,
                       ctypes.c_uint, ctypes.c_uint, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
        _LIB = lib
    return _LIB


def _torch_stream_getter() -> Callable[[int], int]:
    import torch

    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is not None:
        return raw
    return lambda index: torch.cuda.current_stream(index).cuda_stream


_SCALAR_CTYPES = {"i32": ctypes.c_int32, "u32": ctypes.c_uint32, "f32": ctypes.c_float}
_SCALAR_RANGE = {"i32": (-(2**31), 2**31 - 1), "u32": (0, 2**32 - 1)}


_EXT: Any = None
#: why the compiled launcher is not in use (None while it is, or before the first attempt)
EXT_REASON: str | None = None
_KIND = {"i32": 1, "u32": 2, "f32": 3}


def launcher_mode() -> str:
    """``IRON_CUDA_LAUNCHER``: "auto" (default: the compiled launcher when it builds, else Python), "c" (the
    compiled one or an error), or "python" (the generated-Python launcher)."""
    mode = os.environ.get("IRON_CUDA_LAUNCHER", "auto")
    if mode not in ("auto", "c", "python"):
        raise LaunchError(f"IRON_CUDA_LAUNCHER must be auto, c or python, got {mode!r}")
    return mode


def compiled_module():
    """The compiled launcher extension (``cuda_launch.c``), built at first use with the system C compiler against
    this Python's headers and cached on disk; None (reason in ``EXT_REASON``) when it cannot be built."""
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
    return build_extension("iron_cuda_launch", here / "cuda_launch.c", "cuda-launch", (here / "launch_direct.h",))


def _single_cuda_device() -> bool:
    """Whether this process sees exactly one CUDA device (the compiled launcher then checks a tensor's device with
    the ``is_cuda`` attribute, cheaper than ``get_device()``)."""
    try:
        import torch

        return torch.cuda.device_count() == 1
    except Exception:
        return False


def _launch_address(pdl: bool = False) -> int:
    """The address of the driver's cuLaunchKernel, or with ``pdl`` cuLaunchKernelEx (tests substitute recording C
    functions)."""
    lib = _libcuda()
    return ctypes.cast(lib.cuLaunchKernelEx if pdl else lib.cuLaunchKernel, ctypes.c_void_p).value


#: CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION (cuda.h's CUlaunchAttributeID)
PROGRAMMATIC_STREAM_SERIALIZATION = 6


class _AttributeValue(ctypes.Union):
    """cuda.h's CUlaunchAttributeValue: 64 bytes, 8-byte aligned; this attribute's value is an int."""

    _fields_ = [("flag", ctypes.c_int), ("bytes", ctypes.c_char * 64), ("align", ctypes.c_void_p)]


class LaunchAttribute(ctypes.Structure):
    """cuda.h's CUlaunchAttribute: the id, padding to 8 bytes, the value."""

    _fields_ = [("id", ctypes.c_int), ("pad", ctypes.c_char * 4), ("value", _AttributeValue)]


class LaunchConfig(ctypes.Structure):
    """cuda.h's CUlaunchConfig, the first argument of cuLaunchKernelEx."""

    _fields_ = [("grid", ctypes.c_uint * 3), ("block", ctypes.c_uint * 3), ("shmem", ctypes.c_uint),
                ("stream", ctypes.c_void_p), ("attrs", ctypes.POINTER(LaunchAttribute)), ("num_attrs", ctypes.c_uint)]


def pdl_config(blocks, block, shmem: int) -> LaunchConfig:
    """A CUlaunchConfig with programmatic stream serialization allowed (the stream is set per call); it keeps its
    attribute alive (``_attr``)."""
    attr = LaunchAttribute(id=PROGRAMMATIC_STREAM_SERIALIZATION)
    attr.value.flag = 1
    config = LaunchConfig((ctypes.c_uint * 3)(*blocks), (ctypes.c_uint * 3)(*block), shmem, None,
                          ctypes.pointer(attr), 1)
    config._attr = attr
    return config


def make_fast_launch(backend, kfn, variant, args: tuple, bound: dict[str, Any], grid, group,
                     min_sizes: dict[str, int]) -> Callable[[tuple], bool] | None:
    """A launcher ``fast(args) -> bool`` for launches shaped like this one, or None when it cannot be made: the
    compiled one (``cuda_launch.c``) when it builds (``IRON_CUDA_LAUNCHER``), else generated Python."""
    kern, blocks, block = backend.geometry(variant, grid, group)
    src = backend.emitted(variant)
    params = kfn.params
    if len(args) != len(params):
        return None
    any_buffer = False
    plan = []  # per Python parameter: (kind, index into slots, expected) ...
    for p, value in zip(params, args):
        if p.kind == "buffer":
            if is_iron_array(value):  # an iron Array of this backend: Iron's own stream, the generated launcher
                if value.backend != backend.name or getattr(value._store, "ptr", None) is None:
                    return None
                any_buffer = True
                plan.append(("array", p.name, type(value), value.dtype, value._store.device,
                             min_sizes.get(p.name, 0), value.dtype.itemsize))
                continue
            if type(value).__module__.split(".")[0] != "torch" or not value.is_cuda:
                return None  # CuPy / NumPy: the full path handles them
            any_buffer = True
            plan.append(("buffer", p.name, type(value), value.dtype, value.device.index, min_sizes.get(p.name, 0),
                         value.element_size()))
        elif p.kind == "scalar":
            if p.dtype.is_half or p.dtype.is_wide:
                # a half scalar is rounded at launch (frontend/launch.py), and the launchers pack 4-byte scalars
                # only: the full path passes both
                return None
            plan.append(("scalar", p.name, p.dtype.name, None, None, None, None))
        else:
            plan.append(("constexpr", p.name, None, _constexpr_key(value), None, None, None))
    if not any_buffer:
        return None
    kinds = {entry[0] for entry in plan}
    if {"array", "buffer"} <= kinds:
        return None  # torch tensors beside iron Arrays: which stream is the full path's call
    # two or more buffers, one written: each call checks that no two overlap where either is written (the full path
    # then refuses the launch naming both, frontend/launch.py:check_aliasing)
    buffers = [p for p in variant.kernel.params if p.kind == "buffer"]
    written = frozenset(p.name for p in buffers if not p.readonly) if len(buffers) > 1 else frozenset()
    mode = launcher_mode()
    module = compiled_module() if mode != "python" else None
    if mode == "c" and module is None:
        raise LaunchError(f"IRON_CUDA_LAUNCHER=c but the compiled launcher is unavailable: {EXT_REASON}")
    if module is not None and "array" not in kinds and not src.tensor_maps:  # the compiled launcher knows torch
        # tensors only, and makes no copy-engine descriptors
        return _compiled_fast(module, backend, variant, plan, src, kern, blocks, block, grid, written)
    return _python_fast(backend, variant, plan, src, kern, blocks, block, grid, written)


def _tmap_lines(backend, variant, plan, names, src, slots, index_of, ns) -> list[str]:
    """The generated lines that write each copy-engine descriptor's address (``cuda_tma``: a cache lookup by the
    buffer's address and the view's values) into its slot, after the buffers' and scalars' slots are written."""
    if not src.tensor_maps:
        return []
    lines = ["    try:"]  # a view the engine cannot describe: the full path refuses it, located
    entry_of = {entry[1]: (i, entry) for i, entry in enumerate(plan)}
    for j, spec in enumerate(src.tensor_maps):
        i, entry = entry_of[spec.buffer]
        v = names[i]
        size = f"{v}.numel()" if entry[0] == "buffer" else f"{v}.size"
        params = dict.fromkeys(value for kind, value in spec.view if kind == "param")
        scalars = ", ".join(f"{value!r}: {names[entry_of[value][0]]}" for value in params)
        ns[f"TM{j}"], ns[f"TS{j}"] = slots[index_of[spec.param]], spec
        ns["tmap_pointer"], ns["buffer_slot"] = backend.tensor_map_cache().pointer, slots
        lines.append(f"        TM{j}.value = tmap_pointer(TS{j}, buffer_slot[{index_of[spec.buffer]}].value, {size}, "
                     f"{{{scalars}}}, s, NAME)")
    return lines + ["    except LaunchError:", "        return False"]


def _python_fast(backend, variant, plan, src, kern, blocks, block, grid, written) -> Callable[[tuple], bool]:
    """The generated-Python launcher for ``plan``: the same checks as ``cuda_launch.c``, the driver through ctypes."""
    slots: list[Any] = []
    # the kernel's C parameters, in order: each gets a ctypes slot; buffers and scalars are filled per call
    index_of: dict[str, int] = {}
    for cp in src.params:
        if cp.kind == "buffer":
            slot = ctypes.c_void_p(0)
            index_of[cp.source] = len(slots)
        elif cp.kind == "scalar":
            slot = _SCALAR_CTYPES[cp.dtype.name]()
            index_of[cp.source] = len(slots)
        elif cp.kind == "tmap":  # a copy-engine descriptor's address, looked up per call (_tmap_lines)
            slot = ctypes.c_void_p(0)
            index_of[cp.name] = len(slots)
        else:
            slot = ctypes.c_int32(grid[cp.axis])
        slots.append(slot)
    argv = (ctypes.c_void_p * len(slots))(*[ctypes.cast(ctypes.pointer(s), ctypes.c_void_p) for s in slots])
    device_index = next(entry[4] for entry in plan if entry[0] in ("buffer", "array"))
    own = any(entry[0] == "array" for entry in plan)  # iron Arrays: Iron's stream, not torch's
    # every argument of cuLaunchKernel prebuilt as a ctypes object (no argtypes: nothing is converted per call);
    # only the stream's value changes, when torch's current stream does
    c_uint = ctypes.c_uint
    fixed = (ctypes.c_void_p(int(kern.handle)), *map(c_uint, blocks), *map(c_uint, block),
             c_uint(src.dynamic_shared_bytes))
    stream = ctypes.c_void_p(0)
    pdl = getattr(src, "pdl", False)  # cuLaunchKernelEx(&config, f, argv, NULL), the stream in the config
    config = pdl_config(blocks, block, src.dynamic_shared_bytes) if pdl else None
    ns: dict[str, Any] = {
        "backend": backend, "stream_of": (lambda index, h=int(backend.stream.handle): h) if own
        else _torch_stream_getter(), "DEV": device_index, "stream": stream, "BK": backend.name,
        # os.environ's own bytes dict (CPython): a lookup there is ~20x cheaper than os.environ.get, which encodes
        # the key and decodes the value per call (1.5 us of a 6.5 us launch on the H200's host, cProfile)
        "environ": _ENV_DATA, "ENV0": _ENV_DATA.get(_ENV_KEY), "KEY": _ENV_KEY,
        # PyDLL: the driver call keeps the GIL, so no other thread can rewrite the shared slots while it reads them
        "launch": ctypes.PyDLL("libcuda.so.1").cuLaunchKernel, "fixed": fixed, "argv": ctypes.c_void_p(
            ctypes.addressof(argv)), "LaunchError": LaunchError, "ckey": _constexpr_key, "NAME": variant.kernel.name,
    }
    if pdl:
        ns.update(launch=ctypes.PyDLL("libcuda.so.1").cuLaunchKernelEx, CONFIG=config,
                  config=ctypes.c_void_p(ctypes.addressof(config)), fn=fixed[0])
    names = [f"a{i}" for i in range(len(plan))]
    code = ["def fast(call_args):",
            f"    if backend.capture is not None or len(call_args) != {len(plan)}:",
            "        return False",
            "    if environ.get(KEY) != ENV0:  # IRON_BACKEND changed since: the full path decides",
            "        return False",
            f"    {', '.join(names)}{',' if len(names) == 1 else ''} = call_args"]
    writes = []  # after every check: no Python code of ours runs between the slot writes and the launch
    for i, (kind, name, a, b, _, d, _size) in enumerate(plan):
        v = names[i]
        if kind == "buffer":
            ns[f"T{i}"], ns[f"D{i}"], ns[f"S{i}"] = a, b, slots[index_of[name]]
            code += [f"    if (type({v}) is not T{i} or {v}.dtype is not D{i} or {v}.get_device() != DEV"
                     f" or not {v}.is_contiguous() or {v}.numel() < {int(d)} or {v}.data_ptr() % 16):",
                     "        return False"]  # off a 16-byte boundary: the full path aligns it (cuda_align)
            writes.append(f"    S{i}.value = {v}_lo" if written else f"    S{i}.value = {v}.data_ptr()")
        elif kind == "array":
            ns[f"T{i}"], ns[f"D{i}"], ns[f"S{i}"] = a, b, slots[index_of[name]]
            code += [f"    if type({v}) is not T{i} or {v}.dtype is not D{i} or {v}.backend != BK"
                     f" or {v}.size < {int(d)} or ({v}._store.ptr + {v}._offset) % 16:",
                     "        return False"]
            writes.append(f"    S{i}.value = {v}_lo" if written else f"    S{i}.value = {v}._store.ptr + {v}._offset")
        elif kind == "scalar":
            ns[f"S{i}"] = slots[index_of[name]]
            if a in _SCALAR_RANGE:
                lo, hi = _SCALAR_RANGE[a]
                code += [f"    if type({v}) is not int or not {lo} <= {v} <= {hi}:", "        return False"]
            else:
                code += [f"    if type({v}) is not float and type({v}) is not int:", "        return False"]
            writes.append(f"    S{i}.value = {v}")
        else:
            ns[f"K{i}"] = b
            code += [f"    if ckey({v}) != K{i}:", "        return False"]
    code += _alias_checks(plan, names, written)
    code += ["    s = stream_of(DEV)"]  # (may be Python code on an older torch: before the writes)
    code += writes
    code += _tmap_lines(backend, variant, plan, names, src, slots, index_of, ns)
    code += ["    if s != stream.value:",
             "        stream.value = s",
             *(["        CONFIG.stream = s"] if pdl else []),
             "    err = launch(config, fn, argv, None)" if pdl else "    err = launch(*fixed, stream, argv, None)",
             "    if err:",
             "        raise LaunchError(f'CUDA launch of {NAME} failed (CUresult {err})')",
             "    return True"]
    exec("\n".join(code), ns)  # noqa: S102 - generated from the kernel's own signature, no user text
    fast = ns["fast"]
    fast.source = "\n".join(code)
    fast.keepalive = (argv, slots, kern, fixed, config)  # the driver reads argv and the slots at each launch
    return fast


def _alias_checks(plan, names: list[str], written: frozenset) -> list[str]:
    """Generated lines that decline a call (False: the full path refuses it) where two buffers overlap and the kernel
    writes either; none unless ``written`` (two or more buffers, one written)."""
    if not written:
        return []
    bufs = [(names[i], entry[1], entry[0]) for i, entry in enumerate(plan) if entry[0] in ("buffer", "array")]
    code = []  # defines {v}_lo, the data pointer the slot writes then use
    for v, _, kind in bufs:
        lo = f"{v}._store.ptr + {v}._offset" if kind == "array" else f"{v}.data_ptr()"
        code += [f"    {v}_lo = {lo}", f"    {v}_hi = {v}_lo + {v}.nbytes"]
    bufs = [(v, pv) for v, pv, _ in bufs]
    for i, (v, pv) in enumerate(bufs):
        for w, pw in bufs[i + 1:]:
            if pv in written or pw in written:
                code += [f"    if {v}_lo < {w}_hi and {w}_lo < {v}_hi and {v}_lo < {v}_hi and {w}_lo < {w}_hi:",
                         "        return False"]
    return code


def _compiled_fast(module, backend, variant, plan, src, kern, blocks, block, grid, written):
    """The compiled launcher for ``plan`` (see ``cuda_launch.c`` for the argument layout)."""
    slots, slot_of = [], {}
    for cp in src.params:
        if cp.kind == "buffer":
            slot_of[cp.source] = len(slots)
            slots.append((0, 0))
        elif cp.kind == "scalar":
            slot_of[cp.source] = len(slots)
            slots.append((_KIND[cp.dtype.name], 0))
        else:
            slots.append((1, int(grid[cp.axis])))
    params = []
    for kind, name, a, b, _, d, itemsize in plan:
        if kind == "buffer":
            params.append((0, slot_of[name], a, b, int(d) * int(itemsize), None, name in written))
        elif kind == "scalar":
            params.append((_KIND[a], slot_of[name], None, None, 0, None, False))
        else:
            params.append((4, -1, None, None, 0, b, False))
    device_index = next(entry[4] for entry in plan if entry[0] == "buffer")
    pdl = bool(getattr(src, "pdl", False))  # cuLaunchKernelEx with programmatic stream serialization
    fast = module.FastLaunch(_launch_address(pdl), int(kern.handle), tuple(blocks), tuple(block),
                             src.dynamic_shared_bytes, device_index, _single_cuda_device(), backend,
                             _torch_stream_getter(), _constexpr_key, LaunchError, variant.kernel.name, params, slots,
                             pdl)
    return fast
