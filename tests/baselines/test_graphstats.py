"""The `graphstats` floor: its raw statistics against values computed by hand, and its embedding."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from narbench.core import registry
from narbench.train.encoder import Labels
from narbench.train.profiles import get_profile
from narbench.train.trainer import Trainer

from ..conftest import edge_list_graph

NUM_OPS = 6


def _graph(ops, edges, name="g", family="f"):
    return edge_list_graph(ops, edges, name=name, family=family)


# 0 -> 1 -> 2 -> 3 -> 4 plus the skip edge 0 -> 4: a residual block
RESBLOCK = _graph([0, 1, 2, 1, 3], [(0, 1), (1, 2), (2, 3), (0, 4), (3, 4)], "res")
# two inputs, two parallel branches merging: 0 -> 2 -> 4 <- 3 <- 1
TWO_BRANCH = _graph([0, 0, 1, 1, 5], [(0, 2), (1, 3), (2, 4), (3, 4)], "two")


def _by_name(row):
    from narbench.baselines.graphstats import structure_columns

    cols = structure_columns()
    assert len(row) == 2 * NUM_OPS + len(cols)
    return row[:NUM_OPS].tolist(), row[NUM_OPS:2 * NUM_OPS].tolist(), dict(zip(cols, row[2 * NUM_OPS:].tolist()))


def test_statistics_of_a_residual_block_match_a_hand_count():
    from narbench.baselines.graphstats import graph_stats

    counts, shares, s = _by_name(graph_stats([RESBLOCK], NUM_OPS)[0])
    assert counts == [1, 2, 1, 1, 0, 0]
    assert shares == pytest.approx([0.2, 0.4, 0.2, 0.2, 0, 0])
    # in-degrees 0 1 1 1 2, out-degrees 2 1 1 1 0; depths 0 1 2 3 4 (the skip edge spans 4 levels)
    expected = {"nodes": 5, "edges": 5, "mean_in_degree": 1.0, "max_in_degree": 2, "max_out_degree": 2,
                "std_in_degree": math.sqrt(2 / 5), "std_out_degree": math.sqrt(2 / 5), "sources": 1, "sinks": 1,
                "depth": 4, "depth_per_node": 4 / 5, "max_width": 1, "mean_sink_distance": 1.0,
                "skip_edge_share": 1 / 5, "merge_node_share": 1 / 5, "branch_node_share": 1 / 5}
    assert s == pytest.approx(expected)


def test_statistics_of_two_merging_branches_match_a_hand_count():
    from narbench.baselines.graphstats import graph_stats

    both = graph_stats([RESBLOCK, TWO_BRANCH], NUM_OPS)  # in one batch: graphs do not mix
    assert np.array_equal(both[0], graph_stats([RESBLOCK], NUM_OPS)[0])
    counts, shares, s = _by_name(both[1])
    assert counts == [2, 2, 0, 0, 0, 1] and shares == pytest.approx([0.4, 0.4, 0, 0, 0, 0.2])
    # in-degrees 0 0 1 1 2 (mean 0.8), out-degrees 1 1 1 1 0; depths 0 0 1 1 2: levels of 2, 2, 1 nodes
    expected = {"nodes": 5, "edges": 4, "mean_in_degree": 0.8, "max_in_degree": 2, "max_out_degree": 1,
                "std_in_degree": math.sqrt(2.8 / 5), "std_out_degree": 0.4, "sources": 2, "sinks": 1,
                "depth": 2, "depth_per_node": 2 / 5, "max_width": 2, "mean_sink_distance": 2.0,
                "skip_edge_share": 0.0, "merge_node_share": 1 / 5, "branch_node_share": 0.0}
    assert s == pytest.approx(expected)


def test_a_single_node_and_an_empty_list():
    from narbench.baselines.graphstats import graph_stats

    _, _, s = _by_name(graph_stats([_graph([4], [])], NUM_OPS)[0])
    assert s["nodes"] == 1 and s["edges"] == 0 and s["sources"] == 1 and s["sinks"] == 1 and s["depth"] == 0
    assert s["skip_edge_share"] == 0.0 and s["mean_sink_distance"] == 0.0
    assert graph_stats([], NUM_OPS).shape == (0, 2 * NUM_OPS + 16)


def _encoder(train):
    enc = registry.load("encoder", "graphstats")(NUM_OPS, 2, get_profile("smoke"))
    trainer = Trainer("cpu", 0, progress=False)
    enc.fit(trainer, list(train), Labels(np.zeros(len(train), np.int64), np.zeros(len(train), np.int64), 2))
    return enc, trainer


def test_embedding_is_standardised_on_the_training_graphs_and_training_free():
    from narbench.baselines.graphstats import graph_stats

    chains = [_graph([i % NUM_OPS for i in range(n)], [(i, i + 1) for i in range(n - 1)], f"c{n}") for n in (3, 7, 20)]
    train = [RESBLOCK, TWO_BRANCH, *chains]
    enc, trainer = _encoder(train)
    assert not enc.trainable and enc.config() == {"trainable": False}
    emb = enc.embed(trainer, train)
    assert emb.shape == (5, 2 * NUM_OPS + 16) and emb.dtype == torch.float32
    assert emb.mean(0).abs().max() < 1e-5  # centred on the training graphs
    # a structure column, by hand: log1p(depth) standardised, scaled by 1/sqrt(16)
    depth = np.log1p(graph_stats(train, NUM_OPS)[:, 2 * NUM_OPS + 9])
    assert emb[:, 2 * NUM_OPS + 9].numpy() == pytest.approx((depth - depth.mean()) / depth.std() / 4, abs=1e-5)
    twin = _graph(RESBLOCK.ops, RESBLOCK.edges.T, "twin", "other")
    a, b, c = enc.embed(trainer, [RESBLOCK, twin, TWO_BRANCH])
    assert torch.equal(a, b) and not torch.equal(a, c)


def test_embed_before_fit_and_fit_without_graphs_fail_clearly():
    enc = registry.load("encoder", "graphstats")(NUM_OPS, 2, get_profile("smoke"))
    with pytest.raises(RuntimeError, match="fit"):
        enc.embed(Trainer("cpu", 0, progress=False), [RESBLOCK])
    with pytest.raises(ValueError, match="at least one training graph"):
        _encoder([])
