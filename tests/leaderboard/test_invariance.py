"""The implementation-invariance section: its cells are the seeds' metrics of the right runs, and its
sentences the differences of those cells."""

from __future__ import annotations

import numpy as np
import pytest

from narbench.leaderboard.invariance import cells, invariance_markdown
from narbench.leaderboard.records import collect
from tests.handmade import write_result

pytestmark = pytest.mark.usefixtures("unchecked_scores")  # real's pinned content, hand-made scores
N = 6
#: crossimpl 2.2's subsets in a run: 2.1.1's queries (`v2.1.1`), and those isomorphic to no corpus graph
SUBSETS = {"v2.1.1": [0, 1, 2], "reimpl": [2, 3, 4, 5], "exact": [0, 1]}


def _write(tmp_path, encoder, version, split, seed, value, **kw):
    pq = np.full(N, value)
    pq[:3] = value / 2  # the 101-queries subset scores half: a cell that mixed subsets would show it
    from narbench.datasets.real import Real22Dataset, RealDataset

    sha = {"2.1": RealDataset.expected_sha256, "2.2": Real22Dataset.expected_sha256}[version]  # validation wants the pins
    cx = split == "crossimpl" and version == "2.2"
    write_result(tmp_path, encoder, "none", seed, pq, dataset="real", version=version, sha=sha, split=split,
                 subsets=SUBSETS if cx else None, parts={"real": sha, "crossimpl": "c" * 64} if cx else None,
                 tag=f"-v{version}", **kw)


def test_cells_and_sentences(tmp_path):
    for seed in range(3):
        _write(tmp_path, "wl", "2.1", "crossimpl", seed, 0.8)
        _write(tmp_path, "wl", "2.2", "crossimpl", seed, 0.9)
        _write(tmp_path, "gin", "2.2", "unseen", seed, 0.8 + 0.01 * seed)
        _write(tmp_path, "invariant", "2.2", "unseen", seed, 0.7 + 0.01 * seed)
        _write(tmp_path, "invariant", "2.2", "unseen", seed, 0.7, profile="smoke")  # another profile: left out
    _write(tmp_path, "gin", "2.2", "standard", 0, 0.5, protocol="paper")  # another protocol: left out
    c = cells(collect([tmp_path]))
    assert sorted(c) == sorted([("wl", "2.1", "crossimpl"), ("wl", "2.2", "crossimpl"), ("wl", "2.2", "crossimpl/v2.1.1"),
                                ("wl", "2.2", "crossimpl/reimpl"), ("gin", "2.2", "unseen"),
                                ("invariant", "2.2", "unseen")])
    assert np.allclose(c["wl", "2.2", "crossimpl/v2.1.1"], [0.45] * 3)  # the subset's own queries
    assert np.allclose(c["wl", "2.1", "crossimpl"], [0.6] * 3)  # 2.1's crossimpl is the 101 itself
    text = invariance_markdown(collect([tmp_path]))
    assert "| wl | 2.1 | 0.600±0.000 (3) | – | – | – | – |" in text
    assert "**Rules alone (the 101 queries)**: wl on 2.1 0.600 -> wl on 2.2 0.450 (-0.150)." in text
    # same queries of one version: the paired p of the tables (every query lower by 0.075: significant)
    assert "**The rewrites alone, real 2.2 unseen**: gin 0.607 -> invariant 0.532 (-0.075, p < 0.001)." in text
    assert "Against gps" not in text  # no gps run: no sentence
    assert "Training alone" not in text  # no invariant run on 2.1: no sentence rather than a guess


def test_no_real_results_no_section(tmp_path):
    write_result(tmp_path, "wl", "none", 0, np.full(N, 0.5))  # nas
    assert invariance_markdown(collect([tmp_path])) == ""


def test_the_fused_floor_has_rows_of_its_own_and_other_variants_are_left_out(tmp_path):
    for seed in range(2):
        _write(tmp_path, "wl", "2.2", "crossimpl", seed, 0.8)
        _write(tmp_path, "best-floor", "2.2", "crossimpl", seed, 0.9, variant="fuse=8")
        _write(tmp_path, "best-floor", "2.2", "crossimpl", seed, 0.7, variant="holdout=cross-source,fuse=8")
        _write(tmp_path, "best-floor", "2.2", "crossimpl", seed, 0.5, variant="fuse=2")  # not a row: left out
    c = cells(collect([tmp_path]))
    assert {k[0] for k in c} == {"wl", "best-floor (fuse=8)", "best-floor (holdout=cross-source,fuse=8)"}
    text = invariance_markdown(collect([tmp_path]))
    # per query 0.9, the first three halved: the 101 (0-2) 0.45, reimpl (2-5) 0.7875, all 0.675
    assert "| best-floor (fuse=8) | 2.2 | 0.450±0.000 (2) | 0.787±0.000 (2) | 0.675±0.000 (2) | – | – |" in text
    assert "**Floors fused (fuse=8), real 2.2 crossimpl**: wl 0.600 -> best-floor (fuse=8) 0.675 (+0.075, p " in text
    assert "| best-floor (holdout=cross-source,fuse=8) | 2.2 | 0.350±0.000 (2) |" in text
    assert "fuse=2" not in text


