"""`ours-ft`: the paper's method with F_s fine-tuned in stage 2 (issue 39)."""

from __future__ import annotations

import pytest
import torch

from narbench.baselines.ours import FineTunedMotifEncoder, MotifEncoder
from narbench.baselines.ours_models import FineTunedMacro
from narbench.core import registry
from narbench.splitters.motif import MotifSplitter
from narbench.train.encoder import Labels
from narbench.train.profiles import get_profile
from narbench.train.trainer import Trainer, seed_everything


def _fitted(cls, toy_dataset, tmp_path, monkeypatch):
    monkeypatch.setenv("NARBENCH_CACHE", str(tmp_path))
    train = [toy_dataset.graphs[i] for i in toy_dataset.split.train]
    fam = toy_dataset.family_ids()[toy_dataset.split.train]
    seed_everything(0)
    enc = cls(len(toy_dataset.vocab), len(toy_dataset.families), get_profile("smoke"), MotifSplitter())
    trainer = Trainer("cpu", 0, progress=False, jobs=1)
    enc.fit(trainer, train, Labels(fam, fam, len(toy_dataset.families)))
    return enc, trainer, train


def test_ours_ft_is_registered_beside_ours():
    assert registry.load("encoder", "ours-ft") is FineTunedMotifEncoder
    # the same switches with the same defaults, and stage 1's positive (the paper's by default)
    assert FineTunedMotifEncoder.PARAMS == {**MotifEncoder.PARAMS, "stage1_positive": "context"}


def test_stage_2_trains_f_s_in_ours_ft_and_leaves_it_frozen_in_ours(toy_dataset, tmp_path, monkeypatch):
    ours, _, _ = _fitted(MotifEncoder, toy_dataset, tmp_path / "a", monkeypatch)
    ft, _, _ = _fitted(FineTunedMotifEncoder, toy_dataset, tmp_path / "b", monkeypatch)
    # stage 1 is the same computation: F_c (stage 1 only) ends identical
    assert all(torch.equal(a, b) for a, b in zip(ours.pair.f_c.state_dict().values(), ft.pair.f_c.state_dict().values()))
    changed = [not torch.equal(a, b) for a, b in zip(ours.pair.f_s.state_dict().values(), ft.pair.f_s.state_dict().values())]
    assert any(changed)  # stage 2 moved F_s in ours-ft only
    assert ft.stats["stage2_motifs"] == ft.stats["distinct_train_motifs"]
    assert not any(p.requires_grad for p in ft.pair.f_s.parameters())  # frozen again for inference


def test_inference_embeds_what_stage_2_trained(toy_dataset, tmp_path, monkeypatch):
    """eq. 8 through the motif cache equals the fine-tuning forward pass (motif ids through F_s)."""
    from torch_geometric.data import Batch, Data

    ft, trainer, train = _fitted(FineTunedMotifEncoder, toy_dataset, tmp_path, monkeypatch)
    got = ft.embed(trainer, train)
    motifs = ft._motifs(trainer, train, "again")
    index: dict[bytes, int] = {}
    for parts in motifs:
        for key in parts.keys:
            index.setdefault(key, len(index))
    model = FineTunedMacro(ft.pair.f_s, ft.macro, [ft._motif_data[k] for k in index]).eval()
    batch = Batch.from_data_list([Data(x=torch.tensor([index[k] for k in p.keys]), edge_index=torch.as_tensor(p.macro_edges),
                                       num_nodes=p.num_parts) for p in motifs])
    with torch.no_grad():
        direct = model(batch)
    assert torch.allclose(got, direct, atol=1e-5)


def test_a_learning_curve_of_ours_ft_sees_f_s_change(toy_dataset, tmp_path):
    """The per-epoch probe recomputes the motif embeddings (`weights_changed`): with a stale cache
    the curve's last point would not be the run's result."""
    from narbench.harness.runner import RunConfig, run

    ev = run(RunConfig(encoder="ours-ft", profile="smoke", out=None, progress=False, curve=True, epochs=2, jobs=1),
             dataset=toy_dataset)
    last = ev.result.config["learning_curve"]["epochs"][-1]["test"]
    assert last["ndcg@20"] == pytest.approx(ev.result.metrics["ndcg@20"], abs=1e-6)


def test_the_capped_motif_splitter_cuts_long_segments_only_and_alike():
    import numpy as np

    from narbench.splitters.motif_capped import CappedMotifSplitter, cap_bounds

    assert cap_bounds(np.array([0, 10, 80, 90]), 32).tolist() == [0, 10, 33, 56, 80, 90]  # 70 -> 23, 23, 24
    assert cap_bounds(np.array([0, 32, 64]), 32).tolist() == [0, 32, 64]  # at the cap: kept whole
    assert registry.load("splitter", "motif-capped") is CappedMotifSplitter
    with pytest.raises(ValueError, match="max_nodes"):
        CappedMotifSplitter(max_nodes=0)


