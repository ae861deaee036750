"""Packed batches (narbench.train.packed) equal PyG's batching, graph for graph; the trainer's batch
order (narbench.train.batchorder) is the DataLoader's, drawn from the same generators."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from narbench.data.graph import import_torch_geometric
from narbench.train import batchorder, distributed
from narbench.train.packed import PackedGraphs, pack

import_torch_geometric()
from torch_geometric.data import Batch, Data  # noqa: E402
from torch_geometric.loader import DataLoader  # noqa: E402


def random_graphs(count: int, seed: int = 0, *, explicit_nodes: bool = False, max_nodes: int = 8) -> list[Data]:
    """Random graphs with node ops, edges (some repeated, some self-loops, every fifth graph edgeless),
    labels, float node encodings, an index-valued number and a name."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(count):
        n = int(rng.integers(1, max_nodes + 1))
        m = int(rng.integers(0, 3 * n)) if i % 5 else 0
        edges = torch.as_tensor(rng.integers(0, n, size=(2, m)), dtype=torch.long)
        d = Data(x=torch.as_tensor(rng.integers(0, 7, size=n)), edge_index=edges,
                 pe=torch.as_tensor(rng.normal(size=(n, 3)), dtype=torch.float32),
                 y_cl=torch.tensor([int(rng.integers(0, 3))]), y_ce=torch.tensor([int(rng.integers(0, 4))]),
                 root_index=int(rng.integers(0, n)), name=f"g{i}")
        if explicit_nodes:
            d.num_nodes = n
        out.append(d)
    return out


def _assert_same_batch(got, want) -> None:
    assert type(got).__name__ == type(want).__name__
    assert sorted(got.keys()) == sorted(want.keys())
    for key in want.keys():
        a, b = got[key], want[key]
        if isinstance(b, torch.Tensor):
            assert a.dtype == b.dtype and torch.equal(a, b), key
        else:
            assert a == b, key
    assert got.num_graphs == want.num_graphs and got.num_nodes == want.num_nodes
    for key, value in want._slice_dict.items():
        assert torch.equal(got._slice_dict[key], value), key
    for key, value in want._inc_dict.items():
        assert (value is None and got._inc_dict[key] is None) or torch.equal(got._inc_dict[key], value), key


@pytest.mark.parametrize("explicit_nodes", [False, True])
def test_a_packed_batch_is_pygs_batch_of_the_same_graphs(explicit_nodes):
    graphs = random_graphs(40, explicit_nodes=explicit_nodes)
    packed = PackedGraphs(graphs)
    rng = np.random.default_rng(1)
    for idx in (np.arange(40), rng.permutation(40)[:13], np.array([7]), np.array([3, 3, 0]), np.array([0, 4, 5])):
        got = packed.take(idx)
        want = Batch.from_data_list([graphs[i] for i in idx])
        _assert_same_batch(got, want)
        # and it separates into the same graphs again
        for a, b in zip(got.to_data_list(), [graphs[i] for i in idx]):
            assert torch.equal(a.x, b.x) and torch.equal(a.edge_index, b.edge_index) and a.name == b.name
            assert a.root_index == b.root_index


def test_tuples_pack_per_position_and_other_items_go_through_pygs_collater():
    graphs = random_graphs(12)
    pairs = list(zip(graphs[:6], graphs[6:]))
    got = pack(pairs).take(np.array([4, 1]))
    assert isinstance(got, list) and len(got) == 2
    for part, position in zip(got, (0, 1)):
        _assert_same_batch(part, Batch.from_data_list([pairs[4][position], pairs[1][position]]))
    tensors = [torch.full((3,), float(i)) for i in range(5)]
    assert torch.equal(pack(tensors).take(np.array([2, 0])), torch.stack([tensors[2], tensors[0]]))


def test_the_epoch_order_is_the_dataloaders_and_leaves_its_generator_where_the_loader_did():
    items = random_graphs(23)
    mine, theirs = torch.Generator().manual_seed(5), torch.Generator().manual_seed(5)
    loader = DataLoader(items, batch_size=4, shuffle=True, generator=theirs)
    packed = pack(items)
    for _ in range(3):
        order = batchorder.shuffled(len(items), mine)
        ours = [packed.take(idx) for idx in batchorder.batches(order, 4)]
        pygs = list(loader)
        assert len(ours) == len(pygs) == batchorder.steps(len(items), 4)
        for a, b in zip(ours, pygs):
            _assert_same_batch(a, b)
    assert torch.equal(mine.get_state(), theirs.get_state())


def train_loader(items, batch_size: int, seed: int):
    """A PyG DataLoader over this rank's shard of `items` (`DistributedSampler`): how distributed training batched
    before its batches were packed, the reference `distributed.shard_order` must follow."""
    from torch.utils.data.distributed import DistributedSampler
    from torch_geometric.loader import DataLoader

    items = list(items)
    sampler = DistributedSampler(items, num_replicas=distributed.world_size(), rank=distributed.rank(), shuffle=True,
                                 seed=seed)
    return DataLoader(items, batch_size=batch_size, sampler=sampler)


def test_a_shard_is_the_distributed_loaders_and_draws_what_it_drew():
    items = list(range(11))
    torch.manual_seed(3)
    loader = train_loader(items, 4, seed=7)
    loader.sampler.set_epoch(2)
    theirs = [int(i) for batch in loader for i in batch]
    after_theirs = torch.rand(1)
    torch.manual_seed(3)
    ours = distributed.shard_order(len(items), 7, 2).tolist()
    assert ours == theirs and torch.equal(torch.rand(1), after_theirs)
    assert distributed.shard_size(len(items)) == len(ours)


@pytest.mark.filterwarnings("ignore:Sparse invariant checks")  # PyG batching sparse tensors
def test_packing_nothing_is_refused_and_sparse_attributes_go_through_pygs_collater():
    with pytest.raises(ValueError, match="nothing to pack"):
        pack([])
    sparse = [Data(x=torch.full((2, 1), float(i)), adj=(torch.eye(2) * i).to_sparse()) for i in range(3)]
    got = pack(sparse).take(np.array([2, 0]))
    want = Batch.from_data_list([sparse[2], sparse[0]])
    assert torch.equal(got.x, want.x) and torch.equal(got.adj.to_dense(), want.adj.to_dense())
