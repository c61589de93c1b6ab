"""Ahead-of-time builds (``iron build``): per kernel variant a ``.cu``, a ``.spv``, HIP sources (``_wave64.hip``,
``_wave32.hip``) and, per ``--target``, AMD code objects (``_gfx90a.hsaco``), plus ``manifest.json`` /
``manifest.txt`` describing how a host that is not Python launches each one."""

from __future__ import annotations

from .manifest import MANIFEST_FORMAT, buffer_access, build, check_backends, check_targets, manifest_text, source_hash
from .targets import BuildTarget, kernels_of, std_targets, target_for
from .writers import PLANNED, TARGETED, WRITERS, Emitted, emit_artifacts, write_cuda, write_hip, write_spirv

__all__ = ["MANIFEST_FORMAT", "PLANNED", "TARGETED", "WRITERS", "BuildTarget", "Emitted", "buffer_access", "build",
           "check_backends", "check_targets", "emit_artifacts", "kernels_of", "manifest_text", "source_hash",
           "std_targets", "target_for", "write_cuda", "write_hip", "write_spirv"]
