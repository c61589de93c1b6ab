"""Device buffers that start off a 16-byte boundary, on CUDA (and hip-on-cuda, which launches through it).

docs/dsl.md promises kernels that every buffer starts 16-byte aligned, and ``vload``/``vstore`` compile to 16-byte
accesses, which fault on a misaligned address (CUDA_ERROR_MISALIGNED_ADDRESS, sticky: the context is lost). A view
of an iron Array or a torch tensor can start anywhere (``x[1:]``), and docs/arrays.md says views work on every
backend. So the full launch path runs such an argument through an aligned device copy (stream-ordered: allocated,
filled, and, when the kernel writes it, copied back and freed on the launch's stream, with no wait), as Vulkan does
for views off its binding alignment; the fast launchers decline these calls (``cuda_fast``, ``cuda_launch.c``).
Inside a graph capture the copy cannot be made: the launch is refused, naming the argument.
"""

from __future__ import annotations

from typing import Any

from ..errors import LaunchError

#: where every buffer a kernel sees starts
ALIGN = 16


def misaligned(arrays: dict[str, Any], device_arg: type) -> list[str]:
    """The device arguments (of type ``device_arg``) whose address is off an ALIGN-byte boundary."""
    return [name for name, a in arrays.items() if isinstance(a, device_arg) and a.nbytes and a.ptr % ALIGN]


def stage(names: list[str], arrays: dict[str, Any], device, stream, capturing: bool) -> dict[str, Any]:
    """An aligned copy of each named argument, filled on ``stream``: name -> the copy's buffer."""
    if names and capturing:
        raise LaunchError(f"argument '{names[0]}' starts {arrays[names[0]].ptr % ALIGN} bytes past a 16-byte "
                          "boundary, which a graph capture cannot copy to an aligned buffer", None,
                          "capture a view that starts on a 16-byte boundary, or a contiguous copy of it")
    copies = {}
    for name in names:
        a = arrays[name]
        buf = device.memory_resource.allocate(max(256, a.nbytes), stream=stream)
        copies[name] = buf
        _copy(int(buf.handle), a.ptr, a.nbytes, stream)
    return copies


def unstage(copies: dict[str, Any], arrays: dict[str, Any], written: set[str], stream) -> None:
    """Copy the written ones back into the caller's views, then free every copy (all on ``stream``)."""
    for name, buf in copies.items():
        if name in written:
            _copy(arrays[name].ptr, int(buf.handle), arrays[name].nbytes, stream)
        buf.close(stream)


def _copy(dst: int, src: int, nbytes: int, stream) -> None:
    from cuda.bindings import driver as d

    (err,) = d.cuMemcpyDtoDAsync(dst, src, nbytes, int(stream.handle))
    if err != d.CUresult.CUDA_SUCCESS:
        raise LaunchError(f"copying a misaligned view to an aligned buffer failed ({err.name})")
