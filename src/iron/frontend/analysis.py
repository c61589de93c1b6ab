"""Facts about a compiled variant that launches check (moved to :mod:`iron.ir.variant`, re-exported here)."""

from __future__ import annotations

from ..ir.variant import COLLECTIVE_OPS, SizeCheck, launch_facts

__all__ = ["COLLECTIVE_OPS", "SizeCheck", "launch_facts"]
