"""``iron inspect --backend vulkan --resources``: what the Vulkan driver made of each variant of a kernel, from
VK_KHR_pipeline_executable_properties (``runtime.vulkan_stats``): per pipeline executable, every statistic the
driver reports (NVIDIA's: registers a thread, shared memory, instruction and binary sizes), for 1-D groups of
``--group`` threads (default 256: pass the group the kernel is launched with). The device must offer the extension;
lavapipe does not, and says so. A variant the device cannot build (a dtype it lacks) gets a line saying why; a
kernel with run-time sized shared arrays cannot be built without its launch's lengths and is refused.
"""

from __future__ import annotations

import os
from typing import Any

from ..errors import LaunchError
from ..frontend.kernel import KernelFunction
from .resources import variant_label

DEFAULT_GROUP = 256


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def render(k: KernelFunction, dtypes: list[Any], constexprs: dict[str, Any], group: int | None) -> str:
    """One table per variant and executable: statistic, value, the driver's description."""
    from ..runtime import get_backend

    before = os.environ.get("IRON_VULKAN_STATS")
    os.environ["IRON_VULKAN_STATS"] = "1"  # before the process's Vulkan context exists (vulkan_stats.wanted)
    try:
        info = get_backend("vulkan").info()  # creates the context, with the extension where the device has it
    finally:
        if before is None:
            os.environ.pop("IRON_VULKAN_STATS", None)
        else:
            os.environ["IRON_VULKAN_STATS"] = before
    threads = group or DEFAULT_GROUP
    lines = []
    for dtype in dtypes:
        label = variant_label(dtype, constexprs)
        try:
            executables = k.pipeline_statistics(threads, dtype=dtype, **constexprs)
        except LaunchError as e:
            if "does not offer" in str(e) or len(dtypes) == 1:
                raise  # the device has no statistics at all, or the one variant asked for cannot be built
            lines.append(f"// {k.__name__} [{label}]: {str(e).splitlines()[0]}")  # this variant only (a dtype)
            continue
        for ex in executables:
            lines.append(f"// pipeline statistics of {k.__name__}{f' [{label}]' if label else ''} on {info['name']} "
                         f"({info['driver']}), groups of {threads}, executable {ex.name!r} (subgroup "
                         f"{ex.subgroup_size}; VK_KHR_pipeline_executable_properties)")
            rows = [(s.name, _value(s.value), s.description) for s in ex.statistics]
            lines += format_rows([("statistic", "value", "description"), *rows])
    return "\n".join(lines)


def format_rows(rows: list[tuple[str, str, str]]) -> list[str]:
    """Aligned lines: the name left, the value right, the description as it is."""
    w0 = max(len(r[0]) for r in rows)
    w1 = max(len(r[1]) for r in rows)
    return [f"{a.ljust(w0)}  {b.rjust(w1)}  {c}".rstrip() for a, b, c in rows]
