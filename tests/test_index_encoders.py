"""An index of any registered encoder answers queries: what the encoder fitted on the corpus travels in
the index file (trained weights, and a training-free floor's `Encoder.FITTED` state: an idf, a
standardisation, a feature vocabulary, a choice), so a corpus graph searched as a query embeds to the
row the index stored for it. Before, five floors built an index that failed on its first query."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from narbench.core import registry


@pytest.fixture(scope="module")
def toy():
    from narbench.data.dataset import GraphDataset, stratified_split
    from tests.conftest import toy_graphs

    graphs = toy_graphs()
    split = stratified_split([g.family for g in graphs], test_size=0.25, seed=0)
    return GraphDataset("toy", "0", [f"op{i}" for i in range(8)], graphs, "0" * 64, split)


@pytest.mark.slow  # every registered encoder trained at smoke (about half a minute on 2 cores)
@pytest.mark.parametrize("name", registry.names("encoder"))
def test_an_index_embeds_a_query_as_it_embedded_the_corpus(name, toy, tmp_path):
    from narbench.search_engine.index_build import IndexConfig, build_index
    from narbench.search_engine.index_file import read_index, write_index

    built = build_index(IndexConfig(encoder=name, profile="smoke", progress=False), dataset=toy)
    write_index(built, tmp_path / "toy.nari")
    index = read_index(tmp_path / "toy.nari")  # a fresh encoder, rebuilt from the file alone
    graphs = toy.core_graphs
    rows = [index.row_of(g.name) for g in graphs]
    assert np.abs(index.embed(graphs) - index.embeddings[rows]).max() < 2e-3  # float16 rows


def test_fitted_state_round_trips_through_a_state_dict(toy):
    from narbench.harness.runner import RunConfig, resolve
    from narbench.train.profiles import get_profile
    from narbench.train.trainer import Trainer

    for name in ("wl-tfidf", "ophist-tfidf", "graphstats", "graf", "best-floor"):
        cls, splitter, _ = resolve(RunConfig(encoder=name, dataset="toy"))
        fitted, fresh = (cls(8, 4, get_profile("smoke"), splitter) for _ in range(2))
        assert not fresh.state_dict()  # nothing fitted, nothing to save
        trainer = Trainer("cpu", 0, progress=False)
        fitted.fit(trainer, toy.core_graphs, None)
        with pytest.raises(RuntimeError, match="call fit"):
            fresh.embed(trainer, toy.core_graphs[:2])
        fresh.load_state_dict(fitted.state_dict())
        assert torch.equal(fresh.embed(trainer, toy.core_graphs), fitted.embed(trainer, toy.core_graphs)), name


def test_an_index_of_a_fused_best_floor_embeds_a_query_as_it_embedded_the_corpus(toy, tmp_path):
    """`best-floor` with `fuse` > 1 saves its members (`chosen.<i>.*`) and their weights; the index
    rebuilds the fusion from the file alone."""
    from narbench.search_engine.index_build import IndexConfig, build_index
    from narbench.search_engine.index_file import read_index, write_index

    built = build_index(IndexConfig(encoder="best-floor", profile="smoke", params={"fuse": 3}, progress=False),
                        dataset=toy)
    write_index(built, tmp_path / "toy.nari")
    index = read_index(tmp_path / "toy.nari")
    graphs = toy.core_graphs
    rows = [index.row_of(g.name) for g in graphs]
    assert np.abs(index.embed(graphs) - index.embeddings[rows]).max() < 2e-3  # float16 rows


def test_an_index_records_the_setting_its_encoder_chose(toy, tmp_path):
    """graf-lda chooses its shrinkage and dimensions on an inner hold-out of the corpus; the index header says which
    it chose and every setting's score (and no time, so the same data give the same bytes)."""
    from narbench.search_engine.index_build import IndexConfig, build_index
    from narbench.search_engine.index_file import read_index, write_index

    cfg = IndexConfig(encoder="graf-lda", profile="smoke", params={}, progress=False)
    built = build_index(cfg, dataset=toy)
    write_index(built, tmp_path / "a.nari")
    fit = read_index(tmp_path / "a.nari").header["encoder"]["fit"]
    assert set(fit["picked"]) == {"shrinkage", "dims"}
    assert fit["picked"]["dims"] in (32, 64, 128, 256)
    key = f"shrinkage={fit['picked']['shrinkage']:g},dims={fit['picked']['dims']}"
    assert fit["scores"][key] == max(fit["scores"].values())
    assert "seconds" not in fit
    assert write_index(build_index(cfg, dataset=toy), tmp_path / "b.nari") == write_index(built, tmp_path / "c.nari")
    wl = build_index(IndexConfig(encoder="wl", profile="smoke", params={}, progress=False), dataset=toy)
    assert wl.header["encoder"]["fit"] is None


def test_index_info_says_what_the_encoder_chose(toy, tmp_path, capsys):
    from narbench.cli import main
    from narbench.search_engine.index_build import IndexConfig, build_index
    from narbench.search_engine.index_file import write_index

    for name in ("graf-lda", "wl"):
        write_index(build_index(IndexConfig(encoder=name, profile="smoke", params={}, progress=False), dataset=toy),
                    tmp_path / f"{name}.nari")
    assert main(["index", "info", "--index", str(tmp_path / "graf-lda.nari")]) == 0
    out = capsys.readouterr().out
    assert "chose dims=" in out and "shrinkage=" in out and "on its inner hold-out (ndcg@20," in out
    assert main(["index", "info", "--index", str(tmp_path / "wl.nari")]) == 0
    assert "chose" not in capsys.readouterr().out  # wl chooses nothing
