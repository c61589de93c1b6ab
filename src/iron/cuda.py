"""CUDA-specific helpers: ``iron.cuda.graph()`` captures launches into a CUDA graph, ``synchronize()``.

    with iron.cuda.graph() as g:        # launches inside are recorded, not run (device arrays only)
        for _ in range(100):
            k[n](x, y)
    g.launch()                          # replays all of them with one call

Device memory allocated while recording (``iron.empty`` inside the block, and the workspaces launch helpers such as
``std.reductions.launch_argmax`` make) is allocated at once, outside the capture, and lives as long as the graph:
its launches read and write it at every replay.
"""

from __future__ import annotations

from .runtime import get_backend
from .runtime.cuda_graph import Graph


def graph() -> Graph:
    """Capture the CUDA launches made inside the ``with`` block into a graph."""
    return Graph()


def synchronize() -> None:
    """Wait for all work Iron queued on its CUDA stream."""
    get_backend("cuda").synchronize()
