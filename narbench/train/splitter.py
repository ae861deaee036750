"""The splitter interface: cut a computational graph into (possibly overlapping) subgraphs.

Every splitter returns the same `Partition` type, so any encoder that works on subgraphs (the
paper's `ours`) runs on any splitter. Splitters register under the entry-point group
`narbench.splitters`; `narbench.splitters.none` is the trivial one (the whole graph is one part).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, ClassVar

import numpy as np

from narbench.data.graph import ArchGraph


@dataclass(frozen=True, eq=False)
class Partition:
    """Subgraphs of one graph: node ids of each part and the macro-graph edges between parts.

    `parts[i]` is a sorted int64 array of node ids of the original graph; parts may overlap.
    `macro_edges` is a 2 x M int64 array of part indices (i -> j), one entry per connected pair.
    """

    parts: tuple[np.ndarray, ...]
    macro_edges: np.ndarray

    def __post_init__(self) -> None:
        parts = tuple(np.unique(np.asarray(p, dtype=np.int64)) for p in self.parts)
        edges = np.asarray(self.macro_edges, dtype=np.int64)
        if edges.size == 0:
            edges = edges.reshape(2, 0)
        object.__setattr__(self, "parts", parts)
        object.__setattr__(self, "macro_edges", edges)

    @property
    def num_parts(self) -> int:
        return len(self.parts)

    def covered(self) -> np.ndarray:
        """All node ids that belong to at least one part."""
        return np.unique(np.concatenate(self.parts)) if self.parts else np.zeros(0, np.int64)


@dataclass(frozen=True)
class SplitterConfig:
    """Base for a splitter's parameters; subclasses add fields. Recorded in every result."""


class Splitter:
    """Base class. Subclasses set `name`, `Config`, and implement `split`."""

    name: ClassVar[str] = ""
    Config: ClassVar[type[SplitterConfig]] = SplitterConfig

    def __init__(self, config: SplitterConfig | None = None, **params: Any) -> None:
        self.config = config if config is not None else self.Config(**params)

    def split(self, graph: ArchGraph) -> Partition:
        """Cut `graph` into subgraphs.

        Args:
            graph: one computational graph (its node ids are 0..graph.num_nodes-1).
        Returns:
            A `Partition`: the node ids of every part (parts may overlap) and the macro-graph
            edges between parts. Deterministic: the same graph and parameters give the same parts.
        """
        raise NotImplementedError

    def params(self) -> dict[str, Any]:
        """The splitter's parameters (its `Config`) as a dict, recorded in every result file."""
        return asdict(self.config)

    @classmethod
    def code_version(cls) -> str:
        """A digest of the code that defines this splitter's output: the source of the modules of
        its class and every base class (so editing any of them changes it). Parts caches key on
        it; a splitter whose output depends on other code should override this."""
        import hashlib
        import inspect
        import sys

        h = hashlib.sha256()
        for klass in cls.__mro__:
            module = sys.modules.get(klass.__module__)
            if klass is object or module is None:
                continue
            try:
                h.update(inspect.getsource(module).encode())
            except (OSError, TypeError):  # no source (frozen, compiled): the class name only
                h.update(f"{klass.__module__}.{klass.__qualname__}".encode())
        return h.hexdigest()
