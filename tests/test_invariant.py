"""`invariant` (issue 38): a GNN trained beside design-keeping rewrites of its training graphs."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from narbench.baselines.gnn import GINEncoder
from narbench.baselines.invariant import InvariantEncoder
from narbench.core import registry
from narbench.train.encoder import Labels
from narbench.train.profiles import get_profile
from narbench.train.trainer import Trainer, seed_everything

#: names for the toy dataset's 8 ops: two activations and two normalisations to rewrite
NAMES = ["conv", "relu", "batchnorm", "linear", "gelu", "layernorm", "add", "other"]


def _fit(cls, toy_dataset, params=None, vocab=NAMES):
    train = [toy_dataset.graphs[i] for i in toy_dataset.split.train]
    fam = toy_dataset.family_ids()[toy_dataset.split.train]
    seed_everything(0)
    enc = cls(len(toy_dataset.vocab), len(toy_dataset.families), get_profile("smoke"))
    if params:
        enc.set_params(params)
    if vocab is not None:
        enc.use_vocabulary(vocab)
    trainer = Trainer("cpu", 0, progress=False, jobs=1)
    enc.fit(trainer, train, Labels(fam, fam, len(toy_dataset.families)))
    return enc, trainer, train


def test_registered():
    assert registry.load("encoder", "invariant") is InvariantEncoder


def test_without_rewrites_it_is_gin_exactly(toy_dataset):
    inv, trainer, train = _fit(InvariantEncoder, toy_dataset, {"views": 0})
    gin, trainer2, _ = _fit(GINEncoder, toy_dataset)
    assert torch.equal(inv.embed(trainer, train), gin.embed(trainer2, train))


def test_rewrites_change_training_and_are_seeded(toy_dataset):
    a, trainer, train = _fit(InvariantEncoder, toy_dataset)
    b, _, _ = _fit(InvariantEncoder, toy_dataset)
    plain, _, _ = _fit(InvariantEncoder, toy_dataset, {"views": 0})
    ea, eb, ep = (e.embed(trainer, train) for e in (a, b, plain))
    assert torch.equal(ea, eb) and not torch.allclose(ea, ep)
    assert a.stats["rewrites"] == {"views": 1, "rewritable_ops": 4}


def test_a_vocabulary_without_activations_trains_plainly_and_says_so(toy_dataset):
    with pytest.warns(UserWarning, match="no activation or normalisation to rewrite"):
        inv, trainer, train = _fit(InvariantEncoder, toy_dataset, vocab=[f"op{i}" for i in range(8)])
    assert inv.stats["rewrites"]["rewritable_ops"] == 0
    gin, trainer2, _ = _fit(GINEncoder, toy_dataset)
    assert torch.equal(inv.embed(trainer, train), gin.embed(trainer2, train))


@pytest.mark.parametrize("params,match", [({"backbone": "mlp"}, "backbone must be one of gin, gcn, gat"),
                                          ({"views": 2}, "views must be 0"), ({"drop": 2.0}, "rewrite rate drop")])
def test_parameters_are_checked(toy_dataset, params, match):
    enc = InvariantEncoder(len(toy_dataset.vocab), len(toy_dataset.families), get_profile("smoke"))
    with pytest.raises(ValueError, match=match):
        enc.set_params(params)


def test_backbone_switches_the_convolution(toy_dataset):
    enc = InvariantEncoder(len(toy_dataset.vocab), len(toy_dataset.families), get_profile("smoke"))
    enc.set_params({"backbone": "gat"})
    assert "GATConv" in repr(enc.stack) and "GINConv" not in repr(enc.stack)


def _old_with_views(batch, classes, rates, seed):
    """The expansion as written before `with_rewrites` (a `Data` per graph, each rewritten in turn, batched again):
    the reference the batched one must equal tensor for tensor."""
    import hashlib

    import numpy as np
    from torch_geometric.data import Batch

    from tests.test_augment import _per_graph_rewrite

    graphs = batch.to_data_list()
    rng = np.random.default_rng(int.from_bytes(
        hashlib.sha256(repr((seed, batch.idx.tolist())).encode()).digest()[:8], "little"))
    views = []
    for d in graphs:
        ops, edges = _per_graph_rewrite(d.x.cpu().numpy(), d.edge_index.cpu().numpy(), classes, rates, rng)
        view = d.clone()
        view.x = torch.as_tensor(ops, device=d.x.device)
        view.edge_index = torch.as_tensor(edges, device=d.x.device)
        view.num_nodes = int(ops.shape[0])
        views.append(view)
    return Batch.from_data_list([*graphs, *views]).to(batch.x.device)


@pytest.mark.parametrize("rates", [(0.2, 0.1, 0.05), (0.6, 0.5, 0.5)])
def test_the_batched_rewrites_are_the_per_graph_ones(toy_dataset, rates):
    """`with_rewrites` gives the batch the per-graph expansion gave, tensor for tensor (so runs keep their numbers and
    their configuration hash), from the packed batches training builds."""
    from narbench.baselines.invariant import with_rewrites
    from narbench.train import packed
    from narbench.train.augment import OpClasses, Rates

    enc = InvariantEncoder(len(toy_dataset.vocab), len(toy_dataset.families), get_profile("smoke"))
    fam = toy_dataset.family_ids()
    datas = enc.to_datas(Trainer("cpu", 0, progress=False, jobs=1), toy_dataset.graphs,
                         Labels(fam, fam, len(toy_dataset.families)))
    for i, d in enumerate(datas):
        d.idx = torch.tensor([i])
    items = packed.pack(datas, "cpu")
    classes, r = OpClasses.of(NAMES), Rates(*rates)
    for idx in ([3, 0, 7, 5], list(range(len(datas)))):
        batch = items.take(np.asarray(idx))
        got, want = with_rewrites(batch, classes=classes, rates=r, seed=4), _old_with_views(batch, classes, r, 4)
        assert got.num_graphs == want.num_graphs == 2 * len(idx)
        for key in ("x", "edge_index", "batch", "ptr", "y_cl", "y_ce", "idx"):
            assert torch.equal(got[key], want[key]), key
        assert not torch.equal(got.x[batch.num_nodes:], batch.x) or rates == (0, 0, 0)
