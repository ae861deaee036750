"""The `novel` split (`narbench.datasets.novel`): whole families held out, validation and test disjoint,
k the first count that reaches both minimums, deterministic, and the other splits untouched."""

from __future__ import annotations

import numpy as np
import pytest

from narbench.data.family_holdout import family_order, leave_families_out
from narbench.datasets.novel import families_of, novel_families, novel_split
from tests.family_toys import family_graphs


def _sizes(graphs):
    out: dict[str, int] = {}
    for g in graphs:
        out[g.family] = out.get(g.family, 0) + 1
    return out


def test_families_are_taken_in_hash_order_until_both_minimums_hold():
    labels = [f"f{i}" for i in range(30) for _ in range(i % 4 + 1)]  # families of 1-4 graphs
    sizes = _sizes([type("G", (), {"family": f}) for f in labels])
    taken = leave_families_out(labels, seed=3, min_families=5, min_queries=20)
    assert taken == family_order(sizes, 3)[: len(taken)]  # a prefix of the seeded order
    assert len(taken) >= 5 and sum(sizes[f] for f in taken) >= 20
    assert sum(sizes[f] for f in taken[:-1]) < 20 or len(taken) - 1 < 5  # k is the first count reaching both
    assert leave_families_out(labels, seed=4, min_families=5, min_queries=20) != taken
    skipped = leave_families_out(labels, seed=3, min_families=5, min_queries=20, exclude=taken)
    assert not set(skipped) & set(taken)
    assert len(leave_families_out(labels, seed=3, min_families=50, min_queries=0, max_share=0.2)) == 6  # of 30


def test_novel_split_holds_out_whole_families_on_two_disjoint_sides():
    graphs = family_graphs(families=24)
    split = novel_split(graphs, min_families=4, min_queries=30)
    fam = np.array([g.family for g in graphs])
    val, test = families_of(graphs, split, "validation"), families_of(graphs, split, "test")
    assert len(val) >= 4 and len(test) >= 4 and not set(val) & set(test)
    assert len(split.subsets["validation"]) >= 30 and len(split.subsets["test"]) >= 30
    assert set(fam[split.train]).isdisjoint(val + test)  # no graph of a held-out family in the corpus
    assert sorted(np.concatenate([split.train, split.test]).tolist()) == list(range(len(graphs)))
    assert sorted(np.concatenate(list(split.subsets.values())).tolist()) == list(range(len(split.test)))
    assert set(fam[split.test]) == set(val) | set(test)  # every graph of a held-out family is a query
    assert tuple(map(sorted, novel_families(fam.tolist(), 0, min_families=4, min_queries=30))) == (val, test)
    again = novel_split(family_graphs(families=24), min_families=4, min_queries=30)
    assert np.array_equal(again.test, split.test) and np.array_equal(again.subsets["test"], split.subsets["test"])
    other = novel_split(graphs, seed=1, min_families=4, min_queries=30)
    assert families_of(graphs, other, "test") != test
    assert split.name == "novel" and "validation chooses, test reports" in split.rule
    assert split.describe()["subsets"] == {"validation": len(split.subsets["validation"]),
                                           "test": len(split.subsets["test"])}


def test_real_22_adds_novel_and_keeps_every_other_split():
    from narbench.datasets.real import Real22Dataset, RealDataset

    graphs = family_graphs(families=24)
    for g in graphs:
        g.meta["identity"] = f"{g.family}/{g.meta['model']}"
    old, new = RealDataset().splits(graphs), Real22Dataset().splits(graphs)
    assert set(new) == set(old) | {"novel"} and Real22Dataset.split_names == (*RealDataset.split_names, "novel")
    for name in old:
        assert np.array_equal(new[name].train, old[name].train) and np.array_equal(new[name].test, old[name].test)
    assert RealDataset.split_names == ("standard", "unseen", "crossimpl")  # 2.1 keeps its splits


@pytest.mark.slow
def test_shipped_real_novel_split_meets_its_minimums_and_leaves_the_data_as_pinned():
    from narbench.data.dataset import load_dataset
    from narbench.datasets.novel import MIN_FAMILIES, MIN_QUERIES
    from narbench.datasets.real import Real23Dataset

    ds = load_dataset("real")
    assert ds.sha256 == Real23Dataset.expected_sha256
    split = ds.get_split("novel")
    val, test = families_of(ds.graphs, split, "validation"), families_of(ds.graphs, split, "test")
    assert len(val) >= MIN_FAMILIES and len(test) >= MIN_FAMILIES and not set(val) & set(test)
    assert min(len(split.subsets["validation"]), len(split.subsets["test"])) >= MIN_QUERIES
    assert split.test.max() < len(ds.core_graphs)  # never a crossimpl query
    assert not {ds.graphs[i].family for i in split.train.tolist()} & set(val + test)


def test_a_run_on_novel_says_in_one_line_that_there_is_nothing_to_score():
    from narbench.harness.runner import ConfigError, RunConfig, run
    from tests.family_toys import dataset

    graphs = family_graphs(families=24)
    ds = dataset(graphs, {"novel": novel_split(graphs, min_families=4, min_queries=30)})
    with pytest.raises(ConfigError, match="split 'novel' of toy has no query whose family is in its corpus"):
        run(RunConfig(encoder="wl", dataset="toy", split="novel", progress=False), dataset=ds)
