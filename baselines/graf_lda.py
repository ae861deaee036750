"""`graf-lda`: a supervised floor -- `graf`'s features, then a linear discriminant fitted on the labels.

`graf` (training-free) weighs its GRAF-style blocks (log op-pair counts, degree shares, degrees
per op type) by hand. `graf-lda` takes exactly those features (`GrafEncoder.features`, the op-pair
vocabulary of the training graphs) and learns a linear map from the training graphs' labels, as
the run's protocol gives them (`labels.ce`: the family under protocol `family`, the coarse label
under `paper`): Fisher's linear discriminant analysis. With X the features of the n training
graphs, S_w their pooled within-class covariance and S_b the between-class covariance (class
means about the overall mean, weighted by class size), S_w is shrunk towards a multiple of the
identity, (1 - a) S_w + a tr(S_w) / d I (the form of scikit-learn's `shrunk_covariance`; here on
the pooled covariance), and the generalised eigenproblem S_b v = l S_w v is solved
(through the Cholesky factor of S_w and a thin SVD). A graph's embedding is (x - training mean) V, V the eigenvectors of the
`dims` largest eigenvalues (at most classes - 1); retrieval is by cosine as for every encoder. A
class with one training graph adds nothing to S_w and its mean to S_b.

The two settings, the shrinkage a and `dims`, are chosen per run on a validation split carved
from the training graphs (`narbench.baselines.selection.validation_split` on the protocol's
labels: 10% of the graphs of classes with at least two held out, stratified, seed 0): the
features' op-pair vocabulary and the discriminant are fitted on the pool alone, the held-out
graphs query the pool (cosine, the benchmark's tie-break), and the setting with the highest
NDCG@20 (relevance: the same label) wins; ties go to the earlier one in `GRID` (more shrinkage,
fewer dimensions first). The discriminant is then refitted with it on all training graphs. It
never sees a query or a query metric. The choice and every setting's validation NDCG@20 are in
the result file (`config.encoder_stats.selection`). Deterministic: no random number is drawn
beyond the split's fixed seed.
"""

from __future__ import annotations

import time
from typing import ClassVar

import numpy as np
import torch

from narbench.baselines import graf
from narbench.baselines.graf import GrafEncoder
from narbench.data.graph import ArchGraph
from narbench.train.encoder import Encoder, Labels
from narbench.train.trainer import Trainer

#: the shrinkages a and output dimensions tried on validation, in order of preference (ties keep the earlier)
SHRINKAGES: tuple[float, ...] = (0.3, 0.1, 0.01, 0.001, 0.0001)
DIMS: tuple[int, ...] = (32, 64, 128, 256)
GRID: tuple[tuple[float, int], ...] = tuple((a, k) for a in SHRINKAGES for k in DIMS)
#: the setting used when no validation split can be carved (no class with two training graphs)
DEFAULT = (0.01, 128)
SELECTION_METRIC = "ndcg@20"


def one_thread():
    """BLAS on one thread: the same sums in the same order whatever the machine (and no oversubscription)."""
    from threadpoolctl import threadpool_limits

    return threadpool_limits(limits=1, user_api="blas")