def test_graf_lda_across_sources_faces_each_reference_with_a_paired_p(tmp_path):
    """graf-lda chosen on the cross-source split is a row, with one sentence per split against the
    rows it must beat; a comparison across versions (other queries) gets no p."""
    from narbench.leaderboard.invariance import paired_p, seed_runs

    for seed in range(2):
        _write(tmp_path, "wl", "2.2", "unseen", seed, 0.6)
        _write(tmp_path, "graf-lda", "2.2", "unseen", seed, 0.62 + 0.01 * seed)
        _write(tmp_path, "graf-lda", "2.2", "unseen", seed, 0.8, variant="holdout=cross-source")
        _write(tmp_path, "graf-lda", "2.2", "unseen", seed, 0.8, variant="holdout=cross-source,sources=nuisance")
        _write(tmp_path, "wl", "2.1", "unseen", seed, 0.5)
    records = collect([tmp_path])
    text = invariance_markdown(records)
    assert "| graf-lda (holdout=cross-source) | 2.2 | – | – | – | 0.600±0.000 (2) | – |" in text
    line = next(t for t in text.splitlines() if t.startswith("- **graf-lda validated across sources"))
    assert "real 2.2 unseen**: 0.600; against graf-lda 0.469 (+0.131, p 0.0" in line  # seeds differ: p from both levels
    assert "wl 0.450 (+0.150, p < 0.001)" in line
    assert "graf-lda (holdout=cross-source,sources=nuisance) 0.600 (+0.000, p 1.000)" in line
    assert "gps" not in line  # no gps run: left out of the sentence
    runs = seed_runs(records)
    assert paired_p(runs, ("wl", "2.1", "unseen"), ("wl", "2.2", "unseen")) is None


def test_graf_lda_on_wl_features_is_a_row_facing_graf_lda_and_both_floors(tmp_path):
    for seed in range(2):
        _write(tmp_path, "wl", "2.2", "standard", seed, 0.6)
        _write(tmp_path, "wl-binary", "2.2", "standard", seed, 0.7)
        _write(tmp_path, "graf-lda", "2.2", "standard", seed, 0.8, variant="holdout=cross-source")
        _write(tmp_path, "graf-lda", "2.2", "standard", seed, 0.9, variant="holdout=cross-source,wl_rounds=3")
        _write(tmp_path, "graf-lda", "2.2", "standard", seed, 0.5, variant="holdout=cross-source,wl_rounds=2")  # no row
    text = invariance_markdown(collect([tmp_path]))
    assert "| wl-binary | 2.2 | – | – | – | – |" in text and "wl_rounds=2" not in text
    line = next(t for t in text.splitlines() if t.startswith("- **graf-lda on graf's and WL's features"))
    assert "real 2.2 standard**:" in line and "against graf-lda (holdout=cross-source) " in line
    assert ", wl " in line and "wl-binary " in line and "gps" not in line


def test_graf_lda_on_wl_features_has_its_ablation_on_the_101_queries(tmp_path):
    row = "graf-lda (holdout=cross-source,wl_rounds=3)"
    for seed in range(2):
        _write(tmp_path, "wl", "2.1", "crossimpl", seed, 0.8)
        _write(tmp_path, "graf-lda", "2.1", "crossimpl", seed, 0.7, variant="holdout=cross-source,wl_rounds=3")
        _write(tmp_path, "graf-lda", "2.2", "crossimpl", seed, 0.9, variant="holdout=cross-source,wl_rounds=3")
    text = invariance_markdown(collect([tmp_path]))
    alone = next(t for t in text.splitlines() if t.startswith(f"- **`{row}` alone, on 2.1's rules"))
    assert "wl 0.600 -> " in alone and ", p " in alone  # both on 2.1's queries: paired
    both = next(t for t in text.splitlines() if t.startswith(f"- **2.2's rules and `{row}`"))
    assert "wl on 2.1 0.600 -> " in both and ", p " not in both  # across versions: other queries, no p
