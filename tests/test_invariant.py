"""`invariant` (issue 38): a GNN trained beside design-keeping rewrites of its training graphs."""

from __future__ import annotations

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
