"""Shared arrays whose length is a kernel parameter (``shared(dtype, n)`` with ``n: int``): the lengths a launch
gives them, checked the same way on every backend before anything runs or is allocated."""

from __future__ import annotations

from typing import Any

from ..errors import LaunchError


def runtime_arrays(kernel) -> list[Any]:
    """The kernel's ``shared`` ops sized at launch, in program order."""
    return [op for op in kernel.body.walk() if op.opcode == "shared" and op.attrs.get("size") is None]


def static_bytes(kernel) -> int:
    """Bytes of the kernel's compile-time sized shared arrays."""
    return sum(op.attrs["elem"].itemsize * op.attrs["size"] for op in kernel.body.walk()
               if op.opcode == "shared" and op.attrs.get("size") is not None)


def lengths(kernel, scalars: dict[str, Any], limit: int | None = None, where: str = "this backend",
            static: int | None = None) -> list[int]:
    """The length of each run-time sized shared array (``runtime_arrays`` order) from the launch's scalar values:
    a LaunchError (which the launch locates at its call) for a length below 1, or when the group's shared arrays
    together pass ``limit`` bytes."""
    ops = runtime_arrays(kernel)
    out = []
    total = static_bytes(kernel) if static is None else static
    for op in ops:
        name = op.attrs["length"]
        n = int(scalars[name])
        if n < 1:
            raise LaunchError(f"kernel '{kernel.name}': shared array '{op.result.name or '?'}'{_at(op)} is sized "
                              f"by '{name}', which is {n}; a shared array needs at least one element",
                              hint=f"pass {name} >= 1")
        total += n * op.attrs["elem"].itemsize
        out.append(n)
    if limit is not None and ops and total > limit:
        names = ", ".join(f"{op.attrs['length']}={n}" for op, n in zip(ops, out))
        raise LaunchError(f"kernel '{kernel.name}' would use {total} bytes of shared memory with {names}; "
                          f"{where} gives a group at most {limit}",
                          hint="pass smaller lengths (or split the work over more groups)")
    return out


def _at(op) -> str:
    """Where a shared() call is, for a message located at the launch (the convention for LaunchError)."""
    loc = getattr(op, "loc", None)
    return f" (declared at {loc.file.rsplit('/', 1)[-1]}:{loc.line})" if loc is not None else ""
