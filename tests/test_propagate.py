"""GCN and GIN layers as CSR products (narbench.train.propagate) give PyG's values bit for bit."""

from __future__ import annotations

import pytest
import torch

from narbench.baselines.gnn import GNNStack, gcn_conv, gin_conv
from narbench.data.graph import import_torch_geometric
from narbench.train import fastpath, propagate

import_torch_geometric()
from torch_geometric.data import Batch  # noqa: E402

from tests.test_packed import random_graphs  # noqa: E402


def _batch(seed: int = 0, graphs: int = 30) -> Batch:
    """Random graphs with repeated edges, self-loops, isolated nodes and edgeless graphs."""
    return Batch.from_data_list(random_graphs(graphs, seed, max_nodes=40))


@pytest.mark.parametrize("threads,deterministic", [(1, False), (2, False), (2, True)])
@pytest.mark.parametrize("conv", [gcn_conv, gin_conv])
def test_a_stack_trains_to_the_same_bits_as_pygs_layers(conv, threads, deterministic):
    """Outputs and every gradient equal PyG's gather-scatter layers, over a few optimiser steps (the
    gate runs 2 threads with deterministic algorithms)."""
    before, was = torch.get_num_threads(), torch.are_deterministic_algorithms_enabled()
    torch.set_num_threads(threads)
    torch.use_deterministic_algorithms(deterministic)
    try:
        results = []
        for use_csr in (False, True):
            torch.manual_seed(0)
            model = GNNStack(conv, 16, 3, 0.2, num_ops=9).train()
            opt = torch.optim.Adam(model.parameters(), lr=1e-2)
            outs = []
            for step in range(3):
                batch = _batch(step)
                with (fastpath.eager() if not use_csr else torch.enable_grad()):
                    out = model(batch)
                opt.zero_grad()
                (out.square().sum() + out.sum()).backward()
                outs.append((out.detach(), [p.grad.clone() for p in model.parameters()]))
                opt.step()
            results.append((outs, [p.detach().clone() for p in model.parameters()]))
    finally:
        torch.set_num_threads(before)
        torch.use_deterministic_algorithms(was)
    (ref_outs, ref_params), (outs, params) = results
    for (a, ga), (b, gb) in zip(ref_outs, outs):
        assert torch.equal(a, b)
        assert all(torch.equal(x, y) for x, y in zip(ga, gb))
    assert all(torch.equal(x, y) for x, y in zip(ref_params, params))


def test_the_csr_path_is_used_only_for_plain_layers():
    model = GNNStack(gcn_conv, 8, 2, 0.0, num_ops=4)
    assert propagate.kind_of(model.convs) == "gcn"
    with fastpath.eager():
        assert propagate.kind_of(model.convs) is None
    assert propagate.kind_of(GNNStack(gin_conv, 8, 2, 0.0, num_ops=4).convs) == "gin"
    handle = model.convs[1].register_forward_hook(lambda *a: None)
    assert propagate.kind_of(model.convs) is None  # a hook expects PyG's forward to run
    handle.remove()
    model.convs[0].cached = True
    assert propagate.kind_of(model.convs) is None


def test_an_adjacency_matches_a_dense_product():
    batch = _batch(4, graphs=5)
    x = torch.randn(batch.num_nodes, 6, dtype=torch.float64, requires_grad=True)
    src, dst = batch.edge_index
    weight = torch.rand(src.numel(), dtype=torch.float64)
    adj = propagate.Adjacency.of_edges(src, dst, weight, batch.num_nodes)
    dense = torch.zeros(batch.num_nodes, batch.num_nodes, dtype=torch.float64).index_put_((dst, src), weight, accumulate=True)
    assert torch.allclose(adj.matmul(x), dense @ x)
    assert torch.autograd.gradcheck(adj.matmul, (x,))


def test_the_torch_sparse_products_cuda_runs_give_the_same_layer_to_rounding(monkeypatch):
    """The branch a GPU takes (cuSPARSE there), run on the CPU: the values of PyG's layer to float
    rounding (its sums may add in another order), gradients included."""
    batch = _batch(5)
    torch.manual_seed(0)
    model = GNNStack(gcn_conv, 16, 2, 0.0, num_ops=9)
    with fastpath.eager():
        want = model(batch)
    want.sum().backward()
    want_grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    monkeypatch.setattr(propagate, "_CPU_KERNEL", False)
    got = model(batch)
    got.sum().backward()
    torch.testing.assert_close(got, want)
    for p, g in zip(model.parameters(), want_grads):
        torch.testing.assert_close(p.grad, g, rtol=1e-4, atol=1e-5)
