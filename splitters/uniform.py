"""The uniform baselines of section 4.4: split by node number, by motif number, or at random.

All three cut the fixed topological order (`ArchGraph.topological_order`) into contiguous
chunks and build the overlapping parts and the macro graph exactly like the motif splitter
(`narbench.splitters._segments.segments_to_partition`); only the cut positions differ.
Sizes below count the nodes a chunk *owns*; a part additionally holds the producers of the
edges entering its chunk (the overlap), so a part can be larger than its chunk.

* ``node-number`` (`NodeNumberSplitter`): chunks of ``nodes_per_part`` nodes (the last one
  holds the remainder), so large graphs get more parts.
* ``motif-number`` (`MotifNumberSplitter`): ``num_parts`` near-equal chunks (sizes differ by at
  most one), or one chunk per node if the graph has fewer nodes.
* ``random`` (`RandomSplitter`): chunk sizes drawn uniformly from ``min_size..max_size``,
  seeded by ``seed`` and the graph's `content_hash` (so a graph's split does not depend on the
  dataset order). A leftover shorter than ``min_size`` at the end is merged into the last
  chunk when that stays within ``max_size``, else the last two chunks are rebalanced into two
  halves. Every chunk is then within the range, except a graph smaller than ``min_size`` (one
  chunk) and, when ``max_size < 2 * min_size - 1``, possibly the last two chunks.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from narbench.data.graph import ArchGraph
from narbench.train.splitter import SplitterConfig

from ._segments import SegmentSplitter


def _positive(name: str, value: int) -> None:
    if int(value) != value or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")


class NodeNumberSplitter(SegmentSplitter):
    """Consecutive chunks of `nodes_per_part` nodes of the topological order."""

    name = "node-number"

    @dataclass(frozen=True)
    class Config(SplitterConfig):
        nodes_per_part: int = 16

        def __post_init__(self) -> None:
            _positive("nodes_per_part", self.nodes_per_part)

    def segment_bounds(self, graph: ArchGraph, order: np.ndarray) -> np.ndarray:
        n = graph.num_nodes
        return np.append(np.arange(0, n, self.config.nodes_per_part, dtype=np.int64), n)


class MotifNumberSplitter(SegmentSplitter):
    """The topological order cut into `num_parts` near-equal chunks (fewer for tiny graphs)."""

    name = "motif-number"

    @dataclass(frozen=True)
    class Config(SplitterConfig):
        num_parts: int = 8

        def __post_init__(self) -> None:
            _positive("num_parts", self.num_parts)

    def segment_bounds(self, graph: ArchGraph, order: np.ndarray) -> np.ndarray:
        n = graph.num_nodes
        k = min(self.config.num_parts, n)
        return (np.arange(k + 1, dtype=np.int64) * n) // max(k, 1)


class RandomSplitter(SegmentSplitter):
    """Chunks of random sizes in `min_size..max_size`, seeded by `seed` and the graph content."""

    name = "random"

    @dataclass(frozen=True)
    class Config(SplitterConfig):
        min_size: int = 8
        max_size: int = 32
        seed: int = 0

        def __post_init__(self) -> None:
            _positive("min_size", self.min_size)
            _positive("max_size", self.max_size)
            if self.min_size > self.max_size:
                raise ValueError(f"min_size {self.min_size} > max_size {self.max_size}")
            if int(self.seed) != self.seed or self.seed < 0:
                raise ValueError(f"seed must be a non-negative integer, got {self.seed!r}")

    def rng(self, graph: ArchGraph) -> np.random.Generator:
        """The per-graph generator: seeded by (seed, content hash), independent of dataset order."""
        return np.random.default_rng([int(self.config.seed), int(graph.content_hash()[:32], 16)])

    def segment_bounds(self, graph: ArchGraph, order: np.ndarray) -> np.ndarray:
        n = graph.num_nodes
        lo, hi = self.config.min_size, self.config.max_size
        # enough draws to cover n even if every size is the minimum
        sizes = self.rng(graph).integers(lo, hi + 1, size=n // lo + 1)
        ends = np.cumsum(sizes)
        k = int(np.searchsorted(ends, n))  # chunk k is the first to reach n
        chunks = [int(s) for s in sizes[:k]]
        rest = n - int(ends[k - 1]) if k else n
        if rest:
            if rest >= lo or not chunks:
                chunks.append(rest)
            elif chunks[-1] + rest <= hi:
                chunks[-1] += rest
            else:  # rebalance the last two chunks: total in (hi, hi + lo), halves <= hi
                total = chunks[-1] + rest
                first = total // 2
                chunks[-1:] = [total - first, first]
        return np.concatenate([[0], np.cumsum(chunks)]).astype(np.int64)
