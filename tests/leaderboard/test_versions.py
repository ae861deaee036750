"""The version-change section: each configuration run on the two newest `real` versions, its mean on each as the
seeds scored it, and the difference; the versions' own splits, never a paired test."""

from __future__ import annotations

import numpy as np
import pytest

from narbench.leaderboard.records import collect
from narbench.leaderboard.versions import cells, newest_two, versions_markdown
from tests.handmade import write_result

pytestmark = pytest.mark.usefixtures("unchecked_scores")  # real's pinned content, hand-made scores
N = 4


def _write(tmp_path, encoder, version, split, seed, value, splitter="none", **kw):
    from narbench.datasets.real import Real22Dataset, Real23Dataset, RealDataset

    sha = {"2.1": RealDataset, "2.2": Real22Dataset, "2.3": Real23Dataset}[version].expected_sha256
    cx = split == "crossimpl"
    pq = np.full(N, value)
    if cx:
        pq[:2] = value / 2  # the exact queries score half: the reimpl column must not mix them in
    write_result(tmp_path, encoder, splitter, seed, pq, dataset="real", version=version, sha=sha, split=split,
                 subsets={"reimpl": [2, 3], "exact": [0, 1]} if cx else None,
                 parts={"real": sha, "crossimpl": "c" * 64} if cx else None, tag=f"-v{version}", **kw)


def test_cells_old_and_new_with_the_difference(tmp_path):
    for seed in range(2):
        _write(tmp_path, "wl", "2.2", "unseen", seed, 0.70)
        _write(tmp_path, "wl", "2.3", "unseen", seed, 0.75 + 0.02 * seed)
        _write(tmp_path, "wl", "2.2", "crossimpl", seed, 0.6)
        _write(tmp_path, "wl", "2.3", "crossimpl", seed, 0.5)
        _write(tmp_path, "ours", "2.2", "unseen", seed, 0.6, splitter="motif")
        _write(tmp_path, "ours", "2.3", "unseen", seed, 0.55, splitter="motif")
        _write(tmp_path, "wl", "2.1", "unseen", seed, 0.1)  # an older version: not a column
        _write(tmp_path, "gcn", "2.3", "unseen", seed, 0.9)  # only on the newest: no row
        _write(tmp_path, "wl", "2.3", "unseen", seed, 0.2, profile="smoke")  # another profile: left out
    c = cells(collect([tmp_path]))
    assert newest_two(c) == ("2.2", "2.3")
    assert np.allclose(sorted(c["wl", "2.3", "unseen"]), [0.75, 0.77])
    assert np.allclose(c["wl", "2.3", "crossimpl/reimpl"], [0.5, 0.5])  # the subset's own queries
    text = versions_markdown(collect([tmp_path]))
    assert "## Changes from `real` 2.2 to 2.3" in text
    # sorted by 2.3's unseen: wl (0.76) before ours+motif (0.55); gcn has no 2.2 run
    assert text.index("| wl |") < text.index("| ours+motif |") and "| gcn |" not in text
    assert "| wl | 0.700 -> 0.760 ±0.014 (+0.060) | 0.600 -> 0.500 ±0.000 (-0.100) | – |" in text
    assert "| ours+motif | 0.600 -> 0.550 ±0.000 (-0.050) | – | – |" in text
    assert "Of 2 configurations, 0 rose on every split they were run on from 2.2 to 2.3, 1 fell on every one, " \
           "and 1 moved both ways." in text


def test_one_version_no_section(tmp_path):
    _write(tmp_path, "wl", "2.3", "unseen", 0, 0.7)
    assert versions_markdown(collect([tmp_path])) == ""
