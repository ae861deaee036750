"""The out-of-family score (`narbench.search_engine.outside`): fitted on validation families at index build
time, stored in the index file, calibrated, and said in one line by the API, the CLI and the explorer."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from narbench.data.dataset import Split
from narbench.datasets.novel import families_of, novel_split
from narbench.search_engine.outside import FEATURES, KEY, NEAREST, OutsideScore, features
from narbench.search_engine.outside_fit import CANDIDATES, FALSE_FLAG, OUTSIDE_FALSE_FLAG, TIE, fit
from tests.family_toys import VOCAB, dataset, family_graphs

HELD_MODEL = "m3"  # the in-family test queries: this model of every family the index keeps


def _toy_world():
    """The toy families, the `novel` split's test and validation families, and a maker of the corpus: every graph
    less the test families and less model m3 of every family, the validation families as its own `novel` split."""
    graphs = family_graphs(families=24)
    split = novel_split(graphs, min_families=4, min_queries=30)
    test, val = set(families_of(graphs, split, "test")), set(families_of(graphs, split, "validation"))
    kept = [g for g in graphs if g.family not in test and g.meta["model"] != HELD_MODEL]
    held = np.array([i for i, g in enumerate(kept) if g.family in val], dtype=np.int64)
    novel = Split(train=np.setdiff1d(np.arange(len(kept)), held), test=held, seed=0, test_size=0.0, name="novel",
                  subsets={"validation": np.arange(len(held))})
    return graphs, test, val, lambda: dataset(kept, {"novel": novel})


@pytest.fixture(scope="module")
def world():
    """A `wl` index of the toy families less the `novel` test families and less model m3 of every family,
    its score fitted on the `novel` validation families; and (positives, in-family queries)."""
    from narbench.search_engine.index_build import IndexConfig, build_index

    graphs, test, val, corpus = _toy_world()
    index = build_index(IndexConfig(encoder="wl", progress=False), dataset=corpus())
    positives = [g for g in graphs if g.family in test]
    in_family = [g for g in graphs if g.meta["model"] == HELD_MODEL and g.family not in test | val]
    return index, positives, in_family


def _scores(index, graphs):
    from narbench.search_engine.outside import stored
    from narbench.search_engine.outside_fit import query_features

    score = stored(index)
    return score.scores(query_features(index, graphs)), score.threshold


def test_the_score_fitted_on_validation_families_tells_test_families_from_new_models(world):
    from sklearn.metrics import roc_auc_score

    index, positives, in_family = world
    entry = index.header[KEY]
    assert tuple(entry["features"]) in CANDIDATES and entry["validation"]["families"] == 4
    assert set(entry["validation"]["cv_auroc"]) == {",".join(c) for c in CANDIDATES}
    pos, threshold = _scores(index, positives)
    neg, _ = _scores(index, in_family)
    assert roc_auc_score([1] * len(pos) + [0] * len(neg), np.concatenate([pos, neg])) >= 0.9
    assert (pos >= threshold).mean() >= 0.8 and (neg >= threshold).mean() <= 0.2


def test_the_threshold_flags_the_share_of_in_family_validation_queries_it_is_set_for():
    rng = np.random.default_rng(0)
    n = 400
    y = np.array([1] * n + [0] * n)
    x = rng.normal(size=(2 * n, len(FEATURES)))
    x[:, FEATURES.index("agree")] -= 1.5 * y  # only `agree` tells the sides apart: lower when no family fits
    groups = [f"f{i % 40}" if t else f"g{i % 40}" for i, t in enumerate(y)]
    score = fit(x, y, groups)
    assert "agree" in score.features and score.coef[score.features.index("agree")] < 0
    p = score.scores(x)
    assert abs((p[y == 0] >= score.threshold).mean() - FALSE_FLAG) <= 2 / n
    assert score.validation["false_flagged"] == pytest.approx((p[y == 0] >= score.threshold).mean(), abs=1e-4)
    # calibrated at even odds: among the queries scored about p, a share of about p are out of family
    for lo, hi in ((0.1, 0.3), (0.4, 0.6), (0.7, 0.9)):
        band = (p >= lo) & (p < hi)
        assert band.sum() > 20 and lo - 0.1 <= y[band].mean() <= hi + 0.1


def test_outside_models_of_a_known_family_bound_the_threshold_too():
    # `wildval`'s in-family models (kind "outside") score higher than the held-out models: fitted without them the
    # flag fires on far more than 10% of them; with them, on at most 10%, and the record says so
    rng = np.random.default_rng(1)
    n, m = 400, 60
    y = np.array([1] * n + [0] * n + [0] * m + [1] * 10)
    kinds = np.array(["family"] * n + ["model"] * n + ["outside"] * (m + 10), dtype=object)
    x = rng.normal(size=(len(y), len(FEATURES)))
    x[:, FEATURES.index("agree")] -= 1.5 * y + 1.0 * (kinds == "outside") * (y == 0)
    groups = [f"f{i % 40}" for i in range(len(y))]
    p_without = fit(x, y, groups, kinds=kinds, outside_false_flag=1.0)
    p_with = fit(x, y, groups, kinds=kinds)
    outside = (kinds == "outside") & (y == 0)
    assert (p_without.scores(x)[outside] >= p_without.threshold).mean() > 0.2
    flagged = (p_with.scores(x)[outside] >= p_with.threshold).mean()
    assert flagged <= OUTSIDE_FALSE_FLAG + 1 / m and p_with.threshold > p_without.threshold
    assert p_with.validation["outside_false_flagged"] == pytest.approx(flagged, abs=1e-4)
    assert p_with.validation["in_family_outside"] == m and p_with.validation["outside_none"] == 10


def test_features_read_the_first_hits():
    f = features([0.95, 0.9, 0.5], ["a", "a", "b"], query_nodes=9, hit_nodes=19, nearest=[0.99, 0.5, 0.5])
    assert f["top1"] == 0.95 and f["gap"] == pytest.approx(0.45) and f["agree"] == pytest.approx(2 / 3)
    assert f["families"] == 2 and f["margin"] == pytest.approx(0.45) and f["size"] == pytest.approx(math.log(2))
    assert f["lead"] == pytest.approx(-0.04) and f["lead_mean"] == pytest.approx((-0.04 + 0.4 + 0.0) / 3)
    assert features([1.0003], ["a"], 1, 1)["top1"] == 1.0  # as a hit shows it: clipped


def test_the_score_travels_in_the_index_file_and_a_damaged_entry_is_one_line(world, tmp_path):
    from narbench.cli import main
    from narbench.search_engine.index import IndexFileError
    from narbench.search_engine.index_file import read_index, write_index

    index = world[0]
    path = tmp_path / "toy.nari"
    write_index(index, path)
    assert read_index(path).header[KEY] == json.loads(json.dumps(index.header[KEY]))
    assert OutsideScore.from_header(read_index(path).header[KEY]) == OutsideScore.from_header(index.header[KEY])
    entry = index.header[KEY]
    for bad in ({**entry, "coef": [1.0] * (len(entry["features"]) + 1)}, {**entry, "features": ["pickle"]},
                {**entry, "threshold": None}, {**entry, "scale": [0.0] * len(entry["features"])}, "x"):
        damaged = type(index)({**index.header, KEY: bad}, index.arrays)
        write_index(damaged, path)
        with pytest.raises(IndexFileError, match="out_of_family"):
            read_index(path)
    relative = {**entry, "features": ["lead"], "mean": [0.0], "scale": [1.0], "coef": [-1.0]}
    write_index(type(index)({**index.header, KEY: relative}, {k: v for k, v in index.arrays.items() if k != NEAREST}),
                path)
    with pytest.raises(IndexFileError, match="nearest_other"):
        read_index(path)
    assert main(["search", "fam0/m0/v0", "--index", str(path)]) == 2


def _graph_file(tmp_path, graph):
    from narbench.data.store import write_graphs

    path = tmp_path / f"{graph.family}.narg"
    write_graphs(path, [graph], VOCAB, {})
    return path


def test_cli_api_and_explorer_say_no_family_fits_and_still_list_the_hits(world, tmp_path, capsys):
    import narbench
    from narbench.cli import main
    from narbench.explorer.searching import Searcher
    from narbench.search_engine.index_file import write_index

    index, positives, in_family = world
    path = tmp_path / "toy.nari"
    write_index(index, path)
    new, known = _graph_file(tmp_path, positives[0]), _graph_file(tmp_path, in_family[0])
    result = narbench.search(str(new), index=index, progress=False)
    assert result.no_family_fits and result.out_of_family >= index.header[KEY]["threshold"] and len(result) == 10
    assert str(result).splitlines()[-1].startswith("no family in the index fits: out-of-family score")
    assert main(["search", str(new), "--index", str(path), "-k", "3"]) == 0
    out = capsys.readouterr().out
    assert out.count("no family in the index fits") == 1 and out.count("fam") >= 3
    assert main(["search", str(new), "--index", str(path), "-k", "3", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["no_family_fits"] is True and data["out_of_family"] == result.out_of_family and len(data["hits"]) == 3
    assert main(["search", str(known), "--index", str(path), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["no_family_fits"] is False and data["out_of_family"] < index.header[KEY]["threshold"]
    shown = Searcher(index).search_upload(new.read_bytes(), "new.narg", k=5)
    assert shown["no_family_fits"] is True and len(shown["hits"]) == 5


def test_an_index_without_a_novel_split_has_no_score():
    from narbench.search_engine.engine import search
    from narbench.search_engine.index_build import IndexConfig, build_index

    graphs = family_graphs(families=6)
    index = build_index(IndexConfig(encoder="wl", progress=False), dataset=dataset(graphs, {}))
    assert KEY not in index.header
    result = search(graphs[0].name, index=index, progress=False)
    assert result.out_of_family is None and not result.no_family_fits and "no family" not in str(result)


def test_validation_queries_treat_a_graph_that_keeps_several_families_by_all_of_them():
    """real 2.3: a graph of a held-out family that also keeps a corpus family is no out-of-family positive (a
    family of the corpus fits it), and a corpus graph keeping a held-out family leaves the corpus with it."""
    from narbench.search_engine.outside_validation import validation_queries

    graphs = family_graphs(families=12)
    split = novel_split(graphs, min_families=2, min_queries=10)
    val = families_of(graphs, split, "validation")
    kept_family = next(g.family for g in graphs if g.family not in val and g.family not in families_of(graphs, split, "test"))
    pos_shared = next(i for i, g in enumerate(graphs) if g.family == val[0])
    corpus_shared = next(i for i, g in enumerate(graphs) if g.family == kept_family and g.meta["model"] == "m0")
    graphs[pos_shared].meta["families"] = [val[0], kept_family]
    graphs[corpus_shared].meta["families"] = [kept_family, val[1]]
    ds = dataset(graphs, {"novel": split})
    v = validation_queries(ds, graphs)
    positives = [g.name for g, y in zip(v.queries, v.labels) if y]
    assert graphs[pos_shared].name not in positives and positives  # its other family is in the corpus
    assert sum(g.family in val for g in graphs) - 1 == len(positives)
    assert graphs[corpus_shared].name not in {g.name for g in v.corpus.graphs}  # it keeps a held-out family
    assert not {f for g in v.corpus.graphs for f in g.families} & set(val)


def _copy_and_outside(rng, n: int, m: int):
    """A copy's queries (`n` of held-out families, whose first cosine is lower, and `n` in-family, in 40 groups) and
    `m` fitting and `m // 2` `none` outside models, their features random: (x, y, groups, fits, xs)."""
    y = np.array([1] * n + [0] * n)
    x = rng.normal(size=(2 * n, len(FEATURES)))
    x[:, FEATURES.index("top1")] -= 1.0 * y
    fits = np.array([True] * m + [False] * (m // 2))
    return x, y, [f"f{i % 40}" for i in range(2 * n)], fits, rng.normal(size=(len(fits), len(FEATURES)))


def test_models_from_elsewhere_choose_the_features_and_the_threshold_when_given():
    """In the copy `lead` tells held-out families apart only beside `top1` and with the sign reversed from code
    from elsewhere (issue 59's `wildval`): cross-validated on the copy the fit reads it; given the outside models
    searched in the index (`choose_on`), the set that ranks them best is kept and the flag fires where it tells
    their `none` models from their fitting ones best, never below the copy's own bounds."""
    rng = np.random.default_rng(2)
    m = 60
    x, y, groups, fits, xs = _copy_and_outside(rng, 400, m)
    top1, lead = FEATURES.index("top1"), FEATURES.index("lead")
    x[:, lead] += 1.5 * y + 0.5 * x[:, top1]  # beside top1, a higher lead reads "held out" in the copy
    xs[:, top1] -= 1.2 * ~fits
    xs[:, lead] -= 1.5 * ~fits  # outside, `none` models lead less: the copy's sign is wrong here
    plain = fit(x, y, groups)
    chosen = fit(x, y, groups, choose_on=(xs, fits))
    assert "lead" in plain.features and "lead" not in chosen.features
    record = chosen.validation["chosen_on"]
    best = max(record["auroc"].values())  # the first candidate, smallest first, within TIE of the best
    assert chosen.features == next(c for c in CANDIDATES if record["auroc"][",".join(c)] >= best - TIE)
    ps = chosen.scores(xs)
    gain = lambda t: (ps[~fits] >= t).mean() - (ps[fits] >= t).mean()  # noqa: E731
    bound = float(np.quantile(chosen.scores(x)[y == 0], 1.0 - FALSE_FLAG))
    assert chosen.threshold >= round(bound, 6) - 1e-6
    if chosen.threshold > bound + 1e-6:  # the outside models set it: no other threshold tells them apart better
        assert all(gain(chosen.threshold) >= gain(t) - 1e-9 for t in np.unique(ps) if t >= bound)
    assert record["fit_flagged"] == int((ps[fits] >= chosen.threshold).sum())
    assert record["none_flagged"] == int((ps[~fits] >= chosen.threshold).sum())
    assert (record["fit"], record["none"]) == (m, m // 2)


def test_a_score_refitted_on_outside_models_reads_the_fixed_features_and_flags_few_of_their_fitting_ones():
    """`refit_on` (real 2.3: `wildval` 1-4's models searched in the index): `REFIT`'s regression fitted on them, no
    choice among candidates, flagging at most `OUTSIDE_FALSE_FLAG` of their fitting models, never below the bound of
    the copy's held-out models."""
    from narbench.search_engine.outside_fit import REFIT

    m = 120
    x, y, groups, fits, xs = _copy_and_outside(np.random.default_rng(3), 400, m)
    top1, gap = FEATURES.index("top1"), FEATURES.index("gap")
    xs[:, top1] -= 1.5 * ~fits
    xs[:, gap] += 0.5 * ~fits
    score = fit(x, y, groups, refit_on=(xs, fits), choose_on=(xs, fits))
    assert score.features == REFIT and "chosen_on" not in score.validation
    ps = score.scores(xs)
    bound = float(np.quantile(score.scores(x)[y == 0], 1.0 - FALSE_FLAG))
    assert score.threshold >= round(bound, 6) - 1e-6
    assert (ps[fits] >= score.threshold).mean() <= OUTSIDE_FALSE_FLAG + 1e-9
    if score.threshold > bound + 1e-6:  # the outside models set it: the lowest threshold within their share
        lower = [t for t in np.unique(ps) if t < score.threshold - 1e-6 and t >= bound]
        assert all((ps[fits] >= t).mean() > OUTSIDE_FALSE_FLAG for t in lower)
    record = score.validation["fitted_on"]
    assert (record["fit"], record["none"]) == (m, m // 2)
    with pytest.raises(ValueError, match="must include fitting and `none` ones; got 120 fitting of 120"):
        fit(x, y, groups, refit_on=(xs[fits], fits[fits]))
    assert record["fit_flagged"] == int((ps[fits] >= score.threshold).sum())
    assert record["none_flagged"] == int((ps[~fits] >= score.threshold).sum())


def test_the_index_build_chooses_the_score_on_the_datasets_outside_models_when_it_has_them():
    """`GraphDataset.outside` (real 2.3: `wildval`) reaches the build: its models, searched in the index being built,
    choose the score's features and threshold, and the header's record says how many fit and how many were flagged;
    a dataset without them is scored as before, and one whose outside models are in another vocabulary too."""
    from narbench.search_engine.index_build import IndexConfig, build_index
    from narbench.search_engine.outside import stored
    from narbench.search_engine.outside_fit import query_features

    graphs, test, val, corpus = _toy_world()
    outside = [g for g in graphs if g.family in test][::7] + [g for g in graphs if g.meta["model"] == HELD_MODEL
                                                             and g.family not in test | val][::3]
    expected = [() if g.family in test else (g.family,) for g in outside]
    cfg = IndexConfig(encoder="wl", progress=False)
    plain = build_index(cfg, dataset=corpus())
    with_outside = corpus()
    with_outside.outside = lambda: (outside, list(VOCAB), expected)
    chosen = build_index(cfg, dataset=with_outside)
    other_vocab = corpus()
    other_vocab.outside = lambda: (outside, [*VOCAB, "extra"], expected)
    assert "chosen_on" not in stored(plain).validation
    assert "chosen_on" not in stored(build_index(cfg, dataset=other_vocab)).validation
    record, score = stored(chosen).validation["chosen_on"], stored(chosen)
    fits = np.array([bool(f) for f in expected])
    assert (record["fit"], record["none"]) == (int(fits.sum()), int((~fits).sum()))
    p = score.scores(query_features(chosen, outside))
    assert record["fit_flagged"] == int((p[fits] >= score.threshold).sum())
    assert record["none_flagged"] == int((p[~fits] >= score.threshold).sum())


def test_the_threshold_bounds_each_kind_of_in_family_query_by_its_own_share():
    """Held-out sources (a known family from another codebase) score higher than held-out models: the flag
    fires on at most SOURCE_FALSE_FLAG of them and at most FALSE_FLAG of the models, the tighter bound binding."""
    from narbench.search_engine.outside_fit import SOURCE_FALSE_FLAG

    rng = np.random.default_rng(1)
    n = 400
    kinds = np.array(["family"] * n + ["model"] * n + ["source"] * n, dtype=object)
    y = (kinds == "family").astype(np.int64)
    x = rng.normal(size=(3 * n, len(FEATURES)))
    x[:, FEATURES.index("agree")] -= 2.0 * y + 1.0 * (kinds == "source")  # sources sit between the two
    groups = [f"f{i % 40}" for i in range(3 * n)]
    before, now = fit(x[kinds != "source"], y[kinds != "source"], [g for g, k in zip(groups, kinds) if k != "source"]), \
        fit(x, y, groups, kinds=kinds)
    p = now.scores(x)
    p_before = before.scores(x)
    model, source = (p[kinds == "model"] >= now.threshold).mean(), (p[kinds == "source"] >= now.threshold).mean()
    assert model <= FALSE_FLAG + 1 / n and source <= SOURCE_FALSE_FLAG + 1 / n
    assert abs(source - SOURCE_FALSE_FLAG) <= 2 / n  # the sources' bound binds here
    assert (p_before[kinds == "source"] >= before.threshold).mean() > 2 * SOURCE_FALSE_FLAG  # it did not bind before
    assert now.validation["source_false_flagged"] == pytest.approx(source, abs=1e-4)
    assert now.validation["in_family_sources"] == n and now.validation["in_family"] == n
    assert "source_false_flagged" not in before.validation


def test_validation_queries_hold_out_a_source_of_families_that_two_sources_implement():
    from narbench.search_engine.outside_validation import validation_queries

    graphs = family_graphs(families=12)
    split = novel_split(graphs, min_families=2, min_queries=10)
    ds = dataset(graphs, {"novel": split})
    assert "source" not in validation_queries(ds, graphs).kinds.tolist()  # one source: no such hold-out
    for g in graphs:  # models m0 and m1 from one zoo, m2 and m3 from another
        g.source = "zoo-a" if g.meta["model"] in ("m0", "m1") else "zoo-b"
    v = validation_queries(ds, graphs)
    held = [g for g, k in zip(v.queries, v.kinds) if k == "source"]
    corpus = {g.name for g in v.corpus.graphs}
    assert held and not {g.name for g in held} & corpus
    for g in held:  # its family stays in the corpus, written by the other source only
        others = [c for c in v.corpus.graphs if c.family == g.family]
        assert others and all(c.source != g.source for c in others)
    assert list(v.labels) == [int(k == "family") for k in v.kinds]


def test_validation_queries_take_outside_models_by_whether_the_corpus_copy_holds_their_family():
    """`wildval`'s models join as kind `outside`: in-family when an expected family is in the copy, a positive
    when none is (`none`, or only a held-out family); the corpus copy is unchanged by them."""
    import copy

    from narbench.search_engine.outside_validation import validation_queries

    graphs = family_graphs(families=12)
    split = novel_split(graphs, min_families=2, min_queries=10)
    val = families_of(graphs, split, "validation")
    ds = dataset(graphs, {"novel": split})
    base = validation_queries(ds, graphs)
    kept = next(f for f in sorted({g.family for g in base.corpus.graphs}))
    outside = [copy.deepcopy(graphs[0]) for _ in range(3)]
    for i, g in enumerate(outside):
        g.name = f"wildval/pkg/m{i}"
    v = validation_queries(ds, graphs, outside=(outside, [(kept,), (), (val[0],)]))
    assert [g.name for g in v.corpus.graphs] == [g.name for g in base.corpus.graphs]
    tail = len(base.queries)
    assert list(v.kinds[tail:]) == ["outside"] * 3 and list(v.labels[tail:]) == [0, 1, 1]
    assert v.groups[tail:] == [kept, "wildval/pkg/m1", val[0]]
    assert list(v.labels[:tail]) == list(base.labels)
