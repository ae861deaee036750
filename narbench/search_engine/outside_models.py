"""Outside models as an index reads them: validation sets' graphs mapped onto the corpus's vocabulary under its
canonical rules (`as_queries`), the fitting ones that graf-lda's `outside` scatter reads (`fitting_models`, given by
`index_build.fit_encoder`), and the sets an index's discriminant read (`scatter_sets`, read back by
`outside_fit.attach`). Below both: the index build and the out-of-family score import it, it imports neither."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def as_queries(graphs: Sequence[Any], vocab: Sequence[str], onto: Sequence[str], rules: str) -> list:
    """Outside models' graphs (ops in `vocab`) mapped onto the vocabulary `onto` under canonical `rules`, as an index
    reads a saved graph; name, family, source and meta kept."""
    from narbench.data.graph import ArchGraph
    from narbench.data.mapping import onto_vocabulary

    out = []
    for g in graphs:
        m = onto_vocabulary([vocab[i] for i in g.ops.tolist()], g.edges, onto, rules, g.coarse or None)
        out.append(ArchGraph(ops=m.ops, edges=m.edges, name=g.name, family=g.family, coarse=m.coarse,
                             source=g.source, meta=g.meta))
    return out


def fitting_models(ds, sets: Sequence[str], rules: str) -> tuple[list, list[tuple[int, ...]]]:
    """The models of the validation sets `sets` that some family of `ds` fits, each set's newest file `rules` reads,
    read as an index of those rules reads a saved graph, and each one's expected families as `ds.families` indexes
    (`graf-lda`'s `outside` scatter: `narbench.search_engine.index_build.fit_encoder`). Empty when `ds` has none in
    its vocabulary."""
    if ds.outside_sets is None or not sets:
        return [], []
    graphs, vocab, families = ds.outside_sets(tuple(sets), upto=rules)
    if not graphs or list(vocab) != list(ds.vocab):
        return [], []
    ids = [tuple(ds.families.index(f) for f in fams if f in ds.families) for fams in families]
    keep = [i for i, c in enumerate(ids) if c]
    return as_queries([graphs[i] for i in keep], vocab, ds.vocab, rules), [ids[i] for i in keep]


def scatter_sets(index) -> tuple[str, ...]:
    """The validation sets whose models the index's discriminant read (graf-lda's `outside`); () for none."""
    used = ((index.header.get("encoder") or {}).get("config") or {}).get("uses_outside") or {}
    return tuple(used.get("sets") or ())
