"""Runs passes in order, verifying after each and optionally keeping a printed snapshot after each.

A pass is any object with a ``name`` and ``run(kernel) -> bool`` (mutates in place, returns whether it changed
anything). ``Fixpoint`` groups passes that feed each other (folding exposes simplifications, simplification exposes
common subexpressions, ...) and reruns them until none changes anything, with a cap so a pass pair that undoes each
other's work cannot loop forever.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from ..ir.core import Kernel
from ..ir.printer import print_kernel
from ..ir.verifier import VerifyError, verify


class Pass(Protocol):
    name: str

    def run(self, kernel: Kernel) -> bool: ...


class Fixpoint:
    """Rerun ``passes`` in order until a whole round changes nothing, at most ``cap`` rounds.

    The manager expands it, so each inner pass is verified and snapshotted under its own name: every inner pass
    appears in the first round; later rounds record only the passes that changed something.
    """

    def __init__(self, passes: Sequence[Pass], cap: int = 8):
        self.passes = list(passes)
        self.cap = cap
        self.name = "fixpoint(" + ",".join(p.name for p in self.passes) + ")"

    def run(self, kernel: Kernel) -> bool:
        return PassManager([self], verify=False).run_changed(kernel)


class PassManager:
    """Run ``passes`` over a kernel in place; ``verify`` checks the IR after each, ``record`` keeps snapshots.

    ``snapshots`` is ``[("frontend", text), (pass_name, text), ...]``: the printed kernel before any pass, then
    after each pass in the order they ran.
    """

    def __init__(self, passes: Sequence[Pass], verify: bool = True, record: bool = False):
        self.passes = list(passes)
        self.verify = verify
        self.record = record
        self.snapshots: list[tuple[str, str]] = []

    def run(self, kernel: Kernel) -> Kernel:
        """Optimise ``kernel`` in place and return it."""
        self.run_changed(kernel)
        return kernel

    def run_changed(self, kernel: Kernel) -> bool:
        """Like ``run`` but returns whether any pass changed the kernel."""
        self.snapshots = []
        if self.verify:
            try:
                verify(kernel)
            except VerifyError as e:
                raise VerifyError(f"before any pass: {e}") from e
        if self.record:
            self.snapshots.append(("frontend", print_kernel(kernel)))
        changed = False
        for p in self.passes:
            changed |= self._run_one(p, kernel, always_record=True)
        return changed

    def _run_one(self, p: Pass, kernel: Kernel, always_record: bool) -> bool:
        if isinstance(p, Fixpoint):
            return self._run_fixpoint(p, kernel)
        changed = bool(p.run(kernel))
        if self.verify:
            try:
                verify(kernel)
            except VerifyError as e:
                raise VerifyError(f"after pass {p.name}: {e}") from e
        if self.record and (changed or always_record):
            self.snapshots.append((p.name, print_kernel(kernel)))
        return changed

    def _run_fixpoint(self, group: Fixpoint, kernel: Kernel) -> bool:
        changed = False
        for round_ in range(max(1, group.cap)):
            round_changed = False
            for p in group.passes:
                round_changed |= self._run_one(p, kernel, always_record=round_ == 0)
            changed |= round_changed
            if not round_changed:
                break
        return changed


def default_pipeline() -> list[Pass]:
    """unroll, then fold + simplify + cse to a fixpoint, then dce."""
    from .cse import CSE
    from .dce import DCE
    from .fold import Fold
    from .simplify import Simplify
    from .unroll import Unroll

    return [Unroll(), Fixpoint([Fold(), Simplify(), CSE()]), DCE()]


def run_pipeline(kernel: Kernel, record: bool = False) -> tuple[Kernel, list[tuple[str, str]]]:
    """Run ``default_pipeline()`` in place with verification; returns the kernel and the snapshots (empty unless
    ``record``)."""
    pm = PassManager(default_pipeline(), verify=True, record=record)
    pm.run(kernel)
    return kernel, pm.snapshots
