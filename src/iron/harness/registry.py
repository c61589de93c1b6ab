"""Registration of kernels for ``iron bench`` and ``iron test``.

Two decorators, stackable on the same kernel in either order (each fills its half of one entry, keyed by name)::

    @iron.bench("std/unary/exp", setup=..., launch=..., references={"numpy": ..., "torch": ..., "mlx": "mx.exp"},
                bytes_moved=..., flops=..., device_shapes=[...])
    @iron.test_kernel("std/unary/exp", oracle=..., domain="signed", tolerance={...}, shapes=[...])
    @iron.kernel
    def iron_exp(a: Tensor[T], out: Tensor[T]): ...

``iron bench`` runs the entries that carry bench metadata (it also checks each row against the oracle when there is
one); ``iron test`` runs every entry that has an oracle. ``setup(gen)`` builds the inputs (NumPy arrays, outputs
poisoned with NaN) from an :class:`InputGen`; ``launch(arrays, backend)`` runs Iron on them — the same callback
serves NumPy arrays and, on CUDA, torch tensors on the device, so it reads sizes from ``.shape``, never ``.size``.
"""

from __future__ import annotations

import fnmatch
import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import numpy as np

from . import peers

#: input domains: how ``InputGen.random`` draws values (positive keeps log/sqrt/rsqrt defined; unit is [0, 1))
DOMAINS = ("signed", "positive", "unit")
DTYPES = ("f32", "f16", "bf16")
#: default tolerances (max |err| <= atol + rtol * |oracle|) per dtype, for one-rounding elementwise kernels
DEFAULT_TOLERANCE: dict[str, tuple[float, float]] = {"f32": (1e-6, 1e-5), "f16": (1e-3, 2e-3), "bf16": (1e-2, 1.6e-2)}

Arrays = dict[str, Any]


@dataclass
class InputGen:
    """What ``setup`` gets: the shape and dtype of one row, a generator, and the entry's input domain."""

    shape: tuple[int, ...]
    dtype: np.dtype
    rng: np.random.Generator
    domain: str = "signed"

    def random(self, shape: tuple[int, ...] | None = None, domain: str | None = None, scale: float = 1.0
               ) -> np.ndarray:
        """Random values of ``dtype`` drawn from the domain (the entry's unless given)."""
        shape = self.shape if shape is None else shape
        domain = domain or self.domain
        if domain == "signed":
            x = self.rng.standard_normal(shape)
        elif domain == "positive":
            x = self.rng.uniform(0.125, 4.0, shape)
        elif domain == "unit":
            x = self.rng.uniform(0.0, 1.0, shape)
        else:
            raise ValueError(f"unknown input domain {domain!r}; choose one of {', '.join(DOMAINS)}")
        return (x * scale).astype(self.dtype)

    def poisoned(self, shape: tuple[int, ...] | None = None) -> np.ndarray:
        """An output buffer full of NaN, so an element the kernel never writes fails the oracle check."""
        return np.full(self.shape if shape is None else shape, np.nan, dtype=self.dtype)


