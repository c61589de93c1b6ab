"""The Vulkan pipeline cache on disk: ``<iron cache>/vulkan/<pipelineCacheUUID>-<driverVersion>.bin``, read when a
context opens and written (atomic replace) when it closes, so the next process skips the driver's shader compile."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from .cache import cache_dir


def pipeline_cache_path(props: Any) -> Path | None:
    """Where the device's cache lives; None when caching is off (``IRON_CACHE=0``)."""
    if os.environ.get("IRON_CACHE", "1") == "0":
        return None
    uuid = bytes(props.pipelineCacheUUID).hex()
    return cache_dir() / "vulkan" / f"{uuid}-{props.driverVersion:x}.bin"


def read_pipeline_cache(props: Any) -> bytes:
    path = pipeline_cache_path(props)
    try:
        return path.read_bytes() if path is not None else b""
    except OSError:
        return b""


def write_pipeline_cache(ctx: Any) -> None:
    """Save ``ctx``'s VkPipelineCache (a VulkanContext with programs built); a read-only or full disk only costs a
    recompile next time, and leaves no ``.tmp-`` file behind."""
    path = pipeline_cache_path(ctx.props)
    if path is None or not ctx.programs:
        return
    lib, ffi = ctx.vk.lib, ctx.ffi
    size = ffi.new("size_t*")
    if lib.vkGetPipelineCacheData(ctx.device, ctx.pipeline_cache, size, ffi.NULL) != 0 or not size[0]:
        return
    data = ffi.new("char[]", size[0])
    if lib.vkGetPipelineCacheData(ctx.device, ctx.pipeline_cache, size, data) != 0:
        return
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        with os.fdopen(fd, "wb") as f:
            f.write(ffi.buffer(data, size[0]))
        os.replace(tmp, path)
    except OSError:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass
