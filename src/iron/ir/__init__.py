"""Iron's intermediate representation: typed SSA with structured control flow."""

from __future__ import annotations

from . import types
from .builder import Builder
from .core import Block, Kernel, Loc, Op, Param, Value
from .ops import OPS, OpInfo
from .printer import print_kernel
from .verifier import VerifyError, verify

__all__ = ["Block", "Builder", "Kernel", "Loc", "OPS", "Op", "OpInfo", "Param", "Value", "VerifyError", "print_kernel",
           "types", "verify"]
