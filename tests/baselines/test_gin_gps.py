"""`gin` and `gps` on hand-built graphs: shapes, determinism under a seed, permutation behaviour."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from narbench.core import registry
from narbench.data.graph import ArchGraph
from narbench.train.profiles import get_profile
from narbench.train.trainer import Trainer

from ..conftest import edge_list_graph

NUM_OPS = 6


def _graph(ops, edges, name="g", family="f"):
    return edge_list_graph(ops, edges, name=name, family=family)


RESBLOCK = _graph([0, 1, 2, 1, 3], [(0, 1), (1, 2), (2, 3), (0, 4), (3, 4)], "res")
CHAIN = _graph([0, 1, 2, 1, 3], [(0, 1), (1, 2), (2, 3), (3, 4)], "chain")
BRANCHES = _graph([0, 4, 4, 5, 5, 2, 3], [(0, 1), (0, 2), (1, 3), (2, 4), (3, 5), (4, 5), (5, 6)], "branches")
GRAPHS = [RESBLOCK, CHAIN, BRANCHES]


def _permuted(g: ArchGraph, perm: np.ndarray) -> ArchGraph:
    """The same graph with node i renamed perm[i]."""
    ops = np.empty_like(g.ops)
    ops[perm] = g.ops
    return ArchGraph(ops=ops, edges=perm[g.edges], name=g.name + "-perm", family=g.family, coarse=g.coarse)


def _encoder(name, seed=0):
    torch.manual_seed(seed)
    return registry.load("encoder", name)(NUM_OPS, 3, get_profile("smoke")).eval()


@pytest.mark.parametrize("name", ["gin", "gps"])
def test_forward_shapes_and_determinism_under_a_seed(name):
    trainer = Trainer("cpu", 0, progress=False)
    a = _encoder(name).embed(trainer, GRAPHS)
    hidden = get_profile("smoke").model.hidden
    assert a.shape == (3, hidden) and a.dtype == torch.float32 and torch.isfinite(a).all()
    assert torch.equal(a, _encoder(name).embed(trainer, GRAPHS))  # same seed, same weights, same vectors
    assert not torch.equal(a, _encoder(name, seed=1).embed(trainer, GRAPHS))
    assert not torch.allclose(a[0], a[1])  # the skip edge changes the vector (same op counts)


@pytest.mark.parametrize("name", ["gin", "gps"])
def test_renumbering_nodes_leaves_the_embedding_unchanged(name):
    enc, trainer = _encoder(name), Trainer("cpu", 0, progress=False)
    perm = np.array([3, 0, 6, 1, 5, 2, 4])
    both = enc.embed(trainer, [BRANCHES, _permuted(BRANCHES, perm), _permuted(RESBLOCK, perm[perm < 5])])
    assert torch.allclose(both[0], both[1], atol=1e-5)
    assert torch.allclose(both[2], enc.embed(trainer, [RESBLOCK])[0], atol=1e-5)


@pytest.mark.parametrize("name", ["gin", "gps"])
def test_a_graph_embeds_the_same_alone_or_in_a_batch(name):
    enc, trainer = _encoder(name), Trainer("cpu", 0, progress=False)
    batch = enc.embed(trainer, GRAPHS)
    for i, g in enumerate(GRAPHS):
        assert torch.allclose(batch[i], enc.embed(trainer, [g])[0], atol=1e-5)


def test_gin_uses_sum_aggregation_with_an_mlp_per_layer():
    from torch_geometric.nn import GINConv

    enc = _encoder("gin")
    convs = list(enc.stack.convs)
    assert len(convs) == get_profile("smoke").model.layers and all(isinstance(c, GINConv) for c in convs)
    assert all(isinstance(c.nn, torch.nn.Sequential) and c.eps.item() == 0.0 for c in convs)


def test_attention_groups_cut_large_graphs_into_windows():
    from narbench.baselines.gnn import attention_groups

    batch = torch.tensor([0, 0, 0, 1, 1, 1, 1, 1, 2])
    ptr = torch.tensor([0, 3, 8, 9])
    assert attention_groups(batch, ptr, 2).tolist() == [0, 0, 1, 2, 2, 3, 3, 4, 5]
    assert attention_groups(batch, ptr, 8).tolist() == batch.tolist()  # each graph whole


def test_gps_attention_is_global_within_a_window_and_numbering_dependent_across_windows():
    trainer = Trainer("cpu", 0, progress=False)
    enc = _encoder("gps")
    perm = np.array([3, 0, 6, 1, 5, 2, 4])
    whole = enc.embed(trainer, [BRANCHES, _permuted(BRANCHES, perm)])
    enc.stack.window = 2  # attention only within runs of 2 consecutive node ids
    windowed = enc.embed(trainer, [BRANCHES, _permuted(BRANCHES, perm)])
    assert not torch.allclose(whole[0], windowed[0], atol=1e-4)
    assert not torch.allclose(windowed[0], windowed[1], atol=1e-4)


def test_random_walk_pe_of_a_dag_walks_the_undirected_graph():
    from narbench.baselines.gnn import random_walk_pe

    pe = random_walk_pe(_graph([0, 1, 2], [(0, 1), (1, 2)]), 4)
    # path 0 - 1 - 2: no return in 1 or 3 steps; in 2 steps the ends return with 1/2, the middle with 1
    assert pe.shape == (3, 4)
    assert pe[:, 0].tolist() == [0, 0, 0] and pe[:, 2].tolist() == [0, 0, 0]
    assert pe[:, 1].tolist() == pytest.approx([0.5, 1.0, 0.5])
    assert pe[:, 3].tolist() == pytest.approx([0.5, 1.0, 0.5])


def test_random_walk_pe_equals_pyg_add_random_walk_pe():
    from torch_geometric.data import Data
    from torch_geometric.transforms import AddRandomWalkPE
    from torch_geometric.utils import to_undirected

    from narbench.baselines.gnn import random_walk_pe

    for g in (*GRAPHS, _graph([0] * 4, [(0, 1), (0, 1), (1, 2), (0, 3)])):  # a repeated edge counts once
        edges = to_undirected(torch.as_tensor(g.edges), num_nodes=g.num_nodes)
        ref = AddRandomWalkPE(20, attr_name="pe")(Data(edge_index=edges, num_nodes=g.num_nodes)).pe
        assert torch.allclose(random_walk_pe(g, 20), ref, atol=1e-6)


@pytest.mark.parametrize("name", ["gin", "gps", "graphstats"])
def test_new_encoders_run_end_to_end(toy_dataset, tmp_path, name):
    from narbench.harness.runner import RunConfig, run

    res = run(RunConfig(encoder=name, profile="smoke", device="cpu", out=str(tmp_path), progress=False),
              dataset=toy_dataset).result
    assert res.encoder == name and 0.0 <= res.metrics["ndcg@20"] <= 1.0
    trained = res.config["training_history"]
    if name == "graphstats":
        assert trained == [] and res.config["labels"] is None
    else:
        assert len(trained) == 1 and len(trained[0]["losses"]) == get_profile("smoke").train.epochs
        assert all(np.isfinite(trained[0]["losses"]))


def test_gps_recomputing_layers_in_the_backward_pass_gives_the_same_gradients():
    """Checkpointing (large batches) must not change what training computes."""
    from torch_geometric.data import Batch

    def grads(limit):
        enc = _encoder("gps").train()
        enc.stack.CHECKPOINT_ELEMENTS = limit
        batch = Batch.from_data_list([enc.to_data(g) for g in GRAPHS])
        torch.manual_seed(5)  # dropout masks
        enc(batch).pow(2).sum().backward()
        return [p.grad.clone() for p in enc.parameters() if p.grad is not None]

    plain, recomputed = grads(1 << 40), grads(0)
    assert len(plain) == len(recomputed) > 0
    assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(plain, recomputed))


def _random_dags(count: int, seed: int = 0) -> list[ArchGraph]:
    """Small random DAGs of 1 to 30 nodes (some with repeated edges, some without edges)."""
    rng = np.random.default_rng(seed)
    graphs = []
    for i in range(count):
        n = int(rng.integers(1, 31))
        m = int(rng.integers(0, 2 * n + 1)) if n > 1 else 0
        src = rng.integers(0, max(n - 1, 1), m)
        dst = src + 1 + (rng.integers(0, n, m) % np.maximum(n - 1 - src, 1))
        graphs.append(_graph(rng.integers(0, NUM_OPS, n), list(zip(src.tolist(), dst.tolist())), f"g{i}"))
    return graphs


@pytest.mark.parametrize("jobs", [1, 2])
def test_gps_positional_encodings_equal_random_walk_pe_one_by_one(jobs):
    """In worker processes or here, memoised or not: bit for bit what `random_walk_pe` gives, in order."""
    from narbench.baselines.gnn import random_walk_pe

    enc = _encoder("gps")
    graphs = _random_dags(48)
    graphs = graphs + graphs[:5] + [graphs[3]]  # repeats: one computation each, each in its place
    serial = [random_walk_pe(g, enc.walk_length) for g in graphs]
    first = enc.positional_encodings(graphs, jobs=jobs)
    assert len(first) == len(graphs)
    assert all(a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b) for a, b in zip(first, serial))
    again = enc.positional_encodings(graphs[::-1], jobs=jobs)
    assert all(a is b for a, b in zip(again, first[::-1]))  # from the memo: the same tensors
    trainer = Trainer("cpu", 0, progress=False, jobs=jobs)
    assert all(torch.equal(d.pe, pe) for d, pe in zip(enc.to_datas(trainer, graphs), serial))
    assert torch.equal(enc.to_data(graphs[7]).pe, serial[7])


def test_gps_positional_encodings_of_a_changed_graph_are_computed_again():
    from narbench.baselines.gnn import random_walk_pe

    enc = _encoder("gps")
    g = _graph([0, 1, 2, 3], [(0, 1), (1, 2), (2, 3)])
    before = enc.positional_encodings([g])[0]
    g.edges = np.array([[0, 0, 0], [1, 2, 3]])  # the same object, now a star
    after = enc.positional_encodings([g])[0]
    assert not torch.equal(before, after) and torch.equal(after, random_walk_pe(g, enc.walk_length))


def test_gps_memo_keeps_no_graph_alive_and_the_encoder_still_pickles():
    import gc
    import pickle

    enc = _encoder("gps")
    graphs = _random_dags(3)
    enc.positional_encodings(graphs)
    assert len(enc._pe_memo()) == 3
    del graphs
    gc.collect()
    assert len(enc._pe_memo()) == 0
    enc.positional_encodings([CHAIN])
    copy = pickle.loads(pickle.dumps(enc))
    assert torch.equal(copy.positional_encodings([CHAIN])[0], enc.positional_encodings([CHAIN])[0])


def test_gps_embeddings_with_encodings_computed_in_workers_equal_serial_ones():
    """The whole path (fit, embed) with jobs=2 gives the vectors of jobs=1."""
    from narbench.train.encoder import Labels

    graphs = _random_dags(40, seed=3)
    labels = Labels(np.arange(40) % 2, np.arange(40) % 3, 3)

    def embeddings(jobs):
        enc = _encoder("gps")
        trainer = Trainer("cpu", 0, progress=False, jobs=jobs)
        enc.fit(trainer, graphs, labels)
        return enc.embed(trainer, graphs)

    assert torch.equal(embeddings(1), embeddings(2))
