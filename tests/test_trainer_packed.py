"""Training and embedding through packed batches give the numbers of the loop they replaced: PyG's
DataLoader, PyG's own layers, losses read on the host after every step."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch

from narbench.core import registry
from narbench.data.graph import import_torch_geometric
from narbench.train import fastpath, losses
from narbench.train.encoder import Labels
from narbench.train.profiles import get_profile
from narbench.train.steptimes import PHASES, StepTimes
from narbench.train.trainer import Trainer, node_budget_batches, seed_everything
from tests.conftest import toy_graphs

import_torch_geometric()
from torch_geometric.loader import DataLoader  # noqa: E402


def _reference_fit(model, datas, cfg, seed: int) -> list[float]:
    """The trainer's loop before packing (first stage, one process), on PyG's own layers."""
    gen = torch.Generator().manual_seed(seed)
    loader = DataLoader(datas, batch_size=cfg.batch_size, shuffle=True, generator=gen)
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    model.train()
    history = []
    for _ in range(cfg.epochs):
        total, count = 0.0, 0
        for batch in loader:
            emb = model(batch)
            loss = emb.new_zeros(()) + losses.supervised_contrastive(emb, batch.y_cl, cfg.temperature)
            loss = loss + torch.nn.functional.cross_entropy(model.classifier(emb).float(), batch.y_ce)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            total += float(loss.detach())
            count += 1
        history.append(total / count)
    model.eval()
    return history


def _reference_embed(model, datas, batch_size: int, batches=None) -> torch.Tensor:
    if batches is not None:
        loader = DataLoader(datas, batch_sampler=batches)
    else:
        loader = DataLoader(datas, batch_size=batch_size, shuffle=False, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        return torch.cat([model(b).float() for b in loader])


def _encoder(name: str, graphs):
    profile = get_profile("smoke")
    profile = replace(profile, train=replace(profile.train, epochs=3, batch_size=16))
    fam = sorted({g.family for g in graphs})
    labels = np.array([fam.index(g.family) for g in graphs])
    enc = registry.load("encoder", name)(8, len(fam), profile)
    return enc, Labels(labels, labels, len(fam))


@pytest.mark.parametrize("name", ["gcn", "gin", "gat"])
def test_training_and_embedding_give_the_losses_weights_and_embeddings_of_the_old_loop(name):
    graphs = toy_graphs(per_family=10)
    ref = []
    for packed in (False, True):
        seed_everything(0)
        enc, labels = _encoder(name, graphs)
        trainer = Trainer("cpu", 0, progress=False, jobs=1)
        trainer.step_times = StepTimes("cpu") if packed else None
        datas = enc.to_datas(trainer, graphs, labels)
        if packed:
            history = trainer.fit_graph_level(enc, datas, enc.profile.train).losses
            plain = enc.to_datas(trainer, graphs)
            emb = trainer.embed(enc, plain, 7)
            budget = trainer.embed(enc, plain, 7, max_nodes=60)
        else:
            with fastpath.eager():
                history = _reference_fit(enc, datas, enc.profile.train, 0)
                plain = enc.to_datas(trainer, graphs)
                emb = _reference_embed(enc, plain, 7)
                budget = _reference_embed(enc, plain, 7, node_budget_batches([d.num_nodes for d in plain], 7, 60))
        ref.append((history, enc.state_dict(), emb, budget, torch.rand(2)))
    (h0, s0, e0, b0, r0), (h1, s1, e1, b1, r1) = ref
    assert h0 == h1  # the epoch means, summed on the device in float64: the same additions as on the host
    assert all(torch.equal(s0[k], s1[k]) for k in s0)
    assert torch.equal(e0, e1) and torch.equal(b0, b1)
    assert torch.equal(r0, r1)  # the global generator drew what the DataLoaders drew


def test_the_step_phases_are_timed_per_epoch():
    graphs = toy_graphs(per_family=4)
    enc, labels = _encoder("gcn", graphs)
    trainer = Trainer("cpu", 0, progress=False, jobs=1)
    trainer.step_times = StepTimes("cpu")
    enc.fit(trainer, graphs, labels)
    epochs = trainer.step_times.epochs
    assert len(epochs) == enc.profile.train.epochs
    steps = -(-len(graphs) // enc.profile.train.batch_size)
    for e in epochs:
        assert e.steps == steps and set(e.host) == set(PHASES)
        assert e.host["forward"] > 0 and e.host["backward"] > 0
        assert sum(e.host.values()) <= e.wall
