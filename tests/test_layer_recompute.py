"""gcn, gat, gin (and every `GNNStack`) recompute their layers in the backward pass above a batch size
(`GNNStack.CHECKPOINT_ELEMENTS`) to bound memory (issue 60: a paper-profile `real` run in <= 8 GiB). A
recomputed layer must be the layer that was not recomputed: the same outputs, gradients and dropout draws,
and GIN's batch norms updated once. Results do not depend on it, so it is not part of a run's configuration.
"""

from __future__ import annotations

import contextlib
import copy

import pytest
import torch
from torch_geometric.data import Batch

from benchmarks.speed.layer_memory import held_bytes
from narbench.baselines import gnn
from narbench.train import fastpath
from tests.conftest import toy_graphs

CONVS = {"gcn": gnn.gcn_conv, "gat": gnn.gat_conv, "gin": gnn.gin_conv}


def _batch():
    return Batch.from_data_list([gnn.graph_to_data(g, 8) for g in toy_graphs(per_family=2)])


def _step(stack, batch, recompute: bool):
    stack.CHECKPOINT_ELEMENTS = -1 if recompute else 1 << 62
    torch.manual_seed(7)  # the same dropout draws for both
    out = stack(batch)
    out.square().sum().backward()
    return out.detach(), torch.rand(2)  # and the generator left where it was


@pytest.mark.parametrize("fast", [True, False], ids=["fastpath", "eager"])
@pytest.mark.parametrize("conv", sorted(CONVS))
def test_a_recomputed_layer_is_the_layer_not_recomputed(conv, fast):
    batch = _batch()
    torch.manual_seed(0)
    stack = gnn.GNNStack(CONVS[conv], 32, 3, 0.3, num_ops=8).train()
    plain, again = copy.deepcopy(stack), copy.deepcopy(stack)
    with (contextlib.nullcontext() if fast else fastpath.eager()):
        for _ in range(3):
            (a, ra), (b, rb) = _step(plain, batch, False), _step(again, batch, True)
            assert torch.equal(a, b) and torch.equal(ra, rb)
    assert all(torch.equal(p.grad, q.grad) for p, q in zip(plain.parameters(), again.parameters()))
    buffers = dict(again.named_buffers())
    assert (conv == "gin") == any("running_mean" in name for name in buffers)
    for name, value in plain.named_buffers():
        assert torch.equal(value, buffers[name]), name  # GIN's running statistics and batch counts updated once


def test_recomputation_keeps_fewer_activations():
    """What the forward pass keeps for the backward pass (the tensors autograd saves, a checkpoint's
    inputs included): at most half as much when every layer is recomputed."""
    batch = _batch()
    held = {}
    for recompute in (False, True):
        torch.manual_seed(0)
        stack = gnn.GNNStack(gnn.gin_conv, 64, 3, 0.1, num_ops=8).train()
        stack.CHECKPOINT_ELEMENTS = -1 if recompute else 1 << 62
        held[recompute], out = held_bytes(stack, batch)
        out.sum().backward()
    assert 0 < held[True] < 0.5 * held[False], held


def test_only_training_with_gradients_recomputes(monkeypatch):
    calls, original = [], torch.utils.checkpoint.checkpoint
    monkeypatch.setattr(torch.utils.checkpoint, "checkpoint", lambda *a, **k: calls.append(1) or original(*a, **k))
    stack = gnn.GNNStack(gnn.gcn_conv, 16, 2, 0.1, num_ops=8)
    stack.CHECKPOINT_ELEMENTS = -1
    stack.eval()(_batch())
    with torch.no_grad():
        stack.train()(_batch())
    assert not calls
    stack.train()(_batch())
    assert len(calls) == 2  # one per layer
