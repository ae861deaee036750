"""Parts as flat arrays (narbench.parts) and the parts cache (narbench.partcache)."""

import sqlite3
import warnings

import numpy as np
import pytest
import torch

from narbench.baselines.motif_inputs import data_key, induced, neighbourhood
from narbench.baselines.ours import MotifEncoder
from narbench.train.encoder import Labels
from narbench.data.graph import ArchGraph
from narbench.train.partcache import PartsCache, decode_parts, encode_parts, split_graphs, splitter_id
from narbench.train.parts import GraphParts, flatten, induced_subgraphs, neighbourhoods, subgraph_keys
from narbench.train.profiles import get_profile
from narbench.train.splitter import Partition
from narbench.splitters.motif import MotifSplitter
from narbench.splitters.uniform import NodeNumberSplitter
from narbench.train.trainer import Trainer
from tests.conftest import toy_graphs


def random_dag(seed: int, n: int = 40, e: int = 90) -> ArchGraph:
    """Random edges u -> v (u < v), with repeated edges, in shuffled order; some isolated nodes."""
    rng = np.random.default_rng(seed)
    u = rng.integers(0, n - 5, size=e)
    v = np.minimum(u + rng.integers(1, 8, size=e), n - 3)
    edges = np.stack([u, v])
    edges = np.concatenate([edges, edges[:, :5]], axis=1)[:, rng.permutation(e + 5)]  # 5 repeated edges
    return ArchGraph(ops=rng.integers(0, 6, size=n), edges=edges, name=f"r{seed}", family="f", coarse="c")


def overlapping_parts(seed: int, n: int = 40) -> list[np.ndarray]:
    rng = np.random.default_rng(seed + 100)
    parts = [rng.choice(n, size=int(rng.integers(1, 15)), replace=False) for _ in range(12)]
    parts += [np.arange(n), np.array([3]), np.array([], dtype=np.int64), parts[0]]  # whole, single, empty, repeat
    return [np.unique(p).astype(np.int64) for p in parts]


def assert_same_data(a, b) -> None:
    assert a.num_nodes == b.num_nodes
    assert a.x.dtype == b.x.dtype and torch.equal(a.x, b.x)
    assert a.edge_index.dtype == b.edge_index.dtype and torch.equal(a.edge_index, b.edge_index)
    assert a.edge_index.shape == b.edge_index.shape


@pytest.mark.parametrize("seed", range(4))
def test_part_extraction_equals_induced_on_overlapping_parts(seed):
    g = random_dag(seed)
    parts = overlapping_parts(seed)
    sub = induced_subgraphs(g, *flatten(parts))
    assert len(sub) == len(parts)
    keys = subgraph_keys(sub)
    for i, nodes in enumerate(parts):
        ref = induced(g, nodes)
        assert_same_data(sub.data(i), ref)
        assert keys[i] == data_key(ref)


@pytest.mark.parametrize("hops", [0, 1, 2])
def test_neighbourhoods_equal_per_part_neighbourhood(hops):
    g = random_dag(7)
    parts = overlapping_parts(7)
    offsets, nodes = neighbourhoods(g, *flatten(parts), hops)
    sub = induced_subgraphs(g, offsets, nodes)
    for i, part in enumerate(parts):
        ctx = neighbourhood(g, part, hops)
        assert nodes[offsets[i] : offsets[i + 1]].tolist() == ctx.tolist()
        assert_same_data(sub.data(i), induced(g, ctx))


