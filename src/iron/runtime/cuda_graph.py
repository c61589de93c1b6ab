"""CUDA graphs: the launches made inside ``with iron.cuda.graph() as g`` (or ``iron.graph("cuda")``) are captured on
Iron's stream and replayed by ``g.launch()``; memory allocated while capturing lives as long as the graph."""

from __future__ import annotations

from . import get_backend


class Graph:
    """A captured sequence of CUDA launches (on Iron's stream); ``launch()`` replays it."""

    def __init__(self, backend=None) -> None:
        self._backend = backend  # the CUDA backend object (cuda, or hip-on-cuda); default get_backend("cuda")
        self._builder = None
        self._graph = None
        self._keep: list = []  # device memory allocated while capturing (helpers' workspaces), kept for replays

    def __enter__(self) -> Graph:
        be = self._backend or get_backend("cuda")
        be.device()
        if be.capture is not None:
            raise RuntimeError("iron.cuda.graph() cannot be nested")
        self._builder = be.stream.create_graph_builder()
        self._builder.begin_building()
        be.capture = self._builder
        be.capture_keep = self._keep
        return self

    def __exit__(self, *exc) -> None:
        be = self._backend or get_backend("cuda")
        be.capture = None
        be.capture_keep = []
        self._builder.end_building()
        if exc[0] is None:
            self._graph = self._builder.complete()

    def launch(self) -> None:
        """Replay the captured launches on Iron's stream (asynchronous; ``synchronize()`` waits)."""
        if self._graph is None:
            raise RuntimeError("the graph has not been captured")
        be = self._backend or get_backend("cuda")
        self._graph.launch(be.stream)
