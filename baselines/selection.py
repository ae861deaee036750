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

`fuse=N` (N > 1) fuses instead of choosing one: ensemble selection with replacement (Caruana et al.,
2004) over the candidates' validation embeddings, N steps, keeping the prefix best on validation
(`select_fusion`); the members' unit rows, scaled by sqrt(weight), side by side (`fuse`).
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


def validation_embeddings(cand: Candidate, trainer: Trainer, graphs: list[ArchGraph], labels: np.ndarray,
                          pool: np.ndarray, val: np.ndarray, num_ops: int, profile) -> torch.Tensor:
    """One candidate fitted on the pool, embedding the pool then the held-out graphs (float32, pool rows first)."""
    enc = cand.build(num_ops, int(labels.max()) + 1 if len(labels) else 1, profile)
    pool_graphs = [graphs[i] for i in pool]
    enc.fit(trainer, pool_graphs, Labels(labels[pool], labels[pool], int(labels.max()) + 1))
    return enc.embed(trainer, pool_graphs + [graphs[i] for i in val]).float()


def score_embeddings(emb: torch.Tensor, graphs: list[ArchGraph], labels: np.ndarray, pool: np.ndarray,
                     val: np.ndarray) -> dict[str, float]:
    """The validation metrics (`RECORDED`): the held-out rows of `emb` query its pool rows by cosine."""
    from narbench.eval.metrics import score_rankings
    from narbench.eval.retrieval import tiebreak_keys, top_k_cosine

    k = int(SELECTION_METRIC.split("@")[1])
    ranked, _ = top_k_cosine(emb[len(pool):], emb[: len(pool)], k, tiebreak=tiebreak_keys([graphs[i] for i in pool]))
    means, _ = score_rankings(labels[val], labels[pool], ranked.numpy(), ks=(k,))
    return {m: float(means[m]) for m in RECORDED}


def score_candidate(cand: Candidate, trainer: Trainer, graphs: list[ArchGraph], labels: np.ndarray,
                    pool: np.ndarray, val: np.ndarray, num_ops: int, profile,
                    keep: dict[str, torch.Tensor] | None = None) -> dict[str, float]:
    """The validation metrics (`RECORDED`) of one candidate: fitted on the pool, the held-out graphs query
    the pool. `keep`, when given, receives its validation embeddings under its label."""
    emb = validation_embeddings(cand, trainer, graphs, labels, pool, val, num_ops, profile)
    if keep is not None:
        keep[cand.label] = emb
    return score_embeddings(emb, graphs, labels, pool, val)


def fuse(embeddings: list[torch.Tensor], weights) -> torch.Tensor:
    """Unit-length rows of each member, scaled by the square root of its weight, side by side: the
    cosine of two fused rows is the weighted sum of the members' cosines over the sum of the weights
    (CombSUM of cosine scores, as one embedding that an index stores)."""
    parts = []
    for emb, w in zip(embeddings, weights):
        emb = emb.double()
        parts.append(float(w) ** 0.5 * emb / emb.norm(dim=1, keepdim=True).clamp_min(1e-12))
    return torch.cat(parts, dim=1).float()


def holdout_split(graphs: list[ArchGraph], labels: np.ndarray, holdout: str) -> tuple[np.ndarray, np.ndarray]:
    """(pool, validation) indices of `graphs` under `holdout` (`family` or `cross-source`)."""
    from narbench.eval.holdout import cross_source_split

    if holdout == "cross-source":
        return cross_source_split(np.asarray(labels), np.array([g.source for g in graphs]))
    return validation_split(np.asarray(labels))


