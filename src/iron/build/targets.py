"""What ``iron build`` compiles: kernels with their constexpr values, expanded into one variant per dtype."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from ..errors import IronError
from ..frontend.kernel import KernelFunction
from ..harness.registry import library_modules
from ..ir import types as t


@dataclass(frozen=True)
class BuildTarget:
    """One kernel to build, with a value for each of its constexpr parameters (in parameter order)."""

    kernel: KernelFunction
    constexprs: tuple[tuple[str, Any], ...] = ()

    @property
    def name(self) -> str:
        return self.kernel.__name__

    def dtypes(self, wanted: Iterable[str] | None) -> list[t.ScalarType | None]:
        """The variants to build: each dtype of a ``Tensor[T]`` kernel (narrowed to ``wanted``), else just None."""
        if not self.kernel.generic:
            return [None]
        if wanted is None:
            return list(self.kernel.dtypes)
        names = set(wanted)
        return [dt for dt in self.kernel.dtypes if str(dt) in names]


def target_for(kernel: KernelFunction, defines: Mapping[str, Any] | None = None) -> BuildTarget:
    """``kernel`` with its constexprs taken from ``defines`` (``-D NAME=VALUE``), else from the module global of the
    same name (std kernels keep e.g. ``BLOCK = 256`` beside the kernel)."""
    defines = defines or {}
    module_globals = kernel.fn.__globals__
    values, missing = [], []
    for name in kernel.constexpr_names:
        if name in defines:
            values.append((name, defines[name]))
        elif isinstance(module_globals.get(name), (bool, int, float)):
            values.append((name, module_globals[name]))
        else:
            missing.append(name)
    if missing:
        raise IronError(f"{kernel.__name__}: no value for constexpr {', '.join(missing)}; pass "
                        + " ".join(f"-D {n}=VALUE" for n in missing))
    return BuildTarget(kernel, tuple(values))


def kernels_of(module: ModuleType) -> list[KernelFunction]:
    """The kernels defined in ``module`` (not those it imports from elsewhere), in definition order."""
    return [v for v in vars(module).values()
            if isinstance(v, KernelFunction) and v.fn.__module__ == module.__name__]


def std_targets() -> list[BuildTarget]:
    """Every kernel of the standard library (the harness's kernel libraries), with its module's constexpr defaults, in
    module-name order."""
    return [target_for(k) for module in library_modules() for k in kernels_of(module)]
