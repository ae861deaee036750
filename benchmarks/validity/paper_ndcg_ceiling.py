"""What a perfect ranking scores under the authors' NDCG convention, per dataset and split.

The authors' evaluator (docs/protocol.md, "The paper's convention") divides DCG@k by the ideal DCG
of *all* |R| relevant items, not cut at k, so a query with |R| > k cannot reach 1. The ceiling
depends only on |R| (the corpus items of the query's family): the mean over queries of
IDCG(min(k, |R|)) / IDCG(|R|) (`narbench.eval.metrics.uncut_ideal_ratio`). Prints one line per dataset
and split, and the ceiling for a class of 3,000 (the paper's NAS data: 30,000 networks, 10 classes).

    python -m benchmarks.validity.paper_ndcg_ceiling
"""

from __future__ import annotations

import numpy as np

from narbench.data.dataset import load_dataset
from narbench.eval.metrics import KS, uncut_ideal_ratio


def main() -> None:
    for name in ("nas", "real"):
        ds = load_dataset(name)
        family = ds.family_ids()
        for split_name in ds.splits:
            split = ds.get_split(split_name)
            counts = np.bincount(family[np.asarray(split.train)], minlength=len(ds.families))
            n_rel = counts[family[np.asarray(split.test)]]
            n_rel = n_rel[n_rel > 0]  # a query with nothing to find is not scored
            ceiling = " ".join(f"ndcg_paper@{k}={uncut_ideal_ratio(n_rel, k).mean():.3f}" for k in KS)
            print(f"{name} {ds.version} {split_name}: queries={len(n_rel)} median_R={int(np.median(n_rel))} "
                  f"mean_R={n_rel.mean():.0f} {ceiling}")
    print("a class of 3,000 relevant items: "
          + " ".join(f"ndcg_paper@{k}={uncut_ideal_ratio(np.array([3000]), k)[0]:.3f}" for k in KS))


if __name__ == "__main__":
    main()
