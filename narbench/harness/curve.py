"""Learning curves: validation and test retrieval after every epoch of a run's last training stage.

`narbench run --curve` (`RunConfig.curve`) holds a validation split out of the training graphs
(`narbench.eval.holdout`: stratified by family, fixed seed), trains on the rest (the pool) and,
after each epoch of the encoder's graph-level stage (`Trainer.fit_graph_level`, every trained
encoder's last stage), embeds what it needs and scores two rankings the way a run does: the
held-out graphs querying the pool (`validation`, what may choose an epoch budget or a variant)
and the split's queries searching the corpus (`test`, reported, never used to choose). The
probe runs in eval mode and leaves the random generators as it found them, so the trained
weights are those of the same run without it; its last test point is the run's result.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from narbench.data.graph import ArchGraph
from narbench.eval.holdout import HOLDOUT_RULES, VALIDATION_FRACTION, VALIDATION_SEED, cross_source_split, validation_split
from narbench.eval.metrics import score_rankings
from narbench.eval.retrieval import tiebreak_keys, top_k_cosine

#: the metrics a curve records at each epoch (means over the queries)
CURVE_METRICS = ("ndcg@20", "mrr@20", "map_capped@20")


@dataclass(frozen=True)
class CurveSplit:
    """The training graphs of a curve run (`pool`) and the held-out validation queries (`val`), as dataset indices."""

    pool: np.ndarray
    val: np.ndarray
    rule: str = "family"

    def record(self) -> dict:
        out = {"validation_queries": int(len(self.val)), "pool": int(len(self.pool)),
               "fraction": VALIDATION_FRACTION, "seed": VALIDATION_SEED}
        if self.rule != "family":
            out["holdout"] = self.rule
        return out


def hold_out(train_idx: np.ndarray, family_ids: np.ndarray, sources: np.ndarray | None = None,
             rule: str = "family") -> CurveSplit:
    """Split a run's training graphs into the pool it trains on and the validation queries, by
    `rule` (`narbench.eval.holdout.HOLDOUT_RULES`; `cross-source` reads each graph's source)."""
    train_idx = np.asarray(train_idx)
    if rule == "family":
        pool, val = validation_split(family_ids[train_idx])
    elif rule == "cross-source":
        if sources is None:
            raise ValueError("the cross-source hold-out needs each graph's source")
        pool, val = cross_source_split(family_ids[train_idx], np.asarray(sources)[train_idx])
    else:
        raise ValueError(f"unknown hold-out rule {rule!r}; known: {', '.join(HOLDOUT_RULES)}")
    return CurveSplit(train_idx[pool], train_idx[val], rule)


def probe(embed: Callable[[list[ArchGraph]], object], graphs: Sequence[ArchGraph], family_ids: np.ndarray,
          split: CurveSplit, corpus_idx: np.ndarray, query_idx: np.ndarray, top_k: int) -> Callable[[int], dict]:
    """The per-epoch probe for `Trainer.epoch_eval`: embeds every graph it needs once per epoch
    (`embed(graphs)` -> [n, D]) and returns the validation and test metrics. What does not change
    between epochs (rows, labels, the corpus tie-break keys) is computed once, here."""
    need = np.unique(np.concatenate([split.pool, split.val, corpus_idx, query_idx]))
    where = {int(g): i for i, g in enumerate(need.tolist())}
    need_graphs = [graphs[i] for i in need]

    def rows(idx: np.ndarray) -> np.ndarray:
        return np.array([where[int(i)] for i in idx], dtype=np.int64)

    sides = [(name, rows(queries), rows(corpus), family_ids[queries], family_ids[corpus],
              tiebreak_keys([graphs[i] for i in corpus]))
             for name, queries, corpus in (("validation", split.val, split.pool), ("test", query_idx, corpus_idx))]

    def evaluate(epoch: int) -> dict:
        emb = embed(need_graphs).float().cpu()
        out = {}
        for name, q_rows, c_rows, q_fam, c_fam, tiebreak in sides:
            ranked, _ = top_k_cosine(emb[q_rows], emb[c_rows], top_k, tiebreak=tiebreak)
            means, _ = score_rankings(q_fam, c_fam, ranked.numpy())
            out[name] = {m: round(float(means[m]), 6) for m in CURVE_METRICS}
        return out

    return evaluate
