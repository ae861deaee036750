"""`none`: no split; the whole graph is a single part (what the whole-graph baselines use)."""

from __future__ import annotations

import numpy as np

from narbench.data.graph import ArchGraph
from narbench.train.splitter import Partition, Splitter


class NoSplitter(Splitter):
    """The identity split: one part holding every node, no macro edges."""

    name = "none"

    def split(self, graph: ArchGraph) -> Partition:
        return Partition(parts=(np.arange(graph.num_nodes),), macro_edges=np.zeros((2, 0)))
