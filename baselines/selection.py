"""`best-floor`: the training-free floor that scores best on a validation split of the training graphs.

A floor is only a floor if it is the strongest simple method, and the strongest one differs
between datasets (op counts can suffice on one, wiring matters on another). `best-floor` picks,
per run, among the candidate floors (`CANDIDATES`: `ophist`, `ophist-tfidf`, `graphstats`, `graf`
and WL label counts, presence and tf-idf with 1 to 4 rounds) the one with the highest NDCG@20 on
a validation split carved from the training graphs, then fits it on all training graphs and
embeds the corpus and the queries with it.

The validation split (`validation_split`): the training graphs' families with at least two
graphs are split stratified by family (scikit-learn `train_test_split`, `VALIDATION_FRACTION`
held out, `VALIDATION_SEED`), the rule of the datasets' own standard split; families with one
graph stay in the pool, as does any held-out graph whose family has no graph left in the pool.
Each candidate is fitted on the pool alone (the idf, the standardisation), both sides are
embedded, the held-out graphs query the pool (cosine, the benchmark's tie-break), and
`score_rankings` gives the same metrics as a run. Ties go to the earlier candidate in
`CANDIDATES` (the simpler one). Everything is seeded: the same training graphs give the same pick.

Labels: the selection uses the family labels of the training graphs (`ArchGraph.family`, the
label retrieval is judged on) to score the candidates, and for nothing else: no candidate sees a
label, no weight is trained on one. It reads the family from the graphs, not the protocol's
`labels`, so that its result is the same under every protocol (the `paper` protocol hands
encoders the coarse label): like the other floors it is `trainable = False`, its result records
no training labels and holds under every protocol, and its config says what it used
(`config.encoder.uses_labels`). It never sees the queries: `fit` gets the training graphs only,
and `embed` embeds with the floor chosen there. The choice, and every candidate's validation
scores, are in the result file (`config.encoder_stats.selection`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import torch

from narbench.data.graph import ArchGraph
from narbench.eval.holdout import VALIDATION_FRACTION, VALIDATION_SEED, validation_split  # noqa: F401 (graf, graf-lda)
from narbench.train.encoder import Encoder, Labels
from narbench.train.trainer import Trainer

#: the metric that picks, and the ones recorded beside it
SELECTION_METRIC = "ndcg@20"
RECORDED = ("ndcg@20", "mrr@20", "map_capped@20")


@dataclass(frozen=True)
class Candidate:
    """A floor: an encoder class (by module path and class name) and its parameters."""

    label: str
    encoder: str  # "module:Class"
    params: dict[str, Any] = field(default_factory=dict)

    def build(self, num_ops: int, num_classes: int, profile) -> Encoder:
        import importlib

        module, _, cls = self.encoder.partition(":")
        enc = getattr(importlib.import_module(module), cls)(num_ops, num_classes, profile)
        if self.params:
            enc.set_params(dict(self.params))
        return enc


def _wl(mode: str, rounds: int) -> Candidate:
    cls = {"count": "WLCountEncoder", "binary": "WLBinaryEncoder", "tfidf": "WLTfidfEncoder"}[mode]
    return Candidate(f"wl-{mode}(rounds={rounds})", f"narbench.baselines.floors:{cls}", {"rounds": rounds})


#: the candidates, simplest first (ties go to the earlier one); `wl-count(rounds=3)` is `wl`
CANDIDATES: tuple[Candidate, ...] = (
    Candidate("ophist", "narbench.baselines.floors:OpHistogramEncoder"),
    Candidate("ophist-tfidf", "narbench.baselines.floors:OpHistogramTfidfEncoder"),
    Candidate("graphstats", "narbench.baselines.graphstats:GraphStatsEncoder"),
    Candidate("graf", "narbench.baselines.graf:GrafEncoder"),
    *(_wl(mode, r) for mode in ("count", "binary", "tfidf") for r in (1, 2, 3, 4)),
)


def score_candidate(cand: Candidate, trainer: Trainer, graphs: list[ArchGraph], labels: np.ndarray,
                    pool: np.ndarray, val: np.ndarray, num_ops: int, profile) -> dict[str, float]:
    """The validation metrics (`RECORDED`) of one candidate: fitted on the pool, the held-out graphs query the pool."""
    from narbench.eval.metrics import score_rankings
    from narbench.eval.retrieval import tiebreak_keys, top_k_cosine

    enc = cand.build(num_ops, int(labels.max()) + 1 if len(labels) else 1, profile)
    pool_graphs = [graphs[i] for i in pool]
    enc.fit(trainer, pool_graphs, Labels(labels[pool], labels[pool], int(labels.max()) + 1))
    emb = enc.embed(trainer, pool_graphs + [graphs[i] for i in val]).float()
    k = int(SELECTION_METRIC.split("@")[1])
    ranked, _ = top_k_cosine(emb[len(pool):], emb[: len(pool)], k, tiebreak=tiebreak_keys(pool_graphs))
    means, _ = score_rankings(labels[val], labels[pool], ranked.numpy(), ks=(k,))
    return {m: float(means[m]) for m in RECORDED}


def select_floor(trainer: Trainer, graphs: list[ArchGraph], labels: np.ndarray, num_ops: int, profile,
                 candidates: tuple[Candidate, ...] = CANDIDATES, holdout: str = "family") -> tuple[Candidate, dict]:
    """The best candidate on the validation split of `graphs` (by `SELECTION_METRIC`), and the record of the choice.

    `holdout`: `family` (`validation_split`, stratified by family) or `cross-source` (`cross_source_split`:
    for some families implemented by several sources, one source's graphs query the others')."""
    from narbench.eval.holdout import cross_source_split

    labels = np.asarray(labels)
    if holdout == "cross-source":
        pool, val = cross_source_split(labels, np.array([g.source for g in graphs]))
    else:
        pool, val = validation_split(labels)
    scores, seconds = {}, {}
    for cand in candidates:
        t = time.perf_counter()
        scores[cand.label] = score_candidate(cand, trainer, graphs, labels, pool, val, num_ops, profile)
        seconds[cand.label] = round(time.perf_counter() - t, 3)
    best = candidates[0]
    for cand in candidates[1:]:  # strictly better only: ties keep the earlier (simpler) candidate
        if scores[cand.label][SELECTION_METRIC] > scores[best.label][SELECTION_METRIC]:
            best = cand
    record = {"picked": best.label, "picked_encoder": best.encoder, "picked_params": dict(best.params),
              "holdout": holdout, "metric": SELECTION_METRIC, "validation_queries": int(len(val)), "pool": int(len(pool)),
              "fraction": VALIDATION_FRACTION, "seed": VALIDATION_SEED, "scores": scores, "seconds": seconds}
    return best, record


class BestFloorEncoder(Encoder):
    """The candidate floor with the best validation NDCG@20 on a split of the training graphs.

    Uses the training graphs' family labels (`ArchGraph.family`) to choose among the candidates,
    and for nothing else; never sees the queries. See the module docstring.
    """

    name = "best-floor"
    trainable = False  # no weight is trained and no candidate sees a label; the choice uses the families
    candidates: ClassVar[tuple[Candidate, ...]] = CANDIDATES
    #: `holdout`: the validation split that chooses, `family` (stratified) or `cross-source` (one zoo's
    #: graphs of families several zoos implement query the others': what cross-implementation search asks)
    PARAMS: ClassVar[dict[str, object]] = {"holdout": "family"}
    FITTED = ("choice",)  # the chosen candidate's index; the candidate's own fitted state is `chosen.*`

    def params_changed(self) -> None:
        from narbench.eval.holdout import HOLDOUT_RULES

        if self.holdout not in HOLDOUT_RULES:
            raise ValueError(f"encoder {self.name!r}: holdout must be one of {', '.join(HOLDOUT_RULES)}, "
                             f"got {self.holdout!r}")

    def config(self) -> dict:
        return {**super().config(), "uses_labels": "the family of the training graphs, to choose the floor only",
                "candidates": [c.label for c in self.candidates],
                "validation": {"fraction": VALIDATION_FRACTION, "seed": VALIDATION_SEED, "metric": SELECTION_METRIC,
                               "holdout": self.holdout}}

    def fit(self, trainer: Trainer, graphs: list[ArchGraph], labels: Labels) -> None:
        families = np.unique([g.family for g in graphs], return_inverse=True)[1].reshape(-1)
        best, record = select_floor(trainer, graphs, families, self.num_ops, self.profile, self.candidates,
                                    holdout=self.holdout)
        self.choice = torch.tensor(self.candidates.index(best), dtype=torch.int64)
        self.chosen = best.build(self.num_ops, self.num_classes, self.profile)
        self.chosen.fit(trainer, graphs, labels)
        self.stats = {"selection": record, "chosen_config": self.chosen.config()}

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        if prefix + "choice" in state_dict:  # build the chosen floor, which then loads its own fitted state
            self.chosen = self.candidates[int(state_dict[prefix + "choice"])].build(self.num_ops, self.num_classes,
                                                                                   self.profile)
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def embed(self, trainer: Trainer, graphs: list[ArchGraph]) -> torch.Tensor:
        if getattr(self, "chosen", None) is None:
            raise RuntimeError("best-floor: call fit() first (it chooses the floor on the training graphs)")
        return self.chosen.embed(trainer, graphs)