def select_floor(trainer: Trainer, graphs: list[ArchGraph], labels: np.ndarray, num_ops: int, profile,
                 candidates: tuple[Candidate, ...] = CANDIDATES, holdout: str = "family",
                 embeddings: dict[str, torch.Tensor] | None = None) -> tuple[Candidate, dict]:
    """The best candidate on the validation split of `graphs` (by `SELECTION_METRIC`), and the record of the choice.

    `holdout`: `family` (`validation_split`, stratified by family) or `cross-source` (`cross_source_split`:
    for some families implemented by several sources, one source's graphs query the others').
    `embeddings`, when given, receives each candidate's validation embeddings (pool rows first)."""
    labels = np.asarray(labels)
    pool, val = holdout_split(graphs, labels, holdout)
    scores, seconds = {}, {}
    for cand in candidates:
        t = time.perf_counter()
        scores[cand.label] = score_candidate(cand, trainer, graphs, labels, pool, val, num_ops, profile,
                                             keep=embeddings)
        seconds[cand.label] = round(time.perf_counter() - t, 3)
    best = candidates[0]
    for cand in candidates[1:]:  # strictly better only: ties keep the earlier (simpler) candidate
        if scores[cand.label][SELECTION_METRIC] > scores[best.label][SELECTION_METRIC]:
            best = cand
    record = {"picked": best.label, "picked_encoder": best.encoder, "picked_params": dict(best.params),
              "holdout": holdout, "metric": SELECTION_METRIC, "validation_queries": int(len(val)), "pool": int(len(pool)),
              "fraction": VALIDATION_FRACTION, "seed": VALIDATION_SEED, "scores": scores, "seconds": seconds}
    return best, record


def select_fusion(graphs: list[ArchGraph], labels: np.ndarray, candidates: tuple[Candidate, ...],
                  embeddings: dict[str, torch.Tensor], steps: int, holdout: str = "family"
                  ) -> tuple[list[Candidate], tuple[int, ...], dict]:
    """Ensemble selection (Caruana et al., 2004) on the validation split: `steps` times, add to the
    fusion the candidate (repeats allowed: a weight is how often it was added) whose addition gives
    the best validation NDCG@20; ties keep the earlier candidate. `embeddings`: each candidate's
    validation embeddings (`select_floor(embeddings=...)`). The fusion kept is the prefix of those steps
    best on validation (so `steps` is a most). Returns (members, weights, record)."""
    labels = np.asarray(labels)
    pool, val = holdout_split(graphs, labels, holdout)
    t = time.perf_counter()
    counts = [0] * len(candidates)
    added, path = [], []
    for _ in range(steps):
        best, best_score = None, -1.0
        for i, cand in enumerate(candidates):
            trial = [c + (j == i) for j, c in enumerate(counts)]
            members = [j for j, c in enumerate(trial) if c]
            score = score_embeddings(fuse([embeddings[candidates[j].label] for j in members],
                                          [trial[j] for j in members]), graphs, labels, pool, val)[SELECTION_METRIC]
            if score > best_score:  # strictly better only: ties keep the earlier (simpler) candidate
                best, best_score = i, score
        counts[best] += 1
        added.append(best)
        path.append({"added": candidates[best].label, SELECTION_METRIC: round(best_score, 6)})
    scores = [p[SELECTION_METRIC] for p in path]
    size = scores.index(max(scores)) + 1  # the prefix of the path best on validation (the shortest of equals)
    counts = [added[:size].count(i) for i in range(len(candidates))]
    chosen = [i for i, c in enumerate(counts) if c]
    record = {"rule": "ensemble selection with replacement (Caruana et al., 2004)", "steps": steps, "kept": size,
              "picked": {candidates[i].label: counts[i] for i in chosen}, "path": path,
              "seconds": round(time.perf_counter() - t, 3)}
    return [candidates[i] for i in chosen], tuple(counts[i] for i in chosen), record


