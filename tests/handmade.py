"""Hand-made result files for the leaderboard and validation tests, written by narbench's own writer.

`write_result` writes `<run_id>.json` and its per-query sidecar whose means are the file's
metrics, on the content `tests.conftest.HAND_MADE_SHA256` that the autouse fixture
`hand_made_datasets` declares known.
"""

from __future__ import annotations

import numpy as np

from narbench.eval.metrics import KS, METRICS, PAPER_NDCG
from narbench.eval.result import RunResult
from tests.conftest import HAND_MADE_SHA256

ALL_METRICS = (*METRICS, *(f"map_capped@{k}" for k in KS))
#: training-free encoders: their result files record no training labels, as the runner writes them
FLOORS = ("random", "ophist", "wl")


def write_result(out, encoder, splitter, seed, per_query, *, dataset="nas", objective="ce+cl", device="cpu",
                 init_from=None, created="2026-01-01T00:00:00+00:00", profile="quick", tag="", sha=HAND_MADE_SHA256,
                 split="standard", protocol="family", version="1.0", variant="", subsets=None, parts=None):
    """A result file (+ sidecar) whose metrics are the means of `per_query`: one array for every
    metric, or a dict metric -> array (metrics it leaves out get the first array). The optional
    `ndcg_paper@k` are written only when the dict names them (as files written before them lack them).
    `subsets`: name -> query positions, recorded as a run on a split with subsets records them."""
    if isinstance(per_query, dict):
        first = np.asarray(next(iter(per_query.values())), dtype=np.float64)
        pq = {m: np.asarray(per_query.get(m, first), dtype=np.float64) for m in ALL_METRICS}
        pq.update({m: np.asarray(per_query[m], dtype=np.float64) for m in PAPER_NDCG if m in per_query})
    else:
        pq = {m: np.asarray(per_query, dtype=np.float64) for m in ALL_METRICS}
    means = {m: float(np.round(v, 6).mean()) for m, v in pq.items()}
    run = {"encoder": encoder, "splitter": splitter, "objective": objective, "seed": seed}
    if init_from:
        run["init_from"] = init_from
    res = RunResult(
        run_id=f"{dataset}-{split}-{encoder}{'+' + variant if variant else ''}-{splitter}-{profile}-{protocol}-s{seed}-{objective}{tag}",
        encoder=encoder, splitter=splitter,
        dataset={"name": dataset, "version": version, "sha256": sha, **({"parts": parts} if parts else {})},
        profile=profile, seed=seed,
        config={"run": run, "encoder": {"train": {"objective": objective}, **({"variant": variant} if variant else {})},
                "labels": None if encoder in FLOORS else {"cl": "family", "ce": "family"}},
        split=split, protocol=protocol,
        metrics={m: means[m] for m in METRICS}, metrics_extra={m: means[m] for m in pq if m not in METRICS},
        timings={"total": 1.0}, device=device, num_queries=len(pq["ndcg@20"]), num_corpus=100, num_train=50,
        created=created,
    )
    if subsets:
        from narbench.harness.runrecord import subset_metrics

        res.subsets = subset_metrics({k: np.asarray(v, dtype=np.int64) for k, v in subsets.items()},
                                     {m: np.round(v, 6) for m, v in pq.items()})
    return res.write(out, pq)
