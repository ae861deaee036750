"""The `novel` split of `real` (2.2 on): whole families held out of the corpus, so that its queries are
models whose family the corpus does not hold, the case where search should say "no family fits".

`unseen` holds out models, never families: every one of its queries has its family in the corpus.
`novel` holds out families (leave-k-families-out, `narbench.data.family_holdout`): in the order of
sha256("<seed>:<family>"), the first families until at least `MIN_FAMILIES` families and
`MIN_QUERIES` graphs are held out are the **test** families, the next ones by the same rule the
**validation** families; both are queries (`Split.test`, named by `Split.subsets` "validation" and
"test"), the corpus (`Split.train`) is every other graph. The validation families are what the
out-of-family score is fitted and chosen on (`narbench.search_engine.outside`), the test families
only what it is reported on (`benchmarks/search/novel.py`).

A `novel` query has no relevant corpus graph, so `narbench run --split novel` scores nothing: the
split is for out-of-family detection, not for retrieval metrics. Where real 2.3 gives a graph several
families (`ArchGraph.families`), a graph is held out with its primary family (`ArchGraph.family`).
"""

from __future__ import annotations

import numpy as np

from narbench.data.dataset import Split
from narbench.data.family_holdout import leave_families_out
from narbench.data.graph import ArchGraph

NAME = "novel"
#: the split holds out at least this many families on each side (validation, test) ...
MIN_FAMILIES = 50
#: ... and at least this many graphs
MIN_QUERIES = 500


def novel_families(labels: list[str], seed: int = 0, *, min_families: int = MIN_FAMILIES,
                   min_queries: int = MIN_QUERIES) -> tuple[list[str], list[str]]:
    """(validation families, test families) of a corpus whose graphs have family `labels`; disjoint."""
    test = leave_families_out(labels, seed=seed, min_families=min_families, min_queries=min_queries)
    validation = leave_families_out(labels, seed=seed, min_families=min_families, min_queries=min_queries,
                                    exclude=test)
    return validation, test


def novel_split(graphs: list[ArchGraph], seed: int = 0, *, min_families: int = MIN_FAMILIES,
                min_queries: int = MIN_QUERIES) -> Split:
    """The `novel` split of `graphs` (module docstring): the graphs of the held-out families are the queries,
    `subsets` "validation" and "test" their positions in `test`."""
    labels = [g.family for g in graphs]
    validation, test = novel_families(labels, seed, min_families=min_families, min_queries=min_queries)
    fam = np.asarray(labels, dtype=object)
    in_val, in_test = np.isin(fam, validation), np.isin(fam, test)
    idx = np.arange(len(graphs), dtype=np.int64)
    queries = idx[in_val | in_test]
    rule = (f"whole families held out (leave-k-families-out): families in the order of sha256(\"{seed}:<family>\"), "
            f"the first until at least {min_families} families and {min_queries} graphs are the test families "
            f"({len(test)}), the next by the same rule the validation families ({len(validation)}); their graphs "
            "are the queries, no graph of their families is in the corpus; validation chooses, test reports")
    return Split(train=idx[~(in_val | in_test)], test=queries, seed=seed,
                 test_size=round(float(len(queries)) / max(len(graphs), 1), 4), name=NAME, rule=rule,
                 subsets={"validation": np.flatnonzero(in_val[queries]).astype(np.int64),
                          "test": np.flatnonzero(in_test[queries]).astype(np.int64)})


def families_of(graphs: list[ArchGraph], split: Split, subset: str) -> list[str]:
    """The families of a `novel` split's "validation" or "test" queries, sorted."""
    return sorted({graphs[i].family for i in split.test[split.subsets[subset]].tolist()})
