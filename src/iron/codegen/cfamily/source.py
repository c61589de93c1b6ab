"""What a C-family emitter hands a launcher: the source and its launch ABI (``KernelSource``), and the vectorised
second entry of elementwise kernels (``VectorEntry``)."""

from __future__ import annotations

from dataclasses import dataclass

from .dialect import CParam


@dataclass(frozen=True)
class VectorEntry:
    """A second entry point in the same source, for elementwise kernels (``vectorize.py``).

    Launch contract: a 1-D grid of ``ceil(n0 / width)`` threads, any group size, the same arguments as the normal
    entry (``iron_n0`` is still the element count ``n0``; ``iron_n1 = iron_n2 = 1``). Each thread handles elements
    ``width * t ... width * t + width - 1``; ``buffers`` (Iron parameter names) move as 16-byte vectors when all of
    them are 16-byte aligned, checked in the kernel (the unaligned case and the tail fall back to scalar accesses).
    """

    entry: str
    width: int
    buffers: tuple[str, ...]


@dataclass(frozen=True)
class KernelSource:
    """Generated source plus what a launcher needs: the entry point, the parameters in order, shared memory."""

    dialect: str
    kernel: str  # the IR kernel's name
    entry: str  # the function to launch (the kernel's name unless that is not a valid identifier)
    source: str
    params: tuple[CParam, ...]
    shared_bytes: int  # group-shared memory the kernel uses (static arrays, or the dynamic buffer below)
    snippets: tuple[str, ...]  # prelude helpers it uses, sorted
    vector: VectorEntry | None = None  # the vectorised entry, for elementwise kernels
    #: bytes of *dynamic* shared memory to pass at launch (0: all shared arrays are static). Set when the kernel's
    #: arrays exceed the dialect's static limit: they are then carved out of one dynamic buffer, which the launcher
    #: sizes (and, on CUDA, opts the kernel in to beyond 48 KiB).
    dynamic_shared_bytes: int = 0
    #: shared arrays passed as parameters (Metal ``[[threadgroup(i)]]``): (name, bytes) for threadgroup index i,
    #: which the host sizes (``setThreadgroupMemoryLength:atIndex:``, rounded up to 16 bytes)
    threadgroup: tuple[tuple[str, int], ...] = ()
    #: parameters the hardware fills in after the kernel's own (Metal attributes): (ctype, name, attribute)
    attributes: tuple[tuple[str, str, str], ...] = ()
    #: the compile target the source requires, where it needs more than the device's plain one (wgmma: "sm_90a")
    arch: str | None = None
    #: shared arrays sized at launch (``shared(dtype, n)``, n a parameter): (array, parameter, element bytes), in the
    #: order they follow the compile-time arrays in the dynamic buffer (each 16-byte aligned) or, on Metal, in the
    #: threadgroup parameters (``threadgroup`` lists them with 0 bytes)
    runtime_shared: tuple[tuple[str, str, int], ...] = ()
    #: the copy engine's descriptors the launcher makes (``cuda_tma.TensorMapSpec``), one per "tmap" parameter
    tensor_maps: tuple = ()
    #: every entry waits for the previous grid first (CUDA programmatic dependent launch, ``emit_cuda(pdl=True)``):
    #: the launcher may then launch it with programmatic stream serialization
    pdl: bool = False

    def threadgroup_bytes(self, scalars) -> list[int]:
        """Each threadgroup parameter's bytes (Metal) for a launch with these scalar values (by parameter name)."""
        runtime = {name: (p, size) for name, p, size in self.runtime_shared}
        return [-(-int(scalars[runtime[name][0]]) * runtime[name][1] // 16) * 16 if name in runtime else size
                for name, size in self.threadgroup]

    def launch_shared_bytes(self, scalars) -> int:
        """The dynamic shared bytes a launch with these scalar values (by parameter name) passes."""
        return self.dynamic_shared_bytes + sum(-(-int(scalars[p]) * size // 16) * 16
                                               for _, p, size in self.runtime_shared)

    def __str__(self) -> str:
        return self.source
