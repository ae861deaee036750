"""Each query's cluster and family from the dataset (`narbench.leaderboard.clusters`), on a small
`real`-like dataset: models with several variants, grouped by the taxonomy identity."""

from __future__ import annotations

import numpy as np
import pytest

from narbench import leaderboard as lb
from narbench.data.dataset import DatasetProvider, group_split, stratified_split
from narbench.eval.validation import KnownDataset
from narbench.leaderboard import clusters
from narbench.leaderboard.clusters import ClusterError, query_groups
from tests.conftest import HAND_MADE_SHA256, chain_graph
from tests.handmade import write_result

VERSION = "0.test"
FAMILIES = {"resnetish": [2, 3, 4], "vitish": [5, 6, 7], "mlpish": [6, 4], "vggish": [2, 3]}


class MiniReal(DatasetProvider):
    """`real`-like: per family 70 models of 4 variants each (depths), `meta["identity"]` the model."""

    name = "real"
    version = VERSION
    split_names = ("standard", "unseen")
    test_size = 0.25

    def build(self):
        graphs = []
        for fam, block in FAMILIES.items():
            for m in range(70):
                for v in range(4):
                    g = chain_graph(f"zoo/{fam}{m}/v{v}", fam, "cnn", block, 2 + (m + v) % 9, skip=bool(v % 2))
                    g.meta = {"identity": f"zoo/{fam}{m}", "model": f"{fam}{m}"}
                    graphs.append(g)
        return graphs, [f"op{i}" for i in range(8)], {"generator": "test"}

    def splits(self, graphs):
        fam = [g.family for g in graphs]
        return {"standard": stratified_split(fam, test_size=self.test_size, seed=0),
                "unseen": group_split(fam, [g.meta["identity"] for g in graphs], test_size=self.test_size, seed=0)}


class NoUnit(MiniReal):
    """The same graphs under a name `clusters.UNITS` does not know, and no `query_cluster` method."""

    name = "mini"


def _fresh() -> None:
    clusters._MEMO.clear()
    clusters._groups.cache_clear()


@pytest.fixture
def registered(monkeypatch, tmp_path):
    """MiniReal and NoUnit registered as datasets, a fresh cache folder."""
    from narbench.core import registry

    monkeypatch.setenv("NARBENCH_CACHE", str(tmp_path / "cache"))
    extra = {"mini-real": MiniReal, "mini": NoUnit}
    names, load = registry.names, registry.load
    monkeypatch.setattr(registry, "names", lambda kind: [*names(kind), *extra] if kind == "dataset" else names(kind))
    monkeypatch.setattr(registry, "load", lambda kind, name: extra[name] if kind == "dataset" and name in extra
                        else load(kind, name))
    _fresh()
    yield MiniReal().load()
    _fresh()


def _record(out, ds, split, profile="quick", seed=0, n=None, dataset="real"):
    """A result file of `split` that scored the queries the runner selects (or `n` of them)."""
    from narbench.harness.runner import select
    from narbench.train.profiles import get_profile

    queries = select(ds, get_profile(profile), seed, split)[2]
    scores = np.full(n or len(queries), 0.5)
    path = write_result(out, "random", "none", seed, scores, dataset=dataset, version=VERSION, sha=ds.sha256,
                        split=split, profile=profile)
    known = [KnownDataset(dataset, VERSION, ds.sha256, ("standard", "unseen"))]
    return lb.read_record(path, datasets=known), queries


@pytest.mark.parametrize("split,profile,seed",
                         [("unseen", "quick", 0), ("standard", "quick", 0), ("unseen", "smoke", 2)])
