"""Launching: ``k[grid]`` / ``k[grid, group]``, argument binding and checking, dispatch to a backend."""

from __future__ import annotations

import math
import os
import sys
from typing import Any

import numpy as np

from ..errors import IronError, LaunchError
from ..interp.semantics import const_array
from ..ir import types as t
from ..ir.core import Loc
from ..lang.types import DTypeVar
from ..runtime import get_backend, resolve_backend_name
from ..runtime.arrays import foreign_dtype, shares_memory

_IRON_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MAX_GROUP_THREADS = 1024
DEFAULT_GROUP = {1: (256, 1, 1), 2: (16, 16, 1), 3: (8, 8, 4)}


def caller_loc() -> Loc | None:
    """The user's line that called into Iron (the first frame outside the iron package)."""
    f = sys._getframe(1)
    while f is not None and os.path.abspath(f.f_code.co_filename).startswith(_IRON_DIR + os.sep):
        f = f.f_back
    if f is None:
        return None
    code = f.f_code
    line, col, end_col = f.f_lineno, 0, None
    try:
        positions = list(code.co_positions())[f.f_lasti // 2]
        if positions[0] == line and positions[2] is not None:
            col, end_col = positions[2], positions[3] if positions[1] == line else None
    except (IndexError, AttributeError, ValueError):
        pass
    import linecache

    return Loc(code.co_filename, line or 0, col, linecache.getline(code.co_filename, line or 0).rstrip("\n"), end_col)


def _dims(x: Any, what: str) -> tuple[int, ...]:
    if isinstance(x, (int, np.integer)) and not isinstance(x, bool):
        dims = (int(x),)
    elif isinstance(x, tuple) and 1 <= len(x) <= 3 and all(isinstance(d, (int, np.integer))
                                                           and not isinstance(d, bool) for d in x):
        dims = tuple(int(d) for d in x)
    else:
        raise LaunchError(f"{what} must be an int or a tuple of 1 to 3 ints, got {x!r}", caller_loc())
    if any(d < 0 for d in dims):
        raise LaunchError(f"{what} must not be negative, got {x!r}", caller_loc())
    return dims


def parse_launch_key(key: Any) -> tuple[tuple[int, ...], tuple[int, ...] | None]:
    """``k[n]``: 1-D grid of n threads. ``k[n, g]``: n threads in groups of g. ``k[(x, y), (gx, gy)]`` or
    ``k[(x, y), None]``: multi-dimensional grid and group. The grid counts threads, not groups."""
    if isinstance(key, tuple) and len(key) == 2 and (isinstance(key[0], tuple) or key[1] is None
                                                      or isinstance(key[1], tuple)):
        grid = _dims(key[0], "grid")
        group = _dims(key[1], "group") if key[1] is not None else None
    elif isinstance(key, tuple) and len(key) == 2:
        grid, group = _dims(key[0], "grid"), _dims(key[1], "group")
    elif isinstance(key, tuple):
        raise LaunchError(f"ambiguous launch key {key!r}: write k[(x, y, z), group] or k[(x, y, z), None] for a "
                          "multi-dimensional grid, k[n] or k[n, group] for a 1-D one", caller_loc())
    else:
        grid, group = _dims(key, "grid"), None
    return grid, group


def _pad3(d: tuple[int, ...]) -> tuple[int, int, int]:
    return tuple(list(d) + [1] * (3 - len(d)))  # type: ignore[return-value]


#: while set (``full_path``), ``k[grid]`` hands out a fresh, uncached Launcher: every launch takes the full path, which
#: records the backend's ``last_launch`` (the bench's registers and occupancy of a row's kernel)
FULL_PATH = [False]


class full_path:
    """Within ``with full_path():`` launches skip the cached fast and direct launchers (one flag read per ``k[...]``
    otherwise)."""

    def __enter__(self) -> None:
        FULL_PATH[0] = True

    def __exit__(self, *exc) -> None:
        FULL_PATH[0] = False


class Launcher:
    """``k[grid, group]``: call it with the kernel's arguments."""

    def __init__(self, kfn, grid: tuple[int, ...], group: tuple[int, ...] | None):
        self.kfn = kfn
        self.grid = grid
        self.group = group
        # backend= -> the backend's fast launchers for repeat calls, the latest first: one k[grid] often serves calls
        # of several shapes in turn (a model's GEMVs of one grid, different widths), each with its own launcher
        self._fast: dict[str | None, list[Any]] = {}
        self.key: Any = None  # the k[...] key this launcher is cached under (set by KernelFunction.__getitem__)
        self.generation = kfn.generation  # the kernel's variants its fast launchers hold (KernelFunction.refresh)

    def __call__(self, *args: Any, backend: str | None = None, **kwargs: Any) -> None:
        kfn = self.kfn
        if (kfn.refresh() if kfn.reads.keys else kfn.generation) != self.generation:
            self._fast.clear()  # a global the variants baked in has changed: they are gone, and so are these
            self.generation = kfn.generation
        if not kwargs:
            for fast in self._fast.get(backend, ()):
                if fast(args):
                    return
        try:
            self._launch(args, kwargs, backend)
        except IronError as e:
            if isinstance(e, LaunchError) and e.loc is None:
                e = LaunchError(e.message, caller_loc(), e.hint)  # raised deep in a backend: point at the call
            raise e.with_traceback(None) from None

    def _launch(self, args: tuple, kwargs: dict, backend: str | None) -> None:
        kfn = self.kfn
        bound = bind_arguments(kfn, args, kwargs)
        dtype = resolve_T(kfn, bound)
        constexprs = tuple(_constexpr(n, bound[n]) for n in kfn.constexpr_names)
        # the optional buffers passed as None: part of the variant's key, like a constexpr (signature.ParamSpec)
        absent = tuple(n for n in kfn.optional_names if bound[n] is None)
        # the backend's SIMD width is asked only for kernels whose IR depends on it (simd_size() folds per width)
        variant = kfn.variant(dtype, constexprs, lambda: get_backend(resolve_backend_name(backend, bound)).simd_width(),
                              absent)
        grid, group = self.grid, self.group
        if group is None:
            group = DEFAULT_GROUP[len(grid)]
            group = tuple(min(g, max(1, n)) if len(grid) > 1 else g for g, n in zip(group, _pad3(grid)))
        if len(group) != len(grid) and self.group is not None and len(self.group) > 1:
            raise LaunchError(f"group {group} and grid {grid} have different numbers of axes", caller_loc())
        grid3, group3 = _pad3(grid), _pad3(group)
        if any(g <= 0 for g in group3):
            raise LaunchError(f"group sizes must be positive, got {group}", caller_loc())
        if math.prod(group3) > MAX_GROUP_THREADS:
            raise LaunchError(f"group {group} has {math.prod(group3)} threads; the limit is {MAX_GROUP_THREADS}",
                              caller_loc())
        name = resolve_backend_name(backend, bound)
        check_addressable(grid, grid3, group3, name)
        if math.prod(grid3) == 0:
            return
        bounds = getattr(kfn, "launch_bounds", None)
        if bounds is not None and group3[0] * group3[1] * group3[2] > bounds[0]:
            raise LaunchError(f"{kfn.__name__} declares launch_bounds of {bounds[0]} threads per group; this launch's "
                              f"group {group} has {group3[0] * group3[1] * group3[2]}", caller_loc(),
                              "launch smaller groups, or raise the kernel's launch_bounds")
        if variant.collectives and any(n % g for n, g in zip(grid3, group3)):
            raise LaunchError(
                f"{kfn.__name__} uses barrier()/simd_* collectives, so its grid {grid} must be a multiple of its "
                f"group {group}", caller_loc(), "round the grid up and guard the extra threads with an if")
        be = get_backend(name)
        arrays = {}
        for p in kfn.params:
            if p.kind == "buffer" and p.name not in absent:
                arrays[p.name] = be.check_array(p.name, bound[p.name], caller_loc)
        check_aliasing(variant.kernel, bound)
        for chk in variant.size_checks:
            size = _size(arrays[chk.param])
            if size < grid3[chk.axis]:
                raise LaunchError(
                    f"argument '{chk.param}' has {size} elements but {kfn.__name__} {chk.access} "
                    f"{chk.param}[program_id({chk.axis})] for all {grid3[chk.axis]} threads of grid axis {chk.axis} "
                    f"({os.path.basename(kfn._src.file)}:{chk.line})", caller_loc(),
                    "pass a larger array or launch fewer threads")
        scalars = {p.name: _scalar(p.name, p.dtype, bound[p.name]) for p in kfn.params if p.kind == "scalar"}
        be.launch(variant, arrays, scalars, grid3, group3)
        if not kwargs and not absent:  # a launch with an absent buffer takes this full path: fast ones want arrays
            min_sizes = {chk.param: grid3[chk.axis] for chk in variant.size_checks}
            fast = be.fast_launcher(kfn, variant, args, bound, grid3, group3, min_sizes)
            if fast is not None:
                held = self._fast.setdefault(backend, [])
                held.insert(0, fast)
                del held[FAST_LAUNCHERS:]
            if fast is not None and backend is None and self.key is not None:
                direct = be.direct_launcher(fast, self)
                if direct is not None:
                    kfn.install_direct_launcher(self.key, self, direct)


#: fast launchers one ``k[grid]`` keeps per backend (each a call shape it saw last)
FAST_LAUNCHERS = 4
#: ``program_id`` and ``num_threads`` are i32: every thread of an axis, whole groups counted, needs an id below this
INDEX_LIMIT = 2**31
#: backends whose thread ids are one array over the whole grid (the interpreter's), so the product is bounded too
LINEAR_IDS = frozenset({"cpu"})


def check_addressable(grid: tuple[int, ...], grid3: tuple[int, ...], group3: tuple[int, ...], backend: str) -> None:
    """Refuse a grid the kernel's i32 thread ids cannot address, before any backend allocates or runs anything."""
    hint = "launch fewer threads and loop in the kernel (a grid-stride loop), or split the work into several launches"
    padded = [-(-n // g) * g for n, g in zip(grid3, group3)]
    shown = grid[0] if len(grid) == 1 else grid
    for axis, (n, total) in enumerate(zip(grid3, padded)):
        if total >= INDEX_LIMIT:
            whole = f" ({total} counting whole groups of {group3[axis]})" if total != n else ""
            raise LaunchError(f"grid {shown} has {n} threads on axis {axis}{whole}; program_id({axis}) is an i32, "
                              "so an axis takes fewer than 2^31 threads", caller_loc(), hint)
    if backend in LINEAR_IDS and math.prod(padded) >= INDEX_LIMIT:
        raise LaunchError(f"grid {shown} has {math.prod(padded)} threads counting whole groups; the {backend} "
                          "backend numbers the threads of a whole launch with one i32, so a launch takes fewer than "
                          "2^31 threads", caller_loc(), hint)


def check_aliasing(kernel, bound: dict[str, Any]) -> None:
    """Refuse two buffer arguments that share memory when the kernel writes either: backends that copy buffers (Vulkan,
    Metal, NumPy arrays on CUDA) would lose one parameter's writes, and CUDA declares buffers ``__restrict__``."""
    buffers = [p for p in kernel.params if p.kind == "buffer"]
    if len(buffers) < 2 or all(p.readonly for p in buffers):
        return
    for i, p in enumerate(buffers):
        for q in buffers[i + 1:]:
            if (not p.readonly or not q.readonly) and shares_memory(bound[p.name], bound[q.name]):
                w = p if not p.readonly else q
                raise LaunchError(f"arguments '{p.name}' and '{q.name}' share memory and {kernel.name} writes "
                                  f"'{w.name}'", caller_loc(),
                                  "pass separate arrays (e.g. a copy); only read-only arguments may share memory")


def cache_key(key: Any) -> bool:
    """Whether ``k[key]`` may be looked up in a kernel's launch cache as it is: only an int or tuples of ints and
    None, each exactly of that type (64.0, True and np.float32(64) equal and hash as 64, yet are refused)."""
    if type(key) is not tuple:
        return type(key) is int
    for d in key:
        if type(d) is int or d is None:
            continue
        if type(d) is not tuple:
            return False
        for e in d:
            if type(e) is not int:
                return False
    return True


def canonical_key(key: Any) -> Any:
    """A launch key that ``parse_launch_key`` accepted with NumPy ints in it, as plain ints (its cache key)."""
    if isinstance(key, tuple):
        return tuple(canonical_key(d) for d in key)
    return key if key is None else int(key)


def _size(arr: Any) -> int:
    return int(getattr(arr, "size", 0) if not callable(getattr(arr, "numel", None)) else arr.numel())


def bind_arguments(kfn, args: tuple, kwargs: dict) -> dict[str, Any]:
    names = [p.name for p in kfn.params]
    sig = f"{kfn.__name__}({', '.join(names)})"
    if len(args) > len(names):
        raise LaunchError(f"{sig} takes {len(names)} arguments, got {len(args)}", caller_loc())
    bound = dict(zip(names, args))
    for k, v in kwargs.items():
        if k not in names:
            raise LaunchError(f"{sig} has no parameter '{k}'", caller_loc())
        if k in bound:
            raise LaunchError(f"{sig} got two values for '{k}'", caller_loc())
        bound[k] = v
    for p in kfn.params:
        if p.default_none and p.name not in bound:
            bound[p.name] = None  # an optional buffer left out: the variant without it
    missing = [n for n in names if n not in bound]
    if missing:
        raise LaunchError(f"{sig} is missing argument{'s' if len(missing) > 1 else ''} "
                          f"{', '.join(repr(m) for m in missing)}", caller_loc())
    return bound


def array_dtype(value: Any) -> t.ScalarType | None:
    dt = getattr(value, "dtype", None)
    if dt is None and hasattr(value, "__cuda_array_interface__"):  # a bare producer: its typestr
        dt = value.__cuda_array_interface__["typestr"]
    if dt is None or isinstance(dt, t.ScalarType):  # an iron Array's dtype is Iron's own
        return dt
    try:
        return t.scalar_type_of_numpy(np.dtype(dt))
    except TypeError:
        return foreign_dtype(dt)


def resolve_T(kfn, bound: dict[str, Any]) -> t.ScalarType | None:
    """What T is for this launch: the common dtype of every Tensor[T] argument; fixed dtypes are checked too."""
    dtype, first = None, None
    for p in kfn.params:
        if p.kind != "buffer":
            continue
        value = bound[p.name]
        if value is None:
            check_none(kfn, p)
            continue  # an absent optional buffer says nothing about T
        if (not hasattr(value, "dtype") or not hasattr(value, "shape")) and \
                not hasattr(value, "__cuda_array_interface__"):
            raise LaunchError(f"argument '{p.name}' must be an array (NumPy, or the backend's device array), got "
                              f"{type(value).__name__}", caller_loc())
        dt = array_dtype(value)
        if isinstance(p.dtype, DTypeVar):
            if dt not in p.dtype.choices:
                raise LaunchError(f"argument '{p.name}' has dtype {value.dtype} but Tensor[T] takes "
                                  f"{'/'.join(map(str, p.dtype.choices))}", caller_loc())
            if dtype is None:
                dtype, first = dt, p.name
            elif dt != dtype:
                raise LaunchError(f"arguments '{first}' ({dtype}) and '{p.name}' ({dt}) must have the same dtype T",
                                  caller_loc(), f"convert one of them, e.g. {p.name}.astype(...)")
        elif dt != p.dtype:
            raise LaunchError(f"argument '{p.name}' has dtype {value.dtype} but the kernel expects {p.dtype}",
                              caller_loc())
    if dtype is None and kfn.generic:
        ts = [p.name for p in kfn.params if isinstance(p.dtype, DTypeVar)]
        raise LaunchError(f"nothing fixes T: every Tensor[T] argument of {kfn.__name__} ({', '.join(ts)}) is None",
                          caller_loc(), "pass at least one Tensor[T] array, or give the kernel a buffer of a fixed "
                          "dtype")
    return dtype


def check_none(kfn, p) -> None:
    """None for buffer ``p``: the variant without it, when ``p`` is optional; else refused, naming it."""
    if not p.optional:
        raise LaunchError(f"argument '{p.name}' of {kfn.__name__} is None, but '{p.name}' is not an optional buffer",
                          caller_loc(), f"annotate it `{p.name}: Tensor[...] | None` to let a launch pass None "
                          f"(and test it in the kernel with `if {p.name} is not None:`)")


def _constexpr(name: str, value: Any) -> Any:
    if isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, np.generic) and value.dtype.kind in "biuf":
        return value.item()
    if isinstance(value, t.ScalarType):
        return value
    raise LaunchError(f"constexpr '{name}' must be an int, float, bool or dtype, got {type(value).__name__}",
                      caller_loc())


def _scalar(name: str, ty: t.ScalarType, value: Any) -> Any:
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value.item()
    if isinstance(value, np.generic):
        value = value.item()
    if ty.is_int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise LaunchError(f"argument '{name}' must be an int ({ty}), got {type(value).__name__}", caller_loc())
        lo, hi = t.INT_RANGE[ty.name]
        if not lo <= value <= hi:
            raise LaunchError(f"argument '{name}' = {value} does not fit in {ty}", caller_loc())
        return ty.np_dtype.type(value)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise LaunchError(f"argument '{name}' must be a number ({ty}), got {type(value).__name__}", caller_loc())
    if ty.is_half:  # rounded once from the Python float to the half type, then passed exactly as f32
        return np.float32(const_array(float(value), ty).astype(np.float32))
    return np.float64(value) if ty == t.f64 else np.float32(value)