@dataclass
class Registration:
    """One kernel as the harness sees it. ``make``/``launch``/``oracle``/``reference`` are what the runner calls."""

    name: str
    kernel: Any = None
    setup: Callable[[InputGen], Arrays] | None = None
    launch: Callable[[Arrays, str], None] | None = None
    output: str = "out"
    oracle: Callable[[Arrays], np.ndarray] | None = None
    domain: str = "signed"
    tolerance: dict[str, tuple[float, float]] = field(default_factory=lambda: dict(DEFAULT_TOLERANCE))
    dtypes: tuple[str, ...] = DTYPES
    #: host shapes (interpreter, lavapipe, ``iron test``) and GPU shapes (large enough that a launch is not overhead)
    shapes: list[tuple[int, ...]] = field(default_factory=list)
    device_shapes: list[tuple[int, ...]] | None = None
    #: backend family -> reference: "numpy", "torch" and "triton" are callables on the arrays or names of peers
    #: (``"softmax"``, ``("gemm", {"trans_b": True})``: see :mod:`iron.harness.peers`); "mlx" is a name (metadata)
    references: dict[str, Any] = field(default_factory=dict)
    bytes_moved: Callable[[tuple[int, ...], int], int] | None = None
    flops: Callable[[tuple[int, ...]], int] | None = None
    benched: bool = False
    #: a row measured by its own function rather than by setup/launch (model rows, iron/model/bench_rows.py):
    #: ``row(backend, dtype, shape, seed, options)`` returns what ``measure.bench_case`` returns
    row: Callable[..., dict] | None = None

    def make(self, shape: tuple[int, ...], dtype: np.dtype, rng: np.random.Generator) -> Arrays:
        if self.setup is None:
            raise ValueError(f"{self.name}: registered without a setup callback")
        return self.setup(InputGen(tuple(shape), np.dtype(dtype), rng, self.domain))

    @property
    def tested(self) -> bool:
        """``iron test`` runs every entry with an oracle."""
        return self.oracle is not None

    @property
    def reference(self) -> Callable[[Arrays], np.ndarray] | None:
        """The host baseline (NumPy), a named peer resolved."""
        spec = self.references.get("numpy")
        return None if spec is None else peers.resolve("numpy", spec)

    @property
    def torch_reference(self) -> Callable[[Arrays], Any] | None:
        """The GPU baseline: the same computation in torch, writing ``arrays["ref_out"]`` (or returning its output);
        None where it has none or torch is missing."""
        spec = self.references.get("torch")
        if spec is None:
            return None
        try:
            return peers.resolve("torch", spec)
        except peers.PeerUnavailable:
            return None

    def device_references(self) -> tuple[dict[str, Callable[[Arrays], Any]], dict[str, str]]:
        """The references that run on a CUDA row's device tensors (torch, triton), resolved, and why each declared
        one that cannot run here (its package is missing) cannot."""
        return peers.device_references(self.references)

    def count_flops(self, shape: tuple[int, ...]) -> int:
        return int(self.flops(shape)) if self.flops else 0

    def count_bytes(self, shape: tuple[int, ...], itemsize: int) -> int:
        return int(self.bytes_moved(shape, itemsize)) if self.bytes_moved else 0


#: every registered entry by name, in registration order
REGISTRY: dict[str, Registration] = {}


def _origin(fn: Any) -> tuple[str, str] | None:
    """Module and name of a kernel, so that re-importing its module (a reload) replaces its entry."""
    inner = getattr(fn, "fn", fn)
    module, qualname = getattr(inner, "__module__", None), getattr(inner, "__qualname__", None)
    return (module, qualname) if module and qualname and "<lambda>" not in qualname else None


def _entry_for(fn: Any, name: str | None, decorator: str) -> Registration:
    """The entry a decorator fills: the one already attached to ``fn`` by the other decorator, else a new one.

    The name may sit on either decorator; an entry made by an unnamed one waits on the function (unregistered) until
    the named one names and registers it.
    """
    entry = getattr(fn, "__iron_registration__", None)
    if entry is not None and entry.name and name is not None and name != entry.name:
        raise ValueError(f"@{decorator}({name!r}) on a kernel already registered as {entry.name!r}")
    if entry is None:
        entry = Registration(name="", kernel=fn)
        fn.__iron_registration__ = entry
    if name is not None and not entry.name:
        if name in REGISTRY and (_origin(fn) is None or _origin(REGISTRY[name].kernel) != _origin(fn)):
            raise ValueError(f"a kernel is already registered as {name!r}")
        entry.name = name
        REGISTRY[name] = entry
    return entry


def _check_domain(domain: str) -> str:
    if domain not in DOMAINS:
        raise ValueError(f"unknown input domain {domain!r}; choose one of {', '.join(DOMAINS)}")
    return domain


def _update(entry: Registration, **values: Any) -> None:
    for key, value in values.items():
        if value is not None:
            setattr(entry, key, value)