class BestFloorEncoder(Encoder):
    """The candidate floor with the best validation NDCG@20 on a split of the training graphs, or
    (`fuse` > 1) a weighted fusion of candidates chosen by ensemble selection on the same split.

    Uses the training graphs' family labels (`ArchGraph.family`) to choose among the candidates,
    and for nothing else; never sees the queries. See the module docstring.
    """

    name = "best-floor"
    trainable = False  # no weight is trained and no candidate sees a label; the choice uses the families
    candidates: ClassVar[tuple[Candidate, ...]] = CANDIDATES
    #: `holdout`: the validation split that chooses, `family` (stratified) or `cross-source` (one zoo's
    #: graphs of families several zoos implement query the others': what cross-implementation search asks);
    #: `fuse`: the steps of ensemble selection (`select_fusion`): how many candidates, repeats counted, the
    #: fusion adds one at a time on the validation split, keeping the best prefix (1: the best candidate alone)
    PARAMS: ClassVar[dict[str, object]] = {"holdout": "family", "fuse": 1}
    #: the chosen candidate's index (a list of them when fused, with their weights); each candidate's own
    #: fitted state is `chosen.*` (`chosen.<i>.*` when fused)
    FITTED = ("choice", "weights")
    MAX_FUSE: ClassVar[int] = 8

    def params_changed(self) -> None:
        from narbench.eval.holdout import HOLDOUT_RULES

        if self.holdout not in HOLDOUT_RULES:
            raise ValueError(f"encoder {self.name!r}: holdout must be one of {', '.join(HOLDOUT_RULES)}, "
                             f"got {self.holdout!r}")
        if isinstance(self.fuse, bool) or not isinstance(self.fuse, int) or not 1 <= self.fuse <= self.MAX_FUSE:
            raise ValueError(f"encoder {self.name!r}: fuse must be an integer from 1 to {self.MAX_FUSE} "
                             f"(how many of the best floors to fuse), got {self.fuse!r}")

    def config(self) -> dict:
        out = {**super().config(), "uses_labels": "the family of the training graphs, to choose the floor only",
               "candidates": [c.label for c in self.candidates],
               "validation": {"fraction": VALIDATION_FRACTION, "seed": VALIDATION_SEED, "metric": SELECTION_METRIC,
                              "holdout": self.holdout}}
        if self.fuse > 1:
            out["fusion"] = {"steps": self.fuse, "selection": "ensemble selection with replacement on the validation",
                             "rule": "unit-length embeddings, each scaled by sqrt(weight), concatenated"}
        return out

    def fit(self, trainer: Trainer, graphs: list[ArchGraph], labels: Labels) -> None:
        families = np.unique([g.family for g in graphs], return_inverse=True)[1].reshape(-1)
        embeddings: dict[str, torch.Tensor] | None = {} if self.fuse > 1 else None
        best, record = select_floor(trainer, graphs, families, self.num_ops, self.profile, self.candidates,
                                    holdout=self.holdout, embeddings=embeddings)
        if self.fuse == 1:
            self.choice = torch.tensor(self.candidates.index(best), dtype=torch.int64)
            self.chosen = best.build(self.num_ops, self.num_classes, self.profile)
            self.chosen.fit(trainer, graphs, labels)
            self.stats = {"selection": record, "chosen_config": self.chosen.config()}
            return
        members, weights, record["fusion"] = select_fusion(graphs, families, self.candidates, embeddings, self.fuse,
                                                           self.holdout)
        del embeddings
        self.choice = torch.tensor([self.candidates.index(c) for c in members], dtype=torch.int64)
        self.weights = torch.tensor(weights, dtype=torch.float64)
        self.chosen = torch.nn.ModuleList(c.build(self.num_ops, self.num_classes, self.profile) for c in members)
        for member in self.chosen:
            member.fit(trainer, graphs, labels)
        self.stats = {"selection": record, "chosen_config": [m.config() for m in self.chosen]}

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        if prefix + "choice" in state_dict:  # build the chosen floor(s), which then load their own fitted state
            choice = state_dict[prefix + "choice"]
            build = [self.candidates[int(i)].build(self.num_ops, self.num_classes, self.profile)
                     for i in choice.reshape(-1)]
            # a fusion saves its weights; a single choice none (some stores keep its 0-d index as 1-d)
            self.chosen = torch.nn.ModuleList(build) if prefix + "weights" in state_dict else build[0]
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def embed(self, trainer: Trainer, graphs: list[ArchGraph]) -> torch.Tensor:
        if getattr(self, "chosen", None) is None:
            raise RuntimeError("best-floor: call fit() first (it chooses the floor on the training graphs)")
        if isinstance(self.chosen, torch.nn.ModuleList):
            return fuse([m.embed(trainer, graphs) for m in self.chosen], self.fitted("weights"))
        return self.chosen.embed(trainer, graphs)