def test_motif_splitter_parts_equal_induced_and_round_trip_through_the_row_format():
    g = toy_graphs(per_family=2)[0]
    partition = MotifSplitter().split(g)
    assert partition.num_parts > 2 and len(np.unique(np.concatenate(partition.parts))) < sum(map(len, partition.parts))
    gp = GraphParts.of(g, partition)
    assert list(gp.keys) == [data_key(induced(g, p)) for p in partition.parts]
    back = decode_parts(*encode_parts(gp))
    assert back.keys == gp.keys
    assert np.array_equal(back.offsets, gp.offsets) and np.array_equal(back.nodes, gp.nodes)
    assert np.array_equal(back.macro_edges, gp.macro_edges) and back.macro_edges.dtype == np.int64
    rebuilt = back.partition()
    assert all(np.array_equal(a, b) for a, b in zip(rebuilt.parts, partition.parts))
    offsets, nodes = gp.select([2, 0])
    assert nodes.tolist() == np.concatenate([partition.parts[2], partition.parts[0]]).tolist()
    empty = GraphParts.of(g, Partition(parts=(), macro_edges=np.zeros((2, 0))))
    assert decode_parts(*encode_parts(empty)).num_parts == 0
    with pytest.raises(ValueError, match="checksum"):
        blob, checksum = encode_parts(gp)
        decode_parts(blob, bytes(16))


class CountingSplitter(NodeNumberSplitter):
    """node-number, counting the graphs it splits (in this process)."""

    calls = 0

    def split(self, graph):
        type(self).calls += 1
        return super().split(graph)


def test_cache_hit_miss_and_invalidation_on_parameter_change(tmp_path):
    graphs = toy_graphs(per_family=3)
    cache = PartsCache(tmp_path / "parts.sqlite")
    CountingSplitter.calls = 0
    first = split_graphs(CountingSplitter(nodes_per_part=4), graphs, jobs=1, cache=cache)
    assert CountingSplitter.calls == len(graphs)  # all misses
    reopened = PartsCache(tmp_path / "parts.sqlite")
    again = split_graphs(CountingSplitter(nodes_per_part=4), graphs, jobs=1, cache=reopened)
    assert CountingSplitter.calls == len(graphs)  # all hits, from the file
    for a, b in zip(first, again):
        assert a.keys == b.keys and np.array_equal(a.nodes, b.nodes) and np.array_equal(a.macro_edges, b.macro_edges)
    other = split_graphs(CountingSplitter(nodes_per_part=5), graphs, jobs=1, cache=cache)
    assert CountingSplitter.calls == 2 * len(graphs)  # another parameter: misses
    assert other[0].num_parts != first[0].num_parts
    assert splitter_id(CountingSplitter(nodes_per_part=4)) != splitter_id(CountingSplitter(nodes_per_part=5))
    assert splitter_id(CountingSplitter(nodes_per_part=4)) != splitter_id(NodeNumberSplitter(nodes_per_part=4))


def test_cache_invalidation_on_code_change(tmp_path, monkeypatch):
    graphs = toy_graphs(per_family=1)
    cache = PartsCache(tmp_path / "parts.sqlite")
    CountingSplitter.calls = 0
    split_graphs(CountingSplitter(), graphs, jobs=1, cache=cache)
    monkeypatch.setattr(CountingSplitter, "code_version", classmethod(lambda cls: "edited"))
    split_graphs(CountingSplitter(), graphs, jobs=1, cache=cache)
    assert CountingSplitter.calls == 2 * len(graphs)


def test_damaged_entries_are_reported_and_recomputed(tmp_path):
    graphs = toy_graphs(per_family=2)
    path = tmp_path / "parts.sqlite"
    ref = split_graphs(MotifSplitter(), graphs, jobs=1, cache=PartsCache(path))
    with sqlite3.connect(path) as conn:  # flip bytes of two rows, truncate a third
        rows = conn.execute("SELECT splitter, graph, blob FROM parts LIMIT 3").fetchall()
        for i, (sid, graph, blob) in enumerate(rows):
            bad = blob[:10] if i == 2 else blob[:-3] + bytes(b ^ 0xFF for b in blob[-3:])
            conn.execute("UPDATE parts SET blob = ? WHERE splitter = ? AND graph = ?", (bad, sid, graph))
    with pytest.warns(RuntimeWarning, match=r"parts cache .*parts.sqlite: 3 damaged entries"):
        got = split_graphs(MotifSplitter(), graphs, jobs=1, cache=PartsCache(path))
    assert [p.keys for p in got] == [p.keys for p in ref]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # repaired: no warning the next time
        split_graphs(MotifSplitter(), graphs, jobs=1, cache=PartsCache(path))