def test_capped_parts_are_the_motif_parts_when_none_is_long(toy_dataset):
    from narbench.splitters.motif_capped import CappedMotifSplitter

    for g in toy_dataset.graphs[:6]:
        plain = MotifSplitter().split(g).parts
        capped = CappedMotifSplitter(max_nodes=10_000).split(g).parts
        assert [list(p) for p in plain] == [list(p) for p in capped]
        small = CappedMotifSplitter(max_nodes=2).split(g)
        assert len(small.parts) >= len(plain)


# ----------------------------------------------------------------------------- stage 1's positive


def _pairs(toy_dataset, tmp_path, monkeypatch, positive):
    monkeypatch.setenv("NARBENCH_CACHE", str(tmp_path))
    train = [toy_dataset.graphs[i] for i in toy_dataset.split.train]
    fam = toy_dataset.family_ids()[toy_dataset.split.train]
    enc = FineTunedMotifEncoder(len(toy_dataset.vocab), len(toy_dataset.families), get_profile("smoke"), MotifSplitter())
    enc.set_params({"stage1_positive": positive})
    trainer = Trainer("cpu", 0, progress=False, jobs=1)
    motifs = enc._motifs(trainer, train, "split")
    enc._stage1_labels, enc._stage1_seed = Labels(fam, fam, len(toy_dataset.families)), 0
    return enc, train, motifs, fam, enc.stage1_pairs(train, motifs)


def _key(data):
    return (tuple(data.x.tolist()), tuple(map(tuple, data.edge_index.tolist())))


def test_stage1_positive_is_checked(toy_dataset):
    enc = FineTunedMotifEncoder(len(toy_dataset.vocab), len(toy_dataset.families), get_profile("smoke"), MotifSplitter())
    with pytest.raises(ValueError, match="stage1_positive must be one of context, augmented, family"):
        enc.set_params({"stage1_positive": "sibling"})


def test_family_positive_is_a_motif_of_another_graph_of_the_family(toy_dataset, tmp_path, monkeypatch):
    enc, train, motifs, fam, pairs = _pairs(toy_dataset, tmp_path, monkeypatch, "family")
    assert len(pairs) == enc.stats.get("distinct_train_motifs", len({k for p in motifs for k in p.keys}))
    motif_family = {}  # each distinct motif's keys by family
    for gi, parts in enumerate(motifs):
        for key in parts.keys:
            motif_family.setdefault(_key(enc._motif_data[key]), set()).add(int(fam[gi]))
    first = {}
    for gi, parts in enumerate(motifs):
        for key in parts.keys:
            first.setdefault(key, gi)
    for (motif, positive), (key, gi) in zip(pairs, first.items()):
        assert motif is enc._motif_data[key]
        assert int(fam[gi]) in motif_family[_key(positive)]  # drawn from a graph of the same family
    again = _pairs(toy_dataset, tmp_path / "b", monkeypatch, "family")[-1]
    assert [_key(p) for _, p in again] == [_key(p) for _, p in pairs]  # seeded


def test_augmented_positive_is_a_smaller_view_of_the_motif(toy_dataset, tmp_path, monkeypatch):
    _, _, _, _, pairs = _pairs(toy_dataset, tmp_path, monkeypatch, "augmented")
    shrank = 0
    for motif, view in pairs:
        assert 1 <= view.num_nodes <= motif.num_nodes and view.num_nodes >= min(2, motif.num_nodes)
        assert view.edge_index.shape[1] <= motif.edge_index.shape[1]
        assert view.edge_index.numel() == 0 or int(view.edge_index.max()) < view.num_nodes
        assert set(view.x.tolist()) <= set(motif.x.tolist())
        shrank += view.num_nodes < motif.num_nodes or view.edge_index.shape[1] < motif.edge_index.shape[1]
    assert shrank > 0


def test_the_paper_positive_hashes_as_before_it_was_a_parameter():
    from narbench.harness.confighash import FIELDS, config_hash

    fields = {k: "x" for k in FIELDS}
    before = config_hash({**fields, "encoder_params": {"stage1": True}})
    assert config_hash({**fields, "encoder_params": {"stage1": True, "stage1_positive": "context"}}) == before
    assert config_hash({**fields, "encoder_params": {"stage1": True, "stage1_positive": "family"}}) != before