def test_clusters_are_the_source_models_of_the_queries_the_runner_selected(registered, tmp_path, split, profile, seed):
    ds = registered
    rec, queries = _record(tmp_path / "res", ds, split, profile, seed)
    groups = query_groups(rec)
    assert groups.unit == "source model"
    assert groups.clusters == tuple(ds.graphs[i].meta["identity"] for i in queries)
    assert groups.families == tuple(ds.graphs[i].family for i in queries)
    assert 1 < groups.n_clusters < len(queries)  # several variants per model: fewer clusters than queries
    first = {}
    for label, i in zip(groups.clusters, groups.ids):  # ids number the clusters in order of first appearance
        assert first.setdefault(label, len(first)) == i
    if profile == "smoke":  # a profile's subset of 200 queries depends on the seed: the runner's, repeated
        other, q_other = _record(tmp_path / "other", ds, split, profile, seed + 1)
        assert not np.array_equal(queries, q_other) and query_groups(other).clusters != groups.clusters


def test_clusters_are_kept_in_the_cache_folder_and_read_back_without_the_dataset(registered, tmp_path, monkeypatch):
    rec, _ = _record(tmp_path / "res", registered, "unseen")
    other, _ = _record(tmp_path / "res", registered, "standard")
    loads = []
    monkeypatch.setattr(MiniReal, "load", lambda self, *a, _load=MiniReal.load, **k: loads.append(1) or _load(self))
    first = query_groups(rec)
    kept = sorted(p.name.split("-")[2] for p in (tmp_path / "cache" / "clusters").glob("real-0.test-*.json"))
    assert loads == [1] and kept == ["standard", "unseen"]  # one load: every split derived and kept at once
    assert query_groups(other).unit == "source model" and loads == [1]
    _fresh()
    assert query_groups(rec) == first and loads == [1]  # read back from the cache folder


def test_a_query_whose_cluster_cannot_be_found_is_an_error(registered, tmp_path):
    ds = registered
    rec, queries = _record(tmp_path / "a", ds, "unseen", n=10)  # not the queries the split selects
    with pytest.raises(ClusterError, match=f"selects {len(queries)} queries, the file scored 10"):
        query_groups(rec)
    rec, _ = _record(tmp_path / "b", ds, "standard", dataset="mini")  # a dataset that declares no unit
    with pytest.raises(ClusterError, match="dataset mini declares no cluster of its standard queries"):
        query_groups(rec)
    # and so do the tables' default test: no silent fall back to single queries
    with pytest.raises(ClusterError, match="--test bootstrap-query"):
        lb.build_tables([rec, *_record(tmp_path / "c", ds, "standard", seed=1, dataset="mini")[:1]])


def test_data_no_provider_holds_is_an_error_unless_declared(tmp_path, monkeypatch):
    monkeypatch.setattr(clusters, "DECLARED", {})  # the hand-made files' declaration taken away
    for seed in range(2):
        write_result(tmp_path, "gcn", "none", seed, np.full(12, 0.5))
        write_result(tmp_path, "wl", "none", seed, np.full(12, 0.25))
    records = lb.collect([tmp_path])
    no_provider = f"no installed dataset provider holds nas 1.0 .sha256 {HAND_MADE_SHA256[:16]}"
    with pytest.raises(ClusterError, match=no_provider):
        lb.build_tables(records)
    per_query = lb.build_tables(records, stat_test="bootstrap-query")  # single queries, asked for by name
    rows = {r.label: r for r in per_query[0].blocks[0].rows}
    assert rows["wl (floor)"].marks.get("ndcg@20") == lb.SIG_MARK
    monkeypatch.setitem(clusters.DECLARED, ("nas", "1.0", HAND_MADE_SHA256), clusters.one_per_query)
    declared = lb.build_tables(records)[0].blocks[0].rows
    assert [r.marks for r in declared] == [r.marks for r in per_query[0].blocks[0].rows]


def test_the_leaderboard_command_says_so_in_one_line(tmp_path, monkeypatch, capsys):
    from narbench.cli import main

    monkeypatch.setattr(clusters, "DECLARED", {})
    for seed in range(2):
        write_result(tmp_path / "res", "gcn", "none", seed, np.full(12, 0.5))
        write_result(tmp_path / "res", "wl", "none", seed, np.full(12, 0.25))
    assert main(["leaderboard", "--results", str(tmp_path / "res"), "--out", str(tmp_path / "lb"), "--no-plots"]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("error: ") and "cannot find the cluster of its queries" in err
    assert not (tmp_path / "lb" / "README.md").exists()
