"""``iron build``'s view of the backends: which write artifacts, which take ``--target``, the one call that writes,
and each writer's lines in ``manifest.txt``.

The writers themselves are the backends' ``artifacts`` methods (:mod:`iron.runtime.artifacts`); a backend joins
``iron build`` by setting ``writes_artifacts`` (and ``build_targets`` when it compiles per ``--target``), and adds a
row to ``MANIFEST_LINES`` for the facts its writer puts under its own key of the manifest record.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..ir.variant import Variant
from ..runtime import BACKENDS, backend_class, get_backend
from ..runtime.artifacts import Emitted, write_cuda, write_hip, write_metal, write_spirv

__all__ = ["MANIFEST_LINES", "PLANNED", "TARGETED", "WRITERS", "Emitted", "emit_artifacts", "write_cuda", "write_hip",
           "write_metal", "write_spirv"]

#: backend name (as ``iron device`` and ``backend=`` spell it) -> its one-line description, for backends that build
WRITERS: dict[str, str] = {name: row[2] for name, row in BACKENDS.items() if backend_class(name).writes_artifacts}

#: backends whose artifacts take the ``--target`` list, with what a target names there
TARGETED: dict[str, str] = {name: backend_class(name).build_targets for name in WRITERS
                            if backend_class(name).build_targets}

#: backends whose emitter is still to come, with the artifact they will write
PLANNED: dict[str, str] = {}


def emit_artifacts(backend: str, variant: Variant, targets: Sequence[str] = (), metallib: bool = False
                   ) -> list[Emitted]:
    """Every artifact ``backend`` writes for ``variant`` (``targets``: the build's ``--target`` list; ``metallib``:
    also compile the Metal library)."""
    return get_backend(backend).artifacts(variant, tuple(targets) if backend in TARGETED else (), metallib)


def _c_params(facts: dict[str, Any]) -> list[str]:
    # param NAME KIND DTYPE, in the emitted kernel's parameter order (what a C-family host passes, in order)
    return [f"param {p['name']} {p['kind']} {p['dtype']}" for p in facts["params"]]


def _vector(facts: dict[str, Any]) -> list[str]:
    vector = facts["vector"]
    return [] if vector is None else [f"vector {vector['entry']} {vector['width']}"]


def vulkan_lines(facts: dict[str, Any]) -> list[str]:
    """write_spirv's facts: the push-constant block, the group-size specialisation ids, the device features."""
    return [f"push_size {facts['push_size']}",
            *(f"push {p['name']} {p['offset']} {p['dtype']}" for p in facts["push"]),
            "spec_ids " + " ".join(map(str, facts["group_size_spec_ids"])),
            *(f"feature {f}" for f in facts["features"])]


def cuda_lines(facts: dict[str, Any]) -> list[str]:
    """write_cuda's facts: the kernel's parameters and its vectorised entry, if any."""
    return _c_params(facts) + _vector(facts)


def hip_lines(facts: dict[str, Any]) -> list[str]:
    """write_hip's facts: the wavefront size, the AMD target (code object) or targets (source), then as CUDA's."""
    lines = [f"wavefront {facts['wavefront']}"]
    if "target" in facts:
        lines.append(f"target {facts['target']}")
    if facts.get("targets"):
        lines.append("targets " + " ".join(facts["targets"]))
    return lines + _c_params(facts) + _vector(facts)


def metal_lines(facts: dict[str, Any]) -> list[str]:
    """write_metal's facts: param i sits at [[buffer(i)]]; ``threadgroup INDEX NAME LENGTH`` is what the host passes to
    setThreadgroupMemoryLength; then the dispatch call."""
    return [*_c_params(facts), *(f"threadgroup {g['index']} {g['name']} {g['length']}" for g in facts["threadgroup"]),
            f"dispatch {facts['dispatch']}"]


#: a writer's key in the manifest record (``Emitted.details``) -> its lines in manifest.txt, after the common ones
MANIFEST_LINES: dict[str, Callable[[dict[str, Any]], list[str]]] = {
    "vulkan": vulkan_lines, "cuda": cuda_lines, "hip": hip_lines, "metal": metal_lines}
