"""`graf-lda`: `graf`'s features projected by a shrunk LDA fitted on the protocol's training labels."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from narbench.baselines import graf_lda
from narbench.core import registry
from narbench.data.dataset import GraphDataset
from narbench.train.encoder import Labels
from narbench.train.profiles import get_profile
from narbench.train.trainer import Trainer
from tests.conftest import chain_graph, toy_graphs

NUM_OPS = 8


def _fit(graphs, y):
    enc = registry.load("encoder", "graf-lda")(NUM_OPS, int(max(y)) + 1, get_profile("smoke"))
    trainer = Trainer("cpu", 0, progress=False)
    y = np.asarray(y, dtype=np.int64)
    enc.fit(trainer, graphs, Labels(y, y, int(y.max()) + 1))
    return enc, trainer


def _family_ids(graphs):
    return np.unique([g.family for g in graphs], return_inverse=True)[1].reshape(-1)


def test_lda_separates_classes_and_handles_singletons():
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.normal(0, 1, (20, 5)), rng.normal(0, 1, (20, 5)) + [4, 0, 0, 0, 0], [[0, 0, 0, 0, 9.0]]])
    y = np.array([0] * 20 + [1] * 20 + [2])  # class 2: one graph
    mean, proj, values = graf_lda.lda(x, y, 0.01)
    assert proj.shape == (5, 2) and values.shape == (2,) and values[0] >= values[1] >= 0
    z = (x - mean) @ proj[:, :1]
    assert abs(z[:20].mean() - z[20:40].mean()) > 1.5 * (z[:20].std() + z[20:40].std())  # the first axis splits 0 from 1
    with pytest.raises(ValueError, match="two"):
        graf_lda.lda(x, np.zeros(len(x)), 0.01)


def test_uses_the_labels_is_deterministic_and_needs_fit():
    graphs = toy_graphs(per_family=6)
    fam = _family_ids(graphs)
    enc = registry.load("encoder", "graf-lda")(NUM_OPS, 4, get_profile("smoke"))
    assert enc.trainable is True
    with pytest.raises(RuntimeError, match="fit"):
        enc.embed(Trainer("cpu", 0, progress=False), graphs)
    a, trainer = _fit(graphs, fam)
    emb = a.embed(trainer, graphs)
    assert emb.dtype == torch.float32 and emb.shape[0] == len(graphs) and torch.isfinite(emb).all()
    again, _ = _fit(graphs, fam)
    assert torch.equal(again.embed(trainer, graphs), emb)  # deterministic
    assert {**again.stats["selection"], "seconds": 0} == {**a.stats["selection"], "seconds": 0}
    # another label assignment (the coarse label: resnetish + vggish one class) gives other embeddings
    coarse = np.unique([g.coarse for g in graphs], return_inverse=True)[1].reshape(-1)
    b, _ = _fit(graphs, coarse)
    other = b.embed(trainer, graphs)
    assert other.shape != emb.shape or not torch.allclose(other, emb)
    # the labels are what it separates: same-family graphs are nearer than other-family ones
    z = torch.nn.functional.normalize(emb.double(), dim=1)
    sim = z @ z.T
    same = torch.from_numpy(fam[:, None] == fam[None, :])
    assert sim[same].mean() > sim[~same].mean() + 0.5
    rec = a.stats["selection"]
    assert set(rec["scores"]) == {f"shrinkage={s:g},dims={d}" for s, d in graf_lda.GRID}
    assert rec["picked"]["shrinkage"] in graf_lda.SHRINKAGES and rec["picked"]["dims"] in graf_lda.DIMS
    assert a.stats["dims"] == min(rec["picked"]["dims"], a.stats["classes"] - 1)


def test_saved_state_rebuilds_the_encoder():
    graphs = toy_graphs(per_family=5)
    a, trainer = _fit(graphs, _family_ids(graphs))
    fresh = registry.load("encoder", "graf-lda")(NUM_OPS, 4, get_profile("smoke"))
    fresh.load_state_dict({k: v.clone() for k, v in a.state_dict().items()})
    assert torch.equal(fresh.embed(trainer, graphs), a.embed(trainer, graphs))


def test_picks_by_validation_and_never_looks_at_the_queries(toy_dataset, tmp_path):
    from narbench.harness.runner import RunConfig, run

    def go(dataset, sub, protocol="family"):
        return run(RunConfig(encoder="graf-lda", profile="smoke", device="cpu", out=str(tmp_path / sub),
                             progress=False, protocol=protocol), dataset=dataset).result

    res = go(toy_dataset, "a")
    sel = res.config["encoder_stats"]["selection"]
    scores = sel["scores"]
    best = max(scores.values())
    first = next(k for k, v in scores.items() if v == best)  # ties keep the earlier setting
    assert first == f"shrinkage={sel['picked']['shrinkage']:g},dims={sel['picked']['dims']}"
    assert res.config["labels"]["ce"] == "family" and res.config["encoder"]["trainable"] is True
    # the queries replaced by other graphs: the same choice and scores, other query metrics
    graphs, split = list(toy_dataset.graphs), toy_dataset.split
    rng = np.random.default_rng(5)
    for i in split.test:
        g = graphs[i]
        graphs[i] = chain_graph(g.name + "-q", g.family, g.coarse, [int(o) for o in rng.integers(2, 8, 3)],
                                int(rng.integers(2, 9)), skip=bool(rng.integers(2)))
    other = go(GraphDataset("toy", "0", list(toy_dataset.vocab), graphs, "0" * 64, split), "b")
    assert other.metrics != res.metrics
    osel = other.config["encoder_stats"]["selection"]
    assert {**osel, "seconds": 0} == {**sel, "seconds": 0}
    again = go(toy_dataset, "c")
    assert again.metrics == res.metrics
    # under `paper` it is fitted on (and validated with) the coarse label
    paper = go(toy_dataset, "d", protocol="paper")
    assert paper.config["labels"]["ce"] == "coarse"
    assert paper.config["encoder_stats"]["classes"] == 3


# ------------------------------------------------------------------ sources as nuisance (issue 38)


def test_the_nuisance_weight_suppresses_what_separates_a_familys_sources():
    """Axis 0 carries the family; axis 1 the source, and (because the sources share the families
    unevenly) some family signal too. Plain LDA (g = 1) leans on axis 1; a large g turns away from it.
    g = 1 with groups is exactly plain LDA."""
    rng = np.random.default_rng(0)
    fam = np.repeat([0, 1, 2, 3], 40)
    src = np.where(rng.random(len(fam)) < np.where(fam < 2, 0.8, 0.2), 1, 0)  # families 0-1 mostly from zoo 1
    x = np.stack([fam + rng.normal(0, 0.8, len(fam)), 3.0 * src + rng.normal(0, 0.3, len(fam)),
                  rng.normal(0, 1, len(fam))], 1)
    plain = graf_lda.lda(x, fam, 0.01)
    same = graf_lda.lda(x, fam, 0.01, src, 1.0)
    assert np.allclose(plain[2], same[2]) and np.allclose(np.abs(plain[1]), np.abs(same[1]))

    def lean(proj):  # share of the first discriminant's weight on the source axis, in feature units
        w = np.abs(proj[:, 0]) * x.std(axis=0)
        return w[1] / w.sum()

    heavy = graf_lda.lda(x, fam, 0.01, src, 256.0)
    assert lean(heavy[1]) < 0.5 * lean(plain[1])
    # a family with one source adds nothing to the nuisance: all from one zoo, g changes nothing
    one = graf_lda.lda(x, fam, 0.01, np.zeros(len(fam)), 256.0)
    assert np.allclose(one[2], plain[2])


def test_sources_and_holdout_params_choose_on_their_split_and_hash_apart(toy_dataset, tmp_path):
    from dataclasses import replace as dc_replace

    from narbench.harness.confighash import config_hash
    from narbench.harness.runner import RunConfig, run
    from narbench.harness.sweepplan import planned_fields

    graphs = [dc_replace(g, source=("zoo-a" if i % 3 else "zoo-b")) for i, g in enumerate(toy_dataset.graphs)]
    data = GraphDataset("toy", "0", list(toy_dataset.vocab), graphs, "0" * 64, toy_dataset.split)
    params = {"sources": "nuisance", "holdout": "cross-source"}
    cfg = RunConfig(encoder="graf-lda", profile="smoke", device="cpu", out=str(tmp_path / "a"), progress=False,
                    encoder_params=params, save_weights=True)
    res = run(cfg, dataset=data).result
    sel = res.config["encoder_stats"]["selection"]
    assert sel["holdout"] == "cross-source" and sel["picked"]["nuisance"] in graf_lda.NUISANCE
    assert len(sel["scores"]) == len(graf_lda.NUISANCE) * len(graf_lda.GRID)
    assert all(k.startswith("nuisance=") for k in sel["scores"])
    assert "uses_sources" in res.config["encoder"] and res.config["encoder"]["grid"]["nuisance"] == list(graf_lda.NUISANCE)
    # the defaults hash as before the parameters existed; the variant is a configuration of its own
    plain = RunConfig(encoder="graf-lda", profile="smoke", device="cpu", out="o")
    explicit = RunConfig(encoder="graf-lda", profile="smoke", device="cpu", out="o",
                         encoder_params={"sources": "ignore", "holdout": "family"})
    assert config_hash(planned_fields(plain)) == config_hash(planned_fields(explicit))
    assert config_hash(planned_fields(plain)) != config_hash(planned_fields(cfg))
    enc = registry.load("encoder", "graf-lda")(NUM_OPS, 4, get_profile("smoke"))
    for bad in ({"sources": "zoo"}, {"holdout": "nope"}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            enc.set_params(bad)


def test_a_fixed_nuisance_weight_is_the_only_one_tried_and_hashes_apart(toy_dataset, tmp_path):
    """`nuisance=G` (issue 59) fixes g of `sources=nuisance`: selection tries G alone and records it; 0, the
    default, hashes as before the parameter existed; G without `sources=nuisance`, or below 0, is refused."""
    from dataclasses import replace as dc_replace

    from narbench.harness.confighash import config_hash
    from narbench.harness.runner import RunConfig, run
    from narbench.harness.sweepplan import planned_fields

    graphs = [dc_replace(g, source=("zoo-a" if i % 3 else "zoo-b")) for i, g in enumerate(toy_dataset.graphs)]
    data = GraphDataset("toy", "0", list(toy_dataset.vocab), graphs, "0" * 64, toy_dataset.split)
    params = {"sources": "nuisance", "holdout": "cross-source", "nuisance": 256}
    cfg = RunConfig(encoder="graf-lda", profile="smoke", device="cpu", out=str(tmp_path / "a"), progress=False,
                    encoder_params=params)
    res = run(cfg, dataset=data).result
    sel = res.config["encoder_stats"]["selection"]
    assert sel["picked"]["nuisance"] == 256.0 and len(sel["scores"]) == len(graf_lda.GRID)
    assert res.config["encoder"]["grid"]["nuisance"] == [256.0]
    chosen = {"sources": "nuisance", "holdout": "cross-source"}
    fields = {name: planned_fields(RunConfig(encoder="graf-lda", profile="smoke", device="cpu", out="o",
                                             encoder_params=p))
              for name, p in (("fixed", params), ("chosen", chosen), ("zero", {**chosen, "nuisance": 0.0}))}
    assert config_hash(fields["zero"]) == config_hash(fields["chosen"]) != config_hash(fields["fixed"])
    enc = registry.load("encoder", "graf-lda")(NUM_OPS, 4, get_profile("smoke"))
    for bad in ({"nuisance": 16.0}, {"sources": "nuisance", "nuisance": -1.0}):
        with pytest.raises(ValueError, match="nuisance"):
            enc.set_params(bad)


def test_wl_rounds_appends_the_wl_binary_floor_as_one_more_block_and_hashes_apart():
    from narbench.baselines import graf
    from narbench.baselines.floors import wl_weighted_features
    from narbench.harness.confighash import config_hash
    from narbench.harness.runner import RunConfig
    from narbench.harness.sweepplan import planned_fields

    graphs = toy_graphs(per_family=6)
    fam = _family_ids(graphs)
    enc = registry.load("encoder", "graf-lda")(NUM_OPS, 4, get_profile("smoke"))
    enc.set_params({"wl_rounds": 2})
    pairs = np.unique(graf.pair_ids(graphs, NUM_OPS)[1])
    x = enc._features(graphs, pairs)
    plain = graf.features(graphs, NUM_OPS, pairs)
    assert x.shape == (len(graphs), plain.shape[1] + graf_lda.WL_DIM)
    assert np.array_equal(x[:, : plain.shape[1]], plain)  # graf's blocks untouched
    wl = x[:, plain.shape[1]:]
    assert np.allclose(np.linalg.norm(wl, axis=1), np.sqrt(graf_lda.WL_WEIGHT))  # one unit-length block
    assert np.allclose(wl, graf.unit(wl_weighted_features(graphs, 2, graf_lda.WL_DIM, "binary", dtype=np.float64)))
    trainer = Trainer("cpu", 0, progress=False)
    enc.fit(trainer, graphs, Labels(fam, fam, int(fam.max()) + 1))
    assert enc.stats["features"] == x.shape[1] and torch.isfinite(enc.embed(trainer, graphs)).all()
    assert enc.config()["features"].startswith("graf+wl-binary(rounds=2") and enc.config()["weights"]["wl"] == 1.0
    # wl_rounds=0 is graf-lda as before the parameter: same features, same hash
    base = registry.load("encoder", "graf-lda")(NUM_OPS, 4, get_profile("smoke"))
    assert np.array_equal(base._features(graphs, pairs), plain) and base.config()["features"] == "graf"
    fields = {k: planned_fields(RunConfig(encoder="graf-lda", profile="smoke", device="cpu", out="o", encoder_params=p))
              for k, p in (("none", {}), ("zero", {"wl_rounds": 0}), ("three", {"wl_rounds": 3}))}
    assert config_hash(fields["none"]) == config_hash(fields["zero"]) != config_hash(fields["three"])
    for bad in (-1, "3", True, 1.5):
        with pytest.raises(ValueError, match="wl_rounds"):
            base.set_params({"wl_rounds": bad})


def _outside_encoder(**params):
    enc = registry.load("encoder", "graf-lda")(NUM_OPS, 4, get_profile("smoke"))
    enc.set_params(params)
    return enc


def test_outside_refuses_a_negative_weight_and_needs_its_models():
    with pytest.raises(ValueError, match="outside"):
        _outside_encoder(outside=-1.0)
    graphs = toy_graphs(per_family=6)
    y = _family_ids(graphs)
    enc = _outside_encoder(outside=4.0)
    with pytest.raises(ValueError, match="use_outside"):  # on, but nobody gave the outside models
        enc.fit(Trainer("cpu", 0, progress=False), graphs, Labels(y, y, 4))
    with pytest.raises(ValueError, match="2 graphs but 1"):
        enc.use_outside(graphs[:2], [(0,)])
    off = _outside_encoder()
    assert off._outside_scatter(np.zeros(0, dtype=np.int64), np.zeros((3, 2)), np.zeros(3)) is None


def test_the_outside_scatter_is_the_weighted_scatter_of_moves_to_the_nearest_family():
    """Each outside model moves from the mean of the nearest of its families (among the training labels); a model of
    no training family is left out; the weight scales the scatter; none left: no term."""
    from narbench.baselines.graf import pair_ids

    graphs = toy_graphs(per_family=6)
    y = _family_ids(graphs)
    outside = toy_graphs(per_family=2, seed=5)
    fams = _family_ids(outside)
    enc = _outside_encoder(outside=3.0)
    # each model given its own family and another, and one of a family the training labels lack (7)
    enc.use_outside(outside + outside[:1], [(int(f), int((f + 1) % 4)) for f in fams] + [(7,)], sets=("a", "b"))
    pairs = np.unique(pair_ids(graphs, NUM_OPS)[1])
    x = enc._features(graphs, pairs)
    xo = enc._features(outside, pairs)
    means = np.stack([x[y == c].mean(axis=0) for c in range(4)])
    moves = []
    for row, f in zip(xo, fams):
        a, b = row - means[f], row - means[(f + 1) % 4]
        moves.append(a if a @ a <= b @ b else b)
    moves = np.stack(moves)
    got = enc._outside_scatter(pairs, x, y)
    np.testing.assert_allclose(got, 3.0 * moves.T @ moves / len(moves))
    assert enc.config()["uses_outside"] == {"sets": ["a", "b"], "models": len(outside) + 1}
    enc.use_outside(outside[:1], [(7,)])
    assert enc._outside_scatter(pairs, x, y) is None


def test_outside_changes_the_discriminant_and_off_leaves_it_as_it_was():
    graphs = toy_graphs(per_family=8)
    y = _family_ids(graphs)
    outside = toy_graphs(per_family=2, seed=3)

    def fitted(**params):
        enc = _outside_encoder(**params)
        enc.use_outside(outside, [(int(f),) for f in _family_ids(outside)])
        enc.fit(Trainer("cpu", 0, progress=False), graphs, Labels(y, y, 4))
        return enc.projection.numpy()

    plain = _fit(graphs, y)[0].projection.numpy()
    np.testing.assert_array_equal(fitted(), plain)  # outside=0: the models given change nothing
    assert not np.allclose(fitted(outside=64.0)[:, :1], plain[:, :1])


def test_outside_off_is_not_named_in_the_config_so_the_shipped_index_rebuilds_as_is():
    """`outside` came after the pinned index: off, the encoder's recorded config is the one before it (the index
    header, and so its sha256, unchanged); on, it is recorded. Other parameters at their default stay named."""
    off, on = _outside_encoder(), _outside_encoder(outside=8.0)
    assert "outside" not in off.config()["params"] and off.config()["params"]["spellings"] == 0.0
    assert on.config()["params"]["outside"] == 8.0 and on.variant() == "outside=8.0"
    assert off.params()["outside"] == 0.0  # still a parameter: set_params and the variant read it
