"""A fused index (`narbench.search_engine.fusion`, issue 59 item 4): the graf-lda discriminant's leading axes
beside WL's hashed counts, so that search's cosine is exactly (1 - share) graf-lda's + share WL's, with no
code at search time. Small data the tests build (`tests.conftest.toy_graphs`)."""

from __future__ import annotations

import numpy as np
import pytest

from narbench.search_engine.fusion import Fusion, combine, split_params

SHARE, DIMS, WL_DIM = 0.4, 2, 16
FUSE = {"holdout": "family", "fuse_wl": SHARE, "fuse_dims": DIMS, "fuse_wl_dim": WL_DIM}


@pytest.fixture(scope="module")
def toy():
    from narbench.data.dataset import GraphDataset, stratified_split
    from tests.conftest import toy_graphs

    graphs = toy_graphs()
    split = stratified_split([g.family for g in graphs], test_size=0.25, seed=0)
    return GraphDataset("toy", "0", [f"op{i}" for i in range(8)], graphs, "0" * 64, split)


@pytest.fixture(scope="module")
def fused(toy, tmp_path_factory):
    """(the fused index as written and read back, its parts' cosines over the corpus, the corpus graphs)."""
    from narbench.search_engine.index_build import IndexConfig, build_index
    from narbench.search_engine.index_file import read_index, write_index

    path = tmp_path_factory.mktemp("fused") / "toy.nari"
    write_index(build_index(IndexConfig(encoder="graf-lda", profile="smoke", params=FUSE, progress=False),
                            dataset=toy), path)
    return read_index(path)


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a = a / np.maximum(np.linalg.norm(a, axis=1, keepdims=True), 1e-12)
    b = b / np.maximum(np.linalg.norm(b, axis=1, keepdims=True), 1e-12)
    return a @ b.T


def test_combined_rows_score_the_weighted_sum_of_the_two_cosines():
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((6, 5)), rng.standard_normal((6, 9)) * 100  # scale does not matter
    b[2] = 0  # a graph with nothing in one part scores 0 there
    fused = combine(a, b, 0.3).astype(np.float64)
    assert fused.shape == (6, 14)
    np.testing.assert_allclose(fused @ fused.T, 0.7 * cosines(a, a) + 0.3 * cosines(b, b), atol=1e-6)
    one = combine(a, b, 0.3)  # each row unit length where both parts are nonzero
    np.testing.assert_allclose(np.linalg.norm(np.delete(one, 2, axis=0), axis=1), 1.0, atol=1e-6)


def test_a_fused_index_stores_its_fusion_and_only_the_axes_it_uses(fused, toy):
    assert fused.header["fusion"]["share"] == SHARE and fused.header["fusion"]["dims"] == DIMS
    assert "fuse_wl" not in fused.header["encoder"]["params"]  # the encoder's own parameters only
    assert fused.arrays["embeddings"].shape == (len(toy.core_graphs), DIMS + WL_DIM)
    assert fused.arrays["weight:projection"].shape[1] == DIMS  # the discriminant cut to its leading axes
    assert "projection" not in fused.arrays  # never randomly projected
    assert f"graf-lda (holdout=family) fused with wl at {SHARE:g} on toy 0" in fused.describe()


def test_an_index_without_fusion_records_none(toy):
    from narbench.search_engine.index_build import IndexConfig, build_index

    plain = build_index(IndexConfig(encoder="graf-lda", profile="smoke", params={"holdout": "family"},
                                    progress=False), dataset=toy)
    assert "fusion" not in plain.header and "fused" not in plain.describe()


def test_search_scores_are_exactly_the_weighted_cosines_of_the_parts(fused, toy, tmp_path):
    """The cosine `narbench.search` reports for every hit is (1 - share) times the discriminant's cosine plus
    share times WL's, computed here from the two encoders apart, and the hits come in that order."""
    from narbench.data.store import write_graphs
    from narbench.search_engine.engine import search
    from narbench.train.trainer import Trainer

    graphs = toy.core_graphs
    lda, wl = fused.encoder().parts(Trainer("cpu", 0, progress=False), graphs)
    assert lda.shape[1] == DIMS and wl.shape[1] == WL_DIM
    expected = (1 - SHARE) * cosines(lda, lda) + SHARE * cosines(wl, wl)
    name = {g.name: i for i, g in enumerate(graphs)}
    for q in (0, 17, 30):
        path = tmp_path / f"q{q}.narg"
        write_graphs(path, [graphs[q]], toy.vocab, {})
        hits = search(str(path), len(graphs), index=fused, progress=False, order="cosine").hits
        scores = np.array([expected[q, name[h.name]] for h in hits])
        np.testing.assert_allclose([h.similarity for h in hits], scores, atol=2e-3)  # float16 rows, 3 decimals
        assert np.all(np.diff(scores) <= 2e-3)  # ranked by the fused score (ties within the rows' precision)


def test_a_query_embeds_as_the_corpus_row_it_equals(fused, toy):
    graphs = toy.core_graphs
    rows = [fused.row_of(g.name) for g in graphs]
    assert np.abs(fused.embed(graphs) - fused.embeddings[rows]).max() < 2e-3  # float16 rows


@pytest.mark.parametrize("encoder, params, message", [
    ("wl", {"fuse_wl": 0.5}, "fuses an encoder whose axes come in order of importance (graf-lda), not 'wl'"),
    ("graf-lda", {"fuse_wl": 1.0}, "fuse_wl (WL's share of the score) must be a number between 0 and 1"),
    ("graf-lda", {"fuse_dims": 64}, "fuse_dims need fuse_wl"),
    ("graf-lda", {"fuse_wl": 0.5, "fuse_wl_dim": 0}, "fuse_wl_dim must be a positive integer, got 0"),
])
def test_a_bad_fusion_is_named(encoder, params, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        split_params(encoder, params)


def test_a_fused_index_wider_than_max_dim_is_refused_before_loading_data(monkeypatch):
    import narbench.data.dataset as dataset
    from narbench.search_engine.index_build import IndexConfig, build_index

    monkeypatch.setattr(dataset, "load_dataset", lambda *a, **k: pytest.fail("the data was loaded"))
    with pytest.raises(ValueError, match=r"fuse_dims \+ fuse_wl_dim \(256\) must be at most max_dim \(128\)"):
        build_index(IndexConfig(encoder="graf-lda", params={"fuse_wl": 0.5}, max_dim=128, progress=False))


def test_index_build_says_a_bad_fusion_in_one_line(tmp_path, capsys, monkeypatch):
    from narbench.cli import main

    monkeypatch.setenv("NARBENCH_CACHE", str(tmp_path / "cache"))
    assert main(["index", "build", "--encoder", "wl", "--param", "fuse_wl=0.5", "--no-progress",
                 "--out", str(tmp_path / "x.nari")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "fuse_wl fuses an encoder whose axes come in order" in err[0], err
    assert not (tmp_path / "x.nari").exists()


def test_the_fusion_record_round_trips():
    fusion = Fusion(0.25, 100, 156)
    assert Fusion.from_record(fusion.record()) == fusion and fusion.width == 256
