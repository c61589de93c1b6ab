"""The backend contract: what every runtime implements, and what the front-end, ``bench``, ``build`` and the CLI call.

A backend is one module in ``runtime/`` with a ``probe()`` function and a :class:`Backend` subclass, plus a row in
``runtime.BACKENDS``. Callers reach capabilities only through these methods: an optional capability has a default
here that says "absent" (``fast_launcher`` returns None, ``gpu_time`` returns None, ``artifacts`` raises), so no caller
probes a backend with ``getattr`` or patches its methods.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from typing import Any

from ..errors import LaunchError
from ..ir.variant import Variant
from .arrays import HostStore
from .artifacts import Emitted


class Backend:
    """The interface every runtime implements."""

    #: the name ``backend=`` takes
    name = "?"
    #: how :meth:`gpu_time` measures (for bench tables and JSON); None when the backend has no GPU timer
    timer_name: str | None = None
    #: whether ``iron build`` writes artifacts for this backend (:meth:`artifacts`)
    writes_artifacts = False
    #: what a ``--target`` of ``iron build`` names for this backend (e.g. AMD processors); None: it takes none
    build_targets: str | None = None
    #: whether launches take torch CUDA tensors in place, so the bench keeps its inputs on the device and times Iron
    #: beside the torch reference with CUDA events
    torch_device = False
    #: what ``iron device`` adds when the device's own facts do not say how far the backend is verified
    unverified: str | None = None

    # -- the device (availability is the module's ``probe()``: None, or why the backend cannot run here) -------------

    def info(self) -> dict[str, Any]:
        """What ``iron device`` shows for this backend's device (name, driver, limits, features)."""
        return {}

    def describe(self) -> str:
        """One line for ``iron device``: the device and its facts (a failing device query is shown, not raised)."""
        try:
            return "; ".join(f"{k}: {_shown(v)}" for k, v in self.info().items())
        except Exception as e:  # noqa: BLE001
            return f"device query failed: {e}"

    def simd_width(self) -> int:
        """The SIMD-group width kernels see (what ``simd_size()`` returns)."""
        return 32

    # -- compile -----------------------------------------------------------------------------------------------------

    def source(self, variant: Variant, target: str | None = None) -> str:
        """The generated source of a variant (for ``target`` where the backend compiles for several)."""
        raise LaunchError(f"backend '{self.name}' has no generated source")

    def compile(self, variant: Variant, target: str | None = None) -> Any:
        """The variant's binary (through :func:`iron.runtime.cache.cached_binary` where it is one)."""
        raise LaunchError(f"backend '{self.name}' has no binary to compile")

    # -- launch ------------------------------------------------------------------------------------------------------

    def check_array(self, param: str, value: Any, where) -> Any:
        """Validate one buffer argument (type, layout, device); return what ``launch`` takes."""
        raise NotImplementedError

    def launch(self, variant: Variant, arrays: dict[str, Any], scalars: dict[str, Any], grid: tuple[int, int, int],
               group: tuple[int, int, int]) -> None:
        raise NotImplementedError

    def fast_launcher(self, kfn, variant: Variant, args: tuple, bound: dict[str, Any], grid: tuple[int, int, int],
                      group: tuple[int, int, int], min_sizes: dict[str, int]) -> Callable[[tuple], bool] | None:
        """A launcher ``fast(args) -> bool`` for repeat calls shaped like this one (False: not served, take the full
        path), or None when the backend has none."""
        return None

    def direct_launcher(self, fast: Callable[[tuple], bool], fallback: Callable[..., Any]) -> Callable[..., Any] | None:
        """A callable that can stand in for ``k[grid]`` itself (launching calls ``fast`` accepts without entering
        Python, handing any other call to ``fallback``), or None."""
        return None

    def launch_stats(self) -> dict[str, Any] | None:
        """Registers and occupancy of the kernel last launched, where the backend reports them."""
        return None

    def synchronize(self) -> None:
        """Wait for the work this backend queued (a no-op where launches are synchronous)."""

    def graph(self) -> Any:
        """A context manager that records the launches made inside it for replay (``iron.graph``): CUDA graphs,
        Vulkan command buffers. Other backends have none."""
        from ..errors import LaunchError

        raise LaunchError(f"the {self.name} backend cannot record launches for replay (iron.graph): CUDA and Vulkan "
                          "can; launch one by one here")

    # -- device arrays (``iron.asarray``; runtime/device_array.py) ----------------------------------------------------

    def array_store(self, nbytes: int) -> Any:
        """Memory for an ``iron.Array`` of ``nbytes``: an object with ``device``, ``write(offset, u8)`` and
        ``read(offset, nbytes) -> u8``; host memory (``view(offset, nbytes)``) unless the backend has device memory."""
        return HostStore(nbytes)

    def array_device(self) -> int:
        """The device index this backend's arrays live on."""
        return 0

    def is_gpu(self) -> bool:
        """Whether kernels run on a GPU (not the host CPU): ``iron bench`` then uses device shapes and device arrays."""
        return False

    def vendor(self) -> str | None:
        """The GPU's vendor ("nvidia", "amd", "apple", "intel"), where known: a Vulkan device on an NVIDIA GPU is
        benched beside torch on the same GPU."""
        return None

    def copy_gbps(self) -> float | None:
        """The device-to-device copy rate (read + write bytes per second / 1e9) measured through this backend, or
        None where it has no device memory or timer (``iron bench -v``'s ceiling)."""
        return None

    # -- timing ------------------------------------------------------------------------------------------------------

    def gpu_time(self, fn: Callable[[], Any], repeats: int, before: Callable[[], Any] | None = None) -> float | None:
        """Median GPU seconds of ``fn`` (summed over every launch it makes on this backend), measured by the
        backend's own timer after a warm-up, ``before`` run untimed ahead of each repeat; None where the backend has
        no timer or a launch could not be timed."""
        return None

    def recording(self) -> bool:
        """Whether launches are being recorded for replay (``iron.graph``) rather than run: nothing can be timed."""
        return False

    # -- ahead-of-time builds ----------------------------------------------------------------------------------------

    def artifacts(self, variant: Variant, targets: Sequence[str] = (), metallib: bool = False) -> list[Emitted]:
        """What ``iron build`` writes for ``variant``: sources and binaries with their launch facts. ``targets``:
        the build's ``--target`` list (backends with ``build_targets``); ``metallib``: also Apple's library."""
        raise LaunchError(f"iron build writes no artifacts for backend '{self.name}'")

    def check_build_target(self, target: str) -> None:
        """Raise a CompileError when ``target`` cannot be built (backends with ``build_targets``)."""
        raise LaunchError(f"backend '{self.name}' takes no build targets")


class LaunchRecorder:
    """GPU seconds of each launch a backend makes while recording: what :meth:`Backend.gpu_time` sums. A backend
    calls :meth:`record` after every launch it times (None: that launch could not be timed)."""

    def __init__(self) -> None:
        self.samples: list[float | None] | None = None

    def record(self, seconds: float | None) -> None:
        if self.samples is not None:
            self.samples.append(seconds)

    def median(self, fn: Callable[[], Any], repeats: int, before: Callable[[], Any] | None = None) -> float | None:
        """Median over ``repeats`` calls of ``fn`` of the recorded seconds (summed per call), after a warm-up;
        ``before`` runs ahead of each call, untimed."""
        fn()  # warm-up: compiles the variant, builds the pipeline
        samples = []
        try:
            for _ in range(repeats):
                if before is not None:
                    self.samples = None  # its launches are not timed
                    before()
                self.samples = []
                fn()
                if not self.samples or any(s is None for s in self.samples):
                    return None
                samples.append(sum(self.samples))  # type: ignore[arg-type]
        finally:
            self.samples = None
        return statistics.median(samples)


def _shown(value: Any) -> str:
    if isinstance(value, (list, tuple, set, frozenset)):
        return ", ".join(str(v) for v in value)
    return str(value)
