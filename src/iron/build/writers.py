"""One writer per backend: a compiled variant -> the artifact's bytes plus that backend's launch facts.

A backend is one entry in ``WRITERS``; the ``.metal`` and ``.hip`` writers join the table when their emitters land.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..frontend.kernel import Variant


@dataclass(frozen=True)
class Emitted:
    """What a writer produces for one variant.

    ``details`` is merged into the artifact's manifest record; ``arg_details`` (Iron parameter name -> fields) into
    that argument's record (e.g. its descriptor binding).
    """

    suffix: str
    data: bytes
    entry: str
    shared_static: int
    shared_dynamic: int
    details: dict[str, Any] = field(default_factory=dict)
    arg_details: dict[str, dict[str, Any]] = field(default_factory=dict)


def write_cuda(variant: Variant) -> Emitted:
    from ..codegen import emit_cuda

    src = emit_cuda(variant.kernel)
    params = [{"name": p.name, "kind": p.kind, "ctype": p.ctype, "dtype": str(p.dtype), "source": p.source,
               **({"axis": p.axis} if p.kind == "grid" else {})} for p in src.params]
    vector = None if src.vector is None else {"entry": src.vector.entry, "width": src.vector.width,
                                              "buffers": list(src.vector.buffers)}
    # shared_bytes counts the dynamic buffer too when the arrays were moved there
    static = max(src.shared_bytes - src.dynamic_shared_bytes, 0)
    return Emitted(".cu", src.source.encode(), src.entry, static, src.dynamic_shared_bytes,
                   {"cuda": {"params": params, "vector": vector}})


def write_spirv(variant: Variant) -> Emitted:
    from ..codegen.spirv import emit_spirv

    spk = emit_spirv(variant.kernel)
    push = [{"name": p.name, "offset": p.offset, "dtype": str(p.dtype)} for p in spk.push]
    arg_details: dict[str, dict[str, Any]] = {b.param: {"binding": b.binding} for b in spk.buffers}
    arg_details.update({p.name: {"offset": p.offset} for p in spk.push})
    details = {"vulkan": {"descriptor_set": 0, "push": push, "push_size": spk.push_size,
                          "group_size_spec_ids": list(spk.local_size_spec_ids),
                          "features": sorted(spk.features)}}
    return Emitted(".spv", spk.words, spk.entry, spk.shared_bytes, 0, details, arg_details)


#: backend name (as ``iron device`` and ``backend=`` spell it) -> writer
WRITERS: dict[str, Callable[[Variant], Emitted]] = {
    "cuda": write_cuda,
    "vulkan": write_spirv,
}

#: backends whose emitter is still to come, with the artifact they will write
PLANNED: dict[str, str] = {"metal": ".metal", "hip": ".hip"}
