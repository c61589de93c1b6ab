"""``@iron.kernel`` and ``@iron.func``: the kernel object, its per-variant compile cache, and introspection."""

from __future__ import annotations

import functools
import os
import time
from typing import Any

from ..errors import CompileError, IronError, LaunchError
from ..ir import types as t
from ..ir.printer import print_kernel
from ..ir.variant import Variant, constexpr_key, launch_facts
from ..lang.types import DTypeVar
from ..passes.manager import run_pipeline
from ..runtime import get_backend
from .codegen import FunctionCodegen
from .launch import FULL_PATH, Launcher, cache_key, canonical_key, parse_launch_key
from .optional import Absent
from .reads import GlobalReads
from .refs import IronFunc, KernelMarker, func  # noqa: F401 - IronFunc and func are re-exported
from .signature import ParamSpec, read_signature
from .source import function_source, require_function


def user_facing(method):
    """Re-raise IronErrors without the compiler's frames: the message already points at the user's code."""

    @functools.wraps(method)
    def wrapper(*args, **kwargs):
        try:
            return method(*args, **kwargs)
        except IronError as e:
            if os.environ.get("IRON_DEBUG"):
                raise
            raise e.with_traceback(None) from None

    return wrapper


def parse_dtype(dtype: Any) -> t.ScalarType | None:
    if dtype is None or isinstance(dtype, t.ScalarType):
        return dtype
    if isinstance(dtype, str) and dtype in t.SCALAR_TYPES:
        return t.SCALAR_TYPES[dtype]
    try:
        import numpy as np

        st = t.scalar_type_of_numpy(np.dtype(dtype))
        if st is not None:
            return st
    except TypeError:
        pass
    raise IronError(f"unknown dtype {dtype!r}; use iron.f32, iron.f16, iron.bf16 (or 'f32', 'f16', 'bf16')")