def test_a_file_that_is_not_a_database_is_moved_aside(tmp_path):
    graphs = toy_graphs(per_family=1)
    path = tmp_path / "parts.sqlite"
    path.write_bytes(b"this is not a database" * 100)
    with pytest.warns(RuntimeWarning, match="not a readable database"):
        got = split_graphs(MotifSplitter(), graphs, jobs=1, cache=PartsCache(path))
    assert len(list(tmp_path.glob("parts.sqlite.corrupt-*"))) == 1
    assert [p.keys for p in got] == [p.keys for p in split_graphs(MotifSplitter(), graphs, jobs=1, cache=None)]
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT count(*) FROM parts").fetchone()[0] == len(graphs)


def test_parallel_and_serial_splitting_give_identical_parts(tmp_path):
    graphs = toy_graphs(per_family=12)  # 48 graphs: enough for a pool of 2
    serial = split_graphs(MotifSplitter(), graphs, jobs=1)
    parallel = split_graphs(MotifSplitter(), graphs, jobs=2, cache=PartsCache(tmp_path / "p.sqlite"))
    for a, b in zip(serial, parallel):
        assert a.keys == b.keys
        assert np.array_equal(a.offsets, b.offsets) and np.array_equal(a.nodes, b.nodes)
        assert np.array_equal(a.macro_edges, b.macro_edges)
    cached = split_graphs(MotifSplitter(), graphs, jobs=2, cache=PartsCache(tmp_path / "p.sqlite"))
    assert [p.keys for p in cached] == [p.keys for p in serial]


def test_encoder_splits_each_graph_once_per_run_and_not_at_all_with_a_warm_cache(toy_dataset, monkeypatch, tmp_path):
    monkeypatch.setenv("NARBENCH_CACHE", str(tmp_path))
    profile = get_profile("smoke")
    train = [toy_dataset.graphs[i] for i in toy_dataset.split.train]
    test = [toy_dataset.graphs[i] for i in toy_dataset.split.test]
    fam = toy_dataset.family_ids()[toy_dataset.split.train]
    for expected in (len(toy_dataset.graphs), 0):  # first run: every graph once; second run: none
        CountingSplitter.calls = 0
        enc = MotifEncoder(len(toy_dataset.vocab), len(toy_dataset.families), profile, CountingSplitter())
        trainer = Trainer("cpu", 0, progress=False, jobs=1)
        enc.fit(trainer, train, Labels(fam, fam, len(toy_dataset.families)))
        enc.embed(trainer, train)  # the corpus: the training graphs again
        enc.embed(trainer, test)
        assert CountingSplitter.calls == expected


def test_an_unusable_cache_is_reported_and_skipped(tmp_path):
    graphs = toy_graphs(per_family=1)
    path = tmp_path / "parts.sqlite"
    path.mkdir()  # cannot be opened as a database file, but is no damaged database either
    with pytest.warns(RuntimeWarning, match="unusable"):
        got = split_graphs(MotifSplitter(), graphs, jobs=1, cache=PartsCache(path))
    assert [p.keys for p in got] == [p.keys for p in split_graphs(MotifSplitter(), graphs, jobs=1)]
    assert path.is_dir() and not list(tmp_path.glob("*.corrupt-*"))


def test_row_format_round_trip_with_empty_and_overlapping_parts():
    g = random_dag(3)
    parts = overlapping_parts(3)  # includes an empty part, a repeated part and the whole graph
    gp = GraphParts.of(g, Partition(parts=tuple(parts), macro_edges=np.array([[0, 2], [1, 5]])))
    back = decode_parts(*encode_parts(gp))
    assert back.keys == gp.keys and np.array_equal(back.offsets, gp.offsets)
    assert np.array_equal(back.nodes, gp.nodes) and np.array_equal(back.macro_edges, gp.macro_edges)
