"""An encoder's NaN or infinite embeddings are refused before retrieval: by `run` (no result file,
one line from the CLI, exit 2), by `narbench index build` and by a search's query embedding."""

from __future__ import annotations

from importlib.metadata import EntryPoint

import pytest
import torch

from narbench.core import registry
from narbench.eval.retrieval import EmbeddingError
from narbench.train.encoder import Encoder

from .conftest import toy_graphs


class NonFiniteEncoder(Encoder):
    """Training-free; call `BAD_CALL` of `embed` (0: the corpus, 1: the queries) gets `BAD_VALUE`
    in its first `BAD_ROWS` rows, every other row is finite."""

    name = "nonfinite"
    trainable = False
    BAD_CALL = 0
    BAD_ROWS = 2
    BAD_VALUE = float("nan")

    def fit(self, trainer, graphs, labels):
        return None

    def embed(self, trainer, graphs):
        calls = self.__dict__.setdefault("_calls", [0])
        out = torch.stack([torch.tensor([g.num_nodes, g.num_edges, 1.0, float(g.ops.sum())]) for g in graphs])
        if calls[0] == self.BAD_CALL:
            out[: self.BAD_ROWS, 1] = self.BAD_VALUE
        calls[0] += 1
        return out


@pytest.fixture
def nonfinite(monkeypatch):
    """Register `NonFiniteEncoder` as the encoder `nonfinite` (an entry point, as a plugin would)."""
    entry_points = registry._entry_points

    def with_nonfinite(kind):
        eps = entry_points(kind)
        if kind == "encoder":
            eps["nonfinite"] = EntryPoint("nonfinite", f"{__name__}:NonFiniteEncoder", registry.GROUPS["encoder"])
        return eps

    monkeypatch.setattr(registry, "_entry_points", with_nonfinite)
    return NonFiniteEncoder


@pytest.mark.parametrize("call, value, side", [(0, float("nan"), "corpus"), (1, float("inf"), "query"),
                                               (1, float("-inf"), "query")])
def test_run_refuses_non_finite_embeddings_and_writes_nothing(nonfinite, monkeypatch, toy_dataset, tmp_path, call,
                                                                value, side):
    from narbench.harness.runner import RunConfig, run

    monkeypatch.setattr(nonfinite, "BAD_CALL", call)
    monkeypatch.setattr(nonfinite, "BAD_VALUE", value)
    with pytest.raises(EmbeddingError) as err:
        run(RunConfig(encoder="nonfinite", profile="smoke", device="cpu", out=str(tmp_path / "out"), progress=False),
            dataset=toy_dataset)
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith("encoder 'nonfinite' returned non-finite embeddings (NaN or inf) for 2 of ")
    assert f" {side} graphs (first: row 0, graph " in message
    assert not list((tmp_path / "out").glob("**/*.json")) and not list((tmp_path / "out").glob("**/*.npz"))


def test_finite_embeddings_run_as_before(nonfinite, monkeypatch, toy_dataset, tmp_path):
    from narbench.harness.runner import RunConfig, run

    monkeypatch.setattr(nonfinite, "BAD_CALL", 5)  # never
    ev = run(RunConfig(encoder="nonfinite", profile="smoke", device="cpu", out=str(tmp_path), progress=False),
             dataset=toy_dataset)
    assert ev.path is not None and ev.path.exists()


def test_cli_says_it_in_one_line_and_exits_2(nonfinite, plugin, capsys, tmp_path):
    from narbench.cli import main

    out = tmp_path / "out"
    code = main(["run", "--encoder", "nonfinite", "--dataset", "toy", "--profile", "smoke", "--no-progress",
                 "--out", str(out)])
    captured = capsys.readouterr()
    lines = [ln for ln in captured.err.splitlines() if ln.strip()]
    assert code == 2 and "Traceback" not in captured.err
    assert len(lines) == 1, captured.err
    assert lines[0].startswith("error: encoder 'nonfinite' returned non-finite embeddings (NaN or inf) for 2 of ")
    assert " corpus graphs" in lines[0]
    assert not out.exists() or not [p for p in out.rglob("*") if p.is_file()]


def _toy_dataset():
    from narbench.data.dataset import GraphDataset, stratified_split

    graphs = toy_graphs()
    split = stratified_split([g.family for g in graphs], test_size=0.25, seed=0)
    return GraphDataset("toy", "0", [f"op{i}" for i in range(8)], graphs, "0" * 64, split)


