"""`benchmarks.search.pooled`: validation sets pooled in one index, and the matched operating point."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.search import pooled


def test_matched_flags_the_most_none_within_the_fitting_budget():
    fit = [0.9, 0.8, 0.7, 0.1]
    none = [0.95, 0.85, 0.75, 0.72, 0.2]
    assert pooled.matched(fit, none, 0) == (1, 0)  # above 0.9: one none, no fitting model
    assert pooled.matched(fit, none, 1) == (2, 1)  # above 0.8
    assert pooled.matched(fit, none, 2) == (4, 2)  # above 0.7: 0.75 and 0.72 too
    assert pooled.matched(fit, none, 4) == (5, 4)
    assert pooled.matched([0.5, 0.5, 0.1], [0.6, 0.55], 1) == (2, 0)  # a tie at the budget: neither tied one
    with pytest.raises(ValueError, match="j must be"):
        pooled.matched(fit, none, -1)


def test_pool_counts_every_model_of_the_sets_and_reads_their_newest_file(capsys):
    from narbench.datasets.wild import read_graphs, readable
    from narbench.search_engine.index_file import load_index

    index = load_index(None, None)
    p = pooled.pool(index, ["wildval18", "wildval14"])
    files = [readable(n, index.canonical_version, index.vocab)[0] for n in ("wildval18", "wildval14")]
    sizes = [len(read_graphs(canonical=c, name=n).graphs) for c, n in zip(files, ("wildval18", "wildval14"))]
    assert len(p.fits) == sum(sizes) and [s[1] for s in p.sets] == files
    assert sum(s[2] for s in p.sets) == int(p.top1[p.fits].sum()) and sum(s[3] for s in p.sets) == int(p.fits.sum())
    assert np.all((p.p10 >= 0) & (p.p10 <= 1))
    assert pooled.main(["--sets", "wildval18", "--matched", "0"]) == 0
    out = capsys.readouterr().out
    assert "1 sets, top-1" in out and "wildval18@" in out and "at most 0 fitting flagged" in out
