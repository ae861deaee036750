"""The out-of-family score's family prior (`narbench.search_engine.outside.FamilyPrior`): of the outside models whose
first hit is of a family, the share that fit no family, smoothed; counted at index build time from the validation
sets, each of them fitted on by the others' counts, stored in the header, read by every search."""

from __future__ import annotations

import json

import numpy as np
import pytest

from narbench.search_engine.outside import FEATURES, KEY, FamilyPrior, OutsideScore, features, missing_kinds
from tests.test_out_of_family import HELD_MODEL, _toy_world


def test_a_familys_prior_is_its_share_of_models_that_fit_nothing_pulled_toward_the_share_over_all():
    first = ["vgg"] * 8 + ["bert"] * 10 + ["gpt2"] * 2
    none = [True] * 6 + [False] * 2 + [False] * 10 + [True, False]
    prior = FamilyPrior.counted(first, none, strength=4.0)
    assert prior.counts == {"bert": (0, 10), "gpt2": (1, 2), "vgg": (6, 8)}
    assert prior.default == pytest.approx(7 / 20)
    assert prior("vgg") == pytest.approx((6 + 4 * 0.35) / 12)
    assert prior("bert") == pytest.approx((0 + 4 * 0.35) / 14)
    assert prior("never-hit") == pytest.approx(0.35)
    assert prior("bert") < prior("gpt2") < prior("vgg")
    unsmoothed = FamilyPrior.counted(first, none, strength=0.0)
    assert unsmoothed("vgg") == pytest.approx(0.75) and unsmoothed("bert") == 0.0


def test_a_model_counted_in_the_prior_is_valued_by_the_others_alone():
    first = ["vgg"] * 3 + ["bert"] * 3
    none = [True, True, False, False, False, True]
    prior = FamilyPrior.counted(first, none, strength=2.0)
    out = prior.left_out(first, none)
    for i in range(len(first)):
        others = FamilyPrior.counted(first[:i] + first[i + 1 :], none[:i] + none[i + 1 :], strength=2.0)
        assert out[i] == pytest.approx(others(first[i]))
    assert out[0] < prior("vgg") and out[2] > prior("vgg")  # its own label no longer pulls it
    lone = FamilyPrior.counted(["vgg", "bert"], [True, False], strength=1.0)
    assert lone.left_out(["vgg"], [True])[0] == pytest.approx(0.0)  # the others' share: one fitting model


def test_the_prior_is_stored_in_the_header_and_a_damaged_one_is_named():
    prior = FamilyPrior.counted(["vgg", "vgg", "bert"], [True, False, False], strength=30.0)
    names = ("top1", "gap", "prior")
    score = OutsideScore(names, (0.7, 0.1, 0.3), (0.1, 0.05, 0.1), (-2.0, 0.5, 1.0), 0.1, 0.6, prior=prior)
    entry = json.loads(json.dumps(score.to_header()))
    assert entry["prior"] == {"counts": {"bert": [0, 1], "vgg": [1, 2]}, "strength": 30.0}
    back = OutsideScore.from_header(entry)
    assert back == score and back.prior("vgg") == prior("vgg")
    plain = OutsideScore(("top1",), (0.7,), (0.1,), (-2.0,), 0.0, 0.5)
    assert "prior" not in plain.to_header()  # an index without it keeps its header's bytes
    for damage, message in (({"prior": None}, "holds no 'prior' counts"),
                            ({"prior": {"counts": {"vgg": [3, 2]}, "strength": 1.0}}, "counts of 'vgg'"),
                            ({"prior": {"counts": {"vgg": [0, 2]}, "strength": -1}}, "'strength' >= 0"),
                            ({"prior": {"counts": [], "strength": 1.0}}, "'counts' \\(an object\\)")):
        with pytest.raises(ValueError, match=message):
            OutsideScore.from_header(entry | damage)


def test_two_queries_with_the_same_cosines_differ_by_their_first_hits_family():
    prior = FamilyPrior.counted(["vgg"] * 10 + ["bert"] * 10, [True] * 8 + [False] * 2 + [False] * 10, strength=3.0)
    sims = [0.8, 0.78, 0.75, 0.7, 0.7, 0.69, 0.68, 0.66, 0.65, 0.6]
    on_vgg = features(sims, ["vgg"] * 10, 40, 42, None, prior)
    on_bert = features(sims, ["bert"] * 10, 40, 42, None, prior)
    assert {k: v for k, v in on_vgg.items() if k != "prior"} == {k: v for k, v in on_bert.items() if k != "prior"}
    assert on_vgg["prior"] == pytest.approx(prior("vgg")) and features(sims, ["vgg"] * 10, 40, 42)["prior"] == 0.0
    score = OutsideScore(("top1", "gap", "prior"), (0.7, 0.1, 0.4), (0.1, 0.05, 0.3), (-1.0, 0.2, 2.0), 0.0, 0.5,
                         prior=prior)
    assert score(on_vgg) >= score.threshold > score(on_bert)


