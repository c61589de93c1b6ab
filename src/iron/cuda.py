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


class Graph:
    """A captured sequence of CUDA launches (on Iron's stream); ``launch()`` replays it."""

    def __init__(self) -> None:
        self._builder = None
        self._graph = None
        self._keep: list = []  # device memory allocated while capturing (helpers' workspaces), kept for replays

    def __enter__(self) -> Graph:
        be = get_backend("cuda")
        be.device()
        if be.capture is not None:
            raise RuntimeError("iron.cuda.graph() cannot be nested")
        self._builder = be.stream.create_graph_builder()
        self._builder.begin_building()
        be.capture = self._builder
        be.capture_keep = self._keep
        return self

    def __exit__(self, *exc) -> None:
        be = get_backend("cuda")
        be.capture = None
        be.capture_keep = []
        self._builder.end_building()
        if exc[0] is None:
            self._graph = self._builder.complete()

    def launch(self) -> None:
        """Replay the captured launches on Iron's stream (asynchronous; ``synchronize()`` waits)."""
        if self._graph is None:
            raise RuntimeError("the graph has not been captured")
        be = get_backend("cuda")
        self._graph.launch(be.stream)


def graph() -> Graph:
    """Capture the CUDA launches made inside the ``with`` block into a graph."""
    return Graph()


def synchronize() -> None:
    """Wait for all work Iron queued on its CUDA stream."""
    get_backend("cuda").synchronize()