def bench(name: str | None = None, *, setup: Callable[[InputGen], Arrays] | None = None,
          launch: Callable[[Arrays, str], None] | None = None, output: str | None = None,
          references: dict[str, Any] | None = None, bytes_moved: Callable[[tuple[int, ...], int], int] | None = None,
          flops: Callable[[tuple[int, ...]], int] | None = None, shapes: list[tuple[int, ...]] | None = None,
          device_shapes: list[tuple[int, ...]] | None = None, dtypes: tuple[str, ...] | None = None,
          domain: str | None = None, oracle: Callable[[Arrays], np.ndarray] | None = None,
          tolerance: dict[str, tuple[float, float]] | None = None, row: Callable[..., dict] | None = None
          ) -> Callable[[Any], Any]:
    """Register a kernel for ``iron bench`` (the decorated object is returned unchanged).

    ``name`` is the filter path (``std/unary/exp``); ``setup(gen)`` returns the arrays; ``launch(arrays, backend)``
    runs Iron; ``references`` maps ``numpy``/``torch``/``triton`` to callables or peer names (``"softmax"``,
    ``("gemm", {"trans_b": True})``, :mod:`iron.harness.peers`) and ``mlx`` to a name; ``bytes_moved(shape,
    itemsize)`` and ``flops(shape)`` feed GB/s, GFLOP/s and the roofline; ``shapes`` are host shapes,
    ``device_shapes`` GPU shapes. The test fields (``oracle``, ``tolerance``, ``domain``) may be given here or with
    :func:`test_kernel`. ``row``: a function that measures the whole row itself (see :class:`Registration`).
    """

    if domain is not None:
        _check_domain(domain)

    def register(fn: Any) -> Any:
        entry = _entry_for(fn, name, "bench")
        _update(entry, setup=setup, launch=launch, output=output, bytes_moved=bytes_moved, flops=flops, row=row,
                shapes=[tuple(s) for s in shapes] if shapes is not None else None,
                device_shapes=[tuple(s) for s in device_shapes] if device_shapes is not None else None,
                dtypes=tuple(dtypes) if dtypes is not None else None,
                domain=_check_domain(domain) if domain is not None else None, oracle=oracle)
        if references:
            for family, spec in references.items():
                peers.check_spec(family, spec)
            entry.references.update(references)
        if tolerance:
            entry.tolerance.update(tolerance)
        entry.benched = True
        return fn

    return register


def test_kernel(name: str | None = None, *, oracle: Callable[[Arrays], np.ndarray] | None = None,
                tolerance: dict[str, tuple[float, float]] | None = None, domain: str | None = None,
                shapes: list[tuple[int, ...]] | None = None, dtypes: tuple[str, ...] | None = None,
                setup: Callable[[InputGen], Arrays] | None = None,
                launch: Callable[[Arrays, str], None] | None = None, output: str | None = None
                ) -> Callable[[Any], Any]:
    """Register a kernel for ``iron test``: its NumPy float64 ``oracle(arrays)``, the ``tolerance`` per dtype
    (``{"f16": (atol, rtol)}``, merged over the defaults), the input ``domain`` (signed, positive, unit) and the
    host ``shapes``. ``setup``/``launch`` may be given here or with :func:`bench`."""

    if domain is not None:
        _check_domain(domain)

    def register(fn: Any) -> Any:
        entry = _entry_for(fn, name, "test_kernel")
        _update(entry, oracle=oracle, setup=setup, launch=launch, output=output,
                shapes=[tuple(s) for s in shapes] if shapes is not None else None,
                dtypes=tuple(dtypes) if dtypes is not None else None,
                domain=_check_domain(domain) if domain is not None else None)
        if tolerance:
            entry.tolerance.update(tolerance)
        return fn

    return register


test_kernel.__test__ = False  # pytest: not a test, despite the name


def unregister(name: str) -> None:
    """Remove an entry (tests register throwaway kernels)."""
    entry = REGISTRY.pop(name, None)
    if entry is not None and getattr(entry.kernel, "__iron_registration__", None) is entry:
        del entry.kernel.__iron_registration__


def matches(name: str, pattern: str | None) -> bool:
    """``--filter``: a glob (``std/*/exp``) when it has wildcards, else a substring of the name."""
    if not pattern:
        return True
    if any(c in pattern for c in "*?["):
        return fnmatch.fnmatchcase(name, pattern)
    return pattern in name


#: packages each of whose modules registers its kernels when imported: the std library (above this layer: named, not
#: imported, here). A library of kernels joins ``iron bench``/``iron test``/``iron build`` by being listed.
KERNEL_LIBRARIES = ["iron.std"]
#: modules that register bench rows only (no kernel of their own to build or test): imported for ``iron bench``
BENCH_ROWS = ["iron.model.bench_rows"]


def library_modules() -> list[ModuleType]:
    """Every module of the ``KERNEL_LIBRARIES``, imported (so their kernels register), in name order per package."""
    modules = []
    for package in KERNEL_LIBRARIES:
        pkg = importlib.import_module(package)
        for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda m: m.name):
            modules.append(importlib.import_module(f"{package}.{info.name}"))
    return modules


def load_all() -> list[Registration]:
    """Every registered entry, after importing the kernel libraries (the std library) so that their kernels
    register."""
    library_modules()
    return list(REGISTRY.values())


def selected(pattern: str | None = None, *, benched: bool = False, tested: bool = False) -> list[Registration]:
    if benched:
        for module in BENCH_ROWS:
            importlib.import_module(module)
    return [e for e in load_all() if matches(e.name, pattern) and (not benched or e.benched)
            and (not tested or e.tested)]
