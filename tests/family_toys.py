"""Small corpora of many families for the `novel` split and the out-of-family score (tests build them here).

Each family has its own block of ops (drawn from a vocabulary wide enough that two families share
little), each of its zoo models inserts one op of its own into the block, and each model has variants of
several depths: a held-out model still finds its family, a held-out family finds none.
"""

from __future__ import annotations

import numpy as np

from narbench.data.dataset import GraphDataset, Split
from narbench.data.graph import ArchGraph
from tests.conftest import chain_graph

VOCAB = [f"op{i}" for i in range(40)]


def family_graphs(families: int = 24, models: int = 4, variants: int = 3, seed: int = 0) -> list[ArchGraph]:
    rng = np.random.default_rng(seed)
    graphs = []
    for f in range(families):
        block = rng.choice(np.arange(2, len(VOCAB)), size=5, replace=False).tolist()
        skip = bool(rng.integers(0, 2))
        for m in range(models):
            own = list(block)
            own.insert(int(rng.integers(len(own))), int(rng.integers(2, len(VOCAB))))
            for v in range(variants):
                g = chain_graph(f"fam{f}/m{m}/v{v}", f"fam{f}", "cnn", own, int(rng.integers(2, 9)), skip=skip)
                g.meta["model"] = f"m{m}"
                graphs.append(g)
    return graphs


def dataset(graphs: list[ArchGraph], splits: dict[str, Split]) -> GraphDataset:
    """A dataset of `graphs` with `splits` (its `standard` split: every graph in the corpus)."""
    n = len(graphs)
    standard = Split(train=np.arange(n, dtype=np.int64), test=np.zeros(0, dtype=np.int64), seed=0, test_size=0.0)
    return GraphDataset("toy", "0", VOCAB, graphs, "0" * 64, standard, splits=splits)
