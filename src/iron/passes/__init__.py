"""IR-to-IR optimisation passes and the manager that runs them (verifying, and optionally dumping, after each)."""

from __future__ import annotations

from .cse import CSE
from .dce import DCE
from .fold import Fold
from .manager import Fixpoint, Pass, PassManager, default_pipeline, run_pipeline
from .simplify import Simplify
from .unroll import Unroll

__all__ = [
    "CSE",
    "DCE",
    "Fixpoint",
    "Fold",
    "Pass",
    "PassManager",
    "Simplify",
    "Unroll",
    "default_pipeline",
    "run_pipeline",
]