def test_index_build_refuses_non_finite_corpus_embeddings(nonfinite):
    from narbench.search_engine.index_build import IndexConfig, build_index

    with pytest.raises(EmbeddingError, match=r"for 2 of \d+ corpus graphs"):
        build_index(IndexConfig(encoder="nonfinite", progress=False), dataset=_toy_dataset())


def test_search_refuses_a_non_finite_query_embedding(nonfinite, monkeypatch, capsys, tmp_path):
    import narbench.search_engine.index as index_module
    from narbench.cli import main
    from narbench.data.store import write_graphs
    from narbench.search_engine.engine import search
    from narbench.search_engine.index_build import IndexConfig, build_index
    from narbench.search_engine.index_file import read_index, write_index

    ds = _toy_dataset()
    index = build_index(IndexConfig(encoder="wl", progress=False), dataset=ds)
    path, target = tmp_path / "toy.nari", tmp_path / "q.narg"
    write_index(index, path)
    write_graphs(target, [ds.graphs[0]], ds.vocab, {})
    assert len(search(str(target), index=index, k=3)) == 3  # the wl encoder embeds it

    # the index's encoder, rebuilt for queries, now embeds every graph as NaN
    monkeypatch.setattr(index_module, "_rebuild_encoder", lambda idx: NonFiniteEncoder(len(idx.vocab), 4, None))
    with pytest.raises(EmbeddingError, match=r"encoder 'wl' returned non-finite embeddings \(NaN or inf\) for 1 of 1 "
                                             r"query graphs"):
        search(str(target), index=read_index(path), k=3)
    assert main(["search", str(target), "--index", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("narbench search: error: encoder 'wl' returned non-finite"), err


def test_search_refuses_a_query_embedding_of_another_width(monkeypatch, tmp_path):
    """A query embedded at a width the index's corpus was not (the encoder changed since the index was
    built) is refused in one line that says what the index expects, not ranked or failed in numpy."""
    import narbench.search_engine.index as index_module
    from narbench.data.store import write_graphs
    from narbench.search_engine.engine import search
    from narbench.search_engine.index_build import IndexConfig, build_index

    ds = _toy_dataset()
    index = build_index(IndexConfig(encoder="wl", progress=False), dataset=ds)
    target = tmp_path / "q.narg"
    write_graphs(target, [ds.graphs[0]], ds.vocab, {})
    width = index.arrays["embeddings"].shape[1]
    assert len(search(str(target), index=index, k=3)) == 3

    class Narrow(NonFiniteEncoder):
        BAD_CALL = -1  # every row finite, 4 wide

    index._cache.clear()
    monkeypatch.setattr(index_module, "_rebuild_encoder", lambda idx: Narrow(len(idx.vocab), 4, None))
    with pytest.raises(EmbeddingError, match=rf"encoder 'wl' returned query embeddings of shape \[1, 4\] for 1 query "
                                             rf"graphs; this index expects \[1, {width}\]"):
        search(str(target), index=index, k=3)


def test_query_embeddings_of_another_row_count_or_a_nan_name_the_query(monkeypatch, tmp_path):
    """The index checks the query rows itself (one per graph, the corpus' width) and names the query graphs when an
    embedding is not finite: the graphs stay in the search room rather than being handed to the evaluation's check."""
    import torch

    from narbench.search_engine.index_build import IndexConfig, build_index

    ds = _toy_dataset()
    index = build_index(IndexConfig(encoder="wl", progress=False), dataset=ds)
    width = index.arrays["embeddings"].shape[1]
    with pytest.raises(EmbeddingError, match=rf"of shape \[2, {width}\] for 1 query graphs; this index expects "
                                             rf"\[1, {width}\]"):
        index._query_rows(torch.zeros(2, width), [ds.graphs[0]])
    bad = torch.zeros(1, width)
    bad[0, 0] = float("nan")
    with pytest.raises(EmbeddingError, match=rf"for 1 of 1 query graphs.*\(query graphs: {ds.graphs[0].name!r}\)"):
        index._query_rows(bad, [ds.graphs[0]])
    assert index._query_rows(torch.ones(1, width), [ds.graphs[0]]).shape == (1, width)
