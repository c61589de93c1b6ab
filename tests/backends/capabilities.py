"""What each backend is, as data: one row per backend the suite runs on or compiles for.

Tests are written once and ask the row (``caps(backend).fma_fused``, ``caps(backend).folds_signed_zero``), never
``if backend == ...``: adding a backend adds a row here, not a branch in every test body.

Two tables:

- ``RUN_ROWS``: backends that launch kernels (the ``backend`` fixture in tests/conftest.py picks from them):
  the dtypes they run, the SIMD widths kernels see, the precision their own specification allows beyond the
  interpreter's, and what their device reports (64-bit floats, denormals, shared memory). Device facts are asked
  lazily, only by a test that already runs on that backend.
- ``COMPILE_ROWS`` live in tests/backends/compile_targets.py: toolchains that compile every kernel variant with no
  device (NVRTC, hipRTC, spirv-val, clang against the Metal model).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache

#: every float dtype the conformance suite draws (T-generic kernels run in each)
FLOAT_DTYPES = ("f32", "f16", "bf16")


@dataclass(frozen=True)
class DeviceFacts:
    """What the device behind a backend reports; the defaults are those of a backend with a fixed, full device."""

    #: 64-bit floats (Vulkan's sin/cos of f32 go through double where present; without them only GLSL's
    #: 2^-11 absolute on [-pi, pi] is promised)
    float64: bool = True
    #: f32 subnormal results (and intermediates) are kept; a Vulkan device without DenormPreserve may flush them
    denorm_preserve: bool = True
    #: the driver folds x + 0.0 to x and x * 0.0 to 0.0 (for inf and NaN too) although the module declares
    #: SignedZeroInfNanPreserve: Mesa 22.3's llvmpipe (lavapipe) does
    folds_signed_zero: bool = False
    #: shared memory one group may use, in bytes (None: as much as the language allows)
    max_shared_bytes: int | None = None


@dataclass(frozen=True)
class RunRow:
    """A backend that launches kernels, and what the suite may expect of it."""

    name: str
    dtypes: tuple[str, ...] = FLOAT_DTYPES
    #: SIMD widths the suite runs it at: the interpreter's is set per test (``simd_env``); a device's is its own
    #: (``None``: asked of the device, e.g. a Vulkan subgroup: 8 on lavapipe, 32 on NVIDIA)
    simd_widths: tuple[int, ...] | None = None
    #: environment variable that sets the SIMD width, for a backend that runs at several
    simd_env: str | None = None
    #: GLSL.std.450 Fma need not be fused: False allows one extra f32 rounding of the product
    fma_fused: bool = True
    #: unary functions whose specification allows more than the interpreter's 8 ulp, and that extra error
    #: (``loose_math_err`` absolute plus as much relative). Vulkan: log/log2 are 3 ulp outside [0.5, 2] and 2^-21
    #: absolute inside it (exp, exp2, tanh, sigmoid and silu are Iron's own sequences: codegen/spirv/precise_exp.py)
    loose_math: frozenset[str] = frozenset()
    loose_math_err: float = 0.0
    #: exp and pow carry GLSL.std.450's bounds: Exp (3 + 2|x|) ulp, Pow only exp2(y * log2(x))'s error
    glsl_exp_pow: bool = False
    #: gelu and silu are computed from their formulas in f32 (x/2 * (1 + erf(x / sqrt 2)), as torch does), not
    #: rounded once from float64 as the interpreter does: 1 + erf cancels for x below about -3
    composite_math_in_f32: bool = True
    #: shared memory the target language allows one group, in bytes: a kernel over it is refused at compile time,
    #: with the reason (Metal gives a threadgroup 32 KiB); None: the device decides (``DeviceFacts.max_shared_bytes``)
    shared_bytes_limit: int | None = None
    #: the language has a 64-bit float (``iron.f64``); Metal's has none, so its emitter refuses f64 kernels, located
    f64: bool = True
    #: atomic_add on i64/u64 buffers and shared arrays; Metal has no 64-bit atomic add (refused, located)
    atomic64: bool = True
    #: the device's own report, asked once the backend is known to run here
    device: Callable[[], DeviceFacts] = field(default=DeviceFacts, repr=False)

    def unavailable_reason(self) -> str | None:
        """None when this backend can launch kernels here, else why not (the runtime's own probe)."""
        from iron.runtime import unavailable_reason

        return unavailable_reason(self.name)

    def simd_width(self) -> int:
        """The SIMD width kernels see on this backend now: its one width, else the device's (or the set one)."""
        if self.simd_widths is not None and len(self.simd_widths) == 1:
            return self.simd_widths[0]
        from iron.runtime import get_backend

        return get_backend(self.name).simd_width()


def _vulkan_device() -> DeviceFacts:
    from iron.runtime import get_backend

    vk = get_backend("vulkan")
    has, info = vk.context().has, vk.info()
    return DeviceFacts(
        float64=bool(has.get("float64")),
        denorm_preserve=bool(has.get("denorm_preserve")),
        folds_signed_zero="llvmpipe" in str(info.get("name", "")),
        max_shared_bytes=info.get("max_shared_bytes") or 0,
    )


#: 2^-21 absolute plus 2^-21 relative: the Vulkan spec's log/log2 bound ("Precision and Operation of SPIR-V
#: Instructions"), for the functions in ``loose_math``
VULKAN_MATH_ERR = 2**-21

RUN_ROWS: dict[str, RunRow] = {
    row.name: row
    for row in (
        # the interpreter: the reference semantics; math rounded once from float64
        RunRow("cpu", simd_widths=(8, 32, 64), simd_env="IRON_CPU_SIMD_WIDTH", composite_math_in_f32=False,
               shared_bytes_limit=48 * 1024),
        RunRow(
            "vulkan",
            fma_fused=False,
            loose_math=frozenset({"log", "log2"}),
            loose_math_err=VULKAN_MATH_ERR,
            glsl_exp_pow=True,
            device=_vulkan_device,
        ),
        # Metal's language, compiled by clang for the CPU against the project's model of Metal
        RunRow("msl-cpu", shared_bytes_limit=32 * 1024, f64=False, atomic64=False),
        RunRow("cuda", simd_widths=(32,)),
        # Iron's HIP source at wavefront 32 on NVIDIA GPUs, behind the compatibility header
        RunRow("hip-on-cuda", simd_widths=(32,)),
        # AMD GPUs: the wavefront of the target (64 on CDNA, 32 on RDNA); not verified on AMD hardware
        RunRow("hip"),
        # Apple GPUs: the same MSL as msl-cpu; not verified on Apple hardware
        RunRow("metal", shared_bytes_limit=32 * 1024, f64=False, atomic64=False),
    )
}


class Caps:
    """A row and its device's facts as one set of attributes (``caps("vulkan").float64``)."""

    def __init__(self, row: RunRow) -> None:
        self.row = row
        self._device: DeviceFacts | None = None

    def __getattr__(self, name: str):
        row = self.__dict__["row"]
        if hasattr(row, name):
            return getattr(row, name)
        if name in DeviceFacts.__dataclass_fields__:
            if self.__dict__["_device"] is None:
                self._device = row.device()
            return getattr(self._device, name)
        raise AttributeError(f"backend capabilities have no {name!r}")


@cache
def caps(backend: str) -> Caps:
    """The capability row of ``backend``; a backend without a row is a mistake in the test set-up, not a skip."""
    if backend not in RUN_ROWS:
        raise KeyError(f"no capability row for backend {backend!r}: add one to tests/backends/capabilities.py")
    return Caps(RUN_ROWS[backend])
