"""`motif-capped`: the motif splitter with a cap on a motif's size (issue 39).

On `real` the motif splitter finds the repeated blocks, but its parts have a tail that F_s, a
3-layer GCN with mean pooling, has to summarise in one vector (real 2.1, 500 graphs drawn with
numpy seed 1, 13,676 parts: median 13 nodes, p90 25, p99 56, max 141; 6.0% of parts over 32
nodes, 0.8% over 64; on real 1.0 the tail reached 492, docs/encoders.md). This splitter cuts every segment of the motif splitter longer
than `max_nodes` into the fewest near-equal chunks of at most `max_nodes` nodes (sizes differ by
at most one). Two copies of a repeated block are cut at the same offsets, so repeated motifs stay
repeated; segments within the cap are the motif splitter's, cut for cut.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from narbench.data.graph import ArchGraph

from .motif import MotifSplitter


def cap_bounds(bounds: np.ndarray, max_nodes: int) -> np.ndarray:
    """`bounds` (sorted cut positions, 0 and n included) with every segment longer than
    `max_nodes` cut into ceil(length / max_nodes) near-equal chunks."""
    out = [int(bounds[0])]
    for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
        pieces = -(-(b - a) // max_nodes)
        if pieces > 1:
            out.extend(a + (i * (b - a)) // pieces for i in range(1, pieces))
        out.append(b)
    return np.asarray(out, dtype=np.int64)


class CappedMotifSplitter(MotifSplitter):
    """Motif segments of at most `max_nodes` nodes (owned nodes; a part also holds its inputs' producers)."""

    name = "motif-capped"

    @dataclass(frozen=True)
    class Config(MotifSplitter.Config):
        max_nodes: int = 32  # the largest segment kept whole: about 1.3 x the p90 of motif parts on real 2.1 (25)

        def __post_init__(self) -> None:
            super().__post_init__()
            if int(self.max_nodes) != self.max_nodes or self.max_nodes < 1:
                raise ValueError(f"max_nodes must be a positive integer, got {self.max_nodes!r}")

    def segment_bounds(self, graph: ArchGraph, order: np.ndarray) -> np.ndarray:
        bounds = np.unique(np.concatenate([[0, graph.num_nodes], np.asarray(super().segment_bounds(graph, order))]))
        return cap_bounds(bounds.astype(np.int64), int(self.config.max_nodes))
