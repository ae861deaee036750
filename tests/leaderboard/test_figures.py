"""Figures (`narbench.leaderboard.figures`): a chart per table block, t-SNE by family, reproducible bytes."""

from __future__ import annotations

import numpy as np
import pytest

from narbench import leaderboard as lb
from narbench.leaderboard.figures import DIGEST_KEY, drawn_from
from narbench.eval.result import write_embeddings
from tests.handmade import write_result


def test_one_chart_per_table_block_named_and_stamped(results, tmp_path):
    from narbench.leaderboard.figures import chart_order

    tables = lb.build_tables(lb.collect([results]))
    block = tables[0].blocks[0]
    assert [r.label for r in block.rows] == ["random (floor)", "gcn", "gat", "ours+motif"]  # the table: paper order
    assert [r.label for r in chart_order(block.rows)] == ["gat", "ours+motif", "gcn", "random (floor)"]  # by score
    paths = lb.plot_tables(tables, tmp_path / "plots")
    assert [p.name for p in paths] == [f"table{n}-nas-standard-quick-cpu-family.png" for n in (1, 2)]  # T3: one row
    assert all(len(drawn_from(p)) == 64 for p in paths)
    first = paths[0].read_bytes()
    paths[0].touch()
    lb.plot_tables(tables, tmp_path / "plots")  # same numbers: the file is kept as it is
    assert paths[0].read_bytes() == first
    paths[0].write_bytes(b"not a png")
    lb.plot_tables(tables, tmp_path / "plots")  # damaged or foreign: redrawn, identically
    assert paths[0].read_bytes() == first


def _embedding_results(out, families: int, seeds=(0,)):
    """Result files of gcn / ours+motif that saved query embeddings: `families` families, some large."""
    rng = np.random.default_rng(0)
    fam = np.array([f"f{i:02d}" for i in range(families) for _ in range(max(2, 12 - i))])
    for enc, spl in (("ours", "motif"), ("gcn", "none")):
        for s in seeds:
            path = write_result(out, enc, spl, s, np.full(len(fam), 0.5))
            centres = rng.normal(0, 3, (families, 8))
            emb = centres[[int(f[1:]) for f in fam]] + rng.normal(0, 0.3, (len(fam), 8))
            write_embeddings(path.with_name(path.name.replace(".json", ".embeddings.npz")), emb, list(fam), ["c"] * len(fam))
    return out


def test_tsne_panels_use_the_table_labels_and_the_lowest_seed_with_embeddings(tmp_path):
    _embedding_results(tmp_path / "res", families=3, seeds=(1, 2))
    write_result(tmp_path / "res", "gat", "none", 0, np.full(10, 0.5))  # no embeddings: no panel
    panels = lb.tsne_panels(lb.collect([tmp_path / "res"]))
    ((setting, items),) = panels.items()
    assert setting == ("nas", "standard", "quick", "cpu", "family")
    assert [(label, seed) for label, seed, _ in items] == [("gcn", 1), ("ours+motif", 1)]


@pytest.mark.slow
def test_tsne_is_coloured_by_family_and_byte_reproducible(tmp_path, monkeypatch):
    out = _embedding_results(tmp_path / "res", families=14)
    recs = lb.collect([out])
    (a,) = lb.plot_tsne(recs, tmp_path / "a")
    (b,) = lb.plot_tsne(recs, tmp_path / "b")
    assert a.read_bytes() == b.read_bytes() and a.name == "tsne-nas-standard-quick-cpu-family.png"
    from PIL import Image

    with Image.open(a) as im:
        assert set(im.info) >= {DIGEST_KEY} and "Software" not in im.info
    calls = []
    monkeypatch.setattr(lb.figures, "_tsne", lambda emb: calls.append(len(emb)) or np.zeros((len(emb), 2)))
    lb.plot_tsne(recs, tmp_path / "a")
    assert calls == [] and a.read_bytes() == b.read_bytes()  # unchanged inputs: not recomputed, not rewritten
    lb.plot_tsne(recs, tmp_path / "a", redraw=True)
    assert len(calls) == 2


def test_tsne_colours_the_largest_families_and_says_so(tmp_path, monkeypatch):
    out = _embedding_results(tmp_path / "res", families=14)
    titles, colours = [], []
    monkeypatch.setattr(lb.figures, "_tsne", lambda emb: np.zeros((len(emb), 2)))
    import matplotlib.figure

    real_suptitle = matplotlib.figure.Figure.suptitle

    def suptitle(self, text, **kw):
        titles.append(text)
        titles.extend(ax.get_title() for ax in self.axes)
        colours.extend(ax.get_legend_handles_labels()[1] for ax in self.axes)
        return real_suptitle(self, text, **kw)

    monkeypatch.setattr(matplotlib.figure.Figure, "suptitle", suptitle)
    lb.plot_tsne(lb.collect([out]), tmp_path / "plots")
    assert "coloured by family" in titles[0] and "the 10 largest of the 14 families" in titles[0]
    assert titles[1:] == ["gcn, seed 0", "ours+motif, seed 0"]  # the tables' labels, and the seed
    assert colours[0][0] == "other (4 families)" and colours[0][1:] == [f"f{i:02d}" for i in range(10)]


def test_runs_save_embeddings_that_the_tsne_maps(toy_dataset, tmp_path):
    from narbench.harness.runner import RunConfig, run
    from narbench.eval.validation import KnownDataset

    plain = run(RunConfig(encoder="gcn", profile="smoke", out=str(tmp_path / "plain"), progress=False), dataset=toy_dataset)
    assert not list((tmp_path / "plain").glob("*.npz"))
    assert "save_embeddings" not in plain.result.config["run"]
    out = tmp_path / "res"
    for enc in ("gcn", "gat"):
        ev = run(RunConfig(encoder=enc, profile="smoke", out=str(out), progress=False, save_embeddings=True),
                 dataset=toy_dataset)
        with np.load(out / f"{ev.result.run_id}.embeddings.npz") as z:
            assert z["embeddings"].dtype == np.float16
            assert z["embeddings"].shape[0] == ev.result.num_queries == len(z["family"]) == len(z["coarse"])
            assert set(z["coarse"]) <= {"cnn", "attention", "other"}
    toy = [KnownDataset("toy", "0", None)]  # the in-memory toy dataset: declared, not registered
    paths = lb.plot_tsne(lb.collect([out], datasets=toy), tmp_path / "plots")
    assert [p.name for p in paths] == ["tsne-toy-standard-smoke-cpu-family.png"] and paths[0].stat().st_size > 1000


def test_a_subset_split_is_drawn_to_a_file_in_the_plots_folder(tmp_path):
    from narbench.leaderboard.subsets import with_subsets
    from tests.leaderboard.test_headline import _three_settings

    _three_settings(tmp_path / "res")
    tables = lb.build_tables(with_subsets(lb.collect([tmp_path / "res"])))
    paths = lb.plot_tables(tables, tmp_path / "plots")
    assert all(p.parent == tmp_path / "plots" and p.is_file() for p in paths)
    assert any("crossimpl~reimpl" in p.name for p in paths)
