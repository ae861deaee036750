"""The shipped `real` graphs are what the current extraction code records (zoos installed only).

Extraction changes (the meta shape cache, the autograd walk, the canonical rewrite) must not
change a single graph: a few shipped graphs per installed zoo are re-extracted from their specs,
canonicalised, and compared op for op and edge for edge with `real` 2.0. Skipped where the zoo
is not installed (CI installs no zoo). `benchmarks/validity/bench_reextract.py` does the same on a larger
sample and also counts the raw graphs that differ from `real` 1.0."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("source", ["timm", "torchvision", "transformers"])
def test_shipped_graphs_are_reextracted_exactly(source):
    if importlib.util.find_spec(source) is None:
        pytest.skip(f"{source} is not installed")
    from narbench.data.dataset import load_dataset
    from narbench.zoo.spec import Spec
    from narbench.zoo.specgraph import extract_spec

    ds = load_dataset("real")
    graphs = [g for g in ds.graphs if g.source == source]
    picked = graphs[:: max(1, len(graphs) // 4)][:4]  # spread over the (name-sorted) source
    for g in picked:
        m = g.meta
        variant = tuple(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in m.get("variant", {}).items()))
        raw, _ = extract_spec(Spec(source, m["model"], m["task"], variant))
        canon = raw.canonical()
        assert canon.ops == [ds.vocab[i] for i in g.ops.tolist()], g.name
        assert np.array_equal(canon.edges, g.edges), g.name
