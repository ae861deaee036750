import numpy as np

from narbench.dataset import stratified_split, stratified_subset


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

    from narbench.dataset import DatasetProvider
    from narbench.graph import ArchGraph, GraphError
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
