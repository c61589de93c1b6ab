"""Ahead-of-time builds (``iron build``): per kernel variant a ``.cu`` and a ``.spv``, plus ``manifest.json`` /
``manifest.txt`` describing how a host that is not Python launches each one."""

from __future__ import annotations

from .manifest import MANIFEST_FORMAT, buffer_access, build, check_backends, manifest_text, source_hash
from .targets import BuildTarget, kernels_of, std_targets, target_for
from .writers import PLANNED, WRITERS, Emitted, write_cuda, write_spirv

__all__ = ["MANIFEST_FORMAT", "PLANNED", "WRITERS", "BuildTarget", "Emitted", "buffer_access", "build",
           "check_backends", "kernels_of", "manifest_text", "source_hash", "std_targets", "target_for", "write_cuda",
           "write_spirv"]
