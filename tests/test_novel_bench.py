"""The `novel` benchmark's held-out world (`benchmarks.search.novel.held_out_world`): the corpus less the test
families, the validation families as its `novel` split, and the dataset's sets of outside models, so its index fits
the out-of-family score as the shipped index's build does (on `REFIT_SETS`, not `wildval` alone)."""

from __future__ import annotations

import dataclasses

import numpy as np

from benchmarks.search.novel import held_out_world
from narbench.data.dataset import Split
from narbench.datasets.novel import families_of, novel_split
from tests.family_toys import dataset, family_graphs


def test_the_world_keeps_the_outside_sets_and_holds_out_the_test_families():
    graphs = family_graphs()
    novel = novel_split(graphs, min_families=4, min_queries=30)
    unseen = Split(train=np.arange(len(graphs), dtype=np.int64), test=np.zeros(0, dtype=np.int64), seed=0,
                   test_size=0.0, name="unseen")
    outside, outside_sets = (lambda: ([], [], [])), (lambda names: ([], [], []))
    ds = dataclasses.replace(dataset(graphs, {"novel": novel, "unseen": unseen}), outside=outside,
                             outside_sets=outside_sets)
    world, test = held_out_world(ds)
    assert world.outside is outside and world.outside_sets is outside_sets
    assert test == sorted(set(families_of(graphs, novel, "test"))) and test
    assert not {g.family for g in world.graphs} & set(test)
    held = world.get_split("novel")
    assert {world.graphs[i].family for i in held.test.tolist()} == set(families_of(graphs, novel, "validation"))