class KernelFunction(KernelMarker):
    """What ``@iron.kernel`` returns. Launch with ``k[grid](*args)`` or ``k[grid, group](*args)``."""

    def __init__(self, fn, native_half: bool = False, launch_bounds: tuple[int, int] | None = None):
        self.fn = fn
        self.native_half = native_half
        self.launch_bounds = launch_bounds  # (most threads per group, groups per multiprocessor wanted) or None
        functools.update_wrapper(self, fn)
        self._src = function_source(fn)
        self.params: list[ParamSpec] = read_signature(fn, self._src)
        var = next((p.dtype for p in self.params if isinstance(p.dtype, DTypeVar)), None)
        self.generic = var is not None
        # the variants: the choices of the kernel's dtype variable (T: f32, f16, bf16; a DTypeVar of its own may
        # restrict them, e.g. to the dtypes matrix fragments take)
        self.dtypes: tuple[t.ScalarType, ...] = tuple(var.choices) if var is not None else ()
        self.constexpr_names = tuple(p.name for p in self.params if p.kind == "constexpr")
        self.optional_names = tuple(p.name for p in self.params if p.optional)  # buffers a launch may pass as None
        self._variants: dict[tuple, Variant] = {}
        self._width_bound: set[tuple] = set()  # variant keys that need simd_size() as a constant (one per width)
        self._launchers: dict[Any, Any] = {}  # launch key -> Launcher, or the compiled launcher wrapping it
        # the globals, closure variables and class attributes the variants baked in, with their values: a change
        # drops every variant and launcher (``refresh``), so each variant compiled later sees the same values
        self.reads = GlobalReads()
        self.generation = 0  # counts those drops: a launcher held across one forgets its fast paths

    def refresh(self) -> int:
        """Forget every variant and launcher when a global, closure variable or class attribute they were compiled
        with has changed value since; returns the generation the current variants belong to."""
        if self.reads.changed():
            self._variants.clear()
            self._width_bound.clear()
            self._launchers.clear()
            self.reads.clear()
            self.generation += 1
        return self.generation

    def __repr__(self) -> str:
        return f"<iron.kernel {self.fn.__qualname__}>"

    # -- variants -----------------------------------------------------------------------------------------------

    def variant(self, dtype: t.ScalarType | None, constexprs: tuple = (), simd_width: Any = None,
                absent: tuple[str, ...] = ()) -> Variant:
        """The compiled variant for ``dtype`` (what T is; None for non-generic kernels), constexpr values (in
        parameter order) and ``absent``, the optional buffers passed as None (in parameter order; the variant's
        kernel has no such parameter). Compiled on first use, then cached.

        ``simd_width`` (an int, or a callable giving it, asked only when needed): the SIMD width the variant will run
        at. A kernel compiles for every width (``simd_size()`` read at run time) unless it needs ``simd_size()`` as
        a constant (a shared array's size, a static_range): then ``simd_size()`` folds to ``simd_width`` and the
        variant is cached under (dtype, constexprs, width), so one kernel run at two widths has two variants. Every
        other variant is the same for all widths, which keeps ``iron build`` and the golden sources width-free."""
        if self.reads.keys:
            self.refresh()
        key = (dtype, tuple(map(constexpr_key, constexprs)), tuple(absent))
        v = self._variants.get(key)
        if v is not None:
            return v
        width = simd_width() if callable(simd_width) else simd_width
        if width is not None and (*key, int(width)) in self._variants:
            return self._variants[(*key, int(width))]
        if key not in self._width_bound or width is None:
            try:
                v = self._variants[key] = self._compile(dtype, constexprs, absent=absent)
                return v
            except CompileError:
                if width is None:
                    raise
                # it may need simd_size() as a constant: compile it for this width (a real error raises again)
        v = self._compile(dtype, constexprs, simd_width=int(width), absent=absent)
        self._width_bound.add(key)
        self._variants[(*key, int(width))] = v
        return v

    def _compile(self, dtype: t.ScalarType | None, constexprs: tuple, record: bool = False,
                 simd_width: int | None = None, absent: tuple[str, ...] = ()) -> Variant:
        start = time.perf_counter()
        self.refresh()  # the values this compile reads join those of the variants compiled before it
        if self.generic and dtype not in self.dtypes:
            raise IronError(f"{self.__name__} is generic over T in {', '.join(map(str, self.dtypes))}, not {dtype}")
        if not set(absent) <= set(self.optional_names):
            raise IronError(f"{self.__name__}: only optional buffers ({', '.join(self.optional_names) or 'none'}) can "
                            f"be absent, not {', '.join(sorted(set(absent) - set(self.optional_names)))}")
        cvals = dict(zip(self.constexpr_names, constexprs))
        params = []
        for p in self.params:
            if p.name in absent:
                params.append((p.name, "absent", Absent(p.name)))
            elif p.kind == "buffer":
                params.append((p.name, "buffer", dtype if isinstance(p.dtype, DTypeVar) else p.dtype))
            elif p.kind == "scalar":
                params.append((p.name, "scalar", p.dtype))
            else:
                params.append((p.name, "constexpr", cvals[p.name]))
        globals_ = {**self.fn.__globals__, "__iron_fn__": self.fn}
        cg = FunctionCodegen(self.fn.__name__, self._src, globals_, self.native_half, dtype)
        cg.simd_width, cg.simd_width_used = simd_width, False
        cg.optional_params = frozenset(self.optional_names)
        kernel = cg.build(params)
        self.reads.update(cg.reads)
        kernel.attrs["constexprs"] = {**cvals, **dict.fromkeys(absent)}  # shown as `bias=None` in IR and sources
        if self.launch_bounds is not None:
            kernel.attrs["launch_bounds"] = self.launch_bounds
        width = simd_width if cg.simd_width_used else None
        if width is not None:
            kernel.attrs["simd_width"] = width  # emitters and runtimes refuse to run it at another width
        reads = cg.simd_width_used
        try:
            kernel, snapshots = run_pipeline(kernel, record=record)
        except CompileError:
            raise
        except Exception as e:  # a pass or the verifier failed: a bug in Iron, reported at the kernel
            err = CompileError(f"internal compiler error in {self.__name__}: {type(e).__name__}: {e}", kernel.loc,
                               "this is a bug in Iron; set IRON_DEBUG=1 for the compiler's traceback")
            if os.environ.get("IRON_DEBUG"):
                raise err from e
            raise err from None
        collectives, checks = launch_facts(kernel)
        ms = (time.perf_counter() - start) * 1e3
        return Variant(kernel, None, snapshots, ms, collectives, checks, simd_width=width, reads_simd_size=reads)

    def _resolve(self, dtype: Any, constexprs: dict[str, Any]) -> tuple[t.ScalarType | None, tuple, tuple]:
        """(dtype, constexpr values, absent optional buffers) for the introspection methods: ``bias=None`` among the
        keywords asks for the variant without the optional buffer ``bias`` (the default is the one with it)."""
        constexprs = dict(constexprs)
        absent = [n for n in self.optional_names if n in constexprs]
        for n in absent:
            if constexprs.pop(n) is not None:
                raise IronError(f"{self.__name__}: {n}= names an optional buffer; pass {n}=None for the variant "
                                f"without it, or leave it out for the variant with it")
        dt = parse_dtype(dtype)
        if self.generic and dt is None:
            dt = t.f32
        if not self.generic and dt is not None:
            raise IronError(f"{self.__name__} has no dtype variants (no Tensor[T] parameter); drop dtype=")
        missing = [n for n in self.constexpr_names if n not in constexprs]
        extra = [n for n in constexprs if n not in self.constexpr_names]
        if missing or extra:
            raise IronError(f"{self.__name__}: give constexpr values for {', '.join(self.constexpr_names) or 'none'}"
                            + (f"; unknown {', '.join(extra)}" if extra else ""))
        return dt, tuple(constexprs[n] for n in self.constexpr_names), tuple(absent)

    # -- introspection ------------------------------------------------------------------------------------------

    @user_facing
    def ir(self, dtype: Any = None, simd_width: int | None = None, **constexprs: Any) -> str:
        """The optimised IR of one variant as text (``dtype`` defaults to f32 for generic kernels); ``simd_width``:
        the width ``simd_size()`` folds to (None: read at run time)."""
        dt, cv, absent = self._resolve(dtype, constexprs)
        return print_kernel(self.variant(dt, cv, simd_width, absent).kernel)

    @user_facing
    def passes(self, dtype: Any = None, simd_width: int | None = None, **constexprs: Any) -> list[tuple[str, str]]:
        """[(stage, IR text)]: the front-end's IR, then the IR after each pass, in order."""
        dt, cv, absent = self._resolve(dtype, constexprs)
        return self._compile(dt, cv, record=True, simd_width=simd_width, absent=absent).snapshots

    @user_facing
    def source(self, backend: str, dtype: Any = None, target: str | None = None, **constexprs: Any) -> str:
        """The generated source for ``backend`` (C-family / SPIR-V disassembly), for the SIMD width it runs at, or
        for ``target`` as ``compile`` takes it (``sm_80``, ``gfx1030``)."""
        dt, cv, absent = self._resolve(dtype, constexprs)
        be = get_backend(backend)
        return be.source(self.variant(dt, cv, lambda: backend_simd_width(be, target), absent), target=target)

    def pipeline_statistics(self, group: int, dtype: Any = None, **constexprs: Any) -> list:
        """Vulkan: the driver's statistics of this variant's pipeline for 1-D groups of ``group`` threads
        (``runtime.vulkan_stats``; ``iron inspect --backend vulkan --resources``)."""
        dt, cv, absent = self._resolve(dtype, constexprs)
        be = get_backend("vulkan")
        return be.pipeline_statistics(self.variant(dt, cv, lambda: backend_simd_width(be, None), absent), group)

    @user_facing
    def compile(self, backend: str, dtype: Any = None, target: str | None = None, **constexprs: Any) -> Any:
        """The backend binary for one variant (cubin, code object, SPIR-V words) where the toolchain allows."""
        dt, cv, absent = self._resolve(dtype, constexprs)
        be = get_backend(backend)
        return be.compile(self.variant(dt, cv, lambda: backend_simd_width(be, target), absent), target=target)

    # -- launch -------------------------------------------------------------------------------------------------

    def __getitem__(self, key: Any):
        # only keys of exactly int (and tuples of them) are looked up as they are: 64.0 or True would find the
        # launcher of k[64] or k[1] (equal, same hash) and skip the checks that refuse them
        if FULL_PATH[0]:
            return Launcher(self, *parse_launch_key(key))
        plain = type(key) is int or cache_key(key)
        launcher = self._launchers.get(key) if plain else None
        if launcher is not None and self.reads.keys and type(launcher) is not Launcher:
            # a backend's direct launcher never enters Python (a Launcher checks when called): check here that the
            # values its variant baked in are current
            self.refresh()
            launcher = self._launchers.get(key)
        if launcher is None:
            grid, group = parse_launch_key(key)
            if not plain:  # valid, with NumPy ints in it: cached as the equal plain-int key
                key = canonical_key(key)
                launcher = self._launchers.get(key)
                if launcher is not None and self.reads.keys and type(launcher) is not Launcher:
                    self.refresh()
                    launcher = self._launchers.get(key)
                if launcher is not None:
                    return launcher
            launcher = Launcher(self, grid, group)
            if len(self._launchers) < 256:
                self._launchers[key] = launcher
                launcher.key = key
        return launcher

    def install_direct_launcher(self, key: Any, launcher: Any, direct: Any) -> None:
        """Serve ``k[key]`` with ``direct`` from now on: a backend's compiled callable that launches calls shaped
        like the last one without entering Python and hands any other call to ``launcher`` (cuda_launch.c). The one
        way a backend's launcher takes the place of ``launcher`` in this kernel's launch cache."""
        current = self._launchers.get(key)
        if current is launcher or getattr(current, "fallback", None) is launcher:
            self._launchers[key] = direct

    def __call__(self, *args, **kwargs):
        raise LaunchError(f"launch {self.__name__} with a grid: {self.__name__}[n_threads](...) or "
                          f"{self.__name__}[grid, group](...)")


