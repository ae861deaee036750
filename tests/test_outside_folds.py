"""The fold study of graf-lda's `outside` scatter (benchmarks/search/outside_folds.py): a fold's index never reads
the fold it is measured on, and `--read K` reads K folds, the same ones whichever weight."""

from __future__ import annotations

import pytest

from benchmarks.search.outside_folds import fold_sets, scatter_of


def test_a_folds_index_reads_k_other_folds_and_never_its_own():
    sets = tuple(f"s{i}" for i in range(10))
    folds = fold_sets(sets)
    assert folds[0] == ("s0", "s4", "s8") and sorted(s for f in folds for s in f) == sorted(sets)
    for f, held in enumerate(folds):
        everything = scatter_of(sets, folds, f, 3)
        assert set(everything) == set(sets) - set(held)  # the default: all the other folds
        one, two = scatter_of(sets, folds, f, 1), scatter_of(sets, folds, f, 2)
        assert set(one) == set(folds[(f + 1) % 4]) and set(one) < set(two) < set(everything)
        assert not set(two) & set(held)
        assert list(two) == sorted(two, key=sets.index)  # in the sets' order, so a rebuild reads them alike
    with pytest.raises(ValueError, match="reads 1 to 3 other folds, not 4"):
        scatter_of(sets, folds, 0, 4)