def test_the_index_build_counts_the_prior_from_every_outside_set_and_fits_on_the_left_out_values(tmp_path):
    """`GraphDataset.outside_sets` (real 2.3: every validation set) reaches the build: the score reads `REFIT`, its
    prior counts each outside model once by its first hit's family in the index, and a search reads it."""
    from narbench.search_engine.index_build import IndexConfig, build_index
    from narbench.search_engine.outside import judge, stored
    from narbench.search_engine.outside_fit import PRIOR_STRENGTH, REFIT, REFIT_SETS, query_features
    from tests.family_toys import VOCAB

    graphs, test, val, corpus = _toy_world()
    outside = [g for g in graphs if g.family in test][::5] + [g for g in graphs if g.meta["model"] == HELD_MODEL
                                                             and g.family not in test | val][::2]
    expected = [() if g.family in test else (g.family,) for g in outside]
    asked = []
    ds = corpus()
    ds.outside_sets = lambda names, upto=None: (asked.append((names, upto)) or (outside, list(VOCAB), expected))
    index = build_index(IndexConfig(encoder="wl", progress=False), dataset=ds)
    score = stored(index)
    assert asked and asked[0][0] == REFIT_SETS and asked[0][1] == index.canonical_version
    assert score.features == REFIT and "prior" in REFIT and score.prior.strength == PRIOR_STRENGTH
    first: list = []
    query_features(index, outside, first=first)
    want = FamilyPrior.counted(first, [not f for f in expected], PRIOR_STRENGTH)
    assert score.prior.counts == want.counts and sum(t for _, t in want.counts.values()) == len(outside)
    record = score.validation["fitted_on"]
    assert (record["fit"], record["none"]) == (sum(map(bool, expected)), sum(not f for f in expected))
    assert index.header[KEY]["prior"]["counts"] == {f: list(c) for f, c in want.counts.items()}
    x = query_features(index, outside, prior=score.prior)
    assert np.allclose(x[:, FEATURES.index("prior")], [score.prior(f) for f in first])
    assert np.array_equal(query_features(index, outside), x)  # by default the prior the index stores, as a search
    assert not query_features(index, outside, prior=None)[:, FEATURES.index("prior")].any()
    with pytest.raises(ValueError, match="prior must be a FamilyPrior, None or 'stored'"):
        query_features(index, outside, prior="mine")
    from narbench.data.store import write_graphs
    from narbench.search_engine.engine import search

    write_graphs(tmp_path / "q.narg", [outside[0]], list(VOCAB), {"name": "q"})
    result = search(str(tmp_path / "q.narg"), 10, index=index, progress=False, order="cosine")
    kinds = {VOCAB[int(o)] for o in outside[0].ops.tolist()}
    assert judge(index, result.hits, outside[0].num_nodes, kinds)[0] == result.out_of_family
    assert "miss_kinds" in REFIT and x[0, FEATURES.index("miss_kinds")] == missing_kinds(
        kinds, index.op_counts(index.row_of(result.hits[0].name)))
    assert result.out_of_family == pytest.approx(score.scores(x[:1])[0], abs=1e-3)


def test_missing_kinds_is_the_share_of_the_hits_op_kinds_the_query_lacks():
    assert missing_kinds({"conv", "relu"}, {"conv": 4, "relu": 3, "layernorm": 2, "gelu": 1}) == 0.5
    assert missing_kinds({"lstm", "embedding"}, ["lstm"]) == 0.0 and missing_kinds({"lstm"}, {}) == 0.0
    f = features([0.9, 0.8], ["a", "a"], 10, 10, kinds=({"lstm"}, {"lstm": 2, "conv": 1}))
    assert f["miss_kinds"] == 0.5 and features([0.9], ["a"], 10, 10)["miss_kinds"] == 0.0


def test_an_index_that_read_outside_models_fits_its_score_on_them_searched_where_their_set_was_not_read(monkeypatch):
    """graf-lda's `outside` scatter reads validation sets' models, so the out-of-family score is fitted on each one
    searched in an index built the same way without its set's fold (`outside_fit.cross_fitted`); a set the scatter did
    not read is searched in the index itself."""
    import dataclasses

    from narbench.search_engine import outside_fit
    from narbench.search_engine.index_build import IndexConfig, build_index, scatter_index
    from narbench.search_engine.outside_fit import cross_fitted, query_features
    from narbench.search_engine.outside_models import scatter_sets
    from tests.family_toys import VOCAB

    graphs, test, val, corpus = _toy_world()
    models = [g for g in graphs if g.meta["model"] == HELD_MODEL and g.family not in test | val]
    sets = {"s1": models[0::3], "s2": models[1::3], "s3": models[2::3]}

    def outside_sets(names, upto=None):
        chosen = [g for n in names for g in sets[n]]
        return chosen, list(VOCAB), [(g.family,) for g in chosen]

    monkeypatch.setattr(outside_fit, "REFIT_SETS", ("s1", "s2", "s3"))
    ds = corpus()
    ds.outside_sets = outside_sets
    cfg = IndexConfig(encoder="graf-lda", params={"outside": 8.0}, progress=False)
    index = build_index(cfg, dataset=ds)
    assert scatter_sets(index) == ("s1", "s2", "s3")
    first: list = []
    got = cross_fitted(cfg, ds, index, ("s1", "s2"), first, scatter_index, folds=2)

    def searched_in(outside_sets_read, name):
        fold = scatter_index(dataclasses.replace(cfg), ds, outside_sets_read)
        return query_features(fold, sets[name], prior=None)

    n1, n2 = len(sets["s1"]), len(sets["s2"])
    np.testing.assert_allclose(got[:n1], searched_in(("s2",), "s1"))
    np.testing.assert_allclose(got[n1:n1 + n2], searched_in(("s1",), "s2"))
    np.testing.assert_allclose(got[n1 + n2:], query_features(index, sets["s3"], prior=None))
    assert len(first) == len(got) == sum(map(len, sets.values()))
    # searched in the index that read them, the same models sit nearer their families than the folds put them
    assert not np.allclose(got[:n1], query_features(index, sets["s1"], prior=None))