def backend_simd_width(be: Any, target: str | None = None) -> int | None:
    """The SIMD width ``be`` runs (or, with ``target``, compiles) at; None where it cannot say here (a Vulkan
    backend without a device): ``simd_size()`` is then read at run time."""
    if target is not None and be.name == "hip":
        from ..codegen.cfamily.hip import wavefront_of

        return wavefront_of(target)
    try:
        return be.simd_width()
    except IronError:
        return None


def kernel(fn=None, *, native_half: bool = False, launch_bounds: int | tuple[int, ...] | None = None):
    """Compile a Python function into a GPU kernel. ``native_half=True`` keeps f16/bf16 arithmetic in half
    precision instead of f32. ``launch_bounds=(T, G)`` (or ``T``): groups have at most T threads (a launch with more
    is a LaunchError on every backend), and the compiler may plan registers for G groups per multiprocessor (CUDA/HIP
    ``__launch_bounds__``, Metal ``max_total_threads_per_threadgroup``; a hint Vulkan has no spelling for). Usable as
    ``@kernel`` or ``@kernel(native_half=True)``."""
    bounds = _launch_bounds(launch_bounds)

    def wrap(f):
        try:
            require_function(f, "@iron.kernel")
            return KernelFunction(f, native_half=native_half, launch_bounds=bounds)
        except CompileError as e:
            raise e.with_traceback(None) from None

    return wrap(fn) if fn is not None else wrap


def _launch_bounds(value) -> tuple[int, int] | None:
    """``launch_bounds`` as (T, G), checked: T threads per group (1..1024), G groups per multiprocessor (>= 1)."""
    if value is None:
        return None
    parts = (value,) if type(value) is int else tuple(value) if isinstance(value, (tuple, list)) else None
    if not parts or len(parts) > 2 or any(type(v) is not int or v < 1 for v in parts) or parts[0] > 1024:
        raise CompileError(f"launch_bounds must be T or (T, G): T threads per group from 1 to 1024, G groups per "
                           f"multiprocessor >= 1; got {value!r}")
    return (parts[0], parts[1] if len(parts) == 2 else 1)
