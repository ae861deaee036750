import numpy as np

from narbench.data.dataset import stratified_split, stratified_subset


def labels():
    return ["a"] * 50 + ["b"] * 30 + ["c"] * 20 + ["solo"]


def test_split_is_stratified_disjoint_and_fixed():
    labs = np.array(labels())
    s1 = stratified_split(list(labs), test_size=0.1, seed=0)
    s2 = stratified_split(list(labs), test_size=0.1, seed=0)
    assert np.array_equal(s1.train, s2.train) and np.array_equal(s1.test, s2.test)
    assert not set(s1.train) & set(s1.test)
    assert sorted(np.concatenate([s1.train, s1.test]).tolist()) == list(range(len(labs)))
    counts = {lab: int((labs[s1.test] == lab).sum()) for lab in "abc"}
    assert counts == {"a": 5, "b": 3, "c": 2}
    s3 = stratified_split(list(labs), test_size=0.1, seed=1)
    assert not np.array_equal(s1.test, s3.test)


def test_singleton_labels_go_to_corpus_only():
    labs = labels()
    split = stratified_split(labs, test_size=0.1, seed=0)
    solo = labs.index("solo")
    assert solo in split.train and solo not in split.test


def test_stratified_subset_keeps_proportions_and_is_seeded():
    labs = np.array(labels())
    idx = np.arange(len(labs))
    sub = stratified_subset(idx, labs, 50, seed=3)
    assert len(sub) == 50 and len(set(sub)) == 50
    counts = {lab: int((labs[sub] == lab).sum()) for lab in "abc"}
    assert abs(counts["a"] - 25) <= 1 and abs(counts["b"] - 15) <= 1 and abs(counts["c"] - 10) <= 1
    assert np.array_equal(sub, stratified_subset(idx, labs, 50, seed=3))
    assert not np.array_equal(sub, stratified_subset(idx, labs, 50, seed=4))
    assert np.array_equal(stratified_subset(idx, labs, None), idx)


def test_provider_rejects_a_malformed_record_before_caching(tmp_path):
    import pytest

    from narbench.data.dataset import DatasetProvider
    from narbench.data.graph import ArchGraph, GraphError
    from tests.conftest import toy_graphs

    class Broken(DatasetProvider):
        name, version = "broken", "0"

        def build(self):
            graphs = toy_graphs(per_family=3)
            graphs.append(ArchGraph(ops=np.array([0, 1]), edges=np.array([[0], [5]]), name="bad-record",
                                    family="x", coarse="y"))
            return graphs, [f"op{i}" for i in range(8)], {}

    with pytest.raises(GraphError, match="bad-record.*edge endpoint 5 out of range"):
        Broken().load(tmp_path)
    assert list(tmp_path.iterdir()) == []


def _grouped():
    """Family -> zoo models -> variants: fam a has 4 models, b has 2, c has 1 (never queried)."""
    labels, groups = [], []
    for fam, models in (("a", {"a1": 5, "a2": 3, "a3": 8, "a4": 4}), ("b", {"b1": 6, "b2": 2}), ("c", {"c1": 7})):
        for model, n in models.items():
            labels += [fam] * n
            groups += [f"{fam}/{model}"] * n
    return labels, groups


def test_group_split_keeps_every_group_on_one_side():
    from narbench.data.dataset import group_split

    labels, groups = _grouped()
    split = group_split(labels, groups, test_size=0.1, seed=0)
    g = np.array(groups)
    assert not set(g[split.train]) & set(g[split.test])  # no zoo model on both sides
    assert sorted(np.concatenate([split.train, split.test]).tolist()) == list(range(len(labels)))
    lab = np.array(labels)
    assert set(lab[split.test]) == {"a", "b"}  # c has one model: corpus only
    for fam in set(lab[split.test]):  # every queried family keeps corpus items
        assert (lab[split.train] == fam).any()
    # at least 10% of each queried family, one group at a time, never all groups
    for fam, size in (("a", 20), ("b", 8)):
        taken = set(g[split.test][lab[split.test] == fam])
        assert 1 <= len(taken) < len(set(g[lab == fam])) and (lab[split.test] == fam).sum() >= 0.1 * size
    again = group_split(labels, groups, test_size=0.1, seed=0)
    assert np.array_equal(split.test, again.test) and split.name == "unseen"
    other = [group_split(labels, groups, test_size=0.1, seed=s).test.tolist() for s in range(1, 6)]
    assert any(t != split.test.tolist() for t in other)  # the seed picks the groups


def test_group_split_is_independent_of_row_order():
    from narbench.data.dataset import group_split

    labels, groups = _grouped()
    perm = np.random.default_rng(0).permutation(len(labels))
    split = group_split(labels, groups, seed=0)
    shuffled = group_split([labels[i] for i in perm], [groups[i] for i in perm], seed=0)
    assert sorted(np.array(groups)[split.test].tolist()) == sorted(np.array(groups)[perm][shuffled.test].tolist())


def test_unknown_split_names_the_known_ones(toy_dataset):
    import pytest

    from narbench.data.dataset import UnknownSplitError

    assert list(toy_dataset.splits) == ["standard"] and toy_dataset.get_split() is toy_dataset.split
    with pytest.raises(UnknownSplitError, match="no split 'unseen'; its splits: standard"):
        toy_dataset.get_split("unseen")


def test_provider_declares_every_split_it_returns():
    """Result files are checked against `split_names` without loading data, so it must list every split."""
    import pytest

    from narbench.data.dataset import DatasetProvider
    from narbench.datasets.real import RealDataset
    from tests.conftest import toy_graphs

    class Undeclared(DatasetProvider):
        name, version = "undeclared", "0"

        def splits(self, graphs):
            return {**super().splits(graphs), "extra": super().splits(graphs)["standard"]}

    graphs = toy_graphs(per_family=12)
    with pytest.raises(ValueError, match="returns standard, extra but split_names declares standard"):
        Undeclared().dataset(graphs, ["op"] * 8, {}, "0" * 64)
    assert RealDataset.split_names == ("standard", "unseen", "crossimpl")
