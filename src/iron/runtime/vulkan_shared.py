"""Shared arrays sized at launch on Vulkan (``shared(dtype, n)`` with ``n: int``; issue 15).

Each such array's length is a specialization constant of the module (``SpirvKernel.shared_lengths``), one per length
parameter; a launch takes the parameters' values (``launch_lengths``), the context checks the group's shared bytes
against the device (``check_kernel``) and builds, and caches, one pipeline per group size and lengths
(``spec_constants``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import LaunchError


def length_params(spk) -> dict[str, int]:
    """Length parameter -> its spec id, in spec id order (empty for a module without run-time sized arrays)."""
    return getattr(spk, "length_spec_ids", {})


def launch_lengths(spk, scalars: dict[str, Any]) -> tuple[int, ...]:
    """The values of ``spk``'s length parameters at this launch (``length_params`` order); a LaunchError naming the
    parameter for one below 1."""
    out = []
    for param in length_params(spk):
        if param not in scalars:
            raise LaunchError(f"{spk.entry}: no value for '{param}', the length of a shared array")
        value = scalars[param]
        n = int(value.item() if isinstance(value, np.generic) else value)
        if n < 1:
            raise LaunchError(f"{spk.entry}: {_arrays(spk, param)} sized by '{param}', which is {n}; a shared array "
                              "needs at least one element", hint=f"pass {param} >= 1")
        out.append(n)
    return tuple(out)


def _arrays(spk, param: str) -> str:
    """``shared array 'buf' is`` / ``shared arrays 'a', 'b' are``: the arrays ``param`` sizes, for messages."""
    names = [repr(s.array) if s.array else "(unnamed)" for s in spk.shared_lengths if s.param == param]
    return f"shared array {names[0]} is" if len(names) == 1 else f"shared arrays {', '.join(names)} are"


def run_time_bytes(spk, lengths: tuple[int, ...]) -> int:
    """Bytes of the shared arrays sized at launch, at ``lengths``."""
    value = dict(zip(length_params(spk), lengths))
    return sum(s.nbytes(value[s.param]) for s in getattr(spk, "shared_lengths", ()))


def describe(spk, lengths: tuple[int, ...]) -> str:
    """``n=9000`` per length parameter, for messages."""
    return ", ".join(f"{p}={n}" for p, n in zip(length_params(spk), lengths))


def check_lengths(spk, lengths: tuple[int, ...]) -> None:
    """A LaunchError when a launch path gives a module with run-time sized arrays no lengths (or too many)."""
    params = length_params(spk)
    if len(lengths) != len(params):
        raise LaunchError(f"{spk.entry} sizes shared arrays by {', '.join(params) or 'nothing'} at launch; "
                          f"{len(lengths)} lengths were given")


def spec_constants(spk, group: tuple[int, int, int], lengths: tuple[int, ...]) -> list[tuple[int, int]]:
    """(spec id, u32 value) of every specialization constant of a pipeline: the group size, then the lengths."""
    return list(zip(spk.local_size_spec_ids, group)) + list(zip(length_params(spk).values(), lengths))
