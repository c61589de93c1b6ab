"""``iron build``'s view of the backends: which write artifacts, which take ``--target``, and the one call that writes.

The writers themselves are the backends' ``artifacts`` methods (:mod:`iron.runtime.artifacts`); a backend joins
``iron build`` by setting ``writes_artifacts`` (and ``build_targets`` when it compiles per ``--target``).
"""

from __future__ import annotations

from collections.abc import Sequence

from ..ir.variant import Variant
from ..runtime import BACKENDS, backend_class, get_backend
from ..runtime.artifacts import Emitted, write_cuda, write_hip, write_metal, write_spirv

__all__ = ["PLANNED", "TARGETED", "WRITERS", "Emitted", "emit_artifacts", "write_cuda", "write_hip", "write_metal",
           "write_spirv"]

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