def lda(x: np.ndarray, y: np.ndarray, shrinkage: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(mean [d], projection [d, r], eigenvalues [r]) of the shrunk Fisher discriminant of `x` by
    labels `y`, r = min(classes - 1, d), the eigenvectors by decreasing eigenvalue."""
    with one_thread():
        return _lda(x, y, shrinkage)


def _lda(x: np.ndarray, y: np.ndarray, shrinkage: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    from scipy.linalg import cholesky, solve_triangular, svd

    x = np.asarray(x, dtype=np.float64)
    classes, inv, counts = np.unique(y, return_inverse=True, return_counts=True)
    inv = inv.reshape(-1)
    n, d = x.shape
    if len(classes) < 2:
        raise ValueError("graf-lda: the training graphs hold one class; a discriminant needs two")
    sums = np.zeros((len(classes), d))
    np.add.at(sums, inv, x)
    means = sums / counts[:, None]
    mean = x.mean(axis=0)
    xc = x - means[inv]
    sw = xc.T @ xc / n
    sw = (1.0 - shrinkage) * sw + shrinkage * (np.trace(sw) / d) * np.eye(d)
    if not np.trace(sw) > 0:  # every class a single graph or constant features: no within-class spread
        sw = sw + np.eye(d)
    # S_b = B^T B (B: the class means about the mean, rows weighted by sqrt(class share)); with
    # S_w = L L^T, the eigenvectors of S_b v = l S_w v are v = L^-T u, u the left singular vectors
    # of L^-1 B^T, l the squared singular values (rank <= classes - 1: a thin SVD, not a d x d eigh)
    b = (means - mean) * np.sqrt(counts / n)[:, None]
    chol = cholesky(sw, lower=True)
    u, s, _ = svd(solve_triangular(chol, b.T, lower=True), full_matrices=False)
    r = min(len(classes) - 1, d)
    return mean, solve_triangular(chol.T, u[:, :r], lower=False), s[:r] ** 2


class GrafLdaEncoder(Encoder):
    """Supervised floor: `graf`'s features projected by a shrunk LDA fitted on the protocol's training labels."""

    name = "graf-lda"
    trainable = True  # the discriminant is fitted on the training labels: the protocol applies
    device_bound = False  # NumPy on the host's CPU whatever the run's device: the same result beside a GPU's

    FITTED = ("pairs", "mean", "projection")  # saved weights and search indexes carry them

    def config(self) -> dict:
        return {**super().config(), "uses_labels": "the protocol's classifier label (labels.ce) of the training graphs",
                "features": "graf", "weights": dict(GrafEncoder.weights),
                "grid": {"shrinkage": list(SHRINKAGES), "dims": list(DIMS)}}

    def _features(self, graphs: list[ArchGraph], pairs: np.ndarray) -> np.ndarray:
        return graf.features(graphs, self.num_ops, np.asarray(pairs, dtype=np.int64), GrafEncoder.weights)

    def select(self, graphs: list[ArchGraph], labels: np.ndarray) -> tuple[tuple[float, int], dict]:
        """The (shrinkage, dims) with the best validation NDCG@20 on a split of the training graphs, and its record."""
        from narbench.baselines.graf import pair_ids
        from narbench.baselines.selection import VALIDATION_FRACTION, VALIDATION_SEED, validation_split
        from narbench.eval.metrics import score_rankings
        from narbench.eval.retrieval import tiebreak_keys, top_k_cosine

        try:
            pool, val = validation_split(labels)
        except ValueError as exc:
            return DEFAULT, {"picked": {"shrinkage": DEFAULT[0], "dims": DEFAULT[1]}, "skipped": str(exc)}
        t = time.perf_counter()
        pool_graphs = [graphs[i] for i in pool]
        x = self._features(pool_graphs + [graphs[i] for i in val], np.unique(pair_ids(pool_graphs, self.num_ops)[1]))
        keys = tiebreak_keys(pool_graphs)
        k = int(SELECTION_METRIC.split("@")[1])
        scores, fits = {}, {}
        for a in SHRINKAGES:
            fits[a] = lda(x[: len(pool)], labels[pool], a)
        for a, dims in GRID:
            mean, proj, _ = fits[a]
            with one_thread():
                emb = torch.from_numpy(((x - mean) @ proj[:, :dims]).astype(np.float32))
            ranked, _ = top_k_cosine(emb[len(pool):], emb[: len(pool)], k, tiebreak=keys)
            scores[f"shrinkage={a:g},dims={dims}"] = float(
                score_rankings(labels[val], labels[pool], ranked.numpy(), ks=(k,))[0][SELECTION_METRIC])
        best = GRID[0]
        for a, dims in GRID[1:]:  # strictly better only: ties keep the earlier setting
            if scores[f"shrinkage={a:g},dims={dims}"] > scores[f"shrinkage={best[0]:g},dims={best[1]}"]:
                best = (a, dims)
        record = {"picked": {"shrinkage": best[0], "dims": best[1]}, "metric": SELECTION_METRIC,
                  "validation_queries": int(len(val)), "pool": int(len(pool)), "fraction": VALIDATION_FRACTION,
                  "seed": VALIDATION_SEED, "scores": scores, "seconds": round(time.perf_counter() - t, 3)}
        return best, record

    def fit(self, trainer: Trainer, graphs: list[ArchGraph], labels: Labels) -> None:
        from narbench.baselines.graf import pair_ids

        y = np.asarray(labels.ce)
        (shrinkage, dims), record = self.select(graphs, y)
        pairs = np.unique(pair_ids(graphs, self.num_ops)[1])
        mean, proj, values = lda(self._features(graphs, pairs), y, shrinkage)
        proj = proj[:, :dims]
        self.pairs = torch.from_numpy(pairs.astype(np.int64))
        self.mean = torch.from_numpy(mean)
        self.projection = torch.from_numpy(np.ascontiguousarray(proj))
        self.stats = {"selection": record, "op_pairs": int(len(pairs)), "features": int(len(mean)),
                      "classes": int(len(np.unique(y))), "dims": int(proj.shape[1]),
                      "eigenvalues": [round(float(v), 6) for v in values[: proj.shape[1]]]}

    def embed(self, trainer: Trainer, graphs: list[ArchGraph]) -> torch.Tensor:
        if self.projection is None:
            raise RuntimeError("graf-lda: call fit() first (the discriminant is fitted on the training graphs)")
        x = self._features(graphs, self.fitted("pairs"))
        with one_thread():
            return torch.from_numpy(((x - self.fitted("mean")) @ self.fitted("projection")).astype(np.float32))
